"""The runtime's ports: every interface it needs from the outside, in one place.

The runtime (loop, scheduler, session) talks to the rest of the world only
through the types here; the packages around it plug in behind them, and
:func:`cortex_kernel.agent.build_session` wires them together.

Model
    :class:`Model` streams protocol text as a :class:`Completion`.
    ``cortex_kernel.llm`` plugs litellm in behind it, and the replay model
    (``replay:PATH``) is another implementation. Messages are in the OpenAI
    chat shape (``{"role": …, "content": …}``) because that is what litellm
    takes and what transcripts record. A function-calling provider's native
    tool calls are turned into protocol text by the model adapter
    (``<action type="tool" id="CALL_ID" …>``), so the parser stays the one
    contract; the calls themselves are also reported in
    :attr:`Completion.tool_calls` so the loop can answer them with ``tool``
    messages.
Prompt
    The runtime builds a :class:`PromptContext` at the start of every turn
    (the agent's tools with their JSON schemas, the internal actions it may
    use, the rendered context feeds…) and hands it to a
    :class:`PromptBuilder`. The protocol prompt lives in
    ``cortex_kernel.llm.prompt``.
Model resolver
    A :data:`ModelResolver` turns a model name (``llm`` actions may name
    another model) into a :class:`Model`; ``cortex_kernel.llm.resolve_model``
    is the one implementation, injected by the composition root.
Executors
    One small abstract class, one module per action type
    (``cortex_kernel.executors``). The scheduler knows nothing about tools or
    models; it calls :meth:`ExecutorSet.execute` for every attempt and
    :meth:`ExecutorSet.check` once at submission (an error there is an
    ``action_error``: the action never runs). Types with no executor
    (``agent``, ``relic``, ``workflow`` until a manifest defines them) are
    rejected with a message that says so.
Tool backends
    A :class:`ToolBackend` runs Python tools somewhere else than the
    kernel's threads (``cortex_kernel.executors.dask_backend``: a Dask
    cluster). The tool executor hands it the validated call and a
    :data:`PlacementReport` to say where the work runs.
Tool sources
    A :class:`ToolSource` brings tools from outside the process (MCP
    servers, ``cortex_kernel.executors.mcp``): the session asks it to start
    and register its tools before every run, in the session's background
    task group, and closes it with the session.
Services
    A :class:`Service` is something a session owns and closes with itself
    (the relic registry of a session whose owner gave it none).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol

from anyio.abc import TaskGroup
from pydantic import BaseModel, ConfigDict, Field

from ..exceptions import ConfigError, UnknownActionError
from ..protocol.models import Action, ActionType
from .feeds import FeedRegistry
from .limits import Budget
from .run_events import Usage
from .tools import Tool, ToolRegistry
from .variables import VariableStore

__all__ = [
    "Completion",
    "CompletionRequest",
    "ExecutionContext",
    "Executor",
    "ExecutorSet",
    "FeedSlot",
    "Message",
    "Model",
    "ModelResolver",
    "PlacementReport",
    "PromptBuilder",
    "PromptContext",
    "ProtocolName",
    "Service",
    "ToolBackend",
    "ToolCall",
    "ToolSource",
    "protocol_named",
]


Message = dict[str, Any]

#: How the model acts: protocol text (``xml``) or native function calling (``tools``).
ProtocolName = Literal["xml", "tools"]


def protocol_named(value: str | None) -> ProtocolName:
    """``value`` as a :data:`ProtocolName` (``None`` means ``xml``).

    Raises
    ------
    ConfigError
        Anything but ``xml`` or ``tools``.
    """
    if value is None or value == "xml":
        return "xml"
    if value == "tools":
        return "tools"
    raise ConfigError(f"Unknown protocol {value!r}: use 'xml' or 'tools' (--protocol).")


class ToolCall(BaseModel):
    """A native tool call of a function-calling model."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str  # JSON text as the provider sent it


class CompletionRequest(BaseModel):
    """What a turn asks of the model."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None  # OpenAI function schemas, for protocol="tools"
    protocol: ProtocolName = "xml"
    options: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens…
    #: What the turn's system prompt offers (tools, agents…): an adapter may
    #: constrain decoding to it (``cortex_kernel.llm.grammar``).
    context: PromptContext | None = None


class Completion(ABC):
    """One open streamed completion.

    Use as ``async with model.stream(request) as completion: async for chunk
    in completion: …``. Leaving the block (or :meth:`aclose`) stops reading
    and closes the provider connection at once: a ``sync`` action cuts the
    turn there and no more tokens are read or paid for.
    """

    usage: Usage
    tool_calls: list[ToolCall]
    #: The model's own text, when the adapter read calls out of it (calls
    #: written as text): the protocol text differs, the transcript keeps both.
    written: str | None
    #: Things the user should know about this turn (a server refused the
    #: grammar and the turn was sent again without it): one ``warning`` each.
    warnings: list[str]

    def __init__(self) -> None:
        self.usage = Usage()
        self.tool_calls = []
        self.written = None
        self.warnings = []

    @abstractmethod
    def __aiter__(self) -> AsyncIterator[str]:
        """Yield protocol text chunks as they arrive."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop the stream and release the connection; safe to call twice."""

    async def __aenter__(self) -> Completion:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Model(ABC):
    """A streaming model. ``name`` is what the user selected (``replay:…``, ``openai/gpt-4o``…)."""

    name: str
    #: A line for the user about how the model was chosen (e.g. the offline
    #: demo used because no provider key is set); ``None`` when there is none.
    note: str | None = None

    @abstractmethod
    def stream(self, request: CompletionRequest) -> Completion:
        """Open a streamed completion (the request is sent on first iteration)."""


class FeedSlot(BaseModel):
    """One rendered context feed as it goes into the prompt."""

    id: str
    text: str
    error: str | None = None


class PromptContext(BaseModel):
    """Everything a system prompt may show the model for one turn."""

    agent_name: str = "cortex"
    instructions: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)  # {"name","description","parameters"}
    agents: list[dict[str, Any]] = Field(default_factory=list)
    relics: list[dict[str, Any]] = Field(default_factory=list)
    workflows: list[dict[str, Any]] = Field(default_factory=list)
    internal_actions: list[str] = Field(default_factory=list)
    feeds: list[FeedSlot] = Field(default_factory=list)
    # Named sources a feed the model adds may choose ({"name", "description"}).
    feed_sources: list[dict[str, str]] = Field(default_factory=list)
    protocol: str = "xml"  # "xml" or "tools"


CompletionRequest.model_rebuild()  # its `context` is a PromptContext, defined after it


#: A model name (``replay:PATH``, ``openai/gpt-4o``…) to a ready model.
ModelResolver = Callable[[str], "Model"]


class PromptBuilder(Protocol):
    """Builds the system prompt of a turn."""

    def system_prompt(self, context: PromptContext) -> str:
        """Return the system prompt text for ``context``."""
        ...


class ToolSource(Protocol):
    """Tools from outside the process, started on first use and closed with the session."""

    async def prepare(self, tools: ToolRegistry, group: TaskGroup | None) -> list[str]:
        """Start what is not running (in ``group``), register its tools; return warnings."""
        ...

    async def aclose(self) -> None:
        """Stop everything it started."""
        ...


class Service(Protocol):
    """Something a session owns and stops when it closes (a relic registry it made)."""

    async def aclose(self) -> None:
        """Stop everything it started."""
        ...


#: ``report(where, moved_from)``: the call runs on ``where`` (a worker's
#: address); ``moved_from`` names the lost worker it ran on before, if any.
PlacementReport = Callable[[str, "str | None"], None]


class ToolBackend(Protocol):
    """Runs Python tool calls away from the kernel (a cluster), awaited without blocking it.

    Attributes
    ----------
    name
        What manifests and ``@tool(executor=…)`` call it (``dask``).
    """

    name: str

    async def call(self, tool: Tool, arguments: dict[str, Any], report: PlacementReport) -> Any:
        """Run ``tool`` with validated ``arguments``; return its result.

        Cancelling the caller cancels the remote work. Failures raise
        :class:`~cortex_kernel.exceptions.ToolError` (or the tool's own error).
        """
        ...

    def dashboard(self) -> str | None:
        """A link to watch the work (the cluster's dashboard), if there is one."""
        ...

    async def aclose(self) -> None:
        """Release the connection (the cluster itself keeps running)."""
        ...


@dataclass
class ExecutionContext:
    """What executors may use: the session's tools, variables and model.

    Attributes
    ----------
    tools
        The tool registry.
    variables
        The session's variable store.
    model
        Returns the session's current model (it may be swapped between runs).
    resolve_model
        Makes the model an ``llm`` action names; ``None``: only the current
        model can be used.
    emit
        Reports an event of the run (``variable_bound`` from ``set_variable``).
    clock
        Seconds since the run started.
    allowed_internal
        Internal actions this agent may use.
    llm_models
        Models an ``llm`` action may name besides the agent's own (the manifest's list).
    depth
        Nesting depth of the run (0 for a cell's run).
    feeds
        The session's context feeds (``None``: this runtime has none).
    clear_context
        Forgets the conversation of earlier runs (``clear_context``).
    dispatch, validate
        The run's own :meth:`ExecutorSet.execute` and :meth:`ExecutorSet.check`
        (a workflow runs its steps through them).
    budget
        What the run has consumed (``None``: no limits are counted): ``llm``
        actions charge their tokens, sub-agents and workflows their actions.
    """

    tools: ToolRegistry
    variables: VariableStore
    model: Callable[[], Model]
    emit: Callable[[Any], None]
    clock: Callable[[], float]
    resolve_model: ModelResolver | None = None
    allowed_internal: frozenset[str] = frozenset()
    llm_models: frozenset[str] = frozenset()
    depth: int = 0
    feeds: FeedRegistry | None = None
    clear_context: Callable[[], int] | None = None
    dispatch: Callable[[Action, dict[str, Any]], Awaitable[Any]] | None = None
    validate: Callable[[Action], str | None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    budget: Budget | None = None


class Executor(ABC):
    """Runs the actions of one type."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """An error message if ``action`` cannot run at all (checked at submission)."""
        return None

    @abstractmethod
    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Run one attempt of ``action``; ``body`` has its references filled in.

        Raise any exception to fail the attempt; return the result.
        """


class ExecutorSet:
    """The executors of a session, by action type.

    Parameters
    ----------
    executors
        One executor per available type.
    context
        Handed to every call.
    """

    def __init__(self, executors: Mapping[ActionType, Executor], context: ExecutionContext) -> None:
        self.executors = dict(executors)
        self.context = context
        context.dispatch, context.validate = self.execute, self.check

    def check(self, action: Action) -> str | None:
        """Why ``action`` cannot run, or ``None``."""
        executor = self.executors.get(action.type)
        if executor is None:
            kind = {"agent": "agents", "relic": "relics", "workflow": "workflows"}.get(
                action.type.value, f"'{action.type.value}' actions"
            )
            return f"{action.type.value} actions are not available: no manifest defines {kind}"
        return executor.check(action, self.context)

    async def execute(self, action: Action, body: dict[str, Any]) -> Any:
        """Run one attempt of ``action``."""
        executor = self.executors.get(action.type)
        if executor is None:
            raise UnknownActionError(
                self.check(action) or f"no executor for {action.type}", action_id=action.id
            )
        return await executor.execute(action, body, self.context)

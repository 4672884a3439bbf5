"""The runtime's ports: every interface it needs from the outside, in one place.

The runtime (loop, scheduler, session) reaches the packages above it — models,
executors, prompts, approvals — through the types here; those packages plug in
behind them, and :func:`cortex_kernel.agent.build_session` wires them together.
A few things it does itself: it writes its transcript file
(:mod:`.transcript`), reads and binds notebook variables in the namespace it
is given (:mod:`.variables`), and calls Python tools' functions in this
process (:mod:`.tools`).

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
    use, the context feeds' values…) and hands it to a
    :class:`PromptBuilder`, which writes the system prompt (stable across
    turns) and the feeds message (this turn's feed values, placed after the
    conversation). The protocol prompt lives in ``cortex_kernel.llm.prompt``.
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
Approvers
    An :class:`Approver` decides on calls marked ``confirm`` (the
    notebook's view, ``--yes``); executors ask it through
    ``cortex_kernel.executors.approval``.
Session configuration
    A :class:`SessionConfig` bundles all of the above that a session uses
    with its settings (protocol, limits, name, instructions…): one frozen
    object, built by the composition root and passed once.
"""

from __future__ import annotations

import dataclasses
import secrets
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Protocol

from anyio.abc import TaskGroup
from pydantic import BaseModel, ConfigDict, Field

from ..exceptions import UnknownActionError
from ..model_options import ModelOptions, ProtocolName, protocol_named
from ..protocol.models import Action, ActionType
from .feeds import FeedRegistry
from .limits import Budget, Limits
from .run_events import Usage
from .tools import Tool, ToolRegistry
from .variables import VariableStore

__all__ = [
    "ApprovalRequest",
    "Approver",
    "Catalog",
    "Completion",
    "CompletionRequest",
    "ExecutionContext",
    "Executor",
    "ExecutorSet",
    "FeedSlot",
    "Message",
    "Model",
    "ModelChoice",
    "ModelResolver",
    "PlacementReport",
    "PromptBuilder",
    "PromptContext",
    "ProtocolName",
    "Service",
    "SessionConfig",
    "ToolBackend",
    "ToolCall",
    "ToolSource",
    "protocol_named",
]


Message = dict[str, Any]


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
    #: How many messages at the end of ``messages`` carry this turn's context
    #: feeds (0 or 1): rebuilt every turn, never part of the conversation.
    feed_messages: int = 0
    #: The tool this turn must call (a data question answered without a look,
    #: asked again: :mod:`cortex_kernel.runtime.data_questions`; the check
    #: turn of an answer that calls it in its text or states a figure it
    #: computes: docs/runtime.md#how-a-run-ends): function calling sends it
    #: as a named tool choice; in the xml protocol ``context`` then offers
    #: only that tool, so a protocol grammar lets the turn call it or answer.
    required_tool: str | None = None
    #: The tool a reply that is only one fenced block of Python code calls
    #: with that code (function calling, a data question not yet looked at:
    #: :mod:`cortex_kernel.runtime.data_questions`); other requests ignore it.
    code_tool: str | None = None
    #: A turn that asks for code alone (:mod:`cortex_kernel.runtime.data_questions`):
    #: the adapter sends no tools and stops the reply at a closing fence, and
    #: the reply's first fenced block of Python is a call of this tool, made
    #: the moment the block closes. ``tools`` still lists the schemas.
    code_reply: str | None = None


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
    #: Whether the runtime may send requests of its own besides the run's
    #: turns (a fix of failed code, :mod:`.code_fixes`). ``False`` for a
    #: recorded transcript: such a request would take a recorded turn.
    answers_aside: bool = True
    #: Whether the model reads :attr:`CompletionRequest.code_reply` (the
    #: runtime then asks a data question's code on its own first).
    code_replies: bool = False

    @abstractmethod
    def stream(self, request: CompletionRequest) -> Completion:
        """Open a streamed completion (the request is sent on first iteration)."""


class FeedSlot(BaseModel):
    """One rendered context feed as it goes into the prompt."""

    id: str
    text: str
    error: str | None = None


class PromptContext(BaseModel):
    """Everything the prompt of one turn may show the model (system prompt and feeds)."""

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
    protocol: ProtocolName = "xml"
    # The run's user message: the feeds message, read last, restates it.
    message: str = ""


CompletionRequest.model_rebuild()  # its `context` is a PromptContext, defined after it


#: A model name (``replay:PATH``, ``openai/gpt-4o``…) to a ready model.
ModelResolver = Callable[[str], "Model"]


class PromptBuilder(Protocol):
    """Builds the prompt of a turn: the system prompt and the feeds message.

    The system prompt opens the request and should not change while the
    session's tools and instructions do not, so a server's prefix cache keeps
    hitting; the context feeds, which change between turns, go in a message
    of their own after the conversation (docs/runtime.md#the-prompt).
    """

    def system_prompt(self, context: PromptContext) -> str:
        """Return the system prompt text for ``context`` (without its feeds)."""
        ...

    def feeds_message(self, context: PromptContext) -> str:
        """Return the text of the message that carries ``context.feeds``; ``""`` for none."""
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


@dataclass(frozen=True)
class ApprovalRequest:
    """One call marked ``confirm`` waiting for a human's decision.

    Attributes
    ----------
    action_id
        The action's id as the run's events name it (``w1/a1`` for step
        ``a1`` of workflow action ``w1``; a sub-agent's own run names its
        actions without its parent's prefix).
    tool
        What runs: a tool's name, or ``RELIC.OPERATION``.
    kind
        The tool's kind (``command``, ``docker``, ``python``…) or ``relic``.
    parameters
        The exact parameters the call gets.
    token
        Unique to this request: answers name it.
    text, digest
        What a human is shown (the parameters as JSON, secrets masked, or
        the tool's own review of them) and its digest
        (``cortex_kernel.executors.approval.approval_digest``).
    notes
        What the tool's review found worth a human's attention (code that
        writes into the user's objects): an approver that approves on its
        own may still ask about these.
    """

    action_id: str
    tool: str
    kind: str
    parameters: dict[str, Any]
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    text: str = ""
    digest: str = ""
    notes: tuple[str, ...] = ()


class Approver(Protocol):
    """Decides whether a call marked ``confirm`` may run (``True``) or not.

    Attributes
    ----------
    by
        Who decides, as the ``approval_decided`` event records it (``--yes``,
        ``view``…).
    """

    by: str

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Return the decision for ``request``."""
        ...


@dataclass(frozen=True)
class ModelChoice:
    """The agent's own model: what a session uses when the user names none.

    Attributes
    ----------
    name
        A model string (``openai/gpt-4o``, ``replay:PATH``), or ``None`` for
        the default one.
    options
        Its options (a manifest's ``model:`` table); options the user sets
        win over these.
    """

    name: str | None = None
    options: ModelOptions = field(default_factory=ModelOptions)


@dataclass(frozen=True)
class Catalog:
    """The sub-agents, relics and workflows a system prompt lists (name, description…)."""

    agents: tuple[dict[str, Any], ...] = ()
    relics: tuple[dict[str, Any], ...] = ()
    workflows: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True, eq=False)
class SessionConfig:
    """A session's configuration: one frozen object, built once by the composition root.

    :func:`cortex_kernel.agent.build_session` builds it; the session hands
    it to every run and a run to every executor
    (:attr:`ExecutionContext.config`); a sub-agent's session is built from
    its caller's (the same approver, its limits no deeper). Nothing changes
    it: a new setting is a new object (:meth:`replace`), which the next run
    reads. A run keeps the one it started with.

    Attributes
    ----------
    model
        The model that streams every turn.
    prompt
        Builds the system prompt of every turn.
    executors
        One executor per available action type (read-only).
    protocol
        ``xml`` (protocol text) or ``tools`` (native function calling).
    own_model
        The agent's own model choice, which ``model`` was resolved from when
        the user named none (the composition root re-resolves with it).
    resolve_model
        Makes the model an ``llm`` action names (``None``: only ``model``).
    llm_models
        Models an ``llm`` action may name besides the agent's own (the manifest's list).
    allowed_internal
        Internal actions the agent may use.
    limits
        Per-run limits.
    agent_name, instructions
        What the system prompt calls the agent, and its standing instructions.
    catalog
        The sub-agents, relics and workflows the prompt lists.
    approver
        Decides on calls marked ``confirm`` (``None``: they are refused).
    read_notebook
        Whether ``$name`` may fall back to the notebook's own variables.
    transcript_dir
        Where run transcripts go (``None``: :func:`~.transcript.default_transcript_dir`).
    """

    model: Model
    prompt: PromptBuilder
    executors: Mapping[ActionType, Executor]
    protocol: ProtocolName = "xml"
    own_model: ModelChoice = field(default_factory=ModelChoice)
    resolve_model: ModelResolver | None = None
    llm_models: frozenset[str] = frozenset()
    allowed_internal: frozenset[str] = frozenset()
    limits: Limits = field(default_factory=Limits)
    agent_name: str = "cortex"
    instructions: str = ""
    catalog: Catalog = field(default_factory=Catalog)
    approver: Approver | None = None
    read_notebook: bool = False
    transcript_dir: Path | None = None

    def __post_init__(self) -> None:
        # Read-only, and a copy: the caller's dict cannot change it afterwards.
        object.__setattr__(self, "executors", MappingProxyType(dict(self.executors)))

    def replace(self, **changes: Any) -> SessionConfig:
        """A copy with ``changes`` (field name -> new value)."""
        return dataclasses.replace(self, **changes)


@dataclass
class ExecutionContext:
    """What executors may use: the run's configuration, tools, variables and events.

    Attributes
    ----------
    config
        The configuration the run started with (its model, approver,
        limits, the models an ``llm`` action may name…).
    tools
        The tool registry.
    variables
        The session's variable store.
    emit
        Reports an event of the run (``variable_bound`` from ``set_variable``).
    clock
        Seconds since the run started.
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

    config: SessionConfig
    tools: ToolRegistry
    variables: VariableStore
    emit: Callable[[Any], None]
    clock: Callable[[], float]
    depth: int = 0
    feeds: FeedRegistry | None = None
    clear_context: Callable[[], int] | None = None
    dispatch: Callable[[Action, dict[str, Any]], Awaitable[Any]] | None = None
    validate: Callable[[Action], str | None] | None = None
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

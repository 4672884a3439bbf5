"""A session: the state that outlives one run (conversation, variables, background work).

The Jupyter kernel, the ``%%agent`` magic and the headless CLI all hold one
:class:`Session` and call :meth:`Session.run` once per cell.

Background work
---------------
``fire_and_forget`` actions may outlive their run, so they cannot live in
the run's task group. On the asyncio backend (headless ``anyio.run`` and
ipykernel alike) the session lazily starts one host task on the running
loop that owns an anyio task group for them; the task is held by the session
and cancelled and awaited by :meth:`Session.aclose`, so the structure stays
explicit even though the group outlives the cell that started it. On other
backends there is no host: the run's own task group takes them and the run
waits for them before it returns (documented trade-off).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import sniffio
from anyio.abc import TaskGroup

from ..protocol.models import ActionType
from .feeds import FeedRegistry
from .limits import Limits
from .loop import Run, RunContext, prior_messages
from .ports import (
    Executor,
    Message,
    Model,
    ModelResolver,
    PromptBuilder,
    ProtocolName,
    Service,
    ToolSource,
)
from .run_events import AnyEvent
from .run_result import RunResult
from .scheduler import Scheduler
from .tools import ToolRegistry
from .transcript import default_transcript_dir
from .variables import VariableStore

__all__ = ["Session"]

log = logging.getLogger(__name__)


class Session:
    """An agent session: runs messages through the loop and keeps what follows from them.

    Parameters
    ----------
    model
        The streaming model (settable between runs).
    prompt
        Builds the system prompt of every turn.
    executors
        One executor per available action type (``tool``, ``llm``…).
    resolve_model
        Makes the model an ``llm`` action names (``None``: only ``model``).
    allowed_internal
        Internal actions the agent may use.
    tools
        Python callables the model may call (``tool`` actions).
    limits
        Per-run limits.
    namespace
        The notebook's ``user_ns``: output keys are written there (never over
        a name the user defined).
    read_notebook
        Let ``$name`` fall back to the notebook's variables (off by default:
        a manifest or ``%read_notebook on`` grants it).
    transcript_dir
        Where run transcripts go (default: :func:`default_transcript_dir`).
    protocol
        ``"xml"`` (protocol text) or ``"tools"`` (native function calling).
    """

    def __init__(
        self,
        model: Model,
        *,
        prompt: PromptBuilder,
        executors: Mapping[ActionType, Executor],
        resolve_model: ModelResolver | None = None,
        allowed_internal: frozenset[str] = frozenset(),
        tools: ToolRegistry | None = None,
        limits: Limits | None = None,
        namespace: MutableMapping[str, Any] | None = None,
        transcript_dir: Path | None = None,
        protocol: ProtocolName = "xml",
        read_notebook: bool = False,
    ) -> None:
        self.model = model
        self.tools = tools if tools is not None else ToolRegistry()
        self.prompt = prompt
        self.limits = limits if limits is not None else Limits()
        self.variables_store = VariableStore(namespace, read_namespace=read_notebook)
        self.transcript_dir = transcript_dir
        self.protocol: ProtocolName = protocol
        self.allowed_internal = allowed_internal
        # Models an `llm` action may name besides the session's own (a manifest lists them).
        self.llm_models: frozenset[str] = frozenset()
        self.executors = dict(executors)
        self.resolve_model = resolve_model
        #: Shown to the model as its name and standing instructions (from a manifest).
        self.agent_name = "cortex"
        self.instructions = ""
        #: Decides on tool calls marked ``confirm: true`` (none: such calls are refused).
        self.approver: Any = None
        self.last_result: RunResult | None = None
        #: The context feeds (the composition root sets the manifest's; the
        #: model or ``%feeds`` may add more).
        self.feeds = FeedRegistry()
        #: Sub-agents, relics and workflows the prompt lists (name, description…).
        self.catalog: dict[str, list[dict[str, Any]]] = {}
        #: Built-in feed sources the host fills (the kernel's ``notebook_variables``).
        self.feed_providers: dict[str, Callable[[], Any]] = {}
        self._runs: dict[str, list[Message]] = {}
        self._schedulers: list[Scheduler] = []
        self._bg: TaskGroup | None = None
        self._bg_task: asyncio.Task[None] | None = None
        self._bg_stop: anyio.Event | None = None
        #: Tools from outside (MCP servers): prepared before every run, closed with the session.
        self.tool_sources: list[ToolSource] = []
        #: What the session owns and closes with itself (a relic registry it made).
        self.services: list[Service] = []
        #: The registry of its ``relic`` actions (shared with its owner's other
        #: sessions when the owner passed one); ``None`` without relics.
        self.relics: Any = None

    # ------------------------------------------------------------ public API

    @property
    def read_notebook(self) -> bool:
        """Whether ``$name`` may read the notebook's own variables (see ``__init__``)."""
        return self.variables_store.read_namespace

    @read_notebook.setter
    def read_notebook(self, allowed: bool) -> None:
        self.variables_store.read_namespace = bool(allowed)

    @property
    def variables(self) -> dict[str, Any]:
        """Every value bound by the runs of this session so far (output keys and action ids)."""
        return self.variables_store.snapshot()

    async def run(
        self,
        message: str,
        *,
        key: str | None = None,
        on_event: Callable[[AnyEvent], None] | None = None,
        depth: int = 0,
    ) -> RunResult:
        """Run ``message`` through the agent loop.

        Parameters
        ----------
        message
            The user's message (one cell).
        key
            A run with the same key as an earlier one replaces that run's
            messages in the history, at the same position.
        on_event
            Called synchronously with every event; its exceptions are logged.
        depth
            Nesting depth (an ``agent`` action's run is one deeper than its parent).

        Returns
        -------
        RunResult
            Failed runs (model error, limit) return with status ``error`` or
            ``limit``; a cancelled run re-raises the cancellation after
            reporting ``run_finished(status="cancelled")``; its result is
            then :attr:`last_result`.
        """
        run_id = uuid.uuid4().hex[:12]
        background = await self._background_group()
        for source in self.tool_sources:
            for warning in await source.prepare(self.tools, background):
                warnings.warn(warning, UserWarning, stacklevel=2)
        folder = (
            self.transcript_dir if self.transcript_dir is not None else default_transcript_dir()
        )
        context = RunContext(
            model=self.model,
            prompt=self.prompt,
            protocol=self.protocol,
            tools=self.tools,
            variables=self.variables_store,
            executors=self.executors,
            limits=self.limits.model_copy(),
            allowed_internal=self.allowed_internal,
            llm_models=self.llm_models,
            resolve_model=self.resolve_model,
            agent_name=self.agent_name,
            instructions=self.instructions,
            extra={"approver": self.approver},
            background=background,
            commit=self._commit,
            track=self._track,
            feeds=self.feeds,
            feed_providers=self.feed_providers,
            clear_history=self.reset,
            depth=depth,
            catalog=self.catalog,
        )
        run = Run(
            context,
            message,
            run_id=run_id,
            key=key if key is not None else f"run-{run_id}",
            prior=prior_messages(self._runs, key),
            on_event=on_event,
            transcript=folder / f"{run_id}.transcript.jsonl",
        )
        return await run.execute()  # its commit sets last_result

    def history(self) -> list[Message]:
        """The conversation so far, in OpenAI shape, without the system prompt."""
        return prior_messages(self._runs, None)

    def reset(self) -> None:
        """Forget the conversation; variables stay."""
        self._runs.clear()

    async def drain(self, seconds: float | None = None) -> bool:
        """Wait for background (``fire_and_forget``) actions; ``False`` if ``seconds`` ran out."""
        with anyio.move_on_after(seconds) as scope:
            for scheduler in list(self._schedulers):
                for node in list(scheduler.nodes.values()):
                    if not node.awaited:
                        await node.wait()
        self._prune()
        return not scope.cancelled_caught

    async def aclose(self) -> None:
        """Cancel background (``fire_and_forget``) work, stop tool sources, owned services
        (relics it made itself) and the host task."""
        for source in self.tool_sources:
            with anyio.CancelScope(shield=True):
                await source.aclose()
        for service in self.services:
            with anyio.CancelScope(shield=True):
                await service.aclose()
        for scheduler in self._schedulers:
            scheduler.cancel_all("session closed", background=True)
        self._schedulers.clear()
        if self._bg_stop is not None:
            self._bg_stop.set()
        task, self._bg_task = self._bg_task, None
        if task is not None:
            with anyio.CancelScope(shield=True):
                await task
        self._bg = None
        self._bg_stop = None

    # ------------------------------------------------------ handed to each run

    def _commit(self, run: Run, result: RunResult) -> None:
        self.last_result = result
        self._runs[run.key] = list(run.messages)
        self._prune()

    def _track(self, scheduler: Scheduler) -> None:
        self._prune()
        self._schedulers.append(scheduler)

    def _prune(self) -> None:
        # Keep only schedulers that still have unsettled background actions.
        self._schedulers = [
            s for s in self._schedulers if any(not n.terminal for n in s.nodes.values())
        ]

    async def _background_group(self) -> TaskGroup | None:
        if self._bg is not None:
            return self._bg
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:  # pragma: no cover
            return None
        if library != "asyncio":
            return None
        ready = anyio.Event()
        self._bg_stop = anyio.Event()
        stop = self._bg_stop
        # The one task the session owns; see the module docstring.
        self._bg_task = asyncio.get_running_loop().create_task(self._host(ready, stop))
        await ready.wait()
        return self._bg

    async def _host(self, ready: anyio.Event, stop: anyio.Event) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._bg = tg
                ready.set()
                await stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self._bg = None

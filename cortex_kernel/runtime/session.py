"""A session: the state that outlives one run (conversation, variables, background work).

The Jupyter kernel, the ``%%agent`` magic and the headless CLI all hold one
:class:`Session` and call :meth:`Session.run` once per cell.

Lifetime and background work
----------------------------
The owner of a session holds its background task group: ``async with
session:`` opens it, leaving the block closes it (structured concurrency —
the session starts no task of its own). Inside the block:

- ``fire_and_forget`` actions may outlive their run (not its wall time): they
  run in the session's group, and :meth:`Session.drain` waits for them;
- tool sources (MCP servers) keep their server hosts there between runs;
- long-lived services of the session (relics, periodic feeds) are started
  with ``session.background.start_soon(...)`` (or ``await
  session.background.start(...)``), or tied to it as async context managers
  with :meth:`Session.enter_async_context`.

Leaving the block (or :meth:`Session.aclose`, which the block calls) stops
the tool sources, cancels background actions, exits the contexts entered
with :meth:`Session.enter_async_context` (last first), cancels what is left
in the group and waits for it: nothing the session started outlives it.

The owners: ``cortex-kernel run`` (:mod:`cortex_kernel.headless`), the eval
runner, the ``agent`` executor (a sub-agent's session lives for its action)
and, in Jupyter, the :class:`~cortex_kernel.jupyter.runner.AgentRunner`,
which holds the notebook's sessions open for the kernel's lifetime.

A session used without ``async with`` still runs: its ``fire_and_forget``
actions then run in the run's own task group and the run waits for them;
MCP servers need an open session.
"""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
from anyio.abc import TaskGroup

from .feeds import FeedRegistry
from .limits import Budget
from .loop import Run, prior_messages
from .ports import Message, Service, SessionConfig, ToolSource
from .run_context import CommittedRun, RunContext
from .run_events import AnyEvent
from .run_result import RunResult
from .scheduler import Scheduler
from .tools import ToolRegistry
from .transcript import default_transcript_dir
from .variables import VariableStore

__all__ = ["Session"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Session:
    """An agent session: runs messages through the loop and keeps what follows from them.

    What the session *is* (model, prompt, executors, protocol, limits,
    approver…) is its :attr:`config`, one frozen :class:`SessionConfig`; the
    rest is state that runs build up (conversation, variables, tools, feeds)
    and what it owns (tool sources, services).

    Parameters
    ----------
    config
        The session's configuration (:func:`cortex_kernel.agent.build_session`
        builds it).
    tools
        Python callables the model may call (``tool`` actions).
    variables
        The variable store (default: a new one over ``namespace``).
    namespace
        The notebook's ``user_ns``: output keys are written there (never over
        a name the user defined); only without ``variables``.
    feeds
        The context feeds (the model or ``%feeds`` may add more).
    feed_providers
        Built-in feed sources the host fills (the kernel's
        ``notebook_variables``, an MCP hub's ``mcp_resource``).
    tool_sources
        Tools from outside (MCP servers): prepared before every run, closed
        with the session.
    services
        What the session owns and closes with itself (a relic registry it made).
    relics
        The registry of its ``relic`` actions (shared with its owner's other
        sessions when the owner passed one); ``None`` without relics.

    Attributes
    ----------
    config
        Replace it to change a setting (``session.config =
        session.config.replace(model=…)``); the next run reads it.
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        tools: ToolRegistry | None = None,
        variables: VariableStore | None = None,
        namespace: MutableMapping[str, Any] | None = None,
        feeds: FeedRegistry | None = None,
        feed_providers: Mapping[str, Callable[..., Any]] | None = None,
        tool_sources: Sequence[ToolSource] = (),
        services: Sequence[Service] = (),
        relics: Any = None,
    ) -> None:
        self.config = config
        self.tools = tools if tools is not None else ToolRegistry()
        if variables is None:
            variables = VariableStore(namespace, read_namespace=config.read_notebook)
        self._variables = variables
        self.feeds = feeds if feeds is not None else FeedRegistry()
        self.feed_providers: dict[str, Callable[..., Any]] = dict(feed_providers or {})
        self.tool_sources: list[ToolSource] = list(tool_sources)
        self.services: list[Service] = list(services)
        self.relics: Any = relics
        self.last_result: RunResult | None = None
        self._runs: dict[str, list[Message]] = {}
        self._schedulers: list[Scheduler] = []
        self._bg: TaskGroup | None = None
        self._stack: AsyncExitStack | None = None

    # ------------------------------------------------------------ public API

    @property
    def variables(self) -> VariableStore:
        """The session's variables, live: what its runs bound and ``$name`` reads.

        ``session.variables["total"]`` is the value ``$total`` reads;
        iterating gives every name the runs bound (output keys,
        ``set_variable`` names, action ids); ``snapshot()`` copies them into
        a ``dict``.
        """
        return self._variables

    @property
    def variables_store(self) -> VariableStore:
        """Deprecated: the same store as :attr:`variables`."""
        warnings.warn(
            "Session.variables_store is deprecated; use Session.variables (the same store)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._variables

    async def run(
        self,
        message: str,
        *,
        key: str | None = None,
        on_event: Callable[[AnyEvent], None] | None = None,
        depth: int = 0,
        budget: Budget | None = None,
        caller: str | None = None,
        config: SessionConfig | None = None,
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
        budget, caller
            For a nested run: the calling run's budget and the id of the
            calling action. The nested run's actions and tokens count against
            the caller's limits too, and it runs no more actions at once than
            the caller may.
        config
            This run's configuration, instead of :attr:`config` (a cell's
            own ``--model``); the session's stays as it is.

        Returns
        -------
        RunResult
            Failed runs (model error, limit) return with status ``error`` or
            ``limit``; a cancelled run re-raises the cancellation after
            reporting ``run_finished(status="cancelled")``; its result is
            then :attr:`last_result`.
        """
        run_id = uuid.uuid4().hex[:12]
        config = config if config is not None else self.config
        background = self._bg
        notices: list[str] = []  # e.g. an MCP server restarted: warning events of the run
        for source in self.tool_sources:
            notices.extend(await source.prepare(self.tools, background))
        folder = config.transcript_dir
        if folder is None:
            folder = default_transcript_dir()
        if budget is not None and budget.limits.max_parallel < config.limits.max_parallel:
            limits = config.limits.model_copy(update={"max_parallel": budget.limits.max_parallel})
            config = config.replace(limits=limits)
        context = RunContext(
            config=config,
            tools=self.tools,
            variables=self._variables,
            background=background,
            commit=self._commit,
            track=self._track,
            feeds=self.feeds,
            feed_providers=self.feed_providers,
            clear_history=self.reset,
            depth=depth,
            notices=tuple(notices),
            parent_budget=budget,
            caller=caller,
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

    def forget(self, keys: Iterable[str]) -> None:
        """Forget the turns of the runs with these ``key`` values; the others stay, and so
        do variables (unknown keys are ignored)."""
        for key in keys:
            self._runs.pop(key, None)

    async def drain(self, seconds: float | None = None) -> bool:
        """Wait for background (``fire_and_forget``) actions; ``False`` if ``seconds`` ran out."""
        with anyio.move_on_after(seconds) as scope:
            for scheduler in list(self._schedulers):
                for node in list(scheduler.nodes.values()):
                    if not node.awaited:
                        await node.wait()
        self._prune()
        return not scope.cancelled_caught

    # ---------------------------------------------------------- lifetime

    async def __aenter__(self) -> Self:
        """Open the session's background task group (see the module docstring).

        Raises
        ------
        RuntimeError
            The session is open already.
        """
        if self._stack is not None:
            raise RuntimeError("this session is open already")
        stack = AsyncExitStack()
        group = await stack.enter_async_context(anyio.create_task_group())
        # Last in, first out: on the way out, close() runs before the group
        # exits, so the group only waits for what close() cancelled.
        stack.push_async_callback(self._close_group, group)
        self._stack, self._bg = stack, group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Close what the session holds (:meth:`aclose`) and its task group."""
        stack, self._stack = self._stack, None
        try:
            await self.aclose()
        finally:
            self._bg = None
            if stack is not None:
                # Not shielded: the group's cancel scope must be the innermost one
                # here. The owner's exception is not handed to the group (which
                # would wrap it in an ExceptionGroup): it propagates unchanged.
                await stack.__aexit__(None, None, None)
        return None

    @property
    def is_open(self) -> bool:
        """Whether the owner holds the session open (``async with session:``)."""
        return self._bg is not None

    @property
    def background(self) -> TaskGroup:
        """The session's task group, for work that outlives a run.

        Raises
        ------
        RuntimeError
            The session is not open (use ``async with session:``).
        """
        if self._bg is None:
            raise RuntimeError("the session is not open: use `async with session:`")
        return self._bg

    async def enter_async_context(self, context: AbstractAsyncContextManager[T]) -> T:
        """Enter ``context`` now and exit it when the session closes (last entered, first out).

        Raises
        ------
        RuntimeError
            The session is not open.
        """
        if self._stack is None:
            raise RuntimeError("the session is not open: use `async with session:`")
        return await self._stack.enter_async_context(context)

    async def aclose(self) -> None:
        """Stop tool sources and owned services (relics it made itself), and
        cancel background (``fire_and_forget``) actions.

        Safe to call twice, and inside ``async with session:`` (leaving the
        block then also exits the contexts and the group).
        """
        for source in self.tool_sources:
            with anyio.CancelScope(shield=True):
                await source.aclose()
        for service in self.services:
            with anyio.CancelScope(shield=True):
                await service.aclose()
        for scheduler in self._schedulers:
            scheduler.cancel_all("session closed", background=True)
        self._schedulers.clear()

    @staticmethod
    async def _close_group(group: TaskGroup) -> None:
        # Whatever is still in the group (a service nobody stopped) is cancelled.
        group.cancel_scope.cancel()

    # ------------------------------------------------------ handed to each run

    def _commit(self, run: CommittedRun, result: RunResult) -> None:
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

"""What a run is handed: the session's configuration and state (:class:`RunContext`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from anyio.abc import TaskGroup

from .feeds import FeedRegistry
from .limits import Budget
from .ports import Message, SessionConfig
from .run_result import RunResult
from .scheduler import Scheduler
from .tools import ToolRegistry
from .variables import VariableStore

__all__ = ["RunContext"]


class CommittedRun(Protocol):
    """What the session keeps of a finished run (a :class:`~.loop.Run` is one)."""

    @property
    def key(self) -> str:
        """The run's place in the history (a re-run cell replaces its earlier run)."""

    @property
    def messages(self) -> list[Message]:
        """The run's complete turns."""


def _ignore(*_: object) -> None:
    return None


@dataclass
class RunContext:
    """What a run uses: the session's configuration and state, handed over explicitly.

    The session builds one per run.

    Attributes
    ----------
    config
        The run's configuration (model, prompt, protocol, executors, limits…):
        the session's, or the one this run was given.
    tools
        The tools ``tool`` actions call.
    variables
        Where results are bound and ``$name`` is looked up.
    background
        The open session's task group, for ``fire_and_forget`` actions, which
        may outlive the run; ``None``: the run's own group takes them and the
        run waits for them before it ends.
    commit
        Called once with the finished run and its result, cancelled runs
        included (the run's messages join the history).
    track
        Called with the run's scheduler (the session waits for its background work).
    feeds
        The session's context feeds (refreshed before every turn).
    feed_providers
        Built-in feed sources the host fills (the kernel's ``notebook_variables``).
    clear_history
        Forgets the conversation of earlier runs (``clear_context``).
    depth
        Nesting depth (0 for a cell's run; an ``agent`` action's run is deeper).
    notices
        Warnings from before the run (an MCP server restarted since the last
        run): each becomes a ``warning`` event right after ``run_started``.
    parent_budget, caller
        For a nested run (a sub-agent's): the calling run's budget, which this
        run's actions and tokens are charged to as well, and the id of the
        action that called it.
    """

    config: SessionConfig
    tools: ToolRegistry
    variables: VariableStore
    background: TaskGroup | None = None
    commit: Callable[[CommittedRun, RunResult], None] = _ignore
    track: Callable[[Scheduler], None] = _ignore
    feeds: FeedRegistry | None = None
    feed_providers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    clear_history: Callable[[], None] = _ignore
    depth: int = 0
    notices: tuple[str, ...] = ()
    parent_budget: Budget | None = None
    caller: str | None = None

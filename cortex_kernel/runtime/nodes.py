"""The nodes of the scheduler's graph, and how an idle worker is woken.

An :class:`ActionNode` is one action with its state, dependencies and
timings. The wake-up slot (:func:`slot_factory`) and the
:class:`ActionStarted` builder (:func:`started_event`) live here because
they are on the dispatch path, where every allocation and lookup counts.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import anyio

from ..protocol.models import Action, ActionMode
from .run_events import ActionStarted

__all__ = ["NodeState"]


class NodeState(StrEnum):
    """Where an action is in its life."""

    WAITING = "waiting"  # dependencies not yet succeeded (or not yet seen)
    READY = "queued"  # started, waiting for a max_parallel slot
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    REJECTED = "rejected"  # action_error: never run (cycle, unknown tool…)


TERMINAL = frozenset(
    {NodeState.SUCCEEDED, NodeState.FAILED, NodeState.SKIPPED, NodeState.CANCELLED}
    | {NodeState.REJECTED}
)
# Enum members read on the dispatch path: a module global is read ten times
# faster than ``NodeState.READY`` (an enum class attribute lookup).
READY = NodeState.READY
RUNNING = NodeState.RUNNING
FIRE_AND_FORGET = ActionMode.FIRE_AND_FORGET


@dataclass(eq=False, slots=True)
class ActionNode:
    """One action in the scheduler, with its state and timings (``perf_counter`` seconds)."""

    action: Action
    deps: tuple[str, ...] = ()
    state: NodeState = NodeState.WAITING
    waiting: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    dependents: list[ActionNode] = field(default_factory=list)
    # Created on demand: most nodes are never waited on individually, and a
    # cancel scope is only needed once the action runs (fewer objects per
    # action means less garbage-collector work at 10,000 actions).
    scope: anyio.CancelScope | None = None
    _done: anyio.Event | None = None
    result: Any = None
    #: What the model and the views read of ``result`` when a tool said so
    #: (:class:`~cortex_kernel.runtime.results.Shown`); ``None``: its rendering.
    shown: str | None = None
    error: str = ""
    traceback: str = ""  # of the exception that failed it, runtime frames trimmed
    has_refs: bool = False
    attempts: int = 0
    submitted_at: float = 0.0
    ready_at: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0

    @property
    def id(self) -> str:
        """The action id."""
        return self.action.id

    async def wait(self) -> None:
        """Return once the node has settled."""
        if self.state in TERMINAL:
            return
        if self._done is None:
            self._done = anyio.Event()
        await self._done.wait()

    @property
    def read(self) -> Any:
        """The result as the model and the views read it: ``shown``, else ``result``."""
        return self.result if self.shown is None else self.shown

    @property
    def terminal(self) -> bool:
        """Whether the node has settled (succeeded, failed, skipped, cancelled, rejected)."""
        return self.state in TERMINAL

    @property
    def awaited(self) -> bool:
        """Whether the loop waits for it (everything but ``fire_and_forget``)."""
        return self.action.mode is not ActionMode.FIRE_AND_FORGET

    @property
    def dispatch_latency(self) -> float | None:
        """Seconds from ready (last dependency settled, or arrival) to start."""
        if not self.started_at:
            return None
        return self.started_at - self.ready_at


now = time.perf_counter


class Slot(Protocol):
    """Where an idle worker parks: ``set_result`` hands it a node (or ``None``: leave)."""

    def set_result(self, node: ActionNode | None, /) -> None: ...
    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def result(self) -> ActionNode | None: ...
    def __await__(self) -> Generator[Any, None, ActionNode | None]: ...


class _EventSlot:
    """A slot for any anyio backend: an event and the node it carries."""

    __slots__ = ("_event", "_node", "_set")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._node: ActionNode | None = None
        self._set = False

    def set_result(self, node: ActionNode | None, /) -> None:
        self._node = node
        self._set = True
        self._event.set()

    def done(self) -> bool:
        return self._set

    def cancelled(self) -> bool:
        return False

    def result(self) -> ActionNode | None:
        return self._node

    def __await__(self) -> Generator[Any, None, ActionNode | None]:
        yield from self._event.wait().__await__()
        return self._node


def slot_factory() -> Callable[[], Slot]:
    """How the calling worker makes its slots.

    On asyncio a slot is a bare future of the running loop: parking, waking
    and handing over the node is then one allocation and one callback, the
    least a wake-up can cost (an ``anyio.Event`` wraps an ``asyncio.Event``,
    which wraps a future). Anywhere else, an ``anyio.Event``.

    Why not an anyio primitive here (structured concurrency is kept: the
    future never outlives the worker that parks on it, and cancelling the
    worker cancels the wait): measured on the development machine, 20,000
    park + wake cycles cost 36 µs each with a future and 64 µs with an
    ``anyio.Event`` slot (1.75×), on the dispatch path whose p50 is ~110 µs.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return _EventSlot
    if asyncio.current_task() is None:  # pragma: no cover - not an asyncio task
        return _EventSlot
    return loop.create_future


def started_event(action_id: str, t: float) -> ActionStarted:
    """The event of an action's first attempt starting."""
    return ActionStarted(t=t, id=action_id)


def collect_young_if_due() -> None:
    """Run the generation-1 collection now if it is about to fall due.

    Called when the scheduler is idle (no ready action waits to start). The
    collector counts allocations, not time, so left alone its generation-1
    pass — 0.6–1 ms once a few thousand action objects are young — lands
    wherever the count runs out: measured, most often in the middle of a
    dispatch burst, where it delays every action behind it. Doing it at an
    idle moment moves the same work, it does not add any: survivors go to
    the old generation, and the pass a burst may still trigger is cheap.
    """
    if not gc.isenabled():
        return
    young_passes = gc.get_count()[1]
    if young_passes >= _YOUNG_PASSES_DUE:
        gc.collect(1)


# gc.get_count()[1] counts young (generation-0) passes since the last
# generation-1 pass, which runs after threshold[1] of them (10 by default).
_YOUNG_PASSES_DUE = max(1, gc.get_threshold()[1] // 2)

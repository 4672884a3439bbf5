"""The eager DAG scheduler: actions start the moment their last dependency succeeds.

Strategy
--------
Every submitted action becomes an :class:`ActionNode` that counts the
dependencies it still waits on. There is no polling loop and no wave: when a
node settles, it walks its dependents and decrements their counters; a
dependent whose counter reaches zero is queued right there, in the same
call, and an idle worker is woken. Workers are tasks of the run's task group,
at most ``max_parallel`` of them, started when actions *arrive* (so spawning
a task is never on the critical path) and gone once no action is open. An
idle worker parks with the cancel scope of its next action already entered;
a dispatch hands the node to a parked worker (one future resolved, one
wake-up), or queues it when every worker is busy.

Each action runs in its own cancel scope inside the run's task group (or, for
``fire_and_forget``, inside a longer-lived background task group), so a
timeout, a cancelled run or an interrupt is plain anyio cancellation.
``fire_and_forget`` actions hold a ``max_parallel`` slot like the others
(awaited actions wait for one while they are all taken), and their scope
ends at the run's wall-time deadline even when they outlive the run. Every
exception raised by an action is caught at the node and becomes
``action_failed``; a failure, a cancellation or a rejection skips the
dependents with the reason, so nothing ever waits forever.

A dependency on an id that has not appeared yet is *missing*: the node waits
until that id is submitted, or until :meth:`Scheduler.end_turn`, which skips
it. A submission that would close a cycle is rejected (``action_error``).

With ``reuse_calls`` on (the agent loop's scheduler), a ``tool`` action
that repeats a call already pending or done in the same turn (same tool,
same parameters, same dependencies, each ``$reference`` naming the same
producing action) is not run again: it waits for the first one and settles
with its result, under its own id and ``output_key``, with a ``warning``
saying so (:meth:`Scheduler._call_key`, docs/runtime.md#scheduling).

The dispatch path — :meth:`Scheduler.submit`, ``_worker`` and ``_settle`` —
is inlined on purpose, past the complexity limits (each says so with a
``noqa`` marked *hot path*): the dispatch p99 (``cortex-kernel bench
scheduler``, docs/benchmarks.md) was measured on this shape. Split them only
with a new measurement; nothing else here is excused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..exceptions import ActionError, UnknownActionError, VariableReferenceError
from ..protocol.models import Action, ActionMode, ActionType
from ..protocol.parser_events import ActionErrorEvent, ParserEvent, WarningEvent
from .drift import RETRYABLE_STATES, duplicate_id_message
from .nodes import (
    FIRE_AND_FORGET,
    READY,
    RUNNING,
    TERMINAL,
    ActionNode,
    NodeState,
    Slot,
    collect_young_if_due,
    slot_factory,
    started_event,
)
from .nodes import (
    now as _now,
)
from .references import Reference, find_references, substitute
from .results import Shown, own_traceback, preview
from .run_events import (
    ActionCancelled,
    ActionFailed,
    ActionQueued,
    ActionSkipped,
    ActionStarted,
    ActionSucceeded,
    RuntimeEvent,
)
from .tools import abandoned_threads
from .variables import VariableStore

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)

Execute = Callable[[Action, dict[str, Any]], Awaitable[Any]]
Emit = Callable[[RuntimeEvent | ParserEvent], None]


#: Why a ``fire_and_forget`` action was cancelled at the run's deadline.
WALL_TIME_CANCEL = (
    "wall time limit reached: a fire_and_forget action ends with its run's limits.wall_time"
)


class _Failure(Exception):
    """An action failed for good; the message is what the model reads."""


class _SlotWaiter:
    """An action waiting for a ``max_parallel`` slot; ``granted``: it was handed one."""

    __slots__ = ("event", "granted")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.granted = False


class Scheduler:
    """Runs the actions of one run under their dependencies.

    Parameters
    ----------
    task_group
        The run's task group: awaited actions run here.
    execute
        ``await execute(action, body)`` runs one attempt; ``body`` has its
        ``$var`` references filled in.
    variables
        Where results are bound (by action id and ``output_key``) and where
        references are looked up.
    emit
        Called synchronously with every event, in order.
    clock
        Seconds for the ``t`` of events (since the run started).
    max_parallel
        Most actions running at once, ``fire_and_forget`` ones included.
    background
        Task group for ``fire_and_forget`` actions, which may outlive the run;
        ``None`` runs them in ``task_group``.
    validate
        Returns an error message for an action that must not run (unknown
        tool, type not available…): it is rejected with ``action_error``.
    retry_base, retry_cap
        Backoff before retry ``k`` is ``min(cap, base * 2**(k-1))`` times a
        random factor in [0.5, 1.5).

    Attributes
    ----------
    deadline
        When ``fire_and_forget`` actions are cancelled (anyio's clock): the
        run's wall time, which they may not outlive (``None``: no deadline).
    reuse_calls
        Whether a ``tool`` action repeating a call of the same turn takes the
        first one's result instead of running (see the module's notes). The
        agent loop turns it on: its tools see only their parameters. Off (the
        default), the scheduler runs whatever it is given (an ``execute`` may
        tell actions apart by id).
    repeatable
        Whether a tool, by name, runs every call (``@tool(repeatable=True)``,
        a random draw, a counter): its calls are never taken as repeats.
    unstopped
        What runs on of a cancelled action that could not be stopped, by id
        (the run's ``Budget.unstopped_actions``): its ``action_cancelled``
        says so.
    """

    def __init__(
        self,
        task_group: TaskGroup,
        *,
        execute: Execute,
        variables: VariableStore,
        emit: Emit,
        clock: Callable[[], float],
        max_parallel: int = 16,
        background: TaskGroup | None = None,
        validate: Callable[[Action], str | None] | None = None,
        action_timeout: float | None = None,
        retry_base: float = 0.2,
        retry_cap: float = 5.0,
    ) -> None:
        self._tg = task_group
        self._background = background
        self._execute = execute
        self.variables = variables
        self.emit = emit
        self.clock = clock
        self._validate = validate
        self._max_parallel = max(1, max_parallel)
        self.deadline: float | None = None
        # Actions holding a max_parallel slot, and who waits for one. Workers
        # never outnumber the slots, so only fire_and_forget actions (which
        # run in tasks of their own) can make anyone wait.
        self._running = 0
        self._slot_waiters: deque[_SlotWaiter] = deque()
        self._queue: deque[ActionNode] = deque()
        # Idle workers, each parked on a slot that takes the node it runs next.
        self._parked: deque[Slot] = deque()
        self._to_start = 0  # awaited nodes made ready but not yet taken by a worker
        self._workers = 0
        self._action_timeout = action_timeout
        self._retry_base = retry_base
        self._retry_cap = retry_cap
        self.reuse_calls = False
        self.repeatable: Callable[[str], bool] | None = None
        self.unstopped: Mapping[str, str] = {}
        self.nodes: dict[str, ActionNode] = {}
        # The latest node that produces each name (its id and its output_key).
        self._producers: dict[str, ActionNode] = {}
        # id not yet seen -> nodes waiting for it
        self._wanted: dict[str, list[ActionNode]] = {}
        self._settled: list[ActionNode] = []
        # This turn's tool calls by what they ask (see _call_key), and each
        # repeat -> the node whose result it takes.
        self._calls: dict[tuple[Any, ...], ActionNode] = {}
        self._repeats: dict[ActionNode, ActionNode] = {}
        self._open = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._closing = False
        self._close_reason = "cancelled"

    # ------------------------------------------------------------------ submit

    def submit(self, action: Action) -> ActionNode | None:  # noqa: C901, PLR0912 (hot path)
        """Accept a parsed action and start it as soon as its dependencies allow.

        Returns
        -------
        ActionNode | None
            The node, or ``None`` for a duplicate id (an ``action_error`` is emitted).
        """
        now = self.clock()
        earlier = self.nodes.get(action.id)
        if earlier is not None:
            if earlier.state.value not in RETRYABLE_STATES:
                variable = earlier.action.output_key or earlier.id
                message = duplicate_id_message(action.id, earlier.state.value, variable)
                self.emit(
                    ActionErrorEvent(
                        span=(0, 0), t=now, id=action.id, message=message, raw_body=action.raw_body
                    )
                )
                return None
            # Rule 5: a retry under the id of an action that did not succeed is a
            # new attempt; the old node is settled and reported already.
            self._retire(earlier)
            self._warn(
                action.id,
                now,
                f"action id '{action.id}' reused: the earlier action {earlier.state.value}"
                "; this one is a new attempt under the same id",
            )
        deps = list(dict.fromkeys(action.depends_on))
        refs = find_references(action.body)
        for ref in refs:
            producer = self._producers.get(ref.name)
            if (
                producer is not None
                and producer.state is not NodeState.SUCCEEDED
                and producer.id != action.id
                and producer.id not in deps
            ):
                deps.append(producer.id)
        first: ActionNode | None = None
        call = (
            self._call_key(action, refs)
            if self.reuse_calls and action.type is ActionType.TOOL
            else None
        )
        if call is not None:
            first = self._calls.get(call)
            if first is not None and first.state.value in RETRYABLE_STATES:
                first = None  # a retry of a call that did not succeed runs again
            if first is not None and first.id not in deps:
                deps.append(first.id)
        node = ActionNode(action=action, deps=tuple(deps), submitted_at=now, has_refs=bool(refs))
        self.nodes[action.id] = node
        if call is not None:
            if first is None:
                self._calls[call] = node
            else:
                self._repeats[node] = first
        if deps and not node.awaited:
            # Made now, on arrival, so that making it is not on the dispatch path
            # (an awaited action gets its scope from the worker that runs it).
            node.scope = anyio.CancelScope()
        if node.awaited:
            self._open += 1
            if self._open == 1:
                self._idle = anyio.Event()
            self._ensure_workers()

        problem = self._validate(action) if self._validate is not None else None
        if problem is None:
            problem = self._find_cycle(node)
        if problem is not None:
            self._register(node)
            self._reject(node, problem)
            return node

        for dep_id in deps:
            dep = self.nodes.get(dep_id)
            if dep is None:
                node.missing.add(dep_id)
                self._wanted.setdefault(dep_id, []).append(node)
            elif dep.state is NodeState.SUCCEEDED:
                continue
            elif dep.terminal:
                node.waiting.add(dep_id)  # settles below, after queued is emitted
            else:
                node.waiting.add(dep_id)
                dep.dependents.append(node)
        self.emit(
            ActionQueued(
                t=now,
                id=action.id,
                action=action,
                depends_on=node.deps,
                waiting_on=tuple(sorted(node.waiting | node.missing)),
            )
        )
        if first is not None:
            self._warn(
                action.id,
                now,
                f"action '{action.id}' repeats action '{first.id}' (the same call to "
                f"tool '{action.body.get('name')}' in this turn): it is not run again "
                f"and gets the result of '{first.id}'",
                details={"repeats": first.id},
            )
        self._register(node)
        for dep_id in list(node.waiting):
            dep = self.nodes[dep_id]
            if dep.terminal:
                self._settle(node, NodeState.SKIPPED, reason=self._skip_reason(dep))
                return node
        if not node.waiting and not node.missing:
            self._make_ready(node)
        return node

    def _warn(
        self, action_id: str, now: float, message: str, details: dict[str, Any] | None = None
    ) -> None:
        """A warning about an action that is not the model's text (no span)."""
        self.emit(
            WarningEvent(span=(0, 0), t=now, id=action_id, message=message, details=details or {})
        )

    def _call_key(self, action: Action, refs: list[Reference]) -> tuple[Any, ...] | None:
        """What a ``tool`` action asks, to find a repeat of it in the turn.

        Two calls ask the same when their bodies (tool and parameters) are
        equal as JSON, they name the same ``depends_on`` and each
        ``$reference`` names the same producing action, so both would run
        with the same arguments after the same actions. ``None`` (never a
        repeat): a ``fire_and_forget`` action, a call of a ``repeatable``
        tool, or a reference to a value no action of this run produced (an
        earlier run's, which a ``set_variable`` may rebind within the turn).
        """
        if action.mode is FIRE_AND_FORGET:
            return None
        if self.repeatable is not None and self.repeatable(action.name or ""):
            return None  # each call of it is meant to run (a random draw, a counter)
        producers: list[ActionNode] = []
        for ref in refs:
            producer = self._producers.get(ref.name)
            if producer is None:
                return None
            producers.append(producer)
        try:
            body = json.dumps(action.body, sort_keys=True)
        except (TypeError, ValueError):
            return None
        return body, frozenset(action.depends_on), tuple(producers)

    def _retire(self, node: ActionNode) -> None:
        """Forget a settled, unsuccessful node so a new attempt can take its id."""
        del self.nodes[node.id]
        for name in (node.id, node.action.output_key):
            if name and self._producers.get(name) is node:
                del self._producers[name]

    def reject(self, action_id: str, message: str) -> None:
        """Record that ``action_id`` will never run (a parser ``action_error``).

        Nodes that wait for that id are skipped now rather than at the end of
        the turn. The error itself is reported by whoever saw it.
        """
        if action_id in self.nodes:
            return
        placeholder = Action(id=action_id, type=ActionType.INTERNAL, body={}, mode=ActionMode.ASYNC)
        node = ActionNode(action=placeholder, state=NodeState.REJECTED, error=message)
        self.nodes[action_id] = node
        self._wake_wanted(node)

    def _register(self, node: ActionNode) -> None:
        self._producers[node.id] = node
        if node.action.output_key:
            self._producers[node.action.output_key] = node
        if node.id in self._wanted:
            self._wake_wanted(node)

    def _wake_wanted(self, node: ActionNode) -> None:
        for waiter in self._wanted.pop(node.id, []):
            if waiter.terminal:
                continue
            waiter.missing.discard(node.id)
            if node.state is NodeState.SUCCEEDED:
                pass
            elif node.terminal:
                self._settle(waiter, NodeState.SKIPPED, reason=self._skip_reason(node))
                continue
            else:
                waiter.waiting.add(node.id)
                node.dependents.append(waiter)
            if not waiter.waiting and not waiter.missing:
                self._make_ready(waiter)

    def _find_cycle(self, node: ActionNode) -> str | None:
        if node.id in node.deps:
            return f"cycle: action '{node.id}' depends on itself"
        if node.id not in self._wanted:
            return None  # nobody waits for this id, so no path can lead back to it
        # Walk up from the new node's dependencies; reaching its id closes a cycle.
        stack: list[tuple[str, tuple[str, ...]]] = [(d, (node.id, d)) for d in node.deps]
        seen: set[str] = set()
        while stack:
            current, path = stack.pop()
            if current == node.id:
                return "cycle: " + " -> ".join(path) + "; remove one of these depends_on"
            if current in seen:
                continue
            seen.add(current)
            dep = self.nodes.get(current)
            if dep is None or dep.terminal:
                continue
            for nxt in dep.deps:
                stack.append((nxt, (*path, nxt)))
        return None

    # ------------------------------------------------------------------- turn

    def end_turn(self) -> None:
        """The turn's stream ended: dependencies that never appeared skip their dependents."""
        wanted, self._wanted = self._wanted, {}
        self._calls.clear()  # a call in a later turn runs again
        for dep_id, waiters in wanted.items():
            for waiter in waiters:
                if not waiter.terminal:
                    self._settle(
                        waiter,
                        NodeState.SKIPPED,
                        reason=f"dependency '{dep_id}' never appeared in the turn",
                    )

    def take_settled(self) -> list[ActionNode]:
        """The awaited actions settled since the last call, in settling order."""
        settled, self._settled = self._settled, []
        return settled

    @property
    def pending(self) -> int:
        """Awaited actions not yet settled."""
        return self._open

    async def wait(self, ids: Iterable[str]) -> None:
        """Wait until every known action among ``ids`` has settled."""
        for action_id in ids:
            node = self.nodes.get(action_id)
            if node is not None:
                await node.wait()

    async def wait_all(self) -> None:
        """Wait until every awaited (non fire-and-forget) action has settled."""
        while self._open:
            await self._idle.wait()

    def cancel_all(self, reason: str = "cancelled", *, background: bool = False) -> None:
        """Cancel every unsettled action (not ``fire_and_forget`` unless ``background``).

        Waiting and queued actions settle as cancelled at once; running ones
        have their cancel scope cancelled and settle as their task unwinds.
        """
        self._closing = True
        self._close_reason = reason
        for node in list(self.nodes.values()):
            if node.terminal or (not node.awaited and not background):
                continue
            if node.state is NodeState.RUNNING and node.scope is not None:
                node.scope.cancel()
            else:
                if node.scope is not None and not node.awaited:
                    node.scope.cancel()  # its task may be waiting for a slot
                self._settle(node, NodeState.CANCELLED, reason=reason)

    def unsettled_background(self) -> list[ActionNode]:
        """The ``fire_and_forget`` actions that have not settled yet."""
        return [n for n in self.nodes.values() if not n.awaited and not n.terminal]

    # ------------------------------------------------------------------ slots

    async def _wait_slot(self) -> None:
        """Wait for a ``max_parallel`` slot; return holding it."""
        waiter = _SlotWaiter()
        self._slot_waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self._release_slot()  # handed over as we were cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._slot_waiters.remove(waiter)
            raise

    def _release_slot(self) -> None:
        if self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            waiter.granted = True  # the slot goes straight to the first waiter
            waiter.event.set()
        else:
            self._running -= 1

    # -------------------------------------------------------------- execution

    def _ensure_workers(self) -> None:
        # Workers are started when actions *arrive*, not when they become
        # ready, so the cost of spawning a task is paid off the critical path:
        # when a dependency settles, an idle worker is already waiting and
        # dispatch is a deque append plus one wake-up.
        wanted = min(self._max_parallel, self._open)
        while self._workers < wanted:
            self._workers += 1
            self._tg.start_soon(self._worker, name="cortex scheduler worker")

    def _make_ready(self, node: ActionNode) -> None:
        if self._repeats:
            first = self._repeats.pop(node, None)
            if first is not None:
                # A repeated call: the first one's result, not a second run.
                node.result, node.shown = first.result, first.shown
                self._settle(node, NodeState.SUCCEEDED)
                return
        node.state = READY
        node.ready_at = _now()
        if node.action.mode is FIRE_AND_FORGET:
            group = self._background if self._background is not None else self._tg
            group.start_soon(self._run_node, node, name=f"action {node.id}")
            return
        self._to_start += 1  # handed to a worker or queued, not yet started
        parked = self._parked
        while parked:
            slot = parked.popleft()
            if not slot.done():  # done: its worker was cancelled while parked
                # Hand the node straight to an idle worker: one wake-up, no queue.
                slot.set_result(node)
                return
        self._queue.append(node)

    def _unpark_all(self) -> None:
        """Wake every idle worker with nothing to run, so they can leave."""
        while self._parked:
            slot = self._parked.popleft()
            if not slot.done():
                slot.set_result(None)

    async def _worker(self) -> None:  # noqa: C901, PLR0912, PLR0915 (hot path)
        """Run actions one at a time; at most ``max_parallel`` workers exist.

        A worker lives in the run's task group and leaves when no awaited
        action is open, so a finished scheduler holds no task. Each action
        runs under its own, fresh cancel scope; the worker makes and enters
        that scope *before* it parks, so when a dependency settles, the
        woken worker starts the action at once.
        """
        make_slot = slot_factory()
        try:
            while True:
                if not self._queue and self._open == 0:
                    return
                scope = anyio.CancelScope()
                node: ActionNode | None = None
                failure: str | None = None
                result: Any = None
                held = False  # a max_parallel slot
                try:
                    with scope:
                        if self._queue:
                            node = self._queue.popleft()
                            self._to_start -= 1
                        else:
                            if self._to_start == 0:
                                # Idle: nothing ready waits for a worker.
                                collect_young_if_due()
                            slot = make_slot()
                            self._parked.append(slot)
                            try:
                                node = await slot
                                if node is not None:
                                    self._to_start -= 1
                            except BaseException:
                                # Cancelled while parked (the group is going
                                # down): a node handed over meanwhile must not
                                # stay ready forever.
                                if slot.done() and not slot.cancelled():
                                    node = slot.result()
                                    if node is not None:
                                        self._to_start -= 1
                                else:
                                    node = None
                                    with contextlib.suppress(ValueError):
                                        self._parked.remove(slot)
                                if node is not None and node.state is NodeState.READY:
                                    self._closing = True
                                    self._settle(
                                        node, NodeState.CANCELLED, reason=self._close_reason
                                    )
                                node = None
                                raise
                        if node is None or node.state is not READY:
                            node = None  # woken to leave, or cancelled while it waited
                            continue
                        if self._running < self._max_parallel and not self._slot_waiters:
                            self._running += 1
                        else:  # fire_and_forget actions hold the slots
                            await self._wait_slot()
                            if node.state is not READY:  # cancelled while it waited
                                self._release_slot()
                                node = None
                                continue
                        held = True
                        node.scope = scope
                        node.state = RUNNING
                        node.started_at = _now()
                        action = node.action
                        self.emit(started_event(action.id, self.clock()))
                        if (
                            node.has_refs
                            or action.retries > 0
                            or action.timeout
                            or self._action_timeout
                        ):
                            try:
                                result = await self._attempts(node)
                            except _Failure as exc:
                                failure = str(exc)
                            except Exception as exc:  # defensive: _attempts maps errors
                                failure = _describe(exc)
                        else:
                            # One plain attempt, as _attempts would run it, inlined:
                            # one coroutine less on the dispatch path.
                            node.attempts = 1
                            try:
                                result = await self._execute(action, action.body)
                            except (UnknownActionError, VariableReferenceError) as exc:
                                failure = str(exc)
                            except Exception as exc:
                                failure = _describe(exc)
                                node.traceback = own_traceback(exc)
                except anyio.get_cancelled_exc_class():
                    # Cancelled from outside the node's own scope: the whole
                    # group is going down, so dependents are cancelled too.
                    if held:
                        self._release_slot()
                    if node is not None:
                        self._closing = True
                        if not node.terminal:
                            self._settle(node, NodeState.CANCELLED, reason=self._close_reason)
                    raise
                if held:
                    self._release_slot()
                if node is not None:
                    self._finish(node, scope, result, failure)
        finally:
            self._workers -= 1

    async def _run_node(self, node: ActionNode) -> None:
        """Run a ``fire_and_forget`` action in its own task, once it has a slot."""
        if node.state is not NodeState.READY:
            return  # cancelled before it started
        scope = node.scope if node.scope is not None else anyio.CancelScope()
        node.scope = scope
        if self.deadline is not None:
            # It may outlive the run, not the run's wall time.
            scope.deadline = min(scope.deadline, self.deadline)
        held = False
        try:
            failure: str | None = None
            result: Any = None
            with scope:
                if self._running < self._max_parallel and not self._slot_waiters:
                    self._running += 1
                else:
                    await self._wait_slot()
                held = True
                if node.state is NodeState.READY:  # not cancelled while it waited
                    node.state = NodeState.RUNNING
                    node.started_at = _now()
                    self.emit(started_event(node.id, self.clock()))
                    try:
                        result = await self._attempts(node)
                    except _Failure as exc:
                        failure = str(exc)
                    except Exception as exc:  # defensive: _attempts maps errors already
                        failure = _describe(exc)
            if held:
                held = False
                self._release_slot()
            if scope.cancel_called and self._past_deadline() and not node.terminal:
                self._settle(node, NodeState.CANCELLED, reason=WALL_TIME_CANCEL)
            self._finish(node, scope, result, failure)
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside the node's own scope: the whole group is
            # going down, so dependents are cancelled too, not "skipped".
            self._closing = True
            if not node.terminal:
                self._settle(node, NodeState.CANCELLED, reason=self._close_reason)
            raise
        finally:
            if held:
                self._release_slot()

    def _past_deadline(self) -> bool:
        return self.deadline is not None and anyio.current_time() >= self.deadline

    def _finish(
        self, node: ActionNode, scope: anyio.CancelScope, result: Any, failure: str | None
    ) -> None:
        if failure is not None:
            self._settle(node, NodeState.FAILED, reason=failure)
        elif scope.cancelled_caught or scope.cancel_called:
            self._settle(node, NodeState.CANCELLED, reason=self._close_reason)
        else:
            if isinstance(result, Shown):
                node.result, node.shown = result.value, result.text
            else:
                node.result = result
            self._settle(node, NodeState.SUCCEEDED)

    async def _attempts(self, node: ActionNode) -> Any:
        action = node.action
        body = action.body
        if node.has_refs:
            try:
                body = substitute(action.body, self.variables.lookup)
            except VariableReferenceError as exc:
                node.attempts = 1
                raise _Failure(str(exc)) from None
        total = max(0, action.retries) + 1
        message = ""
        for attempt in range(1, total + 1):
            node.attempts = attempt
            if attempt > 1:
                self.emit(ActionStarted(t=self.clock(), id=node.id, attempt=attempt))
            timeout = action.timeout if action.timeout else self._action_timeout
            try:
                if timeout is not None and timeout > 0:
                    with anyio.move_on_after(timeout) as limit:
                        return await self._execute(action, body)
                    if limit.cancelled_caught:
                        message = _timed_out(timeout, default=not action.timeout)
                else:
                    return await self._execute(action, body)
            except (UnknownActionError, VariableReferenceError) as exc:
                raise _Failure(str(exc)) from None  # retrying cannot help
            except Exception as exc:
                message = _describe(exc)
                node.traceback = own_traceback(exc)
            if attempt < total:
                delay = min(self._retry_cap, self._retry_base * 2 ** (attempt - 1))
                await anyio.sleep(delay * random.uniform(0.5, 1.5))
        if total > 1:
            message += f" (attempt {total} of {total}: retries exhausted)"
        raise _Failure(message)

    # ---------------------------------------------------------------- settle

    def _reject(self, node: ActionNode, message: str) -> None:
        self.emit(
            ActionErrorEvent(
                span=(0, 0),
                t=self.clock(),
                id=node.id,
                message=message,
                raw_body=node.action.raw_body,
            )
        )
        self._settle(node, NodeState.REJECTED, reason=message, emit=False)

    def _skip_reason(self, dep: ActionNode) -> str:
        verb = {
            NodeState.FAILED: "failed",
            NodeState.CANCELLED: "was cancelled",
            NodeState.SKIPPED: "was skipped",
            NodeState.REJECTED: "was rejected",
        }.get(dep.state, "did not succeed")
        detail = f": {dep.error}" if dep.error else ""
        return f"dependency '{dep.id}' {verb}{detail}"

    def _settle(  # noqa: C901, PLR0912 (hot path)
        self, first: ActionNode, state: NodeState, *, reason: str = "", emit: bool = True
    ) -> None:
        # Iterative, so a failure at the head of a 10,000-long chain cannot
        # overflow the stack while it skips every dependent.
        work: list[tuple[ActionNode, NodeState, str, bool]] = [(first, state, reason, emit)]
        while work:
            node, state, reason, emit = work.pop()
            if node.terminal:
                continue
            node.state = state
            node.finished_at = _now()
            node.error = reason
            if node._done is not None:
                node._done.set()
            t = self.clock()
            duration = node.finished_at - node.started_at if node.started_at else 0.0
            if state is NodeState.SUCCEEDED:
                bound = self.variables.bind_result(node.action, node.result, t=t)
                if emit:
                    self.emit(
                        ActionSucceeded(
                            t=t, id=node.id, preview=preview(node.read), duration=duration
                        )
                    )
                for event in bound:
                    self.emit(event)
            elif emit:
                self.emit(self._terminal_event(node, t, duration))
            if state is NodeState.FAILED and not node.awaited:
                log.warning("fire_and_forget action %s failed: %s", node.id, reason)
            if node.awaited:
                self._settled.append(node)
                self._open -= 1
                if self._open == 0:
                    self._idle.set()
                    self._unpark_all()  # let idle workers leave
            if state is NodeState.SUCCEEDED:
                node_id = node.action.id
                for dependent in node.dependents:
                    if dependent.state in TERMINAL:
                        continue
                    waiting = dependent.waiting
                    waiting.discard(node_id)
                    if not waiting and not dependent.missing:
                        self._make_ready(dependent)
                continue
            for dependent in node.dependents:
                if dependent.state in TERMINAL:
                    continue
                if self._closing:
                    work.append((dependent, NodeState.CANCELLED, self._close_reason, True))
                else:
                    work.append((dependent, NodeState.SKIPPED, self._skip_reason(node), True))

    def _terminal_event(self, node: ActionNode, t: float, duration: float) -> RuntimeEvent:
        if node.state is NodeState.FAILED:
            return ActionFailed(
                t=t,
                id=node.id,
                error=node.error,
                duration=duration,
                attempts=node.attempts,
                traceback=node.traceback or None,
            )
        if node.state is NodeState.SKIPPED:
            return ActionSkipped(t=t, id=node.id, reason=node.error)
        return ActionCancelled(
            t=t, id=node.id, reason=node.error or "cancelled", unstopped=self.unstopped.get(node.id)
        )


def _timed_out(seconds: float, *, default: bool) -> str:
    """The failure message of an attempt that ran out of time."""
    message = f"timed out after {seconds:g} s"
    if default:
        message += " (the default limit, limits.action_timeout; an action's timeout overrides it)"
    stuck = abandoned_threads()
    if stuck:
        message += (
            f"; {stuck} worker thread(s) of sync tools could not be stopped and still run "
            "(Python cannot kill a thread: make long tools async or a subprocess)"
        )
    return message


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, ActionError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

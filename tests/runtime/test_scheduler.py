"""The eager scheduler: dependencies, modes, faults, cancellation, invariants."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol.models import Action, ActionMode, ActionType
from cortex_kernel.protocol.parser_events import ActionErrorEvent
from cortex_kernel.runtime.scheduler import NodeState, Scheduler
from cortex_kernel.runtime.variables import VariableStore

pytestmark = pytest.mark.anyio

Handler = Callable[[Action, dict[str, Any]], Awaitable[Any]]


def act(
    id: str,
    *deps: str,
    mode: ActionMode = ActionMode.ASYNC,
    body: dict[str, Any] | None = None,
    **kw: Any,
) -> Action:
    return Action(
        id=id,
        type=ActionType.TOOL,
        mode=mode,
        depends_on=deps,
        body=body if body is not None else {"name": "t", "parameters": {}},
        **kw,
    )


class Harness:
    def __init__(self, handler: Handler) -> None:
        self.events: list[Any] = []
        self.handler = handler
        self.t0 = time.perf_counter()
        self.store = VariableStore()
        self.log: list[tuple[str, str]] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)

    def types(self, action_id: str) -> list[str]:
        return [e.type for e in self.events if getattr(e, "id", None) == action_id]

    def make(self, tg: Any, *, cls: type[Scheduler] = Scheduler, **kw: Any) -> Scheduler:
        async def execute(action: Action, body: dict[str, Any]) -> Any:
            self.log.append(("start", action.id))
            try:
                return await self.handler(action, body)
            finally:
                self.log.append(("end", action.id))

        return cls(
            tg,
            execute=execute,
            variables=self.store,
            emit=self.emit,
            clock=lambda: time.perf_counter() - self.t0,
            retry_base=0.001,
            **kw,
        )


async def sleepy(action: Action, body: dict[str, Any]) -> Any:
    await anyio.sleep(float(body.get("parameters", {}).get("d", 0.01)))
    return body.get("parameters", {}).get("value", action.id)


async def test_dependencies_and_results() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", body={"name": "t", "parameters": {"value": 1}}, output_key="x"))
        s.submit(act("b", "a", body={"name": "t", "parameters": {"value": "$x"}}))
        s.submit(act("c", body={"name": "t", "parameters": {"value": "got $b and $a"}}))
        await s.wait_all()
    assert s.nodes["b"].result == 1
    assert s.nodes["c"].result == "got 1 and 1"
    assert set(s.nodes["c"].deps) == {"a", "b"}  # implicit from references
    assert h.store.values["x"] == 1 and h.store.by_id["a"] == 1
    assert any(e.type == "variable_bound" and e.name == "x" for e in h.events)
    assert h.log.index(("end", "a")) < h.log.index(("start", "b"))


async def test_eager_not_waves() -> None:
    # a(0.05) -> c ; b(0.3): c must start long before b ends
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", body={"name": "t", "parameters": {"d": 0.05}}))
        s.submit(act("b", body={"name": "t", "parameters": {"d": 0.3}}))
        s.submit(act("c", "a", body={"name": "t", "parameters": {"d": 0.01}}))
        await s.wait_all()
    assert s.nodes["c"].finished_at < s.nodes["b"].finished_at - 0.1


async def test_raising_tool_fails_and_skips_dependents() -> None:
    async def boom(action: Action, body: dict[str, Any]) -> Any:
        if action.id == "a":
            raise ValueError("bad input")
        return 1

    h = Harness(boom)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a"))
        s.submit(act("b", "a"))
        s.submit(act("c", "b"))
        s.submit(act("d"))
        with anyio.fail_after(2):
            await s.wait_all()
    assert s.nodes["a"].state is NodeState.FAILED
    assert "ValueError: bad input" in s.nodes["a"].error
    assert s.nodes["b"].state is NodeState.SKIPPED
    assert "dependency 'a' failed" in s.nodes["b"].error
    assert s.nodes["c"].state is NodeState.SKIPPED
    assert s.nodes["d"].state is NodeState.SUCCEEDED
    assert h.types("b") == ["action_queued", "action_skipped"]


async def test_timeout_message() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", body={"name": "t", "parameters": {"d": 5}}, timeout=0.05))
        with anyio.fail_after(2):
            await s.wait_all()
    assert s.nodes["a"].state is NodeState.FAILED
    assert "timed out after 0.05 s" in s.nodes["a"].error


async def test_retry_that_succeeds() -> None:
    calls = {"n": 0}

    async def flaky(action: Action, body: dict[str, Any]) -> Any:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("flaky")
        return "ok"

    h = Harness(flaky)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", retries=3))
        await s.wait_all()
    assert s.nodes["a"].state is NodeState.SUCCEEDED
    assert s.nodes["a"].attempts == 3
    started = [e for e in h.events if e.type == "action_started"]
    assert [e.attempt for e in started] == [1, 2, 3]


async def test_retries_exhausted_message() -> None:
    async def always(action: Action, body: dict[str, Any]) -> Any:
        raise RuntimeError("down")

    h = Harness(always)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", retries=2))
        await s.wait_all()
    assert s.nodes["a"].error == "RuntimeError: down (attempt 3 of 3: retries exhausted)"
    assert s.nodes["a"].attempts == 3


async def test_missing_dependency_waits_then_skips_at_end_of_turn() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("b", "later"))
        s.submit(act("c", "never"))
        await anyio.sleep(0.02)
        assert s.nodes["b"].state is NodeState.WAITING
        s.submit(act("later"))
        s.end_turn()
        await s.wait_all()
    assert s.nodes["b"].state is NodeState.SUCCEEDED
    assert s.nodes["c"].state is NodeState.SKIPPED
    assert "never appeared" in s.nodes["c"].error


async def test_cycle_is_action_error_for_closing_action() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", "b"))
        s.submit(act("b", "a"))
        s.submit(act("self", "self"))
        s.end_turn()
        await s.wait_all()
    errors = [e for e in h.events if isinstance(e, ActionErrorEvent)]
    assert [e.id for e in errors] == ["b", "self"]
    assert "cycle: b -> a -> b" in errors[0].message
    assert s.nodes["b"].state is NodeState.REJECTED
    assert s.nodes["a"].state is NodeState.SKIPPED


async def test_duplicate_id_is_rejected() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        assert s.submit(act("a")) is not None
        assert s.submit(act("a")) is None
        await s.wait_all()
    assert any(isinstance(e, ActionErrorEvent) and "duplicate" in e.message for e in h.events)


async def test_missing_reference_fails_only_that_action() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", body={"name": "t", "parameters": {"value": "$nothing"}}))
        s.submit(act("b"))
        await s.wait_all()
    assert s.nodes["a"].state is NodeState.FAILED
    assert "$nothing names no variable" in s.nodes["a"].error
    assert s.nodes["b"].state is NodeState.SUCCEEDED


async def test_validate_rejects() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg, validate=lambda a: "unknown tool 'x'" if a.id == "a" else None)
        s.submit(act("a"))
        s.submit(act("b", "a"))
        await s.wait_all()
    assert s.nodes["a"].state is NodeState.REJECTED
    assert s.nodes["b"].state is NodeState.SKIPPED


async def test_max_parallel() -> None:
    running = {"now": 0, "peak": 0}

    async def count(action: Action, body: dict[str, Any]) -> Any:
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await anyio.sleep(0.01)
        running["now"] -= 1

    h = Harness(count)
    async with anyio.create_task_group() as tg:
        s = h.make(tg, max_parallel=3)
        for i in range(12):
            s.submit(act(f"a{i}"))
        await s.wait_all()
    assert running["peak"] == 3


async def test_cancel_all_unwinds_every_running_action() -> None:
    # The tools never return on their own: the test ends only if cancel_all
    # really stops them (no wall-clock bound needed).
    async def forever(action: Action, body: dict[str, Any]) -> Any:
        await anyio.sleep_forever()

    h = Harness(forever)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        for i in range(20):
            s.submit(act(f"a{i}"))
        s.submit(act("dep", "a0"))
        while sum(1 for x in h.log if x[0] == "start") < 16:
            await anyio.lowlevel.checkpoint()
        s.cancel_all("run cancelled")
    assert all(n.state is NodeState.CANCELLED for n in s.nodes.values())
    assert h.types("dep") == ["action_queued", "action_cancelled"]
    starts = [x for x in h.log if x[0] == "start"]
    ends = [x for x in h.log if x[0] == "end"]
    assert len(starts) == len(ends) == 16  # every started tool was unwound; 4 never got a slot


async def test_outer_cancellation_marks_running_cancelled() -> None:
    h = Harness(sleepy)
    with anyio.move_on_after(0.05):
        async with anyio.create_task_group() as tg:
            s = h.make(tg)
            s.submit(act("a", body={"name": "t", "parameters": {"d": 30}}))
            await s.wait_all()
    assert s.nodes["a"].state is NodeState.CANCELLED
    assert h.types("a")[-1] == "action_cancelled"


async def test_fire_and_forget_runs_in_background_group() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as background:
        async with anyio.create_task_group() as tg:
            s = h.make(tg, background=background)
            s.submit(
                act(
                    "f",
                    mode=ActionMode.FIRE_AND_FORGET,
                    body={"name": "t", "parameters": {"d": 0.1}},
                )
            )
            s.submit(act("a"))
            await s.wait_all()
            assert s.nodes["f"].state is NodeState.RUNNING
            assert [n.id for n in s.take_settled()] == ["a"]
            tg.cancel_scope.cancel()
        assert s.nodes["f"].state is NodeState.RUNNING  # outlived the run's group
    assert s.nodes["f"].state is NodeState.SUCCEEDED


async def test_dispatch_is_immediate() -> None:
    h = Harness(sleepy)
    async with anyio.create_task_group() as tg:
        s = h.make(tg)
        s.submit(act("a", body={"name": "t", "parameters": {"d": 0.02}}))
        s.submit(act("b", "a", body={"name": "t", "parameters": {"d": 0}}))
        await s.wait_all()
    latency = s.nodes["b"].dispatch_latency
    assert latency is not None and latency >= 0


# --------------------------------------------------------------- properties


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[tuple[str, tuple[str, ...], bool, int]], list[int]]:
    n = draw(st.integers(1, 25))
    nodes = []
    for i in range(n):
        # dependencies may point forward (arrive later) or at unknown ids
        deps = draw(
            st.lists(st.integers(0, n + 1), max_size=3, unique=True).map(
                lambda xs, i=i: tuple(f"n{x}" for x in xs if x != i)
            )
        )
        fails = draw(st.booleans()) and draw(st.booleans())
        nodes.append((f"n{i}", deps, fails, draw(st.integers(0, 3))))
    order = draw(st.permutations(list(range(n))))
    return nodes, order


PlannedNode = tuple[str, tuple[str, ...], bool, int]
TERMINAL_EVENTS = {"action_succeeded", "action_failed", "action_skipped", "action_cancelled"}


def planned(
    nodes: list[PlannedNode], ms_per_unit: int
) -> Callable[[Action, dict[str, Any]], Awaitable[Any]]:
    """A handler that sleeps each node's planned time and fails where planned."""
    spec = {name: (fails, d) for name, _, fails, d in nodes}

    async def handler(action: Action, body: dict[str, Any]) -> Any:
        fails, d = spec[action.id]
        await anyio.sleep(d * ms_per_unit / 1000)
        if fails:
            raise RuntimeError("planned failure")
        return action.id

    return handler


def assert_one_end(h: Harness, s: Scheduler, name: str) -> None:
    """The node settled, and exactly one terminal event (or action_error) says so."""
    assert s.nodes[name].terminal
    ends = [t for t in h.types(name) if t in TERMINAL_EVENTS or t == "action_error"]
    assert len(ends) == 1, (name, h.types(name))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_random_dags_invariants(
    dag: tuple[list[tuple[str, tuple[str, ...], bool, int]], list[int]],
) -> None:
    nodes, order = dag
    handler = planned(nodes, ms_per_unit=1)

    async def main() -> tuple[Harness, Scheduler]:
        h = Harness(handler)
        async with anyio.create_task_group() as tg:
            s = h.make(tg, max_parallel=4)
            for index in order:
                name, deps, _, _ = nodes[index]
                s.submit(act(name, *deps))
                await anyio.lowlevel.checkpoint()
            s.end_turn()
            with anyio.fail_after(5):
                await s.wait_all()
        return h, s

    h, s = anyio.run(main)
    for name, deps, fails, _ in nodes:
        node = s.nodes[name]
        assert_one_end(h, s, name)
        if node.state is NodeState.SUCCEEDED:
            assert not fails
            for dep in deps:
                dep_node = s.nodes[dep]
                assert dep_node.state is NodeState.SUCCEEDED
                assert dep_node.finished_at <= node.started_at
        if node.state is NodeState.FAILED:
            assert fails


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.integers(0, 30))
def test_random_dags_cancelled_midway(
    dag: tuple[list[tuple[str, tuple[str, ...], bool, int]], list[int]], cancel_ms: int
) -> None:
    nodes, order = dag
    handler = planned(nodes, ms_per_unit=5)

    async def main() -> tuple[Harness, Scheduler]:
        h = Harness(handler)
        async with anyio.create_task_group() as tg:
            s = h.make(tg, max_parallel=3)
            for index in order:
                name, deps, _, _ = nodes[index]
                s.submit(act(name, *deps))
            await anyio.sleep(cancel_ms / 1000)
            s.cancel_all("stop")
            with anyio.fail_after(1):
                await s.wait_all()
        return h, s

    h, s = anyio.run(main)
    for name, *_ in nodes:
        assert_one_end(h, s, name)
    # every started tool call was unwound: no task is left running
    assert sum(1 for x in h.log if x[0] == "start") == sum(1 for x in h.log if x[0] == "end")


def test_idle_collection_runs_the_young_pass_only_when_due() -> None:
    import gc

    from cortex_kernel.runtime.nodes import collect_young_if_due

    passes: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()
    gc.callbacks.append(watch)
    try:
        collect_young_if_due()
        assert passes == []  # just collected: nothing is due
        for _ in range(gc.get_threshold()[1]):
            gc.collect(0)
        passes.clear()
        collect_young_if_due()
        assert passes == [1]
        assert gc.get_count()[1] == 0
    finally:
        gc.callbacks.remove(watch)


async def test_idle_workers_collect_after_a_fan_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: dependents made ready by a settling dependency were not
    # counted as "to start", so after a fan-out the count went negative and
    # the idle collection never ran again for the rest of the run.
    import cortex_kernel.runtime.scheduler as scheduler_module

    idle: list[int] = []
    monkeypatch.setattr(scheduler_module, "collect_young_if_due", lambda: idle.append(1))
    gate = anyio.Event()

    async def handler(action: Action, body: dict[str, Any]) -> Any:
        if action.id == "hold":
            await gate.wait()  # keeps the run open, so workers park rather than leave
        return action.id

    h = Harness(handler)
    async with anyio.create_task_group() as tg:
        s = h.make(tg, max_parallel=4)
        s.submit(act("hold"))
        s.submit(act("root"))
        for i in range(20):
            s.submit(act(f"leaf{i}", "root"))
        await s.wait([f"leaf{i}" for i in range(20)])
        for _ in range(5):
            await anyio.lowlevel.checkpoint()  # let the idle workers park
        idle.clear()
        s.submit(act("late"))
        await s.wait(["late"])
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        assert idle, "no worker saw the scheduler idle after the fan-out"
        gate.set()
        await s.wait_all()
    assert all(n.state is NodeState.SUCCEEDED for n in s.nodes.values())

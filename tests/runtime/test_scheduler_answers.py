"""Scheduler property tests that know the answer.

A DAG is generated together with each action's outcome (succeeds or raises)
and an arrival order (so a dependency may arrive after its dependent, or
never). The expected end state of every action follows from those alone:

- every action whose dependencies all succeed runs exactly once, after each
  of them ended, and succeeds or fails as planned;
- every other action never runs and is skipped with a reason that names one
  of its dependencies that did not succeed, in that dependency's own words
  ("failed", "was skipped", "never appeared in the turn").

The last tests run the same check against deliberately broken schedulers and
show that it catches each of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol.models import Action
from cortex_kernel.runtime.scheduler import ActionNode, NodeState, Scheduler

from .test_scheduler import Harness, act


@dataclass(frozen=True)
class Plan:
    """An acyclic DAG with outcomes and an arrival order."""

    deps: dict[str, tuple[str, ...]]  # may name ids that never arrive
    fails: frozenset[str]
    order: tuple[str, ...]
    max_parallel: int

    def expected(self) -> dict[str, NodeState]:
        state: dict[str, NodeState] = {}
        for name in sorted(self.deps, key=lambda n: int(n[1:])):  # deps have lower indices
            ok = all(state.get(dep) is NodeState.SUCCEEDED for dep in self.deps[name])
            if not ok:
                state[name] = NodeState.SKIPPED
            elif name in self.fails:
                state[name] = NodeState.FAILED
            else:
                state[name] = NodeState.SUCCEEDED
        return state


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    n = draw(st.integers(1, 20))
    deps: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        # Lower indices only (so no cycle), plus ids that never arrive ("x…").
        known = st.integers(0, i - 1).map(lambda j: f"n{j}") if i else st.nothing()
        unknown = st.integers(0, 1).map(lambda j: f"x{j}")
        chosen = draw(st.lists(known | unknown, max_size=3, unique=True))
        deps[f"n{i}"] = tuple(chosen)
    fails = frozenset(name for name in deps if draw(st.integers(0, 4)) == 0)
    order = tuple(draw(st.permutations(sorted(deps))))
    return Plan(deps, fails, order, draw(st.integers(1, 4)))


async def run_plan(plan: Plan, cls: type[Scheduler] = Scheduler) -> tuple[Harness, Scheduler]:
    async def handler(action: Action, body: dict[str, Any]) -> Any:
        await anyio.lowlevel.checkpoint()  # let others interleave
        if action.id in plan.fails:
            raise RuntimeError("planned failure")
        return action.id

    h = Harness(handler)
    async with anyio.create_task_group() as tg:
        s = h.make(tg, cls=cls, max_parallel=plan.max_parallel)
        for name in plan.order:
            s.submit(act(name, *plan.deps[name]))
            await anyio.lowlevel.checkpoint()
        s.end_turn()
        with anyio.fail_after(10):
            await s.wait_all()
    return h, s


def check(plan: Plan, h: Harness, s: Scheduler) -> None:
    expected = plan.expected()
    starts = [i for i, (what, _) in enumerate(h.log) if what == "start"]
    started = [h.log[i][1] for i in starts]
    end_at = {name: i for i, (what, name) in enumerate(h.log) if what == "end"}
    for name, state in expected.items():
        node: ActionNode = s.nodes[name]
        assert node.state is state, (name, node.state, state)
        ends = [t for t in h.types(name) if t.startswith("action_") and t not in _NON_TERMINAL]
        assert ends == [f"action_{state.value}"], (name, h.types(name))
        if state is NodeState.SKIPPED:
            assert name not in started, f"{name} ran although a dependency did not succeed"
            culprits = {
                dep: expected.get(dep)
                for dep in plan.deps[name]
                if expected.get(dep) is not NodeState.SUCCEEDED
            }
            assert any(_names(node.error, dep, culprit) for dep, culprit in culprits.items()), (
                name,
                node.error,
                culprits,
            )
        else:
            assert started.count(name) == 1, f"{name} ran {started.count(name)} times"
            start = starts[started.index(name)]
            for dep in plan.deps[name]:
                assert end_at[dep] < start, f"{name} started before {dep} ended"
            if state is NodeState.FAILED:
                assert "planned failure" in node.error


_NON_TERMINAL = {"action_queued", "action_started"}
_WORDS = {NodeState.FAILED: "failed", NodeState.SKIPPED: "was skipped"}


def _names(reason: str, dep: str, state: NodeState | None) -> bool:
    if state is None:  # never arrived
        return reason == f"dependency '{dep}' never appeared in the turn"
    return reason.startswith(f"dependency '{dep}' {_WORDS[state]}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_every_action_ends_as_its_dependencies_dictate(plan: Plan) -> None:
    h, s = anyio.run(run_plan, plan)
    check(plan, h, s)


# ------------------------------------------------- the check catches broken schedulers


class SkipsEverything(Scheduler):
    """Settles every ready action as skipped instead of running it."""

    def _make_ready(self, node: ActionNode) -> None:
        self._settle(node, NodeState.SKIPPED, reason="dependency 'n0' failed")


class IgnoresDependencies(Scheduler):
    """Submits every action as if it had no dependencies."""

    def submit(self, action: Action) -> ActionNode | None:
        return super().submit(replace(action, depends_on=()))


class RunsTwice(Scheduler):
    """Runs every action a second time after it succeeded."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        execute = kw["execute"]

        async def twice(action: Action, body: dict[str, Any]) -> Any:
            await execute(action, body)
            return await execute(action, body)

        kw["execute"] = twice
        super().__init__(*args, **kw)


class WrongReason(Scheduler):
    """Skips dependents with a reason that names no dependency."""

    def _skip_reason(self, dep: ActionNode) -> str:
        return "skipped"


# A plan every broken scheduler gets wrong: n1 needs n0 (succeeds), n2 needs
# n1 and an id that never arrives, n3 needs n2 and fails nothing.
FIXED = Plan(
    deps={"n0": (), "n1": ("n0",), "n2": ("n1", "x0"), "n3": ("n2",), "n4": ("n0",)},
    fails=frozenset({"n4"}),
    order=("n3", "n2", "n1", "n0", "n4"),
    max_parallel=2,
)


@pytest.mark.parametrize("broken", [SkipsEverything, IgnoresDependencies, RunsTwice, WrongReason])
def test_the_check_catches_a_broken_scheduler(broken: type[Scheduler]) -> None:
    check(FIXED, *anyio.run(run_plan, FIXED))  # the real scheduler passes
    h, s = anyio.run(run_plan, FIXED, broken)
    with pytest.raises(AssertionError):
        check(FIXED, h, s)

"""``fire_and_forget`` actions are held to their run's limits.

They take a ``max_parallel`` slot like any action, end at the run's wall
time even after the run has answered, and an interrupt stops them with the
run; what cannot be stopped (a sync tool's thread) is named in the report.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.runtime.limits import Limits
from cortex_kernel.runtime.session import Session
from cortex_kernel.runtime.tools import ToolRegistry

from .fakes import ScriptedModel

pytestmark = pytest.mark.anyio


class Gauge:
    """How many ``hold`` calls run now, and the most that ever ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.two_running = anyio.Event()
        self.release = anyio.Event()  # never set: only cancellation ends a call
        self.thread_started = anyio.Event()
        self.thread_release = threading.Event()


def registry(gauge: Gauge) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def hold() -> None:
        """Run until cancelled, counted."""
        with gauge.lock:
            gauge.now += 1
            gauge.most = max(gauge.most, gauge.now)
            if gauge.now >= 2:
                gauge.two_running.set()
        try:
            await gauge.release.wait()
        finally:
            with gauge.lock:
                gauge.now -= 1

    @tools.register
    def block() -> None:
        """A sync tool: its thread cannot be stopped."""
        anyio.from_thread.run_sync(gauge.thread_started.set)
        gauge.thread_release.wait(30)

    return tools


def call(name: str, action_id: str, mode: str = "fire_and_forget") -> str:
    body = json.dumps({"name": name, "parameters": {}})
    return f'<action type="tool" mode="{mode}" id="{action_id}">{body}</action>'


def session(turn: str, gauge: Gauge, tmp_path: Path, **limits: Any) -> Session:
    model = ScriptedModel([turn])
    return build_session(
        model, tools=registry(gauge), transcript_dir=tmp_path, limits=Limits(**limits)
    )


def cancelled(events: list[Any]) -> dict[str, str]:
    return {e.id: e.reason for e in events if e.type == "action_cancelled"}


async def test_fire_and_forget_takes_a_slot_and_ends_at_the_wall_time(tmp_path: Path) -> None:
    gauge = Gauge()
    turn = "".join(call("hold", f"f{i}") for i in range(6)) + "<response>started</response>"
    seen: list[Any] = []
    async with session(turn, gauge, tmp_path, max_parallel=2, wall_time=1.0) as s:
        result = await s.run("start six", on_event=seen.append)
        assert result.status == "ok", result.message  # the run answers; its work goes on
        with anyio.fail_after(20):  # a guard: without the deadline they never end
            await s.drain()
        assert gauge.most == 2
        assert gauge.now == 0
    reasons = cancelled(seen)
    assert sorted(reasons) == [f"f{i}" for i in range(6)]
    assert all("wall time" in reason for reason in reasons.values()), reasons
    started = [e.id for e in seen if e.type == "action_started"]
    assert len(started) == 2  # the other four never got a slot before the deadline


async def test_an_interrupt_stops_fire_and_forget_actions(tmp_path: Path) -> None:
    gauge = Gauge()
    # Four in the background and one the run waits for, under max_parallel 2.
    turn = "".join(call("hold", f"f{i}") for i in range(4)) + call("hold", "s", mode="sync")
    seen: list[Any] = []
    waiting = anyio.Event()  # the run waits for "s", which waits for a slot

    def on_event(event: Any) -> None:
        seen.append(event)
        if event.type == "action_queued" and event.id == "s":
            waiting.set()

    async with session(turn, gauge, tmp_path, max_parallel=2) as s:
        with anyio.CancelScope() as interrupt:  # what the kernel's stop button cancels

            async def press_stop() -> None:
                await gauge.two_running.wait()
                await waiting.wait()
                interrupt.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(press_stop)
                await s.run("start them", on_event=on_event)
        assert interrupt.cancelled_caught
        # Stopped by the time the run reports, while the session is still open.
        assert gauge.now == 0
        assert gauge.most == 2
        assert s.last_result is not None and s.last_result.status == "cancelled"
        assert s.last_result.unstopped == []
    assert sorted(cancelled(seen)) == ["f0", "f1", "f2", "f3", "s"]


async def test_the_interrupt_report_names_a_thread_it_cannot_stop(tmp_path: Path) -> None:
    gauge = Gauge()
    turn = call("block", "t") + call("hold", "s", mode="sync")
    async with session(turn, gauge, tmp_path) as s:
        try:
            with anyio.CancelScope() as interrupt:

                async def press_stop() -> None:
                    await gauge.thread_started.wait()
                    interrupt.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(press_stop)
                    await s.run("block")
            result = s.last_result
            assert result is not None and result.status == "cancelled"
            assert "could not be stopped" in result.message and "t (tool 'block'" in result.message
            assert len(result.unstopped) == 1
            assert result.unstopped[0].startswith("t (tool 'block'")
        finally:
            gauge.thread_release.set()  # let the thread end

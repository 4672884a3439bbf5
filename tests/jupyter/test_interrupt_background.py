"""The stop button stops a cell's ``fire_and_forget`` actions too, in a real kernel."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jupyter.conftest import Kernel, sleeps
from tests.replays import write_turns

pytestmark = pytest.mark.kernel


@pytest.fixture
def kernel(cortex_kernelspec: str) -> Iterator[Kernel]:
    k = Kernel(cortex_kernelspec, dict(os.environ))
    yield k
    k.shutdown()


def nap(action_id: str, mode: str) -> str:
    return f'<action type="tool" mode="{mode}" id="{action_id}">{{"name": "nap"}}</action>'


def test_an_interrupt_leaves_no_fire_and_forget_process(kernel: Kernel, tmp_path: Path) -> None:
    # Four naps in the background and one the run waits for, under max_parallel 2.
    turn = "".join(nap(f"f{i}", "fire_and_forget") for i in range(4)) + nap("s", "sync")
    replay = tmp_path / "turns.jsonl"
    replay.write_text(
        "".join(json.dumps({"content": t}) + "\n" for t in (turn, "<response>never</response>")),
        encoding="utf-8",
    )
    manifest = tmp_path / "agent.json"
    manifest.write_text(
        json.dumps(
            {
                "model": f"replay:{replay}",
                "tools": [{"name": "nap", "command": ["sleep", "60"]}],
                "limits": {"max_parallel": 2},
            }
        ),
        encoding="utf-8",
    )
    kernel.python(f"%manifest {manifest}")
    msg_id = kernel.send("nap")
    kernel.wait_for_op(msg_id, "n", "f1", "running", timeout=30)
    deadline = time.monotonic() + 20
    while len(sleeps(kernel.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the process table: no event tells when a child exists
    assert len(sleeps(kernel.pid)) >= 2, "the background naps never started"
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted"
    assert sleeps(kernel.pid) == []  # stopped before the cell's reply, none left behind
    final = result.of_type("update_display_data")[-1]["content"]["data"]["text/plain"]
    assert "f0 tool nap (fire_and_forget): cancelled" in final
    assert "f1 tool nap (fire_and_forget): cancelled" in final
    assert kernel.python("%%python\nprint('alive')").strip() == "alive"


BLOCKING_TOOL = '''%%python
import sys, threading
from cortex_kernel import tool

gate, finished = threading.Event(), threading.Event()

@tool
def block() -> str:
    """Wait for the gate."""
    sys.stderr.write("blocking\\n")
    try:
        gate.wait()
        return "opened"
    finally:
        finished.set()
'''


def test_a_sync_tool_that_cannot_be_stopped_is_reported_as_still_running(
    kernel: Kernel, tmp_path: Path
) -> None:
    replay = tmp_path / "turns.jsonl"
    turns = ('<action type="tool" id="t">{"name": "block"}</action>', "<response>x</response>")
    write_turns(replay, *turns)
    assert kernel.run(BLOCKING_TOOL).status == "ok"
    kernel.python(f"%model replay:{replay}")
    msg_id = kernel.send("block")
    kernel.wait_for_stream(msg_id, "blocking", timeout=30)
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted"
    # The cell, the view and _run all say the thread runs on, and what that means.
    assert "still running: t (tool 'block'" in result.reply["content"]["evalue"]
    warnings = [op[1] for op in result.widget_ops() if op[0] == "w"]
    assert any("may still have effects" in w and "t (tool 'block'" in w for w in warnings), warnings
    assert "t (tool 'block'" in kernel.python("%%python\nprint(_run.unstopped)")
    # The tree too: its node reads still running, with what that means, not cancelled.
    states = [op["state"] for op in kernel.ops_of(result, "t") if "state" in op]
    assert states[-1] == "still running", states  # the live widget's node
    final = result.of_type("update_display_data")[-1]["content"]["data"]
    line = next(x for x in final["text/plain"].splitlines() if "t tool block" in x)
    assert "still running — could not be stopped; it may still change things" in line, line
    assert "cancelled" not in line
    html = final["text/html"]
    assert "block</code> still running" in html
    assert "could not be stopped; it may still change things: tool 'block'" in html
    assert kernel.python("%%python\ngate.set()\nprint(finished.wait(30))").strip() == "True"

"""The stop button stops a cell's ``fire_and_forget`` actions too, in a real kernel."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jupyter.conftest import Kernel, sleeps

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

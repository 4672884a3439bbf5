"""Manifest tools in a real kernel: approvals through the widget's messages, interrupts.

The Approve / Deny buttons send ``{"type": "approval", "id", "token",
"digest", "approved"}`` as a custom widget message, with the token and digest
of the box they belong to; here the test sends exactly that message over the
kernel's comm channel, as the front end does (the buttons themselves are
clicked in a real browser in ``test_browser_approvals.py``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import TEST_LABEL, new_token, our_containers, sandbox_image
from tests.jupyter.conftest import Kernel
from tests.replays import write_turns

pytestmark = pytest.mark.kernel

COUNT = [sys.executable, "-c", "import json,sys; print(len(json.load(sys.stdin)['text']))"]


@pytest.fixture
def kernel(cortex_kernelspec: str) -> Iterator[Kernel]:
    k = Kernel(cortex_kernelspec, dict(os.environ))
    yield k
    k.shutdown()


def agent(tmp_path: Path, turns: list[str], tools: list[dict[str, Any]]) -> Path:
    replay = tmp_path / "turns.jsonl"
    write_turns(replay, *turns)
    manifest = tmp_path / "agent.json"
    manifest.write_text(json.dumps({"model": f"replay:{replay}", "tools": tools}), encoding="utf-8")
    return manifest


CALL = (
    '<action type="tool" id="c1" output_key="n">'
    '{"name": "count", "parameters": {"text": "hello"}}</action>'
)
CONFIRMED = [{"name": "count", "command": COUNT, "confirm": True}]


def widget_comm(kernel: Kernel) -> str:
    """The comm id of the run's view (the last widget opened)."""
    for msg in reversed(kernel._buffered):
        if msg["msg_type"] == "comm_open":
            state = msg["content"]["data"].get("state", {})
            if "snapshot" in state:
                comm_id: str = msg["content"]["comm_id"]
                return comm_id
    raise AssertionError("no view was opened")


def view_ops(kernel: Kernel) -> list[list[Any]]:
    """Every delta op the views sent among the messages read so far."""
    ops: list[list[Any]] = []
    for msg in kernel._buffered:
        data = msg["content"].get("data", {}) if msg["msg_type"] == "comm_msg" else {}
        if data.get("method") == "custom":
            ops.extend(data["content"].get("ops", []))
    return ops


def box(kernel: Kernel, action_id: str) -> dict[str, Any]:
    """The approval box of ``action_id`` as the view last drew it."""
    ops = [op for op in view_ops(kernel) if op[:2] == ["n", action_id]]
    found = [op[2]["approval"] for op in ops if (op[2].get("approval") or {}).get("token")]
    assert found, f"no approval box for {action_id}"
    approval: dict[str, Any] = found[-1]
    return approval


def answer(kernel: Kernel, action_id: str, content: dict[str, Any]) -> None:
    """Send what the box's buttons send (``content`` over the box's own fields)."""
    approval = box(kernel, action_id)
    message = {"type": "approval", "id": action_id, "token": approval["token"]}
    message.update({"digest": approval["digest"], **content})
    data = {"method": "custom", "content": message}
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": widget_comm(kernel), "data": data})
    kernel.kc.shell_channel.send(msg)


def click(kernel: Kernel, action_id: str, approved: bool) -> None:
    answer(kernel, action_id, {"approved": approved})


def test_approve_runs_the_tool_and_the_decision_is_recorded(kernel: Kernel, tmp_path: Path) -> None:
    path = agent(tmp_path, [CALL, "<response>count is $n</response>"], CONFIRMED)
    assert "agents: cortex" in kernel.python(f"%manifest {path}")
    msg_id = kernel.send("count the letters of hello")
    kernel.wait_for_op(msg_id, "n", "c1", "awaiting approval", timeout=30)
    click(kernel, "c1", True)
    result = kernel.collect(msg_id)
    assert result.status == "ok", result.reply["content"]
    assert kernel.python("%%python\nprint(_response)").strip() == "count is 5"
    decided = kernel.python(
        "%%python\nprint([(e.approved, e.by) for e in _run.events if e.type == 'approval_decided'])"
    )
    assert decided.strip() == "[(True, 'user')]"
    final = result.of_type("update_display_data")[-1]["content"]["data"]["text/plain"]
    assert "c1 tool count: succeeded [approved (user)]" in final


def test_deny_is_an_error_the_model_sees(kernel: Kernel, tmp_path: Path) -> None:
    path = agent(tmp_path, [CALL, "<response>I was not allowed.</response>"], CONFIRMED)
    kernel.python(f"%manifest {path}")
    msg_id = kernel.send("count")
    kernel.wait_for_op(msg_id, "n", "c1", "awaiting approval", timeout=30)
    click(kernel, "c1", False)
    result = kernel.collect(msg_id)
    assert result.status == "ok", result.reply["content"]
    failed = kernel.python(
        "%%python\nprint([e.error for e in _run.events if e.type == 'action_failed'])"
    )
    assert "the user denied the call to tool 'count'" in failed
    # What the model read at its next turn: the denial as the action's error.
    assert "denied the call to tool" in kernel.python("%history")


def test_interrupt_cancels_a_waiting_approval(kernel: Kernel, tmp_path: Path) -> None:
    path = agent(tmp_path, [CALL, "<response>never</response>"], CONFIRMED)
    kernel.python(f"%manifest {path}")
    msg_id = kernel.send("count")
    kernel.wait_for_op(msg_id, "n", "c1", "awaiting approval", timeout=30)
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted"
    final = result.of_type("update_display_data")[-1]["content"]["data"]["text/plain"]
    assert "c1 tool count: cancelled" in final
    assert kernel.python("%%python\nprint('alive')").strip() == "alive"


def test_an_interrupted_cell_leaves_no_container(kernel: Kernel, tmp_path: Path) -> None:
    image, token = sandbox_image(), new_token()
    sleeper = {
        "name": "count",
        "docker": {"image": image, "command": ["sleep", "60"], "labels": {TEST_LABEL: token}},
    }
    path = agent(tmp_path, [CALL, "<response>never</response>"], [sleeper])
    kernel.python(f"%manifest {path}")
    msg_id = kernel.send("count")
    kernel.wait_for_op(msg_id, "n", "c1", "running", timeout=30)
    deadline = time.monotonic() + 20
    while not our_containers(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert our_containers(token), "the tool's container never started"
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted"
    assert our_containers(token) == []

"""``%%agent`` in the stock ``python3`` kernel: same view, variables, interrupt, history."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from .conftest import SLEEPER_TOOL, Kernel, alive, dump, sleeps

pytestmark = pytest.mark.kernel

HISTORY_LEN = (
    "from cortex_kernel.jupyter.runner import runner_for\n"
    "print(len(runner_for(get_ipython()).session.history()))"
)


@pytest.fixture(scope="module")
def python3() -> Iterator[Kernel]:
    kernel = Kernel("python3")
    assert kernel.run("%load_ext cortex_kernel").status == "ok"
    yield kernel
    kernel.shutdown()


def test_agent_cell(python3: Kernel, replay_dir: Path) -> None:
    model = f"replay:{replay_dir}/answer.jsonl"
    python3.python(f"%model {model}")
    result = python3.run("%%agent\nWhat is x?", cell_id="magic-1")
    assert result.status == "ok", dump(result)
    assert (
        "application/vnd.jupyter.widget-view+json"
        in result.of_type("display_data")[0]["content"]["data"]
    )
    assert len(result.of_type("comm_msg")) >= 2
    assert result.result_data()["text/markdown"] == "The answer is 42"
    out = python3.python("print(x, '|', summary, '|', _response, '|', _run.status)")
    assert out.strip() == "42 | A short summary. | The answer is 42 | ok"


def test_options_and_rerun(python3: Kernel, replay_dir: Path) -> None:
    cell = f"%%agent --model replay:{replay_dir}/answer.jsonl\nQuestion"
    assert python3.run(cell, cell_id="magic-rerun").status == "ok"
    before = int(python3.python(HISTORY_LEN))
    assert python3.run(cell + " again", cell_id="magic-rerun").status == "ok"
    assert int(python3.python(HISTORY_LEN)) == before
    python3.python("y = 7")
    assert python3.run("%%agent\nUse {y}", cell_id="magic-interp").status == "ok"
    assert python3.python("print(_run.events[0].message)").strip() == "Use 7"


def test_bad_option_is_a_clear_error(python3: Kernel) -> None:
    result = python3.run("%%agent --colour red\nhi")
    assert result.status == "error"
    assert result.reply["content"]["ename"] == "ConfigError"
    assert "--colour" in result.reply["content"]["evalue"]


def test_python_cells_stay_python(python3: Kernel) -> None:
    assert python3.python("print(6 * 7)").strip() == "42"
    # IPython's own %history is untouched by the extension; ours is %agent_history.
    assert python3.run("%history -l 1").status == "ok"
    assert "[user]" in python3.python("%agent_history")


def test_interrupt(python3: Kernel, replay_dir: Path) -> None:
    children_before = {p.pid for p in psutil.Process(python3.pid).children(recursive=True)}
    msg_id = python3.send(f"%%agent --model replay:{replay_dir}/slow.jsonl?tps=50\ngo")
    python3.wait_for_op(msg_id, "n", "a1", "running", timeout=20)
    python3.km.interrupt_kernel()
    result = python3.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
    # Cut, not finished: the action never succeeded and the model's turn never
    # reached its response (the stream was closed mid-thought).
    states = [op["state"] for op in python3.ops_of(result, "a1") if "state" in op]
    assert states[-1] == "cancelled" and "succeeded" not in states, states
    assert not [op for op in result.widget_ops() if op[0] == "rs"]
    assert python3.python("print('alive')").strip() == "alive"
    children_after = {p.pid for p in psutil.Process(python3.pid).children(recursive=True)}
    assert children_after <= children_before
    # An ordinary Python cell is still interruptible the usual way afterwards.
    msg_id = python3.send("import time\nprint('sleeping', flush=True)\ntime.sleep(30)")
    python3.wait_for_stream(msg_id, "sleeping", timeout=20)  # the cell runs: interrupt it
    python3.km.interrupt_kernel()
    result = python3.collect(msg_id, timeout=10)
    assert result.reply["content"]["ename"] == "KeyboardInterrupt"


def test_interrupt_kills_a_tool_subprocess(python3: Kernel, replay_dir: Path) -> None:
    python3.python(SLEEPER_TOOL.removeprefix("%%python\n"))
    msg_id = python3.send(f"%%agent --model replay:{replay_dir}/tool.jsonl?tps=50\nsleep")
    python3.wait_for_op(msg_id, "n", "t1", "running", timeout=20)
    deadline = time.monotonic() + 5
    while not sleeps(python3.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    started = [p.pid for p in sleeps(python3.pid)]
    assert started
    python3.km.interrupt_kernel()
    result = python3.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
    # Cut, not finished: the action never succeeded and the model's turn never
    # reached its response (the stream was closed mid-thought).
    states = [op["state"] for op in python3.ops_of(result, "t1") if "state" in op]
    assert states[-1] == "cancelled" and "succeeded" not in states, states
    assert not [op for op in result.widget_ops() if op[0] == "rs"]
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in started)


def test_unload(python3: Kernel) -> None:
    assert python3.run("%unload_ext cortex_kernel").status == "ok"
    assert python3.run("%load_ext cortex_kernel").status == "ok"


def test_restart_then_load_again(replay_dir: Path) -> None:
    kernel = Kernel("python3")
    try:
        kernel.km.restart_kernel(now=True)
        kernel.kc.wait_for_ready(timeout=60)
        assert kernel.run("%load_ext cortex_kernel").status == "ok"
        result = kernel.run(f"%%agent --model replay:{replay_dir}/answer.jsonl\nWhat is x?")
        assert result.status == "ok", dump(result)
        assert kernel.python("print(x)").strip() == "42"
    finally:
        kernel.shutdown()

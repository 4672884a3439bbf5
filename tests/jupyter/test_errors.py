"""Errors as a notebook user meets them, through jupyter_client and the real kernel.

A failing tool keeps its traceback; a bad ``%model`` changes nothing; the
demo model answers every question; an interrupted run is in ``_run``; a
``%%agent`` cell with a bad model leaves no view stuck at "running".
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .conftest import Kernel, dump

pytestmark = pytest.mark.kernel

RATIO_TOOL = """%%python
from cortex_kernel import tool

def _divide(a, b):
    return a / b

@tool
def ratio(a: float, b: float) -> float:
    \"\"\"Divide a by b.\"\"\"
    return _divide(a, b)
"""


def _no_model_env() -> dict[str, str]:
    from cortex_kernel.llm import DEFAULT_MODELS

    return {
        key: value
        for key, value in os.environ.items()
        if key != "CORTEX_MODEL" and key not in DEFAULT_MODELS
    }


def test_failing_tool_keeps_its_own_traceback(cortex: Kernel, replay_dir: Path) -> None:
    cortex.python(RATIO_TOOL)
    result = cortex.run(f"%%agent --model replay:{replay_dir}/divide.jsonl\nratio of 1 and 0?")
    assert result.status == "ok", dump(result)
    # In _run.events: the tool's frames and the exception, none of the runtime's.
    out = cortex.python(
        "%%python\nprint([e.traceback for e in _run.events if e.type == 'action_failed'][0])"
    )
    assert "in ratio" in out and "in _divide" in out and "return a / b" in out, out
    assert "ZeroDivisionError: float division by zero" in out
    for machinery in ("scheduler.py", "cortex_kernel", "anyio", "threading.py"):
        assert machinery not in out, out
    # In the live view: the failed node carries it (shown collapsed).
    nodes = [op[2] for op in result.widget_ops() if op[0] == "n"]
    tracebacks = [fields["traceback"] for fields in nodes if "traceback" in fields]
    assert tracebacks and "in _divide" in tracebacks[0]
    # In the static view that replaces the widget when the run is over.
    final = result.of_type("update_display_data")[-1]["content"]["data"]["text/html"]
    assert "<details><summary" in final and "in _divide" in final
    # In the transcript.
    path = cortex.python("%transcript path").strip()
    failed = [
        json.loads(line)
        for line in Path(path).read_text().splitlines()
        if '"action_failed"' in line
    ]
    assert failed and "in _divide" in failed[0]["traceback"]


def test_bad_model_changes_nothing_in_a_fresh_kernel(
    kernel_factory: object, cortex_kernelspec: str, replay_dir: Path
) -> None:
    env = {**os.environ, "CORTEX_MODEL": f"replay:{replay_dir}/answer.jsonl"}
    kernel: Kernel = kernel_factory(cortex_kernelspec, env)  # type: ignore[operator]
    bad = kernel.run(f"%model replay:{replay_dir}/missing.jsonl")
    assert bad.status == "error" and bad.reply["content"]["ename"] == "ConfigError", dump(bad)
    assert "missing.jsonl" in bad.reply["content"]["evalue"]
    # Nothing was poisoned: magics and the next question work on the old model.
    assert "answer.jsonl" in kernel.python("%model")
    assert kernel.run("%variables").status == "ok"
    answer = kernel.run("What is x?")
    assert answer.status == "ok", dump(answer)
    assert answer.result_data()["text/plain"] == "The answer is 42"


def test_bad_model_changes_nothing_once_a_session_exists(cortex: Kernel, replay_dir: Path) -> None:
    assert cortex.run("What is x?").status == "ok"
    bad = cortex.run(f"%model replay:{replay_dir}/missing.jsonl")
    assert bad.status == "error" and bad.reply["content"]["ename"] == "ConfigError"
    assert "answer.jsonl" in cortex.python("%model")
    again = cortex.run("What is x, again?")
    assert again.status == "ok", dump(again)


def test_demo_model_answers_every_question(kernel_factory: object, cortex_kernelspec: str) -> None:
    kernel: Kernel = kernel_factory(cortex_kernelspec, _no_model_env())  # type: ignore[operator]
    for question in ("Hello?", "And a second question?", "A third one?"):
        result = kernel.run(question)
        assert result.status == "ok", dump(result)
        assert "Hello from Cortex" in result.result_data()["text/plain"]
        warnings = [op[1] for op in result.widget_ops() if op[0] == "w"]
        assert any("demo transcript" in w and "%model" in w for w in warnings), warnings


def test_interrupted_run_is_in_run_and_response(cortex: Kernel, replay_dir: Path) -> None:
    assert cortex.run("What is x?").status == "ok"
    before = cortex.python("%%python\nprint(_run.run_id)").strip()
    msg_id = cortex.send(f"%%agent --model replay:{replay_dir}/slow.jsonl?tps=50\ngo")
    cortex.wait_for_op(msg_id, "n", "a1", "running", timeout=20)
    cortex.km.interrupt_kernel()
    result = cortex.collect(msg_id, timeout=30, started=time.monotonic())
    assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
    out = cortex.python("%%python\nprint(_run.run_id, _run.status, repr(_response))").split()
    assert out[0] != before
    assert out[1:] == ["cancelled", "''"]


def test_agent_cell_with_a_missing_replay_file_shows_no_running_view(
    cortex: Kernel, replay_dir: Path
) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/missing.jsonl\nhello")
    assert result.status == "error"
    assert result.reply["content"]["ename"] == "ConfigError"
    assert "missing.jsonl" in result.reply["content"]["evalue"]
    shown = [
        m["content"]["data"].get("text/plain", "")
        for m in result.of_type("display_data", "update_display_data")
    ]
    assert not any("[running]" in text for text in shown[-1:]), shown


def test_a_stuck_runs_answer_shows_in_the_saved_view(cortex: Kernel, tmp_path: Path) -> None:
    # Told to answer after a failing call written three times, the model
    # stated a figure no result gives, and again when asked to check it: the
    # cell raises `stuck`, and its answer showed nowhere in the saved notebook.
    cortex.python(RATIO_TOOL)
    failing = (
        '<action type="tool" id="r">{"name": "ratio", "parameters": {"a": 1, "b": 0}}</action>'
    )
    guess = "<response>The ratio is 1,000,000.</response>"
    turns = tmp_path / "stuck.jsonl"
    turns.write_text(
        "".join(json.dumps({"content": t}) + "\n" for t in [failing] * 3 + [guess] * 2)
    )
    result = cortex.run(f"%%agent --model replay:{turns}\nratio of 1 and 0?")
    assert result.status == "error" and result.reply["content"]["ename"] == "RunFailed"
    final = result.of_type("update_display_data")[-1]["content"]["data"]
    answer = "The ratio is 1,000,000 *(unverified)*."
    assert f"<i>answer given (stuck):</i> {answer}" in final["text/html"]
    assert f"answer given (stuck):\n  | {answer}" in final["text/plain"]

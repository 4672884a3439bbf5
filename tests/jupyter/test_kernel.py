"""The Cortex kernel, driven through jupyter_client against the installed kernelspec."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from .conftest import SLEEPER_TOOL, CellResult, Kernel, alive, dump, sleeps

pytestmark = pytest.mark.kernel

HISTORY_LEN = (
    "%%python\nfrom cortex_kernel.jupyter.runner import runner_for\n"
    "print(len(runner_for(get_ipython()).session.history()))"
)


def test_kernel_info(cortex: Kernel) -> None:
    cortex.kc.kernel_info()
    reply = cortex.kc.get_shell_msg(timeout=10)
    content = reply["content"]
    assert content["implementation"] == "cortex"
    assert content["language_info"]["name"] == "markdown"


def test_message_cell_streams_and_answers(cortex: Kernel) -> None:
    first = cortex.run("What is x?", cell_id="cell-answer")
    assert first.status == "ok", dump(first)
    displays = first.of_type("display_data")
    assert displays, dump(first)
    bundle = displays[0]["content"]["data"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == "Cortex run [running]"  # stable for nbval
    assert len(first.of_type("comm_msg")) >= 2  # live deltas while the run streamed
    states = [op[2].get("state") for op in first.widget_ops() if op[0] == "n"]
    assert "succeeded" in states
    final = first.of_type("update_display_data")[-1]["content"]["data"]
    assert final["text/plain"].startswith("Cortex run [ok]")
    assert "text/markdown" in final and "text/html" in final
    data = first.result_data()
    assert data["text/markdown"] == "The answer is 42"
    assert data["text/plain"] == "The answer is 42"
    second = cortex.run("%%python\n1")
    assert (
        second.reply["content"]["execution_count"] == first.reply["content"]["execution_count"] + 1
    )


def test_silent_requests_are_python(cortex: Kernel) -> None:
    msg_id = cortex.kc.execute("silent_value = 6 * 7", silent=True)
    reply = cortex.kc.get_shell_msg(timeout=10)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "ok"
    assert cortex.python("%%python\nprint(silent_value)").strip() == "42"


def test_results_are_notebook_variables(cortex: Kernel) -> None:
    cortex.run("What is x?", cell_id="cell-vars")
    out = cortex.python("%%python\nprint(x, '|', summary, '|', _response, '|', _run.status)")
    assert out.strip() == "42 | A short summary. | The answer is 42 | ok"


def test_interpolation_of_notebook_variables(cortex: Kernel) -> None:
    cortex.python("%%python\nanimal = 'owl'")
    result = cortex.run("Tell me about {animal} and {'k': 1}", cell_id="cell-interp")
    assert result.status == "ok", dump(result)
    out = cortex.python("%%python\nprint(_run.events[0].message)")
    assert out.strip() == "Tell me about owl and {'k': 1}"


def _warnings(result: CellResult) -> list[str]:
    return [op[1] for op in result.widget_ops() if op[0] == "w"]


def test_an_unbound_reference_is_sent_as_written_with_a_warning(cortex: Kernel) -> None:
    cortex.python("%%python\nbird = 'owl'")
    result = cortex.run("Compare {bird} with {birb} and {birb}", cell_id="cell-unbound")
    assert result.status == "ok", dump(result)
    warned = [w for w in _warnings(result) if "{birb}" in w]
    assert len(warned) == 1 and "{bird}" not in warned[0], _warnings(result)
    assert "sent with it as written" in warned[0]
    out = cortex.python("%%python\nprint(_run.events[0].message)")
    assert out.strip() == "Compare owl with {birb} and {birb}"
    bound = cortex.run("Just {bird} and {{literal}}", cell_id="cell-bound")
    assert not any("no notebook variable" in w for w in _warnings(bound)), _warnings(bound)


@pytest.mark.parametrize(
    "code",
    ["df = load_data()\ndf.head()", "import pandas as pd", "df.describe()", "print(x)"],
)
def test_a_python_message_gets_a_hint(cortex: Kernel, code: str) -> None:
    result = cortex.run(code, cell_id="cell-python-hint")
    assert result.status == "ok", dump(result)  # still sent: the agent answers it
    assert any("%%python" in w for w in _warnings(result)), _warnings(result)


@pytest.mark.parametrize(
    "prose",
    ["what is df.shape?", "Summarise the data", "hello", "Hello (again) and thanks"],
)
def test_prose_gets_no_python_hint(cortex: Kernel, prose: str) -> None:
    result = cortex.run(prose, cell_id="cell-prose")
    assert result.status == "ok", dump(result)
    assert not any("%%python" in w for w in _warnings(result)), _warnings(result)


@pytest.mark.parametrize(
    ("spec", "suggested"),
    [
        ("opnai/gpt-4o-mini", "closest known providers: openai"),
        ("gpt4o-mini", "openai/gpt-4o-mini"),
    ],
)
def test_model_with_an_unknown_provider_fails_at_once(
    cortex: Kernel, spec: str, suggested: str
) -> None:
    before = cortex.python("%model")
    result = cortex.run(f"%model {spec}")
    assert result.status == "error", dump(result)
    assert result.reply["content"]["ename"] == "ConfigError"
    assert suggested in result.reply["content"]["evalue"], result.reply["content"]["evalue"]
    assert cortex.python("%model") == before  # nothing changed


def test_rerunning_a_cell_replaces_its_turn(cortex: Kernel) -> None:
    cortex.run("First question", cell_id="cell-rerun")
    before = int(cortex.python(HISTORY_LEN))
    cortex.run("First question, edited", cell_id="cell-rerun")
    assert int(cortex.python(HISTORY_LEN)) == before
    cortex.run("Another question", cell_id="cell-other")
    assert int(cortex.python(HISTORY_LEN)) > before


def test_line_magics(cortex: Kernel, replay_dir: Path) -> None:
    assert "answer.jsonl" in cortex.python("%model")
    assert "[user]" in cortex.python("%history")
    variables = cortex.python("%variables")
    assert "summary" in variables and "str" in variables
    feeds = cortex.python("%feeds")  # on by default; the agent's own `summary` is not listed
    assert "notebook_variables  internal" in feeds and "summary" not in feeds
    assert "No relics" in cortex.python("%relics")
    path = cortex.python("%transcript path").strip()
    assert path.endswith(".jsonl") and Path(path).is_file()
    assert "manifest" in cortex.python("%manifest")


def test_fire_and_forget_outlives_the_cell(cortex: Kernel, replay_dir: Path) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/fire.jsonl\nstart it")
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/plain"] == "Started in the background."
    comm_id = result.of_type("comm_msg")[0]["content"]["comm_id"]
    # After the reply, the action finishes and its node still gets updated.
    deadline = time.monotonic() + 20
    late_states: list[str] = []
    while "succeeded" not in late_states and time.monotonic() < deadline:
        msg = cortex.kc.get_iopub_msg(timeout=20)
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == comm_id:
            data = msg["content"]["data"]
            for op in data.get("content", {}).get("ops", []):
                if op[0] == "n" and op[1] == "f1" and "state" in op[2]:
                    late_states.append(op[2]["state"])
    assert "succeeded" in late_states
    assert cortex.python("%%python\nprint(late.split()[:2])").strip() == "['a', 'long']"


def test_transcript_export(cortex: Kernel, tmp_path: Path) -> None:
    target = tmp_path / "all.jsonl"
    assert "written to" in cortex.python(f"%transcript export {target}")
    lines = target.read_text().splitlines()
    assert sum('"run_started"' in line for line in lines) >= 2


def test_failed_run_fails_the_cell(cortex: Kernel, replay_dir: Path) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/fail.jsonl\nhello")
    assert result.status == "error", dump(result)
    content = result.reply["content"]
    assert content["ename"] == "RunFailed"
    assert "ran out of turns" in content["evalue"]
    errors = result.of_type("error")
    assert errors and len(errors[0]["content"]["traceback"]) == 1  # one clear line
    assert cortex.python("%%python\nprint(_run.status)").strip() == "error"


def test_interrupt_cancels_the_run_before_it_ends(cortex: Kernel, replay_dir: Path) -> None:
    children_before = {p.pid for p in psutil.Process(cortex.pid).children(recursive=True)}
    msg_id = cortex.send(f"%%agent --model replay:{replay_dir}/slow.jsonl?tps=50\ngo")
    # Interrupt while the slow action runs and the thought still streams.
    cortex.wait_for_op(msg_id, "n", "a1", "running", timeout=20)
    cortex.km.interrupt_kernel()
    result = cortex.collect(msg_id, timeout=30)
    assert result.status == "error", dump(result)
    assert result.reply["content"]["ename"] == "RunInterrupted"
    # Cut, not finished: the action never succeeded and the model's turn never
    # reached its response (the stream was closed mid-thought).
    states = [op["state"] for op in cortex.ops_of(result, "a1") if "state" in op]
    assert states[-1] == "cancelled" and "succeeded" not in states, states
    assert not [op for op in result.widget_ops() if op[0] == "rs"]
    final = result.of_type("update_display_data")[-1]["content"]["data"]["text/plain"]
    assert final.startswith("Cortex run [cancelled]")
    assert "a1 llm" in final and "cancelled" in final.splitlines()[1]
    # The kernel is alive and ready, with no process left behind.
    assert cortex.python("%%python\nprint('alive')").strip() == "alive"
    children_after = {p.pid for p in psutil.Process(cortex.pid).children(recursive=True)}
    assert children_after <= children_before


def test_interrupt_kills_the_subprocess_of_a_running_tool(cortex: Kernel, replay_dir: Path) -> None:
    cortex.python(SLEEPER_TOOL)
    msg_id = cortex.send(f"%%agent --model replay:{replay_dir}/tool.jsonl?tps=50\nsleep")
    cortex.wait_for_op(msg_id, "n", "t1", "running", timeout=20)
    deadline = time.monotonic() + 5
    while not sleeps(cortex.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    started = [p.pid for p in sleeps(cortex.pid)]
    assert started, "the tool's subprocess never started"
    cortex.km.interrupt_kernel()
    result = cortex.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
    # Cut, not finished: the action never succeeded and the model's turn never
    # reached its response (the stream was closed mid-thought).
    states = [op["state"] for op in cortex.ops_of(result, "t1") if "state" in op]
    assert states[-1] == "cancelled" and "succeeded" not in states, states
    assert not [op for op in result.widget_ops() if op[0] == "rs"]
    assert (
        "t1 tool sleeper (async): cancelled"
        in (result.of_type("update_display_data")[-1]["content"]["data"]["text/plain"])
    )
    # Killed: neither still a child of the kernel nor re-parented as an orphan.
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in started)


def test_restart(cortex_kernelspec: str, replay_dir: Path) -> None:
    env = {**os.environ, "CORTEX_MODEL": f"replay:{replay_dir}/answer.jsonl"}
    kernel = Kernel(cortex_kernelspec, env)
    try:
        assert kernel.run("What is x?").status == "ok"
        old_pid = kernel.pid
        kernel.km.restart_kernel(now=True)
        kernel.kc.wait_for_ready(timeout=60)
        assert kernel.pid != old_pid
        assert not psutil.pid_exists(old_pid) or psutil.Process(old_pid).status() == "zombie"
        assert "NameError" in str(kernel.run("%%python\nx").reply["content"].get("ename"))
        result = kernel.run("What is x now?")
        assert result.status == "ok", dump(result)
        assert kernel.python("%%python\nprint(x)").strip() == "42"
        # A graceful shutdown (the front end's request) ends the kernel cleanly.
        pid = kernel.pid
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=False)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    finally:
        if kernel.km.has_kernel:
            kernel.shutdown()

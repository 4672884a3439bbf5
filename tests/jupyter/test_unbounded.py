"""Unbounded consumption (OWASP LLM10), through the real kernel: a budget for one turn's results."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI
from tests.prompt_parts import conversation

from .conftest import Kernel, dump

pytestmark = pytest.mark.kernel

BIG_TOOL = '''%%python
from cortex_kernel import tool

@tool
async def report(i: int) -> str:
    """A 10 KB report."""
    return f"report {i}: " + "x" * 10_000
'''

HISTORY = (
    "%%python\nfrom cortex_kernel.jupyter.runner import runner_for\n"
    "print(runner_for(get_ipython()).session.history()[-2]['content'])"
)


@pytest.fixture
def kernel(cortex_kernelspec: str, tmp_path: Path) -> Iterator[Kernel]:
    env = {**os.environ, "CORTEX_TRANSCRIPT_DIR": str(tmp_path / "transcripts")}
    kernel = Kernel(cortex_kernelspec, env)
    assert kernel.run(BIG_TOOL).status == "ok"
    yield kernel
    kernel.shutdown()


def fan_out(tmp_path: Path, n: int) -> str:
    actions = "".join(
        f'<action type="tool" mode="async" id="r{i}">{{"name": "report", "parameters": '
        f'{{"i": {i}}}}}</action>'
        for i in range(n)
    )
    path = tmp_path / "fan.jsonl"
    path.write_text(
        json.dumps({"content": actions})
        + "\n"
        + json.dumps({"content": "<response>done</response>"})
        + "\n",
        encoding="utf-8",
    )
    return f"replay:{path}"


def test_two_hundred_results_fit_the_turn_budget(kernel: Kernel, tmp_path: Path) -> None:
    result = kernel.run(f"%%agent --model {fan_out(tmp_path, 200)}\nall reports")
    assert result.status == "ok", dump(result)
    opening = kernel.python(HISTORY)
    # Uncapped this was 200 x ~4,000 characters (845,443 in the probe).
    assert len(opening) < 8000 * 4 * 1.1
    assert opening.count("<action_result") == 200  # every action's status is reported
    assert "[results cut to fit this turn's budget of about 8000 tokens" in opening
    assert "the value is in $r" in opening  # where the full values are
    # What fits is never cut.
    small = kernel.run(f"%%agent --model {fan_out(tmp_path, 3)}\nthree reports")
    assert small.status == "ok"
    opening = kernel.python(HISTORY)
    assert opening.count("<action_result") == 3 and "results cut" not in opening


@pytest.mark.filterwarnings("ignore:Accessing the 'model_")
def test_native_tool_results_count_against_the_turn_budget(kernel: Kernel) -> None:
    # --protocol tools: the results go back as `tool` messages, one per call.
    calls = [(f"call_{i}", "report", json.dumps({"i": i})) for i in range(50)]
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/x --api-base {server.api_base} --protocol tools")
        server.tool_calls(calls)
        server.stream("<response>done</response>")
        result = kernel.run("all reports")
        assert result.status == "ok", dump(result)
        messages = server.requests[1].body["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [f"call_{i}" for i in range(50)]
    # Uncapped: 50 x 4,000 characters (each cut only to limits.result_chars).
    assert sum(len(m["content"]) for m in results) < 8000 * 4 * 1.1
    assert all(
        m["content"].startswith(f"report(i={i}) returned: report {i}: ")
        for i, m in enumerate(results)
    )
    assert "the full value is in $call_7" in results[7]["content"]
    note = conversation(messages)[-1]  # the feeds message comes after it
    assert note["role"] == "user"
    assert "[results cut to fit this turn's budget of about 8000 tokens" in note["content"]


def test_a_manifest_sets_the_budget(kernel: Kernel, tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("limits: {result_tokens: 1000}\n", encoding="utf-8")
    kernel.python(f"%manifest {manifest}")
    result = kernel.run(f"%%agent --model {fan_out(tmp_path, 20)}\nall reports")
    assert result.status == "ok", dump(result)
    opening = kernel.python(HISTORY)
    assert len(opening) < 1000 * 4 * 1.1
    assert "budget of about 1000 tokens" in opening


def test_a_sync_tool_cannot_hold_a_run_forever(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python(
        "%%python\nimport threading\nfrom cortex_kernel import tool\n"
        "release = threading.Event()\n\n@tool\n"
        "def stuck() -> str:\n    '''Never returns by itself.'''\n"
        "    release.wait()\n    return 'late'\n"
    )
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("limits: {action_timeout: 0.5}\n", encoding="utf-8")
    kernel.python(f"%manifest {manifest}")
    turns = tmp_path / "stuck.jsonl"
    turns.write_text(
        json.dumps({"content": '<action type="tool" id="s">{"name": "stuck"}</action>'})
        + "\n"
        + json.dumps({"content": "<response>gave up</response>"})
        + "\n",
        encoding="utf-8",
    )
    result = kernel.run(f"%%agent --model replay:{turns}\nwait")
    assert result.status == "ok", dump(result)
    error = kernel.python(
        "%%python\nprint([e.error for e in _run.events if e.type == 'action_failed'][0])"
    )
    assert "timed out after 0.5 s (the default limit, limits.action_timeout" in error
    assert "1 worker thread(s) of sync tools could not be stopped and still run" in error
    # Once the thread ends, it is no longer counted.
    out = kernel.python(
        "%%python\nimport time\nfrom cortex_kernel.runtime.tools import abandoned_threads\n"
        "release.set()\nfor _ in range(200):\n    if not abandoned_threads():\n        break\n"
        "    time.sleep(0.05)\nprint(abandoned_threads())"
    )
    assert out.strip() == "0"

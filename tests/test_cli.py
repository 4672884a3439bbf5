"""The command line, run as a user runs it: ``python -m cortex_kernel …``."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import nbformat

from cortex_kernel.demo import static_copy

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, stdin: str = "", cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cortex_kernel", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_parse_reads_stdin_in_chunks_and_prints_jsonl() -> None:
    text = '<thought>x <action type="tool" id="t">{"name": "n"}</action></thought><response>ok'
    whole = cli("parse", stdin=text)
    chunked = cli("parse", "--chunk", "3", stdin=text)
    assert whole.returncode == chunked.returncode == 0
    events = [json.loads(line) for line in chunked.stdout.splitlines()]
    assert {"thought_start", "action_parsed", "response_delta"} <= {e["type"] for e in events}
    assert events[-1] == {
        "type": "response_end",
        "span": [len(text), len(text)],
        "final": True,
        "truncated": True,
    }
    # Conservation, seen from the outside: the spans cover the input.
    assert events[0]["span"][0] == 0
    assert all(a["span"][1] == b["span"][0] for a, b in itertools.pairwise(events))


def test_run_replays_headless_and_exits_zero(tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    content = (
        '<action type="internal" mode="async" output_key="x">'
        '{"name": "set_variable", "parameters": {"name": "y", "value": 21}}</action>'
        "<response>y is $y</response>"
    )
    turns.write_text(json.dumps({"content": content}) + "\n", encoding="utf-8")
    out = tmp_path / "run.jsonl"
    result = cli("run", "hi", "--model", f"replay:{turns}", "--transcript", str(out))
    assert result.returncode == 0, result.stderr
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["type"] == "run_finished" and last["status"] == "ok"
    assert last["answer"] == "y is 21"
    assert out.is_file() and "run_finished" in out.read_text(encoding="utf-8")


def test_run_that_fails_exits_non_zero(tmp_path: Path) -> None:
    short = tmp_path / "short.jsonl"  # one turn, and the run needs a second
    short.write_text(
        json.dumps({"content": '<action type="internal">{"name": "list_variables"}</action>'})
        + "\n",
        encoding="utf-8",
    )
    result = cli("run", "hi", "--model", f"replay:{short}")
    assert result.returncode == 1
    assert "error" in result.stderr


def test_a_stuck_run_says_stuck_once(tmp_path: Path) -> None:
    # The status is the prefix: the message repeated it ("stuck: stuck: the same…").
    turns = tmp_path / "stuck.jsonl"
    same = '<action type="tool" id="a">{"name": "nope", "parameters": {}}</action>'
    turns.write_text(json.dumps({"content": same}) + "\n", encoding="utf-8")
    turns.write_text(turns.read_text(encoding="utf-8") * 4, encoding="utf-8")  # told once to stop
    result = cli("run", "hi", "--model", f"replay:{turns}")
    assert result.returncode == 1
    assert "cortex-kernel run: stuck: the same failing " in result.stderr
    assert "stuck: stuck" not in result.stderr
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["status"] == "stuck" and last["message"].startswith("the same failing ")


def test_bench_names_the_benchmarks_it_knows() -> None:
    result = cli("bench", "nope")
    assert result.returncode == 2
    assert "parser" in result.stderr and "scheduler" in result.stderr


def test_demo_pages_show_the_viewsstatic_copy_html() -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("hi")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {"model_id": "m", "version_major": 2},
                "text/html": "<div class='cortex-run-static'>tree</div>",
                "text/plain": "Cortex run [ok]",
            },
        )
    ]
    nb.cells = [cell]
    nb.metadata["widgets"] = {"state": {}}
    static = static_copy(nb)
    assert set(static.cells[0].outputs[0].data) == {"text/html", "text/plain"}
    assert "widgets" not in static.metadata
    assert "application/vnd.jupyter.widget-view+json" in nb.cells[0].outputs[0].data


def test_run_passes_model_options_to_the_provider() -> None:
    from tests.llm.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        server.stream("<response>Hi.</response>")
        result = cli(
            "run",
            "hello",
            "--model",
            "openai/local",
            "--api-base",
            server.api_base,
            "--temperature",
            "0",
            "--max-tokens",
            "800",
            "--seed",
            "11",
        )
        assert result.returncode == 0, result.stderr
        body = server.requests[-1].body
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0, 800, 11)
    assert json.loads(result.stdout.splitlines()[-1])["answer"] == "Hi."


def test_run_rejects_a_bad_model_option_before_running() -> None:
    result = cli("run", "hello", "--model", "openai/local", "--temperature", "9")
    assert result.returncode == 2
    assert result.stderr.startswith("cortex-kernel run: --temperature '9'")
    assert "less than or equal to 2" in result.stderr

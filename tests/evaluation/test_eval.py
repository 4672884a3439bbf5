"""``cortex-kernel eval`` on the replay model: the figures a user reads are exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cortex_kernel.evaluation import DEFAULT_SUITE, load_suite
from cortex_kernel.evaluation.report import table
from cortex_kernel.evaluation.suite import numbers_in
from cortex_kernel.exceptions import ConfigError

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]


def eval_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cortex_kernel", "eval", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("eval")
    result = eval_cli(
        "--model",
        f"replay:{DATA / 'turns.jsonl'}",
        "--suite",
        str(DATA / "suite.yaml"),
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    # A progress line per task start and end, on stderr.
    progress = [line for line in result.stderr.splitlines() if line.startswith("eval [")]
    assert progress[0] == "eval [1/7] no-tool … (0/0 correct so far)"
    assert progress[-1] == "eval [7/7] tools-only: n/a 0.0 s, 0 turn(s)"
    files = list(out.glob("eval-replay*-xml-*.json"))
    assert len(files) == 1 and result.stdout.rstrip().endswith(str(files[0]))
    data: dict[str, object] = json.loads(files[0].read_text())
    return data


def by_id(report: dict[str, object]) -> dict[str, dict[str, object]]:
    return {t["id"]: t for t in report["tasks"]}  # type: ignore[index,union-attr,attr-defined]


def test_per_task_figures(report: dict[str, object]) -> None:
    tasks = by_id(report)
    figures = {
        key: (
            t["correct"],
            t["status"],
            t["turns"],
            t["actions_parsed"],
            t["action_errors"],
            t["failure"],
        )
        for key, t in tasks.items()
    }
    assert figures == {
        "no-tool": (True, "ok", 1, 0, 0, None),
        "one-tool": (True, "ok", 2, 1, 0, None),
        # Three turns: asked to check "about 300,000", the model wrote it again.
        "wrong-number": (False, "ok", 3, 1, 0, "answer has no number within 0 of 348085"),
        "tool-not-called": (False, "ok", 1, 0, 0, "never called: population"),
        "unknown-tool": (True, "ok", 3, 2, 1, None),
        "follow-up": (True, "ok", 3, 1, 0, None),
        "tools-only": (False, "", 0, 0, 0, "not applicable to protocol xml"),
    }
    assert tasks["one-tool"]["answer"] == "Lyon has 520774 inhabitants."
    assert tasks["one-tool"]["tools_called"] == ["population"]
    assert tasks["unknown-tool"]["clean"] is False
    assert tasks["no-tool"]["clean"] is True
    assert not tasks["tools-only"]["applicable"]


def test_overall_figures(report: dict[str, object]) -> None:
    overall = report["overall"]
    assert isinstance(overall, dict)
    assert (overall["tasks"], overall["not_applicable"], overall["correct"]) == (6, 1, 4)
    assert overall["success_rate"] == round(4 / 6, 4)
    assert overall["clean_runs"] == 5 and overall["clean_run_rate"] == round(5 / 6, 4)
    assert overall["mean_turns"] == round((1 + 2 + 3 + 1 + 3 + 3) / 6, 3)
    assert overall["action_errors"] == 1
    assert overall["ok_with_empty_answer"] == 0 and overall["names_overwritten"] == 0
    assert overall["statuses"] == {"ok": 6}
    assert report["protocol"] == "xml"
    # Deterministic by default.
    assert report["options"] == {"temperature": 0.0, "max_tokens": 600, "seed": 1234}


def test_unverified_figures_are_counted_per_task_and_in_all(report: dict[str, object]) -> None:
    unverified = {key: t["unverified"] for key, t in by_id(report).items()}
    assert unverified == {
        "no-tool": 0,  # 56 is 7 times 8, the user's numbers
        "one-tool": 0,  # filled from $lyon
        "wrong-number": 1,  # "about 300,000" where the tool said 348085
        "tool-not-called": 1,  # 520,774 stated without looking anything up
        "unknown-tool": 0,
        "follow-up": 0,  # "double" Lyon's 348085: 696,170 is twice a value
        "tools-only": 0,
    }
    overall = report["overall"]
    assert isinstance(overall, dict) and overall["unverified"] == 2
    lines = table(report).splitlines()
    assert lines[0].split()[8] == "unv"
    assert next(line for line in lines if line.startswith("wrong-number")).split()[8] == "1"
    assert any(line.endswith("unverified figures 2") for line in lines)


def test_a_bad_suite_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks:\n  - id: x\n    message: hi\n    check: {regex: '('}\n")
    result = eval_cli("--model", "replay:/dev/null", "--suite", str(bad))
    assert result.returncode == 2
    assert "tasks.0.check.0.regex" in result.stderr and "regular expression" in result.stderr
    missing = tmp_path / "missing.yaml"
    missing.write_text("tools: [tools.py]\ntasks:\n  - {id: x, message: hi, check: {number: 1}}\n")
    with pytest.raises(ConfigError, match=r"tools\.py does not exist"):
        load_suite(missing)


def test_wall_time_option_overrides_the_suites_limit_for_every_task(tmp_path: Path) -> None:
    # A suite that allows 600 s a run, and a model that would stream for minutes
    # (one token a second): only the --wall-time override can end the runs soon.
    suite = tmp_path / "slow.yaml"
    suite.write_text(
        "limits: {max_turns: 2, wall_time: 600}\n"
        "tasks:\n"
        "  - {id: first, message: Count., check: {number: 1}}\n"
        "  - {id: second, before: [Count.], message: Again., check: {number: 1}}\n"
    )
    slow = "<response>" + " ".join(str(n) for n in range(1, 400)) + "</response>"
    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps({"content": slow}) + "\n" for _ in range(3)))
    out = tmp_path / "out"
    result = eval_cli(
        "--model",
        f"replay:{turns}?tps=1",
        "--suite",
        str(suite),
        "--wall-time",
        "0.5",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    [path] = out.glob("eval-*.json")
    data = json.loads(path.read_text())
    assert data["limits"] == {"max_turns": 2, "wall_time": 0.5}
    cut = "wall time limit reached: the run took more than 0.5 s (limits.wall_time)"
    tasks = by_id(data)
    assert {key: t["status"] for key, t in tasks.items()} == {"first": "limit", "second": "limit"}
    # Each run of each task ("second" has a `before` cell, cut too) ran under 0.5 s.
    assert tasks["first"]["messages"] == [f"limit: {cut}"]
    assert tasks["second"]["messages"] == [f"limit: {cut}", f"limit: {cut}"]

    bad = eval_cli("--model", f"replay:{turns}", "--suite", str(suite), "--wall-time", "0")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "cortex-kernel eval: --wall-time must be more than 0 seconds"


def test_without_the_option_the_report_records_the_suites_limits(
    report: dict[str, object],
) -> None:
    assert report["limits"] == {"max_turns": 4}


def test_the_default_suite_covers_every_category() -> None:
    suite = load_suite(DEFAULT_SUITE)
    assert len(suite.tasks) >= 20
    assert {t.category for t in suite.tasks} == {
        "no_tool",
        "one_tool",
        "parallel",
        "chain",
        "failing_tool",
        "llm",
        "variables",
        "follow_up",
    }
    for task in suite.tasks:
        for tool_name in task.tools:
            assert tool_name in suite.tools


def test_numbers_in_answers() -> None:
    assert numbers_in("2,102,650 and 873 076; 7 8 is not 78; -3.5") == [
        2102650,
        873076,
        7,
        8,
        78,
        -3.5,
    ]

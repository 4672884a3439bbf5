"""The benchmarks' runner: its one percentile, and what it says outside a source checkout."""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from cortex_kernel.bench import percentile, run_benchmarks

ROOT = Path(__file__).resolve().parents[1]


def test_p50_is_the_median_and_the_ends_are_min_and_max() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile(range(1, 101), 0.99) == pytest.approx(99.01)
    rng = random.Random(7)
    for n in range(1, 40):
        values = [rng.random() for _ in range(n)]
        assert percentile(values, 0.5) == pytest.approx(statistics.median(values))
        assert (percentile(values, 0.0), percentile(values, 1.0)) == (min(values), max(values))
        if n > 1:  # the same figure as the standard library's inclusive quantiles
            expected = statistics.quantiles(values, n=100, method="inclusive")[98]
            assert percentile(values, 0.99) == pytest.approx(expected)


def test_nothing_measured_is_zero_and_a_bad_quantile_is_refused() -> None:
    assert percentile([], 0.99) == 0.0
    with pytest.raises(ValueError, match="between 0 and 1"):
        percentile([1.0], 99)


def _installed_copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The package alone, as a wheel installs it (no benchmarks, notebooks or tests beside it)."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "cortex_kernel", site / "cortex_kernel", ignore=_IGNORE)
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "CORTEX_BENCH_DIR"}
    env["PYTHONPATH"] = str(site)
    return elsewhere, env


_IGNORE = shutil.ignore_patterns("__pycache__")


def test_bench_and_demo_outside_a_source_checkout_say_where_to_run_them(tmp_path: Path) -> None:
    cwd, env = _installed_copy(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )

    where = run("-c", "import cortex_kernel; print(cortex_kernel.__file__)")
    assert where.stdout.startswith(str(tmp_path / "site"))  # the copy is what runs
    for command, target in (("bench", "make bench"), ("demo", "make demo")):
        result = run("-m", "cortex_kernel", command)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"cortex-kernel {command}: ")
        assert "source checkout" in result.stderr and target in result.stderr
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_the_runner_writes_each_result_with_the_machine_s_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "bench_tiny.py").write_text(
        "def main():\n    print('tiny figures')\n    return {'figure': 1.5}\n", encoding="utf-8"
    )
    monkeypatch.setenv("CORTEX_BENCH_DIR", str(folder))
    assert run_benchmarks("tiny") == 0
    result = json.loads((folder / "results" / "tiny.json").read_text(encoding="utf-8"))
    assert result["figure"] == 1.5 and result["benchmark"] == "tiny"
    load = result["load_average"]
    assert set(load) == {"before", "after"}
    assert all(len(value) == 3 for value in load.values())  # 1, 5 and 15 minutes
    out = capsys.readouterr().out
    assert "tiny figures" in out and out.count("load average") == 2
    assert run_benchmarks("nope") == 2

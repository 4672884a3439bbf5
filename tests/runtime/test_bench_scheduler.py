"""The scheduler benchmark runs (quick sizes) and reports every figure; no timing asserts."""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark


def test_lower_bound_and_baselines_on_a_known_dag() -> None:
    bench = load_benchmark("scheduler")
    dag = [("a", (), 1.0), ("b", ("a",), 2.0), ("c", (), 0.5), ("d", ("b", "c"), 1.0)]
    arrival = {"a": 0.0, "b": 0.1, "c": 0.2, "d": 3.5}
    # chains: a=4, b=3, c=1.5, d=1 -> max(0+4, 0.1+3, 0.2+1.5, 3.5+1) = 4.5
    assert bench.lower_bound(dag, arrival) == pytest.approx(4.5)
    assert bench.sequential_makespan(dag, arrival) == pytest.approx(4.5)
    # waves after the last arrival: levels {a,c}=1, {b}=2, {d}=1
    assert bench.waves_makespan(dag, arrival) == pytest.approx(3.5 + 4.0)


def test_quick_benchmark_reports_its_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("scheduler").main()
    assert result["quick"] is True
    dags = result["random_dags"]
    assert set(dags["shapes"]) == {
        "chain_heavy",
        "fan_out_fan_in",
        "layered_random",
        "critical_path_last",
    }
    for shape in dags["shapes"].values():
        for row in shape.values():
            for key in ("makespan_s", "lower_bound_s", "ratio_to_lower_bound", "sequential_s"):
                assert row[key] > 0
            assert {"p50_ms", "p99_ms", "max_ms"} <= set(row["dispatch"])
    assert result["research_assistant"]["status"] == "ok"
    assert result["research_assistant"]["ours_s"] > 0
    assert all(run["speedup"] > 0 for run in result["parallel_qa"]["runs"].values())
    assert result["parallel_qa"]["llmcompiler_published_speedup"] == 2.15
    for row in result["overhead"].values():
        assert row["us_per_action"] > 0 and row["peak_memory_mb"] > 0

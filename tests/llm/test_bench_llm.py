"""The model-path benchmark runs (quick mode) and reports its figures.

No wall-clock threshold is asserted: speed is read from the report, not
enforced by the test suite.
"""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark


def test_quick_llm_bench_reports_every_figure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("llm").main()
    assert result["quick"] is True
    assert result["chunks"] == 200 and result["rate_chunks_per_s"] == 1000.0
    for key in (
        "first_event_ms",
        "first_chunk_ms",
        "raw_first_chunk_ms",
        "litellm_import_s",
        "first_call_s",
    ):
        assert isinstance(result[key], float) and result[key] >= 0
    assert set(result["paced_latency_ms"]) == {
        "ours_median",
        "ours_p99",
        "raw_median",
        "raw_p99",
        "overhead_median",
    }
    assert set(result["unpaced_us_per_chunk"]) == {"ours", "raw_httpx", "overhead", "ratio"}
    paths = result["unpaced_cpu_us_per_chunk"]
    assert set(paths) == {"ours", "litellm_wrapper", "litellm_sdk", "raw_httpx"}
    assert all(isinstance(value, float) and value > 0 for value in paths.values())
    assert set(result["end_to_end"]) == {"1000", "5000"}
    for row in result["end_to_end"].values():
        assert row["status"] == "ok"  # the whole run went through: parser, scheduler, view
        assert row["cpu_us_per_chunk"] > 0 and row["raw_httpx_cpu_us_per_chunk"] > 0
    memory = result["in_process_us_per_chunk"]
    assert set(memory) == {"run", "run_without_view", "model_alone", "ours", "ours_without_view"}
    assert memory["run"] > memory["model_alone"] > 0
    assert "first byte -> first event" in capsys.readouterr().out

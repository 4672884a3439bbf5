"""``benchmarks/bench_scale.py`` runs (quick mode) and reports every figure.

No timing thresholds: the figures are read, not asserted against the clock.
"""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark

pytest.importorskip("distributed")

pytestmark = pytest.mark.kernel


def test_bench_scale_quick(monkeypatch: pytest.MonkeyPatch, cortex_kernelspec: str) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("scale").main()
    assert result["quick"] is True and result["workers"] == 2
    for tool in ("burn_local", "burn_dask"):
        overhead, fan_out = result[tool]["overhead"], result[tool]["fan_out"]
        assert "error" not in overhead and "error" not in fan_out, result[tool]
        assert overhead["calls"] == 5
        assert {"p50_ms", "p99_ms", "max_ms"} <= set(overhead)
        assert fan_out["finished"] == fan_out["calls"] == 20
        assert fan_out["makespan_s"] > 0 and fan_out["probes"] >= 1
        assert fan_out["kernel_cpu_ms_per_call"] >= 0
    projection = result["projection"]
    assert set(projection["makespan_s_by_workers"]) == {"2", "4", "8", "16", "32", "64", "128"}
    assert projection["per_call_s"] > 0

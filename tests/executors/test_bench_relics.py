"""The relics benchmark runs (quick mode) and reports every figure; no speed is asserted."""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark


def test_quick_relics_bench_reports_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("relics").main()
    for name in ("python", "sqlite", "direct_sqlite_get", "sync_tool"):
        figures = result[name]
        assert figures["p99_us"] >= figures["p50_us"] > 0 and figures["calls"] == 200
    assert result["python_vs_sync_tool"] > 0 and result["sqlite_vs_direct"] > 0

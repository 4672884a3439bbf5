"""The tools benchmark runs (quick mode) and reports every figure; no speed is asserted."""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark
from tests.docker_support import engine_or_skip


def test_quick_tools_bench_reports_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    engine_or_skip()  # the Docker figures need an engine (CI has one)
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("tools").main()
    assert set(result["per_call"]) == {"sync_noop", "async_noop", "command_noop", "docker_noop"}
    for figures in result["per_call"].values():
        assert figures["p99_ms"] >= figures["p50_ms"] >= 0 and figures["calls"] >= 2
    for key in ("fifty_commands", "fifty_sleeps"):
        assert set(result[key]) == {"sequential_s", "concurrent_s", "speedup"}
    first = result["container_first_byte"]
    assert first["create_to_first_byte_ms"] >= first["start_to_first_byte_ms"] > 0

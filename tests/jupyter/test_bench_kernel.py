"""``benchmarks/bench_kernel.py`` runs (quick mode) and reports every figure.

No wall-clock thresholds here: the goals are checked by reading the figures,
not by failing a test on a busy machine.
"""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark

pytestmark = pytest.mark.kernel


def test_bench_kernel_quick(monkeypatch: pytest.MonkeyPatch, cortex_kernelspec: str) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("kernel").main()
    assert result["quick"] is True
    for key in ("cortex_s", "python3_s", "ratio"):
        assert result["startup"][key] > 0
    for key in ("agent_cell_ms", "pass_cell_ms", "extra_ms"):
        assert isinstance(result["round_trip"][key], float)
    stream = result["stream"]
    assert "error" not in stream, stream
    assert stream["updates"] >= 2
    assert stream["messages_per_second"] > 0
    assert stream["bytes_per_update_mean"] > 0
    first = result["first_cell"]
    for key in ("first_token_ms", "second_token_ms", "first_shown_ms", "quiet_after_start_s"):
        assert first[key] > 0
    assert isinstance(first["extra_ms"], float)

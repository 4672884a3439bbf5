"""The feeds benchmark runs (quick sizes) and reports every figure; no timing asserts."""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark


def test_quick_benchmark_reports_its_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("feeds").main()
    assert result["quick"] is True
    cache = result["periodic_cache"]
    # The baseline fetches at every turn; the periodic feed serves every turn
    # after the first from its cache and is fetched only in the background.
    assert cache["every_turn"]["source_calls"] == cache["turns"] == 20
    assert cache["every_turn"]["cache_hits"] == 0
    # (The first turn is a hit too when it waited for the background's first fetch.)
    assert cache["periodic"]["cache_hits"] in (19, 20) and cache["cache_hit_rate"] >= 0.95
    assert cache["periodic"]["source_calls"] >= 1
    assert cache["source_calls_saved"] == 20 - cache["periodic"]["source_calls"]
    # Every finished fetch is announced; a refresh still in flight when the run
    # ends is cancelled with it, so it may be counted as a call without an event.
    calls = cache["periodic"]["source_calls"]
    assert calls - 1 <= cache["periodic"]["feed_updated_events"] <= calls
    build = result["prompt_build"]
    assert build["feeds"] == 20 and build["prompt_chars"] > 20 * 400
    for key in ("with_20_feeds", "no_feeds"):
        assert build[key]["p50_ms"] > 0 and build[key]["p99_ms"] >= build[key]["p50_ms"]
    relic = result["relic_call"]
    for kind in ("python", "sqlite", "sync_tool"):
        assert relic[kind]["p99_us"] >= relic[kind]["p50_us"] > 0

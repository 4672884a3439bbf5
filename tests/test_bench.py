"""The benchmarks' one percentile: p50 is the median, p99 interpolates."""

from __future__ import annotations

import random
import statistics

import pytest

from cortex_kernel.bench import percentile


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

"""The grammar benchmark runs (quick mode) and reports its figures.

No wall-clock threshold is asserted; the stack counts are not timings but
what the grammar makes llama.cpp keep alive, so they are checked.
"""

from __future__ import annotations

import pytest

from cortex_kernel.bench import load_benchmark


def test_quick_grammar_bench_reports_every_size(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = load_benchmark("grammar").main()
    assert result["quick"] is True
    assert set(result["sizes"]) == {"4", "40", "200"}
    for figures in result["sizes"].values():
        for key in ("build_ms", "check_ms", "recognizer_us_per_char"):
            assert isinstance(figures[key], float) and figures[key] >= 0
        assert figures["llama_cpp_rules"] > figures["grammar_rules"] > 0
    sizes = result["sizes"]
    assert (
        sizes["4"]["grammar_chars"] < sizes["40"]["grammar_chars"] < sizes["200"]["grammar_chars"]
    )
    # More tools, no more stacks: the names are a trie.
    assert sizes["200"]["stacks_max"] <= sizes["4"]["stacks_max"] + 2
    assert sizes["200"]["stacks_mean"] < 4
    assert "skipped" in result["server"]  # quick mode never talks to a real server
    assert "200 tools" in capsys.readouterr().out

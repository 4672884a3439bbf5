"""The model-path benchmark runs (quick mode) and reports its figures; its floor is a floor.

No wall-clock threshold is asserted: speed is read from the report, not
enforced by the test suite.
"""

from __future__ import annotations

import anyio
import pytest

from cortex_kernel.bench import load_benchmark
from tests.llm.fake_openai import FakeOpenAIProcess, text_reply


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
        "floor_first_chunk_ms",
        "litellm_import_s",
        "first_call_s",
    ):
        assert isinstance(result[key], float) and result[key] >= 0
    assert set(result["paced_latency_ms"]) == {
        "ours_median",
        "ours_p99",
        "floor_median",
        "floor_p99",
        "overhead_median",
    }
    paths = result["unpaced_cpu_us_per_chunk"]
    assert set(paths) == {"ours", "litellm_wrapper", "litellm_sdk", "floor"}
    assert all(isinstance(value, float) and value > 0 for value in paths.values())
    # One chunk per call on every path: the loopback server sends one SSE
    # event per HTTP chunk and every reader hands each one on by itself.
    assert result["texts_per_chunk"] == dict.fromkeys(paths, 1.0)
    assert result["ours_reader"] in ("sse", "litellm")
    assert result["text_actions_with_escapes"] > 0  # the parser benchmark's corpus
    assert set(result["end_to_end"]) == {"1000", "5000"}
    for row in result["end_to_end"].values():
        assert row["status"] == "ok"  # the whole run went through: parser, scheduler, view
        assert row["cpu_us_per_chunk"] > 0 and row["floor_cpu_us_per_chunk"] > 0
    memory = result["in_process_us_per_chunk"]
    assert set(memory) == {"run", "run_without_view", "model_alone", "ours", "ours_without_view"}
    assert memory["run"] > memory["model_alone"] > 0
    dispatch = result["dispatch"]
    for protocol in ("xml", "tools"):
        row = dispatch[protocol]
        assert row["calls"] == 4  # one run of 4 calls after the warm-up
        assert 0 < row["start_median_ms"] <= row["start_p99_ms"]
        assert row["stream_end_median_ms"] > 0
    out = capsys.readouterr().out
    assert "first byte -> first event" in out and "tools call's last byte -> start" in out


def test_the_floor_reads_the_same_text_as_our_adapter_one_chunk_a_time() -> None:
    bench = load_benchmark("llm")
    text = bench._document(300)
    assert len(text) == 1_200 and text.startswith("<thought>")

    async def read_both() -> tuple[list[int], list[int]]:
        with FakeOpenAIProcess([text_reply(text, chunk_size=4)] * 2) as server:
            floor, _ = await bench._floor(server.api_base)
            _, ours, _ = await bench._ours(server.api_base)
        return [chars for _, chars, _ in floor], [chars for _, chars, _ in ours]

    floor, ours = anyio.run(read_both)
    assert floor == ours == list(range(4, len(text) + 1, 4))

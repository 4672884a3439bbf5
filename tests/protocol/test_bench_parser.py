"""The parser benchmark: its verdict on parsers known to be fast or slow, its corpus, its report.

No wall-clock threshold is asserted on the real parser: its speed is read
from the report. The verdicts are checked on stand-ins whose speed is known
by construction (nothing at all per call, or microseconds of work per
character), far from the goal on the side they are meant to be.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from cortex_kernel.bench import load_benchmark
from cortex_kernel.protocol import Parser

bench = load_benchmark("parser")
SIZE = 20_000  # characters: 5,000 feeds at 4 characters


class _Event:
    __slots__ = ("type",)

    def __init__(self, kind: str) -> None:
        self.type = kind


class _OtherEvent(_Event):
    __slots__ = ()


_ACTION = [_Event("action_parsed")]
_OTHER_ACTION = [_OtherEvent("action_parsed")]
_NOTHING: list[Any] = []


class FastParser:
    """Known fast: no work per call beyond one ``in``; an action event at every '>'."""

    def feed(self, chunk: str) -> list[Any]:
        return _ACTION if ">" in chunk else _NOTHING

    def close(self) -> list[Any]:
        return _NOTHING


class SlowParser(FastParser):
    """Known slow: microseconds of CPU per character (the peer takes hundredths of one).

    The work grows with the chunk: a fixed cost per call would be amortised
    at 256 characters, where the peer's own cost per call is about as large.
    """

    def feed(self, chunk: str) -> list[Any]:
        for _ in range(500 * len(chunk)):
            pass
        return super().feed(chunk)


class LateDispatchParser(FastParser):
    """Fast per CPU second, but the call that delivers an action takes 2 ms (asleep)."""

    def feed(self, chunk: str) -> list[Any]:
        if ">" in chunk:
            time.sleep(0.002)
        return super().feed(chunk)


class TwoTypesParser(FastParser):
    """Fast, but its action events come in two classes, in turn."""

    def __init__(self) -> None:
        self._odd = False

    def feed(self, chunk: str) -> list[Any]:
        if ">" not in chunk:
            return _NOTHING
        self._odd = not self._odd
        return _ACTION if self._odd else _OTHER_ACTION


def test_a_parser_known_to_be_fast_meets_the_goal() -> None:
    # Best of three, as the benchmark reports: one pass's p99 of 72 calls is
    # its slowest call, and one preemption by a neighbour would be it.
    result = bench.measure(FastParser, size=SIZE, repeat=3)
    assert all(row["ratio"] >= bench.GOAL_RATIO for row in result["chunks"].values())
    assert result["dispatch_latency_us"]["samples"] > 0
    assert result["event_types"] == {"action_parsed": ["_Event"]}
    assert result["meets_goal"] is True


def test_a_parser_known_to_be_slow_misses_it_at_every_chunk_size() -> None:
    result = bench.measure(SlowParser, size=SIZE, repeat=1)
    assert all(row["ratio"] < bench.GOAL_RATIO for row in result["chunks"].values())
    assert result["meets_goal"] is False


def test_a_late_dispatch_or_two_types_for_one_event_miss_it() -> None:
    late = bench.measure(LateDispatchParser, size=SIZE, repeat=1)
    assert late["dispatch_latency_us"]["p99"] > bench.GOAL_DISPATCH_P99_US
    assert late["meets_goal"] is False
    two = bench.measure(TwoTypesParser, size=SIZE, repeat=1)
    assert two["event_types"] == {"action_parsed": ["_Event", "_OtherEvent"]}
    assert two["meets_goal"] is False


def test_dispatch_is_the_best_of_its_passes_as_throughput_is() -> None:
    # A neighbour taking the core during one pass (here the first pass's
    # parsers sleep 2 ms in every feed that delivers a '>') moves that pass
    # only; the figure is the pass with the lowest p99, every p99 beside it.
    made = 0

    def parser() -> FastParser:
        nonlocal made
        made += 1
        return LateDispatchParser() if made <= len(bench.CHUNK_SIZES) else FastParser()

    document = bench.build_document(5_000)
    chunked = [bench._chunks(document, size) for size in bench.CHUNK_SIZES]
    passes = [bench.dispatch_pass(parser, chunked) for _ in range(3)]
    assert passes[0]["p99"] > bench.GOAL_DISPATCH_P99_US
    best = bench.best_pass(passes)
    assert best["p99"] <= bench.GOAL_DISPATCH_P99_US
    assert best["p99"] == min(p["p99"] for p in passes)
    assert best["p99_of_passes"] == [p["p99"] for p in passes]


def _bodies_by_peer(document: str) -> list[Any]:
    peer = bench.PullPeer()
    events = [*peer.feed(document), *peer.close()]
    return [event[1] for event in events if event[0] == "action_parsed"]


def test_the_corpus_looks_like_model_output_and_both_parsers_read_it_alike() -> None:
    document = bench.build_document(50_000)
    ET.fromstring(f"<root>{document}</root>")  # XML as well, for the peer
    stats = bench.corpus_stats(document)
    assert 0 < stats["actions_with_escapes"] < stats["actions"]  # with escapes and without
    assert stats["longest_body_chars"] > 1_000  # long strings
    assert stats["non_ascii_share"] > 0.005
    assert any(ord(c) > 0xFFFF for c in document)  # emoji: four UTF-8 bytes
    for escape in ("\\n", '\\"', "\\\\", "\\u"):
        assert escape in document
    parser = Parser()
    events = [*parser.feed(document), *parser.close()]
    kinds = {event.type for event in events}
    assert {"action_parsed", "thought_delta", "response_delta", "text"} <= kinds
    assert "action_error" not in kinds and "warning" not in kinds
    ours = [event.action.body for event in events if event.type == "action_parsed"]
    assert ours == _bodies_by_peer(document)
    assert ours == [
        json.loads(part.split(">", 1)[1].split("</action>")[0])
        for part in document.split("<action ")[1:]
    ]


def test_the_peer_keeps_no_tree_and_reads_each_chunk_as_fed() -> None:
    document = bench.build_document(20_000)
    peer = bench.PullPeer()
    for start in range(0, len(document), 16):
        peer.feed(document[start : start + 16])
        assert len(peer._root) <= 1  # only the element still open
    assert len(peer.close()) > 0
    assert len(peer._root) == 0


def test_a_run_s_turns_call_the_corpus_tools() -> None:
    turns = bench.build_turns(3, chars=2_000)
    assert len(turns) == 3
    assert all(len(turn) >= 2_000 for turn in turns)
    assert turns[0].endswith("</action>") and 'mode="sync"' in turns[0].rsplit("<action", 1)[1]
    assert turns[-1].endswith("</response>") and '<response final="true">' in turns[-1]
    for turn in turns:
        parser = Parser()
        events = [*parser.feed(turn), *parser.close()]
        kinds = {event.type for event in events}
        assert "action_error" not in kinds and "warning" not in kinds
        tools = {e.action.body["name"] for e in events if e.type == "action_parsed"}
        assert tools <= {"run_python", "run_sql", "write_file", "search_docs", "read_csv"}


def test_quick_parser_bench_reports_every_figure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CORTEX_BENCH_QUICK", "1")
    result = bench.main()
    assert result["document_chars"] >= 90_000 and result["actions"] > 0
    assert set(result["chunks"]) == {"4", "16", "256"}
    for row in result["chunks"].values():
        assert row["ours_mb_s"] > 0 and row["peer_mb_s"] > 0 and row["ratio"] > 0
    for key in ("dispatch_latency_us", "peer_dispatch_latency_us"):
        assert result[key]["samples"] > 0
        assert 0 <= result[key]["p50"] <= result[key]["p99"]
    assert {"text", "thought_delta", "action_open", "action_parsed"} <= set(result["event_types"])
    turn = result["turn"]
    assert turn["status"] == "ok" and turn["turns"] == 3 and turn["chunks"] > 0
    assert 0 < turn["share_in_run"] < 1 and 0 < turn["share_alone"] < 1
    assert isinstance(result["meets_goal"], bool)
    out = capsys.readouterr().out
    assert "ours/peer" in out and "goal: " in out and "a run on the replay model" in out

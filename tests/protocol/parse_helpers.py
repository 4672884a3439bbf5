"""Shared helpers of the protocol tests: parse with any chunking, merge, check.

Every unit test parses through :func:`events_of`, which feeds the text whole
*and* one character at a time (h11's habit), checks that both give the same
events once adjacent text deltas are merged, and checks conservation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

from cortex_kernel.protocol import IdAllocator, Parser, ParserEvent

TEXT_TYPES = frozenset(("text", "thought_delta", "response_delta"))


def feed_chunks(chunks: Iterable[str], ids: IdAllocator | None = None) -> list[ParserEvent]:
    """Feed ``chunks`` one by one, then close; return every event."""
    parser = Parser(ids)
    events: list[ParserEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close())
    return events


def split_at(text: str, cuts: Iterable[int]) -> list[str]:
    """Cut ``text`` at the given offsets (any order, duplicates allowed)."""
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def merged(events: Sequence[ParserEvent]) -> list[dict[str, Any]]:
    """Events as dicts, with adjacent text deltas of one kind merged."""
    out: list[dict[str, Any]] = []
    for event in events:
        data = event.model_dump()
        if (
            out
            and data["type"] in TEXT_TYPES
            and out[-1]["type"] == data["type"]
            and out[-1]["span"][1] == data["span"][0]
        ):
            out[-1]["text"] += data["text"]
            out[-1]["span"] = (out[-1]["span"][0], data["span"][1])
            continue
        out.append(data)
    return out


def assert_conserved(text: str, events: Sequence[ParserEvent]) -> None:
    """Spans are contiguous, cover ``text``, and text events hold their slice."""
    position = 0
    for event in events:
        start, end = event.span
        assert start == position, (event, position)
        assert end >= start, event
        if event.type in TEXT_TYPES:
            assert event.text == text[start:end], event  # type: ignore[union-attr]
        position = end
    assert position == len(text)
    assert "".join(text[e.span[0] : e.span[1]] for e in events) == text


def events_of(text: str, ids: IdAllocator | None = None) -> list[dict[str, Any]]:
    """Parse ``text`` whole and char by char; check both; return merged dicts."""
    whole = feed_chunks([text], ids)
    assert_conserved(text, whole)
    one_by_one = feed_chunks(list(text))
    assert_conserved(text, one_by_one)
    result = merged(whole)
    assert merged(one_by_one) == result
    return result


def kinds(events: Sequence[dict[str, Any]]) -> list[str]:
    """The ``type`` of each event."""
    return [e["type"] for e in events]


def only(events: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of one type."""
    return [e for e in events if e["type"] == kind]

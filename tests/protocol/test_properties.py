"""Property tests of docs/protocol.md#streaming-guarantees.

Chunk invariance, conservation, early dispatch, totality.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol import ActionParsed, Parser, ParserEvent

from .doc_strategies import documents, mutated_documents
from .parse_helpers import assert_conserved, feed_chunks, merged, split_at

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(documents, st.data())
def test_chunk_invariance_over_random_splits(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=15))
    whole = feed_chunks([text])
    split = feed_chunks(split_at(text, cuts))
    assert merged(split) == merged(whole)


@SETTINGS
@given(documents)
def test_chunk_invariance_one_character_at_a_time(text: str) -> None:
    assert merged(feed_chunks(list(text))) == merged(feed_chunks([text]))


@SETTINGS
@given(mutated_documents(), st.data())
def test_chunk_invariance_on_broken_documents(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=15))
    assert merged(feed_chunks(split_at(text, cuts))) == merged(feed_chunks([text]))


@SETTINGS
@given(documents, st.data())
def test_conservation(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=15))
    assert_conserved(text, feed_chunks(split_at(text, cuts)))


@SETTINGS
@given(documents, st.data())
def test_early_dispatch(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=15))
    parser = Parser()
    position = 0
    dispatched = 0
    for chunk in split_at(text, cuts):
        start, position = position, position + len(chunk)
        for event in parser.feed(chunk):
            if isinstance(event, ActionParsed):
                dispatched += 1
                closing_gt = event.span[1] - 1
                assert text[closing_gt] == ">"
                assert start <= closing_gt < position
    closing: list[ParserEvent] = parser.close()
    assert not any(isinstance(e, ActionParsed) for e in closing)
    assert dispatched == sum(1 for e in feed_chunks([text]) if isinstance(e, ActionParsed))


@SETTINGS
@given(st.text())
def test_totality_on_arbitrary_text(text: str) -> None:
    assert_conserved(text, feed_chunks([text]))
    assert_conserved(text, feed_chunks(list(text)))


@SETTINGS
@given(mutated_documents(), st.data())
def test_totality_on_broken_documents(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=15))
    events = feed_chunks(split_at(text, cuts))
    assert_conserved(text, events)
    for event in events:
        assert event.to_json()  # every event serialises


@SETTINGS
@given(documents, st.integers(0, 2000))
def test_truncation_anywhere_never_dispatches_a_cut_action(text: str, cut: int) -> None:
    prefix = text[: cut % (len(text) + 1)]
    events = feed_chunks([prefix])
    assert_conserved(prefix, events)
    for event in events:
        if isinstance(event, ActionParsed):
            assert prefix[: event.span[1]].endswith(">")

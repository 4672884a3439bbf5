"""Light parser events equal their pydantic schema, on the property-test corpus.

The parser makes slotted event objects (:mod:`cortex_kernel.protocol.parser_events`)
from values it has checked, without pydantic; the schema
(:mod:`cortex_kernel.protocol.event_schema`) is applied at the boundaries.
Every event the parser makes from any document, cut anywhere, must validate
against its model, write exactly the JSON the validated model writes, read
back equal, dump and copy as pydantic does, and pickle.
"""

from __future__ import annotations

import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol import ParserEventBase, parse_parser_event
from cortex_kernel.protocol.event_schema import MODEL_OF
from cortex_kernel.protocol.parser_events import (
    EVENT_CLASSES,
    PARSER_EVENT_TYPES,
    to_model,
    validate,
)

from .doc_strategies import documents, mutated_documents
from .parse_helpers import feed_chunks

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
cuts = st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=8)


def assert_equals_its_model(event: ParserEventBase) -> None:
    schema = MODEL_OF[event.type]
    model = schema.model_validate(event.model_dump())  # the values fit the schema
    assert to_model(event) == model
    assert list(event.fields()) == list(schema.model_fields)  # same fields, same order
    line = event.to_json()
    assert line == model.to_json()  # the validated model's JSON, byte for byte
    assert parse_parser_event(line) == event
    assert validate(event.model_dump()) == event
    assert event.model_dump() == model.model_dump()
    assert event.model_dump(mode="json") == model.model_dump(mode="json")
    stamped = event.model_copy(update={"t": 1.5e-05, "turn": 2})
    assert (stamped.t, stamped.turn, event.t) == (1.5e-05, 2, None)
    assert stamped.to_json() == model.model_copy(update={"t": 1.5e-05, "turn": 2}).to_json()
    assert pickle.loads(pickle.dumps(event)) == event
    assert repr(event).startswith(f"{type(event).__name__}(type={event.type!r}, span=")


def _chunked(text: str, sizes: list[int]) -> list[str]:
    """``text`` cut into chunks of the given sizes, taken in turn."""
    chunks, at, turn = [], 0, 0
    while at < len(text):
        size = sizes[turn % len(sizes)]
        chunks.append(text[at : at + size])
        at, turn = at + size, turn + 1
    return chunks


def _check_document(text: str, sizes: list[int]) -> set[str]:
    seen: set[str] = set()
    for event in feed_chunks(_chunked(text, sizes)):
        assert_equals_its_model(event)
        seen.add(event.type)
    return seen


@SETTINGS
@given(documents, cuts)
def test_every_event_of_a_document_equals_its_model(text: str, sizes: list[int]) -> None:
    _check_document(text, sizes)


@SETTINGS
@given(mutated_documents(), cuts)
def test_every_event_of_a_broken_document_equals_its_model(text: str, sizes: list[int]) -> None:
    _check_document(text, sizes)


def test_the_corpus_makes_every_kind_of_event() -> None:
    text = (
        'hi <thought>x <action type="tool" id="q" depends_on="a,b">{"name": "n"}</action>'
        "<action type='tool'>{bad</action><action/></response>"
        '<response final="maybe">r</thought><context_feed id=f>{}</context_feed>'
        "<thought>cut"
    )
    assert _check_document(text, [3, 7]) == set(PARSER_EVENT_TYPES)
    assert set(EVENT_CLASSES) == set(MODEL_OF) == set(PARSER_EVENT_TYPES)


def test_events_compare_by_kind_and_value() -> None:
    text_cls, delta_cls = EVENT_CLASSES["text"], EVENT_CLASSES["thought_delta"]
    assert text_cls((0, 1), "a") == text_cls(span=(0, 1), text="a")
    assert text_cls((0, 1), "a") != delta_cls((0, 1), "a")
    assert not isinstance(delta_cls((0, 1), "a"), text_cls)
    assert text_cls((0, 1), "a") != text_cls((0, 1), "a", t=0.5)

"""Parser events fit the schema derived from them, on the property-test corpus.

The parser makes events (slotted dataclasses, :mod:`cortex_kernel.protocol.parser_events`)
from values it has checked, without validating them; the schema pydantic
derives from the classes (``ADAPTER``) is applied at the boundaries. Every
event the parser makes from any document, cut anywhere, must validate back
to an equal event holding values of the same types, write a JSON line in
field order that reads back equal, copy with ``dataclasses.replace`` and
pickle.
"""

from __future__ import annotations

import dataclasses
import json
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol import Action, ActionType, Parser, ParserEvent, parse_parser_event
from cortex_kernel.protocol.parser_events import EVENT_CLASSES, PARSER_EVENT_TYPES, validate

from .doc_strategies import documents, mutated_documents
from .parse_helpers import feed_chunks

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
cuts = st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=8)


def assert_fits_its_schema(event: ParserEvent) -> None:
    validated = validate(event.model_dump())
    assert validated == event
    # The same types too: == takes an enum member for its string, repr does not.
    assert repr(validated) == repr(event)
    line = event.to_json()
    assert parse_parser_event(line) == event
    written = json.loads(line)
    names = [f.name for f in dataclasses.fields(event) if getattr(event, f.name) is not None]
    assert list(written) == names  # every field that is set, in the class's order
    assert written == event.model_dump(mode="json", exclude_none=True)
    stamped = dataclasses.replace(event, t=1.5e-05, turn=2)
    assert (stamped.t, stamped.turn, event.t) == (1.5e-05, 2, None)
    assert parse_parser_event(stamped.to_json()) == stamped
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
        assert_fits_its_schema(event)
        seen.add(event.type)
    return seen


@SETTINGS
@given(documents, cuts)
def test_every_event_of_a_document_fits_its_schema(text: str, sizes: list[int]) -> None:
    _check_document(text, sizes)


@SETTINGS
@given(mutated_documents(), cuts)
def test_every_event_of_a_broken_document_fits_its_schema(text: str, sizes: list[int]) -> None:
    _check_document(text, sizes)


CORPUS = (
    'hi <thought>x <action type="tool" id="q" depends_on="a,b">{"name": "n"}</action>'
    "<action type='tool'>{bad</action><action/></response>"
    '<response final="maybe">r</thought><context_feed id=f>{}</context_feed>'
    "<thought>cut"
)


def test_the_corpus_makes_every_kind_of_event() -> None:
    assert _check_document(CORPUS, [3, 7]) == set(PARSER_EVENT_TYPES)
    assert set(EVENT_CLASSES) == set(PARSER_EVENT_TYPES)


def test_the_json_of_each_kind_is_as_documented() -> None:
    # docs/runtime.md#events: field order and empty fields left out, byte for byte.
    parser = Parser()
    lines = [event.to_json() for event in parser.feed(CORPUS) + parser.close()]
    assert lines[:6] == [
        '{"type":"text","span":[0,3],"text":"hi "}',
        '{"type":"thought_start","span":[3,12]}',
        '{"type":"thought_delta","span":[12,14],"text":"x "}',
        '{"type":"action_open","span":[14,58],"id":"q",'
        '"attrs":{"type":"tool","id":"q","depends_on":"a,b"},"in_thought":true}',
        '{"type":"action_parsed","span":[58,80],"action":{"id":"q","type":"tool",'
        '"mode":"sync","depends_on":["a","b"],"retries":0,"body":{"name":"n"},'
        '"raw_body":"{\\"name\\": \\"n\\"}","in_thought":true}}',
        '{"type":"action_open","span":[80,100],"id":"a1","attrs":{"type":"tool"},'
        '"in_thought":true}',
    ]
    assert {json.loads(line)["type"] for line in lines} == set(PARSER_EVENT_TYPES)


def test_outside_values_are_validated() -> None:
    import pytest
    from pydantic import ValidationError

    parsed = validate(
        {"type": "action_parsed", "span": [0, 1], "action": {"id": "a", "type": "tool", "body": {}}}
    )
    assert parsed == EVENT_CLASSES["action_parsed"](
        (0, 1), Action(id="a", type=ActionType.TOOL, body={})
    )
    assert type(parsed.action.type) is ActionType and parsed.span == (0, 1)
    for bad in (
        {"type": "text", "span": [0, 1]},  # no text
        {"type": "nonsense", "span": [0, 1]},
        {"type": "action_parsed", "span": [0, 1], "action": {"id": "a", "type": "x", "body": {}}},
    ):
        with pytest.raises(ValidationError):
            validate(bad)


def test_events_compare_by_kind_and_value() -> None:
    text_cls, delta_cls = EVENT_CLASSES["text"], EVENT_CLASSES["thought_delta"]
    assert text_cls((0, 1), "a") == text_cls(span=(0, 1), text="a")
    assert text_cls((0, 1), "a") != delta_cls((0, 1), "a")
    assert not isinstance(delta_cls((0, 1), "a"), text_cls)
    assert text_cls((0, 1), "a") != text_cls((0, 1), "a", t=0.5)

"""The package's public names, and the fast event constructors' faithfulness."""

from __future__ import annotations

import pickle

import pytest

import cortex_kernel.protocol as protocol
from cortex_kernel.fastmodel import constructor
from cortex_kernel.protocol import (
    Action,
    ActionMode,
    ActionOpen,
    ActionParsed,
    ActionType,
    Parser,
    ResponseDelta,
    Text,
    ThoughtDelta,
    parse_parser_event,
)
from cortex_kernel.protocol.event_schema import (
    ActionOpenModel,
    ActionParsedModel,
    ThoughtStartModel,
)


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(protocol) if not name.startswith("_")}
    modules = {"parser_events", "event_schema", "models", "parser", "references", "annotations"}
    assert set(protocol.__all__) == public - modules
    assert len(set(protocol.__all__)) == len(protocol.__all__)
    for name in protocol.__all__:
        assert getattr(protocol, name) is not None


def test_parser_needs_no_arguments() -> None:
    assert Parser().feed("x")[0].type == "text"


def test_text_events_from_the_hot_path_equal_made_ones() -> None:
    # Text events come from the hot path of feed; the rest of the contract
    # (schema, JSON, pickling) is checked on the corpus in test_event_schema.
    parser = Parser()
    events = [
        *parser.feed("abcd"),
        *parser.feed("<thought>"),
        *parser.feed("efgh"),
        *parser.feed("</thought><response>ij"),
        *parser.feed("kl"),
    ]
    fast_events = [e for e in events if isinstance(e, Text | ThoughtDelta | ResponseDelta)]
    assert [type(e) for e in fast_events] == [Text, ThoughtDelta, ResponseDelta, ResponseDelta]
    for fast in fast_events:
        made = type(fast)(span=fast.span, text=fast.text)
        assert fast == made
        assert fast.to_json() == made.to_json()
        assert parse_parser_event(fast.to_json()) == made
        copied = fast.model_copy(update={"t": 1.5, "turn": 2})
        assert (copied.t, copied.turn, fast.t) == (1.5, 2, None)
        assert pickle.loads(pickle.dumps(fast)) == made
        assert repr(fast) == repr(made)


def test_fast_constructor_equals_validation() -> None:
    action_fields = {
        "id": "a1",
        "type": ActionType.TOOL,
        "mode": ActionMode.ASYNC,
        "depends_on": ("x",),
        "output_key": "k",
        "timeout": 1.0,
        "retries": 2,
        "body": {"name": "n"},
        "raw_body": '{"name": "n"}',
        "in_thought": True,
    }
    fast_action = constructor(Action)(**action_fields)
    assert fast_action == Action(**action_fields)
    fast_parsed = constructor(ActionParsedModel)(span=(0, 5), action=fast_action)
    assert fast_parsed == ActionParsedModel(span=(0, 5), action=Action(**action_fields))
    assert parse_parser_event(fast_parsed.to_json()) == ActionParsed((0, 5), fast_action)
    opened = constructor(ActionOpenModel)(span=(0, 1), id="a1")
    assert opened.attrs == {} and opened == ActionOpenModel(span=(0, 1), id="a1")
    assert constructor(ActionOpenModel)(span=(0, 1), id="a2").attrs is not opened.attrs
    assert ActionOpen((0, 1), "a2").attrs is not ActionOpen((0, 1), "a1").attrs
    assert constructor(ThoughtStartModel)(span=(0, 9)) == ThoughtStartModel(span=(0, 9))


def test_events_from_the_parser_round_trip_through_json() -> None:
    text = (
        'hi <thought>x <action type="tool" id="q" depends_on="a,b">{"name": "n"}</action>'
        '</thought><response final="false">r</response><context_feed id=f>{}</context_feed>'
    )
    parser = Parser()
    for event in parser.feed(text) + parser.close():
        assert parse_parser_event(event.to_json()) == event


@pytest.mark.pure_python  # doctest reads the docstrings of Python functions
def test_docstring_examples() -> None:
    import doctest

    import cortex_kernel.protocol.parser as parser_module

    result = doctest.testmod(parser_module)
    assert result.attempted > 0 and result.failed == 0

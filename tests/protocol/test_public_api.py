"""The package's public names, and events as the hot path makes them."""

from __future__ import annotations

import dataclasses
import pickle

import cortex_kernel.protocol as protocol
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


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(protocol) if not name.startswith("_")}
    modules = {"parser_events", "models", "parser", "references", "annotations"}
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
        copied = dataclasses.replace(fast, t=1.5, turn=2)
        assert (copied.t, copied.turn, fast.t) == (1.5, 2, None)
        assert pickle.loads(pickle.dumps(fast)) == made
        assert repr(fast) == repr(made)


def test_an_action_reads_back_as_it_was_made() -> None:
    action = Action(
        id="a1",
        type=ActionType.TOOL,
        mode=ActionMode.ASYNC,
        depends_on=("x",),
        output_key="k",
        timeout=1.0,
        retries=2,
        body={"name": "n"},
        raw_body='{"name": "n"}',
        in_thought=True,
    )
    event = ActionParsed((0, 5), action)
    back = parse_parser_event(event.to_json())
    assert back == event and repr(back) == repr(event)
    assert ActionOpen((0, 1), "a2").attrs is not ActionOpen((0, 1), "a1").attrs
    assert Action(id="a", type=ActionType.TOOL, body={}).mode is ActionMode.SYNC


def test_events_from_the_parser_round_trip_through_json() -> None:
    text = (
        'hi <thought>x <action type="tool" id="q" depends_on="a,b">{"name": "n"}</action>'
        '</thought><response final="false">r</response><context_feed id=f>{}</context_feed>'
    )
    parser = Parser()
    for event in parser.feed(text) + parser.close():
        assert parse_parser_event(event.to_json()) == event


def test_docstring_examples() -> None:
    import doctest

    import cortex_kernel.protocol.parser as parser_module

    result = doctest.testmod(parser_module)
    assert result.attempted > 0 and result.failed == 0

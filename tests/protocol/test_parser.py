"""Unit tests of the parser: one per event type and per leniency of docs/protocol.md#actions.

Each test goes through ``events_of``, which also feeds the input one
character at a time and checks conservation.
"""

from __future__ import annotations

import json

import pytest

from cortex_kernel.protocol import ActionMode, ActionType, FeedType, IdAllocator, Parser

from .parse_helpers import events_of, feed_chunks, kinds, only


def action(text: str) -> dict[str, object]:
    """The one ``action_parsed`` action of ``text``."""
    (parsed,) = only(events_of(text), "action_parsed")
    result: dict[str, object] = parsed["action"]
    return result


def error(text: str) -> dict[str, object]:
    """The one ``action_error`` of ``text``."""
    (err,) = only(events_of(text), "action_error")
    return err


# -- each event type -------------------------------------------------------------------


def test_text_outside_elements_is_kept() -> None:
    assert events_of("hello, world") == [
        {
            "type": "text",
            "span": (0, 12),
            "t": None,
            "turn": None,
            "parent": None,
            "text": "hello, world",
        }
    ]


def test_empty_input_gives_no_events() -> None:
    assert events_of("") == []
    assert Parser().feed("") == []


def test_thought_start_delta_end() -> None:
    events = events_of("<thought>hmm</thought>")
    assert kinds(events) == ["thought_start", "thought_delta", "thought_end"]
    assert events[0]["span"] == (0, 9)
    assert events[1]["text"] == "hmm"
    assert events[2]["span"] == (12, 22)
    assert events[2]["truncated"] is False


def test_response_start_delta_end_with_final() -> None:
    events = events_of('<response final="false">50% done</response>')
    assert kinds(events) == ["response_start", "response_delta", "response_end"]
    assert events[0]["final"] is False
    assert events[1]["text"] == "50% done"
    assert events[2]["final"] is False and events[2]["truncated"] is False


def test_action_open_and_parsed() -> None:
    text = '<action type="tool" id="ls1">{"name": "ls", "parameters": {"path": "."}}</action>'
    events = events_of(text)
    assert kinds(events) == ["action_open", "action_parsed"]
    opened, parsed = events
    assert opened["id"] == "ls1"
    assert opened["attrs"] == {"type": "tool", "id": "ls1"}
    assert opened["span"] == (0, text.index(">") + 1)
    assert parsed["span"] == (opened["span"][1], len(text))
    act = parsed["action"]
    assert act["type"] == ActionType.TOOL
    assert act["mode"] == ActionMode.SYNC
    assert act["body"] == {"name": "ls", "parameters": {"path": "."}}
    assert act["raw_body"] == text[opened["span"][1] : text.index("</action>")]
    assert act["in_thought"] is False


def test_action_error_event() -> None:
    err = error('<action type="tool">{"name": </action>')
    assert err["id"] == "a1"
    assert "not valid JSON" in str(err["message"])
    assert err["raw_body"] == '{"name": '


def test_context_feed_event_covers_the_whole_element() -> None:
    text = (
        '<context_feed id="prices" type="periodic">{"tool": "quote", "interval": 60}</context_feed>'
    )
    events = events_of(text)
    assert kinds(events) == ["context_feed"]
    (feed,) = events
    assert feed["span"] == (0, len(text))
    assert feed["feed"]["id"] == "prices"
    assert feed["feed"]["type"] == FeedType.PERIODIC
    assert feed["feed"]["source"] == {"tool": "quote", "interval": 60}


def test_context_feed_defaults_to_on_demand_and_allows_empty_body() -> None:
    (feed,) = events_of("<context_feed id=clock></context_feed>")
    assert feed["feed"]["type"] == FeedType.ON_DEMAND
    assert feed["feed"]["source"] == {}


def test_warning_event_for_repaired_json() -> None:
    events = events_of("<action type=llm>{'prompt': 'hi',}</action>")
    assert kinds(events) == ["action_open", "warning", "action_parsed"]
    warning = events[1]
    assert warning["span"][0] == warning["span"][1]
    assert warning["id"] == "a1"
    assert set(warning["details"]["repairs"]) == {"single quotes", "trailing commas"}
    assert events[2]["action"]["body"] == {"prompt": "hi"}


# -- tags and attributes ---------------------------------------------------------------


def test_tags_are_case_insensitive() -> None:
    events = events_of('<THOUGHT>x<Action TYPE="Tool" ID=b>{"name": "n"}</ACTION></Thought>')
    assert kinds(events) == [
        "thought_start",
        "thought_delta",
        "action_open",
        "action_parsed",
        "thought_end",
    ]
    assert events[3]["action"]["id"] == "b"
    assert events[3]["action"]["type"] == ActionType.TOOL


@pytest.mark.parametrize(
    "attrs",
    [
        'type="tool" mode="async" id="x1"',
        "type='tool' mode='async' id='x1'",
        "type=tool mode=async id=x1",
        "type = \"tool\"  mode='async'\tid=x1",
    ],
)
def test_double_single_and_bare_attribute_values(attrs: str) -> None:
    act = action(f'<action {attrs}>{{"name": "n"}}</action>')
    assert (act["type"], act["mode"], act["id"]) == (ActionType.TOOL, ActionMode.ASYNC, "x1")


@pytest.mark.parametrize(
    "written",
    [
        'depends_on="a,b"',
        'depends_on="a b"',
        "depends_on='a, b'",
        "depends_on=a,b",
        """depends_on='["a","b"]'""",
        'depends_on=["a","b"]',
        "depends_on=[a, b]",
        'depends_on="[a, b]"',
    ],
)
def test_depends_on_in_every_form(written: str) -> None:
    act = action(f'<action type="tool" {written}>{{"name": "n"}}</action>')
    assert act["depends_on"] == ("a", "b")


def test_unterminated_depends_on_from_the_seed_notes() -> None:
    act = action('<action type="tool" depends_on=["a","b">{"name": "n"}</action>')
    assert act["depends_on"] == ("a", "b")


def test_fields_in_the_json_body() -> None:
    body = (
        '{"name": "n", "id": "q", "mode": "fire_and_forget", "output_key": "out", '
        '"depends_on": ["x", "y"], "timeout": 2.5, "retries": 3}'
    )
    events = events_of(f'<action type="tool">{body}</action>')
    act = only(events, "action_parsed")[0]["action"]
    assert act["id"] == "q"
    assert act["mode"] == ActionMode.FIRE_AND_FORGET
    assert act["output_key"] == "out"
    assert act["depends_on"] == ("x", "y")
    assert act["timeout"] == 2.5
    assert act["retries"] == 3
    # The open event announced a generated id; a warning links the two.
    (warning,) = only(events, "warning")
    assert warning["details"] == {"open_id": "a1", "id": "q"}


def test_attribute_wins_over_body_field() -> None:
    act = action(
        '<action type="tool" id="attr" mode="async" timeout="5" retries="1" output_key="k" '
        'depends_on="p">{"name": "n", "id": "body", "mode": "sync", "timeout": 9, '
        '"retries": 4, "output_key": "other", "depends_on": ["z"]}</action>'
    )
    assert act["id"] == "attr"
    assert act["mode"] == ActionMode.ASYNC
    assert act["timeout"] == 5.0
    assert act["retries"] == 1
    assert act["output_key"] == "k"
    assert act["depends_on"] == ("p",)


@pytest.mark.parametrize(
    ("written", "mode"),
    [
        ("sync", ActionMode.SYNC),
        ("ASYNC", ActionMode.ASYNC),
        ("async_", ActionMode.ASYNC),
        ("fire-and-forget", ActionMode.FIRE_AND_FORGET),
        ("fire_and_forget", ActionMode.FIRE_AND_FORGET),
    ],
)
def test_modes(written: str, mode: ActionMode) -> None:
    assert action(f'<action type="tool" mode="{written}">{{"name": "n"}}</action>')["mode"] == mode


@pytest.mark.parametrize(
    ("attrs", "field"),
    [
        ('mode="later"', "mode"),
        ('timeout="soon"', "timeout"),
        ('timeout="-1"', "timeout"),
        ('retries="many"', "retries"),
        ('retries="-2"', "retries"),
        ('output_key="not a name"', "output_key"),
    ],
)
def test_bad_field_values_are_errors_naming_the_field(attrs: str, field: str) -> None:
    err = error(f'<action type="tool" {attrs}>{{"name": "n"}}</action>')
    assert f"invalid {field}" in str(err["message"])


def test_bad_field_in_body_is_an_error() -> None:
    err = error('<action type="tool">{"name": "n", "retries": true}</action>')
    assert "invalid retries" in str(err["message"])


# -- action errors ---------------------------------------------------------------------


def test_unknown_type_names_the_valid_types() -> None:
    message = str(error('<action type="shell">{"cmd": "ls"}</action>')["message"])
    assert "'shell'" in message
    for valid in ActionType:
        assert valid.value in message


def test_missing_type_is_an_error() -> None:
    assert "no type" in str(error('<action id="x">{"name": "n"}</action>')["message"])


def test_invalid_json_reports_the_position() -> None:
    message = str(error('<action type="tool">{"name": "n",\n "x": }</action>')["message"])
    assert "line 2 column" in message


def test_body_must_be_an_object() -> None:
    assert "JSON object" in str(error('<action type="tool">[1, 2]</action>')["message"])


def test_empty_body_is_an_error() -> None:
    assert "empty" in str(error('<action type="tool">  </action>')["message"])


def test_self_closing_action_is_an_error() -> None:
    events = events_of('<action type="tool"/>after')
    assert kinds(events) == ["action_open", "action_error", "text"]
    assert events[1]["span"][0] == events[1]["span"][1]


def test_duplicate_id_is_an_error_for_the_second_action() -> None:
    text = (
        '<action type="tool" id="x">{"name": "n"}</action>'
        '<action type="tool" id="x">{"name": "m"}</action>'
    )
    events = events_of(text)
    assert kinds(events) == ["action_open", "action_parsed", "action_open", "action_error"]
    assert "duplicate id 'x'" in events[3]["message"]


def test_duplicate_id_across_turns_with_a_shared_allocator() -> None:
    ids = IdAllocator()
    first = feed_chunks(['<action type="tool">{"name": "n"}</action>'], ids)
    second = feed_chunks(['<action type="tool" id="a1">{"name": "n"}</action>'], ids)
    assert first[-1].type == "action_parsed"
    assert second[-1].type == "action_error"


def test_generated_ids_continue_across_turns() -> None:
    ids = IdAllocator()
    feed_chunks(['<action type="tool">{"name": "n"}</action>'], ids)
    events = feed_chunks(['<action type="tool">{"name": "n"}</action>'], ids)
    assert events[0].id == "a2"  # type: ignore[union-attr]


def test_failed_action_does_not_burn_its_written_id() -> None:
    ids = IdAllocator()
    bad = feed_chunks(['<action type="tool" id="x">{oops</action>'], ids)
    good = feed_chunks(['<action type="tool" id="x">{"name": "n"}</action>'], ids)
    assert bad[-1].type == "action_error"
    assert good[-1].type == "action_parsed"


# -- JSON bodies -----------------------------------------------------------------------


def test_close_tag_inside_a_json_string_does_not_close_the_action() -> None:
    text = """<action type="tool">{"code": "if a < b: print('</action>')"}</action>"""
    assert action(text)["body"] == {"code": "if a < b: print('</action>')"}


def test_close_tag_inside_a_single_quoted_string_does_not_close_the_action() -> None:
    act = action("<action type=tool>{'code': 'x = \"</action>\"'}</action>")
    assert act["body"] == {"code": 'x = "</action>"'}


def test_escaped_quotes_in_strings() -> None:
    act = action('<action type=tool>{"s": "say \\"</action>\\" now\\\\"}</action>')
    assert act["body"] == {"s": 'say "</action>" now\\'}


@pytest.mark.parametrize(
    ("body", "repair"),
    [
        ('```json\n{"name": "n"}\n```', "code fences"),
        ('```\n{"name": "n"}```', "code fences"),
        ('{"name": "n",}', "trailing commas"),
        ("{'name': 'n'}", "single quotes"),
        ('{"name": "n", "flag": True}', "Python literals"),
        ('{"name": "line\nbreak"}', "raw control characters in strings"),
    ],
)
def test_json_repairs_come_with_a_warning(body: str, repair: str) -> None:
    events = events_of(f"<action type=agent>{body}</action>")
    (warning,) = only(events, "warning")
    assert repair in warning["details"]["repairs"]
    assert only(events, "action_parsed")[0]["action"]["body"]["name"].startswith(("n", "line"))


def test_apostrophe_in_prose_does_not_open_a_string() -> None:
    # The prose makes the body invalid, but the apostrophe must not hide the
    # closing tag: the action ends where it should and what follows is text.
    text = '<action type=tool>that\'s {"name": "n"}</action>after'
    events = events_of(text)
    assert kinds(events) == ["action_open", "action_error", "text"]
    assert events[-1]["text"] == "after"


def test_lt_in_a_json_body_is_body() -> None:
    act = action('<action type=tool>{"html": "<b>x</b>", "cmp": "a < b"}</action>')
    assert act["body"] == {"html": "<b>x</b>", "cmp": "a < b"}
    err = error('<action type=tool>{"expr": a < b}</action>')
    assert err["raw_body"] == '{"expr": a < b}'


# -- text and unknown tags -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a < b and c > d",
        "<b>bold</b> <div class='x'>",
        "<thoughts>not a tag</thoughts>",
        "<actionable>",
        "<>",
        "<",
        "x <thought",
        "</thought>",
        "</response>",
        "</action>",
    ],
)
def test_unknown_tags_and_stray_lt_outside_are_text(text: str) -> None:
    events = events_of(text)
    assert kinds(events) == ["text"]
    assert events[0]["text"] == text


def test_lt_and_unknown_tags_in_a_thought_are_text() -> None:
    events = events_of("<thought>if a<b then <i>x</i> <response>no</thought>")
    assert kinds(events) == ["thought_start", "thought_delta", "thought_end"]
    assert events[1]["text"] == "if a<b then <i>x</i> <response>no"


# -- what real models write (docs/protocol.md#actions) ---------------------------------


def test_response_closing_tag_closes_a_thought_with_a_warning() -> None:
    # Seen from Qwen2.5-Coder-1.5B: <thought> closed with </response>.
    text = "<thought>the answer is 4</response> after"
    events = events_of(text)
    assert kinds(events) == ["thought_start", "thought_delta", "warning", "thought_end", "text"]
    warning, end = events[2], events[3]
    assert warning["details"] == {"open": "thought", "closing_tag": "response"}
    assert "</response> closed the open <thought>" in warning["message"]
    assert warning["span"] == (24, 24)
    assert end["span"] == (24, 35) and end["truncated"] is False
    assert events[4]["text"] == " after"


def test_thought_closing_tag_closes_a_response_with_a_warning() -> None:
    events = events_of('<response final="false">half</Thought >rest<response>x</response>')
    assert kinds(events) == [
        "response_start",
        "response_delta",
        "warning",
        "response_end",
        "text",
        "response_start",
        "response_delta",
        "response_end",
    ]
    assert events[2]["details"] == {"open": "response", "closing_tag": "thought"}
    assert events[3]["final"] is False and events[3]["truncated"] is False
    assert events[4]["text"] == "rest"


def test_other_closing_tags_outside_stay_text() -> None:
    events = events_of("a</response>b</thought>c")
    assert kinds(events) == ["text"]


def test_thought_inside_a_thought_is_text() -> None:
    events = events_of("<thought>a <thought>b</thought>c")
    assert kinds(events) == ["thought_start", "thought_delta", "thought_end", "text"]
    assert events[1]["text"] == "a <thought>b"


def test_lt_and_actions_in_a_response_are_text() -> None:
    text = '<response>x < y <action type="tool">{}</action></response>'
    events = events_of(text)
    assert kinds(events) == ["response_start", "response_delta", "response_end"]
    assert events[1]["text"] == 'x < y <action type="tool">{}</action>'


def test_text_between_elements_is_kept() -> None:
    events = events_of("a<thought>b</thought>c<response>d</response>e")
    assert [e.get("text") for e in events if "text" in e] == ["a", "b", "c", "d", "e"]


def test_action_inside_a_thought_is_marked() -> None:
    events = events_of('<thought>x <action type="llm">{"prompt": "p"}</action> y</thought>')
    assert only(events, "action_open")[0]["in_thought"] is True
    assert only(events, "action_parsed")[0]["action"]["in_thought"] is True


def test_tag_longer_than_the_limit_is_text() -> None:
    text = "<action " + "x" * 5000 + ">"
    assert kinds(events_of(text)) == ["text"]


# -- response final --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "final"),
    [
        ("<response>", True),
        ('<response final="true">', True),
        ("<response final=TRUE>", True),
        ("<response final='False'>", False),
        ("<response FINAL=false>", False),
    ],
)
def test_response_final(tag: str, final: bool) -> None:
    events = events_of(f"{tag}x</response>")
    assert events[0]["final"] is final
    assert events[-1]["final"] is final


def test_response_final_odd_value_warns_and_is_true() -> None:
    events = events_of("<response final=maybe>x</response>")
    assert kinds(events)[0] == "warning"
    assert events[1]["final"] is True


# -- truncation ------------------------------------------------------------------------


def test_close_ends_an_open_thought_truncated() -> None:
    events = events_of("<thought>thinking")
    assert kinds(events) == ["thought_start", "thought_delta", "thought_end"]
    assert events[-1]["truncated"] is True
    assert events[-1]["span"] == (17, 17)


def test_close_ends_an_open_response_truncated() -> None:
    events = events_of("<response final=false>half")
    assert events[-1]["type"] == "response_end"
    assert events[-1]["truncated"] is True and events[-1]["final"] is False


def test_truncated_action_is_never_dispatched() -> None:
    text = '<thought>go <action type="tool">{"name": "n"}</act'
    events = events_of(text)
    assert "action_parsed" not in kinds(events)
    assert kinds(events)[-2:] == ["action_error", "thought_end"]
    err = events[-2]
    assert "cut off" in err["message"]
    assert err["raw_body"] == '{"name": "n"}</act'
    assert err["span"][1] == len(text)
    assert events[-1]["truncated"] is True


def test_truncated_context_feed_is_an_error() -> None:
    events = events_of('<context_feed id=f>{"a":')
    assert kinds(events) == ["action_error"]
    assert events[0]["span"] == (0, 24)


def test_held_tag_prefix_is_released_as_text_on_close() -> None:
    events = events_of("see <thou")
    assert kinds(events) == ["text"]
    assert events[0]["text"] == "see <thou"


def test_parser_can_be_fed_after_close() -> None:
    parser = Parser()
    parser.feed("<thought>a")
    parser.close()
    events = parser.feed("b")
    assert [(e.type, e.span) for e in events] == [("text", (10, 11))]


# -- streaming behaviour ---------------------------------------------------------------


def test_text_streams_without_waiting() -> None:
    parser = Parser()
    assert [e.type for e in parser.feed("<thought>abc")] == ["thought_start", "thought_delta"]
    # `</th` may become `</thought>`: only it is held back.
    assert [e.text for e in parser.feed("def </th")] == ["def "]  # type: ignore[union-attr]
    assert [e.text for e in parser.feed("ink")] == ["</think"]  # type: ignore[union-attr]
    # `<th` cannot start a tag inside a thought: it streams at once.
    assert [e.text for e in parser.feed(" <th")] == [" <th"]  # type: ignore[union-attr]


def test_action_is_dispatched_in_the_feed_that_delivers_its_closing_gt() -> None:
    parser = Parser()
    assert [e.type for e in parser.feed('<thought><action type=tool>{"name": "n"}</action')] == [
        "thought_start",
        "action_open",
    ]
    assert [e.type for e in parser.feed(">")] == ["action_parsed"]


def test_context_feed_errors_are_action_errors() -> None:
    err = error("<context_feed id=x type=sometimes>{}</context_feed>")
    assert "sometimes" in str(err["message"])
    assert "on_demand" in str(err["message"])
    assert "no id" in str(error("<context_feed>{}</context_feed>")["message"])
    assert "not valid JSON" in str(error("<context_feed id=x>{</context_feed>")["message"])


def test_context_feed_inside_a_thought() -> None:
    events = events_of("<thought>a<context_feed id=x type=internal>{}</context_feed>b</thought>")
    assert kinds(events) == [
        "thought_start",
        "thought_delta",
        "context_feed",
        "thought_delta",
        "thought_end",
    ]


def test_self_closing_thought_and_feed() -> None:
    events = events_of("<thought/><context_feed id=c type=internal/>")
    assert kinds(events) == ["thought_start", "thought_end", "context_feed"]


def test_junk_in_a_tag_is_a_warning() -> None:
    events = events_of('<action type=tool "oops">{"name": "n"}</action>')
    assert kinds(events) == ["action_open", "warning", "action_parsed"]


def test_escaped_lone_surrogate_in_a_body_still_serialises() -> None:
    events = feed_chunks(['<context_feed id=0>{"\\uD800": 1}</context_feed>'])
    assert [e.type for e in events] == ["warning", "context_feed"]
    for event in events:
        assert event.to_json()


def test_unclosed_quote_that_hides_the_closing_tag_is_explained() -> None:
    events = events_of('<action type="tool">{"a": "it"s"}</action> more')
    (err,) = only(events, "action_error")
    assert "cut off" in err["message"] and "inside a JSON string" in err["message"]


def test_attribute_text_limit_is_exact_and_chunk_independent() -> None:
    from cortex_kernel.protocol._scanner import MAX_ATTRS

    at_limit = "<thought" + " " * MAX_ATTRS + ">x</thought>"
    assert kinds(events_of(at_limit)) == ["thought_start", "thought_delta", "thought_end"]
    over = "<thought" + " " * (MAX_ATTRS + 1) + ">x</thought>"
    assert kinds(events_of(over)) == ["text"]


def test_many_stray_lt_in_text_stream_out() -> None:
    text = "a<b<c <<< <th <act </ <x/> " * 20
    events = events_of(text)
    assert kinds(events) == ["text"]


@pytest.mark.parametrize(
    ("written", "warned"),
    [
        ('depends_on="none"', True),
        ("depends_on=None", True),
        ("depends_on='null'", True),
        ('depends_on="EMPTY"', True),
        ('depends_on="[none]"', True),
        ('depends_on="-"', False),
        ("depends_on=[]", False),
        ('depends_on=""', False),
        ("depends_on=''", False),
    ],
)
def test_depends_on_that_means_nothing(written: str, warned: bool) -> None:
    events = events_of(f'<action type="tool" {written}>{{"name": "n"}}</action>')
    assert only(events, "action_parsed")[0]["action"]["depends_on"] == ()
    notes = only(events, "warning")
    assert len(notes) == warned
    if warned:
        assert "read as no dependency" in notes[0]["message"]
        assert notes[0]["id"] == "a1"


@pytest.mark.parametrize("value", ["none", "null", "-", "", [], ["none"], None])
def test_depends_on_that_means_nothing_in_the_body(value: object) -> None:
    body = json.dumps({"name": "n", "depends_on": value})
    act = action(f'<action type="tool">{body}</action>')
    assert act["depends_on"] == ()


def test_a_dependency_named_like_a_word_form_among_others_is_kept() -> None:
    assert action('<action type="tool" depends_on="none,a2">{"name": "n"}</action>')[
        "depends_on"
    ] == ("none", "a2")


@pytest.mark.parametrize(
    ("body", "moved"),
    [
        ({"name": "ls", "arguments": {"path": "."}}, "under 'arguments'"),
        ({"name": "ls", "arguments": '{"path": "."}'}, "under 'arguments'"),
        ({"name": "ls", "args": {"path": "."}}, "under 'args'"),
        ({"name": "ls", "input": {"path": "."}}, "under 'input'"),
        ({"name": "ls", "path": "."}, "beside 'name'"),
        ({"name": "ls", "path": ".", "output_key": "files"}, "beside 'name'"),
    ],
)
def test_tool_parameters_written_elsewhere(body: dict[str, object], moved: str) -> None:
    events = events_of(f'<action type="tool">{json.dumps(body)}</action>')
    act = only(events, "action_parsed")[0]["action"]
    assert act["body"]["name"] == "ls"
    assert act["body"]["parameters"] == {"path": "."}
    assert act["raw_body"] == json.dumps(body)  # as written
    (warning,) = only(events, "warning")
    assert moved in warning["message"] and warning["id"] == "a1"


@pytest.mark.parametrize(
    "body",
    [
        {"name": "ls", "parameters": {"path": "."}, "note": "x"},  # parameters present
        {"name": "ls"},  # nothing to move
        {"path": "."},  # no name: the tool error says so
        {"name": "ls", "arguments": "not json"},  # nothing we can read as parameters
        {"name": "ls", "arguments": {"path": "."}, "extra": 1},  # two shapes at once
    ],
)
def test_tool_bodies_left_as_written(body: dict[str, object]) -> None:
    events = events_of(f'<action type="tool">{json.dumps(body)}</action>')
    assert only(events, "action_parsed")[0]["action"]["body"] == body
    assert only(events, "warning") == []


def test_only_tool_bodies_are_moved() -> None:
    body = {"name": "plan", "city": "Paris"}
    assert action(f'<action type="workflow">{json.dumps(body)}</action>')["body"] == body

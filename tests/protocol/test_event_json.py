"""Events serialise whatever text they hold, and read back equal (docs/runtime.md#events)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cortex_kernel.protocol import Parser, Text, WarningEvent, parse_parser_event
from cortex_kernel.runtime.run_events import ActionSucceeded, parse_event


def test_lone_surrogate_found_by_make_fuzz() -> None:
    events = Parser().feed("\ud800thought></thought>") + Parser().close()
    for event in events:
        line = event.to_json()
        line.encode("utf-8")  # always writable
        assert parse_parser_event(line) == event


@given(st.text())
def test_any_text_round_trips(text: str) -> None:
    event = Text(span=(0, len(text)), text=text)
    line = event.to_json()
    assert "\n" not in line
    line.encode("utf-8")
    assert parse_parser_event(line) == event
    assert parse_parser_event(line.encode("utf-8")) == event


def test_unknown_and_deep_values_in_details_are_written_with_a_marker() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise ValueError("no")

    deep: list[object] = []
    for _ in range(1000):
        deep = [deep]
    event = WarningEvent(span=(0, 0), message="odd", details={"obj": Unprintable(), "deep": deep})
    record = json.loads(event.to_json())
    assert record["details"]["obj"] == "<unprintable Unprintable: ValueError>"
    assert "nested deeper than" in json.dumps(record["details"]["deep"])


def test_runtime_events_round_trip_with_surrogates() -> None:
    event = ActionSucceeded(t=0.5, id="a", preview="report-\udcff.csv")
    assert parse_event(event.to_json()) == event


def test_a_bad_line_still_fails_with_pydantics_error() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        parse_parser_event('{"type": "text", "span": [0, 1], "text": "\\ud800", "oops"')


def test_a_lone_surrogate_in_a_body_key_round_trips() -> None:
    # Found by ``make fuzz``: a raw surrogate in an action body's key came
    # back as the six characters ``\ud9b8`` (keys were escaped, not kept).
    text = '<action type="tool">{"name": "x", "k\ud9b8": 1}</action>'
    parser = Parser()
    for event in parser.feed(text) + parser.close():
        assert parse_parser_event(event.to_json()) == event


def test_a_lone_surrogate_in_an_attribute_name_round_trips() -> None:
    # Found by ``make fuzz``: pydantic writes a surrogate in a dict key as
    # U+FFFD without raising, so the line read back differently.
    text = '<action type=internal OUTPUT_KEY\uddc7\'out\'>{"name": "x"}</action>'
    parser = Parser()
    for event in parser.feed(text) + parser.close():
        assert parse_parser_event(event.to_json()) == event
    kept = Text(span=(0, 1), text="\ufffd")
    assert parse_parser_event(kept.to_json()) == kept


def test_no_public_name_shadows_a_builtin() -> None:
    import builtins

    import cortex_kernel.protocol as protocol

    assert not set(protocol.__all__) & set(dir(builtins))


def test_the_old_warning_name_is_a_deprecated_alias() -> None:
    import pytest

    with pytest.warns(DeprecationWarning, match="use WarningEvent"):
        from cortex_kernel.protocol import Warning as Old  # type: ignore[attr-defined]
    assert Old is WarningEvent

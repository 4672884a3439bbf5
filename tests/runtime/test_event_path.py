"""The per-event path of a run (issue 14): its shortcuts give exactly pydantic's results.

A run stamps every parser event (a light event's ``model_copy``, or a new
text delta), scrubs it (:meth:`Redactor.value`) and the view reads its
fields (``event_data`` instead of ``model_dump``). Each shortcut is checked
here against the pydantic call it replaces, on every event of a real run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.jupyter.viewstate import RunState, event_data
from cortex_kernel.protocol import Parser
from cortex_kernel.redaction import REDACTED, Redactor
from cortex_kernel.runtime.run_events import nest_event, parse_event
from cortex_kernel.runtime.tools import ToolRegistry

from .fakes import ScriptedModel

pytestmark = pytest.mark.anyio

SECRET = "s3cr3t-value-42"

# Every kind of parser event: text outside, thought, actions (good, bad,
# in a thought), progress and final responses.
DOCUMENT = (
    "before <thought>I plan "
    '<action type="tool" mode="async" id="a1" output_key="x">'
    '{"name": "add", "parameters": {"a": 1, "b": 2}}</action> and go on</thought>'
    '<action type="tool" id="bad">{"name": </action>'
    '<response final="false">working</response>'
    '<response final="true">x is $x</response> after'
)


def tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.register
    def add(a: int, b: int = 0) -> int:
        """Add."""
        return a + b

    return registry


async def run_events(tmp_path: Path, text: str) -> tuple[list[Any], Path]:
    session = build_session(ScriptedModel([text], chunk=3), tools=tools(), transcript_dir=tmp_path)
    result = await session.run("go")
    await session.aclose()
    assert result.transcript is not None
    return result.events, result.transcript


async def test_view_data_equals_model_dump_for_every_event(tmp_path: Path) -> None:
    events, _ = await run_events(tmp_path, DOCUMENT)
    kinds = {event.type for event in events}
    assert {"text", "thought_delta", "action_parsed", "action_error", "response_end"} <= kinds
    assert {"action_queued", "action_succeeded", "variable_bound", "run_finished"} <= kinds
    for event in events:
        assert event_data(event) == event.model_dump(), event.type
    # The view built from the events equals the one built from their dumps.
    fast, slow = RunState(), RunState()
    for event in events:
        fast.apply(event)
        slow.apply(event.model_dump())
    assert fast.doc == slow.doc
    assert fast.take_ops() == slow.take_ops()


def test_stamping_equals_model_copy_for_every_parser_event() -> None:
    parser = Parser()
    events = [e for i in range(0, len(DOCUMENT), 5) for e in parser.feed(DOCUMENT[i : i + 5])]
    events += parser.close()
    assert len({event.type for event in events}) >= 8
    for event in events:
        update = {"t": 1.25, "turn": 2}
        fast, slow = event.model_copy(update=update), event.to_model().model_copy(update=update)
        assert fast.to_model() == slow
        assert fast.to_json() == slow.to_json()
        assert event.t is None  # the parser's event is left as it was


async def test_a_secret_decoded_from_an_action_body_is_scrubbed_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model text carries the secret only as JSON escapes: the stream
    # redactor cannot see it; the event boundary must.
    monkeypatch.setenv("CORTEX_TEST_TOKEN", SECRET)
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET)
    body = '{"name": "add", "parameters": {"a": 1, "note": "' + escaped + '"}}'
    text = f'<action type="tool" mode="async" id="n1">{body}</action><response>done</response>'
    events, transcript = await run_events(tmp_path, text)
    parsed = [e for e in events if e.type == "action_parsed"]
    assert parsed and parsed[0].action.body["parameters"]["note"] == REDACTED
    lines = transcript.read_text().splitlines()
    assert SECRET not in "".join(lines)
    # Every line still reads back as the event the run recorded.
    recorded = [parse_event(line) for line in lines if '"model_turn"' not in line]
    assert [e.to_json() for e in recorded] == [e.to_json() for e in events]


def test_clean_models_are_kept_and_dirty_ones_copied() -> None:
    redactor = Redactor([SECRET])
    parser = Parser()
    events = parser.feed(f"<thought>plain</thought><response>the key {SECRET}</response>")
    clean = [e for e in events if e.type == "thought_delta"]
    dirty = [e for e in events if e.type == "response_delta"]
    assert clean and dirty
    assert redactor.value(clean[0]) is clean[0]
    scrubbed = redactor.value(dirty[0])
    assert scrubbed.text == f"the key {REDACTED}" and scrubbed.span == dirty[0].span
    assert json.loads(scrubbed.to_json())["text"] == f"the key {REDACTED}"
    surrogate = redactor.value(parser.feed("<response>\udcff</response>")[1])
    assert surrogate.text == "\\udcff"


def test_a_nested_runs_parser_events_are_prefixed_for_its_parent() -> None:
    # Found by notebook 06 (a critic sub-agent): nesting copies each event
    # with its ids prefixed, and `action_parsed` has `id` only as its action's.
    parser = Parser()
    events = parser.feed(DOCUMENT) + parser.close()
    assert {"action_open", "action_parsed", "action_error"} <= {e.type for e in events}
    for event in events:
        nested = nest_event(event, "critic")
        assert type(nested) is type(event) and nested.parent == "critic"
        if event.type == "action_parsed":
            assert nested.action.id == nested.id == f"critic/{event.action.id}"
        elif isinstance(getattr(event, "id", None), str):
            assert nested.id == f"critic/{event.id}"
        assert parse_event(nested.to_json()) == nested

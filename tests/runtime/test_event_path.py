"""The per-event path of a run: each parser event stamped, scrubbed, read by the view.

A run records a stamped copy of every parser event (``t`` and ``turn`` set),
scrubs it (:meth:`Redactor.value`), the view reads its fields
(``model_dump``, as a runtime event's) and the transcript its JSON. Checked
here on every event of a real run.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.jupyter.viewstate import RunState
from cortex_kernel.protocol import Parser, ParserEventBase
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


async def test_the_view_of_a_run_reads_every_event_as_its_dump(tmp_path: Path) -> None:
    events, _ = await run_events(tmp_path, DOCUMENT)
    kinds = {event.type for event in events}
    assert {"text", "thought_delta", "action_parsed", "action_error", "response_end"} <= kinds
    assert {"action_queued", "action_succeeded", "variable_bound", "run_finished"} <= kinds
    # The view built from the events equals the one built from their dumps.
    from_events, from_dumps = RunState(), RunState()
    for event in events:
        from_events.apply(event)
        from_dumps.apply(event.model_dump())
    assert from_events.doc == from_dumps.doc
    assert from_events.take_ops() == from_dumps.take_ops()


async def test_a_run_records_the_parsers_events_stamped(tmp_path: Path) -> None:
    events, _ = await run_events(tmp_path, DOCUMENT)
    recorded = [e for e in events if isinstance(e, ParserEventBase)]
    assert recorded and all(e.t is not None and e.turn == 1 for e in recorded)
    parser = Parser()  # the model's chunks, as the run fed them
    made = [e for i in range(0, len(DOCUMENT), 3) for e in parser.feed(DOCUMENT[i : i + 3])]
    made += parser.close()
    assert [dataclasses.replace(e, t=None, turn=None) for e in recorded] == made
    assert all(e.t is None for e in made)


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

"""The view's timeline: the model's writing and each action's run on one time axis.

A recorded run (its events with the times the runtime stamps) is folded
into the view state; the timeline must show that ``a1`` was dispatched and
ran while the model was still writing its thought, that ``a2`` waited for
``a1``, and where the time went. The static drawing is SVG that stays inert
with hostile labels, the live widget's view.js applies the same ops, and
the timeline sends no message of its own.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from cortex_kernel.jupyter.view import FLUSH_INTERVAL
from cortex_kernel.jupyter.viewstate import RunState, render_html, render_markdown
from cortex_kernel.jupyter.viewstate.timeline import MAX_BARS, MAX_SEGMENTS, time_spent
from cortex_kernel.protocol import parser_events as pe
from cortex_kernel.protocol.models import Action, ActionMode, ActionType
from cortex_kernel.runtime.run_events import (
    ActionQueued,
    ActionStarted,
    ActionSucceeded,
    ApprovalDecided,
    ApprovalRequested,
    RunFinished,
    RunStarted,
    TurnEnded,
    TurnStarted,
    Usage,
)

from .test_inert_outputs import live_markup
from .test_view import RecordingView, stream_thought
from .test_viewstate import assert_view_js_rebuilds

SP = (0, 0)
LOOKUP = Action(
    id="a1",
    type=ActionType.TOOL,
    mode=ActionMode.ASYNC,
    body={"name": "lookup", "parameters": {"q": "Paris"}},
)
FOLLOW = Action(
    id="a2",
    type=ActionType.TOOL,
    mode=ActionMode.ASYNC,
    depends_on=("a1",),
    body={"name": "fact", "parameters": {"about": "$a1"}},
)


def recorded_run(name: str = "lookup") -> list[Any]:
    """One turn: a1 is written, dispatched and runs while the thought goes on."""
    lookup = Action(id="a1", type=LOOKUP.type, mode=LOOKUP.mode, body={**LOOKUP.body, "name": name})
    return [
        RunStarted(t=0.0, run_id="r1", message="capital?", model="replay:x"),
        TurnStarted(t=0.01, turn=1),
        pe.ThoughtStart(span=SP, t=0.2, turn=1),
        *[
            pe.ThoughtDelta(span=SP, text="I look it up. ", t=0.2 + i / 20, turn=1)
            for i in range(4)
        ],
        pe.ActionOpen(span=SP, id="a1", attrs={"type": "tool"}, in_thought=True, t=0.4, turn=1),
        pe.ActionParsed(span=SP, action=lookup, t=0.6, turn=1),
        ActionQueued(t=0.6, id="a1", action=lookup),
        ActionStarted(t=0.61, id="a1"),
        *[pe.ThoughtDelta(span=SP, text="Meanwhile… ", t=0.65 + i / 10, turn=1) for i in range(5)],
        pe.ActionOpen(span=SP, id="a2", attrs={"type": "tool"}, in_thought=True, t=1.1, turn=1),
        pe.ActionParsed(span=SP, action=FOLLOW, t=1.2, turn=1),
        ActionQueued(t=1.2, id="a2", action=FOLLOW, depends_on=("a1",), waiting_on=("a1",)),
        pe.ThoughtEnd(span=SP, t=1.25, turn=1),
        pe.Text(span=SP, text="\n", t=1.25, turn=1),
        ActionSucceeded(t=1.4, id="a1", preview="Paris", duration=0.79),
        ActionStarted(t=1.41, id="a2"),
        pe.ResponseStart(span=SP, t=1.5, turn=1),
        pe.ResponseDelta(span=SP, text="Paris.", t=1.6, turn=1),
        pe.ResponseEnd(span=SP, t=1.7, turn=1),
        TurnEnded(t=1.7, turn=1, reason="stream_end", usage=Usage(turns=1, completion_tokens=9)),
        ActionSucceeded(t=1.9, id="a2", preview="a fact", duration=0.49),
        RunFinished(t=1.9, status="ok", answer="Paris.", usage=Usage(turns=1, seconds=1.9)),
    ]


def folded(events: list[Any]) -> RunState:
    state = RunState()
    for event in events:
        state.apply(event)
    return state


def svg_of(html: str) -> ET.Element:
    match = re.search(r"<svg[\s\S]*?</svg>", html)
    assert match is not None, html
    return ET.fromstring(match.group(0))


def test_an_action_dispatched_mid_thought_overlaps_the_models_writing() -> None:
    timeline = folded(recorded_run()).doc["timeline"]
    kinds = [seg[0] for seg in timeline["segs"]]
    # The thought is interrupted by the action tags it holds, then goes on.
    assert kinds == ["wait", "thought", "action", "thought", "action", "thought", "response"]
    (turn,) = timeline["turns"]
    assert turn == [1, 0.01, 1.7]
    bars = {bar[0]: bar for bar in timeline["bars"]}
    assert bars["a1"] == ["a1", 0.6, 0.61, 1.4, None, None]
    assert bars["a2"] == ["a2", 1.2, 1.41, 1.9, None, None]
    # a1 ran while the model was writing the rest of its thought.
    after = [seg for seg in timeline["segs"] if seg[0] == "thought" and seg[1] >= bars["a1"][1]]
    assert after and after[0][2] > bars["a1"][2]
    spent = time_spent(folded(recorded_run()).doc)
    assert spent["model"] == 1.7 - 0.01
    assert round(spent["overlap"], 3) == round((1.4 - 0.61) + (1.7 - 1.41), 3)
    assert round(spent["tools"], 3) == round(1.9 - 0.61 - (1.41 - 1.4), 3)


def test_the_static_view_draws_bars_over_the_models_segments_and_dependencies() -> None:
    doc = folded(recorded_run()).doc
    html = render_html(doc)
    svg = svg_of(html)
    titles = [t.text or "" for t in svg.iter("title")]
    rects = [((r.findtext("title") or ""), r) for r in svg.iter("rect")]
    # The thought written after a1's tag (from its end, 0.6 s), and a1's run (its last rect).
    thought = next(r for title, r in rects if title.startswith("thought 0.60"))
    a1 = [r for title, r in rects if title.startswith("a1 tool lookup: succeeded")][-1]
    # Same time axis: a1's bar starts inside the span of the thought drawn after its tag.
    x0, width = float(thought.get("x", 0)), float(thought.get("width", 0))
    assert float(a1.get("x", 0)) <= x0 + width and float(a1.get("y", 0)) > float(
        thought.get("y", 0)
    )
    assert "a2 after a1" in titles  # the dependency's line
    assert any("dispatched 1.20s" in t and "after a1" in t for t in titles)
    summary = re.search(r"timeline · ([^<]*)<", html)
    assert summary is not None and "while the model wrote" in summary.group(1)
    assert "*timeline* · model 1.7s" in render_markdown(doc)


def test_labels_in_the_drawing_are_text() -> None:
    name = "<img src=x onerror=alert(1)> $5 and $6"
    html = render_html(folded(recorded_run(name)).doc)
    assert not live_markup(html).live, live_markup(html).live
    svg = svg_of(html)
    labels = [t for t in svg.iter("text") if (t.findtext("title") or "").startswith("a1 ")]
    assert labels and "<img src=x onerror=alert(1)>" in (labels[0].findtext("title") or "")
    assert "<img" not in re.sub(r"&lt;img", "", html)


def test_approval_waits_are_drawn_and_counted() -> None:
    events = recorded_run()
    at = events.index(next(e for e in events if isinstance(e, ActionStarted)))
    events[at:at] = [
        ApprovalRequested(t=0.6, id="a1", tool="lookup", token="k"),
        ApprovalDecided(t=0.61, id="a1", tool="lookup", approved=True, token="k"),
    ]
    doc = folded(events).doc
    bar = doc["timeline"]["bars"][0]
    assert bar[4:] == [0.6, 0.61]
    assert "asked for approval 0.60s" in render_html(doc)


def test_a_sub_agents_times_are_moved_to_the_runs_clock() -> None:
    agent = Action(id="c", type=ActionType.AGENT, mode=ActionMode.ASYNC, body={"prompt": "check"})
    inner = Action(id="a1", type=ActionType.TOOL, body={"name": "lookup", "parameters": {}})
    events = [
        RunStarted(t=0.0, run_id="r1", message="m", model="x"),
        TurnStarted(t=0.0, turn=1),
        ActionQueued(t=2.0, id="c", action=agent),
        ActionStarted(t=2.5, id="c"),
        # The sub-agent's own run counts from 0.
        RunStarted(t=0.0, run_id="r2", message="check", model="x", parent="c"),
        ActionQueued(t=0.25, id="c/a1", action=inner, parent="c"),
        ActionStarted(t=0.25, id="c/a1", parent="c"),
        ActionSucceeded(t=0.75, id="c/a1", parent="c"),
        ActionSucceeded(t=3.5, id="c"),
    ]
    bars = {bar[0]: bar for bar in folded(events).doc["timeline"]["bars"]}
    assert bars["c/a1"][1:4] == [2.75, 2.75, 3.25]


def test_the_timeline_stays_small_whatever_the_run() -> None:
    events: list[Any] = [RunStarted(t=0.0, run_id="r", message="m", model="x")]
    events.append(TurnStarted(t=0.0, turn=1))
    for i in range(5000):  # the model switching between thought and response every token
        kind = pe.ThoughtDelta if i % 2 else pe.ResponseDelta
        events.append(kind(span=SP, text="x", t=i / 100, turn=1))
    for i in range(MAX_BARS + 50):
        action = Action(id=f"b{i}", type=ActionType.TOOL, body={"name": "t", "parameters": {}})
        events.append(ActionQueued(t=50.0, id=f"b{i}", action=action))
    timeline = folded(events).doc["timeline"]
    assert len(timeline["segs"]) == MAX_SEGMENTS
    assert timeline["segs"][-1][0] == "mixed" and timeline["segs"][-1][2] == 49.99
    assert len(timeline["bars"]) == MAX_BARS and timeline["more"] == 50
    assert len(json.dumps(timeline)) < 30_000
    # The drawing shows 40 action rows and counts the rest.
    assert f"+{MAX_BARS + 50 - 40} more actions" in render_html(folded(events).doc)


def test_view_js_applies_the_timeline_ops() -> None:
    assert_view_js_rebuilds(recorded_run())


def test_the_timeline_sends_no_message_of_its_own() -> None:
    # Each event that changes the timeline changes something else of the view:
    # its ops ride in the batch that would be sent anyway.
    state = RunState()
    for event in recorded_run():
        state.apply(event)
        ops = state.take_ops()
        if any(op[0] == "tl" for op in ops):
            assert any(op[0] != "tl" for op in ops), (event, ops)


def test_a_fast_stream_with_actions_stays_within_the_message_budget() -> None:
    def dispatch(view: RecordingView, tick: int, t: float) -> None:
        # An action dispatched every 50 tokens.
        if tick % 5 == 4:
            action = Action(id=f"a{tick}", type=ActionType.TOOL, body={"name": "t"})
            view.push(pe.ActionOpen(span=SP, id=f"a{tick}", t=t, turn=1))
            view.push(pe.ActionParsed(span=SP, action=action, t=t, turn=1))
            view.push(ActionQueued(t=t, id=f"a{tick}", action=action))
            view.push(ActionStarted(t=t, id=f"a{tick}"))

    view, streamed = stream_thought(dispatch)
    assert len(view.sent) <= streamed / FLUSH_INTERVAL + 3
    # Every message carries at most one op per timeline item: merged, not one per token.
    for message in view.sent:
        targets = [tuple(op[1:3]) for op in message["ops"] if op[0] == "tl"]
        assert len(targets) == len(set(targets))
    sent_bars = {
        op[3][0] for m in view.sent for op in m["ops"] if op[0] == "tl" and op[1] == "bars"
    }
    assert sent_bars == {f"a{i}" for i in range(4, 100, 5)}

"""``internal`` actions end to end through a replay model: the seven operations of
docs/protocol.md#actions, their permissions, the audit trail, and context feeds in the prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.executors import DEFAULT_INTERNAL_ACTIONS, INTERNAL_ACTIONS
from cortex_kernel.llm.replay import ReplayModel
from cortex_kernel.runtime.feeds import FeedRegistry, FeedSpec, truncate
from cortex_kernel.runtime.ports import Completion, CompletionRequest
from cortex_kernel.runtime.run_events import parse_event
from tests.prompt_parts import conversation, feeds_message
from tests.replays import write_turns

from . import feed_sources

pytestmark = pytest.mark.anyio


class Recording(ReplayModel):
    """The real replay model, remembering the requests it was sent (to read the prompt)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.requests: list[CompletionRequest] = []

    def stream(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        return super().stream(request)


def replay(tmp_path: Path, *turns: str) -> Recording:
    path = tmp_path / "turns.jsonl"
    write_turns(path, *turns)
    return Recording(path)


def internal(name: str, action_id: str, /, **parameters: Any) -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    return f'<action type="internal" mode="sync" id="{action_id}">{body}</action>'


def audits(result: Any) -> list[tuple[str, str]]:
    return [(e.name, e.outcome) for e in result.events if e.type == "internal_action"]


def feeds_of(model: Recording, turn: int) -> str:
    """The feeds message of request ``turn`` (after its conversation), ``""`` for none."""
    return feeds_message(model.requests[turn].messages)


def test_defaults_follow_the_spec() -> None:
    assert {"set_variable", "list_context_feeds"} <= DEFAULT_INTERNAL_ACTIONS
    blocked = INTERNAL_ACTIONS - DEFAULT_INTERNAL_ACTIONS
    assert blocked == {
        "add_context_feed",
        "remove_context_feed",
        "update_context_feed",
        "delete_variable",
        "clear_context",
    }


async def test_blocked_by_default_is_an_error_the_model_sees(tmp_path: Path) -> None:
    model = replay(
        tmp_path,
        internal("add_context_feed", "f", id="clock", type="internal", source={}),
        internal("list_context_feeds", "l"),
        "<response>done</response>",
    )
    s = build_session(model, transcript_dir=tmp_path)
    result = await s.run("go")
    assert result.status == "ok"
    assert audits(result) == [("add_context_feed", "blocked"), ("list_context_feeds", "ok")]
    second = model.requests[1].messages[-1]["content"]
    assert 'id="f" status="error"' in second and "add_context_feed' is not allowed" in second
    assert "clock" not in s.feeds
    # The audit trail is in the transcript.
    assert result.transcript is not None
    lines = result.transcript.read_text(encoding="utf-8").splitlines()
    recorded = [parse_event(line) for line in lines if '"internal_action"' in line]
    assert [(e.name, e.allowed) for e in recorded] == [  # type: ignore[union-attr]
        ("add_context_feed", False),
        ("list_context_feeds", True),
    ]
    await s.aclose()


async def test_all_seven_operations_when_allowed(tmp_path: Path) -> None:
    feed_sources.CALLS.clear()
    source = {"callable": "tests.runtime.feed_sources:prices", "parameters": {"symbol": "ACME"}}
    model = replay(
        tmp_path,
        internal("add_context_feed", "a", id="quote", source="acme", ttl=3600),
        internal("list_context_feeds", "l"),
        internal("update_context_feed", "u", id="quote", source="default_quote"),
        internal("set_variable", "s", name="note", value={"k": 1}),
        internal("delete_variable", "d", name="note")
        + internal("remove_context_feed", "r", id="quote").replace('id="r"', 'id="r2"'),
        internal("clear_context", "c"),
        "<response>done</response>",
    )
    s = build_session(model, transcript_dir=tmp_path, allowed_internal=INTERNAL_ACTIONS)
    # The model chooses these by name; the user wrote them.
    s.feeds.declare_source("acme", source)
    s.feeds.declare_source("default_quote", {**source, "parameters": {}})
    s._runs["earlier"] = [{"role": "user", "content": "an earlier cell"}]
    result = await s.run("go")
    assert result.status == "ok", result.message
    assert audits(result) == [
        ("add_context_feed", "ok"),
        ("list_context_feeds", "ok"),
        ("update_context_feed", "ok"),
        ("set_variable", "ok"),
        ("delete_variable", "ok"),
        ("clear_context", "ok"),
    ]
    # The feed is in the prompt from the turn after it was added, after the stable part.
    assert '<feed id="quote">' not in feeds_of(model, 0)
    prompt = feeds_of(model, 1)
    assert '<feed id="quote">' in prompt and '"price": 101' in prompt
    assert "<feed" not in str(model.requests[1].messages[0]["content"])  # the system prompt
    listed = conversation(model.requests[2].messages)[-1]["content"]
    assert '"id": "quote"' in listed and '"type": "on_demand"' in listed
    # ttl=3600: the cached value served turn 3; the update forced a new fetch.
    assert feed_sources.CALLS == ["ACME", "ACME"]
    assert '"symbol": "ACME"' in feeds_of(model, 3)
    # delete_variable ran; the remove in the same turn was cut (sync) and never ran.
    assert "note" not in s.variables
    # clear_context dropped the earlier cell from the next turn's messages.
    assert any("an earlier cell" in str(m) for m in model.requests[5].messages)
    assert not any("an earlier cell" in str(m) for m in model.requests[6].messages)
    assert "earlier" not in s._runs
    updates = [e for e in result.events if e.type == "feed_updated"]
    assert [u.feed_id for u in updates] == ["quote", "quote"]  # type: ignore[union-attr]
    await s.aclose()


async def test_context_feed_element_and_failing_source(tmp_path: Path) -> None:
    model = replay(
        tmp_path,
        '<context_feed id="clock" type="internal">{"source": "system_clock"}</context_feed>'
        '<context_feed id="down">{"source": "flaky"}</context_feed>'
        '<context_feed id="bad">{"url": 1}</context_feed>'
        '<context_feed id="late" type="on_demand">{"source": "nothing_declared"}</context_feed>'
        '<response final="false">watching</response>',
        "<response>done</response>",
    )
    s = build_session(model, transcript_dir=tmp_path, allowed_internal=INTERNAL_ACTIONS)
    s.feeds.declare_source("flaky", {"callable": "tests.runtime.feed_sources:broken"})
    result = await s.run("go")
    assert result.status == "ok"
    prompt = feeds_of(model, 1)
    assert '<feed id="clock">' in prompt and " UTC (" in prompt
    assert '<feed id="down">\n(unavailable: ConnectionError: quote service down)' in prompt
    errors = [e.message for e in result.events if e.type == "action_error"]
    choices = (
        ": model output may only choose a source by name, one the manifest's feed_sources or "
        "the user (%feeds source) declared (flaky) or a built-in (system_clock, run_status); "
        "it never writes code, a command, a tool call or an MCP server as a source"
    )
    assert errors == [
        "context feed 'bad' was not created: refused: the model wrote a source itself (url)"
        + choices,
        "context feed 'late' was not created: no feed source named 'nothing_declared'" + choices,
    ]
    updated = {e.feed_id: e.error for e in result.events if e.type == "feed_updated"}  # type: ignore[union-attr]
    assert updated["down"] == "ConnectionError: quote service down" and updated["clock"] is None
    await s.aclose()


async def test_model_output_names_sources_and_never_writes_one(tmp_path: Path) -> None:
    feed_sources.CALLS.clear()
    prices = {"callable": "tests.runtime.feed_sources:prices"}
    model = replay(
        tmp_path,
        internal("add_context_feed", "a1", id="p", source=prices),
        # The user's variables are the user's to share, not the model's.
        internal("add_context_feed", "a2", id="notebook_variables", type="internal"),
        internal("add_context_feed", "a3", id="v", source={"internal": "notebook_variables"}),
        internal("add_context_feed", "a4", id="clock", type="internal", source="system_clock"),
        internal("update_context_feed", "u1", id="clock", parameters={"symbol": "X"}),
        internal("update_context_feed", "u2", id="clock", source={"internal": "run_status"}),
        "<response>done</response>",
    )
    s = build_session(model, transcript_dir=tmp_path, allowed_internal=INTERNAL_ACTIONS)
    result = await s.run("go")
    assert result.status == "ok", result.message
    errors = {e.id: e.message for e in result.events if e.type == "action_error"}
    assert sorted(errors) == ["a1", "a2", "a3", "u1"]
    assert errors["a1"].startswith(
        "add_context_feed: refused: the model wrote a source itself (callable)"
    )
    assert errors["a2"].startswith("add_context_feed: the feed names no source")
    assert errors["a3"].startswith(
        "add_context_feed: refused: the model wrote a source itself (internal)"
    )
    assert errors["u1"] == (
        "update_context_feed: a context feed from model output may set only source, type, "
        "ttl, interval, max_bytes, max_tokens, description (got parameters)"
    )
    assert feed_sources.CALLS == []  # never called
    assert [spec.id for spec in s.feeds.specs] == ["clock"]
    assert s.feeds.specs[0].source.data() == {"internal": "run_status"}
    assert audits(result)[:3] == [("add_context_feed", "blocked")] * 3
    await s.aclose()


async def test_model_output_cannot_make_a_feed_spin(tmp_path: Path) -> None:
    feed_sources.CALLS.clear()
    model = replay(
        tmp_path,
        internal(
            "add_context_feed", "a1", id="q", type="periodic", interval=0.001, source="prices"
        ),
        internal("add_context_feed", "a2", id="r", type="periodic", interval=2, source="prices"),
        internal("update_context_feed", "u1", id="r", interval=0),
        "<response>done</response>",
    )
    s = build_session(model, transcript_dir=tmp_path, allowed_internal=INTERNAL_ACTIONS)
    s.feeds.declare_source("prices", {"callable": "tests.runtime.feed_sources:prices"})
    result = await s.run("go")
    errors = {e.id: e.message for e in result.events if e.type == "action_error"}
    assert errors == {
        "a1": "add_context_feed: a periodic feed from model output refreshes at most once "
        "every 1 s (got interval 0.001)",
        "u1": "update_context_feed: a periodic feed from model output refreshes at most once "
        "every 1 s (got interval 0)",
    }
    assert [(spec.id, spec.interval) for spec in s.feeds.specs] == [("r", 2)]
    await s.aclose()


async def test_tool_feed_and_run_status(tmp_path: Path) -> None:
    model = replay(
        tmp_path,
        internal("add_context_feed", "a", id="sum", source="two_plus_three"),
        internal(
            "add_context_feed", "b", id="status", type="internal", source={"internal": "run_status"}
        ),
        "<response>done</response>",
    )
    s = build_session(model, transcript_dir=tmp_path, allowed_internal=INTERNAL_ACTIONS)
    s.feeds.declare_source("two_plus_three", {"tool": "add", "parameters": {"a": 2, "b": 3}})

    @s.tools.register
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    result = await s.run("go")
    assert result.status == "ok"
    assert '<feed id="sum">\n5' in feeds_of(model, 1)
    assert '"turn": 3' in feeds_of(model, 2) and '"succeeded": 2' in feeds_of(model, 2)
    await s.aclose()


def test_truncation_marks_what_was_cut() -> None:
    text = feed_sources.long_text()
    cut, truncated = truncate(text, max_bytes=500)
    assert truncated and len(cut.encode()) <= 500 and cut.endswith("more characters]")
    words, truncated = truncate(text, 100_000, max_tokens=50, count=lambda t: len(t.split()))
    assert truncated and len(words.split()) <= 50
    assert truncate("short", 500) == ("short", False)


async def test_feed_limits_in_the_prompt(tmp_path: Path) -> None:
    feeds = FeedRegistry(
        [
            FeedSpec(
                id="big", source={"callable": "tests.runtime.feed_sources:long_text"}, max_bytes=300
            )
        ]
    )
    model = replay(tmp_path, "<response>done</response>")
    s = build_session(model, transcript_dir=tmp_path, feeds=feeds)
    await s.run("go")
    prompt = feeds_of(model, 0)
    assert '<feed id="big">' in prompt and "[truncated: " in prompt
    assert len(prompt.split('<feed id="big">')[1]) < 400
    await s.aclose()


async def test_transcript_replays_the_same_audit(tmp_path: Path) -> None:
    model = replay(
        tmp_path,
        internal("set_variable", "s", name="x", value=3),
        internal("clear_context", "c"),
        "<response>$x</response>",
    )
    s = build_session(model, transcript_dir=tmp_path / "one")
    first = await s.run("go")
    assert first.transcript is not None
    again = build_session(f"replay:{first.transcript}", transcript_dir=tmp_path / "two")
    second = await again.run("go")
    assert audits(first) == audits(second) == [("set_variable", "ok"), ("clear_context", "blocked")]
    assert first.answer == second.answer == "3"
    await s.aclose()
    await again.aclose()


async def test_the_manifest_grants_and_declares(tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        json.dumps({"content": internal("remove_context_feed", "r", id="clock")})
        + "\n"
        + json.dumps({"content": internal("clear_context", "c")})
        + "\n"
        + json.dumps({"content": "<response>done</response>"})
        + "\n",
        encoding="utf-8",
    )
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(
        f"model: 'replay:{turns}'\n"
        "internal_actions: [remove_context_feed]\n"
        "context_feeds:\n"
        "  - {id: clock, type: internal, source: {internal: system_clock}}\n",
        encoding="utf-8",
    )
    s = build_session(manifest=manifest, transcript_dir=tmp_path)
    assert s.config.allowed_internal == frozenset({"remove_context_feed"})
    result = await s.run("go")
    assert audits(result) == [("remove_context_feed", "ok"), ("clear_context", "blocked")]
    assert [e.feed_id for e in result.events if e.type == "feed_updated"] == ["clock"]  # type: ignore[union-attr]
    assert "clock" not in s.feeds
    await s.aclose()

"""Context feeds end to end through a replay model: ``periodic`` refresh in the
background while a run is active, and the ``llm``, ``workflow`` and ``relic``
sources, each with a failing case (docs/feeds.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ActionError
from cortex_kernel.runtime.feeds import FeedRegistry, FeedSpec, feed_spec

from . import feed_sources
from .feed_sources import TICKER
from .test_internal_actions import Recording, feeds_of, replay

pytestmark = pytest.mark.anyio

TICK = {"callable": "tests.runtime.feed_sources:tick"}


def wait_ticks(action_id: str, n: int) -> str:
    body = json.dumps({"name": "wait_ticks", "parameters": {"n": n}})
    return f'<action type="tool" mode="sync" id="{action_id}">{body}</action>'


def periodic_session(tmp_path: Path, model: Recording, interval: float = 0.01) -> Any:
    feeds = FeedRegistry([FeedSpec(id="ticks", type="periodic", interval=interval, source=TICK)])
    s = build_session(model, transcript_dir=tmp_path, feeds=feeds)
    s.tools.register(feed_sources.wait_ticks)
    return s


def feed_text(prompt: str, feed_id: str) -> str:
    return prompt.split(f'<feed id="{feed_id}">\n', 1)[1].split("\n", 1)[0]


def other_tasks(session: Any, before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Tasks alive now that were not before, besides the session's own background host."""
    return {t for t in asyncio.all_tasks() - before if t is not session._bg_task and not t.done()}


async def test_a_later_turn_reads_the_value_refreshed_in_the_background(tmp_path: Path) -> None:
    TICKER.reset()
    model = replay(tmp_path, wait_ticks("w", 3), "<response>done</response>")
    s = periodic_session(tmp_path, model)
    before = asyncio.all_tasks()
    result = await s.run("watch the ticks")
    assert result.status == "ok", result.message
    # The first turn fetched the first value; the background refreshed it while
    # the tool ran, and the next turn read the fresh value without fetching.
    assert feed_text(feeds_of(model, 0), "ticks") == "tick 1"
    second = int(feed_text(feeds_of(model, 1), "ticks").removeprefix("tick "))
    assert second >= 3
    updates = [e for e in result.events if e.type == "feed_updated"]
    assert len(updates) >= 3 and all(u.error is None for u in updates)  # type: ignore[union-attr]
    assert s.feeds.stats()["ticks"]["hits"] >= 1
    # The refresh stopped with the run: no task is left to call the source again.
    assert other_tasks(s, before) == set()
    await s.aclose()


async def test_a_failing_periodic_refresh_shows_its_error_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    TICKER.reset(fail_from=2)
    model = replay(tmp_path, wait_ticks("w", 2), "<response>still here</response>")
    s = periodic_session(tmp_path, model)
    result = await s.run("watch")
    assert result.status == "ok" and result.answer == "still here"
    assert feed_text(feeds_of(model, 0), "ticks") == "tick 1"
    assert (
        feed_text(feeds_of(model, 1), "ticks")
        == "(unavailable: ConnectionError: ticker down at call 2)"
    )
    errors = [e.error for e in result.events if e.type == "feed_updated"]  # type: ignore[union-attr]
    assert errors[0] is None and "ticker down at call 2" in str(errors[1])
    await s.aclose()


async def test_cancelling_the_run_cancels_a_refresh_under_way(tmp_path: Path) -> None:
    TICKER.reset(hang=True)
    model = replay(tmp_path, wait_ticks("w", 2), "<response>never</response>")
    s = periodic_session(tmp_path, model)
    before = asyncio.all_tasks()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.run, "watch")
            await TICKER.wait_for(2)  # the second fetch hangs in the background
            scope.cancel()
    assert TICKER.cancelled == 1
    assert s.last_result is not None and s.last_result.status == "cancelled"
    assert other_tasks(s, before) == set()
    # The session still works: the next run fetches again.
    TICKER.reset()
    s.config = s.config.replace(model=replay(tmp_path, "<response>back</response>"))
    again = await s.run("again")
    assert again.answer == "back"
    await s.aclose()


async def test_a_turn_waits_for_a_first_value_already_in_flight(tmp_path: Path) -> None:
    # Two periodic feeds: whichever the background starts first, the first
    # turn's prompt has both values (never an empty slot).
    TICKER.reset()
    feeds = FeedRegistry(
        [
            FeedSpec(id="a", type="periodic", interval=60, source=TICK),
            FeedSpec(id="b", type="periodic", interval=60, source=TICK),
        ]
    )
    model = replay(tmp_path, "<response>done</response>")
    s = build_session(model, transcript_dir=tmp_path, feeds=feeds)
    await s.run("go")
    assert {feed_text(feeds_of(model, 0), "a"), feed_text(feeds_of(model, 0), "b")} == {
        "tick 1",
        "tick 2",
    }
    await s.aclose()


async def test_llm_source_uses_the_agents_model(tmp_path: Path) -> None:
    # The feed's sub-call takes the replay's first turn (before the turn's own request).
    model = replay(tmp_path, "Markets are calm.", "<response>noted</response>", "Markets fell.")
    feeds = FeedRegistry(
        [
            FeedSpec(id="mood", ttl=3600, source={"llm": "Summarise the market in one line."}),
            FeedSpec(id="other", source={"llm": {"prompt": "x", "model": "openai/gpt-4o"}}),
        ]
    )
    s = build_session(model, transcript_dir=tmp_path, feeds=feeds)
    result = await s.run("how are markets?")
    assert result.status == "ok" and result.answer == "noted"
    assert model.requests[0].messages[-1]["content"] == "Summarise the market in one line."
    prompt = feeds_of(model, 1)
    assert '<feed id="mood">\nMarkets are calm.' in prompt
    # A model the agent may not use: the slot says why; nothing was called for it.
    assert (
        "<feed id=\"other\">\n(unavailable: an llm action cannot use model 'openai/gpt-4o'"
        in prompt
    )
    assert len(model.requests) == 2
    await s.aclose()


WORKFLOW_MANIFEST = """\
name: lead
tools:
  - {name: add, callable: "tests.runtime.workflow_tools:add"}
  - {name: explode, callable: "tests.runtime.workflow_tools:explode"}
workflows:
  - name: sum3
    parameters: {x: null, y: 2}
    outputs: [total]
    steps:
      - {id: first, type: tool, body: {name: add, parameters: {a: $x, b: $y}}}
      - {id: total, type: tool, body: {name: add, parameters: {a: $first, b: 10}}}
  - name: broken
    steps:
      - {id: bad, type: tool, body: {name: explode, parameters: {}}}
context_feeds:
  - {id: totals, source: {workflow: sum3, parameters: {x: 1}}}
  - {id: wrecked, source: {workflow: broken}}
"""


async def test_workflow_source_and_a_failing_step(tmp_path: Path) -> None:
    turns = tmp_path / "lead.jsonl"
    turns.write_text(json.dumps({"content": "<response>ok</response>"}) + "\n", encoding="utf-8")
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(WORKFLOW_MANIFEST + f"model: 'replay:{turns}'\n", encoding="utf-8")
    s = build_session(manifest=manifest, transcript_dir=tmp_path)
    model = Recording(turns)
    s.config = s.config.replace(model=model)
    result = await s.run("go")
    assert result.status == "ok", result.message
    prompt = feeds_of(model, 0)
    assert '<feed id="totals">\n{"total": 13}' in prompt
    assert "<feed id=\"wrecked\">\n(unavailable: workflow 'broken' failed at step 'bad'" in prompt
    updated = {e.feed_id: e.error for e in result.events if e.type == "feed_updated"}  # type: ignore[union-attr]
    assert updated["totals"] is None and "disk full" in str(updated["wrecked"])
    await s.aclose()


async def test_a_slow_source_times_out_in_its_slot(tmp_path: Path) -> None:
    TICKER.reset(hang=True)
    await TICKER()  # the next call hangs
    feeds = FeedRegistry([FeedSpec(id="slow", source=TICK)], timeout=0.05)
    model = replay(tmp_path, "<response>done</response>")
    s = build_session(model, transcript_dir=tmp_path, feeds=feeds)
    result = await s.run("go")
    assert result.status == "ok"
    assert (
        '<feed id="slow">\n(unavailable: the source took more than 0.05 s (timed out))'
        in feeds_of(model, 0)
    )
    assert TICKER.cancelled == 1
    await s.aclose()


RELIC_MANIFEST = """\
name: keeper
relics:
  - {name: store, kind: sqlite}
context_feeds:
  - {id: city, source: {relic: store, operation: get, parameters: {key: city}}}
  - {id: broken, source: {relic: store, operation: explode}}
  - {id: ghost, source: {relic: nowhere, operation: get}}
"""


async def test_relic_source_reads_a_live_relic(tmp_path: Path) -> None:
    set_city = json.dumps(
        {"name": "store", "operation": "set", "parameters": {"key": "city", "value": "Lyon"}}
    )
    turns = tmp_path / "keeper.jsonl"
    turns.write_text(
        json.dumps({"content": f'<action type="relic" mode="sync" id="s">{set_city}</action>'})
        + "\n"
        + json.dumps({"content": "<response>stored</response>"})
        + "\n",
        encoding="utf-8",
    )
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(
        RELIC_MANIFEST + f"model: 'replay:{turns}'\nexecutors: {{workspace: {tmp_path}}}\n",
        encoding="utf-8",
    )
    s = build_session(manifest=manifest, transcript_dir=tmp_path)
    model = Recording(turns)
    s.config = s.config.replace(model=model)
    result = await s.run("remember Lyon")
    assert result.status == "ok", result.message
    # ttl 0: every turn reads the relic; the second turn sees what the first stored.
    assert feed_text(feeds_of(model, 0), "city") == "null"
    assert feed_text(feeds_of(model, 1), "city") == "Lyon"
    # A bad operation or an unknown relic: the refusal in the slot, the turn goes on.
    assert "(unavailable: relic 'store' has no operation 'explode'" in feeds_of(model, 0)
    assert "<feed id=\"ghost\">\n(unavailable: unknown relic 'nowhere'; relics: store)" in feeds_of(
        model, 0
    )
    await s.aclose()


def test_a_source_has_the_fields_of_its_kind_only() -> None:
    with pytest.raises(ActionError, match="invalid context feed: source: tool: paramters: "):
        feed_spec({"id": "q", "source": {"tool": "quote", "paramters": {"symbol": "XYZ"}}})
    spec = feed_spec({"id": "q", "source": {"tool": "quote", "parameters": {"symbol": "XYZ"}}})
    assert spec.kind == "tool"
    assert spec.source.data() == {"tool": "quote", "parameters": {"symbol": "XYZ"}}

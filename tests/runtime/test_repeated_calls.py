"""A tool call repeated within one turn runs once (issue 28).

Small models write the same call twice in a turn. The second one takes the
first one's result under its own id and ``output_key``, with a warning; the
tool runs once. Through the kernel's composition (``agent.build_session``
with a replay model): the real parser, scheduler and tool executor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel import tool
from cortex_kernel.agent import build_session
from cortex_kernel.runtime.run_result import RunResult
from tests.replays import write_turns

pytestmark = pytest.mark.anyio


class Counted:
    """A tool that records every call it gets."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def population(self, city: str) -> str:
        """Population of a city."""
        self.calls.append(city)
        return f"{city} #{len(self.calls)}"  # a new value per call: a rerun would show


def call(id_: str, mode: str = "async", key: str = "", **parameters: Any) -> str:
    body = json.dumps({"name": "population", "parameters": parameters})
    output_key = f' output_key="{key}"' if key else ""
    return f'<action type="tool" mode="{mode}" id="{id_}"{output_key}>{body}</action>'


async def replay(tmp_path: Path, turns: list[str]) -> tuple[RunResult, Any, Counted]:
    path = tmp_path / "turns.jsonl"
    write_turns(path, *turns)
    tool = Counted()
    session = build_session(model=f"replay:{path}", namespace={}, transcript_dir=tmp_path)
    session.tools.register(tool.population, name="population")
    try:
        result = await session.run("go")
    finally:
        await session.aclose()
    return result, session, tool


def told(session: Any) -> str:
    """What the model was sent after its first turn."""
    return "\n".join(str(m.get("content")) for m in session.history() if m["role"] != "assistant")


async def test_a_call_repeated_in_the_turn_runs_once_and_both_get_its_result(
    tmp_path: Path,
) -> None:
    turns = [
        call("a", key="lyon", city="Lyon")
        + call("b", key="lyon_again", city="Lyon")
        + call("c", key="nice", city="Nice"),
        "<response>Lyon $lyon, again $lyon_again, Nice $nice.</response>",
    ]
    result, session, tool = await replay(tmp_path, turns)
    assert sorted(tool.calls) == ["Lyon", "Nice"]
    lyon, nice = session.variables["lyon"], session.variables["nice"]
    assert session.variables["lyon_again"] == lyon != nice
    assert session.variables["b"] == session.variables["a"] == lyon
    assert result.status == "ok"
    assert result.answer == f"Lyon {lyon}, again {lyon}, Nice {nice}."
    warnings = [e for e in result.events if e.type == "warning" and e.id == "b"]
    assert len(warnings) == 1 and "repeats action 'a'" in warnings[0].message
    succeeded = {e.id for e in result.events if e.type == "action_succeeded"}
    assert succeeded == {"a", "b", "c"}
    started = [e.id for e in result.events if e.type == "action_started"]
    assert sorted(started) == ["a", "c"]
    # The model reads a result for each of its ids.
    sent = told(session)
    assert '<action_result id="a" status="ok"' in sent
    assert '<action_result id="b" status="ok"' in sent


async def test_the_same_call_in_a_later_turn_runs_again(tmp_path: Path) -> None:
    turns = [
        call("a", mode="sync", key="first", city="Lyon"),
        call("b", mode="sync", key="second", city="Lyon"),
        "<response>$first then $second</response>",
    ]
    result, session, tool = await replay(tmp_path, turns)
    assert tool.calls == ["Lyon", "Lyon"]
    assert session.variables["first"] != session.variables["second"]
    assert not [e for e in result.events if e.type == "warning" and e.id == "b"]


async def test_a_call_after_another_action_is_not_a_repeat(tmp_path: Path) -> None:
    # Same tool and parameters, but ordered after a different action: the
    # model asked for it again once something else has happened.
    turns = [
        call("a", city="Lyon")
        + call("n", city="Nice")
        + call("b", city="Lyon").replace('id="b"', 'id="b" depends_on="n"'),
        "<response>done</response>",
    ]
    result, _, tool = await replay(tmp_path, turns)
    assert sorted(tool.calls) == ["Lyon", "Lyon", "Nice"]
    assert result.status == "ok"


async def test_a_repeat_reading_the_same_result_reuses_it(tmp_path: Path) -> None:
    # `$n` names the same action in both calls: the arguments are the same.
    turns = [
        call("n", key="town", city="Nice") + call("a", city="$town") + call("b", city="$town"),
        "<response>$a $b</response>",
    ]
    result, session, tool = await replay(tmp_path, turns)
    assert tool.calls == ["Nice", session.variables["town"]]
    assert session.variables["a"] == session.variables["b"]
    assert result.status == "ok"


async def test_a_repeatable_tool_runs_every_call(tmp_path: Path) -> None:
    # @tool(repeatable=True): a draw or a counter means each call to run.
    draws: list[str] = []

    @tool(repeatable=True)
    def population(city: str) -> str:
        """A new draw per call."""
        draws.append(city)
        return f"{city} #{len(draws)}"

    path = tmp_path / "turns.jsonl"
    turn = call("a", key="one", city="Lyon") + call("b", key="two", city="Lyon")
    write_turns(path, turn, "<response>x")
    session = build_session(model=f"replay:{path}", namespace={}, transcript_dir=tmp_path)
    session.tools.collect({"population": population})
    try:
        result = await session.run("go")
    finally:
        await session.aclose()
    assert draws == ["Lyon", "Lyon"]
    assert session.variables["one"] != session.variables["two"]
    started = sorted(e.id for e in result.events if e.type == "action_started")
    assert started == ["a", "b"]
    assert not [e for e in result.events if e.type == "warning" and "repeats" in e.message]


async def test_a_manifest_tool_marked_repeatable_runs_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "draw_tools.py").write_text(
        "CALLS = []\n\n"
        "def population(city: str) -> str:\n"
        '    """A new draw per call."""\n'
        "    CALLS.append(city)\n"
        "    return f'{city} #{len(CALLS)}'\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "turns.jsonl"
    turn = call("a", key="one", city="Lyon") + call("b", key="two", city="Lyon")
    write_turns(path, turn, "<response>x")
    manifest = tmp_path / "agent.json"
    entry = {"name": "population", "callable": "draw_tools:population", "repeatable": True}
    manifest.write_text(json.dumps({"model": f"replay:{path}", "tools": [entry]}))
    session = build_session(manifest=manifest, namespace={}, transcript_dir=tmp_path)
    try:
        await session.run("go")
    finally:
        await session.aclose()
    assert session.variables["one"] == "Lyon #1"
    assert session.variables["two"] == "Lyon #2"

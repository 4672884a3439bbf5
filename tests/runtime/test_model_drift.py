"""What real models write, replayed through a session (docs/protocol.md#actions).

Each transcript is a drift seen from small local models; the run must read
it as the model meant it, say so in a ``warning`` event, and give the
answer a correct transcript would give.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.llm.replay import ReplayModel
from cortex_kernel.runtime.run_result import RunResult
from cortex_kernel.runtime.tools import ToolRegistry
from tests.replays import write_turns

pytestmark = pytest.mark.anyio


async def replay(tmp_path: Path, *turns: str) -> tuple[RunResult, list[dict[str, Any]]]:
    """Run one message against a replay of ``turns``; return the result and its calls."""
    source = tmp_path / "drift.jsonl"
    write_turns(source, *turns)
    calls: list[dict[str, Any]] = []
    tools = ToolRegistry()

    @tools.register
    def population(city: str) -> int:
        """People living in a city."""
        calls.append({"city": city})
        return {"Paris": 2_100_000, "Lyon": 520_000}[city]

    session = build_session(ReplayModel(source), tools=tools, transcript_dir=tmp_path)
    try:
        result = await session.run("How many people live in Paris?")
    finally:
        await session.aclose()
    return result, calls


def warnings(result: RunResult) -> list[str]:
    return [e.message for e in result.events if e.type == "warning"]  # type: ignore[union-attr]


async def test_thought_closed_by_response_tag(tmp_path: Path) -> None:
    result, _ = await replay(
        tmp_path, "<thought>I know this one.</response>\n<response>About 2.1 million.</response>"
    )
    assert result.status == "ok"
    assert result.answer == "About 2.1 million."
    assert any("</response> closed the open <thought>" in w for w in warnings(result))
    ends = [e for e in result.events if e.type == "thought_end"]
    assert len(ends) == 1 and not ends[0].truncated  # type: ignore[union-attr]


async def test_response_closed_by_thought_tag(tmp_path: Path) -> None:
    result, _ = await replay(tmp_path, "<response>About 2.1 million.</thought>")
    assert result.status == "ok"
    assert result.answer == "About 2.1 million."  # not "…</thought>", not truncated
    assert any("</thought> closed the open <response>" in w for w in warnings(result))


@pytest.mark.parametrize("nothing", ["none", "null", "empty", "-", "[]", '""'])
async def test_depends_on_nothing_runs_the_action(tmp_path: Path, nothing: str) -> None:
    written = (
        f"depends_on={nothing}" if nothing.startswith(('"', "[")) else f'depends_on="{nothing}"'
    )
    result, calls = await replay(
        tmp_path,
        f'<action type="tool" id="p" {written} output_key="pop">'
        '{"name": "population", "parameters": {"city": "Paris"}}</action>',
        "<response>Paris has $pop people.</response>",
    )
    assert calls == [{"city": "Paris"}]  # run, not skipped waiting for an action "none"
    assert result.status == "ok" and result.answer == "Paris has 2100000 people."
    word_form = nothing in ("none", "null", "empty")
    assert any("read as no dependency" in w for w in warnings(result)) == word_form


@pytest.mark.parametrize(
    "body",
    [
        {"name": "population", "arguments": {"city": "Paris"}},
        {"name": "population", "arguments": '{"city": "Paris"}'},
        {"name": "population", "args": {"city": "Paris"}},
        {"name": "population", "input": {"city": "Paris"}},
        {"name": "population", "city": "Paris"},
    ],
)
async def test_tool_parameters_written_elsewhere_are_read(
    tmp_path: Path, body: dict[str, Any]
) -> None:
    result, calls = await replay(
        tmp_path,
        f'<action type="tool" id="p">{json.dumps(body)}</action>',
        "<response>Paris has $p people.</response>",
    )
    assert calls == [{"city": "Paris"}]
    assert result.status == "ok" and result.answer == "Paris has 2100000 people."
    (warning,) = [w for w in warnings(result) if "read as 'parameters'" in w]
    moved = next(key for key in body if key != "name")
    assert (f"under {moved!r}" if moved != "city" else "beside 'name'") in warning

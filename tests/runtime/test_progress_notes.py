"""A progress note reaches the user but not the conversation (docs/runtime.md#progress-notes).

A note is written before the results it speaks of arrive, so a figure in it
is a guess. Through the kernel's composition (``agent.build_session`` with a
replay model): the real parser, scheduler and tool executor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replays import replay_run

pytestmark = pytest.mark.anyio


def population(city: str) -> int:
    """Population of a city."""
    return {"Paris": 2_102_650, "Lyon": 520_774}[city]


CALLS = (
    '<action type="tool" mode="async" id="p" output_key="paris">'
    '{"name": "population", "parameters": {"city": "Paris"}}</action>'
    '<action type="tool" mode="async" id="l" output_key="lyon">'
    '{"name": "population", "parameters": {"city": "Lyon"}}</action>'
)
NOTE = '<response final="false">Paris has about 2,200,000 people; Lyon 510,000.</response>'


async def test_a_progress_note_is_shown_but_left_out_of_the_next_turn(tmp_path: Path) -> None:
    first = "<thought>Both at once.</thought>" + CALLS + NOTE
    result, history = await replay_run(
        tmp_path,
        [first, "<response>$paris and $lyon</response>"],
        "What are the populations of Paris and Lyon?",
        [population],
    )
    assert result.status == "ok"
    assert result.answer == "2102650 and 520774"
    # The user saw the note as it streamed.
    shown = "".join(e.text for e in result.events if e.type == "response_delta")
    assert "about 2,200,000" in shown
    # The model's next turn reads its thought and calls, not the guess.
    first = next(m for m in history if m["role"] == "assistant")
    assert "<thought>Both at once.</thought>" in first["content"]
    assert 'output_key="paris"' in first["content"] and 'output_key="lyon"' in first["content"]
    assert "2,200,000" not in first["content"] and 'final="false"' not in first["content"]
    assert all("2,200,000" not in str(m.get("content")) for m in history)

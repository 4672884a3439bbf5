"""The replay model (``replay:PATH[?tps=N]``) and headless runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ConfigError, ReplayExhausted
from cortex_kernel.headless import run_headless
from cortex_kernel.llm.replay import ReplayModel, tokenize
from cortex_kernel.runtime.ports import CompletionRequest

pytestmark = pytest.mark.anyio

REQUEST = CompletionRequest(messages=[{"role": "user", "content": "hi"}])


def write(path: Path, *records: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def set_v_then_answer(path: Path, past_the_action: str = "") -> Path:
    """Two turns: ``v`` set to 7 in a sync action (then ``past_the_action``), then "v is $v"."""
    action = (
        '<action type="internal" mode="sync">'
        '{"name": "set_variable", "parameters": {"name": "v", "value": 7}}</action>'
    )
    turns = [action + past_the_action, "<response>v is $v</response>"]
    return write(path, *({"content": turn} for turn in turns))


async def collect(model: ReplayModel) -> list[str]:
    async with model.stream(REQUEST) as completion:
        return [chunk async for chunk in completion]


def test_tokenize_is_lossless() -> None:
    text = 'Hello, world! <action type="tool">{"a": 12345}</action>\n  end'
    assert "".join(tokenize(text)) == text
    assert len(tokenize(text)) > 10


def test_from_spec(tmp_path: Path) -> None:
    turns = write(tmp_path / "t.jsonl", {"content": "hi"})
    model = ReplayModel.from_spec(f"replay:{turns}?tps=50")
    assert model.tps == 50 and model.path == turns
    with pytest.raises(ConfigError):
        ReplayModel.from_spec("openai/gpt-4o")
    with pytest.raises(ConfigError):
        ReplayModel.from_spec(f"replay:{turns}?tps=fast")
    with pytest.raises(ConfigError, match="is empty"):  # checked when the model is set
        ReplayModel.from_spec("replay:/dev/null")


async def test_turns_in_order_then_exhausted(tmp_path: Path) -> None:
    model = ReplayModel(write(tmp_path / "t.jsonl", {"content": "one two"}, {"content": "three"}))
    chunks = await collect(model)
    assert "".join(chunks) == "one two"
    assert "".join(await collect(model)) == "three"
    with pytest.raises(ReplayExhausted, match="ran out of turns"):
        await collect(model)


async def test_tps_paces_the_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The waits the stream asks for, not how long they took: no real time
    # passes, so each wait is how far ahead of the start its chunk is due.
    waits: list[float] = []

    async def recorded(seconds: float) -> None:
        waits.append(seconds)
        await anyio.lowlevel.checkpoint()

    monkeypatch.setattr("cortex_kernel.llm.replay.anyio.sleep", recorded)
    text = " word" * 50  # 50 tokens, 3 to a chunk
    model = ReplayModel(write(tmp_path / "t.jsonl", {"content": text}), tps=500)
    chunks = await collect(model)
    assert "".join(chunks) == text and len(chunks) == 17
    assert len(waits) == 17 and waits == sorted(waits)  # one wait per chunk, each due later
    assert waits[0] == pytest.approx(3 / 500, abs=0.005)  # the first chunk's 3 tokens
    assert waits[-1] == pytest.approx(50 / 500, abs=0.005)  # all 50 at 500 tokens/s


async def test_tool_calls_become_protocol(tmp_path: Path) -> None:
    record = {
        "content": "",
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
        ],
    }
    model = ReplayModel(write(tmp_path / "t.jsonl", record))
    async with model.stream(REQUEST) as completion:
        text = "".join([c async for c in completion])
        assert completion.tool_calls[0].id == "call_9"
    assert (
        text == '<action type="tool" mode="async" id="call_9">'
        '{"name": "f", "parameters": {"x": 1}}</action>'
    )


async def test_recorded_transcript_replays_its_turns(tmp_path: Path) -> None:
    source = set_v_then_answer(tmp_path / "turns.jsonl", " cut here")
    first = build_session(ReplayModel(source), transcript_dir=tmp_path / "tr")
    result = await first.run("go")
    assert result.answer == "v is 7" and result.transcript is not None
    again = build_session(ReplayModel(result.transcript), transcript_dir=tmp_path / "tr")
    replayed = await again.run("go")
    assert replayed.answer == "v is 7"
    turns = [e for e in replayed.events if e.type == "turn_ended"]
    assert [t.reason for t in turns] == ["sync_action", "stream_end"]
    await first.aclose()
    await again.aclose()


async def test_exhausted_replay_ends_run_with_error(tmp_path: Path) -> None:
    source = write(
        tmp_path / "t.jsonl",
        {"content": '<action type="internal" mode="sync">{"name": "list_variables"}</action>'},
    )
    s = build_session(ReplayModel(source), transcript_dir=tmp_path)
    result = await s.run("go")
    assert result.status == "error" and "ran out of turns" in result.message
    await s.aclose()


def test_headless_run_prints_events_and_exit_codes(tmp_path: Path) -> None:
    source = write(tmp_path / "t.jsonl", {"content": "<response>hello</response>"})
    out = io.StringIO()
    target = tmp_path / "copy.transcript.jsonl"
    code = run_headless(
        "hi", model=f"replay:{source}", transcript=str(target), out=out, transcript_dir=tmp_path
    )
    assert code == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["type"] == "run_started" and lines[-1]["type"] == "run_finished"
    assert lines[-1]["answer"] == "hello"
    assert target.exists()
    # a second run exhausts the replay: non-zero exit
    empty = write(
        tmp_path / "e.jsonl",
        {"content": '<action type="internal" mode="sync">{"name": "list_variables"}</action>'},
    )
    assert (
        run_headless("hi", model=f"replay:{empty}", out=io.StringIO(), transcript_dir=tmp_path) == 1
    )
    assert run_headless("hi", model="replay:", out=io.StringIO()) == 2


def test_headless_waits_for_fire_and_forget(tmp_path: Path) -> None:
    source = write(
        tmp_path / "t.jsonl",
        {
            "content": '<action type="internal" mode="fire_and_forget">{"name": '
            '"set_variable", "parameters": {"name": "z", "value": 1}}</action>'
        },
        # No answer in the first turn: the repair turn asks for one (issue 9 rule 6).
        {"content": "<response>Started.</response>"},
    )
    out = io.StringIO()
    assert run_headless("hi", model=f"replay:{source}", out=out, transcript_dir=tmp_path) == 0
    assert '"action_succeeded"' in out.getvalue()


def test_anyio_backend_is_asyncio(anyio_backend: str) -> None:
    assert anyio_backend == "asyncio"
    assert anyio.__name__ == "anyio"


async def test_replayed_tool_calls_through_a_session(tmp_path: Path) -> None:
    from cortex_kernel.runtime.tools import ToolRegistry

    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "sq", "arguments": '{"n": 3}'}},
        {"id": "call_b", "type": "function", "function": {"name": "sq", "arguments": '{"n": 4}'}},
    ]
    source = write(
        tmp_path / "t.jsonl",
        {"content": "", "tool_calls": calls},
        {"content": "<response>$call_a and $call_b</response>"},
    )
    tools = ToolRegistry()

    @tools.register
    def sq(n: int) -> int:
        return n * n

    s = build_session(ReplayModel(source), tools=tools, transcript_dir=tmp_path, protocol="tools")
    result = await s.run("go")
    assert result.answer == "9 and 16"
    history = s.history()
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert history[2] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "sq(n=3) returned: 9",
    }
    assert history[1]["content"] == ""  # the calls travel as tool_calls, not twice
    await s.aclose()


async def test_a_replay_restarted_each_run_plays_every_turn_with_feeds(tmp_path: Path) -> None:
    # The demo model restarts at a run's first turn, told apart by its last
    # message: the feeds message after the results must not read as a new run.
    from cortex_kernel.runtime.feeds import FeedRegistry, FeedSpec

    source = set_v_then_answer(tmp_path / "t.jsonl")
    model = ReplayModel(source)
    model.restart_each_run = True
    clock = FeedRegistry([FeedSpec(id="system_clock", type="internal")])
    s = build_session(model, feeds=clock, transcript_dir=tmp_path / "tr")
    for cell in ("first", "second"):
        result = await s.run(cell)
        assert (result.status, result.answer) == ("ok", "v is 7"), result.message
        turns = [e for e in result.events if e.type == "turn_ended"]
        assert [t.reason for t in turns] == ["sync_action", "stream_end"]
    await s.aclose()

"""Function calling dispatches each call the moment it is complete, not at the stream's end.

docs/protocol.md#function-calling. The provider is the loopback server,
reached through litellm's real HTTP path; it holds the rest of its stream
until the tool of the first call has started (a gate the tool body opens).
Had the call waited for the stream's end, the gate would never open and
the server would note it missed.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.llm.function_calling import ToolCallAccumulator
from cortex_kernel.llm.replay import ReplayModel
from cortex_kernel.runtime.ports import ToolCall
from cortex_kernel.runtime.session import Session
from cortex_kernel.runtime.tools import ToolRegistry
from tests.llm.fake_openai import FakeOpenAI, Reply, sse_tool_calls
from tests.llm.support import make_model

pytestmark = pytest.mark.anyio


def marker(started: dict[int, threading.Event]) -> ToolRegistry:
    """One tool, ``mark(n)``: opens gate ``n`` as its body starts, returns ``n * 10``."""
    tools = ToolRegistry()

    @tools.register
    def mark(n: int) -> int:
        """Mark call n as started."""
        started[n].set()
        return n * 10

    return tools


def session_for(server: FakeOpenAI, tmp_path: Path, tools: ToolRegistry) -> Session:
    # Generous deadlines: the server may wait on its gate for a while when
    # the code under test is wrong, and a retry would only muddle the failure.
    model = make_model(server, timeout=30, first_token_timeout=30, num_retries=0)
    return build_session(model, tools=tools, transcript_dir=tmp_path, protocol="tools")


def transcript_turns(tmp_path: Path) -> list[dict[str, Any]]:
    [path] = sorted(tmp_path.glob("*.jsonl"))
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in records if r.get("type") == "model_turn"]


@pytest.fixture(params=["sse", "litellm"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Who reads the response: ours (SSEEvents), or litellm's stream wrapper."""
    if request.param == "litellm":
        monkeypatch.setattr("cortex_kernel.llm.litellm_model.sse_response", lambda stream: None)
    return str(request.param)


async def test_a_call_starts_when_the_next_call_begins(
    server: FakeOpenAI, tmp_path: Path, reader: str
) -> None:
    started = {1: threading.Event(), 2: threading.Event()}
    deltas = sse_tool_calls([("call_1", "mark", '{"n": 1}'), ("call_2", "mark", '{"n": 2}')])
    second_head = next(i for i, d in enumerate(deltas) if d["tool_calls"][0].get("id") == "call_2")
    # The server sends call_2's first delta, then holds call_2's arguments
    # (and the stream's end) until mark(1) has started.
    server.add(Reply(chunks=deltas, gates={second_head + 1: started[1]}))
    server.stream("Marked 10 and 20.")
    session = session_for(server, tmp_path, marker(started))
    result = await session.run("mark 1 and 2")

    assert result.status == "ok", result.message
    first = server.wait_done(0)
    assert first.gates_missed == []  # mark(1) ran while call_2 was still streaming
    assert first.completed  # the stream was read to its end, not cut at the call
    # What the view is told: mark(1) running before call_2 was even parsed.
    order = [(e.type, getattr(e, "id", None)) for e in result.events]
    assert order.index(("action_started", "call_1")) < order.index(("action_open", "call_2"))
    # The turn is as before: the assistant message carries both calls once,
    # each answered by a tool message keyed by its id.
    sent = server.requests[1].body["messages"]
    [assistant] = [m for m in sent if m["role"] == "assistant"]
    assert assistant["content"] == ""
    assert [(c["id"], c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        ("call_1", '{"n": 1}'),
        ("call_2", '{"n": 2}'),
    ]
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        ("call_1", "mark(n=1) returned: 10"),
        ("call_2", "mark(n=2) returned: 20"),
    ]
    [turn, _] = transcript_turns(tmp_path)
    assert [c["id"] for c in turn["tool_calls"]] == ["call_1", "call_2"]

    # The transcript replays: the same calls run, the same answer comes.
    replayed = build_session(
        ReplayModel(result.transcript),
        tools=marker(started),
        transcript_dir=tmp_path / "again",
        protocol="tools",
    )
    again = await replayed.run("mark 1 and 2")
    assert (again.status, again.answer) == ("ok", result.answer)
    # Replayed, both calls are known at once and run side by side: either may
    # finish first, so only which calls succeeded is compared.
    succeeded = sorted(e.id for e in again.events if e.type == "action_succeeded")
    assert succeeded == ["call_1", "call_2"]
    await replayed.aclose()


async def test_a_lone_call_starts_when_the_stream_moves_past_it(
    server: FakeOpenAI, tmp_path: Path, reader: str
) -> None:
    started = {7: threading.Event()}
    deltas = sse_tool_calls([("call_7", "mark", '{"n": 7}')])
    # Events: the deltas, the finish chunk, the usage chunk. The usage chunk
    # (and the stream's end) waits until mark(7) has started.
    server.add(Reply(chunks=deltas, gates={len(deltas) + 1: started[7]}, usage=(40, 9)))
    server.stream("Marked 70.", usage=(50, 3))
    session = session_for(server, tmp_path, marker(started))
    result = await session.run("mark 7")

    assert (result.status, result.answer) == ("ok", "Marked 70.")
    first = server.wait_done(0)
    assert first.gates_missed == []
    # The call did not cut the stream: the provider's own usage was read.
    assert result.usage.prompt_tokens == 90 and result.usage.completion_tokens == 12
    sent = server.requests[1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["mark(n=7) returned: 70"]


def test_ready_hands_each_complete_call_out_once() -> None:
    acc = ToolCallAccumulator()
    head = {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}

    def chunk(*deltas: dict[str, Any]) -> list[ToolCall]:
        acc.next_chunk()
        acc.add(deltas)
        return acc.ready()

    assert chunk(head) == []
    assert chunk({"index": 0, "function": {"arguments": '{"x": '}}) == []
    # Whole, but the chunk that closed it may be followed by more of it.
    assert chunk({"index": 0, "function": {"arguments": "1}"}}) == []
    acc.next_chunk()  # a chunk with no delta (the finish reason): the stream moved on
    assert acc.ready() == [ToolCall(id="a", name="f", arguments='{"x": 1}')]
    assert acc.ready() == []
    # A call with broken arguments waits for the end; it holds the ones after it.
    assert chunk({"index": 1, "id": "b", "function": {"name": "g", "arguments": "{oops"}}) == []
    assert chunk({"index": 2, "id": "c", "function": {"name": "h", "arguments": "{}"}}) == []
    acc.next_chunk()
    assert acc.ready() == []
    assert [c.id for c in acc.rest()] == ["b", "c"]
    assert [c.id for c in acc.calls()] == ["a", "b", "c"]


def test_a_call_without_arguments_is_complete_when_the_next_begins() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "a", "function": {"name": "now", "arguments": ""}}])
    acc.next_chunk()
    assert acc.ready() == []  # no arguments yet: more may come
    acc.next_chunk()
    acc.add([{"index": 1, "id": "b", "function": {"name": "now", "arguments": ""}}])
    assert [c.id for c in acc.ready()] == ["a"]
    assert [c.id for c in acc.rest()] == ["b"]

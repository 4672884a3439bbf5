"""The agent loop through :class:`Session`: turns, modes, end conditions, faults, history."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ProviderDown
from cortex_kernel.runtime.limits import Limits
from cortex_kernel.runtime.ports import ToolCall
from cortex_kernel.runtime.run_events import parse_event
from cortex_kernel.runtime.session import Session
from cortex_kernel.runtime.tools import ToolRegistry

from .fakes import ScriptedModel

pytestmark = pytest.mark.anyio


def tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.register
    def add(a: int, b: int = 0) -> int:
        """Add."""
        return a + b

    @registry.register
    async def wait(seconds: float, value: Any = None) -> Any:
        """Sleep."""
        await anyio.sleep(seconds)
        return value

    @registry.register
    def boom(message: str = "kaboom") -> None:
        """Raise."""
        raise ValueError(message)

    return registry


def session(model: ScriptedModel, tmp_path: Path, **kw: Any) -> Session:
    return build_session(model, tools=tools(), transcript_dir=tmp_path, **kw)


def tool(name: str, mode: str = "async", extra: str = "", **params: Any) -> str:
    body = json.dumps({"name": name, "parameters": params})
    return f'<action type="tool" mode="{mode}" {extra}>{body}</action>'


def types(result: Any) -> list[str]:
    return [e.type for e in result.events]


async def test_async_sync_and_final_response(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            "<thought>plan "
            + tool("add", extra='output_key="x"', a=1, b=2)
            + " still thinking</thought>"
            + tool("add", mode="sync", extra='id="s"', a="$x", b=10)
            + "this text is never read",
            "<response>x=$x, s=$s</response>",
        ]
    )
    s = session(model, tmp_path)
    result = await s.run("go")
    assert result.status == "ok"
    assert result.answer == "x=3, s=13"
    assert result.variables["x"] == 3 and s.variables["s"] == 13
    assert "never read" not in "".join(model.read[-1:])
    assert model.completions[0].closed
    second_prompt = model.requests[1].messages[-1]["content"]
    assert '<action_result id="a1" status="ok">3</action_result>' in second_prompt
    assert '<action_result id="s" status="ok">13</action_result>' in second_prompt
    history = s.history()
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["content"].endswith("</action>")
    assert types(result)[0] == "run_started" and types(result)[-1] == "run_finished"
    await s.aclose()


async def test_transcript_records_events_and_model_turns(tmp_path: Path) -> None:
    model = ScriptedModel(["<response>hi</response>"])
    s = session(model, tmp_path)
    result = await s.run("go")
    assert result.transcript is not None
    lines = result.transcript.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert any(
        r["type"] == "model_turn" and r["content"] == "<response>hi</response>" for r in records
    )
    events = [parse_event(line) for line in lines if '"model_turn"' not in line]
    assert events[-1].type == "run_finished"
    await s.aclose()


async def test_raising_tool_is_reported_to_the_model(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            tool("boom", mode="sync", message="<b>bad</b>"),
            "<response>sorry</response>",
        ]
    )
    s = session(model, tmp_path)
    result = await s.run("go")
    assert result.status == "ok"
    failed = [e for e in result.events if e.type == "action_failed"]
    assert failed and "ValueError: <b>bad</b>" in failed[0].error
    prompt = model.requests[1].messages[-1]["content"]
    assert 'status="error">ValueError: &lt;b&gt;bad&lt;/b&gt;</action_result>' in prompt
    await s.aclose()


async def test_timeout_and_retry_through_the_loop(tmp_path: Path) -> None:
    calls = {"n": 0}
    model = ScriptedModel(
        [
            tool("wait", extra='timeout="0.05"', seconds=5)
            + tool("flaky", extra='retries="2" output_key="f"'),
            "<response>$f</response>",
        ]
    )
    s = session(model, tmp_path)

    @s.tools.register
    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("once")
        return "recovered"

    with anyio.fail_after(5):
        result = await s.run("go")
    assert result.answer == "recovered"
    failed = [e for e in result.events if e.type == "action_failed"]
    assert failed[0].error == "timed out after 0.05 s"
    assert 'status="error">timed out after 0.05 s' in model.requests[1].messages[-1]["content"]
    await s.aclose()


async def test_cancelled_run(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            "<response>first</response>",
            tool("wait", seconds=30)
            + tool("wait", extra='depends_on="a1"', seconds=1)
            + tool("wait", mode="sync", seconds=30),
        ]
    )
    s = session(model, tmp_path)
    await s.run("one", key="c1")
    tasks_before = len(asyncio.all_tasks())
    seen: list[Any] = []
    with anyio.move_on_after(0.2) as scope:
        await s.run("two", key="c2", on_event=seen.append)
    assert scope.cancelled_caught
    assert len(asyncio.all_tasks()) == tasks_before  # no action task left running
    kinds = [e.type for e in seen]
    assert kinds[-1] == "run_finished" and seen[-1].status == "cancelled"
    cancelled = {e.id for e in seen if e.type == "action_cancelled"}
    assert cancelled == {"a1", "a2", "a3"}
    # the complete turn is kept, nothing half-written
    assert [m["role"] for m in s.history()] == ["user", "assistant", "user", "assistant"]
    # the interrupted run is the last result, settled as cancelled
    assert s.last_result is not None and s.last_result.status == "cancelled"
    await s.aclose()


async def test_cancel_while_streaming_keeps_no_half_turn(tmp_path: Path) -> None:
    model = ScriptedModel(["<thought>" + "x" * 400 + "</thought>"], chunk=4, delay=0.01)
    s = session(model, tmp_path)
    seen: list[Any] = []
    with anyio.move_on_after(0.1):
        await s.run("go", on_event=seen.append)
    assert seen[-1].type == "run_finished" and seen[-1].status == "cancelled"
    assert any(e.type == "turn_ended" and e.reason == "cancelled" for e in seen)
    assert s.history() == []
    await s.aclose()


async def test_model_stream_raising_mid_turn(tmp_path: Path) -> None:
    model = ScriptedModel(
        [["<thought>a ", tool("wait", seconds=30), " more", ProviderDown("503 from provider")]]
    )
    s = session(model, tmp_path)
    with anyio.fail_after(2):
        result = await s.run("go")
    assert result.status == "error"
    assert "ProviderDown" in result.message and "503" in result.message
    assert any(e.type == "action_cancelled" and e.id == "a1" for e in result.events)
    assert any(e.type == "turn_ended" and e.reason == "error" for e in result.events)
    assert s.history() == []
    await s.aclose()


async def test_no_action_no_response_ends_with_text(tmp_path: Path) -> None:
    s = session(ScriptedModel(["just some text"]), tmp_path)
    result = await s.run("go")
    assert (result.status, result.answer) == ("ok", "just some text")
    await s.aclose()


async def test_max_turns(tmp_path: Path) -> None:
    model = ScriptedModel([tool("add", mode="sync", a=n) for n in range(5)])
    s = session(model, tmp_path, limits=Limits(max_turns=3))
    result = await s.run("go")
    assert result.status == "limit" and "max_turns" in result.message
    assert len(model.requests) == 3
    await s.aclose()


async def test_max_actions(tmp_path: Path) -> None:
    model = ScriptedModel(["".join(tool("add", a=i) for i in range(5))])
    s = session(model, tmp_path, limits=Limits(max_actions=3))
    result = await s.run("go")
    assert result.status == "limit" and "max_actions" in result.message
    assert sum(e.type == "action_queued" for e in result.events) == 3
    await s.aclose()


async def test_wall_time(tmp_path: Path) -> None:
    model = ScriptedModel([tool("wait", mode="sync", seconds=10)])
    # 0.5 s: the action must have started when the limit fires (0.1 s was
    # sometimes spent before it under a loaded suite, then nothing was cancelled).
    s = session(model, tmp_path, limits=Limits(wall_time=0.5))
    with anyio.fail_after(5):
        result = await s.run("go")
    assert result.status == "limit" and "wall time" in result.message
    assert any(e.type == "action_cancelled" for e in result.events)
    await s.aclose()


async def test_token_and_cost_limits(tmp_path: Path) -> None:
    for limits, word in ((Limits(max_tokens=10), "token"), (Limits(max_cost=0.005), "cost")):
        model = ScriptedModel([tool("add", a=1)] * 3)
        s = session(model, tmp_path, limits=limits)
        result = await s.run("go")
        assert result.status == "limit" and word in result.message
        await s.aclose()


async def test_key_replaces_history_in_place(tmp_path: Path) -> None:
    model = ScriptedModel(["one", "two", "one again"])
    s = session(model, tmp_path)
    await s.run("m1", key="cell1")
    await s.run("m2", key="cell2")
    await s.run("m1b", key="cell1")
    contents = [m["content"] for m in s.history()]
    assert contents == ["m1b", "one again", "m2", "two"]
    # the re-run's prompt does not contain the run it replaces
    assert "m1" not in [m["content"] for m in model.requests[2].messages]
    s.reset()
    assert s.history() == []
    await s.aclose()


async def test_forget_drops_only_the_given_runs_turns(tmp_path: Path) -> None:
    model = ScriptedModel(["one", "two", "three"])
    s = session(model, tmp_path)
    await s.run("m1", key="cell1")
    await s.run("m2", key="cell2")
    s.forget(["cell1", "never-ran"])
    assert [m["content"] for m in s.history()] == ["m2", "two"]
    await s.run("m3", key="cell3")
    assert [m["content"] for m in model.requests[2].messages if m["role"] != "system"] == [
        "m2",
        "two",
        "m3",
    ]
    await s.aclose()


async def test_namespace_write_and_fallback(tmp_path: Path) -> None:
    ns: dict[str, Any] = {"base": 40}
    model = ScriptedModel([tool("add", extra='output_key="total"', a="$base", b=2)])
    s = session(model, tmp_path, namespace=ns, read_notebook=True)  # granted
    result = await s.run("go")
    assert ns["total"] == 42 and result.variables["total"] == 42
    assert any(e.type == "variable_bound" and e.name == "total" for e in result.events)
    await s.aclose()


@pytest.mark.event_handler_errors
async def test_on_event_errors_do_not_break_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def bad(event: Any) -> None:
        raise RuntimeError("view bug")

    s = session(ScriptedModel(["<response>fine</response>"]), tmp_path)
    with caplog.at_level("ERROR", logger="cortex_kernel.runtime.loop"):
        result = await s.run("go", on_event=bad)
    assert result.answer == "fine"
    # Logged with its traceback, once per event (elsewhere in the suite such a
    # log fails the test: see tests/conftest.py).
    messages = {r.getMessage() for r in caplog.records}
    assert messages == {"on_event raised; the run goes on"}
    assert len(caplog.records) == len(result.events) and "view bug" in caplog.text
    await s.aclose()


async def test_fire_and_forget_outlives_the_run_and_is_not_reported(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            tool("wait", mode="fire_and_forget", extra='output_key="late"', seconds=0.2, value=1)
            + tool("add", mode="sync", a=1),
            "<response>done</response>",
        ]
    )
    seen: list[Any] = []
    async with session(model, tmp_path) as s:
        result = await s.run("go", on_event=seen.append)
        assert result.status == "ok"
        assert "a1" not in model.requests[1].messages[-1]["content"]
        assert "late" not in s.variables
        assert await s.drain(2)
        assert s.variables["late"] == 1
    assert any(e.type == "action_succeeded" and e.id == "a1" for e in seen)


async def test_without_async_with_the_run_waits_for_its_background_work(tmp_path: Path) -> None:
    # An unopened session has no group to outlive the run in: the run's own hosts it.
    model = ScriptedModel(
        [
            tool("wait", mode="fire_and_forget", extra='output_key="late"', seconds=0.2, value=1),
            "<response>done</response>",
        ]
    )
    s = session(model, tmp_path)
    assert not s.is_open
    result = await s.run("go")
    assert result.status == "ok"
    assert s.variables["late"] == 1


async def test_aclose_cancels_background_work(tmp_path: Path) -> None:
    model = ScriptedModel([tool("wait", mode="fire_and_forget", seconds=30)])
    seen: list[Any] = []
    with anyio.fail_after(5):
        async with session(model, tmp_path) as s:
            await s.run("go", on_event=seen.append)
            with anyio.fail_after(1):
                await s.aclose()
    assert any(e.type == "action_cancelled" and e.id == "a1" for e in seen)


async def test_unavailable_types_and_unknown_tools_are_action_errors(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            '<action type="agent" mode="async">{"name": "helper", "message": "hi"}</action>'
            + tool("nope")
            + tool("add", extra='depends_on="a1"', a=1),
            "<response>ok</response>",
        ]
    )
    s = session(model, tmp_path)
    result = await s.run("go")
    errors = [e for e in result.events if e.type == "action_error"]
    assert "no manifest defines agents" in errors[0].message
    assert "unknown tool 'nope'" in errors[1].message
    prompt = model.requests[1].messages[-1]["content"]
    assert 'id="a1" status="error"' in prompt and 'id="a3" status="skipped"' in prompt
    await s.aclose()


async def test_long_results_are_truncated_with_a_note(tmp_path: Path) -> None:
    model = ScriptedModel(
        [tool("wait", mode="sync", extra='output_key="big"', seconds=0, value="y" * 500), "end"]
    )
    s = session(model, tmp_path, limits=Limits(result_chars=100))
    await s.run("go")
    prompt = model.requests[1].messages[-1]["content"]
    assert "y" * 100 + "\n[truncated: 400 more characters" in prompt and "$big" in prompt
    assert len(s.variables["big"]) == 500
    await s.aclose()


async def test_tool_calls_are_answered_with_tool_messages(tmp_path: Path) -> None:
    calls = [ToolCall(id="call_1", name="add", arguments='{"a": 2}')]
    model = ScriptedModel(
        [
            '<action type="tool" mode="sync" id="call_1">'
            '{"name":"add","parameters":{"a":2}}</action>',
            "<response>two</response>",
        ],
        tool_calls={0: calls},
    )
    s = session(model, tmp_path, protocol="tools")
    result = await s.run("go")
    assert result.answer == "two"
    messages = model.requests[1].messages
    assert messages[-2]["tool_calls"][0]["id"] == "call_1"
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "add(a=2) returned: 2",
    }
    assert model.requests[0].tools and model.requests[0].tools[0]["function"]["name"] == "add"
    await s.aclose()


async def test_llm_action_uses_the_session_model(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            '<action type="llm" mode="sync" output_key="sub">{"prompt": "summarise"}</action>',
            "a summary",
            "<response>$sub!</response>",
        ]
    )
    s = session(model, tmp_path)
    result = await s.run("go")
    assert result.answer == "a summary!"
    assert model.requests[1].messages == [{"role": "user", "content": "summarise"}]
    await s.aclose()


async def test_internal_actions_and_permissions(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            '<action type="internal" mode="sync">{"name": "set_variable", '
            '"parameters": {"name": "k", "value": [1, 2]}}</action>',
            '<action type="internal" mode="sync">{"name": "delete_variable", '
            '"parameters": {"name": "k"}}</action>',
            "<response>done</response>",
        ]
    )
    s = session(model, tmp_path)
    s.config = s.config.replace(allowed_internal=frozenset({"set_variable"}))
    result = await s.run("go")
    assert result.variables["k"] == [1, 2]
    errors = [e for e in result.events if e.type == "action_error"]
    assert "not allowed" in errors[0].message
    await s.aclose()


async def test_non_final_response_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            '<response final="false">working…</response>' + tool("add", a=1),
            "<response>finished</response>",
        ]
    )
    s = session(model, tmp_path)
    result = await s.run("go")
    assert result.answer == "finished" and len(model.requests) == 2
    await s.aclose()


async def test_missing_dependency_is_skipped_at_end_of_turn(tmp_path: Path) -> None:
    model = ScriptedModel([tool("add", extra='depends_on="ghost"', a=1), "<response>x</response>"])
    s = session(model, tmp_path)
    result = await s.run("go")
    skipped = [e for e in result.events if e.type == "action_skipped"]
    assert "'ghost' never appeared" in skipped[0].reason
    await s.aclose()


async def test_named_variables_win_over_action_ids(tmp_path: Path) -> None:
    # An action whose id equals a variable's name must not overwrite it, and a
    # set_variable with an output_key of the same name keeps the value set.
    model = ScriptedModel(
        [
            '<action type="internal" mode="sync" id="tip">{"name": "set_variable", '
            '"parameters": {"name": "tip", "value": "use $$5 bills"}}</action>',
            '<action type="internal" mode="sync" id="x" output_key="x">{"name": "set_variable", '
            '"parameters": {"name": "x", "value": 7}}</action>',
            "<response>$tip / $x</response>",
        ]
    )
    ns: dict[str, Any] = {}
    s = session(model, tmp_path, namespace=ns)
    result = await s.run("go")
    assert result.status == "ok"
    assert ns["x"] == 7 and s.variables["x"] == 7
    assert s.variables["tip"] == ns["tip"]
    assert result.answer.endswith(" / 7")
    assert "set" not in result.answer
    await s.aclose()


async def test_context_feed_declaration_is_reported_not_dropped(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            '<context_feed id="clock" type="internal">{"source": "system_clock"}</context_feed>',
            "<response>ok</response>",
        ]
    )
    s = session(model, tmp_path)
    result = await s.run("go")
    errors = [e for e in result.events if e.type == "action_error"]
    assert errors and errors[0].id == "clock" and "not allowed" in errors[0].message
    # The model hears about it at the start of its next turn.
    assert "context feed 'clock' was not created" in model.requests[1].messages[-1]["content"]
    await s.aclose()


async def test_session_variables_is_the_live_store_and_variables_store_is_deprecated(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            tool("add", mode="sync", extra='id="t" output_key="total"', a=2, b=3),
            "<response>$total</response>",
        ]
    )
    s = session(model, tmp_path)
    variables = s.variables  # taken before the run: it is the store, not a copy
    await s.run("go")
    assert variables["total"] == 5 and "total" in variables
    assert dict(variables) == {"t": 5, "total": 5} == variables.snapshot()
    assert sorted(variables) == ["t", "total"] and len(variables) == 2
    with pytest.raises(KeyError):
        variables["missing"]
    with pytest.warns(DeprecationWarning, match="use Session.variables"):
        assert s.variables_store is variables
    await s.aclose()

"""MCP tools through a real session: a real SDK server, the replay model, the real scheduler."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from cortex_kernel.agent import build_session, mcp_hub
from cortex_kernel.exceptions import ConfigError
from cortex_kernel.executors.mcp import McpError
from cortex_kernel.runtime.run_events import ActionFailed, AnyEvent
from cortex_kernel.runtime.session import Session
from tests.test_cli import cli

from .support import SERVER, call, read_marks, stdio_entry, write_manifest

pytestmark = pytest.mark.anyio


def session_for(tmp_path: Path, servers: list[dict[str, object]], *turns: str) -> Session:
    return build_session(
        manifest=write_manifest(tmp_path, servers, *turns), transcript_dir=tmp_path
    )


async def run(session: Session, message: str = "go") -> tuple[Any, list[AnyEvent]]:
    seen: list[AnyEvent] = []
    result = await session.run(message, on_event=seen.append)
    return result, seen


def failures(events: list[AnyEvent]) -> dict[str, str]:
    return {e.id: e.error for e in events if isinstance(e, ActionFailed)}


async def wait_for_mark(marks: Path, name: str) -> list[str]:
    with anyio.fail_after(30):
        # The server is another process: its marks are files, polled.
        while not read_marks(marks, name):  # noqa: ASYNC110
            await anyio.sleep(0.05)
    return read_marks(marks, name)


async def test_tools_are_listed_with_the_server_prefix_and_schema_and_called(
    tmp_path: Path, marks: Path
) -> None:
    session = session_for(
        tmp_path,
        [stdio_entry(marks)],
        call("r", "t__add", {"a": 2, "b": 3}) + call("e", "t__echo", {"text": "hi"}),
        "<response>sum $r, echo $e</response>",
    )
    async with session:
        result, _ = await run(session)
        assert result.status == "ok", result.message
        assert result.answer == "sum 5, echo hi"
        add = session.tools.get("t__add")
        assert add.kind == "mcp" and add.description == "Add two integers."
        assert add.parameters["properties"]["a"]["type"] == "integer"
        assert add.parameters["required"] == ["a", "b"]
        listing = mcp_hub(session).describe()
        assert "t: running" in listing and "t__rendezvous" in listing


async def test_bad_parameters_fail_before_the_server_is_called(tmp_path: Path, marks: Path) -> None:
    session = session_for(
        tmp_path,
        [stdio_entry(marks)],
        call("r", "t__add", {"a": "two", "b": 3}),
        "<response>done</response>",
    )
    async with session:
        _, events = await run(session)
        assert "bad parameters for tool 't__add'" in failures(events)["r"]
        assert "'two' is not of type 'integer'" in failures(events)["r"]


async def test_calls_run_in_parallel(tmp_path: Path, marks: Path) -> None:
    # Each call returns only once all three are in flight at the server together.
    calls = "".join(call(f"c{i}", "t__rendezvous", {"n": 3, "label": f"c{i}"}) for i in range(3))
    session = session_for(
        tmp_path, [stdio_entry(marks)], calls, "<response>$c0 / $c1 / $c2</response>"
    )
    async with session:
        result, events = await run(session)
        assert not failures(events)
        assert result.answer == "c0 met 3 / c1 met 3 / c2 met 3"


async def test_a_tool_error_is_the_actions_error(tmp_path: Path, marks: Path) -> None:
    session = session_for(
        tmp_path,
        [stdio_entry(marks)],
        call("f", "t__fail", {"reason": "no way"}),
        "<response>it failed</response>",
    )
    async with session:
        result, events = await run(session)
        assert result.status == "ok"
        error = failures(events)["f"]  # the SDK server adds "Error executing tool fail: "
        assert error.startswith("tool 't__fail' reported an error: ")
        assert error.endswith("refused: no way")
        # The model reads the error at its next turn.
        assert any("refused: no way" in str(m.get("content")) for m in session.history())


async def test_a_hanging_tool_times_out_and_the_server_is_told(tmp_path: Path, marks: Path) -> None:
    session = session_for(
        tmp_path,
        [stdio_entry(marks, timeout=1)],
        call("h", "t__hang", {}),
        "<response>gave up</response>",
    )
    async with session:
        result, events = await run(session)
        assert failures(events)["h"] == "tool 't__hang' timed out after 1 s"
        assert result.answer == "gave up"
        # Had the call reached the server, the SDK's notifications/cancelled stopped it there.
        if read_marks(marks, "hang-started"):
            await wait_for_mark(marks, "hang-cancelled")


async def test_cancelling_the_run_cancels_the_call_at_the_server(
    tmp_path: Path, marks: Path
) -> None:
    session = session_for(
        tmp_path, [stdio_entry(marks)], call("h", "t__hang", {}, mode="sync"), "<response/>"
    )
    async with session:
        async with anyio.create_task_group() as group:
            group.start_soon(session.run, "go")
            await wait_for_mark(marks, "hang-started")
            group.cancel_scope.cancel()
        await wait_for_mark(marks, "hang-cancelled")
        assert session.last_result is not None and session.last_result.status == "cancelled"


async def test_a_crash_fails_the_call_restarts_once_with_a_warning_then_gives_up(
    tmp_path: Path, marks: Path
) -> None:
    session = session_for(
        tmp_path,
        [stdio_entry(marks)],
        call("x", "t__crash", {}, mode="sync"),
        "<response>crashed</response>",
        call("p", "t__pid", {}, mode="sync"),
        "<response>$p</response>",
        call("x2", "t__crash", {}, mode="sync"),
        "<response>crashed again</response>",
    )
    async with session:
        _, events = await run(session)
        error = failures(events)["x"]
        assert "MCP server 't' crashed during the call to 'crash'" in error
        assert "crashing on request" in error  # the server's stderr
        result, events = await run(session)  # a run event the view and transcript show
        notices = [e.message for e in events if e.type == "warning"]  # type: ignore[union-attr]
        assert any("MCP server 't' crashed; restarted it" in n for n in notices), notices
        assert result.transcript is not None
        assert "crashed; restarted it" in result.transcript.read_text(encoding="utf-8")
        first, second = await wait_for_mark(marks, "started")
        assert result.answer == second != first
        await run(session)
        with pytest.raises(McpError, match="MCP server 't' crashed again after its restart"):
            await run(session)
        assert "t: crashed, restarted 1×" in mcp_hub(session).describe()


async def test_closing_the_session_stops_the_server_process(tmp_path: Path, marks: Path) -> None:
    session = session_for(
        tmp_path,
        [stdio_entry(marks)],
        call("p", "t__pid", {}, mode="sync"),
        "<response>$p</response>",
    )
    before = set(asyncio.all_tasks())
    async with session:
        result, _ = await run(session)
        pid = int(result.answer)
        assert psutil.pid_exists(pid)
        assert set(asyncio.all_tasks()) - before, "the server's host runs in the session's group"
    assert set(asyncio.all_tasks()) == before  # the server's host task ended with the session
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert "t: stopped" in mcp_hub(session).describe()


async def test_a_server_that_cannot_start_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = {"name": "ghost", "command": [str(tmp_path / "no-such-server")]}
    session = session_for(tmp_path, [missing], "<response>never</response>")
    async with session:
        with pytest.raises(McpError, match=r"MCP server 'ghost' failed to start: .*no-such-server"):
            await run(session)


async def test_a_server_that_exits_at_once_quotes_its_stderr(tmp_path: Path) -> None:
    dying = {
        "name": "dies",
        "command": [sys.executable, "-c", "import sys; sys.exit('no config found')"],
    }
    session = session_for(tmp_path, [dying], "<response>never</response>")
    async with session:
        with pytest.raises(McpError, match=r"MCP server 'dies' failed to start.*no config found"):
            await run(session)


async def test_a_server_with_no_tools_is_an_error_naming_it(tmp_path: Path) -> None:
    empty = {"name": "empty", "command": [sys.executable, str(SERVER), "empty"]}
    session = session_for(tmp_path, [empty], "<response>never</response>")
    async with session:
        with pytest.raises(McpError, match="MCP server 'empty' lists no tools"):
            await run(session)


async def test_confirm_per_tool_and_per_server(tmp_path: Path, marks: Path) -> None:
    session = session_for(
        tmp_path,
        [stdio_entry(marks, confirm=["add"]), stdio_entry(marks, name="all", confirm=True)],
        call("a", "t__add", {"a": 1, "b": 1}) + call("e", "t__echo", {"text": "free"}),
        "<response>$e</response>",
    )
    async with session:
        result, events = await run(session)
        assert "needs a human's approval" in failures(events)["a"]
        assert result.answer == "free"
        assert session.tools.get("all__echo").confirm and session.tools.get("all__pid").confirm
        assert not session.tools.get("t__echo").confirm


async def test_streamable_http_server(tmp_path: Path, marks: Path, http_url: str) -> None:
    session = session_for(
        tmp_path,
        [{"name": "web", "url": http_url}],
        call("r", "web__add", {"a": 20, "b": 22}) + call("f", "web__fail", {"reason": "over http"}),
        "<response>$r</response>",
    )
    async with session:
        result, events = await run(session)
        assert result.answer == "42"
        assert failures(events)["f"].endswith("refused: over http")


def test_a_manifest_entry_needs_a_command_or_a_url(tmp_path: Path) -> None:
    both = {"name": "x", "command": ["a"], "url": "http://127.0.0.1:1/mcp"}
    with pytest.raises(ConfigError, match=r"exactly one of 'command'.*or 'url'"):
        build_session(manifest=write_manifest(tmp_path, [both], "<response/>"))


def test_a_headless_run_uses_the_server_and_leaves_no_process(tmp_path: Path, marks: Path) -> None:
    agent = write_manifest(
        tmp_path,
        [stdio_entry(marks)],
        call("p", "t__pid", {}, mode="sync"),
        "<response>$p</response>",
    )
    result = cli("run", "your pid?", "--manifest", str(agent))
    assert result.returncode == 0, result.stderr
    pid = int(json.loads(result.stdout.splitlines()[-1])["answer"])
    assert read_marks(marks, "started") == [str(pid)]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

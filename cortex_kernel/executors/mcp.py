"""Tools from MCP servers, through the official ``mcp`` SDK.

Each declared server is an :class:`McpServer`. It starts on first use (the
first run that needs its tools), lives as long as the session and stops with
it. The SDK's client is an anyio context manager that must be entered and
left in one task, so each server has one long-lived *host* task in the
session's background task group: it holds the connection, lists the tools and
runs every call as a child task of its own. Runs talk to it through a memory
stream of :class:`_Call` objects and an event per call; a caller that is
cancelled (an interrupt, a stopped run) or times out cancels its call's scope
in the host, and the SDK sends the server a ``notifications/cancelled``.

A server whose connection ends (its process died, its HTTP endpoint stopped
answering) is restarted once, with a warning; calls in flight at the crash
fail with an error naming the server. A second crash leaves it ``crashed``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..exceptions import McpError, ToolError
from ..runtime.tools import Tool
from .child_env import child_environment

__all__ = ["McpError", "McpServerConfig"]

State = Literal["not started", "starting", "running", "restarting", "crashed", "failed", "stopped"]

#: How many times a crashed server is started again.
MAX_RESTARTS = 1


@dataclass
class McpServerConfig:
    """What starts one server: a command (stdio) or a URL (streamable HTTP).

    Attributes
    ----------
    name
        Prefix of its tools' names (``NAME__tool``).
    command
        ``[program, *args]`` for a stdio server.
    url
        ``http(s)://…`` of a streamable HTTP endpoint.
    env, pass_env
        A stdio server's environment: values set, and names (or ``PREFIX*``)
        of ours passed on; besides them it gets PATH, HOME, LANG… only.
    confirm
        ``True``: every tool needs a human's approval; a list: those tools do.
    timeout
        Seconds per call (``None``: no limit).
    startup_timeout
        Seconds to connect and list the tools.
    """

    name: str
    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    pass_env: list[str] = field(default_factory=list)
    cwd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    confirm: bool | list[str] = False
    timeout: float | None = 60.0
    startup_timeout: float = 30.0
    source: str = "%mcp"

    @property
    def target(self) -> str:
        """The command line or the URL, as ``%mcp`` shows it."""
        return " ".join(self.command) if self.command else str(self.url)


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: ``server__tool``, only ``[A-Za-z0-9_-]``, at most 64 characters."""
    raw = f"{server}__{tool}"
    clean = "".join(c if (c.isalnum() and c.isascii()) or c in "_-" else "_" for c in raw)
    return clean[:64]


@dataclass
class _Call:
    """One ``tools/call`` (or ``resources/read`` of ``uri``) handed to the host task."""

    tool: str
    arguments: dict[str, Any]
    uri: str | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None
    scope: anyio.CancelScope | None = None
    abandoned: bool = False

    @property
    def described(self) -> str:
        """What the call is, for an error message."""
        if self.uri is not None:
            return f"the read of resource '{self.uri}'"
        return f"the call to '{self.tool}'"

    def cancel(self) -> None:
        self.abandoned = True
        if self.scope is not None:
            self.scope.cancel()


class McpServer:
    """One MCP server of a session: its host task, state, tools and calls.

    Parameters
    ----------
    config
        How to start it.
    base
        Folder a relative ``cwd`` is taken from.
    """

    def __init__(self, config: McpServerConfig, base: Path | None = None) -> None:
        self.config = config
        self.base = base if base is not None else Path.cwd()
        self.state: State = "not started"
        self.tools: list[Any] = []  # mcp_types.Tool
        self.error: str | None = None
        self.restarts = 0
        #: Said once to the user at the next run (a crash and restart).
        self.warnings: list[str] = []
        self._send: MemoryObjectSendStream[_Call] | None = None
        self._receive: MemoryObjectReceiveStream[_Call] | None = None
        self._ready: anyio.Event | None = None
        self._stop = anyio.Event()
        self._finished: anyio.Event | None = None
        self._errlog: TextIO | None = None
        self._errlog_start = 0  # where the current connection's stderr begins

    @property
    def running(self) -> bool:
        """Whether the server is connected and its tools are listed."""
        return self.state == "running"

    @property
    def name(self) -> str:
        """The server's name."""
        return self.config.name

    # ------------------------------------------------------------ lifecycle

    async def ensure_started(self, group: TaskGroup) -> None:
        """Start the server in ``group`` unless it runs; wait until its tools are listed.

        Raises
        ------
        McpError
            It failed to start, listed no tools, or crashed after its restart.
        """
        if self.state == "running":
            return
        if self.state == "crashed":
            raise McpError(self.error or f"MCP server '{self.name}' crashed")
        if self.state not in ("starting", "restarting"):
            self._ready = anyio.Event()
            self._finished = anyio.Event()
            self._stop = anyio.Event()
            self.state, self.error = "starting", None
            self._send, self._receive = anyio.create_memory_object_stream[_Call](math.inf)
            group.start_soon(self._host, name=f"mcp server {self.name}")
        assert self._ready is not None
        await self._ready.wait()
        if not self.running:  # (the host task changed the state meanwhile)
            raise McpError(self.error or f"MCP server '{self.name}' did not start")

    def stop(self) -> None:
        """Ask the host task to stop the server; it goes on in the background."""
        self._stop.set()

    async def aclose(self) -> None:
        """Stop the server (its process and children) and wait until it is gone."""
        self._stop.set()
        if self._finished is not None and self.state != "not started":
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await self._finished.wait()
        if self.state not in ("failed", "crashed"):
            self.state = "stopped"

    async def _host(self) -> None:
        assert self._ready is not None and self._finished is not None
        try:
            while await self._connection() and self.state == "restarting":
                pass  # lost: _lose() chose a restart (or gave up: state crashed)
        finally:
            if self.state in ("starting", "running", "restarting"):
                self.state = "stopped"
            self._ready.set()
            self._fail_pending()
            self._finished.set()
            if self._errlog is not None:
                self._errlog.close()
                self._errlog = None

    def _lose(self, lost: anyio.Event) -> None:
        """The connection ended under us: restart once (with a warning), then give up."""
        if lost.is_set():
            return
        lost.set()
        if self._stop.is_set() or self.state != "running":
            return
        if self.restarts >= MAX_RESTARTS:
            self.state = "crashed"
            self.error = (
                f"MCP server '{self.name}' crashed again after its restart; not restarting it. "
                f"`%mcp restart {self.name}` starts it again"
            )
            return
        self.restarts += 1
        self.state = "restarting"
        self._ready = anyio.Event()
        self.warnings.append(
            f"MCP server '{self.name}' crashed; restarted it (restart {self.restarts} of "
            f"{MAX_RESTARTS})"
        )

    async def _connection(self) -> bool:
        """One connection, from start to its end; ``True`` when it was lost (a crash)."""
        from mcp import Client

        assert self._ready is not None and self._receive is not None
        lost = anyio.Event()
        started = False
        deadline = anyio.current_time() + self.config.startup_timeout
        try:
            with anyio.CancelScope(deadline=deadline) as startup:
                async with Client(self._transport(lost), cache=None) as client:
                    tools = await _list_tools(client)
                    if not tools:
                        raise McpError(f"MCP server '{self.name}' lists no tools")
                    startup.deadline = math.inf
                    started = True
                    self.tools = tools
                    self.state = "running"
                    self._ready.set()
                    async with anyio.create_task_group() as calls:
                        calls.start_soon(self._serve, client, calls, lost)
                        await _first(lost.wait, self._stop.wait)
                        calls.cancel_scope.cancel()
            if not started:
                self._fail(f"did not start within {self.config.startup_timeout:g} s")
                return False
        except McpError as exc:
            self._fail(str(exc), prefixed=True)
            return False
        except Exception as exc:
            if not started:
                self._fail(_describe(exc))
                return False
            self._lose(lost)
            return not self._stop.is_set()
        return lost.is_set() and not self._stop.is_set()

    def _fail(self, reason: str, *, prefixed: bool = False) -> None:
        tail = self._stderr_tail()
        message = reason if prefixed else f"MCP server '{self.name}' failed to start: {reason}"
        if tail != "no output on stderr":
            message += f" ({tail})"
        self.state, self.error = "failed", f"{message}; it runs {self.config.target}"
        assert self._ready is not None
        self._ready.set()

    @asynccontextmanager
    async def _transport(self, lost: anyio.Event) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK transport, with its read stream watched: its end means the server is gone."""
        async with self._open() as (read, write):
            relay_send, relay_receive = anyio.create_memory_object_stream[Any](0)

            async def relay() -> None:
                async with relay_send:
                    try:
                        async for message in read:
                            await relay_send.send(message)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        pass
                self._lose(lost)

            async with anyio.create_task_group() as group:
                group.start_soon(relay)
                try:
                    yield relay_receive, write
                finally:
                    group.cancel_scope.cancel()

    def _open(self) -> Any:
        config = self.config
        if config.command:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            if self._errlog is None:
                # The server's stderr, for the tail an error message quotes; closed by the host.
                self._errlog = tempfile.TemporaryFile(  # noqa: SIM115
                    "w+", encoding="utf-8", errors="replace"
                )
            self._errlog.seek(0, os.SEEK_END)
            self._errlog_start = self._errlog.tell()
            cwd = str((self.base / config.cwd).resolve()) if config.cwd else None
            params = StdioServerParameters(
                command=config.command[0],
                args=config.command[1:],
                env=child_environment(config.pass_env, config.env),
                cwd=cwd,
            )
            return stdio_client(params, errlog=self._errlog)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers=config.headers or None)
        return streamable_http_client(str(config.url), http_client=http)

    def _stderr_tail(self) -> str:
        if self._errlog is None:
            return "no output on stderr"
        try:
            self._errlog.flush()
            self._errlog.seek(self._errlog_start)
            lines = [line.rstrip() for line in self._errlog.read().splitlines() if line.strip()]
            self._errlog.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return "no output on stderr"
        return "stderr: " + " | ".join(lines[-3:])[-400:] if lines else "no output on stderr"

    def _fail_pending(self) -> None:
        if self._receive is None:
            return
        while True:
            try:
                call = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
            call.error = McpError(self.error or f"MCP server '{self.name}' is not running")
            call.done.set()

    # ------------------------------------------------------------------ calls

    async def _serve(self, client: Any, group: TaskGroup, lost: anyio.Event) -> None:
        assert self._receive is not None
        async for call in self._receive:
            if not call.abandoned:
                group.start_soon(self._run_call, client, call, lost)

    async def _run_call(self, client: Any, call: _Call, lost: anyio.Event) -> None:
        with anyio.CancelScope() as scope:
            call.scope = scope
            try:
                if call.uri is not None:
                    call.result = await client.read_resource(call.uri)
                else:
                    call.result = await client.call_tool(call.tool, call.arguments)
            except Exception as exc:
                call.error = exc
                if _connection_failed(exc):
                    self._lose(lost)  # an HTTP endpoint gone: reconnect like a crashed process
        gone = scope.cancelled_caught and call.error is None and call.result is None
        if gone or (call.error is not None and _connection_failed(call.error)):
            with anyio.move_on_after(1):
                await lost.wait()  # the process's exit reaches stderr and the relay
            what = "stopped" if self._stop.is_set() else "crashed"
            call.error = McpError(
                f"MCP server '{self.name}' {what} during {call.described} ({self._stderr_tail()})"
            )
        call.done.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call ``tool`` and return its result (text, JSON data, or a list of parts).

        Raises
        ------
        ToolError
            The tool reported an error, the call timed out, or the server is gone.
        """
        shown = tool_name(self.name, tool)
        call = await self._submit(_Call(tool, arguments), f"tool '{shown}'")
        return _result(shown, call.result)

    async def read(self, uri: str) -> str:
        """Read resource ``uri``: its text parts joined (``[binary …]`` for blobs).

        Raises
        ------
        ToolError
            The server reported an error, the read timed out, or the server is gone.
        """
        call = await self._submit(_Call("", {}, uri=uri), f"resource '{uri}' of '{self.name}'")
        parts = [
            getattr(item, "text", None) or f"[binary {getattr(item, 'mimeType', None) or ''}]"
            for item in call.result.contents
        ]
        return "\n".join(parts)

    async def _submit(self, call: _Call, shown: str) -> _Call:
        if self._send is None or self.state not in ("running", "restarting"):
            raise ToolError(self.error or f"MCP server '{self.name}' is not running")
        if self.state == "restarting" and self._ready is not None:
            with anyio.move_on_after(self.config.startup_timeout):
                await self._ready.wait()  # the restart's start does not count as the call's time
        timeout = self.config.timeout
        try:
            with anyio.fail_after(timeout if timeout is not None else math.inf):
                await self._send.send(call)
                await call.done.wait()
        except TimeoutError:
            call.cancel()
            raise ToolError(f"{shown} timed out after {timeout:g} s") from None
        except BaseException:
            call.cancel()  # interrupted: the SDK tells the server to stop
            raise
        if call.error is not None:
            if isinstance(call.error, ToolError):
                raise call.error
            raise ToolError(f"{shown} failed: {_describe(call.error)}") from None
        return call

    # ---------------------------------------------------------------- tools

    def registry_tools(self) -> list[Tool]:
        """The server's tools as :class:`Tool` objects named ``server__tool``."""
        confirm = self.config.confirm
        made = []
        for listed in self.tools:
            original = str(listed.name)
            schema = dict(listed.input_schema or {"type": "object"})
            schema.setdefault("type", "object")
            made.append(
                Tool(
                    tool_name(self.name, original),
                    listed.description or f"tool '{original}' of MCP server '{self.name}'",
                    _caller(self, original),
                    schema,
                    None,
                    kind="mcp",
                    source=f"{self.config.source} mcp server '{self.name}'",
                    confirm=confirm is True or (isinstance(confirm, list) and original in confirm),
                    timeout=self.config.timeout,
                    labels={"mcp_server": self.name, "mcp_tool": original},
                )
            )
        return made


def _caller(server: McpServer, tool: str) -> Callable[..., Any]:
    async def call(**arguments: Any) -> Any:
        return await server.call(tool, arguments)

    return call


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def _first(*waits: Callable[[], Any]) -> None:
    """Return when the first of ``waits`` returns."""
    async with anyio.create_task_group() as group:

        async def one(wait: Callable[[], Any]) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(one, wait)


def _connection_failed(exc: BaseException) -> bool:
    """The connection, not the tool, failed: closed streams, a refused or broken HTTP request."""
    from mcp_types import CONNECTION_CLOSED

    if getattr(exc, "code", None) == CONNECTION_CLOSED and type(exc).__name__ == "MCPError":
        return True
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError)):
        return True
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc).strip()
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or text}"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _part(block: Any) -> Any:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {len(block.data)} base64 characters]"
    if kind == "resource":
        return getattr(block.resource, "text", None) or f"[resource {block.resource.uri}]"
    if kind == "resource_link":
        return f"[resource link {block.uri}]"
    return repr(block)


def _result(name: str, result: Any) -> Any:
    parts = [_part(block) for block in result.content]
    if result.is_error:
        text = "\n".join(str(p) for p in parts).strip() or "no message"
        raise ToolError(f"tool '{name}' reported an error: {text}")
    structured = result.structured_content
    if isinstance(structured, dict) and list(structured) == ["result"]:
        return structured["result"]  # the SDK's wrapper around a plain return value
    if structured is not None:
        return structured
    if len(parts) == 1:
        return _maybe_json(parts[0])
    return parts


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value

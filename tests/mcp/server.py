"""A real MCP server written with the SDK, for the tests (stdio or streamable HTTP).

``python server.py stdio [MARKS]``, ``python server.py http PORT [MARKS]`` or
``python server.py empty`` (a stdio server with no tools). Markers go to the
folder MARKS (or ``$MCP_TEST_DIR``) so a test can see what happened on the
server side: a cancelled call, how often it started.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("cortex-test")
_args = sys.argv[1:]
_rest = _args[2:] if _args[:1] == ["http"] else _args[1:]
MARKS = Path(_rest[0] if _rest else os.environ.get("MCP_TEST_DIR", "."))
_arrived: list[str] = []
_all_here = anyio.Event()


def _mark(name: str, text: str = "yes") -> None:
    with (MARKS / name).open("a", encoding="utf-8") as out:
        out.write(text + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def wait(seconds: float, label: str) -> str:
    """Sleep, then return the label (for parallel calls)."""
    _mark("wait-started", label)
    await anyio.sleep(seconds)
    return label


@server.tool()
async def rendezvous(n: int, label: str) -> str:
    """Return once n calls are in flight together (only parallel calls ever return)."""
    _arrived.append(label)
    if len(_arrived) >= n:
        _all_here.set()
    with anyio.move_on_after(30):
        await _all_here.wait()
    if len(_arrived) < n:
        raise ToolError(f"only {len(_arrived)} of {n} calls arrived together")
    return f"{label} met {len(_arrived)}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(f"refused: {reason}")


@server.tool()
async def hang() -> str:
    """Never returns; records its cancellation."""
    _mark("hang-started")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        _mark("hang-cancelled")
        raise
    return "never"


@server.tool()
def crash() -> str:
    """Kill this server's process."""
    print("crashing on request", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def environ(names: list[str]) -> dict[str, str | None]:
    """The server's values of these environment variables (null: not set)."""
    return {name: os.environ.get(name) for name in names}


@server.resource("notes://today", description="A short note.")
def today() -> str:
    """The note a context feed reads."""
    return "note of the day: ship it"


@server.resource("notes://broken")
def broken() -> str:
    """A resource whose read fails."""
    raise ValueError("the note is unreadable")


@server.resource("notes://crash")
def crashing_note() -> str:
    """Kill this server's process while a resource is read."""
    print("crashing on a read", file=sys.stderr, flush=True)
    os._exit(3)


if __name__ == "__main__":
    if _args[:1] == ["empty"]:
        MCPServer("no-tools").run("stdio")
    elif _args[:1] == ["http"]:
        _mark("started", str(os.getpid()))
        server.run("streamable-http", host="127.0.0.1", port=int(_args[1]))
    else:
        _mark("started", str(os.getpid()))
        server.run("stdio")

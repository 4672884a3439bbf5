"""MCP servers in the real kernel (jupyter_client): %mcp, calls, an interrupt, shutdown."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.mcp.support import SERVER, call, read_marks
from tests.replays import write_turns

from .conftest import Kernel, alive, dump

pytestmark = pytest.mark.kernel


def replay(tmp_path: Path, name: str, *turns: str) -> Path:
    return write_turns(tmp_path / f"{name}.jsonl", *turns)


def wait_for(marks: Path, name: str, seconds: float = 30) -> list[str]:
    deadline = time.monotonic() + seconds
    while not read_marks(marks, name):
        assert time.monotonic() < deadline, f"the server never wrote {name!r}"
        time.sleep(0.05)
    return read_marks(marks, name)


def wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def start(cortex_kernelspec: str, tmp_path: Path) -> tuple[Kernel, Path, int]:
    """A kernel with the stdio test server added and started by one agent cell."""
    marks = tmp_path / "marks"
    marks.mkdir()
    kernel = Kernel(cortex_kernelspec, dict(os.environ))
    added = kernel.python(f"%mcp add t -- {sys.executable} {SERVER} stdio {marks}")
    assert "MCP server 't' added" in added
    assert "t: not started" in kernel.python("%mcp")
    pid_turns = replay(
        tmp_path, "pid", call("p", "t__pid", {}, mode="sync"), "<response>$p</response>"
    )
    result = kernel.run(f"%%agent --model replay:{pid_turns}\nwhat is your pid?")
    assert result.status == "ok", dump(result)
    pid = int(kernel.python("%%python\nprint(_response)").strip())
    assert alive(pid)
    return kernel, marks, pid


def test_mcp_tools_in_the_kernel_an_interrupt_cancels_the_call_and_shutdown_stops_the_server(
    cortex_kernelspec: str, tmp_path: Path
) -> None:
    kernel, marks, pid = start(cortex_kernelspec, tmp_path)
    try:
        listing = kernel.python("%mcp")
        assert "t: running" in listing and "t__hang — Never returns" in listing
        hang = replay(tmp_path, "hang", call("h", "t__hang", {}, mode="sync"), "<response/>")
        msg_id = kernel.send(f"%%agent --model replay:{hang}\nhang")
        wait_for(marks, "hang-started")
        kernel.km.interrupt_kernel()
        result = kernel.collect(msg_id, timeout=30)
        assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
        # The in-flight call was cancelled at the server, which lives on with the session.
        wait_for(marks, "hang-cancelled")
        assert kernel.python("%%python\nprint('alive')").strip() == "alive"
        assert alive(pid) and "t: running" in kernel.python("%mcp")
    finally:
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=False)  # a shutdown_request, as a front end sends
    assert wait_gone(pid), "the MCP server outlived the kernel"


def test_a_killed_kernel_leaves_no_server_behind(cortex_kernelspec: str, tmp_path: Path) -> None:
    kernel, _, pid = start(cortex_kernelspec, tmp_path)
    kernel.shutdown()  # SIGKILL: no shutdown_request; the server reads EOF and exits
    assert wait_gone(pid), "the MCP server outlived the killed kernel"


def test_mcp_magic_errors_are_one_line(cortex_kernelspec: str, tmp_path: Path) -> None:
    kernel = Kernel(cortex_kernelspec, dict(os.environ))
    try:
        assert "usage: %mcp" in kernel.python("%mcp add")
        result = kernel.run("%mcp add 9bad -- true")
        assert result.reply["content"]["ename"] == "ConfigError", dump(result)
        assert "bad MCP server name" in result.reply["content"]["evalue"]
        kernel.python(f"%mcp add ghost -- {tmp_path / 'missing'}")
        turns = replay(tmp_path, "never", "<response>never</response>")
        result = kernel.run(f"%%agent --model replay:{turns}\nhello")
        assert result.reply["content"]["ename"] == "McpError", dump(result)
        assert "MCP server 'ghost' failed to start" in result.reply["content"]["evalue"]
        assert "ghost: failed" in kernel.python("%mcp")
        assert "removed" in kernel.python("%mcp remove ghost")
        assert "no MCP servers" in kernel.python("%mcp")
    finally:
        kernel.shutdown()

"""Fixtures of the MCP tests: a real SDK server (stdio or HTTP on 127.0.0.1), manifests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import SERVER


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """Where the test server writes what happened on its side."""
    folder = tmp_path / "marks"
    folder.mkdir()
    return folder


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def http_url(marks: Path) -> Iterator[str]:
    """A streamable HTTP MCP server on 127.0.0.1, started by the test."""
    port = _free_port()
    env = {**os.environ, "MCP_TEST_DIR": str(marks)}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP MCP test server did not come up") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)

"""The owner of a session holds its task group: nothing it started outlives it.

Checked on the asyncio backend (the kernel's and ``cortex-kernel run``'s)
by comparing ``asyncio.all_tasks()`` before and after.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.runtime.session import Session
from cortex_kernel.runtime.tools import ToolRegistry

from .fakes import ScriptedModel

pytestmark = pytest.mark.anyio


def make(tmp_path: Path, *turns: str) -> Session:
    registry = ToolRegistry()

    @registry.register
    async def wait(seconds: float) -> str:
        """Sleep."""
        await anyio.sleep(seconds)
        return "woke"

    return build_session(ScriptedModel(list(turns)), tools=registry, transcript_dir=tmp_path)


def background_wait(seconds: float) -> str:
    body = json.dumps({"name": "wait", "parameters": {"seconds": seconds}})
    return f'<action type="tool" mode="fire_and_forget">{body}</action>'


def tasks() -> set[asyncio.Task[Any]]:
    return set(asyncio.all_tasks())


async def test_a_closed_session_leaves_no_task_behind(tmp_path: Path) -> None:
    before = tasks()
    session = make(tmp_path, background_wait(30), "<response>started</response>")
    seen: list[Any] = []
    async with session:
        result = await session.run("go", on_event=seen.append)
        assert result.status == "ok"
        assert tasks() - before, "the background action runs in the session's group"
    assert tasks() == before
    assert any(e.type == "action_cancelled" for e in seen)
    assert not session.is_open


async def test_a_run_without_async_with_starts_no_task_of_its_own(tmp_path: Path) -> None:
    # Before the owner held the group, a run started a host task on the loop
    # that nobody awaited unless aclose() was called.
    before = tasks()
    session = make(tmp_path, "<response>hi</response>")
    result = await session.run("go")
    assert result.status == "ok"
    assert tasks() == before


async def test_services_end_with_the_session_last_in_first_out(tmp_path: Path) -> None:
    from contextlib import asynccontextmanager

    order: list[str] = []

    @asynccontextmanager
    async def service(name: str) -> Any:
        order.append(f"open {name}")
        try:
            yield name
        finally:
            order.append(f"close {name}")

    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            order.append("long-lived task cancelled")

    before = tasks()
    session = make(tmp_path)
    with pytest.raises(RuntimeError, match="not open"):
        _ = session.background
    async with session:
        assert await session.enter_async_context(service("a")) == "a"
        await session.enter_async_context(service("b"))
        session.background.start_soon(forever)
        await anyio.lowlevel.checkpoint()
        with pytest.raises(RuntimeError, match="open already"):
            await session.__aenter__()
    assert order == ["open a", "open b", "close b", "close a", "long-lived task cancelled"]
    assert tasks() == before


async def test_leaving_the_block_by_an_error_still_closes_everything(tmp_path: Path) -> None:
    before = tasks()
    session = make(tmp_path, background_wait(30), "<response>started</response>")
    with pytest.raises(KeyError):
        async with session:
            await session.run("go")
            raise KeyError("the owner failed")
    assert tasks() == before

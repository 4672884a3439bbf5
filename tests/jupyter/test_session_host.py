"""The kernel's SessionHost holds sessions open for the loop's lifetime, and closes them all."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.jupyter.runner import SessionHost
from tests.runtime.fakes import ScriptedModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_sessions_are_held_open_released_one_by_one_and_closed_at_shutdown(
    tmp_path: Path,
) -> None:
    before = set(asyncio.all_tasks())
    host = SessionHost()
    one, two = (build_session(ScriptedModel([]), transcript_dir=tmp_path) for _ in range(2))
    await host.open(one)
    await host.open(one)  # held already: nothing new
    await host.open(two)
    assert one.is_open and two.is_open and host.holds(one)
    host.release(one)  # a new manifest replaced it: closed in the background
    for _ in range(100):
        if not one.is_open:
            break
        await asyncio.sleep(0.01)
    assert not one.is_open and two.is_open and not host.holds(one)
    await host.aclose()  # the kernel's shutdown
    assert not two.is_open
    assert set(asyncio.all_tasks()) == before

"""Replay model files for the tests: the model's turns, one JSON record a line."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cortex_kernel.agent import build_session
from cortex_kernel.runtime.limits import Limits
from cortex_kernel.runtime.run_result import RunResult


def write_turns(path: Path, *turns: str) -> Path:
    """Write ``turns`` (the model's text, in order) as the replay file ``path``; return it."""
    path.write_text("".join(json.dumps({"content": t}) + "\n" for t in turns), encoding="utf-8")
    return path


async def replay_run(
    tmp_path: Path,
    turns: Sequence[str],
    message: str,
    tools: Sequence[Callable[..., Any]],
    limits: Limits | None = None,
) -> tuple[RunResult, list[dict[str, Any]]]:
    """One run of a session whose model replays ``turns``, with ``tools``; its result and history.

    Through the kernel's composition (``agent.build_session``): the real
    parser, scheduler, tool executor and grounding check.
    """
    path = write_turns(tmp_path / "turns.jsonl", *turns)
    session = build_session(
        model=f"replay:{path}", namespace={}, transcript_dir=tmp_path, limits=limits
    )
    for function in tools:
        session.tools.register(function, name=function.__name__)
    try:
        result = await session.run(message)
        history: list[dict[str, Any]] = list(session.history())
    finally:
        await session.aclose()
    return result, history

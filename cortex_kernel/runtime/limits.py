"""Run limits (SPEC §3, §8): every one ends a run with status ``limit`` and a clear message."""

from __future__ import annotations

from pydantic import BaseModel, Field

from .run_events import Usage

__all__ = ["Limits", "usage_limit_message"]


class Limits(BaseModel):
    """What one run may consume.

    Attributes
    ----------
    max_turns
        Streamed completions per run.
    max_actions
        Actions submitted per run.
    max_parallel
        Actions running at once.
    wall_time
        Seconds for the whole run.
    max_tokens, max_cost
        Prompt plus completion tokens, and dollars, per run (``None``: no limit).
    max_depth
        Nesting of agent runs.
    result_chars
        Characters of one result shown to the model; the rest stays in its variable.
    """

    max_turns: int = Field(default=20, ge=1)
    max_actions: int = Field(default=200, ge=0)
    max_parallel: int = Field(default=16, ge=1)
    wall_time: float = Field(default=600.0, gt=0)
    max_tokens: int | None = None
    max_cost: float | None = None
    max_depth: int = 3
    result_chars: int = Field(default=4000, ge=1)


def usage_limit_message(limits: Limits, usage: Usage) -> str | None:
    """The message for a token or cost limit that ``usage`` has reached, or ``None``."""
    if limits.max_tokens is not None and usage.tokens >= limits.max_tokens:
        return (
            f"token limit reached: {usage.tokens} tokens used, max_tokens={limits.max_tokens}; "
            "raise the limit or shorten the task"
        )
    if limits.max_cost is not None and usage.cost is not None and usage.cost >= limits.max_cost:
        return (
            f"cost limit reached: ${usage.cost:.4f} spent, max_cost=${limits.max_cost:.4f}; "
            "raise the limit or shorten the task"
        )
    return None

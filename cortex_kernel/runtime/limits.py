"""Run limits (SPEC §3, §8): every one ends a run with status ``limit`` and a clear message."""

from __future__ import annotations

from pydantic import BaseModel, Field

from .run_events import Usage

__all__ = ["DEFAULT_RESULT_TOKENS", "Limits", "result_budget_chars", "usage_limit_message"]


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
    result_tokens
        Tokens of all the results that open one turn together (``None``: a
        quarter of the model's context window, or 8,000 when it is unknown).
    action_timeout
        Seconds one attempt of an action may take when it names no ``timeout``
        (``None``: no default limit).
    """

    max_turns: int = Field(default=20, ge=1)
    max_actions: int = Field(default=200, ge=0)
    max_parallel: int = Field(default=16, ge=1)
    wall_time: float = Field(default=600.0, gt=0)
    max_tokens: int | None = None
    max_cost: float | None = None
    max_depth: int = 3
    result_chars: int = Field(default=4000, ge=1)
    result_tokens: int | None = Field(default=None, ge=100)
    action_timeout: float | None = Field(default=300.0, gt=0)


#: Result budget per turn when the model's context window is unknown.
DEFAULT_RESULT_TOKENS = 8000


def result_budget_chars(limits: Limits, context_window: int | None) -> int:
    """Characters the results opening one turn may take (about 4 a token)."""
    tokens = limits.result_tokens
    if tokens is None:
        tokens = max(1000, context_window // 4) if context_window else DEFAULT_RESULT_TOKENS
    return tokens * 4


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

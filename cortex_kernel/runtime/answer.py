"""The final answer's ``$var``s: filled in, or shown as a marked placeholder.

A reference in the answer whose action failed, was skipped or never ran
cannot be filled. Left as ``$name`` it reads like a price, or like LaTeX to
a notebook's math renderer; so it becomes ``⟨name: failed⟩`` and the run's
status says the answer is incomplete (docs/runtime.md#events, ``run_finished``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .references import interpolate_text

__all__ = ["Placeholder", "fill_answer"]


class Placeholder:
    """What an unresolved reference shows: ``⟨name: reason⟩``.

    A path after the name (``$rows[0].city``) leads to the same placeholder.
    """

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def __str__(self) -> str:
        return f"⟨{self.name}: {self.reason}⟩"

    def __getattr__(self, _name: str) -> Placeholder:
        return self

    def __getitem__(self, _key: Any) -> Placeholder:
        return self


def fill_answer(
    text: str, lookup: Callable[[str], Any], why: Callable[[str], str]
) -> tuple[str, list[str]]:
    """Fill the references of ``text``; return it and the unresolved ones.

    Parameters
    ----------
    text
        The final response as the model wrote it.
    lookup
        A variable's value by name; raises ``KeyError`` when nothing has it.
    why
        Why ``name`` has no value (``failed``, ``skipped``, ``never set``…).

    Returns
    -------
    tuple[str, list[str]]
        The answer, and ``"$name (reason)"`` for each reference left as a placeholder.
    """
    missing: list[str] = []

    def lenient(name: str) -> Any:
        try:
            return lookup(name)
        except KeyError:
            reason = why(name)
            missing.append(f"${name} ({reason})")
            return Placeholder(name, reason)

    return interpolate_text(text, lenient), missing

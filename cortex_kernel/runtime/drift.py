"""What the loop does when a real model drifts from the protocol (issue 9 §3, SPEC §3, §7).

Small models retry a failed action under the same id, repeat the same
failing action turn after turn, or end a run with no final response at all.
The rules, each applied by :mod:`cortex_kernel.runtime.loop`:

- **Id reuse** (rule 5): an id whose action was rejected, failed, skipped or
  cancelled may be written again; the new action is a new attempt under
  that id (the scheduler replaces the node, with a warning). Reusing the id
  of a running or succeeded action stays an error, and
  :func:`duplicate_id_message` says which variable holds (or will hold) its
  result, so the model can use it instead of asking again.
- **No empty "ok"** (rule 6): a run that would end with no final response
  and no outside text gets one short repair turn (:func:`repair_message`);
  if that brings nothing either, the run ends with status ``no_answer`` and
  the last thought as a marked, provisional answer (:func:`provisional_answer`).
- **Stuck** (rule 7): the same failing action — same type and same body — a
  third time in one run ends it with status ``stuck`` (:class:`RepeatedFailures`).
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.models import Action

__all__ = [
    "REPEAT_LIMIT",
    "RETRYABLE_STATES",
    "RepeatedFailures",
    "duplicate_id_message",
    "provisional_answer",
    "repair_message",
]

#: How many times the same failing action may be written before the run is stuck.
REPEAT_LIMIT = 3

#: Node states whose id a new action may take over (as a new attempt).
RETRYABLE_STATES = frozenset({"rejected", "failed", "skipped", "cancelled"})

_PROVISIONAL = (
    "**Provisional answer** (the model gave no final response; this is its last thought):"
)


def repair_message(protocol: str) -> str:
    """The user message of the repair turn: ask for the final answer, briefly."""
    if protocol == "tools":
        return "You have not answered yet. Answer the user now, in plain text."
    return (
        "You have not given a final answer yet. Write it now, inside "
        "<response>...</response>, using the results above."
    )


def provisional_answer(last_thought: str) -> str:
    """The answer of a ``no_answer`` run: the last thought, marked as provisional."""
    thought = last_thought.strip()
    if not thought:
        return ""
    return f"{_PROVISIONAL}\n\n{thought}"


def duplicate_id_message(action_id: str, state: str, variable: str) -> str:
    """The error for reusing the id of a running or succeeded action."""
    if state == "succeeded":
        where = f"it already succeeded and its result is in ${variable}"
    else:
        where = f"it is still {state}; its result will be in ${variable}"
    return (
        f"duplicate id '{action_id}': {where}. Use ${variable} instead of running it "
        "again, or give a new action a new id"
    )


def _signature(kind: str, body: Any) -> str:
    try:
        return kind + ":" + json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return f"{kind}:{body!r}"


class RepeatedFailures:
    """Counts failing actions by type and body over one run.

    Ids, modes and output keys do not count: a model that retries the same
    call under a new id is repeating itself all the same.
    """

    def __init__(self, limit: int = REPEAT_LIMIT) -> None:
        self.limit = limit
        self._counts: dict[str, int] = {}

    def failed_action(self, action: Action, error: str) -> str | None:
        """Record a failed or rejected action; the ``stuck`` message at the limit."""
        return self._add(_signature(action.type.value, action.body), action.type.value, error)

    def malformed(self, raw_body: str, error: str) -> str | None:
        """Record an action the parser could not read (same raw text = same action)."""
        return self._add(_signature("malformed", raw_body.strip()), "unreadable", error)

    def _add(self, key: str, kind: str, error: str) -> str | None:
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        if count < self.limit:
            return None
        body = key.split(":", 1)[1]
        if len(body) > 200:
            body = body[:199] + "…"
        return (
            f"the same failing {kind} action was written {count} times in this run "
            f"({body}); last error: {error}"
        )

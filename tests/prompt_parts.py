"""The parts of a request's messages, as tests read them (docs/runtime.md#the-prompt).

A turn's request is ``[system prompt, *conversation, *feeds message]``: the
context feeds are a ``user`` message after the conversation, only in the
latest turn's request, so the system prompt stays byte-identical.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

FEEDS_HEADING = "# Context feeds\n"


def is_feeds_message(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is the runtime's feeds message."""
    return message.get("role") == "user" and str(message.get("content") or "").startswith(
        FEEDS_HEADING
    )


def feeds_message(messages: Sequence[Mapping[str, Any]]) -> str:
    """The feeds message's text: the request's last message, ``""`` when it has none."""
    if messages and is_feeds_message(messages[-1]):
        return str(messages[-1]["content"])
    return ""


def conversation(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages between the system prompt and the feeds message."""
    end = len(messages) - (1 if feeds_message(messages) else 0)
    return list(messages[1:end])

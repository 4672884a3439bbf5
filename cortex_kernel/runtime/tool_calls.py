"""Native tool calls as protocol text: the one translator (SPEC §2.3).

A function-calling provider answers with tool calls, not protocol text. The
model adapters (litellm's, the replay model) turn each call into the action
the parser reads, so the parser stays the one contract whatever the
provider::

    <action type="tool" mode="sync" id="call_1">{"name": "search", "parameters": {…}}</action>

``sync`` when the turn made one call, ``async`` when it made several. The
loop then echoes the calls in the assistant message (:func:`assistant_message`)
and answers each with a ``tool`` message (:func:`tool_result_message`), keyed
by the action id the call became (:func:`call_action_id`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .ports import Message, ToolCall

__all__ = [
    "assistant_message",
    "call_action_id",
    "openai_tool_calls",
    "tool_call_to_action",
    "tool_calls_to_protocol",
    "tool_result_message",
]

# An id goes into a double-quoted attribute: keep it to characters that can
# never end the attribute or the tag.
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.:\-]")


def call_action_id(call_id: str) -> str:
    """The action id a native tool call becomes (attribute-safe)."""
    return _UNSAFE_ID.sub("_", call_id) or "call"


def tool_call_to_action(call: ToolCall, mode: str) -> str:
    """One call as protocol text: ``<action type="tool" mode=… id=…>{…}</action>``.

    Arguments that are not valid JSON are embedded as written, so the parser
    reports (or leniently repairs) them like any malformed action body —
    the model sees that error in its next turn.
    """
    name = json.dumps(call.name)
    arguments = call.arguments.strip() or "{}"
    try:
        parameters = json.dumps(json.loads(arguments), ensure_ascii=False)
    except json.JSONDecodeError:
        parameters = arguments
    body = f'{{"name": {name}, "parameters": {parameters}}}'
    return f'<action type="tool" mode="{mode}" id="{call_action_id(call.id)}">{body}</action>'


def tool_calls_to_protocol(calls: Sequence[ToolCall]) -> str:
    """All the calls of one turn: ``sync`` when there is one, ``async`` when several."""
    mode = "sync" if len(calls) == 1 else "async"
    return "".join(tool_call_to_action(call, mode) for call in calls)


def assistant_message(content: str, calls: Sequence[ToolCall]) -> Message:
    """The assistant turn for the history: the model's own text and its calls.

    ``content`` is the text without the synthesized actions: the provider
    gets its calls back in its own ``tool_calls`` shape.
    """
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = openai_tool_calls(calls)
    return message


def openai_tool_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The calls in the OpenAI ``tool_calls`` shape (history and transcripts)."""
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in calls
    ]


def tool_result_message(call_id: str, content: str) -> Message:
    """The provider's tool-message format for the result of call ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}

"""Native tool calls of function-calling models, adapted to the protocol (SPEC §2.3).

A provider streams a tool call as deltas keyed by ``index``: the first
carries the call's ``id`` and function ``name``, later ones pieces of the
``arguments`` JSON. :class:`ToolCallAccumulator` joins them. Whether a call
is ``sync`` (the only call) or ``async`` (one of several) is known only when
the stream ends, so the calls are buffered and turned into protocol text
then, by :func:`tool_calls_to_protocol`::

    <action type="tool" mode="sync" id="call_1">{"name": "search", "parameters": {…}}</action>

The parser therefore sees the same text whatever the provider, and the
runtime answers the call ids with :func:`tool_result_message` (role
``tool``) after echoing the calls with :func:`assistant_message`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..runtime.ports import Message, ToolCall

__all__ = [
    "ToolCallAccumulator",
    "assistant_message",
    "tool_call_to_action",
    "tool_calls_to_protocol",
    "tool_result_message",
    "tools_for_provider",
]

# An id goes into a double-quoted attribute: keep it to characters that can
# never end the attribute or the tag.
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.:\-]")


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` for dicts, ``obj.name`` for litellm's delta objects."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


class ToolCallAccumulator:
    """Joins streamed ``tool_calls`` deltas into complete calls, in index order."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, deltas: Iterable[Any]) -> None:
        """Fold one chunk's ``delta.tool_calls`` (dicts or litellm objects) in."""
        for position, delta in enumerate(deltas):
            index = _field(delta, "index")
            if not isinstance(index, int):
                index = position
            call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
            call_id = _field(delta, "id")
            if call_id:
                call["id"] = str(call_id)
            function = _field(delta, "function")
            if function is not None:
                name = _field(function, "name")
                if name:
                    call["name"] = str(name)
                arguments = _field(function, "arguments")
                if arguments:
                    call["arguments"].append(str(arguments))

    def calls(self) -> list[ToolCall]:
        """The complete calls; a call without an id gets ``call_<index>``."""
        return [
            ToolCall(
                id=raw["id"] or f"call_{index}",
                name=raw["name"],
                arguments="".join(raw["arguments"]),
            )
            for index, raw in sorted(self._calls.items())
        ]


def tool_call_to_action(call: ToolCall, mode: str) -> str:
    """One call as protocol text: ``<action type="tool" mode=… id=…>{…}</action>``.

    Arguments that are not valid JSON are embedded as written, so the parser
    reports (or leniently repairs) them like any malformed action body —
    the model sees that error in its next turn.
    """
    safe_id = _UNSAFE_ID.sub("_", call.id) or "call"
    name = json.dumps(call.name)
    arguments = call.arguments.strip() or "{}"
    try:
        parameters = json.dumps(json.loads(arguments), ensure_ascii=False)
    except json.JSONDecodeError:
        parameters = arguments
    body = f'{{"name": {name}, "parameters": {parameters}}}'
    return f'<action type="tool" mode="{mode}" id="{safe_id}">{body}</action>'


def tool_calls_to_protocol(calls: Sequence[ToolCall]) -> str:
    """All the calls of one turn: ``sync`` when there is one, ``async`` when several."""
    mode = "sync" if len(calls) == 1 else "async"
    return "".join(tool_call_to_action(call, mode) for call in calls)


def assistant_message(content: str, calls: Sequence[ToolCall]) -> Message:
    """The assistant turn to put in the history for a turn that made ``calls``.

    ``content`` should be the model's own text, not the synthesized actions:
    the provider expects its calls back in its own ``tool_calls`` shape.
    """
    message: Message = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments or "{}"},
            }
            for call in calls
        ]
    return message


def tool_result_message(call_id: str, content: str) -> Message:
    """The provider's tool-message format for the result of call ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def tools_for_provider(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function schemas from ``{"name", "description", "parameters"}`` dicts.

    Entries already in the ``{"type": "function", "function": …}`` shape pass
    through unchanged.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool.get("type") == "function" and "function" in tool:
            out.append(tool)
            continue
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out

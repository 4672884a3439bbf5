"""A provider's function calling: tool schemas out, streamed tool-call deltas in.

A provider streams a tool call as deltas keyed by ``index``: the first
carries the call's ``id`` and function ``name``, later ones pieces of the
``arguments`` JSON. :class:`ToolCallAccumulator` joins them. Whether a call
is ``sync`` (the only call) or ``async`` (one of several) is known only when
the stream ends, so the adapter buffers the calls and turns them into
protocol text then, with :func:`cortex_kernel.runtime.tool_calls.tool_calls_to_protocol`
(the one translator).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..runtime.ports import ToolCall

__all__ = ["ToolCallAccumulator", "text_tool_calls", "tools_for_provider"]


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


# Qwen-style text calls: a JSON object (or several), maybe fenced or in
# <tool_call> tags, with a "name" and its "arguments".
_TEXT_CALLS = itertools.count(1)
_FENCE = re.compile(r"```(?:json)?|</?tool_call>", re.IGNORECASE)


def text_tool_calls(content: str, known: Iterable[str]) -> list[ToolCall]:
    """Tool calls a model wrote as text instead of native ``tool_calls``.

    Local servers that do not parse their model's function-call format
    (llama-cpp-python with Qwen's template, for one) return the call as
    content: ``{"name": "population", "arguments": {"city": "Lyon"}}``,
    often in a code fence or ``<tool_call>`` tags. Only when the whole
    content is such calls — JSON objects naming a known tool (or an unknown
    one, with only ``name`` and ``arguments``: its error then lists the
    tools), nothing else but fences and whitespace — are they read as calls;
    any other text stays an answer.
    """
    names = set(known)
    text = _FENCE.sub("\n", content).strip()
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    position = 0
    while position < len(text):
        if text[position].isspace() or text[position] == ",":
            position += 1
            continue
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return []
        for item in value if isinstance(value, list) else [value]:
            if not _is_call(item, names):
                return []
            arguments = item.get("arguments", item.get("parameters", {}))
            if isinstance(arguments, str):
                arguments_text = arguments
            else:
                arguments_text = json.dumps(arguments, ensure_ascii=False)
            # Ids unique in the process: every turn's first call would be
            # call_text_1 otherwise, and a later turn's would clash with it.
            calls.append(
                ToolCall(
                    id=f"call_text_{next(_TEXT_CALLS)}", name=item["name"], arguments=arguments_text
                )
            )
    return calls


def _is_call(item: Any, names: set[str]) -> bool:
    """A known tool's call, or an unknown tool's in the call shape (its error names the tools)."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return False
    if item["name"] in names:
        return True
    return set(item) in ({"name", "arguments"}, {"name", "parameters"})


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

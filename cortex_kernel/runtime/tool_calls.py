"""Native tool calls as protocol text: the one translator (docs/protocol.md#function-calling).

A function-calling provider answers with tool calls, not protocol text. The
model adapters (litellm's, the replay model) turn each call into the action
the parser reads, so the parser stays the one contract whatever the
provider::

    <action type="tool" mode="async" id="call_1">{"name": "search", "parameters": {…}}</action>

Every call is ``async``: the adapter hands each one over the moment its
arguments are complete, while the model may still be writing the next, so
the action starts then and the stream goes on (a ``sync`` action would cut
the stream, and the calls after it with it). When the stream ends the loop
waits for the turn's actions, echoes the calls in the assistant message
(:func:`assistant_message`) and answers each with a ``tool`` message in the
next turn (:func:`tool_result_message`), keyed by the action id the call
became (:func:`call_action_id`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from .ports import Message, ToolCall
from .tools import closest_names

__all__ = ["tool_calls_to_protocol"]

# An id goes into a double-quoted attribute: keep it to characters that can
# never end the attribute or the tag.
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.:\-]")


def call_action_id(call_id: str) -> str:
    """The action id a native tool call becomes (attribute-safe)."""
    return _UNSAFE_ID.sub("_", call_id) or "call"


#: The optional argument :func:`with_output_key` gives every function.
OUTPUT_KEY_ARGUMENT: dict[str, Any] = {
    "type": "string",
    "description": (
        "Optional: a variable name to store the result in. "
        "Write $name in your answer to show the value."
    ),
}


def with_output_key(schemas: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``schemas`` (OpenAI function shape), each with the optional ``output_key`` argument.

    A function that already takes an argument of that name keeps its own.
    """
    out: list[dict[str, Any]] = []
    for schema in schemas:
        function = schema.get("function")
        if not isinstance(function, dict):
            out.append(schema)
            continue
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        properties = parameters.get("properties") or {}
        if "output_key" in properties:
            out.append(schema)
            continue
        parameters = {**parameters, "properties": {**properties, "output_key": OUTPUT_KEY_ARGUMENT}}
        out.append({**schema, "function": {**function, "parameters": parameters}})
    return out


def _keyed(schemas: Sequence[dict[str, Any]] | None) -> frozenset[str]:
    """The functions whose ``output_key`` argument is ours (added by :func:`with_output_key`)."""
    names: set[str] = set()
    for schema in schemas or ():
        function = schema.get("function", schema)
        properties = (function.get("parameters") or {}).get("properties") or {}
        if properties.get("output_key") == OUTPUT_KEY_ARGUMENT:
            names.add(str(function.get("name")))
    return frozenset(names)


#: The mode of every native call (see the module's notes).
CALL_MODE = "async"


def tool_call_to_action(call: ToolCall, mode: str = CALL_MODE, keyed: Collection[str] = ()) -> str:
    """One call as protocol text: ``<action type="tool" mode=… id=…>{…}</action>``.

    Arguments that are not valid JSON are embedded as written, so the parser
    reports (or leniently repairs) them like any malformed action body —
    the model sees that error in its next turn. For a function in ``keyed``
    the ``output_key`` argument becomes the action's attribute.
    """
    name = json.dumps(call.name)
    arguments = call.arguments.strip() or "{}"
    attributes = ""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # nested too deeply for json: the parser says so
        parameters = arguments
    else:
        if call.name in keyed and isinstance(value, dict) and "output_key" in value:
            key = value.pop("output_key")
            if isinstance(key, str) and key.strip():
                # Attribute-safe; a name that is no identifier gets the runtime's warning.
                attributes = f' output_key="{_UNSAFE_ID.sub("_", key.strip().lstrip("$"))}"'
        parameters = json.dumps(value, ensure_ascii=False)
    body = f'{{"name": {name}, "parameters": {parameters}}}'
    action_id = call_action_id(call.id)
    return f'<action type="tool" mode="{mode}" id="{action_id}"{attributes}>{body}</action>'


def tool_calls_to_protocol(
    calls: Sequence[ToolCall], schemas: Sequence[dict[str, Any]] | None = None
) -> str:
    """Calls as protocol text, each an ``async`` action (:data:`CALL_MODE`).

    Whether the calls are a whole turn's or each handed over alone as soon
    as it is complete, the text is the same. ``schemas`` are the functions
    the request offered: those given the ``output_key`` argument by
    :func:`with_output_key` have it moved to the action's attribute.
    """
    keyed = _keyed(schemas)
    return "".join(tool_call_to_action(call, CALL_MODE, keyed) for call in calls)


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


def call_summary(call: ToolCall, limit: int = 200, *, own_output_key: bool = False) -> str:
    """``name(key="value", …)``: the call a tool message answers, written out.

    A tool message alone says only ``Japan``; small models lose track of
    which question that answers (Qwen2.5-Coder-1.5B echoed the user's
    question back), so each result is introduced by its call. The
    ``output_key`` argument :func:`with_output_key` added is not the tool's
    and is left out, unless the function has its own (``own_output_key``).
    """
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        arguments = None
    if isinstance(arguments, dict):
        inner = ", ".join(
            f"{key}={json.dumps(value, ensure_ascii=False)}"
            for key, value in arguments.items()
            if own_output_key or key != "output_key"
        )
    else:
        inner = "…"
    text = f"{call.name}({inner})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


def unknown_function_message(name: str, known: Collection[str]) -> str:
    """The tool message for a call to a function the model was not given.

    A small model that invents a function (``reverse`` for "which expression
    reverses a list?") and is told only that it is unknown says so and stops
    (Qwen2.5-Coder-1.5B: "The function `reverse` is not available"); told it
    may answer without one, it answers.
    """
    close = closest_names(name, sorted(known))
    hint = (" Did you mean " + " or ".join(close) + "?") if close else ""
    available = ", ".join(sorted(known)) or "none"
    return (
        f"there is no function {name}; your functions are {available}.{hint} "
        "When none of them fits, answer the question yourself, without a function."
    )


def tool_result_message(call_id: str, content: str) -> Message:
    """The provider's tool-message format for the result of call ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}

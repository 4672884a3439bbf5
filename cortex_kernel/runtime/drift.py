"""What the loop does when a real model drifts from the protocol (docs/runtime.md#how-a-run-ends).

Small models retry a failed action under the same id, repeat the same
failing action turn after turn, or end a run with no final response at all.
The rules, each applied by :mod:`cortex_kernel.runtime.loop`:

- **Id reuse** (rule 5): an id whose action was rejected, failed, skipped or
  cancelled may be written again; the new action is a new attempt under
  that id (the scheduler replaces the node, with a warning). Reusing the id
  of a running or succeeded action stays an error, and
  :func:`duplicate_id_message` says which variable holds (or will hold) its
  result, so the model can use it instead of asking again. A succeeded
  action written again exactly as it was (same type and body) is that
  action: a warning, and its result stands (the turn's reader).
- **No empty "ok"** (rule 6): a run that would end with no final response
  and no outside text gets one short repair turn (:func:`repair_message`);
  if that brings nothing either, the run ends with status ``no_answer`` and
  the last thought as a marked, provisional answer (:func:`provisional_answer`).
- **A schema for values**: a tool call whose parameters are the tool's JSON
  Schema (copied from a prompt that lists schemas) is refused by the tool
  executor with :func:`schema_as_parameters_message`, which shows a call
  with values.
- **An imagined result is no answer**: with function calling, text that
  opens with the chat template's tool-result tag (``<tool_response>``, from
  Qwen's and Hermes' templates) is the model writing what it expects a
  tool to return, not an answer to the user (:func:`imagined_result`); the
  turn counts as one without an answer, so rule 6 applies. The same holds
  for text that opens by repeating the context feeds message the turn was
  sent (:func:`echoed_feeds`).
- **An answer that cannot stand as written** (rule 8): a final response
  that calls a tool in its text (``$to_fahrenheit($t)``,
  :func:`tools_called_in`), or that states a figure found in none of the
  run's results while the run did look data up, gets one check turn
  (:func:`tool_in_answer_message`, :func:`figure_check_message`) that
  says what is wrong; the next final response is the answer, checked or
  not. A small model adds up or multiplies what it looked up in its head,
  and gets it wrong.
- **Stuck** (rule 7): the same failing action — same type and same body — a
  third time in one run ends it with status ``stuck`` (:class:`RepeatedActions`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from ..protocol.models import Action

__all__ = ["schema_as_parameters_message"]

#: How a repeated failure's ``stuck`` message starts (a repeated result's does not).
_FAILING: Final = "the same failing "

#: How many times the same failing action may be written before the run is stuck.
REPEAT_LIMIT = 3

#: Node states whose id a new action may take over (as a new attempt).
RETRYABLE_STATES = frozenset({"rejected", "failed", "skipped", "cancelled"})

_PROVISIONAL = (
    "**Provisional answer** (the model gave no final response; this is its last thought):"
)


# The tool-result tag of the chat templates that wrap results in it.
_RESULT_TAG = re.compile(r"\s*<tool_response>", re.IGNORECASE)


def imagined_result(text: str) -> bool:
    """Whether a function-calling turn's text is a tool result the model made up.

    Parameters
    ----------
    text
        The turn's text outside any call.

    Returns
    -------
    bool
        ``True`` when it opens with ``<tool_response>``: the model took the
        chat template's turn for a tool result, not the user's answer.
    """
    return _RESULT_TAG.match(text) is not None


#: The warning that says why such text is not taken as the answer.
IMAGINED_RESULT_WARNING = (
    "the model's text opened with `<tool_response>`: it wrote a tool result it made up, "
    "not an answer, so it is not taken as the answer"
)


def echoed_feeds(text: str, feeds: str) -> bool:
    """Whether ``text`` opens by repeating the context feeds message the turn was sent.

    Small models sometimes answer the last message of the request, which is
    the runtime's feeds message, by writing it out again: no answer.
    """
    heading = feeds.strip().split("\n", 1)[0].strip()
    return bool(heading) and text.lstrip().startswith(heading)


#: The warning that says why such text is not taken as the answer.
ECHOED_FEEDS_WARNING = (
    "the model's text repeated the context feeds message instead of answering, "
    "so it is not taken as the answer"
)


def repair_message(protocol: str) -> str:
    """The user message of the repair turn: ask for the final answer, briefly."""
    if protocol == "tools":
        return "You have not answered yet. Answer the user now, in plain text."
    return (
        "You have not given a final answer yet. Write it now, inside "
        "<response>...</response>, using the results above."
    )


#: How much of the user's message a restatement repeats.
_RESTATED_CHARS = 600


def restated_message(message: str) -> str:
    """The user's message again, for a small model to read last.

    After the feeds (a 1.5B model answered about the first DataFrame the
    feed listed instead of the one the user named), and after the results
    of a turn none of whose actions worked (with only errors to read, it
    answered about the failure of a call it had made up).
    """
    text = " ".join(message.split())
    if len(text) > _RESTATED_CHARS:
        text = text[: _RESTATED_CHARS - 1] + "…"
    return f"The user's message, which you are answering: {text}"


def stuck_message(protocol: str, stuck: str) -> str:
    """The user message of the last turn of a run that repeated an action (rule 7)."""
    where = "in plain text" if protocol == "tools" else "inside <response>...</response>"
    what = "what failed" if stuck.startswith(_FAILING) else "its result"
    return (
        f"Stop: {stuck}. It is not run again. Answer the user now, {where}, "
        f"with what you know and {what}."
    )


def computing_tools(specs: list[dict[str, Any]]) -> list[str]:
    """The tools that compute from numbers: every parameter a number.

    What a check turn may name for a figure the model worked out in its head
    (``to_fahrenheit(celsius: number)``, ``add(a, b)``).
    """
    names: list[str] = []
    for spec in specs:
        properties = (spec.get("parameters") or {}).get("properties") or {}
        kinds = [sub.get("type") if isinstance(sub, dict) else None for sub in properties.values()]
        if kinds and all(kind in ("number", "integer") for kind in kinds):
            names.append(str(spec.get("name")))
    return names


def tools_asked_for(message: str, names: Sequence[str]) -> list[str]:
    """The tools among ``names`` the user's ``message`` asks for by a word of their name.

    ``to_fahrenheit`` for "…right now, in Fahrenheit?": a word of four letters
    or more of the name (split at ``_`` and case changes) is a word of the
    message, or begins one ("fahrenheit", "convert" for "converted").
    """
    words = set(re.findall(r"[a-z]+", message.lower()))
    asked = []
    for name in names:
        parts = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)
        if any(
            len(part) >= 4 and any(word.startswith(part.lower()) for word in words)
            for part in parts
        ):
            asked.append(name)
    return asked


def computing_tool_asked_for(message: str, specs: list[dict[str, Any]]) -> str | None:
    """The one tool that computes (:func:`computing_tools`) ``message`` asks for by name, if any."""
    asked = tools_asked_for(message, computing_tools(specs))
    return asked[0] if len(asked) == 1 else None


def figure_check_message(
    protocol: str, figures: list[str], *, failed: bool = False, tool: str | None = None
) -> str:
    """The user message of the check turn: the figures no result gives (rule 8).

    ``failed``: no action of the run succeeded, so the figures are the
    model's own in place of a result it could not get. ``tool``: the tool
    that computes them, named as the way to (see :func:`computing_tools`).
    """
    named = ", ".join(figures)
    it = "it" if len(figures) == 1 else "them"
    if failed:
        return (
            f"Your answer states {named}, but no look-up of this run succeeded, so "
            f"no result gives {it}. Say what failed instead of a figure of your own, "
            f"or correct the answer; then write the final answer again."
        )
    how = "a function" if protocol == "tools" else "a tool action"
    if tool is not None:
        how += f" ({tool})"
    return (
        f"Your answer states {named}, which no result of this run gives. If you "
        f"worked {it} out yourself, compute {it} with {how} instead, or correct "
        f"the answer; then write the final answer again."
    )


def tools_called_in(answer: str, tools: list[str]) -> list[str]:
    """The tools ``answer`` calls in its text (rule 8), in order.

    As a reference, ``$to_fahrenheit($t)``, or in a fenced code block,
    ``nice = population(city="Nice")`` (a model that writes the calls it
    should make as a snippet for the user). Prose is not read for calls: it
    quotes a result as its tool message gives it (``python(code=…)
    returned: 4``); nor is a method of some object, ``df.population(…)``.
    """
    if not tools:
        return []
    names = "|".join(re.escape(name) for name in sorted(tools, key=len, reverse=True))
    found = [
        (match.start(), match.group(1))
        for match in re.finditer(rf"\$\{{?\s*({names})\s*\(", answer)
    ]
    for block in re.finditer(r"```[^\n]*\n(.*?)(?:```|\Z)", answer, re.DOTALL):
        found += [
            (block.start(1) + match.start(), match.group(1))
            for match in re.finditer(rf"(?<![\w.$])({names})\(", block.group(1))
        ]
    return list(dict.fromkeys(name for _, name in sorted(found)))


def tool_in_answer_message(protocol: str, tools: list[str]) -> str:
    """The user message of the check turn: the answer calls tools in its text (rule 8)."""
    named = ", ".join(tools)
    how = "with a function call" if protocol == "tools" else "in a tool action"
    return (
        f"Your answer calls {named} in its text, where nothing runs. Call {named} "
        f"{how} first; then write the final answer with the result."
    )


def unset_reference_message(protocol: str, names: list[str]) -> str:
    """The user message of the check turn: the answer refers to variables nothing set (rule 8)."""
    named = ", ".join(names)
    how = (
        "Call the functions that give it first, with output_key"
        if protocol == "tools"
        else "Start the actions that give it first, with output_key"
    )
    # No "or answer without it": offered that, the 1.5B model wrote figures
    # of its own in place of the references.
    return (
        f"Your answer refers to {named}, but no action of this run set it, so it "
        f"shows nothing. {how}; then write the final answer with the results."
    )


def uncalled_tool_message(protocol: str, tool: str) -> str:
    """The user message of the check turn: the answer does without the tool asked for (rule 8)."""
    how = "with a function call" if protocol == "tools" else "in a tool action"
    return (
        f"The user's message asks for what {tool} computes, and this run has not "
        f"called it. Call {tool} {how} first; then write the final answer with the result."
    )


def tools_named_in(answer: str, tools: list[str]) -> list[str]:
    """The session's tools ``answer`` names as words ("I used the `population` function")."""
    return [name for name in tools if re.search(rf"(?<![\w.$]){re.escape(name)}(?!\w)", answer)]


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


def repeated_success_message(action_id: str, variable: str) -> str:
    """The warning for a succeeded action written again exactly as it was."""
    return (
        f"action '{action_id}' was written again as it was: it already succeeded, so "
        f"it is not run again and its result stands (${variable})"
    )


def _signature(kind: str, body: Any) -> str:
    try:
        return kind + ":" + json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return f"{kind}:{body!r}"


class RepeatedActions:
    """Counts actions written again by type and body over one run (rule 7).

    Ids, modes and output keys do not count: a model that retries the same
    call under a new id is repeating itself all the same. Failures count by
    body; successes by body and result, so a call whose result changed (a
    status polled) is not a repeat.
    """

    def __init__(self, limit: int = REPEAT_LIMIT) -> None:
        self.limit = limit
        self._counts: dict[str, int] = {}
        # The bodies not to run again, with why: checked for every action
        # submitted, so the body is only serialised once one exists.
        self._refused: dict[str, str] = {}

    def failed_action(self, action: Action, error: str) -> str | None:
        """Record a failed or rejected action; the ``stuck`` message at the limit."""
        key = _signature(action.type.value, action.body)
        stuck = self._add(key, action.type.value, error)
        if stuck is not None and key not in self._refused:
            self._refused[key] = (
                f"this {action.type.value} action already failed {self._counts[key]} times "
                "in this run, written as it is now: it is not run again"
            )
        return stuck

    def succeeded(self, action: Action, result: str) -> str | None:
        """Record a succeeded action and its result; the ``stuck`` message at the limit.

        Qwen2.5-Coder-1.5B wrote the same code under a new id turn after
        turn, each run giving it the result it already had, until the run's
        turn limit.
        """
        key = _signature(action.type.value, action.body)
        seen = f"{key}\0{hash(result)}"  # the result's hash: a large result is not kept
        count = self._counts.get(seen, 0) + 1
        self._counts[seen] = count
        if count < self.limit:
            return None
        self._refused[key] = (
            f"this {action.type.value} action gave the same result {count} times in this "
            "run, written as it is now: it is not run again; answer with that result"
        )
        return (
            f"the same {action.type.value} action was written {count} times in this run "
            f"and gave the same result each time ({_short(key)})"
        )

    def refused(self, action: Action) -> str | None:
        """Why ``action`` is not run: it failed, or gave the same result, ``limit`` times already.

        The last turn after it is told so (:func:`stuck_message`); a fourth
        attempt would end the same way, or run a side effect once more.
        """
        if not self._refused:
            return None
        return self._refused.get(_signature(action.type.value, action.body))

    def malformed(self, raw_body: str, error: str) -> str | None:
        """Record an action the parser could not read (same raw text = same action)."""
        return self._add(_signature("malformed", raw_body.strip()), "unreadable", error)

    def _add(self, key: str, kind: str, error: str) -> str | None:
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        if count < self.limit:
            return None
        return (
            f"{_FAILING}{kind} action was written {count} times in this run "
            f"({_short(key)}); last error: {error}"
        )


def _short(key: str) -> str:
    body = key.split(":", 1)[1]
    return body[:199] + "…" if len(body) > 200 else body


# What a parameter of each JSON type looks like in a tool's example call.
_PLACEHOLDERS: dict[str, Any] = {
    "string": "...",
    "integer": 3,
    "number": 2.5,
    "boolean": True,
    "array": [],
    "object": {},
}


def _type_name(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "any")
    if kind is None and isinstance(schema.get("anyOf"), list):
        kinds = [_type_name(s) for s in schema["anyOf"] if isinstance(s, dict)]
        return " | ".join(k for k in kinds if k != "null") or "any"
    return str(kind or "any")


def _example_value(schema: dict[str, Any]) -> Any:
    """A value of the parameter's type: its example, default or enum if it has one."""
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    if "default" in schema:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    return _PLACEHOLDERS.get(_type_name(schema).split(" | ")[0], "...")


def tool_signature(name: str, parameters: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``name(a: string, b: number = 1)`` and example parameters, from a JSON Schema.

    Small models copy a JSON Schema shown to them as the parameters of their
    call (``{"properties": {"city": …}}``); the schema error
    (:func:`schema_as_parameters_message`) shows this signature and a call
    with example values instead, which the model can copy.

    Examples
    --------
    >>> tool_signature("weather", {"type": "object", "properties":
    ...     {"city": {"type": "string"}}, "required": ["city"]})
    ('weather(city: string)', {'city': '...'})
    """
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    params: list[str] = []
    example: dict[str, Any] = {}
    for key, raw in properties.items():
        schema = raw if isinstance(raw, dict) else {}
        text = f"{key}: {_type_name(schema)}"
        if key not in required and "default" in schema:
            text += f" = {json.dumps(schema['default'], ensure_ascii=False)}"
        elif key not in required:
            text += " (optional)"
        params.append(text)
        if key in required or not required:
            example[key] = _example_value(schema)
    return f"{name}({', '.join(params)})", example


_SCHEMA_KEYS = frozenset(
    {"properties", "required", "type", "$schema", "additionalProperties", "title", "description"}
)
_JSON_TYPES = frozenset(_PLACEHOLDERS) | {"null"}


def _is_property_schema(value: Any, declared: Any) -> bool:
    """``{"type": "string", …}`` sent as the value of a parameter that is no object."""
    if not isinstance(value, dict) or value.get("type") not in _JSON_TYPES:
        return False
    return not (isinstance(declared, dict) and declared.get("type") in ("object", None))


def _looks_like_schema(sent: dict[str, Any], schema: dict[str, Any]) -> bool:
    own = schema.get("properties") or {}
    extra = set(sent) - set(own)
    if extra:
        whole = isinstance(sent.get("properties"), dict) or sent.get("type") == "object"
        return whole and extra <= _SCHEMA_KEYS
    return all(_is_property_schema(sent[key], own.get(key)) for key in sent)


def schema_as_parameters_message(name: str, sent: Any, schema: dict[str, Any]) -> str | None:
    """The error for a tool call whose parameters are the tool's JSON Schema.

    Small models write the schema they were shown as the call's parameters
    (``{"properties": {"city": {"type": "string"}}, "type": "object"}``).
    Such a call is not run: the error says so and shows a call with values,
    which the model can copy. ``None`` when ``sent`` does not look like a
    schema (or the tool really takes parameters named like schema keys).
    """
    if not isinstance(sent, dict) or not sent or not _looks_like_schema(sent, schema):
        return None
    signature, example = tool_signature(name, schema)
    call = json.dumps({"name": name, "parameters": example}, ensure_ascii=False)
    return (
        f"you sent the JSON schema of tool '{name}' as its parameters, not values. "
        f"It takes {signature}: send the values themselves, like {call}"
    )

"""From tag attributes and a body to an :class:`Action` or a feed declaration.

Pure functions, no parser state: the parser hands over what it read and
gets back either the finished object or the message of an ``action_error``
(what is wrong and how to fix it), plus warnings about repairs.

Control fields (``id``, ``mode``, ``output_key``, ``depends_on``,
``timeout``, ``retries``) may be attributes or body fields; the attribute
wins (docs/protocol.md#actions). A written id is claimed from the run's
:class:`IdAllocator` only once everything else is valid, so the model can
correct a failed action and resend it under the same id.

What real models write is read as they meant it, with a warning
(docs/protocol.md#actions): ``depends_on`` of ``none``, ``null``, ``empty`` (warned), ``-``,
``[]`` or ``""`` is no dependency; a tool's parameters under ``arguments``,
``args`` or ``input``, or flat beside ``name``, become ``parameters``.
"""

from __future__ import annotations

import json
import json.scanner
import math
import re
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from ._attributes import split_ids
from ._jsonrepair import holds_lone_surrogate, loads_lenient, surrogate_escape
from .models import Action, ActionMode, ActionType, ContextFeedDecl, FeedType, IdAllocator

__all__ = ["build_action"]  # the rest is used inside the protocol package only

_TYPES = ", ".join(t.value for t in ActionType)
_MODES = ", ".join(m.value for m in ActionMode)
_FEED_TYPES = ", ".join(f.value for f in FeedType)
_CONTROL_SET: Final = frozenset(("id", "mode", "output_key", "depends_on", "timeout", "retries"))
# depends_on values that mean "no dependency" (docs/protocol.md#actions), once split.
_NO_DEPENDENCY: Final = frozenset(("none", "null", "empty", "-"))
_PARAMETER_ALIASES = ("arguments", "args", "input")
_TYPE_BY_VALUE: Final = {t.value: t for t in ActionType}
_MODE_BY_VALUE: Final = {m.value: m for m in ActionMode}
_SYNC: Final = ActionMode.SYNC
_TOOL: Final = ActionType.TOOL
# json.loads without its Python layers: the C scanner of a default decoder
# (strict, plain dicts) and json's own definition of whitespace.
_scan_json: Final[Callable[[str, int], tuple[Any, int]]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]  # typeshed: the class, in truth its instance
)
_json_space: Final = re.compile(r"[ \t\n\r]*").match  # json.decoder.WHITESPACE
_new: Final = object.__new__


class BuiltAction(NamedTuple):
    """Outcome of :func:`build_action`: ``action`` or ``error``, never both."""

    action: Action | None
    error: str | None
    id: str
    warnings: tuple[tuple[str, dict[str, Any]], ...]


class BuiltFeed(NamedTuple):
    """Outcome of :func:`build_feed`: ``feed`` or ``error``, never both."""

    feed: ContextFeedDecl | None
    error: str | None
    id: str | None
    warnings: tuple[tuple[str, dict[str, Any]], ...]


#: Deepest nesting accepted in an action or feed body. Deeper bodies are an
#: action_error: they cannot be written back as JSON (pydantic stops at ~255
#: levels, the standard library at ~1000) and no tool needs them.
MAX_BODY_DEPTH: Final = 100


def _nesting(value: Any) -> int:
    """How deep dicts and lists nest in ``value`` (iterative: no recursion limit)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_BODY_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


class _Invalid(Exception):
    """A field with a bad value; carries the ``action_error`` message."""


def _normalise(value: str) -> str:
    return value.strip().lower().replace("-", "_").replace(" ", "_")


def _mode(value: Any) -> ActionMode:
    exact = _MODE_BY_VALUE.get(value) if isinstance(value, str) else None
    if exact is not None:
        return exact
    if isinstance(value, str):
        key = _normalise(value).strip("_")
        if key in ("fireandforget", "fire_forget"):
            key = "fire_and_forget"
        try:
            return ActionMode(key)
        except ValueError:
            pass
    raise _Invalid(f"invalid mode {value!r}: use one of {_MODES}")


def _timeout(value: Any) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().removesuffix("s").strip()
        try:
            number = float(text)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise _Invalid(f"invalid timeout {value!r}: give a positive number of seconds")
    return number


def _retries(value: Any) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None or number < 0:
        raise _Invalid(f"invalid retries {value!r}: give a whole number >= 0")
    return number


def _depends_on(value: Any, warnings: list[tuple[str, dict[str, Any]]]) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, str):
        ids = split_ids(value)
    elif isinstance(value, list | tuple):
        items: list[str] = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, str | int):
                raise _Invalid(f"invalid depends_on {value!r}: give a list of action ids")
            items.append(str(item).strip())
        ids = tuple(dict.fromkeys(i for i in items if i))
    else:
        raise _Invalid(f"invalid depends_on {value!r}: give a list of action ids")
    if len(ids) == 1 and ids[0].lower() in _NO_DEPENDENCY:
        # What real models write for "nothing" (docs/protocol.md#actions); `-` needs no warning.
        if ids[0] != "-":
            warnings.append(
                (
                    f"depends_on={value!r} read as no dependency",
                    {"depends_on": value},
                )
            )
        return ()
    return ids


def _tool_parameters(body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A tool body with its parameters where docs/protocol.md#actions puts them, and what moved.

    Real models put a tool's parameters under ``arguments``, ``args`` or
    ``input`` (an object, or a JSON object in a string: OpenAI's habit), or
    flat beside ``name``; each is read as ``parameters``.
    """
    if "parameters" in body or "name" not in body:
        return body, None
    kept = {key: value for key, value in body.items() if key == "name" or key in _CONTROL_SET}
    for key in _PARAMETER_ALIASES:
        if key in body:
            value = body[key]
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    return body, None
            if not isinstance(value, dict):
                return body, None
            rest = {k: v for k, v in body.items() if k != key and k not in kept}
            if rest:  # other fields beside the alias: not a shape we can read
                return body, None
            return {**kept, "parameters": value}, key
    flat = {key: value for key, value in body.items() if key not in kept}
    if not flat:
        return body, None
    return {**kept, "parameters": flat}, ""


def _output_key(value: Any) -> str:
    if isinstance(value, str) and value.strip().isidentifier():
        return value.strip()
    raise _Invalid(f"invalid output_key {value!r}: give a Python identifier such as 'result'")


def _written_id(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _Invalid(f"invalid id {value!r}: give a short string such as 'a1'")


def _decode_object(
    raw_body: str, what: str, *, allow_empty: bool
) -> tuple[dict[str, Any], list[str]]:
    if not raw_body.strip():
        if allow_empty:
            return {}, []
        raise _Invalid(f"the {what} body is empty: write a JSON object between the tags")
    result = loads_lenient(raw_body)
    too_deep = (
        f"the {what} body is nested more than {MAX_BODY_DEPTH} levels deep; "
        "flatten it (pass large structures by $variable reference)"
    )
    if not result.ok:
        if "maximum recursion depth" in result.error:  # json.loads gave up past ~1000
            raise _Invalid(too_deep)
        raise _Invalid(f"the {what} body is not valid JSON: {result.error}")
    if not isinstance(result.value, dict):
        kind = type(result.value).__name__
        raise _Invalid(f"the {what} body must be a JSON object, not a {kind}")
    if _nesting(result.value) > MAX_BODY_DEPTH:
        raise _Invalid(too_deep)
    return result.value, list(result.repairs)


def build_action(
    attrs: dict[str, str],
    raw_body: str,
    *,
    open_id: str,
    in_thought: bool,
    ids: IdAllocator,
) -> BuiltAction:
    """Validate an action and claim its id.

    Parameters
    ----------
    attrs
        The attributes of the opening tag (names lower-cased).
    raw_body
        The body exactly as written between ``<action …>`` and ``</action>``.
    open_id
        The id announced in the ``action_open`` event: the ``id`` attribute,
        or an id already generated by ``ids``.
    in_thought
        Whether the action was written inside a thought.
    ids
        The run's id allocator.

    Returns
    -------
    BuiltAction
        Never raises.
    """
    warnings: list[tuple[str, dict[str, Any]]] = []
    action_id = open_id
    try:
        type_value = attrs.get("type", "").strip().lower()
        action_type = _TYPE_BY_VALUE.get(type_value)
        if not type_value:
            raise _Invalid(f'the action has no type: write <action type="…"> with one of {_TYPES}')
        if action_type is None:
            raise _Invalid(f"unknown action type {type_value!r}: use one of {_TYPES}")
        body, repairs = _decode_object(raw_body, "action", allow_empty=False)
        if repairs:
            warnings.append(
                (f"repaired the JSON body ({', '.join(repairs)})", {"repairs": repairs})
            )
        if action_type is ActionType.TOOL:
            body, moved = _tool_parameters(body)
            if moved is not None:
                where = f"under {moved!r}" if moved else "beside 'name'"
                warnings.append(
                    (
                        f"the tool's parameters were written {where}; read as 'parameters'",
                        {"parameters_from": moved or "flat"},
                    )
                )
        fields: dict[str, Any] = {
            name: body[name] for name in _CONTROL_SET.intersection(body) if body[name] is not None
        }
        for name in _CONTROL_SET.intersection(attrs):
            written = attrs[name]
            if written.strip() or name == "depends_on":
                fields[name] = written
        id_written = "id" in attrs and bool(attrs["id"].strip())
        if "id" in fields:
            action_id = _written_id(fields["id"])
            if not id_written:
                id_written = True
                if action_id != open_id:
                    warnings.append(
                        (
                            f"the id {action_id!r} was given in the body; the action_open "
                            f"event announced it as {open_id!r}",
                            {"open_id": open_id, "id": action_id},
                        )
                    )
        action = Action(
            id=action_id,
            type=action_type,
            mode=_mode(fields["mode"]) if "mode" in fields else ActionMode.SYNC,
            depends_on=_depends_on(fields.get("depends_on", ()), warnings),
            output_key=_output_key(fields["output_key"]) if "output_key" in fields else None,
            timeout=_timeout(fields["timeout"]) if "timeout" in fields else None,
            retries=_retries(fields["retries"]) if "retries" in fields else 0,
            body=body,
            raw_body=raw_body,
            in_thought=in_thought,
        )
        if id_written and not ids.claim(action_id):
            raise _Invalid(
                f"duplicate id {action_id!r}: an earlier action of this run has it; "
                "give this action a new id"
            )
    except _Invalid as exc:
        return BuiltAction(None, str(exc), action_id, tuple(warnings))
    return BuiltAction(action, None, action_id, tuple(warnings))


def strict_object(raw_body: str) -> dict[str, Any] | None:
    """``raw_body`` as a JSON object when it is strict JSON with nothing to repair."""
    try:
        try:
            body, end = _scan_json(raw_body, 0)
        except StopIteration:  # leading whitespace (or not JSON at all)
            body, end = _scan_json(raw_body, _json_space(raw_body, 0).end())  # type: ignore[union-attr]  # `*` matches
    except (StopIteration, ValueError, RecursionError):
        return None
    if type(body) is not dict:
        return None
    if end != len(raw_body) and _json_space(raw_body, end).end() != len(raw_body):  # type: ignore[union-attr]
        return None
    # Possibly too deep: build_action measures and reports it. Deeper than
    # MAX_BODY_DEPTH takes that many brackets open and closed, so a short
    # body cannot be; nor can a body whose containers hold no containers
    # (a tool's name and flat parameters: asked first, as counting brackets
    # costs more than decoding a long body of non-ASCII text).
    if (
        len(raw_body) > 2 * MAX_BODY_DEPTH
        and not _flat(body)
        and raw_body.count("[") + raw_body.count("{") > MAX_BODY_DEPTH
    ):
        return None
    if "\\" in raw_body and surrogate_escape(raw_body) is not None and holds_lone_surrogate(body):
        return None  # build_action replaces it
    return body


def _flat(body: dict[str, Any]) -> bool:
    """Whether ``body`` nests two levels at most: no container in a container of it.

    ``False`` as well, without looking, for a body or a container of it with
    more than 16 items, whose loop here would cost more than counting brackets.
    """
    if len(body) > 16:
        return False
    for value in body.values():
        kind = type(value)
        if kind is dict:
            value = value.values()
        elif kind is not list:
            continue
        if len(value) > 16:
            return False
        for item in value:
            kind = type(item)
            if kind is dict or kind is list:
                return False
    return True


def fast_action(
    attrs: dict[str, str],
    raw_body: str,
    body: dict[str, Any],
    open_id: str,
    in_thought: bool,
    ids: IdAllocator,
) -> Action | None:
    """:func:`build_action` for the common case, or ``None`` to ask it.

    ``body`` is ``raw_body`` as :func:`strict_object` decodes it: strict
    JSON, with no lone surrogate to replace. The common case: a known type,
    a body without control fields or parameters to move, and attributes
    that need no normalising. Everything else returns ``None`` before any
    side effect (the id is claimed last; a duplicate returns ``None`` too,
    and :func:`build_action` then reports it), so the caller falls back to
    :func:`build_action`, which decides exactly as before.
    """
    action_type = _TYPE_BY_VALUE.get(attrs.get("type", ""))
    if action_type is None or "timeout" in attrs or "retries" in attrs:
        return None
    if action_type is _TOOL and "parameters" not in body and len(body) > 1:
        return None  # parameters to move (_tool_parameters)
    for key in body:  # _CONTROL_SET.isdisjoint(body), without a method call
        if key in _CONTROL_SET:
            return None
    value = attrs.get("mode")
    mode = _SYNC if value is None else _MODE_BY_VALUE.get(value)
    output_key = attrs.get("output_key")
    value = attrs.get("depends_on")
    depends_on = split_ids(value) if value else ()
    if (
        mode is None
        or (output_key is not None and not output_key.isidentifier())
        or (len(depends_on) == 1 and depends_on[0].lower() in _NO_DEPENDENCY)
    ):
        return None
    value = attrs.get("id")
    if value is not None and (value == open_id or value.strip()) and not ids.claim(open_id):
        return None
    # Action(id=…, type=…, …) without its keyword call, which costs twice
    # what setting the fields does (test_builders checks every field is set).
    action: Action = _new(Action)
    (
        action.id,
        action.type,
        action.mode,
        action.depends_on,
        action.output_key,
        action.timeout,
        action.retries,
        action.body,
        action.raw_body,
        action.in_thought,
    ) = (open_id, action_type, mode, depends_on, output_key, None, 0, body, raw_body, in_thought)
    return action


def build_feed(attrs: dict[str, str], raw_body: str) -> BuiltFeed:
    """Validate a ``<context_feed>`` declaration.

    Parameters
    ----------
    attrs
        The attributes of the opening tag; ``id`` is required (or an ``id``
        field of the body), ``type`` defaults to ``on_demand``.
    raw_body
        The JSON source spec as written; an empty body is an empty spec.

    Returns
    -------
    BuiltFeed
        Never raises.
    """
    warnings: list[tuple[str, dict[str, Any]]] = []
    feed_id: str | None = attrs.get("id", "").strip() or None
    try:
        type_text = _normalise(attrs.get("type", "")) or FeedType.ON_DEMAND.value
        if type_text not in FeedType.__members__.values():
            raise _Invalid(f"unknown context_feed type {type_text!r}: use one of {_FEED_TYPES}")
        source, repairs = _decode_object(raw_body, "context_feed", allow_empty=True)
        if repairs:
            warnings.append(
                (f"repaired the JSON body ({', '.join(repairs)})", {"repairs": repairs})
            )
        if feed_id is None and "id" in source:
            feed_id = _written_id(source["id"])
        if feed_id is None:
            raise _Invalid('the context_feed has no id: write <context_feed id="…" type="…">')
        feed = ContextFeedDecl(
            id=feed_id, type=FeedType(type_text), source=source, raw_body=raw_body
        )
    except _Invalid as exc:
        return BuiltFeed(None, str(exc), feed_id, tuple(warnings))
    return BuiltFeed(feed, None, feed_id, tuple(warnings))

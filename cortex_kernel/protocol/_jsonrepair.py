"""Lenient JSON for action and feed bodies (docs/protocol.md#actions).

Strict :func:`json.loads` is tried first. Only when it fails are the repairs
tried, in one pass, and each repair that changed something is named so the
parser can report it in a ``warning`` event:

- code fences around the JSON (```` ```json … ``` ````);
- single-quoted strings (``{'a': 'b'}``);
- trailing commas before ``}`` or ``]``;
- Python literals ``True``/``False``/``None`` outside strings;
- raw control characters (newlines, tabs) inside strings;
- Python's triple-quoted strings (``"code": \"\"\"...\"\"\"``), which small models
  write around code: the text between the quotes, as written;
- lone surrogates written as escapes (``"\\ud800"``), which no event could
  serialise, replaced by U+FFFD.

When even the repaired text does not parse, the error reported is the one of
the *original* text, with its line and column, because that is the text the
model wrote and must correct.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

__all__ = ["JsonResult", "loads_lenient"]  # re-exported by the package

_FENCE_OPEN_RE = re.compile(r"\A\s*```[A-Za-z0-9_+-]*[ \t]*\r?\n?")
_FENCE_CLOSE_RE = re.compile(r"\r?\n?[ \t]*```\s*\Z")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_PY_LITERAL_RE = re.compile(r"\b(True|False|None)\b")
_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")
#: ``surrogate_escape(text)``: where ``text`` escapes a surrogate (``\\udxxx``), if it does.
surrogate_escape = _SURROGATE_ESCAPE_RE.search
_LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class JsonResult(NamedTuple):
    """The outcome of :func:`loads_lenient`.

    Attributes
    ----------
    ok
        Whether a value was decoded.
    value
        The decoded value (``None`` when ``ok`` is false).
    repairs
        The names of the repairs that were needed, empty for strict JSON.
    error
        When ``ok`` is false: what is wrong and where, for the model to fix.
    """

    ok: bool
    value: Any
    repairs: tuple[str, ...]
    error: str


def _describe(exc: json.JSONDecodeError) -> str:
    return f"invalid JSON at line {exc.lineno} column {exc.colno} (char {exc.pos}): {exc.msg}"


def _single_quoted(text: str, i: int) -> tuple[str, int]:
    """The single-quoted string at ``text[i]`` as JSON, and where its closing quote is."""
    n = len(text)
    j = i + 1
    chars: list[str] = []
    while j < n and text[j] != "'":
        if text[j] == "\\" and j + 1 < n:
            nxt = text[j + 1]
            chars.append("'" if nxt == "'" else "\\" + nxt)
            j += 2
            continue
        chars.append('\\"' if text[j] == '"' else text[j])
        j += 1
    return '"' + "".join(chars) + '"', j


def _rewrite(text: str) -> tuple[str, list[str]]:
    """Convert single-quoted strings, drop trailing commas, map Python literals.

    A character loop, but only ever run on a body that already failed strict
    parsing, so its cost does not matter for throughput.
    """
    out: list[str] = []
    repairs: list[str] = []
    i, n = 0, len(text)
    plain_start = 0

    def flush_plain(end: int) -> None:
        segment = text[plain_start:end]
        fixed = _PY_LITERAL_RE.sub(lambda m: _PY_LITERALS[m.group()], segment)
        if fixed != segment and "Python literals" not in repairs:
            repairs.append("Python literals")
        out.append(fixed)

    while i < n:
        c = text[i]
        if c in "\"'" and text.startswith(c * 3, i):
            close = text.find(c * 3, i + 3)
            if close >= 0:
                flush_plain(i)
                # As written: the model meant the code's own text (its `\\n` stays `\\n`).
                out.append(json.dumps(text[i + 3 : close], ensure_ascii=False))
                if "triple-quoted strings" not in repairs:
                    repairs.append("triple-quoted strings")
                i = plain_start = close + 3
                continue
        if c == '"':
            flush_plain(i)
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = plain_start = j + 1
        elif c == "'":
            flush_plain(i)
            string, j = _single_quoted(text, i)
            out.append(string)
            if "single quotes" not in repairs:
                repairs.append("single quotes")
            i = plain_start = j + 1
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                flush_plain(i)
                if "trailing commas" not in repairs:
                    repairs.append("trailing commas")
                plain_start = i + 1
            i += 1
        else:
            i += 1
    if plain_start < n:
        flush_plain(n)
    return "".join(out), repairs


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a string in ``value`` (dicts, lists, nested; keys too) holds a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE_RE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _without_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        if _LONE_SURROGATE_RE.search(value) is None:
            return value
        return _LONE_SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    return value


def _checked(result: JsonResult, text: str) -> JsonResult:
    """Replace lone surrogates, which only a ``\\udxxx`` escape can produce."""
    if _SURROGATE_ESCAPE_RE.search(text) is None or not holds_lone_surrogate(result.value):
        return result
    value = _without_lone_surrogates(result.value)
    return JsonResult(True, value, (*result.repairs, "lone surrogates"), "")


def loads_lenient(text: str) -> JsonResult:
    """Decode ``text`` as JSON, repairing the usual mistakes of a model.

    Parameters
    ----------
    text
        The body exactly as written between the tags.

    Returns
    -------
    JsonResult
        Never raises: a failure is reported in ``error``.
    """
    try:
        return _checked(JsonResult(True, json.loads(text), (), ""), text)
    except json.JSONDecodeError as exc:
        original_error = _describe(exc)
    except (ValueError, RecursionError) as exc:  # pragma: no cover - pathological nesting
        return JsonResult(False, None, (), f"invalid JSON: {exc}")

    repairs: list[str] = []
    candidate = text
    opened = _FENCE_OPEN_RE.match(candidate)
    if opened:
        candidate = candidate[opened.end() :]
        closed = _FENCE_CLOSE_RE.search(candidate)
        if closed:
            candidate = candidate[: closed.start()]
        repairs.append("code fences")
    try:
        rewritten, more = _rewrite(candidate)
    except RecursionError:  # pragma: no cover - defensive
        return JsonResult(False, None, (), original_error)
    repairs.extend(more)
    for strict in (True, False):
        try:
            value = json.loads(rewritten, strict=strict)
        except (ValueError, RecursionError):
            continue
        if not strict:
            repairs.append("raw control characters in strings")
        return _checked(JsonResult(True, value, tuple(repairs), ""), rewritten)
    return JsonResult(False, None, (), original_error)

"""Text and JSON that never raise, whatever value a tool or a model produced.

Values reach events, transcripts, the live view and the provider from
places we do not control: a tool returns ``os.fsdecode(b"report-\\xff.csv")``
(a lone surrogate, which UTF-8 cannot encode), an object whose ``repr``
raises, a list nested thousands deep. Serialising them must never end a run.

- :func:`escape_surrogates`: a surrogate code point becomes the six
  characters ``\\udcff`` — for text people and models read.
- :func:`safe_repr`, :func:`safe_str`: ``repr``/``str`` or a marker
  ``<unprintable T: ExcType>``.
- :func:`model_json`, :func:`dump_json`: a pydantic model, or a value of a
  ``TypeAdapter`` (a parser event), as one JSON line. The fast path is
  pydantic's own; when it refuses (surrogates, depth, unknown types) the
  fields are converted by hand — surrogates kept exact as ``\\udxxx``
  escapes (``ensure_ascii``), values past :data:`MAX_DEPTH` or of unknown
  types as safe reprs — so a line is always written.
- :func:`load_json_line`: reads such a line back (pydantic's reader rejects
  lone-surrogate escapes; the standard library's accepts them).

This module imports nothing else of ``cortex_kernel``: every layer may use it.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = [
    "MAX_DEPTH",
    "dump_json",
    "escape_surrogates",
    "jsonable",
    "load_json_line",
    "model_json",
    "safe_dumps",
    "safe_repr",
    "safe_str",
    "without_surrogates",
]

#: Nesting kept when a value is converted by hand; deeper parts become a marker.
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")

T = TypeVar("T")


def escape_surrogates(text: str) -> str:
    """``text`` with every surrogate code point written as a ``\\uXXXX`` escape."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def without_surrogates(value: Any) -> Any:
    """``value`` (str, dict, list, tuple, nested) with surrogates escaped in every string."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(without_surrogates(v) for v in value)
    return value


def _marker(value: Any, exc: BaseException) -> str:
    return f"<unprintable {type(value).__name__}: {type(exc).__name__}>"


def safe_repr(value: Any) -> str:
    """``repr(value)`` with surrogates escaped, or a marker when ``repr`` raises."""
    try:
        return escape_surrogates(repr(value))
    except Exception as exc:  # any user __repr__, RecursionError on deep nesting
        return _marker(value, exc)


def safe_str(value: Any) -> str:
    """``str(value)`` with surrogates escaped, or a marker when ``str`` raises."""
    try:
        return escape_surrogates(str(value))
    except Exception as exc:
        return _marker(value, exc)


def jsonable(value: Any, depth: int = 0) -> Any:
    """Plain JSON data for ``value``: unknown types and parts past :data:`MAX_DEPTH` as text.

    pydantic models and dataclasses give their fields (``None`` left out, as
    events are written), enums their value, tuples and sets lists, non-finite floats
    ``None`` (as pydantic writes them). Strings are kept exact.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return jsonable(value.value, depth)
    if depth >= MAX_DEPTH:
        return f"<nested deeper than {MAX_DEPTH} levels>"
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        names = (
            type(value).model_fields
            if isinstance(value, BaseModel)
            else [f.name for f in dataclasses.fields(value)]
        )
        return {
            name: jsonable(item, depth + 1)
            for name in names
            if (item := getattr(value, name, None)) is not None
        }
    if isinstance(value, Mapping):
        return {
            k if isinstance(k, str) else safe_str(k): jsonable(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, depth + 1) for v in value]
    return safe_str(value)


def safe_dumps(value: Any) -> str:
    """``json.dumps`` for reading that never raises: unknown types as text, any depth.

    Non-ASCII text stays readable; surrogates are escaped (the result is
    always encodable as UTF-8).
    """
    try:
        text = json.dumps(value, ensure_ascii=False, default=safe_str)
    except (ValueError, TypeError, RecursionError):  # circular, too deep
        text = json.dumps(jsonable(value), ensure_ascii=False)
    return escape_surrogates(text)


def model_json(model: BaseModel) -> str:
    """One JSON line for ``model`` (fields that are ``None`` left out); never raises."""
    try:
        line = model.model_dump_json(exclude_none=True)
    except Exception:  # PydanticSerializationError, depth, a field type pydantic cannot write
        return json.dumps(jsonable(model), ensure_ascii=True)
    return _checked(line, model)


def dump_json(adapter: TypeAdapter[Any], value: object) -> str:
    """One JSON line for ``value``, of ``adapter``'s type (``None`` left out); never raises."""
    try:
        line = adapter.dump_json(value, exclude_none=True).decode()
    except Exception:  # as in model_json
        return json.dumps(jsonable(value), ensure_ascii=True)
    return _checked(line, value)


def _checked(line: str, value: object) -> str:
    if "\ufffd" in line:
        # pydantic writes a surrogate in a dict *key* as U+FFFD instead of
        # refusing (found by ``make fuzz``); the slow path keeps it exact.
        return json.dumps(jsonable(value), ensure_ascii=True)
    return line


def load_json_line(adapter: TypeAdapter[T], line: str | bytes) -> T:
    """Validate one JSON line with ``adapter``, accepting lone-surrogate escapes.

    Raises
    ------
    pydantic.ValidationError
        When the line is not valid JSON or not valid for ``adapter``.
    """
    try:
        return adapter.validate_json(line)
    except ValidationError as error:
        raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
        if b"\\u" not in raw:
            raise
        try:
            data = json.loads(line)
        except ValueError:
            raise error from None
        return adapter.validate_python(data)

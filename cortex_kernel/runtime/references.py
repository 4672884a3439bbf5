"""``$var`` references inside action bodies (docs/protocol.md#actions).

Pure functions, no I/O. A reference is written ``$name``, ``${name}`` or with
a path, ``$name.field[0]`` / ``${name.field[0]}``. Names start with a letter or
``_`` so prices such as ``$5`` are never references; ``$$`` is a literal
dollar sign.

Only JSON *string values* are scanned: dict keys and numbers are left alone.
A string that is exactly one reference is replaced by the value itself,
keeping its type (``"$rows"`` becomes the list); a reference inside a longer
string is interpolated as text (``str(value)``, or JSON for dicts and lists
so the model reads what it would have written).
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import VariableReferenceError
from ..safejson import safe_dumps, safe_str

__all__: list[str] = []

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"(?:\.{_NAME}|\[\d+\])*"
# ``$$`` is matched first so that ``$$name`` is a literal ``$name``.
_REFERENCE = re.compile(rf"\$\$|\$\{{\s*({_NAME})({_PATH})\s*\}}|\$({_NAME})({_PATH})")
_STEP = re.compile(rf"\.({_NAME})|\[(\d+)\]")

PathStep = str | int


@dataclass(frozen=True, slots=True)
class Reference:
    """One ``$var`` reference found in a string.

    Attributes
    ----------
    name
        The variable name (``rows`` in ``$rows.items[0]``).
    path
        The steps after the name: ``str`` for ``.field``, ``int`` for ``[i]``.
    text
        The reference exactly as written.
    start, end
        Its offsets in the string that holds it.
    """

    name: str
    path: tuple[PathStep, ...]
    text: str
    start: int
    end: int


def _parse_path(path: str) -> tuple[PathStep, ...]:
    steps: list[PathStep] = []
    for match in _STEP.finditer(path):
        field, index = match.groups()
        steps.append(field if field is not None else int(index))
    return tuple(steps)


def _reference(match: re.Match[str]) -> Reference:
    """The reference a ``_REFERENCE`` match names (any match but ``$$``)."""
    braced = match.group(1) is not None
    name = match.group(1) if braced else match.group(3)
    path = match.group(2) if braced else match.group(4)
    return Reference(name, _parse_path(path or ""), match.group(0), match.start(), match.end())


def _iter_string(text: str) -> Iterator[Reference]:
    for match in _REFERENCE.finditer(text):
        if match.group(0) != "$$":
            yield _reference(match)


def find_references(value: Any) -> list[Reference]:
    """List the references inside the string values of a JSON-like value.

    Parameters
    ----------
    value
        A parsed JSON body: dicts, lists and scalars, nested.

    Returns
    -------
    list[Reference]
        In document order (dict insertion order, list order, left to right).
    """
    found: list[Reference] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "$" in item:
                found.extend(_iter_string(item))
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return found


_OPAQUE = (
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    types.GeneratorType,
    types.CoroutineType,
    types.AsyncGeneratorType,
)


def _opaque(value: Any) -> str | None:
    """What ``value`` is when a path must not step through it (code, not data)."""
    if isinstance(value, _OPAQUE):
        return type(value).__name__
    if isinstance(value, type):
        return "class"
    if callable(value):
        return "function" if inspect.isroutine(value) else "callable"
    return None


def _attribute(current: Any, step: str, walked: str) -> Any:
    # Model output writes these paths: only public attributes of plain data,
    # never `_` names (no __globals__, __class__…), never into or out of code.
    if step.startswith("_"):
        raise VariableReferenceError(
            f"${walked}.{step} is not allowed: a path never reads names starting with '_'"
        )
    kind = _opaque(current)
    if kind is None:
        try:
            found = getattr(current, step)
        except AttributeError:
            raise
        except Exception as exc:  # a property that raised: the path names nothing usable
            raise AttributeError(f"{type(exc).__name__} reading .{step}") from None
        kind = _opaque(found)
        if kind is None:
            return found
    raise VariableReferenceError(
        f"${walked}.{step} is not allowed: it reaches a {kind}; a path reads keys, indexes "
        "and public attributes of plain data only"
    )


def path_text(path: Sequence[PathStep]) -> str:
    """``path`` as written after a name: ``.field`` for a key, ``[0]`` for an index."""
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)


def resolve_path(value: Any, path: Sequence[PathStep], *, label: str = "value") -> Any:
    """Follow ``path`` into ``value``: keys for mappings, ``[i]`` indexes, public attributes.

    Attribute steps are limited: a name starting with ``_`` is refused, and
    so is any step into or onto a module, class, function, frame or other
    code object (``$f.__globals__.os.environ`` cannot be written).

    Raises
    ------
    VariableReferenceError
        When a step names nothing or is not allowed; the message shows how far it got.
    """
    current = value
    walked = label
    for step in path:
        try:
            if isinstance(step, int) or isinstance(current, Mapping):
                current = current[step]
            else:
                current = _attribute(current, step, walked)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            shown = path_text((step,))
            raise VariableReferenceError(
                f"${walked}{shown} does not exist: ${walked} is a "
                f"{type(current).__name__} ({exc.__class__.__name__}); check the path"
            ) from None
        walked += path_text((step,))
    return current


def _as_text(value: Any) -> str:
    # Never raises: a value whose str() raises becomes a marker (see safejson).
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple | bool) or value is None:
        return safe_dumps(value)
    return safe_str(value)


def _lookup_reference(ref: Reference, lookup: Callable[[str], Any]) -> Any:
    try:
        base = lookup(ref.name)
    except KeyError:
        raise VariableReferenceError(
            f"{ref.text} names no variable: no action produced '{ref.name}' "
            "(check the output_key or action id, or add a depends_on)"
        ) from None
    return resolve_path(base, ref.path, label=ref.name)


def _substitute_string(text: str, lookup: Callable[[str], Any]) -> Any:
    if "$" not in text:
        return text
    refs = list(_iter_string(text))
    if len(refs) == 1 and refs[0].start == 0 and refs[0].end == len(text):
        return _lookup_reference(refs[0], lookup)

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return _as_text(_lookup_reference(_reference(match), lookup))

    return _REFERENCE.sub(replace, text)


def substitute(value: Any, lookup: Callable[[str], Any]) -> Any:
    """Replace every reference in the string values of ``value``.

    Parameters
    ----------
    value
        A JSON-like value (not modified; a new one is returned).
    lookup
        Returns a variable's value by name; raises ``KeyError`` when unknown.

    Returns
    -------
    Any
        The value with references filled in: whole-string references keep the
        type of what they name, embedded ones become text.

    Raises
    ------
    VariableReferenceError
        For the first reference (or path) that names nothing.
    """
    if isinstance(value, str):
        return _substitute_string(value, lookup)
    if isinstance(value, Mapping):
        return {key: substitute(item, lookup) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, lookup) for item in value]
    if isinstance(value, tuple):
        return tuple(substitute(item, lookup) for item in value)
    return value


def interpolate_text(
    text: str, lookup: Callable[[str], Any], unresolved: list[str] | None = None
) -> str:
    """Fill the references of prose (a final response) as text, leniently.

    A reference that names nothing, or a path its variable does not have,
    is left as written (prose such as "costs $x" must not break an answer)
    and, with ``unresolved``, said there (``$t.f does not exist: …``); ``$$``
    becomes ``$``.
    """
    if "$" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        try:
            return _as_text(_lookup_reference(_reference(match), lookup))
        except VariableReferenceError as error:
            if unresolved is not None:
                unresolved.append(str(error))
            return match.group(0)

    return _REFERENCE.sub(replace, text)

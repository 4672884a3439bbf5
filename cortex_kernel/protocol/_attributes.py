"""Attributes of an opening tag, read the lenient way (docs/protocol.md#contract, #actions).

The tag text handed in here is what lies between the element name and the
closing ``>`` (the scanner guarantees it holds neither ``<`` nor ``>``).
Names are case-insensitive (lower-cased, ``-`` read as ``_``); values may be
double-quoted, single-quoted, bare, or a bracketed list, and an unterminated
quote or bracket ends at the ``>`` — which is how the seed notes'
``depends_on=["a","b">`` still reads as two ids.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__: list[str] = []  # used inside the protocol package only

# name[=value] with the value double-quoted, single-quoted, bracketed or
# bare (a quote or bracket left open ends with the tag), or one junk character.
_ATTR_RE = re.compile(
    r"""([^\s=/"'\[\]]+)(?:\s*=\s*(?:"([^"]*)"?|'([^']*)'?|(\[[^\]]*\]?)|([^\s"'\[\]]+)))?|(\S)"""
)
_CACHE: Final[dict[str, TagAttributes]] = {}  # the tags the common case does not read
_CACHE_SIZE: Final = 256
_NAME_PARTS: Final[dict[str, str]] = {}  # checked name parts (`` id=``) to their names
_NAME_PARTS_SIZE: Final = 256
_ID_RE: Final = re.compile(r"""[^\s,\[\]"']+""")


class TagAttributes(NamedTuple):
    """What :func:`parse_attributes` read.

    Attributes
    ----------
    attrs
        Lower-cased names to unquoted values (the first of duplicates wins).
    self_closing
        The tag ended with ``/>``.
    junk
        Characters that could not be read as attributes (for a warning).
    """

    attrs: dict[str, str]
    self_closing: bool
    junk: str


def parse_attributes(text: str) -> TagAttributes:
    """Read the attributes of an opening tag.

    Parameters
    ----------
    text
        The tag between its name and ``>``, e.g. `` type="tool" id=a1``.

    Returns
    -------
    TagAttributes
        Never raises.
    """
    attrs, self_closing, junk = read_attributes(text)
    return TagAttributes(attrs, self_closing, junk)


def read_attributes(text: str) -> tuple[dict[str, str], bool, str]:
    """:func:`parse_attributes` as a plain ``(attrs, self_closing, junk)``: what the
    parser calls, once per tag (no named tuple to make).

    The common case, read with one split: ``name="value"`` pairs, each after
    whitespace, names lower-case ASCII identifiers without duplicates. Cut
    at the quotes, such a tag alternates name parts (`` name=``) and values,
    and ends with whitespace at most. A name part is checked once and
    remembered (a stream repeats a handful of them), so a tag costs a split
    and a dict lookup per attribute. Anything else is read by
    :func:`read_lenient` (and cached).
    """
    parts = text.split('"')
    last = len(parts) - 1
    if not last & 1 and (not parts[last] or parts[last].isspace()):
        attrs: dict[str, str] = {}
        names = _NAME_PARTS
        for i in range(0, last, 2):
            name = names.get(parts[i])
            if name is None:
                name = _name_of_part(parts[i])
                if name is None:
                    break
            if name in attrs:
                break  # a duplicate: the first wins, as read_lenient reads it
            attrs[name] = parts[i + 1]
        else:
            return attrs, False, ""
    cached = _CACHE.get(text)
    if cached is not None:
        return dict(cached.attrs), cached.self_closing, cached.junk
    result = read_lenient(text)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    _CACHE[text] = TagAttributes(dict(result.attrs), result.self_closing, result.junk)
    return result.attrs, result.self_closing, result.junk


def _name_of_part(part: str) -> str | None:
    """The name of a name part (whitespace, a lower-case ASCII identifier, ``=``),
    remembered; ``None`` for anything else (a name to normalise, junk)."""
    if len(part) < 3 or part[-1] != "=" or not part[0].isspace():
        return None
    name = part[:-1].lstrip()
    if not (name.isascii() and name.isidentifier() and name.islower()):
        return None
    if len(_NAME_PARTS) >= _NAME_PARTS_SIZE:
        _NAME_PARTS.clear()
    _NAME_PARTS[part] = name
    return name


def read_lenient(text: str) -> TagAttributes:
    """:func:`parse_attributes` without its fast path and cache: every tag, one way.

    The common case that :func:`parse_attributes` reads in one go gives
    the same result here (a test checks it).
    """
    body = text.rstrip()
    self_closing = body.endswith("/")
    if self_closing:
        body = body[:-1]
    attrs: dict[str, str] = {}
    junk: list[str] = []
    for name, double, single, bracket, bare, stray in _ATTR_RE.findall(body):
        if stray:
            junk.append(stray)
            continue
        key = name.lower().replace("-", "_")
        if key not in attrs:
            attrs[key] = double or single or bracket or bare
    return TagAttributes(attrs, self_closing, "".join(junk))


def split_ids(value: str) -> tuple[str, ...]:
    """Read ids written ``a,b``, ``a b``, ``["a","b"]``, ``[a, b]`` or ``["a","b"``.

    Parameters
    ----------
    value
        The ``depends_on`` value as written.

    Returns
    -------
    tuple of str
        The ids in the order written, without duplicates.
    """
    if value.isidentifier():  # the common case: one id, nothing to split
        return (value,)
    return tuple(dict.fromkeys(_ID_RE.findall(value)))

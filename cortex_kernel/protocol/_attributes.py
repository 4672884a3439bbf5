"""Attributes of an opening tag, read the lenient way (SPEC §2, §2.1).

The tag text handed in here is what lies between the element name and the
closing ``>`` (the scanner guarantees it holds neither ``<`` nor ``>``).
Names are case-insensitive (lower-cased, ``-`` read as ``_``); values may be
double-quoted, single-quoted, bare, or a bracketed list, and an unterminated
quote or bracket ends at the ``>`` — which is how the seed notes'
``depends_on=["a","b">`` still reads as two ids.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

__all__ = ["TagAttributes", "parse_attributes", "read_lenient", "split_ids"]

# name[=value] with the value double-quoted, single-quoted, bracketed or
# bare (a quote or bracket left open ends with the tag), or one junk character.
_ATTR_RE = re.compile(
    r"""([^\s=/"'\[\]]+)(?:\s*=\s*(?:"([^"]*)"?|'([^']*)'?|(\[[^\]]*\]?)|([^\s"'\[\]]+)))?|(\S)"""
)
# The common case, read in one go: lower-case names, double-quoted values
# (possessive: nothing to backtrack into, and measurably faster).
_SIMPLE_ATTRS_RE = re.compile(r'(?:\s++[a-z_]++="[^"]*+")*+\s*+')
_SIMPLE_PAIR_RE = re.compile(r'\s+([a-z_]+)="([^"]*)"')
_CACHE: dict[str, TagAttributes] = {}  # the tags the common case does not read
_CACHE_SIZE = 256
_tuple_new: Any = tuple.__new__
_ID_RE = re.compile(r"""[^\s,\[\]"']+""")


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
    if _SIMPLE_ATTRS_RE.fullmatch(text):
        pairs = _SIMPLE_PAIR_RE.findall(text)
        simple = dict(pairs)
        if len(simple) == len(pairs):  # no duplicate (the first would win)
            # tuple.__new__: a NamedTuple's own __new__ is a Python call.
            result: TagAttributes = _tuple_new(TagAttributes, (simple, False, ""))
            return result
    cached = _CACHE.get(text)
    if cached is not None:
        return TagAttributes(dict(cached.attrs), cached.self_closing, cached.junk)
    result = read_lenient(text)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    _CACHE[text] = TagAttributes(dict(result.attrs), result.self_closing, result.junk)
    return result


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

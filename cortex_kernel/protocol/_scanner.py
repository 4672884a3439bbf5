"""The two scanning primitives of the parser: tags at a ``<``, and bodies.

:func:`classify_tag` looks at a ``<`` and answers ``MATCH`` (a known tag,
complete), ``NO`` (plain text: not a tag the current state knows) or
``MAYBE`` (could still become one: wait for more input). Every answer is
*prefix-stable*: a ``MATCH`` or ``NO`` given on part of the input is the
answer the whole input would give. That is what makes the parser's output
independent of how the input is chunked. ``final=True`` (end of stream)
turns ``MAYBE`` into ``NO``.

A tag is ``<name`` + whitespace, ``/`` or ``>`` + at most
:data:`MAX_ATTRS` characters other than ``<``/``>`` + ``>``; a closing tag
is ``</name`` + at most :data:`MAX_ATTRS` spaces + ``>``. So a stray
``<action`` in prose holds back at most that much text before it is
released as text. :func:`tag_pattern` compiles, for one parser state, the
regex of exactly the tags it knows, so a search skips every other ``<`` in
C; only the *last* ``<`` of a buffer can still become a tag (any earlier one
is followed by a ``<``, which no tag contains), and only it is looked at by
hand (:func:`could_become_tag`).

:class:`BodyScanner` walks an action or feed body with one regex that skips
whole JSON tokens (plain runs, complete double-quoted strings, ``<`` not
followed by ``/``) and handles by hand only what it stops at (``'``, an
unfinished string, ``</``), tracking across chunks whether it is inside a
JSON string so that ``</action>`` inside a string
does not end the action. A ``'`` opens a string only where a JSON value or
key may start (after ``{``, ``[``, ``,`` or ``:``), so an apostrophe in
prose around a fenced body does not swallow the closing tag.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__: list[str] = []  # used inside the protocol package only

MATCH: Final = 0
MAYBE: Final = 1
NO: Final = 2

MAX_ATTRS: Final = 2000

_NAME_RE = re.compile(r"[A-Za-z_]*")
_SPACE_RE = re.compile(r"\s*")
_OPEN_NAME_END_RE = re.compile(r"[\s/]")
_TAG_END_RE = re.compile(r"[<>]")
# Complete JSON tokens that cannot hide a closing tag: plain runs, whole
# double-quoted strings, and ``<`` not followed by ``/``. The scan stops at
# anything else (``'``, an unfinished string, ``</``) and handles it by hand.
_JSON_RUN_RE = re.compile(r"""(?:[^"'<]+|"[^"\\]*(?:\\.[^"\\]*)*"|<(?=[^/]))*""", re.DOTALL)
#: ``json_run(buf, pos)``: the run of such tokens at ``pos`` (the scanner's first step).
json_run: Final = _JSON_RUN_RE.match
_IN_DOUBLE_RE = re.compile(r'[\\"]')
_IN_SINGLE_RE = re.compile(r"[\\']")
_VALUE_STARTS: Final = frozenset("{[,:")


class Tag(NamedTuple):
    """A complete tag known to the current state.

    Attributes
    ----------
    closing
        ``</name>`` rather than ``<name …>``.
    name
        The element name, lower-cased.
    attr_text
        What lies between the name and ``>`` (empty for closing tags).
    end
        Index just past the ``>`` in the scanned buffer.
    """

    closing: bool
    name: str
    attr_text: str
    end: int


def tag_pattern(opens: frozenset[str], closes: frozenset[str]) -> re.Pattern[str]:
    """The regex of the tags a state knows, case-insensitive.

    Groups: 1 the name of a closing tag, 2 the name of an opening tag, 3 its
    attribute text. A name set may be empty.
    """
    never = "(?!)"
    close_names = "|".join(sorted(closes)) or never
    open_names = "|".join(sorted(opens)) or never
    return re.compile(
        rf"<(?:/({close_names})\s{{0,{MAX_ATTRS}}}"
        rf"|({open_names})(?=[\s/>])([^<>]{{0,{MAX_ATTRS}}}))>",
        re.IGNORECASE,
    )


def could_become_tag(buf: str, lt: int, opens: frozenset[str], closes: frozenset[str]) -> bool:
    """Whether ``buf[lt:]`` (no complete tag) is the beginning of a known tag."""
    n = len(buf)
    j = lt + 1
    if j >= n:
        return bool(opens or closes)
    closing = buf[j] == "/"
    names = closes if closing else opens
    j += closing
    k = _NAME_RE.match(buf, j).end()  # type: ignore[union-attr]  # `*` always matches
    name = buf[j:k].lower()
    if k >= n:
        return any(known.startswith(name) for known in names)
    if name not in names:
        return False
    if n - k > MAX_ATTRS:
        return False
    if closing:  # only spaces so far, up to the end of the buffer
        return _SPACE_RE.match(buf, k).end() >= n  # type: ignore[union-attr]
    # No ``>`` yet (or it would be complete): still a tag if no ``<`` came.
    return _OPEN_NAME_END_RE.match(buf, k) is not None and _TAG_END_RE.search(buf, k) is None


def classify_tag(
    buf: str,
    lt: int,
    pattern: re.Pattern[str],
    opens: frozenset[str],
    closes: frozenset[str],
    final: bool,
) -> tuple[int, Tag | None]:
    """Decide whether the ``<`` at ``buf[lt]`` starts a tag known here.

    Parameters
    ----------
    buf
        The buffered input.
    lt
        Index of a ``<`` in ``buf``.
    pattern
        ``tag_pattern(opens, closes)``.
    opens, closes
        Lower-case names of the opening and closing tags the current state
        recognises; any other tag is text.
    final
        No more input will come.

    Returns
    -------
    tuple
        ``(MATCH, Tag)``, ``(MAYBE, None)`` or ``(NO, None)``.
    """
    whole = pattern.match(buf, lt)
    if whole is not None:
        closing_name, open_name, attr_text = whole.groups()
        if closing_name is not None:
            return MATCH, Tag(True, closing_name.lower(), "", whole.end())
        return MATCH, Tag(False, open_name.lower(), attr_text, whole.end())
    if not final and could_become_tag(buf, lt, opens, closes):
        return MAYBE, None
    return NO, None


class BodyScanner:
    """Finds the closing tag of a JSON body, across any number of chunks.

    Parameters
    ----------
    close_name
        ``"action"`` or ``"context_feed"``.
    """

    __slots__ = ("_closes", "_escape", "_last", "_pattern", "_quote")

    def __init__(self, close_name: str) -> None:
        self._closes = frozenset((close_name,))
        self._pattern = _BODY_CLOSE_PATTERNS.get(close_name) or tag_pattern(
            frozenset(), self._closes
        )
        self._quote = ""  # the quote of the JSON string we are in, or ""
        self._escape = False  # the previous chunk ended on a backslash in a string
        self._last = ""  # last non-space character seen outside strings

    def scan(self, buf: str, start: int, final: bool) -> tuple[Tag | None, int]:
        """Scan ``buf[start:]``, the body input not yet scanned.

        Returns
        -------
        tuple
            ``(tag, index)`` when the closing tag was found at ``buf[index:]``
            (``tag.end`` is an index in ``buf`` too); otherwise ``(None,
            index)``: ``buf[start:index]`` is body, the rest (a possible start
            of the closing tag) must be scanned again with more input.
        """
        n = len(buf)
        pos = start
        quote = self._quote
        last = self._last
        mark = start  # `last` accounts for buf[:mark]; later text is looked at lazily
        if self._escape and n > start:
            self._escape = False
            pos = start + 1
        while pos < n:
            if quote:
                found = (_IN_DOUBLE_RE if quote == '"' else _IN_SINGLE_RE).search(buf, pos)
                if found is None:
                    self._quote, self._last = quote, last
                    return None, n
                p = found.start()
                if buf[p] == "\\":
                    if p + 1 >= n:
                        self._escape = True
                        self._quote, self._last = quote, last
                        return None, n
                    pos = p + 2
                    continue
                last = quote
                quote = ""
                pos = mark = p + 1
                continue
            pos = _JSON_RUN_RE.match(buf, pos).end()  # type: ignore[union-attr]
            if pos >= n:
                break
            c = buf[pos]
            if c == "<":  # a `</`
                status, tag = classify_tag(buf, pos, self._pattern, _NO_NAMES, self._closes, final)
                if status != NO:
                    before = buf[mark:pos].rstrip()
                    self._quote, self._last = quote, before[-1] if before else last
                    return tag, pos
                last = "<"
            else:  # a quote that opens a string, or an apostrophe
                before = buf[mark:pos].rstrip()
                prev = before[-1] if before else last
                if c == '"' or prev in _VALUE_STARTS:
                    quote = c
                else:
                    last = c
            pos = mark = pos + 1
        before = buf[mark:].rstrip()
        self._quote, self._last = quote, before[-1] if before else last
        return None, n


_NO_NAMES: Final[frozenset[str]] = frozenset()
_BODY_CLOSE_PATTERNS: Final = {
    name: tag_pattern(frozenset(), frozenset((name,))) for name in ("action", "context_feed")
}

"""The incremental, sans-IO parser of the streaming protocol (SPEC §2).

Strategy
--------
Text goes in with :meth:`Parser.feed`, events come out; nothing here awaits,
sleeps, reads or raises. The parser is a small state machine whose states
and transitions all live in this module (h11's rule 1):

====================  ==========================================  ===================
state                 recognised tags (anything else is text)     text becomes
====================  ==========================================  ===================
``OUTSIDE``           ``<thought>`` ``<action>`` ``<response>``   ``text``
                      ``<context_feed>``
``THOUGHT``           ``</thought>`` ``<action>``                 ``thought_delta``
                      ``<context_feed>``
``RESPONSE``          ``</response>``                             ``response_delta``
``ACTION``            ``</action>`` outside a JSON string         (the body)
``FEED``              ``</context_feed>`` outside a JSON string   (the body)
====================  ==========================================  ===================

``ACTION`` and ``FEED`` return to the state they were opened from
(``OUTSIDE`` or ``THOUGHT``). In the text states one regex search finds the
next tag this state knows (every other ``<`` is text); when there is none,
the last ``<`` of the buffer may still become one
(:func:`~._scanner.could_become_tag`), and it and what follows are held back
until more input arrives. Text is emitted as soon as it is known
to be text, so a widget streams it. Bodies are scanned by
:class:`~._scanner.BodyScanner` and kept until their closing tag, which
produces the ``action_parsed`` (or ``action_error``) event in the very
``feed`` call that delivers its ``>`` (early dispatch, SPEC §2.2).

Speed (SPEC §2.2 item 5) comes from doing per chunk as little Python as
possible: a chunk of plain text in a text state is one ``in`` test and one
event (built without pydantic validation, see :mod:`._fast`); a chunk that
cannot decide anything — part of a body with no ``>``, or part of a held
opening tag with neither ``<`` nor ``>`` — is only appended to a list; all
other work is one pass with a cursor over the buffer (:meth:`Parser._run`).
None of this changes which events come out, only when the work is done.

Spans
-----
Every event carries ``span = (start, end)``, character offsets into the
whole stream. Concatenating ``input[start:end]`` over the events, in order,
gives back the input exactly: spans are contiguous and never overlap.

- ``text``, ``thought_delta``, ``response_delta``: exactly their text.
- ``thought_start``, ``response_start``, ``action_open``: the opening tag.
- ``thought_end``, ``response_end``: the closing tag; empty when
  ``truncated`` (or for a self-closing ``<thought/>``).
- ``action_parsed`` / ``action_error`` of an action: its body plus
  ``</action>``; for an action cut off by the end of the stream, the body
  only. An action error for a self-closing ``<action …/>`` has an empty
  span (the tag is covered by its ``action_open``).
- ``context_feed`` (or the ``action_error`` of a bad or truncated feed):
  the whole element, ``<context_feed …>`` to ``</context_feed>``; no event
  is emitted when the feed's opening tag arrives.
- ``warning``: empty, placed where the event that it is about starts or
  ends.

Ids
---
An action without an id gets ``ids.new()`` when its tag is read, and
``action_open.id`` is that id. A written id (attribute, or a body field
when there is no attribute) is claimed with ``ids.claim`` when the action
is otherwise valid; a duplicate is an ``action_error``. When the id is only
in the body, ``action_open`` announced the generated id and a ``warning``
(``details = {"open_id", "id"}``) links the two.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from ._actions import build_action, build_feed
from ._attributes import parse_attributes
from ._fast import constructor, text_event_maker
from ._scanner import MAX_ATTRS, BodyScanner, Tag, could_become_tag, tag_pattern
from .events import (
    ActionErrorEvent,
    ActionOpen,
    ActionParsed,
    ContextFeed,
    ParserEvent,
    ResponseDelta,
    ResponseEnd,
    ResponseStart,
    Text,
    ThoughtDelta,
    ThoughtEnd,
    ThoughtStart,
    Warning,
)
from .models import IdAllocator

__all__ = ["Parser"]

_TextEvent = Text | ThoughtDelta | ResponseDelta
_MakeText = Callable[[tuple[int, int], str], _TextEvent]


class _State:
    """A state of the parser (a sentinel, compared by identity).

    ``opens``/``closes`` are the tags it recognises (``tag_re`` finds them),
    ``make_text`` builds the event for its text (``None`` in the body states).
    """

    __slots__ = ("closes", "make_text", "name", "opens", "tag_re")

    def __init__(
        self,
        name: str,
        opens: tuple[str, ...] = (),
        closes: tuple[str, ...] = (),
        make_text: _MakeText | None = None,
    ) -> None:
        self.name = name
        self.opens = frozenset(opens)
        self.closes = frozenset(closes)
        self.make_text = make_text
        self.tag_re = tag_pattern(self.opens, self.closes)

    def __repr__(self) -> str:
        return f"<state {self.name}>"


OUTSIDE: Final = _State(
    "OUTSIDE", ("thought", "action", "response", "context_feed"), (), text_event_maker(Text)
)
THOUGHT: Final = _State(
    "THOUGHT", ("action", "context_feed"), ("thought",), text_event_maker(ThoughtDelta)
)
RESPONSE: Final = _State("RESPONSE", (), ("response",), text_event_maker(ResponseDelta))
ACTION: Final = _State("ACTION")
FEED: Final = _State("FEED")

_OPEN_TAG_PREFIX_RE: Final = re.compile(r"<[A-Za-z_]+[\s/]")
_ACTION_SCANNER: Final = partial(BodyScanner, "action")
_FEED_SCANNER: Final = partial(BodyScanner, "context_feed")
_FALSE_WORDS: Final = frozenset(("false", "no", "0", "off"))
_TRUE_WORDS: Final = frozenset(("true", "yes", "1", "on", ""))

# Hot-path events are built from values checked here, without validation.
_thought_start = constructor(ThoughtStart)
_thought_end = constructor(ThoughtEnd)
_response_start = constructor(ResponseStart)
_response_end = constructor(ResponseEnd)
_action_open = constructor(ActionOpen)
_action_parsed = constructor(ActionParsed)
_context_feed = constructor(ContextFeed)


class Parser:
    """Turns streamed protocol text into parser events (SPEC §2, §9).

    Parameters
    ----------
    ids
        The id allocator of the run, shared by the parsers of its turns so
        that generated ids never repeat and duplicates are caught; a fresh
        :class:`~cortex_kernel.protocol.models.IdAllocator` by default.

    Examples
    --------
    >>> parser = Parser()
    >>> events = parser.feed('<thought>look <action type="tool">{"name": "ls"}</action>')
    >>> [e.type for e in events]
    ['thought_start', 'thought_delta', 'action_open', 'action_parsed']
    >>> [e.type for e in parser.close()]
    ['thought_end']
    """

    def __init__(self, ids: IdAllocator | None = None) -> None:
        self._ids = ids if ids is not None else IdAllocator()
        self._buf = ""  # input received but not yet accounted for by an event
        # Input after self._buf, not looked at yet: a chunk of a body without a
        # `>`, or of a held opening tag without `<` or `>`, cannot change a thing.
        self._pending: list[str] = []
        self._pending_size = 0  # characters in self._pending (opening tags only)
        self._held_open_tag = False  # self._buf is `<name ` + attributes, no `>` yet
        self._base = 0  # stream offset of self._buf[0]
        self._state = OUTSIDE
        self._fast: _MakeText | None = OUTSIDE.make_text
        self._final = True  # of the open response
        # The open action or feed.
        self._parent = OUTSIDE
        self._scanner = BodyScanner("action")
        self._parts: list[str] = []
        self._elem_start = 0  # stream offset of the opening tag
        self._body_start = 0  # stream offset of the body
        self._attrs: dict[str, str] = {}
        self._open_id = ""

    # -- public API ---------------------------------------------------------

    def feed(self, text: str) -> list[ParserEvent]:
        """Take the next chunk of the stream.

        Parameters
        ----------
        text
            Any text, of any length, cut anywhere.

        Returns
        -------
        list of ParserEvent
            The events this chunk completes, in stream order. Never raises.
        """
        fast = self._fast
        if fast is not None:
            if not self._buf:
                if "<" not in text:
                    # The hot path: plain text in a text state.
                    if not text:
                        return []
                    start = self._base
                    end = self._base = start + len(text)
                    return [fast((start, end), text)]
            elif (
                self._held_open_tag
                and "<" not in text
                and ">" not in text
                and len(self._buf) + self._pending_size + len(text) < MAX_ATTRS
            ):
                # Inside the attributes of a held opening tag only `>`, `<` or
                # the length limit can decide anything: wait for them.
                self._pending.append(text)
                self._pending_size += len(text)
                return []
            self._held_open_tag = False
            self._take_pending(text)
        elif ">" not in text:
            # In a body, only a chunk with a `>` can complete the closing tag:
            # keep the others unscanned until one arrives (or the stream ends).
            self._pending.append(text)
            return []
        else:
            self._take_pending(text)
        events: list[ParserEvent] = []
        self._run(events, final=False)
        return events

    def close(self) -> list[ParserEvent]:
        """End the stream: release held text and end open elements.

        Returns
        -------
        list of ParserEvent
            The remaining events; open elements end with ``truncated=True``
            and an action cut off before ``</action>`` becomes an
            ``action_error`` (it is never dispatched). Never raises. The
            parser may be fed again afterwards, as a new top-level stream
            whose offsets continue.
        """
        self._take_pending("")
        events: list[ParserEvent] = []
        self._run(events, final=True)
        state = self._state
        if state is ACTION or state is FEED:
            self._truncate_body(events)
            state = self._state
        end = self._base
        if state is THOUGHT:
            events.append(ThoughtEnd(span=(end, end), truncated=True))
        elif state is RESPONSE:
            events.append(ResponseEnd(span=(end, end), final=self._final, truncated=True))
        self._enter(OUTSIDE)
        return events

    # -- the state machine ----------------------------------------------------

    def _take_pending(self, text: str) -> None:
        if self._pending:
            self._pending.append(text)
            text = "".join(self._pending)
            self._pending = []
            self._pending_size = 0
        self._buf += text

    def _enter(self, state: _State) -> None:
        self._state = state
        self._fast = state.make_text

    def _run(self, events: list[ParserEvent], final: bool) -> None:
        """Account for as much of ``self._buf`` as can be decided now.

        One loop over the buffer with a cursor ``i`` (``buf[:i]`` is
        accounted for), so that a chunk holding many tags is not sliced once
        per tag; the buffer is cut once, at the end.
        """
        buf = self._buf
        base = self._base
        n = len(buf)
        i = 0
        rfind = buf.rfind
        while i < n:
            state = self._state
            make_text = state.make_text
            if make_text is None:  # in a body
                found, index = self._scanner.scan(buf, i, final)
                if found is None:
                    if index > i:
                        self._parts.append(buf[i:index])
                    i = index
                    break
                self._parts.append(buf[i:index])
                body = "".join(self._parts)
                self._parts = []
                i = found.end
                if state is ACTION:
                    self._finish_action(events, (self._body_start, base + i), body)
                else:
                    self._finish_feed(events, (self._elem_start, base + i), self._attrs, body)
                self._enter(self._parent)
                continue
            whole = state.tag_re.search(buf, i)
            if whole is None:
                # No complete tag: only the last `<` may still become one.
                lt = rfind("<", i)
                if lt < 0 or final or not could_become_tag(buf, lt, state.opens, state.closes):
                    events.append(make_text((base + i, base + n), buf[i:] if i else buf))
                    i = n
                    break
                if lt > i:
                    events.append(make_text((base + i, base + lt), buf[i:lt]))
                self._held_open_tag = _OPEN_TAG_PREFIX_RE.match(buf, lt) is not None
                i = lt
                break
            lt = whole.start()
            if lt > i:
                events.append(make_text((base + i, base + lt), buf[i:lt]))
            closing_name, open_name, attr_text = whole.groups()
            if closing_name is not None:
                tag = Tag(True, closing_name.lower(), "", whole.end())
            else:
                tag = Tag(False, open_name.lower(), attr_text, whole.end())
            i = tag.end
            self._handle_tag(tag, (base + lt, base + i), events)
        self._buf = buf[i:] if i < n else ""
        self._base = base + i

    def _handle_tag(self, tag: Tag, span: tuple[int, int], events: list[ParserEvent]) -> None:
        if tag.closing:
            if tag.name == "thought":
                events.append(_thought_end(span=span))
            else:
                events.append(_response_end(span=span, final=self._final))
            self._enter(OUTSIDE)
            return
        name = tag.name
        end = span[1]
        if name == "thought" and not tag.attr_text:
            events.append(_thought_start(span=span))
            self._enter(THOUGHT)
            return
        attrs, self_closing, junk = parse_attributes(tag.attr_text)
        if name == "action":
            written = attrs.get("id", "").strip()
            action_id = written or self._ids.new()
            in_thought = self._state is THOUGHT
            # A copy: the event is handed out, the parser still reads its own attrs.
            opened = _action_open(span=span, id=action_id, attrs=dict(attrs), in_thought=in_thought)
            events.append(opened)
            self._warn_junk(events, junk, end, action_id)
            if self_closing:
                message = (
                    "the action tag closes itself (<action …/>): it has no body and did not run"
                )
                events.append(
                    ActionErrorEvent(span=(end, end), id=action_id, message=message, attrs=attrs)
                )
                return
            self._open_body(ACTION, span, attrs, action_id)
        elif name == "context_feed":
            self._warn_junk(events, junk, span[0], None)
            if self_closing:
                self._finish_feed(events, span, attrs, "")
                return
            self._open_body(FEED, span, attrs, "")
        elif name == "thought":
            events.append(_thought_start(span=span))
            self._warn_junk(events, junk, end, None)
            if self_closing:
                events.append(_thought_end(span=(end, end)))
            else:
                self._enter(THOUGHT)
        else:  # response
            final = self._response_final(attrs, events, span[0])
            events.append(_response_start(span=span, final=final))
            self._warn_junk(events, junk, end, None)
            if self_closing:
                events.append(_response_end(span=(end, end), final=final))
            else:
                self._final = final
                self._enter(RESPONSE)

    def _open_body(
        self, state: _State, span: tuple[int, int], attrs: dict[str, str], open_id: str
    ) -> None:
        self._parent = self._state
        self._scanner = _ACTION_SCANNER() if state is ACTION else _FEED_SCANNER()
        self._parts = []
        self._elem_start, self._body_start = span
        self._attrs = attrs
        self._open_id = open_id
        self._enter(state)

    def _finish_action(self, events: list[ParserEvent], span: tuple[int, int], body: str) -> None:
        built = build_action(
            self._attrs,
            body,
            open_id=self._open_id,
            in_thought=self._parent is THOUGHT,
            ids=self._ids,
        )
        start = span[0]
        for message, details in built.warnings:
            events.append(
                Warning(span=(start, start), message=message, id=built.id, details=details)
            )
        if built.action is not None:
            events.append(_action_parsed(span=span, action=built.action))
        else:
            events.append(
                ActionErrorEvent(
                    span=span,
                    id=built.id,
                    message=built.error or "invalid action",
                    raw_body=body,
                    attrs=self._attrs,
                )
            )

    def _finish_feed(
        self,
        events: list[ParserEvent],
        span: tuple[int, int],
        attrs: dict[str, str],
        body: str,
    ) -> None:
        built = build_feed(attrs, body)
        start = span[0]
        for message, details in built.warnings:
            events.append(
                Warning(span=(start, start), message=message, id=built.id, details=details)
            )
        if built.feed is not None:
            events.append(_context_feed(span=span, feed=built.feed))
        else:
            message = built.error or "invalid context_feed"
            events.append(
                ActionErrorEvent(
                    span=span, id=built.id, message=message, raw_body=body, attrs=attrs
                )
            )

    def _truncate_body(self, events: list[ParserEvent]) -> None:
        self._parts.append(self._buf)
        body = "".join(self._parts)
        self._parts = []
        end = self._base = self._base + len(self._buf)
        self._buf = ""
        attrs = self._attrs
        if self._state is ACTION:
            message = (
                f"the action {self._open_id!r} was cut off before </action> "
                "(the stream ended); it was not run"
            )
            span = (self._body_start, end)
            action_id: str | None = self._open_id
        else:
            message = "the context_feed was cut off before </context_feed> (the stream ended)"
            span = (self._elem_start, end)
            action_id = attrs.get("id", "").strip() or None
        closing = "</action" if self._state is ACTION else "</context_feed"
        if closing in body.lower():
            # The likely cause: a quote left open hid the closing tag.
            message += (
                f"; a {closing}> in the body was inside a JSON string: check that every "
                "quote in the body is closed or escaped"
            )
        events.append(
            ActionErrorEvent(span=span, id=action_id, message=message, raw_body=body, attrs=attrs)
        )
        self._enter(self._parent)

    # -- small helpers ----------------------------------------------------------

    def _response_final(self, attrs: dict[str, str], events: list[ParserEvent], at: int) -> bool:
        if "final" not in attrs:
            return True
        value = attrs["final"].strip().lower()
        if value in _FALSE_WORDS:
            return False
        if value not in _TRUE_WORDS:
            message = f"response final={attrs['final']!r} is not true or false; read as true"
            events.append(Warning(span=(at, at), message=message))
        return True

    @staticmethod
    def _warn_junk(events: list[ParserEvent], junk: str, at: int, action_id: str | None) -> None:
        if junk:
            details: dict[str, Any] = {"ignored": junk}
            message = f"ignored characters in a tag: {junk!r}"
            events.append(Warning(span=(at, at), message=message, id=action_id, details=details))

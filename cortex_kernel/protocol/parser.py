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
to be text, so a widget streams it. A body is kept until its closing tag,
which produces the ``action_parsed`` (or ``action_error``) event in the very
``feed`` call that delivers its ``>`` (early dispatch, SPEC §2.2).

Speed (SPEC §2.2 item 5) comes from doing per chunk as little Python as
possible, without changing which events come out (only when the work is
done):

- a chunk of plain text in a text state with nothing held is one ``in``
  test and one event, built in place without pydantic validation (see
  :mod:`._fast`); so are the other events of the common tags, in the loop
  of :meth:`Parser._run`;
- a chunk that cannot decide anything — part of a body with no ``>``, part
  of a held opening tag with neither ``<`` nor ``>``, a held ``<`` + part of
  a tag name that is still one (``_State.prefixes``, ``_State.held_open_re``:
  what :func:`~._scanner.could_become_tag` would hold, decided by a set
  lookup or one regex) — is only appended to the held input; a chunk of text
  with one ``<`` and no ``>`` after it is split there in ``feed`` itself;
- everything else is one pass with a cursor over the buffer
  (:meth:`Parser._run`), which reads the common tags (attributes in one
  regex) inline;
- a body is not scanned while it holds no ``</``: it stays one string in the
  buffer, and when its first ``</`` is the usual closing tag with only plain
  JSON before it (no ``'``, no backslash, quotes paired), that is where
  :class:`~._scanner.BodyScanner` would have stopped; any other body is
  handed to the scanner, from its start, and scanned incrementally after;
- an action body of strict JSON is decoded by the C scanner of
  :mod:`json` and the :class:`Action` built unvalidated when every field
  was checked (:func:`~._actions.fast_action`); anything else goes through
  :func:`~._actions.build_action` and its lenient repairs, as before.

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
from typing import Any, Final

from ._actions import build_action, build_feed, fast_action
from ._attributes import SIMPLE_ATTRS_RE, SIMPLE_PAIR_RE, parse_attributes
from ._fast import build, constructor, new, set_dict, set_extra, set_fields_set, set_private
from ._scanner import MAX_ATTRS, BodyScanner, Tag, could_become_tag, tag_pattern
from .models import Action, IdAllocator
from .parser_events import (
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

__all__ = ["Parser"]

_TextEvent = Text | ThoughtDelta | ResponseDelta


class _State:
    """A state of the parser (a sentinel, compared by identity).

    ``opens``/``closes`` are the tags it recognises (``tag_re`` finds them),
    ``text_cls`` the event of its text (``None`` in the body states, whose
    ``close_tag`` is the usual spelling of their closing tag).
    """

    __slots__ = (
        "close_tag",
        "closes",
        "held_open_re",
        "name",
        "opens",
        "prefixes",
        "tag_re",
        "text_cls",
        "text_data",
        "text_type",
    )

    def __init__(
        self,
        name: str,
        opens: tuple[str, ...] = (),
        closes: tuple[str, ...] = (),
        text_cls: type[_TextEvent] | None = None,
        close_tag: str = "",
    ) -> None:
        self.name = name
        self.opens = frozenset(opens)
        self.closes = frozenset(closes)
        self.text_cls = text_cls
        self.text_type: str = text_cls.model_fields["type"].default if text_cls else ""
        # The __dict__ of a text event, in field order, to copy and fill in.
        self.text_data: dict[str, Any] = {
            "type": self.text_type,
            "span": None,
            "t": None,
            "turn": None,
            "text": None,
        }
        self.close_tag = close_tag
        self.tag_re = tag_pattern(self.opens, self.closes)
        # The buffer ends that could_become_tag holds because they end inside
        # (or right after) the name of a known tag: `<`, `<ac`, `</thought`…
        prefixes = {"<"} if opens or closes else set()
        for known in opens:
            prefixes.update("<" + known[:m] for m in range(len(known) + 1))
        for known in closes:
            prefixes.update("</" + known[:m] for m in range(len(known) + 1))
        self.prefixes = frozenset(prefixes)
        # The buffer ends that could_become_tag holds as an opening tag that
        # has its name and part of its attributes (names matched ASCII-only,
        # as it does): `<action type="to`.
        names = "|".join("".join(f"[{c.upper()}{c}]" for c in known) for known in sorted(opens))
        self.held_open_re = re.compile(rf"<(?:{names or '(?!)'})[\s/][^<>]{{0,{MAX_ATTRS - 1}}}\Z")

    def __repr__(self) -> str:
        return f"<state {self.name}>"


OUTSIDE: Final = _State("OUTSIDE", ("thought", "action", "response", "context_feed"), (), Text)
THOUGHT: Final = _State("THOUGHT", ("action", "context_feed"), ("thought",), ThoughtDelta)
RESPONSE: Final = _State("RESPONSE", (), ("response",), ResponseDelta)
ACTION: Final = _State("ACTION", close_tag="</action>")
FEED: Final = _State("FEED", close_tag="</context_feed>")

_OPEN_TAG_PREFIX_RE: Final = re.compile(r"<[A-Za-z_]+[\s/]")
# Beyond this many characters a body is handed to the scanner even without
# a `</`, so the buffer (copied when a chunk is added) stays short.
_UNSCANNED_BODY_MAX: Final = 4096
_FALSE_WORDS: Final = frozenset(("false", "no", "0", "off"))
_TRUE_WORDS: Final = frozenset(("true", "yes", "1", "on", ""))

# Hot-path events are built from values checked here, without validation
# (see ._fast); the field sets are shared, as pydantic copies before writing.
_TEXT_FIELDS: Final = {"span", "text"}
_SPAN_FIELDS: Final = {"span"}
_FINAL_FIELDS: Final = {"span", "final"}
_OPEN_FIELDS: Final = {"span", "id", "attrs", "in_thought"}
_PARSED_FIELDS: Final = {"span", "action"}


def _text_event(
    cls: type[_TextEvent], template: dict[str, Any], start: int, end: int, text: str
) -> _TextEvent:
    """A text-carrying event (text, thought or response delta) without validation."""
    data = template.copy()
    data["span"] = (start, end)
    data["text"] = text
    return build(cls, data, _TEXT_FIELDS)


def _parsed(span: tuple[int, int], action: Action) -> ActionParsed:
    """An ``action_parsed`` event, built without re-validating a checked action."""
    event: ActionParsed = build(
        ActionParsed,
        {"type": "action_parsed", "span": span, "t": None, "turn": None, "action": action},
        _PARSED_FIELDS,
    )
    return event


_thought_start = constructor(ThoughtStart)
_thought_end = constructor(ThoughtEnd)
_response_start = constructor(ResponseStart)
_response_end = constructor(ResponseEnd)
_action_open = constructor(ActionOpen)
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

    __slots__ = (
        "_attrs",
        "_base",
        "_body_start",
        "_buf",
        "_checked",
        "_elem_start",
        "_final",
        "_held_open_tag",
        "_hot",
        "_ids",
        "_open_id",
        "_parent",
        "_parts",
        "_pending",
        "_pending_size",
        "_scanner",
        "_state",
        "_text_cls",
        "_text_data",
    )

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
        # The text event of the state (None in a body): the hot path of feed.
        self._text_cls: type[_TextEvent] | None = Text
        self._hot: type[_TextEvent] | None = Text  # _text_cls, when self._buf is empty
        self._text_data = OUTSIDE.text_data
        self._final = True  # of the open response
        # The open action or feed. Until its body shows a `</`, self._buf
        # holds the whole body, unscanned (self._scanner is None), and
        # self._checked of its characters are known to hold no `</`.
        self._parent = OUTSIDE
        self._scanner: BodyScanner | None = None
        self._checked = 0
        self._parts: list[str] = []  # body already scanned by self._scanner
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
        cls = self._hot
        if cls is not None and "<" not in text:
            # The hot path: plain text in a text state with nothing held, one
            # event built in place (see ._fast).
            if not text:
                return []
            start = self._base
            end = self._base = start + len(text)
            # _text_event, inlined: this is the whole cost of a plain-text
            # feed (the chunk-4 hot path), where one call more shows.
            data = self._text_data.copy()
            data["span"] = (start, end)
            data["text"] = text
            event = new(cls)
            set_dict(event, data)
            set_fields_set(event, _TEXT_FIELDS)
            set_extra(event, None)
            set_private(event, None)
            return [event]
        text_cls = self._text_cls
        if text_cls is None:
            if ">" not in text:
                # In a body, only a chunk with a `>` can complete the closing
                # tag: keep the others unscanned until one arrives (or the end).
                self._pending.append(text)
                return []
        elif not self._buf:
            # One `<`, no `>` after it: text, then perhaps the start of a tag.
            lt = text.rfind("<")
            if text.find("<") == lt and text.find(">", lt) < 0:
                state = self._state
                tail = text[lt:]
                if tail.isascii() and tail.lower() in state.prefixes:
                    held_open_tag = False
                elif state.held_open_re.match(tail) is not None:
                    held_open_tag = True
                else:
                    held_open_tag = None
                if held_open_tag is not None:
                    start = self._base
                    self._base = start + lt
                    self._buf = tail
                    self._held_open_tag = held_open_tag
                    self._hot = None
                    if not lt:
                        return []
                    return [_text_event(text_cls, self._text_data, start, start + lt, text[:lt])]
        elif not self._held_open_tag:
            # self._buf is a held `<` + part of a name: still one?
            if "<" not in text and ">" not in text:
                held = self._buf + text
                if held.isascii() and held.lower() in self._state.prefixes:
                    self._buf = held
                    return []
                if self._state.held_open_re.match(held) is not None:
                    # Now a name and the start of the attributes.
                    self._buf = held
                    self._held_open_tag = True
                    return []
        elif (
            "<" not in text
            and ">" not in text
            and len(self._buf) + self._pending_size + len(text) < MAX_ATTRS
        ):
            # Inside the attributes of a held opening tag only `>`, `<` or
            # the length limit can decide anything: wait for them.
            self._pending.append(text)
            self._pending_size += len(text)
            return []
        self._held_open_tag = False
        if self._pending:
            self._pending.append(text)
            text = "".join(self._pending)
            self._pending = []
            self._pending_size = 0
        self._buf += text
        events: list[ParserEvent] = []
        self._run(events, False)
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
        if self._pending:
            self._buf += "".join(self._pending)
            self._pending = []
            self._pending_size = 0
        self._held_open_tag = False
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

    def _enter(self, state: _State) -> None:
        self._state = state
        self._text_cls = state.text_cls
        self._text_data = state.text_data
        self._hot = None if self._buf else state.text_cls

    def _run(self, events: list[ParserEvent], final: bool) -> None:
        """Account for as much of ``self._buf`` as can be decided now.

        One loop over the buffer with a cursor ``i`` (``buf[:i]`` is
        accounted for), so that a chunk holding many tags is not sliced once
        per tag; the buffer is cut once, at the end. The common tags and
        events are handled inline; the rest by the methods below.
        """
        buf = self._buf
        base = self._base
        n = len(buf)
        i = 0
        append = events.append
        state = self._state
        while i < n:
            cls = state.text_cls
            if cls is None:  # in a body
                scanner = self._scanner
                if scanner is None:
                    # Not a `</` in the body yet: look for the first one, and
                    # when it is the usual closing tag with only plain JSON
                    # before it (no `'`, no escape, quotes paired), that is
                    # the end the scanner would find.
                    lt = buf.find("</", i + self._checked)
                    close_tag = state.close_tag
                    if lt < 0:
                        if n - i <= _UNSCANNED_BODY_MAX:
                            self._checked = max(0, n - i - 1)
                            break
                        # A long body: scan it, rather than copy it at every feed.
                    elif buf.startswith(close_tag, lt):
                        body = buf[i:lt]
                        if "'" not in body and "\\" not in body and not body.count('"') & 1:
                            i = lt + len(close_tag)
                            if state is ACTION:
                                span = (self._body_start, base + i)
                                action = fast_action(
                                    self._attrs,
                                    body,
                                    self._open_id,
                                    self._parent is THOUGHT,
                                    self._ids,
                                )
                                if action is None:
                                    self._finish_action(events, span, body)
                                else:
                                    append(_parsed(span, action))
                            else:
                                self._finish_feed(
                                    events, (self._elem_start, base + i), self._attrs, body
                                )
                            state = self._parent
                            continue
                    scanner = self._scanner = BodyScanner(
                        "action" if state is ACTION else "context_feed"
                    )
                found, index = scanner.scan(buf, i, final)
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
                state = self._parent
                continue
            lt = buf.find("<", i)
            whole = state.tag_re.search(buf, lt) if lt >= 0 else None
            if whole is None:
                # No complete tag: only the last `<` may still become one.
                if lt >= 0:
                    lt = buf.rfind("<", lt)
                if lt < 0 or final:
                    lt = n
                elif state.held_open_re.match(buf, lt) is not None:
                    self._held_open_tag = True
                elif (tail := buf[lt:]).isascii() and tail.lower() in state.prefixes:
                    self._held_open_tag = False
                elif not could_become_tag(buf, lt, state.opens, state.closes):
                    lt = n
                else:
                    self._held_open_tag = _OPEN_TAG_PREFIX_RE.match(buf, lt) is not None
                if lt > i:
                    piece = buf[i:lt] if i or lt < n else buf
                    append(_text_event(cls, state.text_data, base + i, base + lt, piece))
                i = lt
                break
            lt = whole.start()
            if lt > i:
                append(_text_event(cls, state.text_data, base + i, base + lt, buf[i:lt]))
            closing_name, open_name, attr_text = whole.groups()
            i = whole.end()
            span = (base + lt, base + i)
            if closing_name is not None:  # </thought> or </response>
                if state is THOUGHT:
                    append(
                        build(
                            ThoughtEnd,
                            {
                                "type": "thought_end",
                                "span": span,
                                "t": None,
                                "turn": None,
                                "truncated": False,
                            },
                            _SPAN_FIELDS,
                        )
                    )
                else:
                    append(
                        build(
                            ResponseEnd,
                            {
                                "type": "response_end",
                                "span": span,
                                "t": None,
                                "turn": None,
                                "final": self._final,
                                "truncated": False,
                            },
                            _FINAL_FIELDS,
                        )
                    )
                state = OUTSIDE
                continue
            name = open_name.lower()
            if name == "thought" and not attr_text:
                append(
                    build(
                        ThoughtStart,
                        {"type": "thought_start", "span": span, "t": None, "turn": None},
                        _SPAN_FIELDS,
                    )
                )
                state = THOUGHT
                continue
            if name == "action" and SIMPLE_ATTRS_RE.fullmatch(attr_text):
                pairs = SIMPLE_PAIR_RE.findall(attr_text)
                attrs = dict(pairs)
                if len(attrs) == len(pairs):  # no duplicate (the first would win)
                    action_id = attrs.get("id", "").strip() or self._ids.new()
                    append(
                        build(
                            ActionOpen,
                            {
                                "type": "action_open",
                                "span": span,
                                "t": None,
                                "turn": None,
                                "id": action_id,
                                # A copy: the parser still reads its own attrs.
                                "attrs": dict(pairs),
                                "in_thought": state is THOUGHT,
                            },
                            _OPEN_FIELDS,
                        )
                    )
                    self._parent = state
                    self._scanner = None
                    self._checked = 0
                    self._elem_start = span[0]
                    self._body_start = span[1]
                    self._attrs = attrs
                    self._open_id = action_id
                    state = ACTION
                    continue
            elif name == "response" and SIMPLE_ATTRS_RE.fullmatch(attr_text):
                pairs = SIMPLE_PAIR_RE.findall(attr_text)
                attrs = dict(pairs)
                if len(attrs) == len(pairs):
                    word = attrs.get("final")
                    if word is None:
                        is_final: bool | None = True
                    else:
                        word = word.strip().lower()
                        is_final = (
                            False if word in _FALSE_WORDS else True if word in _TRUE_WORDS else None
                        )
                    if is_final is not None:  # else _handle_tag warns
                        append(
                            build(
                                ResponseStart,
                                {
                                    "type": "response_start",
                                    "span": span,
                                    "t": None,
                                    "turn": None,
                                    "final": is_final,
                                },
                                _FINAL_FIELDS,
                            )
                        )
                        self._final = is_final
                        state = RESPONSE
                        continue
            self._state = state
            self._handle_tag(Tag(False, name, attr_text, i), span, events)
            state = self._state
        self._base = base + i
        self._state = state
        self._text_cls = state.text_cls
        self._text_data = state.text_data
        if i < n:
            self._buf = buf[i:]
            self._hot = None
        else:
            self._buf = ""
            self._hot = state.text_cls

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
        self._scanner = None
        self._checked = 0
        self._elem_start, self._body_start = span
        self._attrs = attrs
        self._open_id = open_id
        self._enter(state)

    def _finish_action(self, events: list[ParserEvent], span: tuple[int, int], body: str) -> None:
        in_thought = self._parent is THOUGHT
        action = fast_action(self._attrs, body, self._open_id, in_thought, self._ids)
        if action is not None:
            events.append(_parsed(span, action))
            return
        built = build_action(
            self._attrs,
            body,
            open_id=self._open_id,
            in_thought=in_thought,
            ids=self._ids,
        )
        start = span[0]
        for message, details in built.warnings:
            events.append(
                Warning(span=(start, start), message=message, id=built.id, details=details)
            )
        if built.action is not None:
            events.append(
                build(
                    ActionParsed,
                    {
                        "type": "action_parsed",
                        "span": span,
                        "t": None,
                        "turn": None,
                        "action": built.action,
                    },
                    _PARSED_FIELDS,
                )
            )
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

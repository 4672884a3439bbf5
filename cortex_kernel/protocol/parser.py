"""The incremental, sans-IO parser of the streaming protocol (docs/protocol.md#contract).

Strategy
--------
Text goes in with :meth:`Parser.feed`, events come out; nothing here awaits,
sleeps, reads or raises. The parser is a small state machine whose states
and transitions all live in this module (h11's rule 1), as data: the table
``_TRANSITIONS`` at the bottom maps ``(state, tag)`` to the handler that
emits the tag's events and names the next state. A state recognises exactly
the tags of its row; every other ``<`` is text.

====================  ==========================================  ===================
state                 tags of its row (anything else is text)     text becomes
====================  ==========================================  ===================
``OUTSIDE``           ``<thought>`` ``<action>`` ``<response>``   ``text``
                      ``<context_feed>``
``THOUGHT``           ``</thought>`` ``<action>``                 ``thought_delta``
                      ``<context_feed>`` ``</response>`` (*)
``RESPONSE``          ``</response>`` ``</thought>`` (*)          ``response_delta``
``ACTION``            ``</action>`` outside a JSON string         (the body)
``FEED``              ``</context_feed>`` outside a JSON string   (the body)
====================  ==========================================  ===================

(*) The closing tag of the other element closes the open one, with a
``warning`` (docs/protocol.md#actions: what real models write). ``ACTION`` and ``FEED``
return to the state they were opened from (``OUTSIDE`` or ``THOUGHT``).

In the text states one regex search finds the next tag this state knows;
when there is none, the last ``<`` of the buffer may still become one
(:func:`~._scanner.could_become_tag`), and it and what follows are held back
until more input arrives. Text is emitted as soon as it is known to be
text, so a widget streams it. A body is kept until its closing tag, which
produces the ``action_parsed`` (or ``action_error``) event in the very
``feed`` call that delivers its ``>`` (early dispatch, docs/protocol.md#streaming-guarantees).

Speed (docs/protocol.md#streaming-guarantees item 5) comes from doing per chunk as little Python as
possible, without changing which events come out (only when the work is
done):

- a chunk of plain text in a text state with nothing held is one ``in``
  test and one event (a slotted dataclass, see :mod:`.parser_events`):
  the text hot path, the only code inlined in ``feed``;
- a chunk that cannot decide anything — part of a body with no ``>``, or
  with a ``>`` but no ``<`` while the body holds no ``</`` (code's
  ``x > 0``), part of a held opening tag with neither ``<`` nor ``>``, a
  held ``<`` + part of a tag name that is still one (``State.prefixes``,
  ``State.held_open_re``: what :func:`~._scanner.could_become_tag` would
  hold, decided by a set lookup or one regex) — is only appended to the
  held input; a chunk of text with one ``<`` and no ``>`` after it is split
  there in ``feed`` itself;
- everything else is one pass with a cursor over the buffer
  (:meth:`Parser._run`), which hands each tag to its handler; a tag without
  attributes as models write it (``</thought>``) is found by one lookup of
  its text (``State.bare_tags``), any other plain tag by :func:`_tag_at`
  (``str.find`` and slices: on text that is not ASCII they cost a fraction
  of the regex, which is left for the rest);
- a body is not scanned while it holds no ``</``: it stays one string in the
  buffer, and when its first ``</`` is the usual closing tag with strict
  JSON before it (an action's body, decoded there once by the C scanner of
  :mod:`json`) or plain JSON and whole strings, that is where
  :class:`~._scanner.BodyScanner` would have stopped (:class:`~._body.OpenBody`);
- from a body of strict JSON the :class:`Action` is built directly when
  its attributes need no normalising (:func:`~._actions.fast_action`);
  anything else goes through :func:`~._actions.build_action` and its
  lenient repairs. Both are called from one place,
  :meth:`Parser._close_action`, and a test checks that they agree on the
  property-test corpus.

Spans
-----
Every event carries ``span = (start, end)``, character offsets into the
whole stream. Concatenating ``input[start:end]`` over the events, in order,
gives back the input exactly: spans are contiguous and never overlap.

- ``text``, ``thought_delta``, ``response_delta``: exactly their text.
- ``thought_start``, ``response_start``, ``action_open``: the opening tag.
- ``thought_end``, ``response_end``: the closing tag (also when it was the
  other element's); empty when ``truncated`` (or for a self-closing
  ``<thought/>``).
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

from ._actions import build_action, build_feed, fast_action, strict_object
from ._attributes import read_attributes
from ._body import UNSCANNED_BODY_MAX, OpenBody
from ._scanner import MAX_ATTRS, could_become_tag
from ._states import Handler, State, TextEvent, learn
from .models import IdAllocator
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
    WarningEvent,
)

__all__ = ["Parser"]

OUTSIDE: Final = State("OUTSIDE", Text)
THOUGHT: Final = State("THOUGHT", ThoughtDelta)
RESPONSE: Final = State("RESPONSE", ResponseDelta)
ACTION: Final = State("ACTION")
FEED: Final = State("FEED")

_OPEN_TAG_PREFIX_RE: Final = re.compile(r"<[A-Za-z_]+[\s/]")
_FALSE_WORDS: Final = frozenset(("false", "no", "0", "off"))
_TRUE_WORDS: Final = frozenset(("true", "yes", "1", "on", ""))
_NO_ATTRIBUTES: Final[tuple[dict[str, str], bool, str]] = ({}, False, "")
_BARE_TAG_MAX: Final = len("</context_feed>")  # the longest key of State.bare_tags


def _tag_at(state: State, buf: str, lt: int, gt: int) -> tuple[Handler, str] | None:
    """The tag ``buf[lt : gt + 1]`` when it is one of ``state``'s, in the plain case.

    ``gt`` is the first ``>`` after the ``<`` at ``lt``. Returns the tag's
    handler and text (an opening tag's attribute text, ``""`` for a closing
    tag) exactly as ``state.tag_re`` would match at ``lt``, or ``None`` when
    this cannot tell: no tag here, a ``<`` inside, a long or non-ASCII tag
    (``re.IGNORECASE`` folds some letters that ``lower`` does not). The
    caller then asks the regex. A few finds and a lookup cost a fraction of
    the regex, which runs its case-insensitive alternation and scans the
    attributes.
    """
    if gt == lt + 1 or gt - lt - 1 > MAX_ATTRS:
        return None
    if buf[lt + 1] == "/":  # `</name` + whitespace
        name = buf[lt + 2 : gt].rstrip()  # with a `<` inside, no handler's
        # The name as models write it, else any other case.
        handler = state.close_handlers.get(name)
        if handler is None:
            if not name.isascii():
                return None
            handler = state.close_handlers.get(name.lower())
        return None if handler is None else (handler, "")
    # `<name` + whitespace, `/` or `>`: first the name as models write it,
    # found by its first letter, then any other case.
    known = state.open_by_initial.get(buf[lt + 1])
    if known is not None:
        name, handler = known
        after = lt + 1 + len(name)
        if buf[lt + 1 : after] == name:
            if after == gt or buf[after] == "/" or buf[after].isspace():
                text = buf[after:gt]
                return None if "<" in text else (handler, text)
            return None
    inner = buf[lt + 1 : gt]
    if inner[0].isspace() or "<" in inner:
        return None
    name = inner.split(None, 1)[0]
    slash = name.find("/")
    if slash >= 0:
        name = name[:slash]
    if not name.isascii():
        return None
    found = state.open_handlers.get(name.lower())
    return None if found is None else (found, inner[len(name) :])


def _warn_other_close(
    events: list[ParserEvent], span: tuple[int, int], open_name: str, found: str
) -> None:
    at = span[0]
    message = f"</{found}> closed the open <{open_name}>: read as </{open_name}>"
    details: dict[str, Any] = {"open": open_name, "closing_tag": found}
    events.append(WarningEvent(span=(at, at), message=message, details=details))


class Parser:
    """Turns streamed protocol text into parser events (docs/protocol.md#contract).

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
        "_base",
        "_body",
        "_buf",
        "_final",
        "_held_open_tag",
        "_hot",
        "_ids",
        "_pending",
        "_pending_size",
        "_state",
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
        # self._state.text_cls when plain text can take the hot path of feed
        # (a text state, nothing buffered), else None. Set with self._state and
        # self._buf, by _settle (inlined in the two hot spots that say so).
        self._hot: type[TextEvent] | None = OUTSIDE.text_cls
        self._final = True  # of the open response
        self._body = OpenBody(OUTSIDE)  # the open action or feed

    # -- public API ---------------------------------------------------------

    # The text hot path and the checks of held input are inlined on purpose:
    # one method call more per chunk costs ~5% at chunks of 4 (bench parser).
    def feed(self, text: str) -> list[ParserEvent]:  # noqa: C901, PLR0911, PLR0912
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
        hot = self._hot
        if hot is not None and "<" not in text:
            # The hot path: plain text in a text state with nothing held, one
            # event (the whole cost of a plain-text feed, at chunks of 4).
            if not text:
                return []
            start = self._base
            end = self._base = start + len(text)
            return [hot((start, end), text)]
        state = self._state
        if state.text_cls is None:
            if ">" not in text:
                # In a body, only a chunk with a `>` can complete the closing
                # tag: keep the others unscanned until one arrives (or the end).
                self._pending.append(text)
                return []
            if "<" not in text and text[0] != "/" and self._body.scanner is None:
                # A `>` (code's `x > 0`) but no `</` can have come: the body
                # so far holds none (OpenBody.end checked it up to its last
                # character, and it is not a `<` followed by this `/`). Keep it
                # unscanned too, while the body is short enough to copy.
                pending = self._pending
                held = "".join(pending) if pending else ""
                if (
                    "<" not in held
                    and len(self._buf) + len(held) + len(text) <= UNSCANNED_BODY_MAX
                    and not (held[:1] == "/" and self._buf.endswith("<"))
                ):
                    if held:
                        pending[:] = (held, text)
                    else:
                        pending.append(text)
                    return []
        elif not self._buf:
            # The first `<` and the `>` after it: where _run starts.
            lt = text.find("<")
            gt = text.find(">", lt) if lt >= 0 else -1
            if gt < 0 and text.rfind("<") == lt:
                # One `<`, no `>` after it: text, then perhaps the start of a tag.
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
                    self._buf = tail  # _settle(state, tail), inlined: same state
                    self._hot = None
                    self._held_open_tag = held_open_tag
                    if not lt:
                        return []
                    return [state.text_cls((start, start + lt), text[:lt])]
            self._held_open_tag = False
            self._buf = text  # nothing held, nothing pending
            events: list[ParserEvent] = []
            self._run(events, False, lt, gt)
            return events
        elif not self._held_open_tag:
            # self._buf is a held `<` + part of a name: still one?
            if "<" not in text and ">" not in text:
                held = self._buf + text
                if held.isascii() and held.lower() in state.prefixes:
                    self._buf = held
                    return []
                if state.held_open_re.match(held) is not None:
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
        pending = self._pending
        if pending:
            # Held input, kept chunks and this one, in one copy.
            pending.append(text)
            if self._buf:
                pending.insert(0, self._buf)
            self._buf = "".join(pending)
            self._pending = []
            self._pending_size = 0
        else:
            self._buf += text
        events = []
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
        if self._state.text_cls is None:
            rest = self._buf
            end = self._base = self._base + len(rest)
            events.append(self._body.cut_off(self._state, rest, end))
            self._settle(self._body.parent, "")
        state = self._state
        end = self._base
        if state is THOUGHT:
            events.append(ThoughtEnd(span=(end, end), truncated=True))
        elif state is RESPONSE:
            events.append(ResponseEnd(span=(end, end), final=self._final, truncated=True))
        self._settle(OUTSIDE, "")
        return events

    # -- the loop ---------------------------------------------------------------

    def _settle(self, state: State, buf: str) -> None:
        """Set the state and the buffer (and so the hot path): the one place."""
        self._state = state
        self._buf = buf
        self._hot = None if buf else state.text_cls

    def _run(self, events: list[ParserEvent], final: bool, lt: int = -2, gt: int = -2) -> None:
        """Account for as much of ``self._buf`` as can be decided now.

        One loop over the buffer with a cursor ``i`` (``buf[:i]`` is
        accounted for), so that a chunk holding many tags is not sliced once
        per tag; the buffer is cut once, at the end. Text is emitted here;
        each tag goes to its handler in the transition table. ``lt`` and
        ``gt``, when the caller has found them, are the buffer's first ``<``
        and the first ``>`` after it (in a text state).
        """
        buf = self._buf
        base = self._base
        n = len(buf)
        i = 0
        state = self._state
        while i < n:
            text_cls = state.text_cls
            if text_cls is None:  # in a body
                close_at, end, body = self._body.end(state, buf, i, final)
                i = end
                if body is None:
                    break
                self._state = state
                state = state.close_handler(self, events, (base + close_at, base + end), body)  # type: ignore[misc]  # a body state
                continue
            if lt == -2:
                lt = buf.find("<", i)
                gt = buf.find(">", lt) if lt >= 0 else -1
            # The next tag: no `>` after the `<`, none; the plain case read by
            # bare_tags or _tag_at; anything else found by the state's regex.
            if gt < 0:
                tag = None
            elif gt - lt > _BARE_TAG_MAX or (tag := state.bare_tags.get(buf[lt : gt + 1])) is None:
                tag = _tag_at(state, buf, lt, gt)
            if tag is not None:
                stop, after = lt, gt + 1
            elif gt >= 0 and (whole := state.tag_re.search(buf, lt)) is not None:
                stop, after = whole.span()
                last: int = whole.lastindex  # type: ignore[assignment]  # a tag has one
                tag = (state.dispatch[last], whole[last])  # type: ignore[assignment]  # a tag's group
            # Text up to the tag, or up to what may still become one.
            elif lt < 0 or final:
                stop = n
            else:
                stop = self._hold(state, buf, lt)
            if stop > i:
                text = buf[i:stop] if i or stop < n else buf
                events.append(text_cls((base + i, base + stop), text))
            if tag is None:
                i = stop
                break
            i = after
            lt = -2
            self._state = state
            state = tag[0](self, events, (base + stop, base + i), tag[1])
        # _settle, inlined (once per chunk).
        self._base = base + i
        self._state = state
        if i < n:
            self._buf = buf[i:]
            self._hot = None
        else:
            self._buf = ""
            self._hot = state.text_cls

    def _hold(self, state: State, buf: str, lt: int) -> int:
        """Where the text of ``buf`` ends when it holds no complete tag.

        ``lt`` is its first ``<``; only the last ``<`` may still become a
        tag, and then it is held, with what follows, for more input.
        """
        lt = buf.rfind("<", lt)
        if state.held_open_re.match(buf, lt) is not None:
            self._held_open_tag = True
        elif (tail := buf[lt:]).isascii() and tail.lower() in state.prefixes:
            self._held_open_tag = False
        elif could_become_tag(buf, lt, state.opens, state.closes):
            self._held_open_tag = _OPEN_TAG_PREFIX_RE.match(buf, lt) is not None
        else:
            return len(buf)
        return lt

    # -- the handlers of the transition table -------------------------------------
    # Each is called with self._state = the state the tag was read in, and
    # returns the next state.

    def _open_thought(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        events.append(ThoughtStart(span))
        if not text:
            return THOUGHT
        _attrs, self_closing, junk = read_attributes(text)
        end = span[1]
        if junk:
            self._warn_junk(events, junk, end, None)
        if self_closing:
            events.append(ThoughtEnd(span=(end, end)))
            return self._state
        return THOUGHT

    def _open_response(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        attrs, self_closing, junk = read_attributes(text) if text else _NO_ATTRIBUTES
        final = True
        word = attrs.get("final")
        if word is not None:
            value = word.strip().lower()
            if value in _FALSE_WORDS:
                final = False
            elif value not in _TRUE_WORDS:
                at = span[0]
                message = f"response final={word!r} is not true or false; read as true"
                events.append(WarningEvent(span=(at, at), message=message))
        events.append(ResponseStart(span, final))
        end = span[1]
        if junk:
            self._warn_junk(events, junk, end, None)
        if self_closing:
            events.append(ResponseEnd(span=(end, end), final=final))
            return self._state
        self._final = final
        return RESPONSE

    def _open_action(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        attrs, self_closing, junk = read_attributes(text)
        action_id = attrs.get("id", "").strip() or self._ids.new()
        # attrs copied: the parser still reads its own.
        events.append(ActionOpen(span, action_id, dict(attrs), self._state is THOUGHT))
        end = span[1]
        if junk:
            self._warn_junk(events, junk, end, action_id)
        if self_closing:
            message = "the action tag closes itself (<action …/>): it has no body and did not run"
            events.append(
                ActionErrorEvent(span=(end, end), id=action_id, message=message, attrs=attrs)
            )
            return self._state
        self._body.open(self._state, span, attrs, action_id)
        return ACTION

    def _open_feed(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        attrs, self_closing, junk = read_attributes(text)
        if junk:
            self._warn_junk(events, junk, span[0], None)
        if self_closing:
            self._finish_feed(events, span, attrs, "")
            return self._state
        self._body.open(self._state, span, attrs, "")
        return FEED

    def _close_thought(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        events.append(ThoughtEnd(span))
        return OUTSIDE

    def _close_response(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        events.append(ResponseEnd(span, self._final))
        return OUTSIDE

    def _close_thought_by_response(
        self, events: list[ParserEvent], span: tuple[int, int], text: str
    ) -> State:
        _warn_other_close(events, span, "thought", "response")
        return self._close_thought(events, span, text)

    def _close_response_by_thought(
        self, events: list[ParserEvent], span: tuple[int, int], text: str
    ) -> State:
        _warn_other_close(events, span, "response", "thought")
        return self._close_response(events, span, text)

    def _close_action(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        """The one place an action is built: the fast builder, else the general one."""
        opened = self._body
        span = (opened.body_start, span[1])
        body = text
        in_thought = opened.parent is THOUGHT
        decoded = opened.decoded  # set when finding the end decoded the body
        if decoded is None:
            decoded = strict_object(body)
        action = (
            None
            if decoded is None
            else fast_action(opened.attrs, body, decoded, opened.open_id, in_thought, self._ids)
        )
        if action is None:
            built = build_action(
                opened.attrs, body, open_id=opened.open_id, in_thought=in_thought, ids=self._ids
            )
            start = span[0]
            for message, details in built.warnings:
                events.append(
                    WarningEvent(span=(start, start), message=message, id=built.id, details=details)
                )
            if built.action is None:
                message = built.error or "invalid action"
                events.append(
                    ActionErrorEvent(
                        span=span, id=built.id, message=message, raw_body=body, attrs=opened.attrs
                    )
                )
                return opened.parent
            action = built.action
        events.append(ActionParsed(span, action))
        return opened.parent

    def _close_feed(self, events: list[ParserEvent], span: tuple[int, int], text: str) -> State:
        opened = self._body
        self._finish_feed(events, (opened.elem_start, span[1]), opened.attrs, text)
        return opened.parent

    # -- bodies -------------------------------------------------------------------

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
                WarningEvent(span=(start, start), message=message, id=built.id, details=details)
            )
        if built.feed is not None:
            events.append(ContextFeed(span=span, feed=built.feed))
        else:
            message = built.error or "invalid context_feed"
            events.append(
                ActionErrorEvent(
                    span=span, id=built.id, message=message, raw_body=body, attrs=attrs
                )
            )

    # -- small helpers ----------------------------------------------------------

    @staticmethod
    def _warn_junk(events: list[ParserEvent], junk: str, at: int, action_id: str | None) -> None:
        details: dict[str, Any] = {"ignored": junk}
        message = f"ignored characters in a tag: {junk!r}"
        events.append(WarningEvent(span=(at, at), message=message, id=action_id, details=details))


# The transition table: (state, tag) -> handler. A tag is the lower-cased
# element name, with a leading "/" when closing. Nothing else decides which
# tags a state recognises (see ._states.learn): any other tag is text.
_TRANSITIONS: Final[dict[tuple[State, str], Handler]] = {
    (OUTSIDE, "thought"): Parser._open_thought,
    (OUTSIDE, "action"): Parser._open_action,
    (OUTSIDE, "response"): Parser._open_response,
    (OUTSIDE, "context_feed"): Parser._open_feed,
    (THOUGHT, "/thought"): Parser._close_thought,
    (THOUGHT, "/response"): Parser._close_thought_by_response,
    (THOUGHT, "action"): Parser._open_action,
    (THOUGHT, "context_feed"): Parser._open_feed,
    (RESPONSE, "/response"): Parser._close_response,
    (RESPONSE, "/thought"): Parser._close_response_by_thought,
    (ACTION, "/action"): Parser._close_action,
    (FEED, "/context_feed"): Parser._close_feed,
}
learn(_TRANSITIONS)

"""The open action or feed of the parser: where its body ends, and its cut-off error.

A body is not scanned while it holds no ``</``: it stays one string in the
parser's buffer, and when its first ``</`` is the usual closing tag with
only plain JSON and whole strings before it (the scanner's first step,
:data:`~._scanner.json_run`, reaches it), that is where
:class:`~._scanner.BodyScanner` would have stopped; any other body is
handed to the scanner, from its start, and scanned incrementally after.
"""

from __future__ import annotations

from typing import Any, Final

from ._actions import strict_object
from ._scanner import BodyScanner, json_run
from ._states import State
from .parser_events import ActionErrorEvent

__all__: list[str] = []  # used inside the protocol package only

# Beyond this many characters a body is handed to the scanner even without
# a `</`, so the buffer (copied when a chunk is added) stays short.
UNSCANNED_BODY_MAX: Final = 4096


class OpenBody:
    """The action or feed whose body is being read (one per parser, reused).

    Attributes
    ----------
    parent
        The state it was opened in, and returns to.
    elem_start, body_start
        Stream offsets of its opening tag and of its body.
    attrs, open_id
        The attributes of its opening tag; the id announced by
        ``action_open`` (empty for a feed).
    """

    __slots__ = (
        "attrs",
        "body_start",
        "checked",
        "decoded",
        "elem_start",
        "open_id",
        "parent",
        "parts",
        "scanner",
    )

    def __init__(self, parent: State) -> None:
        self.parent = parent
        self.elem_start = 0
        self.body_start = 0
        self.attrs: dict[str, str] = {}
        self.open_id = ""
        # None until the body shows a `</`; until then `checked` of its
        # characters are known to hold no `</`.
        self.scanner: BodyScanner | None = None
        self.checked = 0
        self.parts: list[str] = []  # body already scanned by the scanner
        # An action's body as strict_object decoded it while finding its end.
        self.decoded: dict[str, Any] | None = None

    def open(
        self, parent: State, span: tuple[int, int], attrs: dict[str, str], open_id: str
    ) -> None:
        """Start reading the body of the element whose opening tag is at ``span``."""
        self.parent = parent
        self.elem_start, self.body_start = span
        self.attrs = attrs
        self.open_id = open_id
        self.scanner = None
        self.checked = 0
        self.decoded = None

    def end(self, state: State, buf: str, i: int, final: bool) -> tuple[int, int, str | None]:
        """Find the end of the body in ``buf[i:]`` (``state`` is ``ACTION`` or ``FEED``).

        Returns
        -------
        tuple
            ``(lt, end, body)``: its closing tag is ``buf[lt:end]``; or
            ``(index, index, None)``: no end yet, ``buf[i:index]`` is body
            (taken by the scanner) and the rest must wait for more input.
        """
        scanner = self.scanner
        if scanner is None:
            # The first `</`: a `<` (found faster than a `</`), else past it.
            lt = buf.find("<", i + self.checked)
            if lt >= 0 and buf[lt + 1 : lt + 2] != "/":
                lt = buf.find("</", lt + 1)
            if lt < 0:
                if len(buf) - i <= UNSCANNED_BODY_MAX:
                    checked = len(buf) - i - 1
                    self.checked = checked if checked > 0 else 0
                    return i, i, None
                # A long body: scan it, rather than copy it at every feed.
            else:
                close_tag = state.close_tag
                if buf.startswith(close_tag, lt):
                    after = lt + len(close_tag)
                    body = buf[i:lt]
                    # An action body of strict JSON ends before this `</`
                    # (the scanner would stop here too), and is decoded once.
                    if state.close_name == "action":
                        self.decoded = strict_object(body)
                        if self.decoded is not None:
                            return lt, after, body
                    # Else where the scanner's first step stops: here when
                    # everything before is plain JSON and whole strings.
                    if json_run(buf, i).end() == lt:  # type: ignore[union-attr]  # `*` matches
                        return lt, after, body
            scanner = self.scanner = BodyScanner(state.close_name)
        found, index = scanner.scan(buf, i, final)
        if index > i:
            self.parts.append(buf[i:index])
        if found is None:
            return index, index, None
        body = "".join(self.parts)
        self.parts = []
        return index, found.end, body

    def cut_off(self, state: State, rest: str, end: int) -> ActionErrorEvent:
        """The error for a body the stream ended in; ``rest`` is its unread end."""
        self.parts.append(rest)
        body = "".join(self.parts)
        self.parts = []
        attrs = self.attrs
        closing = "</" + state.close_name
        if state.close_name == "action":
            message = (
                f"the action {self.open_id!r} was cut off before </action> "
                "(the stream ended); it was not run"
            )
            span = (self.body_start, end)
            action_id: str | None = self.open_id
        else:
            message = "the context_feed was cut off before </context_feed> (the stream ended)"
            span = (self.elem_start, end)
            action_id = attrs.get("id", "").strip() or None
        if closing in body.lower():
            # The likely cause: a quote left open hid the closing tag.
            message += (
                f"; a {closing}> in the body was inside a JSON string: check that every "
                "quote in the body is closed or escaped"
            )
        return ActionErrorEvent(
            span=span, id=action_id, message=message, raw_body=body, attrs=attrs
        )

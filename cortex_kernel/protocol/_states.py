"""The states of the parser, and what each derives from its row of the table.

The transition table itself lives in :mod:`.parser` (h11's rule 1: every
state and transition in one place); a :class:`State` is only the sentinel
plus what its row implies, precomputed once: the regex of the tags it
knows, and the buffer ends that may still become one of them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol

from ._scanner import MAX_ATTRS
from .parser_events import ParserEvent, ResponseDelta, Text, ThoughtDelta

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__: list[str] = []  # used inside the protocol package only

TextEvent = Text | ThoughtDelta | ResponseDelta


class Handler(Protocol):
    """What a transition does: emit events for one tag and name the next state.

    ``span`` is the tag's span in the stream; ``text`` what the tag carries:
    the attribute text of an opening tag, the body that a closing tag of an
    action or feed ends, nothing for the other closing tags.
    """

    def __call__(
        self, parser: Any, events: list[ParserEvent], span: tuple[int, int], text: str, /
    ) -> State: ...


class State:
    """A state of the parser (a sentinel, compared by identity).

    Parameters
    ----------
    name
        For ``repr``.
    text_cls
        The event of its text, or ``None`` in a body state (``ACTION``,
        ``FEED``), whose content is kept until its closing tag.

    Attributes
    ----------
    handlers
        Tag (``"thought"``, ``"/thought"``…) to :class:`Handler`: this
        state's row of the transition table, filled by :func:`learn`.
    open_handlers, close_handlers
        The same row by element name, opening and closing tags apart.
    open_by_initial
        An opening tag's name and handler by its first letter (the letters
        no two of them share).
    bare_tags
        The tags as models write them when they carry no attribute
        (``</thought>``, ``<thought>``), whole, to their handler and text.
    opens, closes
        The opening and closing tag names the state recognises.
    tag_re, dispatch
        ``tag_re`` finds exactly those tags, case-insensitively (anything
        else is text), each as its own last group: ``dispatch[m.lastindex]``
        is the tag's handler and ``m[m.lastindex]`` its text (the attribute
        text of an opening tag, empty for a closing tag).
    prefixes, held_open_re
        What :func:`~._scanner.could_become_tag` would hold at the end of a
        buffer, decided by a set lookup or one regex (the common cases).
    close_name, close_tag, close_handler
        In a body state: the element whose closing tag ends the body, its
        usual spelling, and its handler.
    """

    __slots__ = (
        "bare_tags",
        "close_handler",
        "close_handlers",
        "close_name",
        "close_tag",
        "closes",
        "dispatch",
        "handlers",
        "held_open_re",
        "name",
        "open_by_initial",
        "open_handlers",
        "opens",
        "prefixes",
        "tag_re",
        "text_cls",
    )

    def __init__(self, name: str, text_cls: type[TextEvent] | None = None) -> None:
        self.name = name
        self.text_cls = text_cls
        self.handlers: dict[str, Handler] = {}
        self.open_handlers: dict[str, Handler] = {}
        self.close_handlers: dict[str, Handler] = {}
        self.open_by_initial: dict[str, tuple[str, Handler]] = {}
        self.bare_tags: dict[str, tuple[Handler, str]] = {}
        self.opens: frozenset[str] = frozenset()
        self.closes: frozenset[str] = frozenset()
        self.tag_re = re.compile("(?!)")
        self.dispatch: tuple[Handler | None, ...] = ()
        self.prefixes: frozenset[str] = frozenset()
        self.held_open_re = re.compile("(?!)")
        self.close_name = ""
        self.close_tag = ""
        self.close_handler: Handler | None = None

    def __repr__(self) -> str:
        return f"<state {self.name}>"

    def _learn(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self.open_handlers = {tag: h for tag, h in handlers.items() if not tag.startswith("/")}
        self.close_handlers = {tag[1:]: h for tag, h in handlers.items() if tag.startswith("/")}
        initials = [tag[0] for tag in self.open_handlers]
        self.open_by_initial = {
            tag[0]: (tag, h) for tag, h in self.open_handlers.items() if initials.count(tag[0]) == 1
        }
        self.bare_tags = {f"<{tag}>": (h, "") for tag, h in handlers.items()}
        self.opens = frozenset(tag for tag in handlers if not tag.startswith("/"))
        self.closes = frozenset(tag[1:] for tag in handlers if tag.startswith("/"))
        if self.text_cls is None:
            # A body ends at one closing tag, found by the body scanner.
            (self.close_name,) = self.closes
            self.close_tag = f"</{self.close_name}>"
            self.close_handler = handlers["/" + self.close_name]
            return
        # One alternative per tag (a tag is `<name` + whitespace, `/` or `>` +
        # at most MAX_ATTRS characters other than `<`/`>` + `>`; a closing
        # tag `</name` + at most MAX_ATTRS spaces + `>`, as in ._scanner).
        alternatives: list[str] = []
        dispatch: list[Handler | None] = [None]
        for tag in sorted(handlers):
            if tag.startswith("/"):
                alternatives.append(rf"/{tag[1:]}\s{{0,{MAX_ATTRS}}}()")
            else:
                alternatives.append(rf"{tag}(?=[\s/>])([^<>]{{0,{MAX_ATTRS}}})")
            dispatch.append(handlers[tag])
        self.tag_re = re.compile(f"<(?:{'|'.join(alternatives)})>", re.IGNORECASE)
        self.dispatch = tuple(dispatch)
        # The buffer ends that could_become_tag holds because they end inside
        # (or right after) the name of a known tag: `<`, `<ac`, `</thought`…
        prefixes = {"<"}
        for known in self.opens:
            prefixes.update("<" + known[:m] for m in range(len(known) + 1))
        for known in self.closes:
            prefixes.update("</" + known[:m] for m in range(len(known) + 1))
        self.prefixes = frozenset(prefixes)
        # The buffer ends that could_become_tag holds as an opening tag that
        # has its name and part of its attributes (names matched ASCII-only,
        # as it does): `<action type="to`.
        names = "|".join(
            "".join(f"[{c.upper()}{c}]" for c in known) for known in sorted(self.opens)
        )
        self.held_open_re = re.compile(rf"<(?:{names or '(?!)'})[\s/][^<>]{{0,{MAX_ATTRS - 1}}}\Z")


def learn(table: Mapping[tuple[State, str], Handler]) -> None:
    """Give every state of ``table`` its row (and what the row implies)."""
    rows: dict[State, dict[str, Handler]] = {}
    for (state, tag), handler in table.items():
        rows.setdefault(state, {})[tag] = handler
    for state, row in rows.items():
        state._learn(row)

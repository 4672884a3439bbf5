"""Parser events (SPEC §9): small frozen pydantic models with a ``type`` field.

Each parser event carries ``span = (start, end)``: the character offsets of
the input stream it accounts for. The spans of one stream are contiguous,
non-overlapping and cover the whole input, which is how conservation
(SPEC §2.2) is checked. Events that account for no input (``warning``,
``action_parsed`` of a body already counted…) have an empty span
``(n, n)``.

``t`` and ``turn`` are empty when the parser makes an event; the runtime
fills them in (``event.model_copy(update=…)``) when it records the event in
a run's transcript.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..safejson import load_json_line, model_json
from .models import Action, ContextFeedDecl

__all__ = [
    "PARSER_EVENT_TYPES",
    "ActionErrorEvent",
    "ActionOpen",
    "ActionParsed",
    "ContextFeed",
    "ParserEvent",
    "ParserEventBase",
    "ResponseDelta",
    "ResponseEnd",
    "ResponseStart",
    "Text",
    "ThoughtDelta",
    "ThoughtEnd",
    "ThoughtStart",
    "Warning",
    "parse_parser_event",
]


class ParserEventBase(BaseModel):
    """Fields shared by every parser event."""

    model_config = ConfigDict(frozen=True)

    type: str
    span: tuple[int, int]
    t: float | None = None
    turn: int | None = None
    parent: str | None = None  # set when a nested run's event is recorded by its parent

    def to_json(self) -> str:
        """One JSON line, without the fields that are empty; never raises (lone
        surrogates are written as ``\\udxxx`` escapes)."""
        return model_json(self)


class Text(ParserEventBase):
    """Text outside any element (kept, never dropped)."""

    type: Literal["text"] = "text"
    text: str


class ThoughtStart(ParserEventBase):
    """``<thought>`` seen."""

    type: Literal["thought_start"] = "thought_start"


class ThoughtDelta(ParserEventBase):
    """Text of a thought, as it streams."""

    type: Literal["thought_delta"] = "thought_delta"
    text: str


class ThoughtEnd(ParserEventBase):
    """``</thought>`` seen, or the stream ended inside the thought (``truncated``)."""

    type: Literal["thought_end"] = "thought_end"
    truncated: bool = False


class ActionOpen(ParserEventBase):
    """An ``<action …>`` tag seen; its body is still streaming.

    ``attrs`` are the attributes as written (names lower-cased). ``id`` is the
    id the action will have if it parses (written or generated).
    """

    type: Literal["action_open"] = "action_open"
    id: str
    attrs: dict[str, str] = Field(default_factory=dict)
    in_thought: bool = False


class ActionParsed(ParserEventBase):
    """A complete action, ready to dispatch (emitted in the ``feed`` call that
    delivered the closing ``>`` of ``</action>``)."""

    type: Literal["action_parsed"] = "action_parsed"
    action: Action

    @property
    def id(self) -> str:
        """The action's id."""
        return self.action.id


class ActionErrorEvent(ParserEventBase):
    """An action that will not run: invalid JSON, unknown type, duplicate id,
    truncated body… ``message`` says what and how to fix it."""

    type: Literal["action_error"] = "action_error"
    id: str | None = None
    message: str
    raw_body: str = ""
    attrs: dict[str, str] = Field(default_factory=dict)


class ResponseStart(ParserEventBase):
    """``<response …>`` seen."""

    type: Literal["response_start"] = "response_start"
    final: bool = True


class ResponseDelta(ParserEventBase):
    """Text of a response, as it streams."""

    type: Literal["response_delta"] = "response_delta"
    text: str


class ResponseEnd(ParserEventBase):
    """``</response>`` seen, or the stream ended inside it (``truncated``)."""

    type: Literal["response_end"] = "response_end"
    final: bool = True
    truncated: bool = False


class ContextFeed(ParserEventBase):
    """A complete ``<context_feed>`` declaration."""

    type: Literal["context_feed"] = "context_feed"
    feed: ContextFeedDecl


class Warning(ParserEventBase):  # shadows the builtin on purpose: the SPEC names it
    """Something was repaired or looked odd; nothing was lost."""

    type: Literal["warning"] = "warning"
    message: str
    id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


ParserEvent = Annotated[
    Text
    | ThoughtStart
    | ThoughtDelta
    | ThoughtEnd
    | ActionOpen
    | ActionParsed
    | ActionErrorEvent
    | ResponseStart
    | ResponseDelta
    | ResponseEnd
    | ContextFeed
    | Warning,
    Field(discriminator="type"),
]

PARSER_EVENT_TYPES: tuple[str, ...] = (
    "text",
    "thought_start",
    "thought_delta",
    "thought_end",
    "action_open",
    "action_parsed",
    "action_error",
    "response_start",
    "response_delta",
    "response_end",
    "context_feed",
    "warning",
)

_ADAPTER: TypeAdapter[ParserEvent] = TypeAdapter(ParserEvent)


def parse_parser_event(line: str | bytes) -> ParserEvent:
    """Read one parser event back from its JSON line."""
    return load_json_line(_ADAPTER, line)

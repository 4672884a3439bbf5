"""Parser events (docs/runtime.md#events): one slotted dataclass per event, with a ``type``.

Each parser event carries ``span = (start, end)``: the character offsets of
the input stream it accounts for. The spans of one stream are contiguous,
non-overlapping and cover the whole input, which is how conservation
(docs/protocol.md#streaming-guarantees) is checked. Events that account for no input (``warning``,
``action_parsed`` of a body already counted…) have an empty span
``(n, n)``.

``t`` and ``turn`` are empty when the parser makes an event; the runtime
fills them in (``dataclasses.replace(event, t=…, turn=…)``) when it records
the event in a run's transcript.

The classes are the only definition of the events. Their schema is derived
from them by pydantic (:data:`ADAPTER`, a ``TypeAdapter`` of the
discriminated union) and applied where an event crosses a boundary:
:meth:`ParserEventBase.to_json` and :meth:`ParserEventBase.model_dump`
serialise through it, :func:`parse_parser_event` and :func:`validate`
validate outside values with it. The parser makes events only from values it
has just checked, so making one is a plain constructor call: the parser
makes one per streamed chunk, and that call is most of the cost of a small
``feed``. For the same reason the classes are not ``frozen`` (a frozen
dataclass's ``__init__`` costs four times as much): treat events as
immutable, they are shared by the transcript, the view and the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, TypeAdapter

from ..safejson import dump_json, load_json_line
from .models import Action, ContextFeedDecl

__all__ = [
    "ADAPTER",
    "PARSER_EVENT_TYPES",
    "ActionErrorEvent",
    "ActionOpen",
    "ActionParsed",
    "ContextFeed",
    "ParserEvent",
    "ParserEventBase",
    "ParserEventModel",
    "ResponseDelta",
    "ResponseEnd",
    "ResponseStart",
    "Text",
    "ThoughtDelta",
    "ThoughtEnd",
    "ThoughtStart",
    "WarningEvent",
    "parse_parser_event",
    "validate",
]


@dataclass(slots=True)
class ParserEventBase:
    """Fields and methods shared by every parser event.

    Attributes
    ----------
    type
        The event's kind (``"text"``, ``"action_parsed"``…), set by its class.
    span
        ``(start, end)`` offsets of the input the event accounts for.
    t, turn
        When and in which turn the run recorded the event (``None`` as the
        parser makes it). Keyword-only, as ``parent``.
    parent
        The action that ran the nested run this event comes from, if any.
    """

    type: str = field(init=False)
    span: tuple[int, int]
    t: float | None = field(default=None, kw_only=True)
    turn: int | None = field(default=None, kw_only=True)
    parent: str | None = field(default=None, kw_only=True)

    def to_json(self) -> str:
        """One JSON line, without the fields that are empty; never raises (lone
        surrogates are written as ``\\udxxx`` escapes)."""
        return dump_json(_schema(type(self)), self)

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """The fields as plain data, as a runtime event's ``model_dump(**options)``.

        ``options`` are pydantic's (``mode="json"``, ``exclude=…``).
        """
        data: dict[str, Any] = _schema(type(self)).dump_python(self, **options)
        return data


def _schema(cls: type[ParserEventBase]) -> TypeAdapter[Any]:
    """The schema of one event class, for writing its events (made once, when first used).

    The same as the class's part of :data:`ADAPTER`; the union's serialiser
    first finds the class by ``type``, which costs as much again.
    """
    schema = _SCHEMAS.get(cls)
    if schema is None:
        schema = _SCHEMAS[cls] = TypeAdapter(cls)
    return schema


_SCHEMAS: dict[type[ParserEventBase], TypeAdapter[Any]] = {}


@dataclass(slots=True)
class Text(ParserEventBase):
    """Text outside any element (kept, never dropped)."""

    type: Literal["text"] = field(default="text", init=False)
    text: str


@dataclass(slots=True)
class ThoughtStart(ParserEventBase):
    """``<thought>`` seen."""

    type: Literal["thought_start"] = field(default="thought_start", init=False)


@dataclass(slots=True)
class ThoughtDelta(ParserEventBase):
    """Text of a thought, as it streams."""

    type: Literal["thought_delta"] = field(default="thought_delta", init=False)
    text: str


@dataclass(slots=True)
class ThoughtEnd(ParserEventBase):
    """``</thought>`` seen, or the stream ended inside the thought (``truncated``)."""

    type: Literal["thought_end"] = field(default="thought_end", init=False)
    truncated: bool = False


@dataclass(slots=True)
class ActionOpen(ParserEventBase):
    """An ``<action …>`` tag seen; its body is still streaming.

    ``attrs`` are the attributes as written (names lower-cased). ``id`` is the
    id the action will have if it parses (written or generated).
    """

    type: Literal["action_open"] = field(default="action_open", init=False)
    id: str
    attrs: dict[str, str] = field(default_factory=dict)
    in_thought: bool = False


@dataclass(slots=True)
class ActionParsed(ParserEventBase):
    """A complete action, ready to dispatch (emitted in the ``feed`` call that
    delivered the closing ``>`` of ``</action>``)."""

    type: Literal["action_parsed"] = field(default="action_parsed", init=False)
    action: Action

    @property
    def id(self) -> str:
        """The action's id."""
        return self.action.id


@dataclass(slots=True)
class ActionErrorEvent(ParserEventBase):
    """An action that will not run: invalid JSON, unknown type, duplicate id,
    truncated body… ``message`` says what and how to fix it.

    Every field but ``span`` and ``message`` is keyword-only.
    """

    type: Literal["action_error"] = field(default="action_error", init=False)
    id: str | None = field(default=None, kw_only=True)
    message: str
    raw_body: str = field(default="", kw_only=True)
    attrs: dict[str, str] = field(default_factory=dict, kw_only=True)


@dataclass(slots=True)
class ResponseStart(ParserEventBase):
    """``<response …>`` seen."""

    type: Literal["response_start"] = field(default="response_start", init=False)
    final: bool = True


@dataclass(slots=True)
class ResponseDelta(ParserEventBase):
    """Text of a response, as it streams."""

    type: Literal["response_delta"] = field(default="response_delta", init=False)
    text: str


@dataclass(slots=True)
class ResponseEnd(ParserEventBase):
    """``</response>`` seen, or the stream ended inside it (``truncated``)."""

    type: Literal["response_end"] = field(default="response_end", init=False)
    final: bool = True
    truncated: bool = False


@dataclass(slots=True)
class ContextFeed(ParserEventBase):
    """A complete ``<context_feed>`` declaration."""

    type: Literal["context_feed"] = field(default="context_feed", init=False)
    feed: ContextFeedDecl


@dataclass(slots=True)
class WarningEvent(ParserEventBase):
    """Something was repaired or looked odd; nothing was lost."""

    type: Literal["warning"] = field(default="warning", init=False)
    message: str
    id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


ParserEvent = (
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
    | WarningEvent
)

#: A parser event as pydantic reads it: the union, told apart by ``type``
#: (for a ``TypeAdapter``, or a field of a model).
ParserEventModel = Annotated[ParserEvent, Field(discriminator="type")]

#: The schema of every parser event, derived from the classes above: the
#: one serialiser and validator.
ADAPTER: TypeAdapter[ParserEvent] = TypeAdapter(ParserEventModel)

#: Each event's class by its ``type``.
EVENT_CLASSES: dict[str, type[ParserEvent]] = {
    cls.__dataclass_fields__["type"].default: cls for cls in get_args(ParserEvent)
}

PARSER_EVENT_TYPES: tuple[str, ...] = tuple(EVENT_CLASSES)


def validate(data: dict[str, Any]) -> ParserEvent:
    """An event from outside values (``type`` included), validated.

    Raises
    ------
    pydantic.ValidationError
        When ``data`` is not a valid parser event.
    """
    return ADAPTER.validate_python(data)


def parse_parser_event(line: str | bytes) -> ParserEvent:
    """Read one parser event back from its JSON line (validated).

    Raises
    ------
    pydantic.ValidationError
        When the line is not JSON or not a valid parser event.
    """
    return load_json_line(ADAPTER, line)


def __getattr__(name: str) -> Any:
    # ``Warning`` (it shadowed the builtin) was this class's name: kept importable, deprecated.
    if name == "Warning":
        import warnings

        warnings.warn(
            "cortex_kernel.protocol's Warning event class is deprecated; use WarningEvent",
            DeprecationWarning,
            stacklevel=2,
        )
        return WarningEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Parser events (docs/runtime.md#events): light slotted classes with a ``type``.

Each parser event carries ``span = (start, end)``: the character offsets of
the input stream it accounts for. The spans of one stream are contiguous,
non-overlapping and cover the whole input, which is how conservation
(docs/protocol.md#streaming-guarantees) is checked. Events that account for no input (``warning``,
``action_parsed`` of a body already counted…) have an empty span
``(n, n)``.

``t`` and ``turn`` are empty when the parser makes an event; the runtime
fills them in (``event.model_copy(update=…)``) when it records the event in
a run's transcript.

Why not pydantic models
-----------------------
The parser makes one event per streamed chunk, so making an event is most
of the cost of a small ``feed`` (docs/protocol.md#streaming-guarantees): a pydantic model, even
built without validation, costs three times a slotted object (and the
compiled parser makes these as native classes). The schema stays pydantic,
in :mod:`.event_schema`, and is applied where events cross a boundary:
:meth:`ParserEventBase.to_json` serialises through the model (the JSON is
pydantic's, byte for byte), reading an event back validates it
(:func:`~.event_schema.parse_parser_event`), and a caller's event made from
outside values goes through :func:`~.event_schema.validate`. The parser
makes events only from values it has just checked. The few pydantic
methods the rest of the code uses (``model_dump``, ``model_copy``) keep
their meaning here. Treat events as immutable: they are shared by the
transcript, the view and the runtime.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from ..fastmodel import build
from ..safejson import load_json_line, model_json
from .event_schema import ADAPTER, MODEL_OF, ParserEventBaseModel
from .models import Action, ContextFeedDecl

__all__ = [
    "EVENT_CLASSES",
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
    "to_event",
    "to_model",
    "validate",
]

_BASE_FIELDS = ("span", "t", "turn", "parent")


class ParserEventBase:
    """Fields and methods shared by every parser event.

    Attributes
    ----------
    type
        The event's kind (a class attribute; ``"text"``, ``"action_parsed"``…).
    span
        ``(start, end)`` offsets of the input the event accounts for.
    t, turn
        When and in which turn the run recorded the event (``None`` as the
        parser makes it).
    parent
        The action that ran the nested run this event comes from, if any.
    """

    __slots__ = _BASE_FIELDS
    type: ClassVar[str] = ""
    # The instance fields, in the schema's order (after ``type``).
    FIELDS: ClassVar[tuple[str, ...]] = _BASE_FIELDS
    # Every field an atom, a span or a flat dict of strings: ``model_dump``
    # needs no pydantic (the others delegate to their model).
    PLAIN: ClassVar[bool] = True

    span: tuple[int, int]
    t: float | None
    turn: int | None
    parent: str | None

    def __init__(
        self,
        span: tuple[int, int],
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        self.span = span
        self.t = t
        self.turn = turn
        self.parent = parent

    def fields(self) -> dict[str, Any]:
        """Every field by name, ``type`` first, in the schema's order (values as they are)."""
        data: dict[str, Any] = {"type": self.type}
        for name in self.FIELDS:
            data[name] = getattr(self, name)
        return data

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """The fields as plain data, exactly as the pydantic model's ``model_dump(**options)``."""
        if options or not self.PLAIN:
            return self.to_model().model_dump(**options)
        data = self.fields()
        for name, value in data.items():
            if type(value) is dict:
                data[name] = dict(value)
        return data

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Self:
        """A copy with ``update``'s fields replaced (values not validated, as pydantic's).

        A name that is not a field is ignored, as pydantic's copy showed it:
        ``action_parsed``'s ``id`` is its action's, whatever the update says.
        """
        data = self.fields()
        del data["type"]
        if update:
            for name, value in update.items():
                if name in data:
                    data[name] = value
        return type(self)(**data)

    def to_model(self) -> ParserEventBaseModel:
        """The event's pydantic model (:mod:`.event_schema`), equal field by field."""
        return to_model(self)

    def to_json(self) -> str:
        """One JSON line, without the fields that are empty; never raises (lone
        surrogates are written as ``\\udxxx`` escapes). Pydantic's JSON of the model."""
        return model_json(self.to_model())

    def __reduce__(self) -> tuple[Any, ...]:
        # By its fields: the compiled classes cannot be made without __init__.
        data = self.fields()
        del data["type"]
        return (_remake, (type(self), data))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]  # compared by value, and mutable in principle

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={value!r}" for name, value in self.fields().items())
        return f"{type(self).__name__}({values})"


def _remake(cls: type[ParserEventBase], data: dict[str, Any]) -> ParserEventBase:
    """An unpickled event (see ``ParserEventBase.__reduce__``)."""
    return cls(**data)


class _Streamed(ParserEventBase):
    """What the three text events share: their text."""

    __slots__ = ("text",)
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "text")

    text: str

    def __init__(
        self,
        span: tuple[int, int],
        text: str,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        # The base's fields set here, not by its __init__: a call less for
        # most events (the others call it).
        self.span = span
        self.t = t
        self.turn = turn
        self.parent = parent
        self.text = text

    def fields(self) -> dict[str, Any]:
        """Every field by name, ``type`` first, in the schema's order (values as they are)."""
        # Written out: a streamed delta is most events, and every boundary
        # (stamping, redaction, the view, the transcript) reads its fields.
        return {
            "type": self.type,
            "span": self.span,
            "t": self.t,
            "turn": self.turn,
            "parent": self.parent,
            "text": self.text,
        }


class Text(_Streamed):
    """Text outside any element (kept, never dropped)."""

    __slots__ = ()
    type: ClassVar[str] = "text"


class ThoughtStart(ParserEventBase):
    """``<thought>`` seen."""

    __slots__ = ()
    type: ClassVar[str] = "thought_start"


class ThoughtDelta(_Streamed):
    """Text of a thought, as it streams."""

    __slots__ = ()
    type: ClassVar[str] = "thought_delta"


class ThoughtEnd(ParserEventBase):
    """``</thought>`` seen, or the stream ended inside the thought (``truncated``)."""

    __slots__ = ("truncated",)
    type: ClassVar[str] = "thought_end"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "truncated")

    truncated: bool

    def __init__(
        self,
        span: tuple[int, int],
        truncated: bool = False,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.truncated = truncated


class ActionOpen(ParserEventBase):
    """An ``<action …>`` tag seen; its body is still streaming.

    ``attrs`` are the attributes as written (names lower-cased). ``id`` is the
    id the action will have if it parses (written or generated).
    """

    __slots__ = ("attrs", "id", "in_thought")
    type: ClassVar[str] = "action_open"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "id", "attrs", "in_thought")

    id: str
    attrs: dict[str, str]
    in_thought: bool

    def __init__(
        self,
        span: tuple[int, int],
        id: str,  # the protocol's name
        attrs: dict[str, str] | None = None,
        in_thought: bool = False,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.id = id
        self.attrs = {} if attrs is None else attrs
        self.in_thought = in_thought


class ActionParsed(ParserEventBase):
    """A complete action, ready to dispatch (emitted in the ``feed`` call that
    delivered the closing ``>`` of ``</action>``)."""

    __slots__ = ("action",)
    type: ClassVar[str] = "action_parsed"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "action")
    PLAIN: ClassVar[bool] = False

    action: Action

    def __init__(
        self,
        span: tuple[int, int],
        action: Action,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.action = action

    @property
    def id(self) -> str:
        """The action's id."""
        return self.action.id


class ActionErrorEvent(ParserEventBase):
    """An action that will not run: invalid JSON, unknown type, duplicate id,
    truncated body… ``message`` says what and how to fix it."""

    __slots__ = ("attrs", "id", "message", "raw_body")
    type: ClassVar[str] = "action_error"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "id", "message", "raw_body", "attrs")

    id: str | None
    message: str
    raw_body: str
    attrs: dict[str, str]

    def __init__(
        self,
        span: tuple[int, int],
        message: str,
        id: str | None = None,  # the protocol's name
        raw_body: str = "",
        attrs: dict[str, str] | None = None,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.id = id
        self.message = message
        self.raw_body = raw_body
        self.attrs = {} if attrs is None else attrs


class ResponseStart(ParserEventBase):
    """``<response …>`` seen."""

    __slots__ = ("final",)
    type: ClassVar[str] = "response_start"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "final")

    final: bool

    def __init__(
        self,
        span: tuple[int, int],
        final: bool = True,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.final = final


class ResponseDelta(_Streamed):
    """Text of a response, as it streams."""

    __slots__ = ()
    type: ClassVar[str] = "response_delta"


class ResponseEnd(ParserEventBase):
    """``</response>`` seen, or the stream ended inside it (``truncated``)."""

    __slots__ = ("final", "truncated")
    type: ClassVar[str] = "response_end"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "final", "truncated")

    final: bool
    truncated: bool

    def __init__(
        self,
        span: tuple[int, int],
        final: bool = True,
        truncated: bool = False,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.final = final
        self.truncated = truncated


class ContextFeed(ParserEventBase):
    """A complete ``<context_feed>`` declaration."""

    __slots__ = ("feed",)
    type: ClassVar[str] = "context_feed"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "feed")
    PLAIN: ClassVar[bool] = False

    feed: ContextFeedDecl

    def __init__(
        self,
        span: tuple[int, int],
        feed: ContextFeedDecl,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.feed = feed


class Warning(ParserEventBase):  # shadows the builtin on purpose: the protocol names it
    """Something was repaired or looked odd; nothing was lost."""

    __slots__ = ("details", "id", "message")
    type: ClassVar[str] = "warning"
    FIELDS: ClassVar[tuple[str, ...]] = (*_BASE_FIELDS, "message", "id", "details")
    PLAIN: ClassVar[bool] = False  # details may hold anything

    message: str
    id: str | None
    details: dict[str, Any]

    def __init__(
        self,
        span: tuple[int, int],
        message: str,
        id: str | None = None,  # the protocol's name
        details: dict[str, Any] | None = None,
        t: float | None = None,
        turn: int | None = None,
        parent: str | None = None,
    ) -> None:
        super().__init__(span, t, turn, parent)
        self.message = message
        self.id = id
        self.details = {} if details is None else details


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
    | Warning
)

EVENT_CLASSES: dict[str, type[ParserEvent]] = {
    cls.type: cls
    for cls in (
        Text,
        ThoughtStart,
        ThoughtDelta,
        ThoughtEnd,
        ActionOpen,
        ActionParsed,
        ActionErrorEvent,
        ResponseStart,
        ResponseDelta,
        ResponseEnd,
        ContextFeed,
        Warning,
    )
}

PARSER_EVENT_TYPES: tuple[str, ...] = tuple(EVENT_CLASSES)

_ALL_FIELDS: dict[str, set[str]] = {
    kind: {"type", *cls.FIELDS} for kind, cls in EVENT_CLASSES.items()
}


def to_model(event: ParserEventBase) -> ParserEventBaseModel:
    """The pydantic model of ``event``, equal field by field (not validated again).

    Events are made from checked values: by the parser, by typed code, or
    from outside values through :func:`validate`.
    """
    data = event.fields()
    # Every field is set; the set is shared, as pydantic copies it before a change.
    return build(MODEL_OF[event.type], data, _ALL_FIELDS[event.type])


def to_event(model: ParserEventBaseModel) -> ParserEvent:
    """The light event of a validated ``model``."""
    cls = EVENT_CLASSES[model.type]
    data = dict(model.__dict__)
    del data["type"]
    return cls(**data)


def validate(data: dict[str, Any]) -> ParserEvent:
    """An event from outside values (``type`` included), validated by its model."""
    return to_event(ADAPTER.validate_python(data))


def parse_parser_event(line: str | bytes) -> ParserEvent:
    """Read one parser event back from its JSON line (validated)."""
    return to_event(load_json_line(ADAPTER, line))

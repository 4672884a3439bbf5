"""The schema of the parser events (docs/runtime.md#events): pydantic models, for the boundaries.

The parser and the runtime pass the light classes of
:mod:`.parser_events` around; these models are their schema. An event is
validated against it where it crosses a boundary: written
(:meth:`~.parser_events.ParserEventBase.to_json` serialises through its model,
so the JSON is pydantic's), read back (:func:`~.parser_events.parse_parser_event`,
the transcript reader) or built by a caller from outside values
(:func:`~.parser_events.validate`). ``MODEL_OF`` maps an
event's ``type`` to its model; a test checks, on the property-test corpus,
that every event the parser makes equals its model, field by field and
byte for byte in JSON.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..safejson import model_json
from .models import Action, ContextFeedDecl

__all__ = [
    "ADAPTER",
    "MODEL_OF",
    "ActionErrorEventModel",
    "ActionOpenModel",
    "ActionParsedModel",
    "ContextFeedModel",
    "ParserEventBaseModel",
    "ParserEventModel",
    "ResponseDeltaModel",
    "ResponseEndModel",
    "ResponseStartModel",
    "TextModel",
    "ThoughtDeltaModel",
    "ThoughtEndModel",
    "ThoughtStartModel",
    "WarningModel",
]


class ParserEventBaseModel(BaseModel):
    """Fields shared by every parser event (schema of :class:`~.parser_events.ParserEventBase`)."""

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


class TextModel(ParserEventBaseModel):
    """Text outside any element (kept, never dropped)."""

    type: Literal["text"] = "text"
    text: str


class ThoughtStartModel(ParserEventBaseModel):
    """``<thought>`` seen."""

    type: Literal["thought_start"] = "thought_start"


class ThoughtDeltaModel(ParserEventBaseModel):
    """Text of a thought, as it streams."""

    type: Literal["thought_delta"] = "thought_delta"
    text: str


class ThoughtEndModel(ParserEventBaseModel):
    """``</thought>`` seen, or the stream ended inside the thought (``truncated``)."""

    type: Literal["thought_end"] = "thought_end"
    truncated: bool = False


class ActionOpenModel(ParserEventBaseModel):
    """An ``<action …>`` tag seen; its body is still streaming.

    ``attrs`` are the attributes as written (names lower-cased). ``id`` is the
    id the action will have if it parses (written or generated).
    """

    type: Literal["action_open"] = "action_open"
    id: str
    attrs: dict[str, str] = Field(default_factory=dict)
    in_thought: bool = False


class ActionParsedModel(ParserEventBaseModel):
    """A complete action, ready to dispatch (emitted in the ``feed`` call that
    delivered the closing ``>`` of ``</action>``)."""

    type: Literal["action_parsed"] = "action_parsed"
    action: Action

    @property
    def id(self) -> str:
        """The action's id."""
        return self.action.id


class ActionErrorEventModel(ParserEventBaseModel):
    """An action that will not run: invalid JSON, unknown type, duplicate id,
    truncated body… ``message`` says what and how to fix it."""

    type: Literal["action_error"] = "action_error"
    id: str | None = None
    message: str
    raw_body: str = ""
    attrs: dict[str, str] = Field(default_factory=dict)


class ResponseStartModel(ParserEventBaseModel):
    """``<response …>`` seen."""

    type: Literal["response_start"] = "response_start"
    final: bool = True


class ResponseDeltaModel(ParserEventBaseModel):
    """Text of a response, as it streams."""

    type: Literal["response_delta"] = "response_delta"
    text: str


class ResponseEndModel(ParserEventBaseModel):
    """``</response>`` seen, or the stream ended inside it (``truncated``)."""

    type: Literal["response_end"] = "response_end"
    final: bool = True
    truncated: bool = False


class ContextFeedModel(ParserEventBaseModel):
    """A complete ``<context_feed>`` declaration."""

    type: Literal["context_feed"] = "context_feed"
    feed: ContextFeedDecl


class WarningModel(ParserEventBaseModel):
    """Something was repaired or looked odd; nothing was lost."""

    type: Literal["warning"] = "warning"
    message: str
    id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


ParserEventModel = Annotated[
    TextModel
    | ThoughtStartModel
    | ThoughtDeltaModel
    | ThoughtEndModel
    | ActionOpenModel
    | ActionParsedModel
    | ActionErrorEventModel
    | ResponseStartModel
    | ResponseDeltaModel
    | ResponseEndModel
    | ContextFeedModel
    | WarningModel,
    Field(discriminator="type"),
]


ADAPTER: TypeAdapter[ParserEventModel] = TypeAdapter(ParserEventModel)

MODEL_OF: dict[str, type[ParserEventBaseModel]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        TextModel,
        ThoughtStartModel,
        ThoughtDeltaModel,
        ThoughtEndModel,
        ActionOpenModel,
        ActionParsedModel,
        ActionErrorEventModel,
        ResponseStartModel,
        ResponseDeltaModel,
        ResponseEndModel,
        ContextFeedModel,
        WarningModel,
    )
}

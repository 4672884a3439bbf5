"""The streaming protocol, sans-IO: models, events and the incremental parser.

Everything public is re-exported here; import from ``cortex_kernel.protocol``.
Of ``cortex_kernel`` it imports only the base-layer helper ``safejson``
(``scripts/import_graph.py`` and ``tests/test_layers.py`` keep it so).
"""

from __future__ import annotations

from ._actions import build_action
from ._jsonrepair import JsonResult, loads_lenient
from .models import Action, ActionMode, ActionType, ContextFeedDecl, FeedType, IdAllocator
from .parser import Parser
from .parser_events import (
    PARSER_EVENT_TYPES,
    ActionErrorEvent,
    ActionOpen,
    ActionParsed,
    ContextFeed,
    ParserEvent,
    ParserEventBase,
    ParserEventModel,
    ResponseDelta,
    ResponseEnd,
    ResponseStart,
    Text,
    ThoughtDelta,
    ThoughtEnd,
    ThoughtStart,
    WarningEvent,
    parse_parser_event,
)

__all__ = [
    "PARSER_EVENT_TYPES",
    "Action",
    "ActionErrorEvent",
    "ActionMode",
    "ActionOpen",
    "ActionParsed",
    "ActionType",
    "ContextFeed",
    "ContextFeedDecl",
    "FeedType",
    "IdAllocator",
    "JsonResult",
    "Parser",
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
    "build_action",
    "loads_lenient",
    "parse_parser_event",
]


def __getattr__(name: str) -> object:
    # The old name of WarningEvent, deprecated (see parser_events).
    if name == "Warning":
        from . import parser_events

        return parser_events.Warning  # warns
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

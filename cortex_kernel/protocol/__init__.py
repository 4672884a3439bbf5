"""The streaming protocol, sans-IO: models, events and the incremental parser.

Everything public is re-exported here; import from ``cortex_kernel.protocol``.
This package imports nothing else of ``cortex_kernel`` (SPEC, STYLE).
"""

from __future__ import annotations

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
    ResponseDelta,
    ResponseEnd,
    ResponseStart,
    Text,
    ThoughtDelta,
    ThoughtEnd,
    ThoughtStart,
    Warning,
    parse_parser_event,
)

# Variable references ($name, ${name}, $name.field[0]) live in .references;
# their names (find_references, substitute) are re-exported here once that
# module exists.

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
    "Parser",
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

"""The things the protocol talks about: actions, their types and modes, feeds.

The parser builds them and everything downstream (scheduler, widget,
transcript) reads them. They are slotted dataclasses, like the events that
carry them (:mod:`.parser_events`), built from values their maker has
checked; pydantic validates and serialises them wherever an event crosses a
boundary. Treat them as immutable: they are shared by the transcript, the
view and the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "Action",
    "ActionMode",
    "ActionType",
    "ContextFeedDecl",
    "FeedType",
    "IdAllocator",
]


class ActionType(StrEnum):
    """What an action runs (docs/protocol.md#actions)."""

    TOOL = "tool"
    LLM = "llm"
    AGENT = "agent"
    RELIC = "relic"
    WORKFLOW = "workflow"
    INTERNAL = "internal"


class ActionMode(StrEnum):
    """How the loop waits for an action (docs/protocol.md#actions)."""

    SYNC = "sync"
    ASYNC = "async"
    FIRE_AND_FORGET = "fire_and_forget"


class FeedType(StrEnum):
    """How a context feed is refreshed (docs/feeds.md)."""

    ON_DEMAND = "on_demand"
    PERIODIC = "periodic"
    INTERNAL = "internal"


@dataclass(slots=True, kw_only=True)
class Action:
    """A complete, dispatchable action.

    Attributes
    ----------
    id
        Unique in the run; generated (``a1``, ``a2``, …) when the model gave none.
    type, mode
        What runs and how the loop waits for it.
    depends_on
        Explicit dependencies, in the order written.
    output_key
        The variable the result is bound to, if any.
    timeout
        Seconds, or ``None`` for no per-action timeout.
    retries
        Extra attempts after a failure.
    body
        The JSON body as parsed (after any lenient repair), minus nothing: the
        control fields (``id``, ``mode``…) stay in it as written.
    raw_body
        The body exactly as the model wrote it.
    in_thought
        Whether the action was written inside a ``<thought>``.
    """

    id: str
    type: ActionType
    mode: ActionMode = ActionMode.SYNC
    depends_on: tuple[str, ...] = ()
    output_key: str | None = None
    timeout: float | None = None
    retries: int = 0
    body: dict[str, Any]
    raw_body: str = ""
    in_thought: bool = False

    @property
    def name(self) -> str | None:
        """The ``name`` field of the body (tool, agent, relic, workflow name)."""
        value = self.body.get("name")
        return value if isinstance(value, str) else None

    @property
    def parameters(self) -> dict[str, Any]:
        """The ``parameters`` field of the body, or an empty dict."""
        value = self.body.get("parameters")
        return value if isinstance(value, dict) else {}


@dataclass(slots=True, kw_only=True)
class ContextFeedDecl:
    """A ``<context_feed>`` declaration: a named source of prompt text (docs/feeds.md)."""

    id: str
    type: FeedType = FeedType.ON_DEMAND
    source: dict[str, Any]
    raw_body: str = ""


class IdAllocator:
    """Generates action ids (``a1``, ``a2``, …) and remembers the ids of a run.

    One allocator is shared by every parser of a run, so generated ids never
    collide across turns and a duplicate id is detected wherever it appears.
    """

    def __init__(self, prefix: str = "a") -> None:
        self._prefix = prefix
        self._counter = 0
        self.seen: set[str] = set()

    def new(self) -> str:
        """Return a fresh id that no action of the run has used."""
        while True:
            self._counter += 1
            candidate = f"{self._prefix}{self._counter}"
            if candidate not in self.seen:
                self.seen.add(candidate)
                return candidate

    def claim(self, action_id: str) -> bool:
        """Record an id given by the model; ``False`` if the run already has it."""
        if action_id in self.seen:
            return False
        self.seen.add(action_id)
        return True

"""One turn of a run: what its stream produced (:class:`Turn`) and how its events are acted on.

:class:`TurnReader` takes the parser's events as they arrive: it stamps and
emits each one, then hands it to the handler its type names in
:data:`_HANDLERS` (one small function per event kind, as the parser's
transitions are a table). The streamed text deltas, nearly every event, are
appended before the table is consulted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, Literal

import anyio.lowlevel

from ..protocol import build_action
from ..protocol import parser_events as pe
from ..protocol.models import ActionMode, IdAllocator
from .drift import RETRYABLE_STATES, duplicate_id_message, repeated_success_message
from .feed_run import RunFeeds
from .limits import Budget
from .nodes import NodeState
from .ports import ToolCall
from .run_events import Usage
from .scheduler import Scheduler

__all__: list[str] = []  # used by the loop only


@dataclass
class Turn:
    """What one streamed completion produced."""

    number: int
    text: str = ""
    written: str | None = None  # the model's own text, when calls were read out of it
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    reason: Literal["stream_end", "sync_action", "error", "cancelled"] = "stream_end"
    cut_by: str | None = None
    actions: list[str] = field(default_factory=list)
    errors: list[pe.ActionErrorEvent] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    response: list[str] = field(default_factory=list)
    final: str | None = None
    progress: str | None = None
    in_response: bool = False
    response_is_final: bool = True
    limit: str | None = None
    error: str | None = None
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # action id -> markup span
    notes: list[tuple[int, int]] = field(default_factory=list)  # progress notes' markup spans
    # Succeeded actions written again as they were: id -> the variable of the result.
    repeated: dict[str, str] = field(default_factory=dict)
    response_start: int = 0
    thought: list[str] = field(default_factory=list)


@dataclass(eq=False)
class TurnReader:
    """Acts on one turn's parser events: submits actions, records text, declares feeds.

    Parameters
    ----------
    turn
        The turn being read; its fields are filled in as events arrive.
    scheduler, budget, feeds
        The run's: actions are counted against ``budget`` and submitted to
        ``scheduler``, whose event sink and clock the turn's events share;
        ``<context_feed>`` declarations go to ``feeds``.
    ids
        The run's id allocator (its parser's): an action renamed because its
        id was taken claims its new id there (see :meth:`_renamed`).
    """

    turn: Turn
    _: KW_ONLY
    scheduler: Scheduler
    budget: Budget
    feeds: RunFeeds
    ids: IdAllocator

    async def read(self, events: list[pe.ParserEvent]) -> int | None:
        """Stamp, emit and act on one feed's events.

        Returns
        -------
        int | None
            The offset at which a ``sync`` action cut the turn. The rest of
            ``events`` is then dropped, as it is when an action is refused at
            a limit (``turn.limit`` is set and ``None`` returned).
        """
        turn = self.turn
        emit, clock = self.scheduler.emit, self.scheduler.clock
        for event in events:
            # The run's record is a stamped copy (the parser's event is left as it was).
            if isinstance(event, pe.ActionErrorEvent) and event.id in self.scheduler.nodes:
                repeated = self._repeated_success(event)
                if repeated is not None:
                    emit(repeated)
                    continue
                renamed = self._renamed(event)
                if renamed is None:
                    event = replace(event, message=self._duplicate_message(event))
                else:
                    said, parsed = renamed
                    emit(replace(said, t=clock(), turn=turn.number))
                    event = parsed
            event = replace(event, t=clock(), turn=turn.number)
            emit(event)
            # Streamed text first, by exact type: nearly every event is one.
            if type(event) is pe.ThoughtDelta:
                turn.thought.append(event.text)
                continue
            if type(event) is pe.ResponseDelta:
                turn.response.append(event.text)
                continue
            handler = _HANDLERS.get(type(event))
            if handler is None:
                continue
            cut = await handler(self, event)
            if cut is not None or turn.limit is not None:
                return cut
        return None

    def _repeated_success(self, event: pe.ActionErrorEvent) -> pe.WarningEvent | None:
        """A warning in place of the error when an action that succeeded is written again as it was.

        Small models write the action whose result they just read once more,
        same id, same type, same body: it is that action, not a new one, so
        its result stands, nothing runs again and the turn has no error (the
        loop reports the result again when the turn's text does not use it).
        Anything that differs stays a duplicate id.
        """
        assert event.id is not None
        node = self.scheduler.nodes[event.id]
        same = (
            event.message.startswith("duplicate id")
            and node.state is NodeState.SUCCEEDED
            and event.attrs.get("type") == node.action.type.value
            and event.raw_body.strip() == node.action.raw_body.strip()
        )
        if not same:
            return None
        variable = node.action.output_key or node.id
        self.turn.repeated[event.id] = variable
        return pe.WarningEvent(
            span=event.span,
            t=self.scheduler.clock(),
            turn=self.turn.number,
            id=event.id,
            message=repeated_success_message(event.id, variable),
        )

    def _renamed(
        self, event: pe.ActionErrorEvent
    ) -> tuple[pe.WarningEvent, pe.ActionParsed] | None:
        """Another action under the id of one that succeeded: it runs under a free id.

        Qwen2.5-Coder-1.5B wrote its next call (``to_fahrenheit`` after
        ``weather``) with the id and ``output_key`` of its last one, and wrote
        it so again when told the id was taken, until the run was stuck. The
        action runs as ``{id}_2`` (the first free), with a warning; an
        ``output_key`` the earlier action set is dropped, so its variable is
        not overwritten (the result is in ``${id}_2``).
        """
        assert event.id is not None
        node = self.scheduler.nodes[event.id]
        if (
            not event.message.startswith("duplicate id")
            or node.state is not NodeState.SUCCEEDED
            or event.raw_body.strip() == node.action.raw_body.strip()
        ):
            return None
        taken = self.scheduler.nodes.keys() | self.ids.seen
        new_id = next(f"{event.id}_{n}" for n in range(2, 10_000) if f"{event.id}_{n}" not in taken)
        attrs = {**event.attrs, "id": new_id}
        kept = attrs.get("output_key")
        if kept is not None and kept.strip() in (node.action.output_key, node.id):
            del attrs["output_key"]
        built = build_action(attrs, event.raw_body, open_id=new_id, in_thought=False, ids=self.ids)
        if built.action is None:
            return None
        said = (
            f"action id '{event.id}' belongs to an action that succeeded; "
            f"this other action runs as '{new_id}'"
        )
        if kept is not None and "output_key" not in attrs:
            said += f" (its result in ${new_id}, not in ${kept})"
        warning = pe.WarningEvent(span=event.span, id=new_id, message=said)
        return warning, pe.ActionParsed(span=event.span, action=built.action)

    def _duplicate_message(self, event: pe.ActionErrorEvent) -> str:
        """A parser's duplicate-id error, saying where the earlier result is (rule 5)."""
        assert event.id is not None
        node = self.scheduler.nodes[event.id]
        if not event.message.startswith("duplicate id") or node.state.value in RETRYABLE_STATES:
            return event.message
        return duplicate_id_message(event.id, node.state.value, node.action.output_key or node.id)

    # ------------------------------------------------------------- handlers

    async def _action_open(self, event: pe.ActionOpen) -> None:
        self.turn.spans[event.id] = (event.span[0], event.span[1])

    async def _action_parsed(self, event: pe.ActionParsed) -> int | None:
        turn = self.turn
        start = turn.spans.get(event.action.id, event.span)[0]
        turn.spans[event.action.id] = (start, event.span[1])
        refused = self.budget.take_action()  # this run's and every caller's
        if refused is not None:
            turn.limit = refused
            return None
        node = self.scheduler.submit(event.action)
        if node is None:
            return None
        turn.actions.append(node.id)
        if event.action.mode is ActionMode.SYNC:
            turn.cut_by = node.id
            return event.span[1]
        # Let the action start now, before the rest of this chunk is
        # handled: one chunk may carry many actions.
        await anyio.lowlevel.checkpoint()
        return None

    async def _action_error(self, event: pe.ActionErrorEvent) -> None:
        self.turn.errors.append(event)
        if event.id is not None:
            self.scheduler.reject(event.id, event.message)

    async def _context_feed(self, event: pe.ContextFeed) -> None:
        error = self.feeds.declare(event)
        if error is not None:
            self.scheduler.emit(replace(error, t=self.scheduler.clock(), turn=self.turn.number))
            self.turn.errors.append(error)

    async def _text(self, event: pe.Text) -> None:
        self.turn.outside.append(event.text)

    async def _response_start(self, event: pe.ResponseStart) -> None:
        turn = self.turn
        turn.in_response = True
        turn.response_is_final = event.final
        turn.response_start = event.span[0]
        turn.response = []

    async def _response_end(self, event: pe.ResponseEnd) -> None:
        turn = self.turn
        text = "".join(turn.response).strip()
        if event.final and turn.response_is_final:
            turn.final = text
        else:
            turn.progress = text
            turn.notes.append((turn.response_start, event.span[1]))
        turn.in_response = False


#: Event type -> what the reader does with it; a type not here is only emitted
#: (thought boundaries, warnings).
_HANDLERS: dict[type[pe.ParserEvent], Callable[[TurnReader, Any], Awaitable[int | None]]] = {
    pe.ActionOpen: TurnReader._action_open,
    pe.ActionParsed: TurnReader._action_parsed,
    pe.ActionErrorEvent: TurnReader._action_error,
    pe.ContextFeed: TurnReader._context_feed,
    pe.Text: TurnReader._text,
    pe.ResponseStart: TurnReader._response_start,
    pe.ResponseEnd: TurnReader._response_end,
}

"""Runtime events (docs/runtime.md#events): what a run reports, one JSON object per line.

Every runtime event carries ``t``: seconds since the run started, on the
monotonic clock. Action events carry the action ``id``. A run's event stream
is these events interleaved with the parser events of each turn (the
runtime stamps those with ``t`` and ``turn``); consumers — the widget, the
transcript, tests and benchmarks — read only events.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..protocol.models import Action
from ..protocol.parser_events import (
    ActionParsed,
    ParserEvent,
    ParserEventBase,
    ParserEventModel,
)
from ..safejson import load_json_line, model_json

__all__ = [
    "ActionCancelled",
    "ActionChanges",
    "ActionFailed",
    "ActionLog",
    "ActionPlaced",
    "ActionQueued",
    "ActionSkipped",
    "ActionStarted",
    "ActionSucceeded",
    "AnyEvent",
    "ApprovalDecided",
    "ApprovalRequested",
    "FeedUpdated",
    "InternalAudit",
    "RunFinished",
    "RunStarted",
    "RunStatus",
    "RuntimeEvent",
    "RuntimeEventBase",
    "TurnEnded",
    "TurnStarted",
    "Usage",
    "VariableBound",
    "action_scope",
    "nest_event",
    "parse_event",
    "scope_prefix",
    "scoped_emit",
]

# ``incomplete``: the run ended normally but a ``$var`` of its answer could
# not be filled (its action failed or never ran): the answer shows ⟨name: reason⟩.
# ``no_answer``: no final response even after the repair turn (the answer is
# the last thought, marked provisional); ``stuck``: the same failing action
# three times (docs/runtime.md#how-a-run-ends, issue 9 §3).
RunStatus = Literal["ok", "incomplete", "error", "cancelled", "limit", "no_answer", "stuck"]


class Usage(BaseModel):
    """What a turn or a run consumed. ``cost`` is ``None`` when unknown."""

    model_config = ConfigDict(frozen=True)

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    seconds: float = 0.0

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost is None and other.cost is None
            else ((self.cost or 0.0) + (other.cost or 0.0))
        )
        return Usage(
            turns=self.turns + other.turns,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=cost,
            seconds=self.seconds + other.seconds,
        )


class RuntimeEventBase(BaseModel):
    """Fields shared by every runtime event."""

    model_config = ConfigDict(frozen=True)

    type: str
    t: float
    # The action that runs the nested run this event belongs to (None: the cell's run).
    parent: str | None = None

    def to_json(self) -> str:
        """One JSON line, without the fields that are empty; never raises."""
        return model_json(self)


class RunStarted(RuntimeEventBase):
    """A run began: one cell, one message."""

    type: Literal["run_started"] = "run_started"
    run_id: str
    message: str
    model: str


class TurnStarted(RuntimeEventBase):
    """A streamed completion began."""

    type: Literal["turn_started"] = "turn_started"
    turn: int
    repair: bool = False  # the one turn that asks for a missing final response
    # The prompt's size as the model adapter counts it (None: not counted);
    # the view says the model is reading that many tokens until its first one.
    prompt_tokens: int | None = None


class TurnEnded(RuntimeEventBase):
    """A turn ended: ``reason`` is ``stream_end``, ``sync_action``, ``error`` or ``cancelled``."""

    type: Literal["turn_ended"] = "turn_ended"
    turn: int
    reason: Literal["stream_end", "sync_action", "error", "cancelled"]
    usage: Usage = Usage()


class ActionQueued(RuntimeEventBase):
    """An action was submitted; ``waiting_on`` lists the dependencies not yet succeeded."""

    type: Literal["action_queued"] = "action_queued"
    id: str
    action: Action
    depends_on: tuple[str, ...] = ()  # explicit and implicit, resolved
    waiting_on: tuple[str, ...] = ()


class ActionStarted(RuntimeEventBase):
    """An action began running (``attempt`` counts from 1)."""

    type: Literal["action_started"] = "action_started"
    id: str
    attempt: int = 1


class ActionSucceeded(RuntimeEventBase):
    """An action finished; ``preview`` is a short text form of its result."""

    type: Literal["action_succeeded"] = "action_succeeded"
    id: str
    preview: str = ""
    duration: float = 0.0


class ActionFailed(RuntimeEventBase):
    """An action raised, timed out or exhausted its retries."""

    type: Literal["action_failed"] = "action_failed"
    id: str
    error: str
    duration: float = 0.0
    attempts: int = 1
    # The failing code's own frames (the runtime's trimmed), when it raised.
    traceback: str | None = None


class ActionSkipped(RuntimeEventBase):
    """An action never ran: a dependency failed, was cancelled or never appeared."""

    type: Literal["action_skipped"] = "action_skipped"
    id: str
    reason: str


class ActionCancelled(RuntimeEventBase):
    """An action was cancelled (interrupt, run end, limit).

    ``unstopped`` says what of it runs on when it could not be stopped (a
    sync tool's thread): the views show it as still running, not cancelled.
    """

    type: Literal["action_cancelled"] = "action_cancelled"
    id: str
    reason: str = "cancelled"
    unstopped: str | None = None


class ActionLog(RuntimeEventBase):
    """Output of a running action that is not its result: a tool's stderr, kept."""

    type: Literal["action_log"] = "action_log"
    id: str
    stream: Literal["stderr"] = "stderr"
    text: str


class ActionChanges(RuntimeEventBase):
    """What a code run in the notebook's namespace changed, and the code that ran.

    ``changes`` is :meth:`ChangeReport.to_dict
    <cortex_kernel.runtime.changes.ChangeReport.to_dict>` (its ``summary`` is
    also in the action's result the model reads); ``in_place`` marks a run
    that changed an existing object in place; ``figures`` counts the
    matplotlib figures it opened (shown in the cell). ``pngs`` are those
    figures, for this process's views only (the static view draws them
    under the action): no JSON line or transcript carries them.
    """

    type: Literal["action_changes"] = "action_changes"
    id: str
    code: str = ""
    summary: str = ""
    changes: dict[str, Any] = {}
    in_place: bool = False
    figures: int = 0
    pngs: tuple[bytes, ...] = Field(default=(), exclude=True, repr=False)


class ActionPlaced(RuntimeEventBase):
    """Where a running action's work is: a worker of a cluster (``backend`` ``dask``).

    A second placement of the same call (``moved_from`` set) means the
    worker running it was lost and the cluster ran it again elsewhere: the
    view shows it as a retry.
    """

    type: Literal["action_placed"] = "action_placed"
    id: str
    backend: str
    where: str
    dashboard: str | None = None
    moved_from: str | None = None
    placement: int = 1  # 1 for the first worker, 2 after one was lost…


class ApprovalRequested(RuntimeEventBase):
    """A call marked ``confirm: true`` waits for a human.

    ``parameters`` are exactly what runs (secrets masked); ``text`` is what a
    human is shown (those parameters as JSON) and ``digest`` its SHA-256. An
    answer names the request's ``token`` (unique per request, where action
    ids repeat across workflows and sub-agents) and the digest of the text
    it showed. ``kind`` is ``tool`` or ``relic`` (``tool`` then names
    ``RELIC.OPERATION``).
    """

    type: Literal["approval_requested"] = "approval_requested"
    id: str
    tool: str
    kind: str = "tool"
    parameters: dict[str, Any] = {}
    token: str = ""
    text: str = ""
    digest: str = ""
    notes: list[str] = []


class ApprovalDecided(RuntimeEventBase):
    """A human (or ``--yes``) approved or denied the waiting request ``token``."""

    type: Literal["approval_decided"] = "approval_decided"
    id: str
    tool: str
    approved: bool
    by: str = "user"  # "user" (the view's buttons), "--yes" or "%approvals …"
    token: str = ""


class VariableBound(RuntimeEventBase):
    """A variable got a value: an ``output_key`` result, an action id, or ``set_variable``."""

    type: Literal["variable_bound"] = "variable_bound"
    name: str
    id: str | None = None
    type_name: str = ""
    preview: str = ""


class FeedUpdated(RuntimeEventBase):
    """A context feed was (re)rendered; ``error`` when its source failed."""

    type: Literal["feed_updated"] = "feed_updated"
    feed_id: str
    chars: int = 0
    truncated: bool = False
    error: str | None = None


class InternalAudit(RuntimeEventBase):
    """An ``internal`` action or ``<context_feed>``: allowed or blocked, and how it went.

    Every one is recorded, so the transcript is an audit trail of how the
    model changed its own run.
    """

    type: Literal["internal_action"] = "internal_action"
    id: str
    name: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    allowed: bool = True
    outcome: Literal["ok", "error", "blocked"] = "ok"
    message: str = ""


class RunFinished(RuntimeEventBase):
    """The run ended; ``answer`` is the final answer with its ``$var``s filled in.

    ``grounding`` is :meth:`GroundingReport.to_dict
    <cortex_kernel.runtime.grounding.GroundingReport.to_dict>` of the final
    answer (docs/runtime.md#grounded-answers), ``None`` when it was not checked.
    """

    type: Literal["run_finished"] = "run_finished"
    status: RunStatus
    answer: str = ""
    message: str = ""
    usage: Usage = Usage()
    grounding: dict[str, Any] | None = None


RuntimeEvent = Annotated[
    RunStarted
    | TurnStarted
    | TurnEnded
    | ActionQueued
    | ActionStarted
    | ActionSucceeded
    | ActionFailed
    | ActionSkipped
    | ActionCancelled
    | ActionLog
    | ActionChanges
    | ActionPlaced
    | ApprovalRequested
    | ApprovalDecided
    | VariableBound
    | FeedUpdated
    | InternalAudit
    | RunFinished,
    Field(discriminator="type"),
]


# What a run emits: a parser event (a dataclass) or a runtime event.
AnyEvent = ParserEvent | RuntimeEvent

# What a transcript line holds: the schema of either, for reading back.
_ADAPTER: TypeAdapter[Any] = TypeAdapter(
    Annotated[ParserEventModel | RuntimeEvent, Field(discriminator="type")]
)


def parse_event(line: str | bytes) -> ParserEvent | RuntimeEvent:
    """Read one event (parser or runtime) back from its JSON line (validated)."""
    event: ParserEvent | RuntimeEvent = load_json_line(_ADAPTER, line)
    return event


# The actions (ids) whose steps run in this task, outermost first: a
# workflow's steps run through the run's own executors, whose events must
# carry the step's whole id (``w1/a1``), not the bare ``a1`` that a
# top-level action may have too.
_SCOPE: ContextVar[tuple[str, ...]] = ContextVar("cortex_action_scope", default=())


def scope_prefix() -> str:
    """The id prefix of the actions running in this task (``""`` at the top).

    Examples
    --------
    >>> scope_prefix()
    ''
    >>> with action_scope("w1"), action_scope("inner"):
    ...     scope_prefix()
    'w1/inner'
    """
    return "/".join(_SCOPE.get())


@contextmanager
def action_scope(parent: str | None) -> Iterator[None]:
    """Run the block's actions as steps of ``parent`` (``None``: as a nested run's own).

    A workflow's steps are in its scope; a sub-agent's run starts a fresh
    one, since its events are nested by the action that runs it.
    """
    token = _SCOPE.set(() if parent is None else (*_SCOPE.get(), parent))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def scoped_emit(emit: Callable[[Any], None]) -> Callable[[Any], None]:
    """``emit`` for the events of the action running now, nested as its steps' are.

    The scope is read now, so the reporter may be called later or from
    another thread (a tool's stderr, a cluster's placement).
    """
    prefix = scope_prefix()
    if not prefix:
        return emit
    return lambda event: emit(nest_event(event, prefix))


def nest_event(event: Any, parent: str) -> Any:
    """``event`` of a nested run, as its parent run records it.

    Its ``parent`` becomes the action that runs the nested run (or that
    action's id before a deeper parent), and every action id it carries is
    prefixed ``PARENT/`` so ids never collide across runs and the view nests
    them (``critic/a1`` under ``critic``).
    """
    own = getattr(event, "parent", None)
    update: dict[str, Any] = {"parent": parent if own is None else f"{parent}/{own}"}
    # action_parsed's id is its action's, not a field of its own.
    if isinstance(getattr(event, "id", None), str) and not isinstance(event, ActionParsed):
        update["id"] = f"{parent}/{event.id}"
    action = getattr(event, "action", None)
    if isinstance(action, Action):
        update["action"] = dataclasses.replace(
            action,
            id=f"{parent}/{action.id}",
            depends_on=tuple(f"{parent}/{d}" for d in action.depends_on),
        )
    for name in ("depends_on", "waiting_on"):
        ids = getattr(event, name, None)
        if isinstance(ids, tuple):
            update[name] = tuple(f"{parent}/{d}" for d in ids)
    if isinstance(event, ParserEventBase):
        return dataclasses.replace(event, **update)
    return event.model_copy(update=update)

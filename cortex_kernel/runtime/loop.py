"""One run's agent loop (docs/runtime.md#agent-loop): turns, streaming dispatch, end conditions.

Strategy
--------
The run's task (the caller of :meth:`Run.execute`) streams the model and
feeds the parser; every ``action_parsed`` is submitted to the scheduler in
the same step, so actions start while the model is still writing. The
actions themselves run in the run's task group (``fire_and_forget`` ones in
the session's background group). The whole run sits inside a
``move_on_after(wall_time)`` scope, so a wall-time limit is plain
cancellation too; ``fire_and_forget`` actions get the same deadline.

What the run consumes is counted in its :class:`~.limits.Budget`: its
turns, its actions, the tokens of its ``llm`` actions and everything its
sub-agents do (their budgets charge this one). A limit reached anywhere in
that tree ends the run with status ``limit``. A run that ends at a limit or
is cancelled (an interrupt) cancels its ``fire_and_forget`` actions too and
names in its message any work that could not be stopped (a sync tool's
thread).

Conversation state is committed a whole turn at a time: a turn's messages
(the results that opened it and the assistant text) are appended only once
its stream has ended cleanly, so an error or a cancellation mid-turn never
leaves a half-written assistant message behind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from ..exceptions import ModelError
from ..protocol.models import ActionMode, IdAllocator
from ..protocol.parser import Parser
from ..protocol.parser_events import (
    ActionErrorEvent,
    ActionOpen,
    ActionParsed,
    ContextFeed,
    ParserEvent,
    ResponseDelta,
    ResponseEnd,
    ResponseStart,
    Text,
    ThoughtDelta,
    WarningEvent,
)
from ..redaction import Redactor, StreamRedactor
from .answer import fill_answer
from .drift import (
    RETRYABLE_STATES,
    RepeatedFailures,
    duplicate_id_message,
    provisional_answer,
    repair_message,
)
from .feed_run import RunFeeds, run_status
from .feeds import FeedRegistry
from .grounding import Evidence, GroundingReport, check
from .limits import Budget, result_budget_chars
from .ports import (
    CompletionRequest,
    ExecutionContext,
    ExecutorSet,
    Message,
    PromptContext,
    SessionConfig,
    ToolCall,
)
from .results import ResultStatus, ToolResult, fit_turn_results, render_value
from .run_events import (
    AnyEvent,
    RunFinished,
    RunStarted,
    RunStatus,
    RuntimeEvent,
    TurnEnded,
    TurnStarted,
    Usage,
)
from .run_result import RunResult
from .scheduler import ActionNode, NodeState, Scheduler
from .tool_calls import (
    assistant_message,
    call_action_id,
    call_summary,
    tool_result_message,
    unknown_function_message,
    with_output_key,
)
from .tools import ToolRegistry
from .transcript import TranscriptWriter
from .variables import VariableStore

__all__ = ["Run", "RunContext"]

log = logging.getLogger(__name__)


_STATUS: dict[NodeState, ResultStatus] = {
    NodeState.SUCCEEDED: "ok",
    NodeState.FAILED: "error",
    NodeState.REJECTED: "error",
    NodeState.SKIPPED: "skipped",
    NodeState.CANCELLED: "cancelled",
}


@dataclass
class _Turn:
    """What one streamed completion produced."""

    number: int
    text: str = ""
    written: str | None = None  # the model's own text, when calls were read out of it
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    reason: Literal["stream_end", "sync_action", "error", "cancelled"] = "stream_end"
    cut_by: str | None = None
    actions: list[str] = field(default_factory=list)
    errors: list[ActionErrorEvent] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    response: list[str] = field(default_factory=list)
    final: str | None = None
    progress: str | None = None
    in_response: bool = False
    response_is_final: bool = True
    limit: str | None = None
    error: str | None = None
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # action id -> markup span
    thought: list[str] = field(default_factory=list)


def _ignore(*_: object) -> None:
    return None


@dataclass
class RunContext:
    """What a run uses: the session's configuration and state, handed over explicitly.

    The session builds one per run.

    Attributes
    ----------
    config
        The run's configuration (model, prompt, protocol, executors, limits…):
        the session's, or the one this run was given.
    tools
        The tools ``tool`` actions call.
    variables
        Where results are bound and ``$name`` is looked up.
    background
        The open session's task group, for ``fire_and_forget`` actions, which
        may outlive the run; ``None``: the run's own group takes them and the
        run waits for them before it ends.
    commit
        Called once with the finished run and its result, cancelled runs
        included (the run's messages join the history).
    track
        Called with the run's scheduler (the session waits for its background work).
    feeds
        The session's context feeds (refreshed before every turn).
    feed_providers
        Built-in feed sources the host fills (the kernel's ``notebook_variables``).
    clear_history
        Forgets the conversation of earlier runs (``clear_context``).
    depth
        Nesting depth (0 for a cell's run; an ``agent`` action's run is deeper).
    notices
        Warnings from before the run (an MCP server restarted since the last
        run): each becomes a ``warning`` event right after ``run_started``.
    parent_budget, caller
        For a nested run (a sub-agent's): the calling run's budget, which this
        run's actions and tokens are charged to as well, and the id of the
        action that called it.
    """

    config: SessionConfig
    tools: ToolRegistry
    variables: VariableStore
    background: TaskGroup | None = None
    commit: Callable[[Run, RunResult], None] = _ignore
    track: Callable[[Scheduler], None] = _ignore
    feeds: FeedRegistry | None = None
    feed_providers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    clear_history: Callable[[], None] = _ignore
    depth: int = 0
    notices: tuple[str, ...] = ()
    parent_budget: Budget | None = None
    caller: str | None = None


#: Seconds cancelled fire_and_forget actions get to unwind before the run's
#: report names those still running.
UNWIND_GRACE = 2.0


class Run:
    """One run: one message, as many turns as it takes.

    Not created directly: :meth:`Session.run <cortex_kernel.runtime.session.Session.run>`
    makes one per call.
    """

    def __init__(
        self,
        context: RunContext,
        message: str,
        *,
        run_id: str,
        key: str,
        prior: list[Message],
        on_event: Callable[[AnyEvent], None] | None,
        transcript: Path | None,
    ) -> None:
        self.context = context
        self.message = message
        self.run_id = run_id
        self.key = key
        self.prior = prior
        self.on_event = on_event
        # Secrets are read once per run; every event and answer passes through it.
        self.redactor = Redactor()
        self.config = context.config
        self.limits = context.config.limits
        self.model = context.config.model
        self.events: list[AnyEvent] = []
        self.messages: list[Message] = []  # complete turns of this run, committed
        self.budget = Budget(self.limits, parent=context.parent_budget, caller=context.caller)
        self.ids = IdAllocator()
        self.failures = RepeatedFailures()
        self.last_thought = ""
        self.scheduler: Scheduler | None = None
        self.feeds = RunFeeds(
            context.feeds,
            emit=self.emit,
            clock=self.clock,
            allowed_internal=context.config.allowed_internal,
            providers={"run_status": self._run_status, **context.feed_providers},
        )
        self._t0 = time.monotonic()
        self._turn = 0
        # The final answer as the model wrote it and how its $vars were looked
        # up: the grounding check reads the values they came from.
        self._final: tuple[str, Callable[[str], Any]] | None = None
        self._transcript_path = transcript
        self.transcript: TranscriptWriter | None = None
        if transcript is not None:
            try:
                self.transcript = TranscriptWriter(transcript)
            except OSError as exc:
                log.warning("cannot write transcript %s: %s", transcript, exc)

    @property
    def usage(self) -> Usage:
        """What the run consumed so far: its turns, ``llm`` actions and sub-agents."""
        return self.budget.usage

    # ---------------------------------------------------------------- events

    def clock(self) -> float:
        """Seconds since the run started (monotonic)."""
        return time.monotonic() - self._t0

    def emit(self, event: RuntimeEvent | ParserEvent) -> None:
        """Record ``event`` and hand it to ``on_event`` (whose errors are logged, not raised).

        The outbound boundary for events: secrets are scrubbed and surrogates
        escaped here, before the transcript, the view, the CLI or ``_run``.
        """
        event = self.redactor.value(event)
        self.events.append(event)
        if self.transcript is not None:
            self.transcript.write_event(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:
                log.exception("on_event raised; the run goes on")

    # ------------------------------------------------------------------ run

    async def execute(self) -> RunResult:
        """Run to the end; on cancellation, settle and report everything, then re-raise."""
        self.context.variables.start_run(read_namespace=self.config.read_notebook)
        self.emit(
            RunStarted(
                t=self.clock(),
                run_id=self.run_id,
                message=self.message,
                model=getattr(self.model, "name", type(self.model).__name__),
            )
        )
        for notice in self.context.notices:
            self.emit(WarningEvent(span=(0, 0), t=self.clock(), message=notice))
        status: RunStatus = "ok"
        message = ""
        answer = ""
        context = self.context
        self.budget.start(anyio.current_time())
        try:
            async with anyio.create_task_group() as tg:
                executors = ExecutorSet(
                    self.config.executors,
                    ExecutionContext(
                        config=self.config,
                        tools=context.tools,
                        variables=context.variables,
                        emit=self.emit,
                        clock=self.clock,
                        feeds=context.feeds,
                        clear_context=self._clear_context,
                        depth=context.depth,
                        budget=self.budget,
                    ),
                )
                self.scheduler = Scheduler(
                    tg,
                    execute=executors.execute,
                    validate=executors.check,
                    variables=context.variables,
                    emit=self.emit,
                    clock=self.clock,
                    max_parallel=self.limits.max_parallel,
                    action_timeout=self.limits.action_timeout,
                    background=context.background,
                )
                self.scheduler.deadline = self.budget.deadline
                context.track(self.scheduler)
                self.feeds.start(tg, executors)
                with anyio.move_on_after(self.limits.wall_time) as wall:
                    try:
                        status, message, answer = await self._turns()
                        if context.background is None:
                            # No open session to outlive the run in: wait for
                            # its fire_and_forget actions (within the wall time).
                            for node in list(self.scheduler.nodes.values()):
                                if not node.awaited:
                                    await node.wait()
                    except Exception as exc:  # a bug must end the run, never hang it
                        log.exception("run %s failed", self.run_id)
                        status = "error"
                        message = f"internal error ({type(exc).__name__}): {exc}"
                if wall.cancelled_caught:
                    status = "limit"
                    message = (
                        f"wall time limit reached: the run took more than "
                        f"{self.limits.wall_time:g} s (limits.wall_time)"
                    )
                reason = (
                    "run finished" if status in ("ok", "incomplete") else f"run ended: {message}"
                )
                # A run stopped by a limit stops everything it started: its
                # fire_and_forget actions spend the same budget.
                self.scheduler.cancel_all(reason, background=status == "limit")
                tg.cancel_scope.cancel()
            if status == "limit":
                await self._unwind_background()
        except anyio.get_cancelled_exc_class():
            # Settle every action as cancelled (fire_and_forget ones too: an
            # interrupt stops all the run started), report, write the transcript.
            if self.scheduler is not None:
                self.scheduler.cancel_all("run cancelled", background=True)
                with anyio.CancelScope(shield=True):
                    await self._unwind_background()
            # Committed (the session keeps it as last_result): the caller sees
            # the cancellation, not a result.
            self._finish("cancelled", "the run was cancelled", "")
            raise
        return self._finish(status, message, answer)

    async def _unwind_background(self) -> None:
        """Give cancelled ``fire_and_forget`` actions a moment to unwind.

        So that the run's report can name what could not be stopped: a sync
        tool's thread (noted by the tool executor), or an action still running
        after :data:`UNWIND_GRACE` seconds.
        """
        if self.scheduler is None:
            return
        with anyio.move_on_after(UNWIND_GRACE):
            for node in self.scheduler.unsettled_background():
                await node.wait()
        for node in self.scheduler.unsettled_background():
            self.budget.note_unstopped(
                node.id, f"still running {UNWIND_GRACE:g} s after it was cancelled"
            )

    def _finish(self, status: RunStatus, message: str, answer: str) -> RunResult:
        unstopped = list(self.budget.unstopped)
        if unstopped and status not in ("ok", "incomplete"):
            message += "; could not be stopped and may still run: " + ", ".join(unstopped)
        answer, message = self.redactor.text(answer), self.redactor.text(message)
        usage = self.budget.usage.model_copy(update={"seconds": self.clock()})
        grounding = self._ground(answer) if status in ("ok", "incomplete") else None
        self.emit(
            RunFinished(
                t=self.clock(),
                status=status,
                answer=answer,
                message=message,
                usage=usage,
                grounding=grounding.to_dict() if grounding is not None else None,
            )
        )
        if self.transcript is not None:
            self.transcript.close()
        result = RunResult(
            run_id=self.run_id,
            status=status,
            answer=answer,
            message=message,
            usage=usage,
            variables=dict(self.context.variables.bound_in_run),
            transcript=self._transcript_path,
            events=self.events,
            unstopped=[self.redactor.text(item) for item in unstopped],
            grounding=grounding,
        )
        self.context.commit(self, result)
        return result

    async def _turns(self) -> tuple[RunStatus, str, str]:
        assert self.scheduler is not None
        scheduler = self.scheduler
        opening: list[Message] = [{"role": "user", "content": self.message}]
        last_progress = ""
        repair = False  # the next turn is the one repair turn (no final answer yet)
        repaired = False
        while True:
            exceeded = (
                f"turn limit reached: {self.limits.max_turns} turns (limits.max_turns)"
                if self._turn >= self.limits.max_turns
                else self.budget.over()
            )
            if exceeded:
                return "limit", exceeded, last_progress
            self._turn += 1
            turn = await self._stream_turn(self._turn, opening, repair=repair)
            repair = False
            if turn.error is not None:
                return "error", turn.error, ""
            self.messages.extend(opening)
            self.messages.append(self._assistant_message(turn))
            scheduler.end_turn()
            exceeded = turn.limit or self.budget.over()
            if exceeded:
                return "limit", exceeded, last_progress
            if turn.progress is not None:
                last_progress = turn.progress
            thought = "".join(turn.thought).strip()
            if thought:
                self.last_thought = thought
            if turn.final is not None and turn.final.strip():
                await scheduler.wait_all()
                exceeded = self.budget.over()  # spent by the actions just awaited
                if exceeded:
                    return "limit", exceeded, last_progress
                return self._answer(turn.final)
            if turn.cut_by is not None:
                await scheduler.wait([turn.cut_by])
            elif scheduler.pending:
                await scheduler.wait_all()
            settled = scheduler.take_settled()
            exceeded = self.budget.over()  # before "stuck": actions refused at a limit repeat
            if exceeded:
                return "limit", exceeded, last_progress
            stuck = self._note_failures(turn, settled)
            if stuck is not None:
                return "stuck", stuck, last_progress
            if not settled and not turn.errors and not scheduler.pending:
                # Nothing to report and nothing running: the model is done.
                answer = last_progress or "".join(turn.outside).strip()
                if answer:
                    return self._answer(answer)
                if repaired:
                    return (
                        "no_answer",
                        "the model gave no final response, even when asked once more",
                        provisional_answer(self.last_thought),
                    )
                # Rule 6: one short turn that asks for the final response.
                repair = repaired = True
                opening = [{"role": "user", "content": repair_message(self.config.protocol)}]
                continue
            opening = self._results_messages(turn, settled)

    def _answer(self, text: str) -> tuple[RunStatus, str, str]:
        """The run's end: its answer, ``incomplete`` when a reference cannot be filled."""
        store = self.context.variables

        def lookup(name: str) -> Any:
            # A name this run's action failed to produce is unfilled, even when
            # an earlier run or the notebook has a value under it.
            node = self._producer(name)
            if node is not None and node.state is not NodeState.SUCCEEDED:
                raise KeyError(name)
            return store.lookup(name)

        self._final = (text, lookup)
        answer, missing = fill_answer(text, lookup, self._why_unset)
        if missing:
            return "incomplete", "answer incomplete: " + ", ".join(missing), answer
        return "ok", "", answer

    def _ground(self, answer: str) -> GroundingReport | None:
        """Check the figures of the final ``answer`` against what the run saw.

        The answer keeps its status: an unverified figure is marked in the
        view, not failed. The check is bounded by :class:`Evidence`'s caps and
        never fails the run (a bug in it is logged and the check skipped).
        """
        if self._final is None or not answer.strip():
            return None
        raw, lookup = self._final
        try:
            evidence = Evidence()
            nodes = self.scheduler.nodes.values() if self.scheduler is not None else ()
            for node in nodes:  # the run's own results first: they are the operands
                if node.state is NodeState.SUCCEEDED:
                    evidence.add(node.result, source=node.id)
            evidence.add_references(raw, lookup)
            for slot in self.feeds.slots():  # context feeds are values the model was shown
                if slot.text:
                    evidence.add(slot.text, source=f"context feed {slot.id}", data=False)
            for earlier in self.prior:
                _add_earlier(evidence, earlier)
            evidence.add_message(self.message)
            return check(answer, evidence)
        except Exception:
            log.exception("run %s: the grounding check failed; skipped", self.run_id)
            return None

    def _producer(self, name: str) -> ActionNode | None:
        nodes = self.scheduler.nodes if self.scheduler is not None else {}
        return nodes.get(name) or next(
            (n for n in nodes.values() if n.action.output_key == name), None
        )

    def _why_unset(self, name: str) -> str:
        node = self._producer(name)
        if node is None:
            return "never set"
        if node.terminal:
            return str(node.state.value)
        return "not finished"

    # ----------------------------------------------------------------- turn

    def _run_status(self) -> dict[str, Any]:
        nodes = self.scheduler.nodes.values() if self.scheduler is not None else ()
        return run_status(self._turn, self.clock(), self.usage.tokens, nodes)

    def _clear_context(self) -> int:
        dropped = len(self.prior)
        self.prior = []
        self.context.clear_history()
        return dropped

    def _request(self, opening: list[Message]) -> CompletionRequest:
        config, tools = self.config, self.context.tools
        context = PromptContext(
            agent_name=config.agent_name,
            instructions=config.instructions,
            tools=tools.specs(),
            internal_actions=sorted(config.allowed_internal),
            feeds=self.feeds.slots(),
            feed_sources=self.feeds.sources(),
            agents=list(config.catalog.agents),
            relics=list(config.catalog.relics),
            workflows=list(config.catalog.workflows),
            protocol=config.protocol,
        )
        system = config.prompt.system_prompt(context)
        messages: list[Message] = [{"role": "system", "content": system}]
        messages += self.prior + self.messages + opening
        schemas = with_output_key(tools.openai_schemas()) if config.protocol == "tools" else None
        return CompletionRequest(
            messages=messages, tools=schemas, protocol=config.protocol, context=context
        )

    def _note_failures(self, turn: _Turn, settled: list[ActionNode]) -> str | None:
        """Count this turn's failing actions (rule 7) and free their ids (rule 5).

        Returns the ``stuck`` message when one of them failed for the third time.
        """
        stuck: str | None = None
        for node in settled:
            if node.state.value not in RETRYABLE_STATES:
                continue
            # The parser must accept the id again: a retry is a new attempt.
            self.ids.seen.discard(node.id)
            if node.state in (NodeState.FAILED, NodeState.REJECTED) and node.action.raw_body:
                stuck = stuck or self.failures.failed_action(node.action, node.error or "")
        for error in turn.errors:
            if error.raw_body:
                stuck = stuck or self.failures.malformed(error.raw_body, error.message)
        return stuck

    async def _stream_turn(
        self, number: int, opening: list[Message], *, repair: bool = False
    ) -> _Turn:
        turn = _Turn(number)
        self.emit(TurnStarted(t=self.clock(), turn=number, repair=repair))
        parser = Parser(ids=self.ids)
        # The model's text is scrubbed before the parser sees it, so no event,
        # view update, transcript line or history message carries a secret,
        # even one split across chunks.
        scrub = StreamRedactor(self.redactor)
        chunks: list[str] = []
        cut_at: int | None = None
        notices: list[str] = []
        try:
            await self.feeds.refresh()
            request = self._request(opening)
            async with self.model.stream(request) as completion:
                # The adapter's notes on this turn (a refused grammar), read at its end.
                notices = getattr(completion, "warnings", notices)
                async for chunk in completion:
                    text = scrub.feed(chunk)
                    if not text:
                        continue
                    chunks.append(text)
                    events = parser.feed(text)
                    if not events:  # the parser holds a partial tag or an action's body
                        continue
                    cut_at = await self._handle(events, turn)
                    if cut_at is not None or turn.limit is not None:
                        break
                else:
                    rest = scrub.flush()
                    if rest:
                        chunks.append(rest)
                        cut_at = await self._handle(parser.feed(rest), turn)
                    if cut_at is None and turn.limit is None:
                        await self._handle(parser.close(), turn)
                turn.tool_calls = list(completion.tool_calls)
                turn.written = completion.written
                turn.usage = completion.usage
        except anyio.get_cancelled_exc_class():
            self.emit(TurnEnded(t=self.clock(), turn=number, reason="cancelled"))
            raise
        except ModelError as exc:
            turn.error = f"model error ({type(exc).__name__}): {exc}"
        except Exception as exc:
            turn.error = f"model error ({type(exc).__name__}): {exc}; the turn was discarded"
        for notice in notices:
            self.emit(WarningEvent(span=(0, 0), t=self.clock(), turn=number, message=notice))
        if turn.error is not None:
            self.emit(TurnEnded(t=self.clock(), turn=number, reason="error", usage=turn.usage))
            return turn
        turn.usage = turn.usage.model_copy(update={"turns": 1})
        self.budget.charge(turn.usage)
        text = "".join(chunks)
        turn.text = text if cut_at is None else text[:cut_at]
        turn.reason = "sync_action" if turn.cut_by is not None else "stream_end"
        if self.transcript is not None:
            written = turn.written
            self.transcript.write_model_turn(
                number,
                self.clock(),
                self.redactor.text(turn.text),
                turn.tool_calls,
                written=None if written is None else self.redactor.text(written),
                opening=self.redactor.value(opening),
            )
        self.emit(TurnEnded(t=self.clock(), turn=number, reason=turn.reason, usage=turn.usage))
        return turn

    async def _handle(self, events: list[ParserEvent], turn: _Turn) -> int | None:
        """Stamp, emit and act on one feed's events; return the cut offset of a sync action."""
        assert self.scheduler is not None
        for event in events:
            # The run's record is a stamped copy (the parser's event is left as it was).
            if isinstance(event, ActionErrorEvent) and event.id in self.scheduler.nodes:
                event = replace(event, message=self._duplicate_message(event))
            event = replace(event, t=self.clock(), turn=turn.number)
            self.emit(event)
            # Streamed text first, by exact type: nearly every event is one.
            if type(event) is ThoughtDelta or type(event) is ResponseDelta:
                streamed = turn.thought if type(event) is ThoughtDelta else turn.response
                streamed.append(event.text)
                continue
            if isinstance(event, ActionOpen):
                turn.spans[event.id] = (event.span[0], event.span[1])
            elif isinstance(event, ActionParsed):
                start = turn.spans.get(event.action.id, event.span)[0]
                turn.spans[event.action.id] = (start, event.span[1])
                refused = self.budget.take_action()  # this run's and every caller's
                if refused is not None:
                    turn.limit = refused
                    return None
                node = self.scheduler.submit(event.action)
                if node is None:
                    continue
                turn.actions.append(node.id)
                if event.action.mode is ActionMode.SYNC:
                    turn.cut_by = node.id
                    return event.span[1]
                # Let the action start now, before the rest of this chunk is
                # handled: one chunk may carry many actions.
                await anyio.lowlevel.checkpoint()
            elif isinstance(event, ActionErrorEvent):
                turn.errors.append(event)
                if event.id is not None:
                    self.scheduler.reject(event.id, event.message)
            elif isinstance(event, ContextFeed):
                error = self.feeds.declare(event)
                if error is not None:
                    self.emit(replace(error, t=self.clock(), turn=turn.number))
                    turn.errors.append(error)
            elif isinstance(event, Text):
                turn.outside.append(event.text)
            elif isinstance(event, ResponseStart):
                turn.in_response = True
                turn.response_is_final = event.final
                turn.response = []
            elif isinstance(event, ResponseEnd):
                text = "".join(turn.response).strip()
                if event.final and turn.response_is_final:
                    turn.final = text
                else:
                    turn.progress = text
                turn.in_response = False
        return None

    def _duplicate_message(self, event: ActionErrorEvent) -> str:
        """A parser's duplicate-id error, saying where the earlier result is (rule 5)."""
        assert self.scheduler is not None and event.id is not None
        node = self.scheduler.nodes[event.id]
        if not event.message.startswith("duplicate id") or node.state.value in RETRYABLE_STATES:
            return event.message
        return duplicate_id_message(event.id, node.state.value, node.action.output_key or node.id)

    # -------------------------------------------------------------- messages

    def _assistant_message(self, turn: _Turn) -> Message:
        content = turn.text
        if turn.tool_calls:
            # The adapter wrote each native call as protocol text too; the
            # provider gets the calls back as ``tool_calls``, so keep them once.
            spans = [turn.spans.get(call_action_id(call.id)) for call in turn.tool_calls]
            for start, end in sorted((s for s in spans if s is not None), reverse=True):
                if end <= len(content):
                    content = content[:start] + content[end:]
        return assistant_message(content, turn.tool_calls)

    def _result_item(self, node: ActionNode) -> tuple[str, ResultStatus, Any, tuple[str, ...]]:
        status = _STATUS.get(node.state, "error")
        names: tuple[str, ...] = (node.id,)
        if node.action.output_key:
            names += (node.action.output_key,)
        return node.id, status, node.result if status == "ok" else node.error, names

    def _own_output_key(self, name: str) -> bool:
        """Whether tool ``name`` takes an ``output_key`` argument of its own."""
        if name not in self.context.tools:
            return False
        properties = self.context.tools.get(name).parameters.get("properties") or {}
        return "output_key" in properties

    def _results_messages(self, turn: _Turn, settled: list[ActionNode]) -> list[Message]:
        by_id = {node.id: node for node in settled}
        nodes = self.scheduler.nodes if self.scheduler is not None else {}
        tool_results: list[ToolResult] = []
        for call in turn.tool_calls:
            action_id = call_action_id(call.id)
            by_id.pop(action_id, None)
            node = nodes.get(action_id)
            called = call_summary(call, own_output_key=self._own_output_key(call.name))
            if node is not None and node.terminal:
                status = _STATUS.get(node.state, "error")
                text = (
                    f"{called} returned: {render_value(node.result)}"
                    if status == "ok"
                    else f"{called} {status}: {node.error}"
                )
                names: tuple[str, ...] = (node.id,)
            else:
                error = next((e for e in turn.errors if e.id == action_id), None)
                text = f"{called} error: {error.message}" if error else f"{called} pending"
                names = ()
            if call.name not in self.context.tools:
                # No such function: say what to do instead (rather than only "unknown").
                known = [tool.name for tool in self.context.tools]
                text = f"{called} error: {unknown_function_message(call.name, known)}"
            tool_results.append((call.id, text, names))
        call_ids = {call_action_id(call.id) for call in turn.tool_calls}
        items: list[tuple[str, ResultStatus, Any, tuple[str, ...]]] = [
            self._result_item(node) for node in settled if node.id in by_id
        ]
        items += [
            (error.id or "?", "error", error.message, ())
            for error in turn.errors
            if error.id not in call_ids
        ]
        # One budget for everything that opens the turn, native tool messages
        # included: a fan-out of calls cannot flood the prompt (OWASP LLM10).
        window = getattr(self.model, "context_window", None)
        budget = result_budget_chars(self.limits, window() if callable(window) else None)
        contents, blocks = fit_turn_results(
            tool_results, items, limit=self.limits.result_chars, budget=budget
        )
        messages: list[Message] = [
            tool_result_message(call_id, content)
            for (call_id, _, _), content in zip(tool_results, contents, strict=True)
        ]
        if blocks or not messages:
            messages.append({"role": "user", "content": "\n".join(blocks)})
        return messages


def _add_earlier(evidence: Evidence, message: Message) -> None:
    """Add an earlier run's message: its results are data, the user's words are not.

    The assistant's earlier answers are left out: a figure invented once
    must not ground itself the next time.
    """
    content = message.get("content")
    if not isinstance(content, str):
        return
    role = message.get("role")
    if role == "tool" or (role == "user" and "<action_result" in content):
        evidence.add(content, source="an earlier result")
    elif role == "user":
        evidence.add(content, source="an earlier message", data=False)


def prior_messages(runs: MutableMapping[str, list[Message]], exclude: str | None) -> list[Message]:
    """The conversation of earlier runs, without the run being replaced."""
    out: list[Message] = []
    for key, messages in runs.items():
        if key != exclude:
            out.extend(messages)
    return out

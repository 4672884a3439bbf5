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

The parts, by concept: :mod:`.turn` acts on a turn's events as they stream
(one handler per event kind), :mod:`.turn_messages` builds what a turn
leaves in the conversation, :mod:`.answer` fills and checks the final
answer, :mod:`.run_context` is what the session hands a run. This module
keeps a run's turns and how it ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio

from ..exceptions import ModelError
from ..protocol.models import IdAllocator
from ..protocol.parser import Parser
from ..protocol.parser_events import ParserEvent, WarningEvent
from ..redaction import Redactor, StreamRedactor
from .answer import fill_answer, ground_answer, read_id_paths
from .code_fixes import FIXES_PER_RUN, failed_code, fix_warning, suggest_fix
from .data_questions import (
    asked_again_message,
    code_first,
    code_request,
    code_tool,
    notebook_tool,
    tool_to_look,
)
from .drift import (
    ECHOED_FEEDS_WARNING,
    IMAGINED_RESULT_WARNING,
    RETRYABLE_STATES,
    RepeatedActions,
    computing_tool_asked_for,
    echoed_feeds,
    figure_check_message,
    imagined_result,
    provisional_answer,
    repair_message,
    restated_message,
    stuck_message,
    tool_in_answer_message,
    tools_called_in,
    tools_named_in,
    uncalled_tool_message,
    unset_reference_message,
)
from .feed_run import RunFeeds, run_status
from .feeds import with_message
from .grounding import GroundingReport
from .limits import Budget
from .nodes import ActionNode, NodeState
from .ports import CompletionRequest, ExecutionContext, ExecutorSet, Message, PromptContext
from .references import find_references
from .results import render_value
from .run_context import RunContext
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
from .scheduler import Scheduler
from .tool_calls import call_action_id, with_output_key
from .transcript import TranscriptWriter
from .turn import Turn, TurnReader
from .turn_messages import results_messages, turn_assistant_message

__all__ = ["Run"]

log = logging.getLogger(__name__)


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
        self.failures = RepeatedActions()
        self.last_thought = ""
        self._feeds_sent = ""  # the feeds message of the latest request (an echo is no answer)
        self._looked_again = False  # a turn was asked again to look at the data (once a run)
        self._reported_again: set[str] = set()  # succeeded actions reported a second time
        self._stuck: str | None = None  # why the run was told to answer without an action (rule 7)
        self._fixed: set[str] = set()  # failed code a fix was asked for
        self.scheduler: Scheduler | None = None
        self.feeds = RunFeeds(
            context.feeds,
            emit=self.emit,
            clock=self.clock,
            allowed_internal=context.config.allowed_internal,
            providers={
                "run_status": self._run_status,
                **with_message(context.feed_providers, message),
            },
        )
        self._t0 = time.monotonic()
        self._turn = 0
        # The final answer as the model wrote it and how its $vars were looked
        # up: the grounding check reads the values they came from.
        self._final: tuple[str, Callable[[str], Any]] | None = None
        # The last grounding report, by turn, answer and the text it was filled
        # from: the check of rule 8 and the run's end ground the same answer
        # in the same turn (a later turn may have new results).
        self._grounded: tuple[int, str, str, GroundingReport | None] | None = None
        # The one tool the next turn may call: the check turn of an answer
        # that calls it in its text, or states a figure it computes (rule 8).
        self._call_next: str | None = None
        # The references of the last answer that no action and no variable set.
        self._unset: list[str] = []
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
                    validate=lambda action: (
                        self.failures.refused(action) or executors.check(action)
                    ),
                    variables=context.variables,
                    emit=self.emit,
                    clock=self.clock,
                    max_parallel=self.limits.max_parallel,
                    action_timeout=self.limits.action_timeout,
                    background=context.background,
                )
                self.scheduler.deadline = self.budget.deadline
                self.scheduler.reuse_calls = True  # a repeated tool call runs once
                self.scheduler.repeatable = context.tools.repeatable
                self.scheduler.unstopped = self.budget.unstopped_actions
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
        grounding = self._ground(answer) if status in ("ok", "incomplete", "stuck") else None
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
        checked = False  # the one check turn of an answer (rule 8) was used
        while True:
            exceeded = (
                f"turn limit reached: {self.limits.max_turns} turns (limits.max_turns)"
                if self._turn >= self.limits.max_turns
                else self.budget.over()
            )
            if exceeded:
                return "limit", exceeded, last_progress
            turn = await self._next_turn(opening, repair=repair)
            repair = False
            if turn.error is not None:
                return "error", turn.error, ""
            self.messages.extend(opening)
            self.messages.append(turn_assistant_message(turn))
            scheduler.end_turn()
            exceeded = turn.limit or self.budget.over()
            if exceeded:
                return "limit", exceeded, last_progress
            if turn.progress is not None:
                last_progress = turn.progress
            thought = "".join(turn.thought).strip()
            if thought:
                self.last_thought = thought
            answer = turn.final if turn.final is not None and turn.final.strip() else None
            if answer is None:
                if turn.cut_by is not None:
                    await scheduler.wait([turn.cut_by])
                elif scheduler.pending:
                    await scheduler.wait_all()
                settled = scheduler.take_settled()
                exceeded = self.budget.over()  # before "stuck": actions refused at a limit repeat
                if exceeded:
                    return "limit", exceeded, last_progress
                stuck = self._note_failures(turn, settled)
                if stuck is not None and not self._last_chance(turn, stuck):
                    return "stuck", stuck, last_progress
                settled = settled or self._report_again(turn)
                if settled or turn.errors or scheduler.pending:
                    opening = await self._results(turn, settled, stuck)
                    continue
                # Nothing to report and nothing running: the model is done.
                answer = last_progress or self._outside_answer(turn)
                if not answer:
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
            # A final response, or (function calling) the text of a turn without
            # a call: checked once either way (rule 8).
            ended, check = await self._settle(answer, last_progress, check=not checked)
            if check is None:
                return ended
            checked = True
            opening = [{"role": "user", "content": check}]

    async def _next_turn(self, opening: list[Message], *, repair: bool) -> Turn:
        """Stream the next turn; once a run, again when it answered data without looking."""
        self._turn += 1
        tool = self._code_first() if self._turn == 1 and not repair else None
        if tool is not None:
            # A data question: its code is asked for on its own first.
            turn = await self._stream_turn(self._turn, opening, code_reply=tool)
            if turn.error is not None or turn.actions or turn.tool_calls or self.budget.over():
                return turn
            # The model wrote no code: the turn is dropped, the usual one follows.
            assert self.scheduler is not None
            self.scheduler.end_turn()
            self._turn += 1
        call, self._call_next = self._call_next, None
        turn = await self._stream_turn(self._turn, opening, repair=repair, required_tool=call)
        if turn.error is not None or self._turn >= self.limits.max_turns or self.budget.over():
            return turn
        tool = self._unlooked(turn)
        if tool is None:
            return turn
        # Asked about the notebook's data, the model answered without a look
        # that worked: the same turn again, its call of the tool required (the
        # model writes the code). The answer it gave is dropped.
        self._looked_again = True
        assert self.scheduler is not None
        self.scheduler.end_turn()
        self._turn += 1
        return await self._stream_turn(self._turn, opening, required_tool=tool)

    def _code_first(self) -> str | None:
        """The tool whose code a data question asks for on its own, before the usual turn.

        See :func:`~.data_questions.code_first`; only for a model that reads
        such a request (:attr:`Model.code_replies`).
        """
        if not self.model.code_replies:
            return None
        return code_first(self.message, self.context.tools, self.context.variables.namespace)

    def _unlooked(self, turn: Turn) -> str | None:
        """The tool to require when ``turn`` answers a data question that no look backs.

        Only with function calling (a provider's named tool choice forces the
        call; the protocol text has no such request), once a run, when the
        turn started no action and no call of that tool succeeded in the run.
        """
        if self.config.protocol != "tools" or self._looked_again:
            return None
        if turn.actions or turn.errors or turn.tool_calls or turn.limit is not None:
            return None
        answer = "".join(turn.outside) + (turn.final or "")
        context = self.context
        assert self.scheduler is not None
        tool = tool_to_look(
            self.message,
            answer,
            context.tools,
            context.variables.namespace,
            self.prior,
            self.scheduler.nodes.values(),
        )
        if tool is not None:
            self.emit(
                WarningEvent(
                    span=(0, 0),
                    t=self.clock(),
                    turn=turn.number,
                    message=asked_again_message(tool),
                )
            )
        return tool

    async def _fixes(self, turn: Turn, settled: list[ActionNode]) -> dict[str, str]:
        """Fixes of the code that failed on the notebook's data this turn, by action id.

        Asked of the model as separate requests (:mod:`.code_fixes`), at most
        :data:`~.code_fixes.FIXES_PER_RUN` a run, never twice for the same code.
        """
        tool = notebook_tool(self.context.tools)
        if tool is None or not self.model.answers_aside:
            return {}
        assert self.scheduler is not None
        nodes = {node.id: node for node in settled}
        for call in turn.tool_calls:
            node = self.scheduler.nodes.get(call_action_id(call.id))
            if node is not None:
                nodes.setdefault(node.id, node)
        fixes: dict[str, str] = {}
        for node, code in failed_code(nodes.values(), tool):
            if code in self._fixed or len(self._fixed) >= FIXES_PER_RUN:
                continue
            self._fixed.add(code)
            namespace = self.context.variables.namespace
            fix = await suggest_fix(self.model, code, node.error, namespace, budget=self.budget)
            if fix is not None:
                fix = self.redactor.text(fix)  # model text, as the turns' is
                fixes[node.id] = fix
                said = fix_warning(node.id, fix)
                self.emit(WarningEvent(span=(0, 0), t=self.clock(), turn=turn.number, message=said))
        return fixes

    def _last_chance(self, turn: Turn, stuck: str) -> bool:
        """Whether a run that repeated a failing action gets one turn to answer (rule 7).

        Once a run, and not on its last turn: the next turn opens with the
        results and :func:`~.drift.stuck_message`, and an action that fails
        the same way again ends the run ``stuck``.
        """
        if self._stuck is not None or self._turn >= self.limits.max_turns:
            return False
        self._stuck = stuck
        said = f"{stuck}: asked to answer without it"
        self.emit(WarningEvent(span=(0, 0), t=self.clock(), turn=turn.number, message=said))
        return True

    async def _results(
        self, turn: Turn, settled: list[ActionNode], stuck: str | None = None
    ) -> list[Message]:
        """The messages that open the next turn: the results that settled since ``turn`` began.

        When none of them worked, the user's message follows them again (see
        :func:`~.drift.restated_message`; not with function calling);
        when one failed for the third time, :func:`~.drift.stuck_message`.
        """
        assert self.scheduler is not None
        opening = results_messages(
            turn,
            settled,
            nodes=self.scheduler.nodes,
            tools=self.context.tools,
            limits=self.limits,
            model=self.model,
            fixes=await self._fixes(turn, settled),
        )
        worked = any(node.state is NodeState.SUCCEEDED for node in settled)
        pending = not settled and not turn.errors  # nothing settled yet: no verdict
        # With function calling the question again made the model answer it
        # with a made-up figure ("ACME is $120") after a failed call.
        native = self.config.protocol == "tools"
        if stuck is not None:
            note = stuck_message(self.config.protocol, stuck)
        elif worked or pending or native:
            return opening
        else:
            note = restated_message(self.message)
        last = opening[-1] if opening else None
        if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
            return [*opening[:-1], {**last, "content": f"{last['content']}\n\n{note}"}]
        return [*opening, {"role": "user", "content": note}]

    def _report_again(self, turn: Turn) -> list[ActionNode]:
        """Succeeded actions ``turn`` wrote again and its text does not use, to report again.

        A turn that writes an action whose result it already has, and a note
        that uses that result (``Lyon has $lyon people``), has answered; one
        whose note does not (``still waiting for the data``) was written as if
        the result had not come: the model gets it once more (once per action
        in a run), rather than that note as the run's answer.
        """
        assert self.scheduler is not None
        if turn.errors or self.scheduler.pending:
            return []
        used = {ref.name for ref in find_references((turn.progress or "") + "".join(turn.outside))}
        again = [
            action_id
            for action_id, variable in turn.repeated.items()
            if variable not in used and action_id not in self._reported_again
        ]
        self._reported_again.update(again)
        return [self.scheduler.nodes[action_id] for action_id in again]

    def _outside_answer(self, turn: Turn) -> str:
        """The turn's text outside any element, as an answer (``""``: none)."""
        outside = "".join(turn.outside).strip()
        said = None
        if self.config.protocol == "tools" and imagined_result(outside):
            said = IMAGINED_RESULT_WARNING
        elif echoed_feeds(outside, self._feeds_sent):
            said = ECHOED_FEEDS_WARNING
        if said is not None:
            self.emit(WarningEvent(span=(0, 0), t=self.clock(), turn=turn.number, message=said))
            return ""
        return outside

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

        nodes = self.scheduler.nodes.values() if self.scheduler is not None else ()
        keys = {n.id: n.action.output_key for n in nodes if n.action.output_key not in (None, n.id)}
        text, read = read_id_paths(text, keys, lookup)
        for written, read_as in read:
            message = f"the answer's {written} was read as {read_as} (its action's output_key)"
            self.emit(WarningEvent(span=(0, 0), t=self.clock(), turn=self._turn, message=message))
        self._final = (text, lookup)
        answer, missing = fill_answer(text, lookup, self._why_unset)
        self._unset = [item.split(" ", 1)[0] for item in missing if item.endswith("(never set)")]
        if missing:
            return "incomplete", "answer incomplete: " + ", ".join(missing), answer
        return "ok", "", answer

    async def _settle(
        self, answer: str, last_progress: str, *, check: bool
    ) -> tuple[tuple[RunStatus, str, str], str | None]:
        """The run's end with ``answer``, or the check turn's message (rule 8)."""
        assert self.scheduler is not None
        await self.scheduler.wait_all()
        exceeded = self.budget.over()  # spent by the actions just awaited
        if exceeded:
            return ("limit", exceeded, last_progress), None
        ended = self._answer(answer)
        asked = self._answer_check(ended, self._turn) if check else None
        return (self._guessed_after_stuck(ended) if asked is None else ended), asked

    def _guessed_after_stuck(self, ended: tuple[RunStatus, str, str]) -> tuple[RunStatus, str, str]:
        """``stuck`` for an answer that, told to do without the failing action, states figures.

        The turn after a repeated failure (rule 7) is for an answer that did
        not need it, or says what failed; a figure there that no result gives
        stands in for the result the run could not get (a 1.5B model gave a
        region's revenue after its code failed three times).
        """
        status, _, answer = ended
        if self._stuck is None or status != "ok":
            return ended
        report = self._ground(answer)
        if report is None or not report.unverified:
            return ended
        return "stuck", f"{self._stuck}; the answer after it states figures no result gives", answer

    def _answer_check(self, ended: tuple[RunStatus, str, str], turn: int) -> str | None:
        """The check turn's message when the answer cannot stand as written (rule 8).

        It calls a tool in its text (``$to_fahrenheit($t)``, or as code);
        refers to variables nothing set; states figures no result gives in a
        run that tried to look data up (the answer mixes results with
        figures of the model's own: a sum, a conversion; or, its look-ups
        failed, gives a figure of its own); or does without the tool that
        computes what the user asked for by name. A figure from general
        knowledge in a run that looked nothing up is marked, not questioned.
        Only with a turn left. When the check names one tool, the next turn
        may call only it (``self._call_next``).
        """
        status, _, answer = ended
        if status not in ("ok", "incomplete") or self._turn >= self.limits.max_turns:
            return None
        written = self._final[0] if self._final is not None else ""
        names = [tool.name for tool in self.context.tools]
        asked = (
            self._called_check(written, names)
            or (self._unset_check(written, names) if status == "incomplete" else None)
            or (self._figure_check(answer) if status == "ok" else None)
            or (self._uncomputed_check() if status == "ok" else None)
        )
        if asked is None:
            return None
        said, message, self._call_next = asked
        self.emit(WarningEvent(span=(0, 0), t=self.clock(), turn=turn, message=said))
        return message

    # Each check: (the warning, the check turn's message, the one tool the
    # turn may call), or None. Asked in words only, the 1.5B model wrote the
    # same answer or snippet again; named, it called the tool.

    def _called_check(self, written: str, names: list[str]) -> tuple[str, str, str] | None:
        called = tools_called_in(written, names)
        if not called:
            return None
        said = f"the answer calls {', '.join(called)} in its text: asked to call it first"
        return said, tool_in_answer_message(self.config.protocol, called), called[0]

    def _unset_check(self, written: str, names: list[str]) -> tuple[str, str, str | None] | None:
        # `$variables[0]` in an answer that looked nothing up under that name.
        if not self._unset:
            return None
        unset = list(dict.fromkeys(self._unset))[:3]
        said = f"the answer refers to {', '.join(unset)}, which nothing set: asked again"
        named = tools_named_in(written, names)  # "I used the `population` function"
        call = named[0] if len(named) == 1 else None
        return said, unset_reference_message(self.config.protocol, unset), call

    def _figure_check(self, answer: str) -> tuple[str, str, str | None] | None:
        # A run that tried to look something up: a figure none of its
        # results gives was worked out, or made up after a failed look-up.
        assert self.scheduler is not None
        nodes = self.scheduler.nodes.values()
        report = self._ground(answer) if nodes else None
        if report is None or not report.unverified:
            return None
        figures = list(dict.fromkeys(f.text for f in report.unverified))[:3]
        said = f"the answer states {', '.join(figures)}, which no result gives: asked to check"
        failed = not any(n.state is NodeState.SUCCEEDED for n in nodes)
        # Only the tool the user asked for by name ("in Fahrenheit") is named:
        # offered several, the model took the first, whatever it computes
        # (to_fahrenheit for a sum); given the only one, it fed it a population.
        tool = (
            None if failed else computing_tool_asked_for(self.message, self.context.tools.specs())
        )
        message = figure_check_message(self.config.protocol, figures, failed=failed, tool=tool)
        return said, message, tool

    def _uncomputed_check(self) -> tuple[str, str, str] | None:
        # "…right now, in Fahrenheit?" answered "21 °C in Fahrenheit.": the
        # tool that computes what the user asked for by name was never called.
        assert self.scheduler is not None
        tool = computing_tool_asked_for(self.message, self.context.tools.specs())
        if tool is None or any(n.action.name == tool for n in self.scheduler.nodes.values()):
            return None
        said = f"the answer does not use {tool}, which the message asks for: asked to call it"
        return said, uncalled_tool_message(self.config.protocol, tool), tool

    def _ground(self, answer: str) -> GroundingReport | None:
        """Check the figures of the final ``answer`` against what the run saw.

        The answer keeps its status: an unverified figure is marked in the
        view, not failed. The check is bounded by :class:`Evidence`'s caps and
        never fails the run (a bug in it is logged and the check skipped).
        """
        if self._final is None or not answer.strip():
            return None
        written, lookup = self._final
        if self._grounded is not None and self._grounded[:3] == (self._turn, answer, written):
            return self._grounded[3]
        try:
            report = ground_answer(
                answer,
                written,
                lookup,
                nodes=self.scheduler.nodes.values() if self.scheduler is not None else (),
                feeds=self.feeds.slots(),
                prior=self.prior,
                message=self.message,
            )
        except Exception:
            log.exception("run %s: the grounding check failed; skipped", self.run_id)
            report = None
        self._grounded = (self._turn, answer, written, report)
        return report

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

    def _request(
        self,
        opening: list[Message],
        *,
        required_tool: str | None = None,
        code_reply: str | None = None,
    ) -> CompletionRequest:
        """The request of a turn; ``required_tool``: the one tool it may call."""
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
            message=self.message,
        )
        if code_reply is not None:
            return CompletionRequest(
                messages=code_request(self.message, context.feeds),
                tools=with_output_key(tools.openai_schemas()),
                protocol=config.protocol,
                code_reply=code_reply,
            )
        system = config.prompt.system_prompt(context)
        messages: list[Message] = [{"role": "system", "content": system}]
        messages += self.prior + self.messages + opening
        # The feeds change between cells (a variable defined), so they come
        # after the conversation: a server's prefix cache then re-reads only
        # them and this turn, not the whole conversation. Never kept in
        # self.messages: only the latest turn carries them. A user message,
        # not a system one: litellm moves every system message into the
        # leading system prompt for Anthropic and Gemini (which would change
        # it again), and a user message may follow tool messages anywhere.
        feeds = config.prompt.feeds_message(context)
        self._feeds_sent = feeds
        if feeds:
            messages.append({"role": "user", "content": feeds})
        schemas = None
        code: str | None = None
        if config.protocol == "tools":
            schemas = with_output_key(tools.openai_schemas())
            nodes = self.scheduler.nodes.values() if self.scheduler is not None else ()
            namespace = self.context.variables.namespace
            code = code_tool(self.message, tools, namespace, nodes)
        elif required_tool is not None:
            # The protocol grammar is built from the context: it lets the turn
            # call only that tool, or answer (the system prompt, already
            # written, still lists them all, so a server's prefix cache hits).
            context = context.model_copy(
                update={"tools": [t for t in context.tools if t.get("name") == required_tool]}
            )
        return CompletionRequest(
            messages=messages,
            tools=schemas,
            protocol=config.protocol,
            context=context,
            feed_messages=1 if feeds else 0,
            required_tool=required_tool,
            code_tool=code,
        )

    def _note_failures(self, turn: Turn, settled: list[ActionNode]) -> str | None:
        """Count this turn's repeated actions (rule 7) and free failed ones' ids (rule 5).

        Returns the ``stuck`` message when one of them failed for the third
        time, or gave the same result for the third time.
        """
        stuck: str | None = None
        repeatable = self.scheduler.repeatable if self.scheduler is not None else None
        for node in settled:
            if node.state is NodeState.SUCCEEDED:
                if node.action.raw_body and not (repeatable and repeatable(node.action.name or "")):
                    shown = node.shown if node.shown is not None else render_value(node.result)
                    stuck = stuck or self.failures.succeeded(node.action, shown)
                continue
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

    async def _prompt_tokens(self, request: CompletionRequest) -> int | None:
        """The request's prompt size by the model's own counter, if it has one."""
        count = getattr(self.model, "count_tokens", None)
        if count is None:
            return None
        try:
            # Off the event loop: a tokenizer's first load takes a few hundred ms.
            tokens = await anyio.to_thread.run_sync(lambda: count(messages=request.messages))
        except Exception:
            return None
        return int(tokens) or None

    async def _stream_turn(
        self,
        number: int,
        opening: list[Message],
        *,
        repair: bool = False,
        required_tool: str | None = None,
        code_reply: str | None = None,
    ) -> Turn:
        assert self.scheduler is not None
        turn = Turn(number)
        reader = TurnReader(
            turn,
            scheduler=self.scheduler,
            budget=self.budget,
            feeds=self.feeds,
            ids=self.ids,
        )
        started = False

        def start(prompt_tokens: int | None = None) -> None:
            nonlocal started
            if not started:
                started = True
                self.emit(
                    TurnStarted(
                        t=self.clock(), turn=number, repair=repair, prompt_tokens=prompt_tokens
                    )
                )

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
            request = self._request(opening, required_tool=required_tool, code_reply=code_reply)
            # The views say how long a prompt the model is reading before its
            # first token (tens of seconds on a CPU).
            start(await self._prompt_tokens(request))
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
                    cut_at = await reader.read(events)
                    if cut_at is not None or turn.limit is not None:
                        break
                else:
                    rest = scrub.flush()
                    if rest:
                        chunks.append(rest)
                        cut_at = await reader.read(parser.feed(rest))
                    if cut_at is None and turn.limit is None:
                        await reader.read(parser.close())
                turn.tool_calls = list(completion.tool_calls)
                turn.written = completion.written
                turn.usage = completion.usage
        except anyio.get_cancelled_exc_class():
            start()
            self.emit(TurnEnded(t=self.clock(), turn=number, reason="cancelled"))
            raise
        except ModelError as exc:
            turn.error = f"model error ({type(exc).__name__}): {exc}"
        except Exception as exc:
            turn.error = f"model error ({type(exc).__name__}): {exc}; the turn was discarded"
        start()  # a feed refresh that failed still opens the turn it ends
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


def prior_messages(runs: MutableMapping[str, list[Message]], exclude: str | None) -> list[Message]:
    """The conversation of earlier runs, without the run being replaced."""
    out: list[Message] = []
    for key, messages in runs.items():
        if key != exclude:
            out.extend(messages)
    return out

"""Run a suite: every task in a fresh session of the kernel's own runtime.

Each task gets a new :class:`~cortex_kernel.runtime.session.Session` from
:func:`cortex_kernel.agent.build_session` (the composition the kernel uses),
a namespace holding the suite's tools by name (as in a notebook, so an agent
that overwrites a user's name is caught), and runs its ``before`` cells and
then its message. The figures of a task come from the run's events; the
check is applied to the last run's answer.

The model object is resolved once and shared by the tasks, so a replay model
plays its turns across tasks in order (the eval's own tests rely on it) and a
provider client is not rebuilt per task.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..model_options import ModelOptions, protocol_named
from ..runtime.limits import Limits
from ..runtime.run_result import RunResult
from ..runtime.tools import ToolRegistry
from .suite import Outcome, Suite, Task

__all__ = ["TaskResult", "run_suite", "run_task"]

Progress = Callable[[str], None]


@dataclass
class TaskResult:
    """The figures of one task (one sample)."""

    id: str
    category: str
    sample: int
    applicable: bool = True
    correct: bool = False
    status: str = ""
    answer: str = ""
    failure: str | None = None
    turns: int = 0
    actions_parsed: int = 0
    action_errors: int = 0
    warnings: int = 0
    repair_turns: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_prompt_tokens: int = 0
    tools_called: list[str] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)
    empty_ok: bool = False
    #: Figures of the final answer found in no result (docs/runtime.md#grounded-answers).
    unverified: int = 0
    messages: list[str] = field(default_factory=list)
    #: The first turn's tool calls as ``{name: parameters}`` (BFCL's model output; BFCL only).
    calls: list[dict[str, Any]] = field(default_factory=list)
    #: BFCL only: whether the case passes with each distinct call counted once
    #: (the runtime runs a repeat of a call in the same turn once).
    distinct_correct: bool | None = None
    #: The last run's code runs that ended without an error (a suite with ``python``).
    code_runs: int | None = None
    #: The last run's code runs that raised.
    code_errors: int = 0
    #: matplotlib figures the last run's code drew.
    figures: int = 0
    #: A task that needs code: the answer states figures, no code ran without
    #: an error, and the view marks nothing (no unverified figure, no "no
    #: data was looked at"): a guess the user cannot tell from a result.
    unmarked: bool = False

    @property
    def clean(self) -> bool:
        """No action error and no repair turn."""
        return self.action_errors == 0 and self.repair_turns == 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def absorb(result: TaskResult, run: RunResult) -> str:
    """Add one run's figures to ``result`` (turns, actions, tokens, tools called).

    Parameters
    ----------
    result
        The task's figures so far; updated in place.
    run
        A finished run of the task (its sub-agents' events are not counted).

    Returns
    -------
    str
        The final response as the model wrote it (before its ``$variables``
        were filled in).
    """
    written = ""
    buffer: list[str] | None = None
    actions: dict[str, Any] = {}
    for event in run.events:
        if getattr(event, "parent", None) is not None:
            continue  # a sub-agent's event: its turns and answer are not this run's
        kind = getattr(event, "type", "")
        if kind == "turn_started":
            result.turns += 1
            if getattr(event, "repair", False):
                result.repair_turns += 1
        elif kind == "action_parsed":
            result.actions_parsed += 1
            action = event.action  # type: ignore[union-attr]
            actions[action.id] = action
        elif kind == "action_error":
            result.action_errors += 1
        elif kind == "warning" or kind.endswith("_warning"):
            result.warnings += 1
        elif kind == "action_started":
            action = actions.get(str(getattr(event, "id", "")))
            if action is not None:
                name = action.body.get("name") if action.type.value == "tool" else None
                result.tools_called.append(str(name) if name else action.type.value)
        elif kind == "response_start":
            buffer = [] if event.final else None  # type: ignore[union-attr]
        elif kind == "response_delta" and buffer is not None:
            buffer.append(event.text)  # type: ignore[union-attr]
        elif kind == "response_end" and buffer is not None:
            written, buffer = "".join(buffer), None
    usage = run.usage
    if result.first_prompt_tokens == 0:
        first = next(
            (
                e
                for e in run.events
                if getattr(e, "type", "") == "turn_ended" and getattr(e, "parent", None) is None
            ),
            None,
        )
        if first is not None and first.usage is not None:  # type: ignore[union-attr]
            result.first_prompt_tokens = first.usage.prompt_tokens  # type: ignore[union-attr]
    result.prompt_tokens += usage.prompt_tokens
    result.completion_tokens += usage.completion_tokens
    if run.status != "ok" and run.message:
        result.messages.append(f"{run.status}: {run.message}")
    return written


async def run_task(
    task: Task,
    suite: Suite,
    *,
    model: Any,
    protocol: str,
    options: ModelOptions,
    sample: int = 0,
    transcript_dir: Path | None = None,
) -> TaskResult:
    """Run one task in a fresh session and check its answer.

    A suite with a ``namespace`` gets a fresh one per task; with ``python``
    the agent runs code in it (see :func:`_namespace_options`), and the
    checks read what the last run's code did (:class:`~.suite.Outcome`).
    """
    from ..agent import build_session
    from ..executors.notebook_python import ledger_for

    result = TaskResult(id=task.id, category=task.category, sample=sample)
    if protocol not in task.protocols:
        result.applicable = False
        result.failure = f"not applicable to protocol {protocol}"
        return result
    namespace: dict[str, Any] = dict(suite.tools)
    if suite.namespace is not None:
        namespace.update(suite.namespace())
    before = dict(namespace)
    tools = ToolRegistry()
    for name, function in suite.tools.items():
        tools.register(function, name=name)
    session = build_session(
        model=model,
        protocol=protocol,
        options=options,
        limits=Limits.model_validate(suite.limits),
        tools=tools,
        transcript_dir=transcript_dir,
        **_namespace_options(suite, namespace),
    )
    ledger = ledger_for(namespace)
    started = time.perf_counter()
    last: RunResult | None = None
    written = ""
    async with session:
        for message in [*task.before, task.message]:
            ledger.begin()  # the last group is then the last run's code runs
            last = await session.run(message)
            written = absorb(result, last)
    result.seconds = time.perf_counter() - started
    assert last is not None
    result.status = last.status
    result.answer = last.answer
    result.empty_ok = last.status == "ok" and not last.answer.strip()
    result.unverified = len(last.grounding.unverified) if last.grounding is not None else 0
    result.overwritten = sorted(n for n, v in before.items() if namespace.get(n) is not v)
    runs = ledger.groups[-1]
    if suite.python:
        result.code_runs = sum(run.error is None for run in runs)
        result.code_errors = sum(run.error is not None for run in runs)
    result.figures = sum(len(run.figures) for run in runs)
    outcome = Outcome(namespace, suite.expected_values(task), result.figures)
    no_data = last.grounding is not None and last.grounding.no_data_looked_at
    needs_code = suite.needs_code(task)
    result.unmarked = (
        needs_code
        and not result.code_runs
        and last.grounding is not None
        and bool(last.grounding.figures)
        and not last.grounding.unverified
        and not no_data
    )
    result.failure = _judge(
        task, result, written, protocol, outcome, needs_code=needs_code, no_data=no_data
    )
    result.correct = result.failure is None
    return result


def _namespace_options(suite: Suite, namespace: dict[str, Any]) -> dict[str, Any]:
    """How the session sees ``namespace``: as the kernel's when the suite has ``python``.

    The kernel's agent has the python tool in the notebook's namespace and the
    ``notebook_variables`` feed (names, types, shapes, columns; no values);
    the eval approves every run (nobody is there to click).
    """
    if not suite.python:
        return {"namespace": namespace}
    from ..executors.approval import ApproveAll
    from ..jupyter.notebook_vars import VariablesSource, notebook_variables_feed
    from ..runtime.variables import VariableStore

    store = VariableStore(namespace)
    source = VariablesSource(lambda: namespace, agent_owns=store.agent_owns)
    return {
        "variables": store,
        "notebook_python": True,
        "approver": ApproveAll(),
        "host_feeds": [notebook_variables_feed()],
        "feed_providers": {"notebook_variables": source},
    }


def _judge(
    task: Task,
    result: TaskResult,
    written: str,
    protocol: str,
    outcome: Outcome | None = None,
    *,
    needs_code: bool = False,
    no_data: bool = False,
) -> str | None:
    if result.status != "ok":
        return f"run ended with status {result.status}" + (
            f" ({result.messages[-1]})" if result.messages else ""
        )
    if result.empty_ok:
        return "empty answer"
    if needs_code and not result.code_runs:
        errors = f" ({result.code_errors} raised)" if result.code_errors else ""
        looked = "; grounding: no data was looked at" if no_data else ""
        return f"no code ran{errors}: the answer was not computed from the data{looked}"
    for check in task.check:
        failure = check.failure(result.answer, written, protocol, outcome)
        if failure is not None:
            return failure
    missing = [name for name in task.tools if name not in result.tools_called]
    missing += [kind for kind in task.actions if kind not in result.tools_called]
    if missing:
        return f"never called: {', '.join(missing)}"
    return None


async def run_suite(
    suite: Suite,
    *,
    model: str | None,
    protocol: str,
    options: ModelOptions,
    samples: int = 1,
    progress: Progress | None = None,
    transcript_dir: Path | None = None,
) -> list[TaskResult]:
    """Run every task ``samples`` times; report each as it ends through ``progress``."""
    shared, folder = eval_model(model, protocol, options, transcript_dir)

    async def run_one(task: Task, sample: int) -> TaskResult:
        return await run_task(
            task,
            suite,
            model=shared,
            protocol=protocol,
            options=options,
            sample=sample,
            transcript_dir=folder,
        )

    return await run_samples(suite.tasks, samples, progress, run_one)


class _Named(Protocol):
    @property
    def id(self) -> str: ...


_Item = TypeVar("_Item", bound=_Named)


def eval_model(
    model: str | None, protocol: str, options: ModelOptions, transcript_dir: Path | None
) -> tuple[Any, Path]:
    """The model every run of an eval shares, and the folder for its transcripts."""
    from ..llm import resolve_model

    shared = resolve_model(model, options.merged(ModelOptions(protocol=protocol_named(protocol))))
    return shared, transcript_dir or Path(tempfile.mkdtemp(prefix="cortex-eval-"))


async def run_samples(
    items: Sequence[_Item],
    samples: int,
    progress: Progress | None,
    run_one: Callable[[_Item, int], Awaitable[TaskResult]],
) -> list[TaskResult]:
    """``run_one`` on every item, ``samples`` times; a progress line before and after each."""
    results: list[TaskResult] = []
    total = len(items) * samples
    for sample in range(samples):
        for item in items:
            if progress is not None:
                progress(start_line(item.id, results, total))
            results.append(await run_one(item, sample))
            if progress is not None:
                progress(end_line(results, total))
    return results


def start_line(task_id: str, results: list[TaskResult], total: int) -> str:
    """The progress line of a task that starts: ``[3/7] id … (2/2 correct so far)``.

    ``results`` are the tasks done so far, ``total`` how many will run.
    """
    done = len(results)
    correct = sum(r.correct for r in results)
    return f"[{done + 1}/{total}] {task_id} … ({correct}/{done} correct so far)"


def end_line(results: list[TaskResult], total: int) -> str:
    """The progress line of the task that just ended (the last of ``results``).

    ``[3/7] id: ok 1.2 s, 2 turn(s)``, or ``FAIL`` followed by why.
    """
    result = results[-1]
    mark = "ok " if result.correct else ("n/a" if not result.applicable else "FAIL")
    why = f" - {result.failure}" if result.failure and result.applicable else ""
    return (
        f"[{len(results)}/{total}] {result.id}: {mark} {result.seconds:.1f} s, "
        f"{result.turns} turn(s){why}"
    )

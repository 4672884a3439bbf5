"""``workflow`` actions: a named, parameterised DAG of steps (docs/manifest.md).

``{"name": WORKFLOW, "parameters": {...}}`` runs the workflow's steps — each
an action of any type with ``depends_on`` and ``$param`` / ``$step``
references — through the runtime's own :class:`~cortex_kernel.runtime.scheduler.Scheduler`
and the run's executors, so steps start eagerly as their dependencies
succeed, exactly like the model's actions. The steps' events are recorded
under the action (``parent`` set, ids prefixed ``ACTION/step``) so the view
draws the workflow as a subtree. The result is a mapping of the outputs the
workflow names (default: the steps nothing depends on) to their values. A
failing step fails the workflow with the step named; a workflow may not call
itself, directly or through another workflow. Every step counts against the
run's ``max_actions``, and an ``llm`` step's tokens against its ``max_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..exceptions import ActionError
from ..names import NAME_PATTERN
from ..protocol.models import Action, ActionMode, ActionType
from ..runtime.nodes import NodeState
from ..runtime.ports import ExecutionContext, Executor
from ..runtime.run_events import action_scope, scoped_emit
from ..runtime.scheduler import Scheduler
from ..runtime.variables import VariableStore

__all__ = ["WorkflowExecutor", "WorkflowSpec"]


class WorkflowStep(BaseModel):
    """One step of a workflow: an action body with its type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=NAME_PATTERN)
    type: Literal["tool", "llm", "agent", "relic", "workflow"]
    body: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)


class WorkflowSpec(BaseModel):
    """A named, parameterised DAG of steps (a manifest's ``workflows:`` entry).

    ``parameters`` maps each parameter to its default (``null``: required);
    steps read them as ``$name`` and each other's results as ``$step_id``.
    ``outputs`` names the steps whose results make the workflow's result
    (default: the steps nothing depends on).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    steps: list[WorkflowStep] = Field(min_length=1)
    outputs: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_steps(self) -> WorkflowSpec:
        ids = [step.id for step in self.steps]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"workflow '{self.name}': step ids repeat: {', '.join(repeated)}")
        unknown = [
            f"{step.id} depends on '{dep}'"
            for step in self.steps
            for dep in step.depends_on
            if dep not in ids
        ] + [f"output '{out}'" for out in self.outputs if out not in ids]
        if unknown:
            raise ValueError(
                f"workflow '{self.name}' names steps it does not have: {'; '.join(unknown)} "
                f"(steps: {', '.join(ids)})"
            )
        return self


# The workflows running in this task, outermost first (to refuse recursion).
_ACTIVE: ContextVar[tuple[str, ...]] = ContextVar("cortex_workflows", default=())


class WorkflowExecutor(Executor):
    """Runs ``workflow`` actions.

    Parameters
    ----------
    workflows
        The workflows by name.
    max_parallel
        Steps running at once within one workflow.
    """

    def __init__(self, workflows: Mapping[str, WorkflowSpec], max_parallel: int = 16) -> None:
        self.workflows = dict(workflows)
        self.max_parallel = max_parallel

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """An unknown workflow or unknown parameters are an ``action_error``."""
        spec = self.workflows.get(action.name or "")
        if spec is None:
            known = ", ".join(sorted(self.workflows)) or "none"
            return f"unknown workflow '{action.name}'; workflows: {known}"
        unknown = sorted(set(action.parameters) - set(spec.parameters))
        if unknown:
            return (
                f"workflow '{spec.name}' has no parameter {', '.join(unknown)}; "
                f"its parameters: {', '.join(spec.parameters) or 'none'}"
            )
        if context.dispatch is None:
            return "workflow actions need the run's executors"
        return None

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Run the steps to their end; the result maps the named outputs to their values."""
        spec = self.workflows[str(body.get("name"))]
        active = _ACTIVE.get()
        if spec.name in active:
            chain = " -> ".join((*active, spec.name))
            raise ActionError(f"workflow '{spec.name}' calls itself ({chain})")
        given = body.get("parameters")
        params = {**spec.parameters, **(given if isinstance(given, dict) else {})}
        missing = sorted(key for key, value in params.items() if value is None)
        if missing:
            raise ActionError(f"workflow '{spec.name}' needs the parameter(s) {', '.join(missing)}")
        if context.budget is not None:
            for _ in spec.steps:  # each step is an action of the run (limits.max_actions)
                refused = context.budget.take_action()
                if refused is not None:
                    raise ActionError(f"workflow '{spec.name}' not started: {refused}")
        store = VariableStore()
        store.values.update(params)  # $param; steps' results go to $step (by id)
        token = _ACTIVE.set((*active, spec.name))
        try:
            # The steps' own events (an approval, a tool's stderr) name them
            # as the scheduler's do: ACTION/step, within any outer workflow.
            with action_scope(action.id):
                nodes = await self._run_steps(spec, store, context)
        finally:
            _ACTIVE.reset(token)
        for step in spec.steps:
            node = nodes[step.id]
            if node.state in (NodeState.FAILED, NodeState.REJECTED, NodeState.CANCELLED):
                raise ActionError(
                    f"workflow '{spec.name}' failed at step '{step.id}': {node.error}"
                )
        wanted = spec.outputs or [
            s.id for s in spec.steps if not any(s.id in o.depends_on for o in spec.steps)
        ]
        return {key: nodes[key].result for key in wanted}

    async def _run_steps(
        self, spec: WorkflowSpec, store: VariableStore, context: ExecutionContext
    ) -> dict[str, Any]:
        assert context.dispatch is not None
        async with anyio.create_task_group() as tg:
            scheduler = Scheduler(
                tg,
                execute=context.dispatch,
                validate=context.validate,
                variables=store,
                emit=scoped_emit(context.emit),
                clock=context.clock,
                max_parallel=self.max_parallel,
            )
            try:
                for step in spec.steps:
                    scheduler.submit(
                        Action(
                            id=step.id,
                            type=ActionType(step.type),
                            mode=ActionMode.ASYNC,
                            depends_on=tuple(step.depends_on),
                            body=step.body,
                        )
                    )
                scheduler.end_turn()
                await scheduler.wait_all()
            finally:
                scheduler.cancel_all("workflow ended")
                tg.cancel_scope.cancel()
        return dict(scheduler.nodes)

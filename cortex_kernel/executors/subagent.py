"""``agent`` actions: a nested run of another agent of the manifest (docs/protocol.md#actions).

``{"name": AGENT, "message": TEXT}`` runs AGENT's own loop — its model,
prompt, tools and limits — in a fresh session that the composition root
derives from the calling run's configuration (the same approver), and its
final answer is the action's result. Every event of the nested run is
forwarded into the parent run with the action's id as its ``parent`` and
as a prefix of its action ids (``critic/a1``), so the transcript holds the
whole tree and the view draws the nested run as a subtree. The nested run is
awaited inside the action, so cancelling the parent (an interrupt, a limit)
cancels it too. Nesting stops at the ``limits.max_depth`` of the cell's
agent (a sub-agent's own limit may only lower it). The nested run keeps its
own limits and also spends the calling run's budget: every action it
submits and every token it uses count against the caller's ``max_actions``
and ``max_tokens``, and the caller's run ends at its limit when they run out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import ActionError
from ..protocol.models import Action
from ..runtime.ports import ExecutionContext, Executor, SessionConfig
from ..runtime.run_events import action_scope, nest_event, scoped_emit
from ..runtime.session import Session

__all__ = ["AgentExecutor"]

#: ``factory(name, caller)``: a fresh session of the sub-agent ``name``, its
#: configuration derived from the calling run's ``caller`` (the composition
#: root provides it).
SessionFactory = Callable[[str, SessionConfig], Session]


class AgentExecutor(Executor):
    """Runs ``agent`` actions as nested runs.

    Parameters
    ----------
    agents
        The sub-agents this agent may call, name -> description.
    factory
        Makes a fresh session of a sub-agent from the caller's configuration.

    The deepest nesting allowed is the run's ``limits.max_depth`` (a cell's
    run is depth 0).
    """

    def __init__(self, agents: Mapping[str, str], factory: SessionFactory) -> None:
        self.agents = dict(agents)
        self.factory = factory

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """Unknown sub-agent, missing message or too deep: an ``action_error``."""
        name = action.name
        if name not in self.agents:
            known = ", ".join(sorted(self.agents)) or "none"
            return f"unknown agent '{name}'; this agent may call: {known}"
        if "$" not in str(action.body.get("message", "$")) and not isinstance(
            action.body.get("message"), str
        ):
            return f'agent action needs a "message" string for {name}'
        most = context.config.limits.max_depth
        if context.depth + 1 > most:
            return (
                f"agent '{name}' not started: nesting depth limit {most} reached (limits.max_depth)"
            )
        return None

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Run the sub-agent to its end; its answer is the result, its failure an error."""
        name = str(body.get("name"))
        message = body.get("message")
        if not isinstance(message, str):
            raise ActionError(f'agent action needs a "message" string for {name}')
        session = self.factory(name, context.config)

        emit = scoped_emit(context.emit)  # within the workflow this action may be a step of

        def forward(event: Any) -> None:
            emit(nest_event(event, action.id))

        # The action owns the sub-agent's session: its background work ends with the
        # action. Its run names its own actions (forward nests them under this one).
        with action_scope(None):
            async with session:
                # Its actions and tokens count against this run's limits too.
                result = await session.run(
                    message,
                    on_event=forward,
                    depth=context.depth + 1,
                    budget=context.budget,
                    caller=action.id,
                )
        if result.status not in ("ok", "incomplete"):
            raise ActionError(
                f"sub-agent '{name}' ended with status {result.status}: "
                f"{result.message or 'no answer'}"
            )
        return result.answer

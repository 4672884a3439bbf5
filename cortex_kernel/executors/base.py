"""The executor interface: one small abstract class, one module per action type.

The scheduler knows nothing about tools or models; it calls
:meth:`ExecutorSet.execute` for every attempt and :meth:`ExecutorSet.check`
once at submission (an error there is an ``action_error``: the action never
runs). Types with no executor (``agent``, ``relic``, ``workflow`` until a
manifest defines them) are rejected with a message that says so.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import UnknownActionError
from ..protocol.models import Action, ActionType
from ..runtime.model import Model
from ..runtime.tools import ToolRegistry
from ..runtime.variables import VariableStore

__all__ = ["ExecutionContext", "Executor", "ExecutorSet"]


@dataclass
class ExecutionContext:
    """What executors may use: the session's tools, variables and model.

    Attributes
    ----------
    tools
        The tool registry.
    variables
        The session's variable store.
    model
        Returns the session's current model (it may be swapped between runs).
    emit
        Reports an event of the run (``variable_bound`` from ``set_variable``).
    clock
        Seconds since the run started.
    allowed_internal
        Internal actions this agent may use.
    depth
        Nesting depth of the run (0 for a cell's run).
    """

    tools: ToolRegistry
    variables: VariableStore
    model: Callable[[], Model]
    emit: Callable[[Any], None]
    clock: Callable[[], float]
    allowed_internal: frozenset[str] = frozenset()
    depth: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Executor(ABC):
    """Runs the actions of one type."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """An error message if ``action`` cannot run at all (checked at submission)."""
        return None

    @abstractmethod
    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Run one attempt of ``action``; ``body`` has its references filled in.

        Raise any exception to fail the attempt; return the result.
        """


class ExecutorSet:
    """The executors of a session, by action type.

    Parameters
    ----------
    executors
        One executor per available type.
    context
        Handed to every call.
    """

    def __init__(self, executors: Mapping[ActionType, Executor], context: ExecutionContext) -> None:
        self.executors = dict(executors)
        self.context = context

    def check(self, action: Action) -> str | None:
        """Why ``action`` cannot run, or ``None``."""
        executor = self.executors.get(action.type)
        if executor is None:
            kind = {"agent": "agents", "relic": "relics", "workflow": "workflows"}.get(
                action.type.value, f"'{action.type.value}' actions"
            )
            return f"{action.type.value} actions are not available: no manifest defines {kind}"
        return executor.check(action, self.context)

    async def execute(self, action: Action, body: dict[str, Any]) -> Any:
        """Run one attempt of ``action``."""
        executor = self.executors.get(action.type)
        if executor is None:
            raise UnknownActionError(self.check(action) or f"no executor for {action.type}")
        return await executor.execute(action, body, self.context)

"""``tool`` actions: call a registered Python callable with the body's parameters."""

from __future__ import annotations

from typing import Any

from ..protocol.models import Action
from ..runtime.ports import ExecutionContext, Executor
from ..runtime.tools import unknown_tool_message

__all__ = ["ToolExecutor"]


class ToolExecutor(Executor):
    """Runs ``{"name", "parameters"}`` against the session's :class:`ToolRegistry`."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """Unknown or missing tool names are an ``action_error`` (naming the closest tools)."""
        name = action.name
        if name is None:
            return 'a tool action needs a "name" field naming the tool'
        if name not in context.tools:
            return unknown_tool_message(name, [t.name for t in context.tools])
        return None

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Call the tool; its exceptions fail the action."""
        tool = context.tools.get(str(body.get("name", action.name)))
        parameters = body.get("parameters")
        return await tool.call(parameters if isinstance(parameters, dict) else {})

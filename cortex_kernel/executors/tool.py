"""``tool`` actions: call a registered tool with the body's parameters.

Parameters are validated against the tool's schema before anything runs (a
bad one fails the action with a message naming the parameter, which goes
back to the model). A tool marked ``confirm: true`` then waits for the
context's approver (see :mod:`.approval`); with none, the call is refused.
The events of a call (approval, stderr, placement) carry the action's whole
id: a workflow's step ``a1`` reports as ``w1/a1``.

Python tools run in the kernel (``local``) or on a :class:`ToolBackend`
(``dask``): the tool's own ``executor``, else the agent's default. Where a
backend runs a call is reported as ``action_placed`` events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import anyio

from ..exceptions import ToolError
from ..protocol.models import Action
from ..runtime.drift import schema_as_parameters_message
from ..runtime.ports import ExecutionContext, Executor, ToolBackend
from ..runtime.run_events import ActionLog, ActionPlaced, scoped_emit
from ..runtime.tools import Tool, unknown_tool_message
from .approval import ask_approval

__all__ = ["ToolExecutor"]

# The running call's reporter of stderr, set by ToolExecutor around each call
# (a context variable: concurrent calls each see their own).
_STDERR: ContextVar[Callable[[str], None] | None] = ContextVar("cortex_tool_stderr", default=None)
# The running call's id and its reporter of events (the in-kernel python
# tells the views what its code changed as an event of its action).
_CALL: ContextVar[tuple[str, Callable[[Any], None], Callable[[], float]] | None] = ContextVar(
    "cortex_tool_call", default=None
)


def running_call() -> tuple[str, Callable[[Any], None], Callable[[], float]] | None:
    """The running tool call's action id, event emitter and clock (``None`` outside one)."""
    return _CALL.get()


# The running call's way to say it was cancelled but runs on (the run's report names it).
_UNSTOPPED: ContextVar[Callable[[str], None] | None] = ContextVar(
    "cortex_tool_unstopped", default=None
)


def note_unstopped(what: str) -> None:
    """Tell the running call's run that the call was cancelled but ``what`` runs on."""
    report = _UNSTOPPED.get()
    if report is not None:
        report(what)


def log_stderr(text: str) -> None:
    """Keep a tool's stderr as an ``action_log`` event of the running call (if any)."""
    report = _STDERR.get()
    if report is not None and text:
        report(text)


class ToolExecutor(Executor):
    """Runs ``{"name", "parameters"}`` against the session's :class:`ToolRegistry`.

    Parameters
    ----------
    backends
        Where Python tools may run besides the kernel, by name (``dask``).
    default
        Where a Python tool that names no executor runs (``local`` or a backend's name).
    """

    def __init__(
        self, backends: Mapping[str, ToolBackend] | None = None, default: str = "local"
    ) -> None:
        self.backends: dict[str, ToolBackend] = dict(backends or {})
        self.default = default

    def backend_for(self, tool: Tool) -> ToolBackend | None:
        """The backend ``tool`` runs on (``None``: in the kernel).

        Raises
        ------
        ToolError
            The tool (or the default) names a backend this session does not have.
        """
        if tool.kind != "python":
            return None  # commands, containers and built-ins run where they are
        chosen = tool.executor or self.default
        if chosen == "local":
            return None
        backend = self.backends.get(chosen)
        if backend is None:
            raise ToolError(
                f"tool '{tool.name}' runs on executor '{chosen}', which this session does not "
                f"have (available: local{''.join(', ' + b for b in sorted(self.backends))})"
            )
        return backend

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """Unknown or missing tool names are an ``action_error`` (naming the closest
        tools), and so are parameters that are the tool's JSON Schema rather than values."""
        name = action.name
        if name is None:
            return 'a tool action needs a "name" field naming the tool'
        if name not in context.tools:
            return unknown_tool_message(name, [t.name for t in context.tools])
        tool = context.tools.get(name)
        return schema_as_parameters_message(name, action.body.get("parameters"), tool.parameters)

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Validate, ask for approval when the tool needs it, then call the tool."""
        tool = context.tools.get(str(body.get("name", action.name)))
        parameters = body.get("parameters")
        arguments = tool.validate(parameters if isinstance(parameters, dict) else {})
        action_id = action.id or "?"
        if tool.confirm:
            await ask_approval(
                context,
                action_id,
                tool.name,
                tool.kind,
                arguments,
                error=ToolError,
                what=f"tool '{tool.name}'",
                review=tool.review,
            )
        emit = scoped_emit(context.emit)
        _STDERR.set(lambda text: emit(ActionLog(t=context.clock(), id=action_id, text=text)))
        _CALL.set((action_id, emit, context.clock))
        budget = context.budget
        _UNSTOPPED.set(
            None if budget is None else lambda what: budget.note_unstopped(action_id, what)
        )
        backend = self.backend_for(tool)
        if tool.kind == "python" and tool.timeout is not None:
            # Not fail_after + `except TimeoutError`: a TimeoutError the tool
            # raises itself (a ModelTimeout, a socket's) is its own error, not ours.
            with anyio.move_on_after(tool.timeout):
                return await self._call(tool, arguments, backend, action_id, context, emit)
            raise ToolError(f"tool '{tool.name}' timed out after {tool.timeout:g} s")
        return await self._call(tool, arguments, backend, action_id, context, emit)

    async def _call(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        backend: ToolBackend | None,
        action_id: str,
        context: ExecutionContext,
        emit: Callable[[Any], None],
    ) -> Any:
        if backend is None:
            budget = context.budget
            if budget is None or tool.kind != "python":
                return await tool.invoke(arguments)
            # Named in the run's report: an interrupt cannot stop this thread.
            what = f"tool '{tool.name}': a sync function's thread cannot be stopped"
            return await tool.invoke(
                arguments, on_abandon=lambda: budget.note_unstopped(action_id, what)
            )
        placements = 0

        def report(where: str, moved_from: str | None) -> None:
            nonlocal placements
            placements += 1
            emit(
                ActionPlaced(
                    t=context.clock(),
                    id=action_id,
                    backend=backend.name,
                    where=where,
                    dashboard=backend.dashboard(),
                    moved_from=moved_from,
                    placement=placements,
                )
            )

        return await backend.call(tool, arguments, report)

"""The messages a turn leaves in the conversation: its own, and the results that open the next.

The results share one budget (``limits.result_tokens``), the ``tool``
messages of native function calling included, so a fan-out of calls cannot
flood the prompt (OWASP LLM10).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .code_fixes import with_fix
from .limits import Limits, result_budget_chars
from .nodes import ActionNode, NodeState
from .ports import Message, Model
from .results import ResultStatus, ToolResult, fit_turn_results, render_value
from .tool_calls import (
    assistant_message,
    call_action_id,
    call_summary,
    tool_result_message,
    unknown_function_message,
)
from .tools import ToolRegistry
from .turn import Turn

__all__: list[str] = []  # used by the loop only

_STATUS: dict[NodeState, ResultStatus] = {
    NodeState.SUCCEEDED: "ok",
    NodeState.FAILED: "error",
    NodeState.REJECTED: "error",
    NodeState.SKIPPED: "skipped",
    NodeState.CANCELLED: "cancelled",
}


def turn_assistant_message(turn: Turn) -> Message:
    """The assistant message of ``turn``: its text without progress notes, its native calls once.

    A progress note is written before the results it speaks of arrive, so
    any figure in it is a guess; kept in the conversation, the next turn
    copied it into the answer as if a tool had given it
    (docs/runtime.md#progress-notes). The note still reaches the user.
    """
    content = turn.text
    # The adapter wrote each native call as protocol text too; the provider
    # gets the calls back as ``tool_calls``, so keep them once.
    calls = [turn.spans.get(call_action_id(call.id)) for call in turn.tool_calls]
    cuts = [span for span in calls if span is not None] + turn.notes
    for start, end in sorted(cuts, reverse=True):
        if end <= len(content):
            content = content[:start] + content[end:]
    return assistant_message(content, turn.tool_calls)


def results_messages(
    turn: Turn,
    settled: list[ActionNode],
    *,
    nodes: Mapping[str, ActionNode],
    tools: ToolRegistry,
    limits: Limits,
    model: Model,
    fixes: Mapping[str, str] | None = None,
) -> list[Message]:
    """The messages that open the turn after ``turn``.

    Parameters
    ----------
    turn
        The turn that just ended.
    settled
        The awaited actions settled since the last turn began.
    nodes
        Every action of the run, by id (a native call's action may have
        settled earlier or still be pending).
    tools, limits, model
        The run's: a call to an unknown function lists the known ones; the
        results' budget comes from the limits and the model's context window.
    fixes
        Suggested fixes of failed code, by action id
        (:func:`~.code_fixes.suggest_fix`), added to those failures.
    """
    fixes = fixes or {}
    by_id = {node.id: node for node in settled}
    tool_results: list[ToolResult] = []
    for call in turn.tool_calls:
        action_id = call_action_id(call.id)
        by_id.pop(action_id, None)
        node = nodes.get(action_id)
        called = call_summary(call, own_output_key=_own_output_key(tools, call.name))
        if node is not None and node.terminal:
            status = _STATUS.get(node.state, "error")
            text = (
                f"{called} returned: {render_value(node.read)}"
                if status == "ok"
                else f"{called} {status}: {with_fix(node.error, fixes.get(node.id))}"
            )
            names: tuple[str, ...] = (node.id,)
        else:
            error = next((e for e in turn.errors if e.id == action_id), None)
            text = f"{called} error: {error.message}" if error else f"{called} pending"
            names = ()
        if call.name not in tools:
            # No such function: say what to do instead (rather than only "unknown").
            known = [tool.name for tool in tools]
            text = f"{called} error: {unknown_function_message(call.name, known)}"
        tool_results.append((call.id, text, names))
    call_ids = {call_action_id(call.id) for call in turn.tool_calls}
    items: list[tuple[str, ResultStatus, Any, tuple[str, ...]]] = [
        _result_item(node, fixes.get(node.id)) for node in settled if node.id in by_id
    ]
    items += [
        (error.id or "?", "error", error.message, ())
        for error in turn.errors
        if error.id not in call_ids
    ]
    window = getattr(model, "context_window", None)
    budget = result_budget_chars(limits, window() if callable(window) else None)
    contents, blocks = fit_turn_results(
        tool_results, items, limit=limits.result_chars, budget=budget
    )
    messages: list[Message] = [
        tool_result_message(call_id, content)
        for (call_id, _, _), content in zip(tool_results, contents, strict=True)
    ]
    if blocks or not messages:
        messages.append({"role": "user", "content": "\n".join(blocks)})
    return messages


def _result_item(
    node: ActionNode, fix: str | None
) -> tuple[str, ResultStatus, Any, tuple[str, ...]]:
    status = _STATUS.get(node.state, "error")
    names: tuple[str, ...] = (node.id,)
    if node.action.output_key:
        names += (node.action.output_key,)
    return node.id, status, node.read if status == "ok" else with_fix(node.error, fix), names


def _own_output_key(tools: ToolRegistry, name: str) -> bool:
    """Whether tool ``name`` takes an ``output_key`` argument of its own."""
    if name not in tools:
        return False
    properties = tools.get(name).parameters.get("properties") or {}
    return "output_key" in properties

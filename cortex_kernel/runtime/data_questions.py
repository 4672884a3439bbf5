"""Questions about the notebook's data are answered by looking at it.

Asked "How many orders in `sales` are from the North region?", a small
model often answers from the column list the feeds show (a guess, marked
unverified at best) or with code as text, or after its code failed. With
function calling, when a turn answers without any call and no call of the
tool that runs code on the notebook's own variables (in-kernel ``python``,
:attr:`Tool.reads_notebook`) has succeeded in the run, :func:`tool_to_look`
says whether that answer stands. It does not when

- the message names a variable of the notebook that holds data (a
  DataFrame, a Series, an array: anything with a ``shape``;
  :func:`data_names`), or
- it follows up on an earlier run of the conversation that called that
  tool (:func:`ran_on_data`) and the answer states figures or shows code
  (:func:`states_results`): "thanks" is answered as written.

The loop then drops the answer and asks the same turn again with that
tool's call required (the provider's named tool choice): the model still
writes the code; it cannot skip looking. Once a run: after that the model
answers, retries or calls something else as it sees fit. A model that
calls the tool unasked is never forced, so its own way of writing a call
is kept. Before any of that, a reply that is only Python code, in a run
whose message names such data, is that tool's call (:func:`code_tool`).

First of all, for a model that takes such a request (a small local one by
default), the run's first turn asks for the code alone, in a short request
of its own (:func:`code_first`, :func:`code_request`): the code its reply
holds is that tool's first call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .grounding import figures
from .nodes import ActionNode, NodeState
from .ports import FeedSlot, Message
from .tools import Tool

#: The feed that says what the notebook holds (``jupyter.notebook_vars``).
VARIABLES_FEED = "notebook_variables"

__all__: list[str] = []  # used by the loop only

#: Words of a message that may name a variable: a plain identifier, in or
#: out of backquotes (``sales``, `` `sales` ``), not inside a longer dotted
#: name or word.
_NAME = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)(?![\w(])")


def notebook_tool(tools: Iterable[Tool]) -> str | None:
    """The first tool that runs code on the notebook's variables (:attr:`Tool.reads_notebook`)."""
    return next((t.name for t in tools if t.reads_notebook), None)


def data_names(message: str, namespace: Mapping[str, Any] | None) -> list[str]:
    """The variables of ``namespace`` holding data that ``message`` names, in order.

    Data is a value with a ``shape`` of at least one dimension (pandas and
    numpy objects, and the like); private names (``_x``) are not read.
    """
    if namespace is None:
        return []
    found: list[str] = []
    for match in _NAME.finditer(message):
        name = match.group(1)
        if name.startswith("_") or name in found or name not in namespace:
            continue
        if _holds_data(namespace[name]):
            found.append(name)
    return found


def tool_to_look(
    message: str,
    answer: str,
    tools: Iterable[Tool],
    namespace: Mapping[str, Any] | None,
    prior: Iterable[Mapping[str, Any]],
    nodes: Iterable[ActionNode] = (),
) -> str | None:
    """The tool a turn that gave ``answer`` without any call must call, if any.

    The first tool that runs code on the notebook's variables
    (:attr:`Tool.reads_notebook`), when ``message`` names data of the
    notebook (:func:`data_names`), or when it follows up on an earlier run
    that called that tool (``prior``: the conversation's messages) and
    ``answer`` states figures or shows code, unless a call of that tool
    among the run's ``nodes`` succeeded. ``None``: the answer stands.
    """
    tool = notebook_tool(tools)
    if tool is None or _looked(nodes, tool):
        return None
    if data_names(message, namespace):
        return tool
    if ran_on_data(prior, tool) and states_results(answer):
        return tool
    return None


def code_tool(
    message: str,
    tools: Iterable[Tool],
    namespace: Mapping[str, Any] | None,
    nodes: Iterable[ActionNode] = (),
) -> str | None:
    """The tool a reply that is only Python code calls, in a run about the notebook's data.

    While no call of the tool that runs code on the notebook's variables
    has succeeded, in a run whose message names data of the notebook
    (:func:`data_names`), a reply that is nothing but one fenced block of
    Python is that tool's call (``CompletionRequest.code_tool``): the code
    the model means to run on the data. Asked again with the call required
    instead, the local model wrote older code that had failed. A follow-up
    ("now write it as a function") is not such a run: code written for the
    user stays an answer.
    """
    tool = notebook_tool(tools)
    if tool is None or _looked(nodes, tool) or not data_names(message, namespace):
        return None
    return tool


def code_first(
    message: str, tools: Iterable[Tool], namespace: Mapping[str, Any] | None
) -> str | None:
    """The tool whose code a run asks for on its own first, when ``message`` is about data.

    When ``message`` names data of the notebook (:func:`data_names`) and a
    tool runs code on the notebook's variables, the run's first turn is a
    short request of its own (:func:`code_request`): no agent prompt, no
    tools, no conversation, only the variables the notebook holds and the
    question, and the code the reply holds is that tool's call. Qwen2.5-Coder-1.5B
    wrote the right pandas for questions it got wrong with the agent's
    prompt and tools around them (docs/eval.md). The run goes on as usual:
    the model reads the code's results and answers, or runs more code.
    """
    tool = notebook_tool(tools)
    if tool is None or not data_names(message, namespace):
        return None
    return tool


#: The system prompt of :func:`code_request`.
CODE_SYSTEM = (
    "You write Python (pandas) code that answers a question about DataFrames already in memory."
)


def code_request(message: str, feeds: Iterable[FeedSlot]) -> list[Message]:
    """The messages of a run's request for the code of a data question (:func:`code_first`).

    The ``notebook_variables`` feed (what the notebook holds: names, types,
    columns), then the question, then what to write: the code, computing
    the answer from the data and printing it.
    """
    parts = [
        slot.text.strip()
        for slot in feeds
        if slot.id == VARIABLES_FEED and slot.error is None and slot.text.strip()
    ]
    parts.append(f"Question: {message}")
    parts.append("Write the code only: it computes the answer from the data and prints it.")
    return [
        {"role": "system", "content": CODE_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def ran_on_data(messages: Iterable[Mapping[str, Any]], tool: str) -> bool:
    """Whether ``messages`` (earlier runs, function calling) hold a call of ``tool``."""
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and function.get("name") == tool:
                return True
    return False


def states_results(answer: str) -> bool:
    """Whether ``answer`` gives figures or code: what a follow-up on data must compute."""
    return "```" in answer or bool(figures(answer))


def asked_again_message(tool: str) -> str:
    """The warning of a turn asked again, to call ``tool`` first."""
    return (
        "the model answered a question about the notebook's data without a "
        f"look that worked; it is asked again, to call `{tool}` first"
    )


def _looked(nodes: Iterable[ActionNode], tool: str) -> bool:
    return any(
        node.action.type == "tool"
        and node.action.name == tool
        and node.state is NodeState.SUCCEEDED
        for node in nodes
    )


def _holds_data(value: Any) -> bool:
    if isinstance(value, type):
        return False
    try:
        shape = getattr(value, "shape", None)
    except Exception:  # a user object whose attribute raises: not data we know
        return False
    return isinstance(shape, tuple) and len(shape) >= 1

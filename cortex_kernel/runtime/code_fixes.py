"""A fix for code that failed on the notebook's data, asked of the model on its own.

In the conversation of a run, a small model that wrote failing code
(``customers[churned]``, ``resample('M')`` where pandas asks for ``'ME'``)
sends the same code again, even when the error says what to write: it
copies its own call. Asked for the whole code again in a separate request,
it still copies it. Asked for one line — this line, this error, these
frames and their columns; the corrected line only — the same model writes
the fix. So the code that runs on the notebook's variables
(:attr:`Tool.reads_notebook`) names the line it failed on
(:func:`failing_line_note`), :func:`suggest_fix` asks for that line alone
and puts it back in the code, and the loop adds the whole corrected code to
the failure the model reads next. Nothing runs it: the model calls it (or
not) as any other code, under the same approvals.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .code_writes import code_names
from .limits import Budget
from .nodes import ActionNode, NodeState
from .ports import CompletionRequest, Message, Model
from .side_requests import complete_text

__all__: list[str] = []  # used by the loop and the notebook's python tool

#: The most a suggestion may be (tokens): a line and a few words about it.
FIX_TOKENS = 300
#: Suggestions a run asks for at most: each is one more request.
FIXES_PER_RUN = 2

_SYSTEM = "You fix one line of Python."
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
#: How a failure names its line (:func:`failing_line_note`).
_LINE_NOTE = re.compile(r"\n\[failed at line \d+: (.+)\]")


def failing_line_note(number: int, line: str) -> str:
    """What a failure says of the line it happened on (read back by :func:`suggest_fix`)."""
    return f"\n[failed at line {number}: {line.strip()}]"


def failing_line(error: str) -> str | None:
    """The line ``error`` says the code failed on, stripped; ``None`` if it names none."""
    found = _LINE_NOTE.search(error)
    return found.group(1) if found else None


def fix_messages(line: str, error: str, namespace: Mapping[str, Any] | None) -> list[Message]:
    """The request for a fix of ``line``: the frames it names, the line, its error."""
    described = describe_names(line, namespace)
    variables = f"{described}\n\n" if described else ""
    return [
        {"role": "system", "content": _SYSTEM},
        {
            "role": "user",
            "content": f"{variables}This line:\n{line}\nraised:\n{error}\n\n"
            "Write the corrected line only.",
        },
    ]


def describe_names(code: str, namespace: Mapping[str, Any] | None) -> str:
    """One line per variable ``code`` names that holds a table: its columns and their types."""
    if namespace is None:
        return ""
    lines = []
    for name in sorted(code_names(code)):
        if name.startswith("_") or name not in namespace:
            continue
        try:
            dtypes = getattr(namespace[name], "dtypes", None)
            items = (
                list(dtypes.items()) if dtypes is not None and hasattr(dtypes, "items") else None
            )
        except Exception:  # a user object whose attribute raises: not described
            continue
        if items is None:
            continue
        columns = ", ".join(f"{column!r} ({dtype})" for column, dtype in items[:40])
        lines.append(f"{name}: {type(namespace[name]).__name__}, columns {columns}")
    return "\n".join(lines)


def fixed_code(reply: str, code: str, line: str) -> str | None:
    """``code`` with ``line`` replaced by the line of ``reply``; ``None`` if there is no fix.

    The reply's first code block (or the reply itself) is the new line;
    it replaces the one line of ``code`` that reads ``line``, indented as it
    was. No fix when that line is not in the code once, when the reply
    repeats it, or when the code with it does not parse.
    """
    found = _FENCE.search(reply)
    new = (found.group(1) if found else reply).strip()
    lines = code.splitlines()
    where = [i for i, text in enumerate(lines) if text.strip() == line]
    if not new or new == line or len(where) != 1:
        return None
    old = lines[where[0]]
    indent = old[: len(old) - len(old.lstrip())]
    lines[where[0] : where[0] + 1] = [indent + text for text in new.splitlines()]
    fixed = "\n".join(lines)
    try:
        ast.parse(fixed)
    except SyntaxError:
        return None
    return fixed


async def suggest_fix(
    model: Model,
    code: str,
    error: str,
    namespace: Mapping[str, Any] | None,
    *,
    budget: Budget,
) -> str | None:
    """Ask ``model`` for a fix of the line ``error`` names; the fixed code, or ``None``.

    The request's tokens are charged to the run's ``budget`` (a limit it
    reaches ends the run as any other). A failed request is no fix.
    """
    line = failing_line(error)
    if line is None:
        return None
    cause = _LINE_NOTE.sub("", error).split("\n[notebook changes:")[0].strip()
    messages = fix_messages(line, cause, namespace)
    request = CompletionRequest(messages=messages, options={"max_tokens": FIX_TOKENS})
    try:
        reply = await complete_text(model, request, budget, FIX_TOKENS)
    except Exception:  # a fix is a help, never a failure of the run
        return None
    return fixed_code(reply, code, line)


def failed_code(nodes: Iterable[ActionNode], tool: str) -> Iterator[tuple[ActionNode, str]]:
    """The calls of ``tool`` among ``nodes`` that failed, with their code."""
    for node in nodes:
        code = node.action.parameters.get("code")
        if (
            node.action.type == "tool"
            and node.action.name == tool
            and node.state is NodeState.FAILED
            and isinstance(code, str)
        ):
            yield node, code


def fix_warning(action_id: str, fix: str) -> str:
    """The warning that shows the user a suggested fix."""
    return (
        f"the code of {action_id} failed; the model, asked on its own for a fix, suggested:\n{fix}"
    )


def with_fix(error: str, fix: str | None) -> str:
    """The failure the model reads: ``error``, and the suggested fix if there is one."""
    if fix is None:
        return error
    return (
        f"{error}\nA corrected version, written from this error (not run; call it if it "
        f"is right):\n```python\n{fix}\n```"
    )

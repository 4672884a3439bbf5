"""Hints for a message cell that was probably meant as something else.

In the Cortex kernel every cell is a message, so Python typed without
``%%python`` goes to the agent. :func:`python_hint` says when a message is
Python a user meant to run. It must stay quiet on prose: a question such as
``what is df.shape?`` or ``Summarise the data`` is not Python, and
``hello`` or ``not really`` parse as Python but are words. So it fires only
when the whole cell parses *and* has a statement prose never has: an
assignment, a ``def``/``class``, an import, a compound statement (``for``,
``with``…), or a call written as code (``f(x)``, ``df.head()`` — no space
before the parenthesis, on a line of its own).
"""

from __future__ import annotations

import ast
import textwrap
import warnings

__all__: list[str] = []  # used inside the jupyter package only

#: The warning shown above the run of a message that is Python.
PYTHON_HINT = (
    "This message is valid Python; it was sent to the agent as a message. Did you mean "
    "`%%python`? A cell that starts with %%python runs as code."
)

_CODE_STATEMENTS = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.If,
    ast.Delete,
)


def _code_call(statement: ast.stmt, lines: list[str]) -> bool:
    """An expression statement that is a call written as code: ``name(`` with no space."""
    if not isinstance(statement, ast.Expr):
        return False
    call = statement.value
    if isinstance(call, ast.Await):
        call = call.value
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    if func.end_lineno is None or func.end_col_offset is None:
        return False
    line = lines[func.end_lineno - 1]
    # Prose puts a space before a parenthesis ("Hello (again)"); code does not.
    return line[func.end_col_offset : func.end_col_offset + 1] == "("


def python_hint(message: str) -> str | None:
    """:data:`PYTHON_HINT` when ``message`` is a Python program, else ``None``.

    Parameters
    ----------
    message
        A message cell's text, as written.
    """
    source = textwrap.dedent(message.strip("\n"))
    if not source.strip():
        return None
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" in prose is not our business
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = source.splitlines()
    for statement in tree.body:
        if isinstance(statement, _CODE_STATEMENTS) or _code_call(statement, lines):
            return PYTHON_HINT
    return None

"""``{name}`` interpolation of notebook variables into an agent message.

Only a *simple reference* is replaced: ``{name}``, ``{name!r}`` or
``{name!s}`` where ``name`` is an identifier bound in the namespace.
Everything else is left exactly as written, because agent messages are full
of braces that are not references — dict literals, JSON, f-string code,
TypeScript destructuring (the trap of jupyter-ai's issue #27, where
``str.format`` on the prompt broke every message with code in it):

- ``{a: 1}``, ``{"k": v}``, ``{x + 1}`` are not simple references;
- ``{undefined_name}`` names nothing and stays;
- ``{{name}}`` (doubled braces) is the way to write a literal: the model
  reads ``{name}``, as ``str.format`` would write it;
- anything inside a fenced code block (```` ``` ````) stays.

A ``{name}`` left as written because nothing is bound to ``name`` is most
often a typo or a cell not run yet: :func:`unbound_references` names them,
and the kernel shows a warning (the message is still sent as written).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__: list[str] = []  # used inside the jupyter package only

# A doubled reference first ({{name}}: a literal), then a simple one ({name}).
_REF = re.compile(
    r"\{\{[A-Za-z_][A-Za-z0-9_]*(?:![rs])?\}\}"
    r"|\{([A-Za-z_][A-Za-z0-9_]*)(?:!([rs]))?\}"
)
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)


def _substitute(text: str, namespace: Mapping[str, Any], unbound: list[str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name, conversion = match.group(1), match.group(2)
        if name is None:  # {{name}}: a literal {name}
            return match.group(0)[1:-1]
        if name not in namespace:
            if name not in unbound:
                unbound.append(name)
            return match.group(0)
        value = namespace[name]
        return repr(value) if conversion == "r" else str(value)

    return _REF.sub(replace, text)


def unbound_references(message: str, namespace: Mapping[str, Any]) -> list[str]:
    """The names of simple ``{name}`` references in ``message`` that ``namespace`` lacks.

    In order of first appearance, each once; ``{{name}}`` literals and fenced
    code are not references.
    """
    unbound: list[str] = []
    _interpolate(message, namespace, unbound)
    return unbound


def interpolate(message: str, namespace: Mapping[str, Any]) -> str:
    """Replace simple ``{name}`` references with notebook variables' values.

    Parameters
    ----------
    message
        The cell's text.
    namespace
        Where names are looked up (the notebook's ``user_ns``).

    Returns
    -------
    str
        The message with every simple reference to a bound name replaced by
        ``str(value)`` (``repr(value)`` for ``{name!r}``); all other text,
        including fenced code blocks, unchanged.
    """
    return _interpolate(message, namespace, [])


def _interpolate(message: str, namespace: Mapping[str, Any], unbound: list[str]) -> str:
    if "{" not in message:
        return message
    out: list[str] = []
    pos = 0
    in_fence = False
    for fence in _FENCE.finditer(message):
        # Line-start fences toggle code/prose; only prose segments are substituted.
        segment = message[pos : fence.start()]
        out.append(segment if in_fence else _substitute(segment, namespace, unbound))
        line_end = message.find("\n", fence.start())
        line_end = len(message) if line_end < 0 else line_end
        out.append(message[fence.start() : line_end])
        pos = line_end
        in_fence = not in_fence
    tail = message[pos:]
    out.append(tail if in_fence else _substitute(tail, namespace, unbound))
    return "".join(out)

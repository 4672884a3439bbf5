"""``is_complete`` for the Cortex kernel: when Enter runs a cell in a terminal.

``jupyter console`` asks the kernel whether what was typed is a whole cell.
A message is complete at Enter unless it is inside a code fence or an open
tag (``<action …`` not yet closed, ``<thought>`` without ``</thought>``);
a ``%%python`` cell continues until a blank line, as IPython's cell magics do
in a terminal (a function's second line is not a message to the agent);
line magics and comments are complete.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__: list[str] = []  # used inside the jupyter package only

_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
# <name attrs> or </name>; attribute values may hold ">"; group 4 is "" while unterminated.
_TAG = re.compile(r"<(/?)([A-Za-z_][\w.:-]*)((?:\"[^\"]*\"|'[^']*'|[^'\">])*)(>?)")
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "wbr", "area", "col", "source"})

PythonCheck = Callable[[str], tuple[str, "int | None"]]


def message_is_complete(text: str) -> bool:
    """Whether a message ends outside every code fence and every tag it opened."""
    prose: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            prose.append(line)
    if in_fence:
        return False
    body = _INLINE_CODE.sub("", "\n".join(prose))
    open_tags: list[str] = []
    for match in _TAG.finditer(body):
        closing, name, attributes, end = match.groups()
        if not end:
            if match.end() == len(body):
                return False  # "<action type='tool'" still being written
            continue
        name = name.lower()
        if closing:
            if name in open_tags:
                del open_tags[len(open_tags) - 1 - open_tags[::-1].index(name) :]
        elif not attributes.rstrip().endswith("/") and name not in _VOID:
            open_tags.append(name)
    return not open_tags


def is_complete(code: str, python: PythonCheck) -> dict[str, str]:
    """The ``is_complete_reply`` content for ``code``.

    Parameters
    ----------
    code
        What the user typed so far.
    python
        IPython's check for Python (``check_complete``): ``(status, indent)``,
        used for the indent of a ``%%python`` cell's next line.
    """
    lines = code.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return {"status": "complete"}
    head = lines[first].strip()
    body = "\n".join(lines[first + 1 :])
    if head == "%%python" or head.startswith("%%python "):
        if body.strip() and not lines[-1].strip():
            return {"status": "complete"}
        # Python's own check only picks the next line's indent: a block of
        # complete statements still continues, and an invalid one shows its
        # SyntaxError when run.
        status, indent = python(body) if body.strip() else ("complete", None)
        return {
            "status": "incomplete",
            "indent": " " * (indent or 0) if status == "incomplete" else "",
        }
    if head.startswith("%%"):
        # %%agent, %%time, %%capture…: the body is a message.
        if not body.strip():
            return {"status": "incomplete", "indent": ""}
        code = body
    elif all(line.lstrip().startswith(("%", "#")) for line in lines if line.strip()):
        return {"status": "complete"}
    if message_is_complete(code):
        return {"status": "complete"}
    return {"status": "incomplete", "indent": ""}

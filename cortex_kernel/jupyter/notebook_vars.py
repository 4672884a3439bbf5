"""The ``notebook_variables`` context feed: the user's variables, as the agent should know them.

The kernel fills this built-in feed source (SPEC §4) so the agent knows the
data it is asked about: one line per variable with its name, type, shape (or
length) and a short repr. It is on by default in notebooks
(:func:`install`), and ``%feeds remove notebook_variables`` turns it off.

What is listed, and why:

- the user's own names only: not IPython's (``In``, ``Out``, ``get_ipython``…,
  the shell's ``user_ns_hidden``), not the agent's own bindings (the agent
  knows those from its results), never a ``_``-prefixed name;
- no modules, classes, functions or methods: they are code, not data, and
  the notebook's ``@tool`` functions are already in the prompt's tool list;
- a name that looks secret (``API_KEY``, ``db_password``…) shows its type
  but never its value, and every secret value of the environment is
  replaced by ``***`` wherever it appears (:mod:`cortex_kernel.redaction`);
- at most :data:`MAX_VARIABLES` (the most recently defined ones) and the
  feed's ``max_bytes`` (:data:`MAX_BYTES` by default): a notebook with
  thousands of names costs a bounded part of the prompt. Reprs are cut by
  :mod:`reprlib`, so a million-element list is never rendered whole.
"""

from __future__ import annotations

import functools
import re
import reprlib
import types
from collections.abc import Callable, Container, Mapping
from typing import Any

from ..redaction import Redactor, is_secret_name

__all__ = ["MAX_BYTES", "MAX_VARIABLES", "describe_variables", "install"]

#: At most this many variables are listed (the most recently defined).
MAX_VARIABLES = 40
#: The feed's default size cap (its ``max_bytes``).
MAX_BYTES = 3000

_CODE = (
    types.ModuleType,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    functools.partial,
)
# Names that hold credentials by convention (api_key, github_token, db_password…).
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|key|token|secret|password|passwd|pwd|credentials?)$", re.IGNORECASE
)

_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 5
_REPR.maxlevel = 2


def _shape(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        return f"shape {shape}"
    if isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
        return f"len {len(value)}"
    return ""


def _details(value: Any) -> str:
    parts = [_shape(value)]
    dtype = getattr(value, "dtype", None)
    if dtype is not None and not callable(dtype):
        parts.append(f"dtype {dtype}")
    columns = getattr(value, "columns", None)
    if columns is not None and hasattr(columns, "__iter__") and not isinstance(columns, str):
        try:
            names = [str(c) for c in list(columns)[:10]]
        except Exception:  # a user object with odd columns: leave them out
            names = []
        if names:
            more = len(columns) - len(names) if hasattr(columns, "__len__") else 0
            parts.append("columns [" + ", ".join(names) + (f", +{more}" if more > 0 else "") + "]")
    return ", ".join(p for p in parts if p)


def _short_repr(value: Any) -> str:
    try:
        text = _REPR.repr(value)
    except Exception as exc:  # any user __repr__
        return f"<repr failed: {type(exc).__name__}>"
    return " ".join(text.split())[:80]


def _line(name: str, value: Any, agent_owns: Callable[[str], bool]) -> str | None:
    if isinstance(value, _CODE) or agent_owns(name):
        return None
    kind = type(value).__name__
    try:
        details = _details(value)
    except Exception:  # a property of a user object raised: its type and repr still help
        details = ""
    head = f"{name}: {kind}" + (f" ({details})" if details else "")
    if _SECRET_NAME.search(name) or is_secret_name(name):
        return f"{head} = (hidden: the name looks secret)"
    return f"{head} = {_short_repr(value)}"


def describe_variables(
    namespace: Mapping[str, Any],
    *,
    hidden: Container[str] = (),
    agent_owns: Callable[[str], bool] = lambda name: False,
    redactor: Redactor | None = None,
) -> str:
    """One line per user variable of ``namespace``: ``name: type (shape…) = repr``.

    Parameters
    ----------
    namespace
        The notebook's ``user_ns``.
    hidden
        Names the shell defined itself (IPython's ``user_ns_hidden``).
    agent_owns
        Whether a name holds a value the agent bound (left out).
    redactor
        Scrubs secret values (default: one reading the environment now).
    """
    lines: list[str] = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in hidden:
            continue
        try:
            line = _line(name, value, agent_owns)
        except Exception:  # a hostile object (isinstance itself may raise): name it, go on
            line = f"{name}: {type(value).__name__} = (could not be described)"
        if line is not None:
            lines.append(line)
    older = len(lines) - MAX_VARIABLES
    if older > 0:
        lines = [f"({older} older variables not shown)", *lines[older:]]
    text = "\n".join(lines) if lines else "(no variables yet)"
    return (redactor or Redactor()).text(text)


def install(shell: Any, session: Any) -> None:
    """Give ``session`` the ``notebook_variables`` source of ``shell`` and declare the feed."""
    from ..runtime.feeds import FeedSpec

    store = session.variables_store
    session.feed_providers["notebook_variables"] = lambda: describe_variables(
        shell.user_ns,
        hidden=getattr(shell, "user_ns_hidden", {}),
        agent_owns=store.agent_owns,
    )
    if "notebook_variables" not in session.feeds:
        session.feeds.add(FeedSpec(id="notebook_variables", type="internal", max_bytes=MAX_BYTES))

"""The ``notebook_variables`` context feed: the user's variables, as the agent should know them.

The kernel fills this built-in feed source (docs/feeds.md) so the agent knows the
data it is asked about: a line saying these are objects in memory, not files,
then one line per variable with its name, type and shape (or length, dtype,
columns with their dtypes). It is on by default in notebooks (the
kernel builds each session with :func:`notebook_variables_source` and
:func:`notebook_variables_feed`), and ``%feeds remove notebook_variables`` turns it off.

Values are not sent unless the user opts in (``%feeds values on``, or the
feed's source ``{internal: notebook_variables, parameters: {values: true}}``
in a manifest): a notebook holds passwords, connection URLs and tokens as
often as data, and the feed goes to the provider at every turn.

What is listed, and why:

- the user's own names only: not IPython's (``In``, ``Out``, ``get_ipython``…,
  the shell's ``user_ns_hidden``), not the agent's own bindings (the agent
  knows those from its results), never a ``_``-prefixed name;
- no modules, classes, functions or methods: they are code, not data, and
  the notebook's ``@tool`` functions are already in the prompt's tool list;
- with values on, a short repr cut by :mod:`reprlib` (a million-element list
  is never rendered whole), where: a name that looks secret (``API_KEY``,
  ``db_password``, ``creds``…) shows its type but never its value, and so
  does a dict entry under such a key; every string and repr is scanned for
  credential-looking values (a URL's password, ``Bearer …``, AWS, GitHub and
  other known key formats: :func:`~cortex_kernel.redaction.scrub_credentials`,
  detect-secrets' plugins) and those become ``***``; and every secret value
  of the environment is replaced by ``***`` wherever it appears
  (:mod:`cortex_kernel.redaction`);
- the variables the user's message names first (the run passes its message
  to the source): a 1.5B model otherwise used the first DataFrame listed
  for a question about the second;
- at most :data:`MAX_VARIABLES` (those the message names, then the most
  recently defined ones) and the feed's ``max_bytes`` (:data:`MAX_BYTES`
  by default): a notebook with thousands of names costs a bounded part of
  the prompt.
"""

from __future__ import annotations

import builtins
import functools
import re
import reprlib
import types
from collections.abc import Callable, Container, Mapping
from typing import TYPE_CHECKING, Any

from ..redaction import REDACTED, Redactor, is_secret_name, scrub_credentials

if TYPE_CHECKING:
    from ..runtime.feeds import FeedSpec
    from ..runtime.variables import VariableStore

__all__ = ["VariablesSource", "describe_variables", "notebook_variables_feed"]

#: At most this many variables are listed (the most recently defined).
MAX_VARIABLES = 40
#: The feed's default size cap (its ``max_bytes``).
MAX_BYTES = 3000
#: The feed's first line. A small model otherwise reads the feed's id as a
#: folder and loads ``notebook_variables/sales`` from disk.
HEADER = (
    "Python objects in the notebook's memory, not files: code run in the notebook "
    "uses them by name."
)

_CODE = (
    types.ModuleType,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    functools.partial,
)
# Names that hold credentials by convention (api_key, github_token, db_password,
# creds, an Authorization header…): of a variable, or a key of a dict.
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|key|token|secret|password|passwd|passphrase|pass|pwd|pw|"
    r"credentials?|creds?|auth|authorization|cookie|dsn)$",
    re.IGNORECASE,
)


def _secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None or is_secret_name(name)


class _ValueRepr(reprlib.Repr):
    """:mod:`reprlib`'s short repr with no credential in any string or repr it shows.

    Strings are scrubbed whole before reprlib cuts them (a cut could leave
    half a key no detector recognises); other objects' reprs likewise; a
    dict's value under a secret-looking key is not shown at all.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 60
        self.maxlist = self.maxtuple = self.maxset = self.maxdict = 5
        self.maxlevel = 2

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(scrub_credentials(x), level)

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = scrub_credentials(builtins.repr(x))
        except Exception:  # any user __repr__
            return f"<{type(x).__name__} instance>"
        if len(text) > self.maxother:
            i = max(0, (self.maxother - 3) // 2)
            j = max(0, self.maxother - 3 - i)
            text = text[:i] + self.fillvalue + text[len(text) - j :]
        return text

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{" + self.fillvalue + "}"
        try:
            keys = sorted(x)
        except Exception:  # keys of mixed types: reprlib's own fallback
            keys = list(x)
        pieces = []
        for key in keys[: self.maxdict]:
            shown = (
                REDACTED
                if isinstance(key, str) and _secret_name(key)
                else self.repr1(x[key], level - 1)
            )
            pieces.append(f"{self.repr1(key, level - 1)}: {shown}")
        if len(x) > self.maxdict:
            pieces.append(self.fillvalue)
        return "{" + ", ".join(pieces) + "}"


_REPR = _ValueRepr()


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
            labels = list(columns)[:10]
        except Exception:  # a user object with odd columns: leave them out
            labels = []
        names = _column_entries(value, labels)
        if names:
            more = len(columns) - len(names) if hasattr(columns, "__len__") else 0
            parts.append("columns " + ", ".join(names) + (f", +{more} more" if more > 0 else ""))
    return ", ".join(p for p in parts if p)


def _column_entries(value: Any, labels: list[Any]) -> list[str]:
    """``['name']: dtype`` for a frame's columns (a date stored as text reads ``object``).

    Written as the subscript that selects the column: listed as ``churned:
    bool``, a 1.5B model wrote ``customers[churned]`` (a NameError) where
    ``customers['churned']`` was meant.
    """
    names = [str(label) for label in labels]
    shown = [
        f"[{name!r}]" if isinstance(label, str) else f"[{name}]"
        for label, name in zip(labels, names, strict=True)
    ]
    dtypes = getattr(value, "dtypes", None)
    if dtypes is None or not hasattr(dtypes, "items"):
        return shown
    try:
        kinds = {str(column): str(kind) for column, kind in list(dtypes.items())[: len(names)]}
    except Exception:  # a user object with odd dtypes: names alone
        return shown
    return [
        f"{text}: {kinds[name]}" if name in kinds else text
        for text, name in zip(shown, names, strict=True)
    ]


def _short_repr(value: Any) -> str:
    try:
        text = _REPR.repr(value)
    except Exception as exc:  # any user __repr__
        return f"<repr failed: {type(exc).__name__}>"
    return " ".join(text.split())[:80]


def _listed(name: str, value: Any, agent_owns: Callable[[str], bool]) -> bool:
    try:
        return not isinstance(value, _CODE) and not agent_owns(name)
    except Exception:  # a hostile object (isinstance itself may raise): name it anyway
        return True


def _line(name: str, value: Any, values: bool) -> str:
    kind = type(value).__name__
    try:
        details = _details(value)
    except Exception:  # a property of a user object raised: its type still helps
        details = ""
    head = f"{name}: {kind}" + (f" ({details})" if details else "")
    if not values:
        return head
    if _secret_name(name):
        return f"{head} = (hidden: the name looks secret)"
    # Scanned once more whole: a credential may show only in context
    # (``aws_key = '…'``, a dict's key next to its value).
    return scrub_credentials(f"{head} = {_short_repr(value)}")


def describe_variables(
    namespace: Mapping[str, Any],
    *,
    hidden: Container[str] = (),
    agent_owns: Callable[[str], bool] = lambda name: False,
    redactor: Redactor | None = None,
    values: bool = False,
    message: str = "",
) -> str:
    """One line per user variable of ``namespace``: ``name: type (shape…)``, ``= repr`` if asked.

    The lines follow :data:`HEADER`; with no variable the text is ``(no variables yet)``.

    Parameters
    ----------
    namespace
        The notebook's ``user_ns``.
    hidden
        Names the shell defined itself (IPython's ``user_ns_hidden``).
    agent_owns
        Whether a name holds a value the agent bound (left out).
    redactor
        Scrubs the environment's secret values (default: one reading the environment now).
    values
        Add each value's short repr, with credentials left out (see the module
        docstring). Off by default: names, types and shapes only.
    message
        The user's message: the variables it names are listed first.
    """
    names = [
        name
        for name, value in list(namespace.items())
        if not name.startswith("_") and name not in hidden and _listed(name, value, agent_owns)
    ]
    listed = set(names)
    named = [name for name in dict.fromkeys(_WORD.findall(message)) if name in listed]
    first = set(named)
    rest = [name for name in names if name not in first]
    # Only the lines shown are described: the scan of values costs per variable.
    older = len(names) - MAX_VARIABLES
    lines = [f"({older} older variables not shown)"] if older > 0 else []
    for name in named[:MAX_VARIABLES] + rest[max(older, 0) :]:
        value = namespace[name]
        try:
            lines.append(_line(name, value, values))
        except Exception:  # a hostile object: name it, go on
            lines.append(f"{name}: {type(value).__name__} = (could not be described)")
    text = "\n".join([HEADER, *lines]) if lines else "(no variables yet)"
    return (redactor or Redactor()).text(text)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class VariablesSource:
    """The ``notebook_variables`` feed's source: ``source(values=False, message="")``.

    Parameters
    ----------
    namespace
        Returns the namespace to describe (read at each call).
    hidden
        Returns the names the shell defined itself.
    agent_owns
        Whether a name holds a value the agent bound (left out).
    """

    #: The run passes its message (runtime.feeds.with_message): named variables come first.
    takes_message = True

    def __init__(
        self,
        namespace: Callable[[], Mapping[str, Any]],
        *,
        hidden: Callable[[], Container[str]] = lambda: (),
        agent_owns: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self._namespace = namespace
        self._hidden = hidden
        self._agent_owns = agent_owns

    def __call__(self, values: bool = False, message: str = "") -> str:
        """The feed's text (values only when ``values`` is ``True``)."""
        return describe_variables(
            self._namespace(),
            hidden=self._hidden(),
            agent_owns=self._agent_owns,
            values=values is True,  # only a real opt-in, never a truthy string
            message=message,
        )


def notebook_variables_source(shell: Any, store: VariableStore) -> VariablesSource:
    """The ``notebook_variables`` feed source of ``shell``, for a session over ``store``.

    Parameters
    ----------
    shell
        The IPython shell whose ``user_ns`` is described.
    store
        The variable store of the session that gets the source: the names
        its agent actions bound are left out (the agent knows its results).

    Returns
    -------
    VariablesSource
        ``source(values=False, message="")``: the feed's text.
    """
    return VariablesSource(
        lambda: shell.user_ns,
        hidden=lambda: getattr(shell, "user_ns_hidden", {}),
        agent_owns=store.agent_owns,
    )


def notebook_variables_feed(values: bool = False) -> FeedSpec:
    """The ``notebook_variables`` feed's spec, with values on or off."""
    from ..runtime.feeds import FeedSpec

    source: dict[str, Any] = {"internal": "notebook_variables"}
    if values:
        source["parameters"] = {"values": True}
    return FeedSpec(id="notebook_variables", type="internal", source=source, max_bytes=MAX_BYTES)

"""The variable store of a session: what ``$name`` references read.

Values are bound by action id (``$a1`` is the result of action ``a1``) and by
``output_key``; ``set_variable`` binds names directly. The store lives as
long as the session, so later cells read what earlier ones produced. When a
notebook namespace is given, every ``output_key`` (and ``set_variable``)
value is written into it the moment it is bound — unless that would
overwrite a name the user defined (see below).

The user's namespace is not the agent's
---------------------------------------
- A value is written into the notebook only under a valid identifier that
  is not a keyword, does not start with ``_`` (``__builtins__``, ``_run``,
  IPython's ``_i1``…), does not shadow a Python builtin (``print``), and is
  either new or was written there by an agent action of this session and
  not reassigned since. Otherwise the value stays in the agent's variables
  (``_run.variables``, ``$name``) and :meth:`VariableStore.bind` returns a
  warning saying why and where the value is.
- Names that no action produced fall back to the notebook only when
  ``read_namespace`` is on (a manifest or session grant, off by default):
  model output must not read the user's data, let alone their secrets.

Action-id bindings do not emit ``variable_bound`` events: every successful
action has one, and ``action_succeeded`` already says so. They are kept
apart from named values, and a named value wins a lookup: an action whose id
happens to equal a variable's name (``id="tip"`` next to ``set_variable
tip``) must not overwrite that variable.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Iterator, KeysView, MutableMapping
from typing import Any

from ..exceptions import VariableReferenceError
from ..protocol.models import Action
from ..protocol.parser_events import WarningEvent
from .results import preview
from .run_events import VariableBound

__all__ = ["VariableStore", "invalid_variable_name"]

_MISSING = object()


def invalid_variable_name(name: str) -> str | None:
    """Why ``name`` can never be a notebook variable the agent binds, or ``None``."""
    if not name.isidentifier():
        return f"'{name}' is not a valid Python identifier"
    if keyword.iskeyword(name):
        return f"'{name}' is a Python keyword"
    if name.startswith("__") and name.endswith("__"):
        return f"'{name}' is a dunder name (Python's own)"
    if name.startswith("_"):
        return f"'{name}' starts with '_' (reserved for Python, IPython and _run/_response)"
    if hasattr(builtins, name):
        return f"'{name}' would shadow the Python builtin {name}()"
    return None


class VariableStore:
    """Variables of a session, with an optional notebook namespace behind them.

    Read like a mapping (it is ``Session.variables``): ``store[name]`` and
    ``name in store`` are what ``$name`` reads; iterating, ``len`` and
    ``keys()`` cover the names the agent bound (:meth:`snapshot`).

    Parameters
    ----------
    namespace
        The notebook's ``user_ns``: output keys are written into it (never
        over a name the user defined).
    read_namespace
        Whether ``$name`` lookups fall back to the notebook's variables.
    """

    def __init__(
        self, namespace: MutableMapping[str, Any] | None = None, *, read_namespace: bool = False
    ) -> None:
        self.values: dict[str, Any] = {}  # output keys and set_variable names
        self.by_id: dict[str, Any] = {}  # action results by action id
        self.namespace = namespace
        self.read_namespace = read_namespace
        self.bound_in_run: dict[str, Any] = {}
        self._written: dict[str, Any] = {}  # name -> the value we put in the namespace

    def start_run(self, *, read_namespace: bool | None = None) -> None:
        """Begin tracking the names bound by a new run.

        ``read_namespace``, when given, is the run's setting (its configuration's
        ``read_notebook``).
        """
        self.bound_in_run = {}
        if read_namespace is not None:
            self.read_namespace = read_namespace

    def lookup(self, name: str) -> Any:
        """The value of ``name``; raises ``KeyError`` when nothing has it."""
        value = self.values.get(name, _MISSING)
        if value is _MISSING:
            value = self.by_id.get(name, _MISSING)
        if value is _MISSING and self.namespace is not None and name in self.namespace:
            if not self.read_namespace:
                raise VariableReferenceError(
                    f"${name} is a notebook variable, and this agent may not read the "
                    "notebook (grant it with read_notebook in the manifest, or "
                    "%read_notebook on); ask the user to pass the value in the message"
                )
            value = self.namespace[name]
        if value is _MISSING:
            raise KeyError(name)
        return value

    def agent_owns(self, name: str) -> bool:
        """Whether the notebook's ``name`` holds what an agent action of this session put there."""
        if self.namespace is None or name not in self._written:
            return False
        return self.namespace.get(name, _MISSING) is self._written[name]

    def user_defined(self, name: str) -> bool:
        """Whether the notebook has ``name`` and the agent did not put it there (or it changed)."""
        return self.namespace is not None and name in self.namespace and not self.agent_owns(name)

    def namespace_refusal(self, name: str) -> str | None:
        """Why ``name`` may not be written into the notebook, or ``None`` when it may."""
        if self.namespace is None:
            return None
        invalid = invalid_variable_name(name)
        if invalid is not None:
            return invalid
        if self.user_defined(name):
            # The user's, or one the agent's own code rebound: no output_key made it.
            return f"'{name}' already names a notebook variable the agent did not bind"
        return None

    def __getitem__(self, name: str) -> Any:
        try:
            return self.lookup(name)
        except VariableReferenceError:  # a notebook name this agent may not read
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        return len(self.snapshot())

    def keys(self) -> KeysView[str]:
        """The names the agent bound (so ``dict(store)`` is :meth:`snapshot`)."""
        return self.snapshot().keys()

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.lookup(name)
        except (KeyError, VariableReferenceError):
            return False
        return True

    def bind(
        self, name: str, value: Any, *, t: float, action_id: str | None = None, public: bool = True
    ) -> list[VariableBound | WarningEvent]:
        """Bind ``name``; ``public`` names also go to the namespace; return the events.

        Non-public bindings are action ids: looked up after named values. A
        public name the notebook may not take (see the module docstring) is
        kept here only, with a ``warning`` event that says why and where.
        """
        if not public:
            self.by_id[name] = value
            return []
        self.values[name] = value
        self.bound_in_run[name] = value
        events: list[VariableBound | WarningEvent] = [
            VariableBound(
                t=t, name=name, id=action_id, type_name=type(value).__name__, preview=preview(value)
            )
        ]
        if self.namespace is None:
            return events
        refusal = self.namespace_refusal(name)
        # The very object is there already (the agent's code bound it, as
        # `total = …` with output_key="total"): binding it changes nothing.
        if refusal is None or self.namespace.get(name, _MISSING) is value:
            self.namespace[name] = value
            self._written[name] = value
            return events
        events.append(
            WarningEvent(
                span=(0, 0),
                t=t,
                id=action_id,
                message=(
                    f"{refusal}: the value was not written to the notebook; it is in "
                    f"_run.variables[{name!r}] (and ${name} for the agent)"
                ),
                details={"name": name, "where": f"_run.variables[{name!r}]"},
            )
        )
        return events

    def bind_result(
        self, action: Action, value: Any, *, t: float
    ) -> list[VariableBound | WarningEvent]:
        """Bind an action's result by its id and its ``output_key``; return the events."""
        self.bind(action.id, value, t=t, action_id=action.id, public=False)
        if not action.output_key:
            return []
        return self.bind(action.output_key, value, t=t, action_id=action.id)

    def snapshot(self) -> dict[str, Any]:
        """Every value by name: action ids first, named values over them."""
        return {**self.by_id, **self.values}

    def delete(self, name: str) -> bool:
        """Forget the agent's ``name``; ``False`` if the agent never bound it.

        The notebook's copy goes too, but only while it still holds what the
        agent put there: a name the user defined or reassigned is never deleted.
        """
        owned = self.agent_owns(name)
        found = self.values.pop(name, _MISSING) is not _MISSING
        found = self.by_id.pop(name, _MISSING) is not _MISSING or found
        self.bound_in_run.pop(name, None)
        if owned and self.namespace is not None:
            del self.namespace[name]
        self._written.pop(name, None)
        return found

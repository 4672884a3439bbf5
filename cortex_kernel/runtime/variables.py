"""The variable store of a session: what ``$name`` references read.

Values are bound by action id (``$a1`` is the result of action ``a1``) and by
``output_key``; ``set_variable`` binds names directly. The store lives as
long as the session, so later cells read what earlier ones produced. When a
notebook namespace is given, every ``output_key`` (and ``set_variable``)
value is written into it the moment it is bound, and names that no action
produced fall back to it.

Action-id bindings do not emit ``variable_bound`` events: every successful
action has one, and ``action_succeeded`` already says so. They are kept
apart from named values, and a named value wins a lookup: an action whose id
happens to equal a variable's name (``id="tip"`` next to ``set_variable
tip``) must not overwrite that variable.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from ..protocol.models import Action
from .results import preview
from .run_events import VariableBound

__all__ = ["VariableStore"]

_MISSING = object()


class VariableStore:
    """Variables of a session, with an optional notebook namespace behind them.

    Parameters
    ----------
    namespace
        The notebook's ``user_ns``: output keys are written into it, and
        lookups fall back to it.
    """

    def __init__(self, namespace: MutableMapping[str, Any] | None = None) -> None:
        self.values: dict[str, Any] = {}  # output keys and set_variable names
        self.by_id: dict[str, Any] = {}  # action results by action id
        self.namespace = namespace
        self.bound_in_run: dict[str, Any] = {}

    def start_run(self) -> None:
        """Begin tracking the names bound by a new run."""
        self.bound_in_run = {}

    def lookup(self, name: str) -> Any:
        """The value of ``name``; raises ``KeyError`` when nothing has it."""
        value = self.values.get(name, _MISSING)
        if value is _MISSING:
            value = self.by_id.get(name, _MISSING)
        if value is _MISSING and self.namespace is not None:
            value = self.namespace.get(name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.lookup(name)
        except KeyError:
            return False
        return True

    def bind(
        self, name: str, value: Any, *, t: float, action_id: str | None = None, public: bool = True
    ) -> VariableBound | None:
        """Bind ``name``; ``public`` names also go to the namespace and get an event.

        Non-public bindings are action ids: looked up after named values.
        """
        if not public:
            self.by_id[name] = value
            return None
        self.values[name] = value
        self.bound_in_run[name] = value
        if self.namespace is not None:
            self.namespace[name] = value
        return VariableBound(
            t=t, name=name, id=action_id, type_name=type(value).__name__, preview=preview(value)
        )

    def bind_result(self, action: Action, value: Any, *, t: float) -> list[VariableBound]:
        """Bind an action's result by its id and its ``output_key``; return the events."""
        self.bind(action.id, value, t=t, action_id=action.id, public=False)
        if not action.output_key:
            return []
        event = self.bind(action.output_key, value, t=t, action_id=action.id)
        return [event] if event is not None else []

    def snapshot(self) -> dict[str, Any]:
        """Every value by name: action ids first, named values over them."""
        return {**self.by_id, **self.values}

    def delete(self, name: str) -> bool:
        """Forget ``name`` (and remove it from the namespace); ``False`` if it was unknown."""
        found = self.values.pop(name, _MISSING) is not _MISSING
        found = self.by_id.pop(name, _MISSING) is not _MISSING or found
        self.bound_in_run.pop(name, None)
        if self.namespace is not None and name in self.namespace:
            del self.namespace[name]
            found = True
        return found

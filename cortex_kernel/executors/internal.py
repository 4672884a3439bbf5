"""``internal`` actions: change the run itself, each one allowed or blocked by the manifest.

Available now: ``set_variable`` ``{"name", "value"}``, ``delete_variable``
``{"name"}`` and ``list_variables`` ``{}``. The context-feed actions of SPEC
§2.1 are rejected with a message until feeds exist.

The notebook is the user's: ``set_variable`` takes a valid identifier that
is no keyword, dunder, ``_``-name or builtin (else an ``action_error``); over
a name the user defined it binds the agent's variable only, with a warning
(see :mod:`cortex_kernel.runtime.variables`). ``delete_variable`` removes
only what the agent bound.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import ActionError
from ..protocol.models import Action
from ..runtime.ports import ExecutionContext, Executor
from ..runtime.variables import invalid_variable_name

__all__ = ["DEFAULT_INTERNAL_ACTIONS", "INTERNAL_ACTIONS", "InternalExecutor"]

INTERNAL_ACTIONS = frozenset({"set_variable", "delete_variable", "list_variables"})
FUTURE_ACTIONS = frozenset(
    {
        "add_context_feed",
        "remove_context_feed",
        "update_context_feed",
        "list_context_feeds",
        "clear_context",
    }
)
DEFAULT_INTERNAL_ACTIONS = INTERNAL_ACTIONS


class InternalExecutor(Executor):
    """Runs the internal actions the context allows."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """Unknown, unavailable or forbidden internal actions are an ``action_error``."""
        name = action.name
        if name in FUTURE_ACTIONS:
            return f"internal action '{name}' is not available in this runtime yet"
        if name not in INTERNAL_ACTIONS:
            return f"unknown internal action '{name}'; known: {', '.join(sorted(INTERNAL_ACTIONS))}"
        if name not in context.allowed_internal:
            return (
                f"internal action '{name}' is not allowed for this agent (the manifest blocks it)"
            )
        var = action.parameters.get("name")
        if name in ("set_variable", "delete_variable") and not isinstance(var, str):
            return f'{name} needs a "name" string parameter'
        if name == "set_variable" and isinstance(var, str) and "$" not in var:
            invalid = invalid_variable_name(var)
            if invalid is not None:
                return f"set_variable cannot bind {invalid}; choose a plain name such as 'result'"
        return None

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Apply the action; the result tells the model what changed."""
        parameters = body.get("parameters")
        params: dict[str, Any] = parameters if isinstance(parameters, dict) else {}
        name = body.get("name", action.name)
        if name == "set_variable":
            var = str(params["name"])
            invalid = invalid_variable_name(var)  # again: the name may have been a $reference
            if invalid is not None:
                raise ActionError(f"set_variable cannot bind {invalid}", action_id=action.id)
            for event in context.variables.bind(
                var, params.get("value"), t=context.clock(), action_id=action.id
            ):
                context.emit(event)
            # The result is the value itself, so an output_key (even the same
            # name) or `$<action id>` reads what was set.
            return params.get("value")
        if name == "delete_variable":
            var = str(params["name"])
            if context.variables.user_defined(var) and var not in context.variables.values:
                raise ActionError(
                    f"'{var}' is a notebook name the user defined; delete_variable removes "
                    "only variables the agent bound (output keys, set_variable)",
                    action_id=action.id,
                )
            if not context.variables.delete(var):
                raise ActionError(
                    f"no agent variable '{var}' to delete (the agent bound: "
                    f"{', '.join(sorted(context.variables.values)) or 'nothing yet'})",
                    action_id=action.id,
                )
            return f"${var} deleted"
        if name == "list_variables":
            return {
                key: type(value).__name__
                for key, value in context.variables.values.items()
                if not key.startswith("_")
            }
        raise ActionError(f"unknown internal action '{name}'", action_id=action.id)

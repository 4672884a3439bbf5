"""``internal`` actions: change the run itself, each one allowed or blocked by the manifest.

The seven operations of docs/protocol.md#actions and ``list_variables``:

- ``set_variable`` ``{"name", "value"}``, ``delete_variable`` ``{"name"}``,
  ``list_variables`` ``{}``;
- ``add_context_feed`` ``{"id", "type", "source", "ttl"?, "interval"?,
  "max_bytes"?, "max_tokens"?}``, ``update_context_feed`` ``{"id", …fields}``,
  ``remove_context_feed`` ``{"id"}``, ``list_context_feeds`` ``{}`` (see
  :mod:`cortex_kernel.runtime.feeds`). The model's ``source`` is only ever
  a *name*: a source the manifest or the user declared, or ``system_clock``
  / ``run_status``; a source it writes out (a ``callable``, a ``tool``, an
  MCP resource…) is refused with an ``action_error`` and nothing is imported
  (:meth:`~cortex_kernel.runtime.feeds.FeedRegistry.model_feed`);
- ``clear_context`` ``{}``: forget the conversation of earlier runs (this
  run's message and turns stay, so the model still knows its task).

By default only ``set_variable``, ``list_context_feeds`` and
``list_variables`` are allowed (:data:`DEFAULT_INTERNAL_ACTIONS`); a
manifest's ``internal_actions`` changes that. A blocked call is an
``action_error`` the model sees, and every call, allowed or blocked, is an
``internal_action`` audit event in the transcript.

The notebook is the user's: ``set_variable`` takes a valid identifier that
is no keyword, dunder, ``_``-name or builtin (else an ``action_error``); over
a name the user defined it binds the agent's variable only, with a warning
(see :mod:`cortex_kernel.runtime.variables`). ``delete_variable`` removes
only what the agent bound.
"""

from __future__ import annotations

from typing import Any, Literal

from ..exceptions import ActionError
from ..protocol.models import Action
from ..runtime.feeds import FeedRegistry, feed_spec
from ..runtime.ports import ExecutionContext, Executor
from ..runtime.run_events import InternalAudit
from ..runtime.variables import invalid_variable_name

__all__ = ["DEFAULT_INTERNAL_ACTIONS", "INTERNAL_ACTIONS", "InternalExecutor"]

FEED_ACTIONS = frozenset(
    {"add_context_feed", "remove_context_feed", "update_context_feed", "list_context_feeds"}
)
INTERNAL_ACTIONS = frozenset(
    {"set_variable", "delete_variable", "list_variables", "clear_context", *FEED_ACTIONS}
)
#: The default (docs/feeds.md#internal-actions): reading feeds, setting and listing variables.
DEFAULT_INTERNAL_ACTIONS = frozenset({"set_variable", "list_context_feeds", "list_variables"})


class InternalExecutor(Executor):
    """Runs the internal actions the context allows."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """Unknown or forbidden internal actions are an ``action_error`` (and a blocked audit)."""
        name = action.name
        if name not in INTERNAL_ACTIONS:
            return f"unknown internal action '{name}'; known: {', '.join(sorted(INTERNAL_ACTIONS))}"
        if name not in context.config.allowed_internal:
            allowed = ", ".join(sorted(context.config.allowed_internal)) or "none"
            message = (
                f"internal action '{name}' is not allowed for this agent (the manifest blocks "
                f"it; allowed: {allowed})"
            )
            _audit(context, action, name, "blocked", message)
            return message
        if name in FEED_ACTIONS and context.feeds is None:
            return f"internal action '{name}': this session has no context feeds"
        if name in ("add_context_feed", "update_context_feed") and context.feeds is not None:
            # Refused before it runs (an action_error); execute checks again
            # once $references are resolved.
            changes = {k: v for k, v in action.parameters.items() if k != "id"}
            try:
                if name == "add_context_feed":
                    context.feeds.model_feed(action.parameters)
                else:
                    context.feeds.model_feed(changes, update=True)
            except ActionError as exc:
                message = f"{name}: {exc}"
                _audit(context, action, name, "blocked", message)
                return message
        var = action.parameters.get("name")
        if name in ("set_variable", "delete_variable") and not isinstance(var, str):
            return f'{name} needs a "name" string parameter'
        if name == "set_variable" and isinstance(var, str) and "$" not in var:
            invalid = invalid_variable_name(var)
            if invalid is not None:
                return f"set_variable cannot bind {invalid}; choose a plain name such as 'result'"
        return None

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Apply the action (audited); the result tells the model what changed."""
        parameters = body.get("parameters")
        params: dict[str, Any] = parameters if isinstance(parameters, dict) else {}
        name = str(body.get("name", action.name))
        try:
            result = self._apply(action, name, params, context)
        except Exception as exc:
            _audit(context, action, name, "error", str(exc), params)
            raise
        _audit(context, action, name, "ok", "", params)
        return result

    def _apply(
        self, action: Action, name: str, params: dict[str, Any], context: ExecutionContext
    ) -> Any:
        if name in FEED_ACTIONS:
            assert context.feeds is not None  # check() refused it otherwise
            return _feed_action(context.feeds, name, params)
        if name == "clear_context":
            if context.clear_context is None:
                raise ActionError("clear_context: this session keeps no conversation")
            dropped = context.clear_context()
            return f"context cleared: {dropped} earlier messages forgotten"
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
                    f"'{var}' names a notebook variable the agent did not bind; "
                    "delete_variable removes only variables the agent bound (output keys, "
                    "set_variable)",
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


def _feed_action(feeds: FeedRegistry, name: str, params: dict[str, Any]) -> Any:
    if name == "list_context_feeds":
        return feeds.describe()
    feed_id = params.get("id")
    if not isinstance(feed_id, str):
        raise ActionError(f'{name} needs an "id" string parameter')
    # The model's feed: its source only by name (model_feed refuses the rest).
    if name == "add_context_feed":
        feeds.add(feed_spec(feeds.model_feed(params)))
        return f"context feed '{feed_id}' added; it is in the prompt from the next turn"
    if name == "update_context_feed":
        changes = {key: value for key, value in params.items() if key != "id"}
        feeds.update(feed_id, feeds.model_feed(changes, update=True))
        return f"context feed '{feed_id}' updated"
    feeds.remove(feed_id)
    return f"context feed '{feed_id}' removed"


def _audit(
    context: ExecutionContext,
    action: Action,
    name: str,
    outcome: Literal["ok", "error", "blocked"],
    message: str,
    parameters: dict[str, Any] | None = None,
) -> None:
    context.emit(
        InternalAudit(
            t=context.clock(),
            id=action.id,
            name=name,
            parameters=parameters if parameters is not None else action.parameters,
            allowed=outcome != "blocked",
            outcome=outcome,
            message=message,
        )
    )

"""``llm`` actions: one sub-completion through the session's model; the result is its text.

Which model: the agent's own, or one the manifest lists (``llm_models``).
Model output never picks another provider (spending the user's keys) or a
``replay:`` file (reading any local JSONL file) by itself; ``replay:`` is
allowed only when the session's own model is a replay (offline examples),
and only for files beside that replay (in its folder, symlinks resolved).
A refused path gets the same message whether or not the file exists.

The tokens of the call are the run's (``limits.max_tokens``): before it
starts, the action holds its prompt plus the most it may write, which is
sent as the completion's ``max_tokens``, cut to what is left of the run's
budget (see :meth:`~cortex_kernel.runtime.limits.Budget.reserve_tokens`).
With nothing left the action is refused; what it used is charged when it
ends, cancelled or not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..exceptions import ConfigError
from ..protocol.models import Action
from ..runtime.ports import CompletionRequest, ExecutionContext, Executor, Message, Model
from ..runtime.side_requests import complete_text

__all__ = ["LLMExecutor"]


def model_refusal(name: str | None, context: ExecutionContext) -> str | None:
    """Why an ``llm`` action may not use the model ``name``, or ``None``."""
    current = str(getattr(context.config.model, "name", ""))
    if not name or name == current:
        return None
    if name.startswith("replay:"):
        if not current.startswith("replay:"):
            return (
                f"an llm action cannot use '{name}': replay models are allowed only when the "
                f"agent's own model is a replay (it is {current})"
            )
        wanted, own = _replay_file(name), _replay_file(current)
        if wanted is not None and own is not None and wanted.parent == own.parent:
            return None
        # Decided on the path alone: nothing here says whether the file exists.
        folder = own.parent if own is not None else "the session replay's folder"
        return (
            f"an llm action cannot use '{name}': a replay session's llm actions may replay "
            f"only files beside its own replay (in {folder})"
        )
    if name in context.config.llm_models:
        return None
    listed = ", ".join(sorted(context.config.llm_models)) or "none"
    return (
        f"an llm action cannot use model '{name}': it may use the agent's model ({current}; "
        f'leave "model" out) or the models the manifest lists (llm_models: {listed})'
    )


def _replay_file(spec: str) -> Path | None:
    """The file of ``replay:PATH[?query]``, absolute with symlinks resolved (``None``: no path)."""
    path = spec.removeprefix("replay:").partition("?")[0]
    return Path(path).expanduser().resolve() if path else None


def _model_for(name: str | None, context: ExecutionContext) -> Model:
    current = context.config.model
    refusal = model_refusal(name, context)
    if refusal is not None:  # checked at submission too; a $reference may have changed it
        raise ConfigError(refusal)
    if not name or name == getattr(current, "name", None):
        return current
    if name.startswith("replay:"):  # open the very file checked, whatever the working directory
        query = name.partition("?")[1:]
        name = f"replay:{_replay_file(name)}{''.join(query)}"
    resolve = context.config.resolve_model
    if resolve is None:
        raise ConfigError(
            f"cannot switch an llm action to model '{name}': no model resolver is installed"
        )
    return resolve(name)


class LLMExecutor(Executor):
    """Runs ``{"prompt", "model"?, "system"?}`` as one streamed completion."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """The body needs a string ``prompt``."""
        if not isinstance(action.body.get("prompt"), str):
            return 'an llm action needs a "prompt" string'
        model = action.body.get("model")
        if model is not None and not isinstance(model, str):
            return 'the "model" of an llm action is a model name string'
        if isinstance(model, str) and "$" not in model:
            return model_refusal(model, context)
        return None

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Stream the completion and return its text."""
        messages: list[Message] = []
        system = body.get("system")
        if isinstance(system, str) and system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": str(body.get("prompt", ""))})
        model = _model_for(
            body.get("model") if isinstance(body.get("model"), str) else None, context
        )
        request = CompletionRequest(messages=messages)
        return await complete_text(model, request, context.budget, _own_cap(model))


def _own_cap(model: Model) -> int | None:
    """The completion's ``max_tokens`` among the model's options, if any."""
    options = getattr(model, "options", None)
    value = options.get("max_tokens") if isinstance(options, dict) else None
    return value if isinstance(value, int) and value > 0 else None

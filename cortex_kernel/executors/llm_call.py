"""``llm`` actions: one sub-completion through the session's model; the result is its text."""

from __future__ import annotations

from typing import Any

from ..exceptions import ConfigError
from ..protocol.models import Action
from ..runtime.ports import CompletionRequest, ExecutionContext, Executor, Message, Model

__all__ = ["LLMExecutor"]


def _model_for(name: str | None, context: ExecutionContext) -> Model:
    current = context.model()
    if not name or name == getattr(current, "name", None):
        return current
    if context.resolve_model is None:
        raise ConfigError(
            f"cannot switch an llm action to model '{name}': no model resolver is installed"
        )
    return context.resolve_model(name)


class LLMExecutor(Executor):
    """Runs ``{"prompt", "model"?, "system"?}`` as one streamed completion."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """The body needs a string ``prompt``."""
        if not isinstance(action.body.get("prompt"), str):
            return 'an llm action needs a "prompt" string'
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
        parts: list[str] = []
        async with model.stream(CompletionRequest(messages=messages)) as completion:
            async for chunk in completion:
                parts.append(chunk)
        return "".join(parts)

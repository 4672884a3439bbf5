"""A refusal for action types a manifest declares but this version cannot run yet."""

from __future__ import annotations

from typing import Any

from ..exceptions import UnknownActionError
from ..protocol.models import Action
from ..runtime.ports import ExecutionContext, Executor

__all__ = ["NotAvailable"]


class NotAvailable(Executor):
    """Refuses every action of its type with one clear message (never silent).

    Parameters
    ----------
    message
        Why, and what the manifest declared.
    """

    def __init__(self, message: str) -> None:
        self.message = message

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """Always the refusal (an ``action_error``; the action never runs)."""
        return self.message

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Never reached (``check`` refuses); raises the same message."""
        raise UnknownActionError(self.message)

"""Approve / Deny in the live view: the notebook's approver of ``confirm: true`` tools.

The tool executor awaits :meth:`ViewApprover.__call__`; the view's buttons
send ``{"type": "approval", "id", "approved"}`` to the kernel, and
:meth:`ViewApprover.decide` (called by the view's message handler on the
kernel's loop) wakes the waiting call. Front-end comm messages are served
while an agent cell awaits, which is what makes this work at all. An
interrupt cancels the wait like any other await; a decision for an action
that no longer waits is ignored.
"""

from __future__ import annotations

import anyio

from ..executors.approval import ApprovalRequest

__all__ = ["ViewApprover"]


class ViewApprover:
    """Waits for the user's decision on each tool call marked ``confirm: true``."""

    by = "user"

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[anyio.Event, list[bool]]] = {}

    @property
    def waiting(self) -> list[str]:
        """Ids of the actions waiting for a decision."""
        return list(self._waiting)

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Wait until :meth:`decide` is called for ``request.action_id``."""
        event = anyio.Event()
        decision: list[bool] = []
        self._waiting[request.action_id] = (event, decision)
        try:
            await event.wait()
        finally:
            self._waiting.pop(request.action_id, None)
        return decision[0]

    def decide(self, action_id: str, approved: bool) -> bool:
        """Record the user's decision; ``False`` when nothing waits under that id."""
        entry = self._waiting.get(action_id)
        if entry is None or entry[0].is_set():
            return False
        entry[1].append(bool(approved))
        entry[0].set()
        return True

"""Approve / Deny in the live view: the notebook's approver of ``confirm: true`` tools.

The tool executor awaits :meth:`ViewApprover.__call__`; the view's buttons
send ``{"type": "approval", "id", "approved"}`` to the kernel, and
:meth:`ViewApprover.decide` (called by the view's message handler on the
kernel's loop) wakes the waiting call. Front-end comm messages are served
while an agent cell awaits, which is what makes this work at all. An
interrupt cancels the wait like any other await; a decision for an action
that no longer waits is ignored.

``%approvals approve`` / ``%approvals deny`` answer every request at once
instead of asking (for unattended notebooks, e.g. under nbval or papermill);
the decision still goes into the transcript, ``by`` naming the setting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # imported when a run needs them (the kernel starts without them)
    import anyio

    from ..executors.approval import ApprovalRequest

__all__ = ["ViewApprover"]

Policy = Literal["ask", "approve", "deny"]


class ViewApprover:
    """Waits for the user's decision on each tool call marked ``confirm: true``."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[anyio.Event, list[bool]]] = {}
        self.policy: Policy = "ask"
        self.by = "user"

    def set_policy(self, policy: Policy) -> None:
        """``ask`` (the view's buttons), or ``approve`` / ``deny`` every call at once."""
        self.policy = policy
        self.by = "user" if policy == "ask" else f"%approvals {policy}"

    @property
    def waiting(self) -> list[str]:
        """Ids of the actions waiting for a decision."""
        return list(self._waiting)

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Wait until :meth:`decide` is called for ``request.action_id``."""
        import anyio

        if self.policy != "ask":
            return self.policy == "approve"
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

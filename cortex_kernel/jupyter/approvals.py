"""Approve / Deny in the live view: the notebook's approver of ``confirm: true`` calls.

The executors await :meth:`ViewApprover.__call__`; the view's buttons send
``{"type": "approval", "token", "digest", "approved"}`` to the kernel, and
:meth:`ViewApprover.decide` (called by the view's message handler on the
kernel's loop) wakes the waiting call. Front-end comm messages are served
while an agent cell awaits, which is what makes this work at all. An
interrupt cancels the wait like any other await.

Requests are keyed by their token, never by action id: a workflow's step
``a1``, a sub-agent's ``a1`` and the model's ``a1`` may all wait at once. An
answer is refused (:meth:`~ViewApprover.decide` returns why) unless it
names a waiting request's token and the digest of the text the request
showed: the view computes that digest over the text it put in the box, so
nothing is approved that the box did not show.

``%approvals approve`` / ``%approvals deny`` answer every request at once
instead of asking (for unattended notebooks, e.g. under nbval or papermill);
the decision still goes into the transcript, ``by`` naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # imported when a run needs them (the kernel starts without them)
    import anyio

    from ..executors.approval import ApprovalRequest

__all__ = ["ViewApprover"]

Policy = Literal["ask", "approve", "deny"]


@dataclass
class _Waiting:
    request: ApprovalRequest
    event: anyio.Event
    decision: list[bool] = field(default_factory=list)


class ViewApprover:
    """Waits for the user's decision on each call marked ``confirm: true``."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self.policy: Policy = "ask"
        self.by = "user"

    def set_policy(self, policy: Policy) -> None:
        """``ask`` (the view's buttons), or ``approve`` / ``deny`` every call at once."""
        self.policy = policy
        self.by = "user" if policy == "ask" else f"%approvals {policy}"

    @property
    def waiting(self) -> list[ApprovalRequest]:
        """The requests waiting for a decision, oldest first."""
        return [entry.request for entry in self._waiting.values()]

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Wait until :meth:`decide` answers ``request.token``."""
        import anyio

        if self.policy != "ask":
            return self.policy == "approve"
        entry = _Waiting(request, anyio.Event())
        self._waiting[request.token] = entry
        try:
            await entry.event.wait()
        finally:
            self._waiting.pop(request.token, None)
        return entry.decision[0]

    def decide(self, token: str, digest: str, approved: bool) -> str | None:
        """Answer the request ``token``; ``None`` when taken, else why it was refused.

        Parameters
        ----------
        token
            The request's token, as the view's box carried it.
        digest
            The digest of the text the box showed
            (:func:`~cortex_kernel.executors.approval.approval_digest`).
        approved
            The decision.
        """
        entry = self._waiting.get(token)
        if entry is None or entry.event.is_set():
            return "no request waits under that token (answered, cancelled or never asked)"
        if digest != entry.request.digest:
            return "the text it answers is not the request's (the box did not show it whole)"
        entry.decision.append(bool(approved))
        entry.event.set()
        return None

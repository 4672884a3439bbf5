"""Human approval of tool calls marked ``confirm: true``.

The tool executor asks an :class:`Approver` before such a call runs, with
the exact (validated) parameters, and reports both the request and the
decision as events (``approval_requested``, ``approval_decided``), so every
decision is in the transcript. The notebook's approver waits for the live
view's Approve / Deny buttons; a headless run approves only with ``--yes``
(:class:`ApproveAll`) and otherwise has no approver, which refuses the call.
A waiting approval is an ordinary ``await``: interrupting the run cancels it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ApprovalRequest", "ApproveAll", "Approver"]


@dataclass(frozen=True)
class ApprovalRequest:
    """One tool call waiting for a decision."""

    action_id: str
    tool: str
    kind: str
    parameters: dict[str, Any]


class Approver(Protocol):
    """Decides whether a tool call may run (``True``) or not."""

    by: str

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Return the decision for ``request``."""
        ...


class ApproveAll:
    """Approves every call (``cortex-kernel run --yes``)."""

    by = "--yes"

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Always ``True``."""
        return True

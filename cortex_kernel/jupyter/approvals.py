"""Approve / Approve for this cell / Deny in the live view: the notebook's approver.

The executors await :meth:`ViewApprover.__call__` for each ``confirm: true``
call; the view's buttons send ``{"type": "approval", "token", "digest",
"approved"}`` (and ``"scope": "cell"`` for *Approve for this cell*) to the kernel, and
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

**Approve for this cell** approves the request and every later request of
the same tool (same name and kind) in the rest of that cell's run, its
sub-agents' and workflows' included; each is still shown in the view,
decided ``for this cell``. A request whose tool noted something (code that
writes into the user's objects) still asks, as in ``auto``. The grant is
the view's :class:`CellScope`, closed when the cell's run ends; the answer
only says ``scope: "cell"``, and what it grants is read from the waiting
request the token names, never from the message.

Permission modes (``%approvals``), as agent tools in notebooks have them:

- ``ask`` (the default): every request waits for the view's buttons;
- ``auto`` (alias ``approve``): approved without asking, except a request
  whose tool noted something (the in-kernel ``python``'s code writes into
  an existing object of the user's: ``df[...] = …``, ``del x``), which asks;
- ``bypass``: every request approved;
- ``deny``: every request refused.

Decisions taken by the setting go into the transcript, ``by`` naming it.
Where nobody can click (papermill sets ``$CORTEX_UNATTENDED``), a request
that would ask is refused at once instead of waiting for ever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # imported when a run needs them (the kernel starts without them)
    import anyio

    from ..executors.approval import ApprovalRequest

__all__: list[str] = []  # used inside the jupyter package only

Policy = Literal["ask", "auto", "bypass", "deny"]

#: What ``%approvals`` accepts, and the mode each names.
POLICIES: dict[str, Policy] = {
    "ask": "ask",
    "auto": "auto",
    "approve": "auto",
    "bypass": "bypass",
    "deny": "deny",
}


#: How the transcript and the view name a decision taken by a cell's grant.
CELL_BY = "for this cell"


class CellScope:
    """One agent cell's run while it runs: what *Approve for this cell* granted in it.

    The cell's live view makes one and closes it when the run ends
    (:meth:`~cortex_kernel.jupyter.view.RunView.finish`), so a grant never
    outlives its cell: a fire-and-forget action or a feed that asks later asks again.

    Attributes
    ----------
    open
        Whether the cell's run is still going.
    tools
        The ``(tool, kind)`` pairs granted for the rest of the run.
    """

    def __init__(self) -> None:
        self.open = True
        self.tools: set[tuple[str, str]] = set()

    def close(self) -> None:
        """The run is over: nothing more is approved by this cell's grants."""
        self.open = False
        self.tools.clear()


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
        self._cells: list[CellScope] = []  # the open cells with grants
        self._decided_by: dict[str, str] = {}  # token -> who, when not ``self.by``

    def set_policy(self, policy: str) -> None:
        """``ask``, ``auto`` (or ``approve``), ``bypass`` or ``deny`` (see the module docstring).

        Raises
        ------
        ValueError
            Another word.
        """
        self.policy = POLICIES[policy]
        # As the user wrote it: the transcript names the setting they chose.
        self.by = "user" if self.policy == "ask" else f"%approvals {policy}"

    @property
    def waiting(self) -> list[ApprovalRequest]:
        """The requests waiting for a decision, oldest first."""
        return [entry.request for entry in self._waiting.values()]

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Wait until :meth:`decide` answers ``request.token``."""
        import os

        import anyio

        if self.policy in ("bypass", "deny"):
            return self.policy == "bypass"
        if self._granted(request):
            self._decided_by[request.token] = CELL_BY
            return True
        if self.policy == "auto" and not request.notes:
            return True
        if os.environ.get("CORTEX_UNATTENDED"):
            from ..exceptions import ToolError

            if request.notes:  # auto still asks for these: only bypass lets them run
                how = (
                    "set %approvals bypass in the notebook or approvals: bypass in the "
                    "manifest (auto still asks for code that writes into your objects)"
                )
            else:
                how = (
                    "set %approvals auto (or bypass) in the notebook or approvals: auto in "
                    "the manifest, or grant the tool in the manifest (confirm: false)"
                )
            writes = " (it writes into your objects)" if request.notes else ""
            raise ToolError(
                f"'{request.tool}' needs approval{writes} and nobody can approve in an "
                f"unattended run; {how}"
            )
        entry = _Waiting(request, anyio.Event())
        self._waiting[request.token] = entry
        try:
            await entry.event.wait()
        finally:
            self._waiting.pop(request.token, None)
        return entry.decision[0]

    def _granted(self, request: ApprovalRequest) -> bool:
        """Whether an open cell's grant covers ``request`` (never one with notes)."""
        self._cells = [cell for cell in self._cells if cell.open]
        if request.notes:
            return False
        return any((request.tool, request.kind) in cell.tools for cell in self._cells)

    def by_of(self, request: ApprovalRequest) -> str:
        """Who took the decision on ``request`` (asked once, after it is taken).

        ``user, for this cell`` for the answer that granted the cell, ``for
        this cell`` for the requests the grant approved, else :attr:`by`.
        """
        return self._decided_by.pop(request.token, self.by)

    def decide(
        self, token: str, digest: str, approved: bool, cell: CellScope | None = None
    ) -> str | None:
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
        cell
            *Approve for this cell*: the view's scope of the cell's run, which
            then approves the same tool's later requests until the run ends.
        """
        entry = self._waiting.get(token)
        if entry is None or entry.event.is_set():
            return "no request waits under that token (answered, cancelled or never asked)"
        if digest != entry.request.digest:
            return "the text it answers is not the request's (the box did not show it whole)"
        if cell is not None:
            if not approved:
                return "only an approval can be given for the whole cell"
            if not cell.open:
                return "the cell's run is over"
            # The grant is the waiting request's tool: nothing in the answer names it.
            cell.tools.add((entry.request.tool, entry.request.kind))
            if cell not in self._cells:
                self._cells.append(cell)
            self._decided_by[token] = f"user, {CELL_BY}"
        entry.decision.append(bool(approved))
        entry.event.set()
        return None

"""Human approval of calls marked ``confirm: true`` (tools and relic operations).

An executor calls :func:`ask_approval` before such a call runs, with the
exact (validated) parameters. It reports the request and the decision as
events (``approval_requested``, ``approval_decided``), so every decision is
in the transcript, and asks the context's :class:`Approver`. The notebook's
approver waits for the live view's Approve / Deny buttons; a headless run
approves only with ``--yes`` (:class:`ApproveAll`) and otherwise has no
approver, which refuses the call. The approver is the run's
(:attr:`~cortex_kernel.runtime.ports.SessionConfig.approver`), the same in
its sub-agents' runs. A waiting approval is an ordinary
``await``: interrupting the run cancels it.

Each request has a :attr:`~ApprovalRequest.token` of its own (action ids
repeat: a workflow's step ``a1`` beside the model's ``a1``, a sub-agent's
``a1``), the :attr:`~ApprovalRequest.text` a human is shown (the parameters
as JSON, secrets masked as in every event) and its
:attr:`~ApprovalRequest.digest`. An answer from a front end names the token
and the digest of the text it showed; :func:`approval_digest` is the one
way to compute it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ..exceptions import CortexError
from ..redaction import Redactor
from ..runtime.ports import ApprovalRequest, Approver, ExecutionContext
from ..runtime.run_events import ApprovalDecided, ApprovalRequested, scope_prefix, scoped_emit

__all__ = ["ApprovalRequest", "ApproveAll", "approval_digest", "approval_text"]


def approval_text(parameters: dict[str, Any]) -> str:
    """What a human is shown of a request: its parameters as indented JSON.

    JSON escapes newlines, tabs and the other C0 controls inside strings;
    the view makes the rest visible (long runs of spaces, bidi and
    zero-width characters).
    """
    return json.dumps(parameters, ensure_ascii=False, indent=1, default=str)


def approval_digest(text: str) -> str:
    """``sha256:`` and the hex SHA-256 of ``text`` (UTF-8; lone surrogates kept)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ApproveAll:
    """Approves every call (``cortex-kernel run --yes``)."""

    by = "--yes"

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Always ``True``."""
        return True


async def ask_approval(
    context: ExecutionContext,
    action_id: str,
    name: str,
    kind: str,
    arguments: dict[str, Any],
    *,
    error: type[CortexError],
    what: str,
    review: Callable[[dict[str, Any]], tuple[str, list[str]]] | None = None,
) -> None:
    """Ask the context's approver about one call; return when it may run.

    Parameters
    ----------
    context
        The run's context: its configuration's ``approver``, ``emit`` and ``clock``.
    action_id
        The action's id in its own run (the scope of a running workflow is added).
    name, kind
        What runs (``count``, ``db.delete``) and its kind (``command``, ``relic``).
    arguments
        The validated parameters the call gets.
    error
        Raised when nobody can approve here or the call is denied.
    what
        How messages name the call (``tool 'count'``, ``relic operation 'db.delete'``).
    review
        The tool's own text for a human, and its notes (the in-kernel
        ``python`` shows the whole code and the writes into user objects);
        ``None``: the parameters as JSON.

    Raises
    ------
    CortexError
        ``error``: no approver, or denied.
    """
    approver: Approver | None = context.config.approver
    if approver is None:
        raise error(
            f"{what} needs a human's approval (confirm: true) and nobody can "
            "approve here; a headless run approves every such call only with --yes"
        )
    # Shown as every event shows it: secrets masked (the call gets the real values).
    shown = Redactor().value({key: _plain(value) for key, value in arguments.items()})
    notes: list[str] = []
    if review is not None:
        text, notes = review(arguments)
    else:
        text = approval_text(shown)
    prefix = scope_prefix()
    emit = scoped_emit(context.emit)
    request = ApprovalRequest(
        f"{prefix}/{action_id}" if prefix else action_id,
        name,
        kind,
        shown,
        text=text,
        digest=approval_digest(text),
        notes=tuple(notes),
    )
    emit(
        ApprovalRequested(
            t=context.clock(),
            id=action_id,
            tool=name,
            kind="relic" if kind == "relic" else "tool",
            parameters=shown,
            token=request.token,
            text=text,
            digest=request.digest,
            notes=notes,
        )
    )
    approved = await approver(request)
    # An approver may name who took this one decision (the notebook's: a cell's grant).
    by_of = getattr(approver, "by_of", None)
    by = str(by_of(request)) if callable(by_of) else approver.by
    emit(
        ApprovalDecided(
            t=context.clock(),
            id=action_id,
            tool=name,
            approved=approved,
            by=by,
            token=request.token,
        )
    )
    if not approved:
        raise error(f"the user denied the call to {what}")


def _plain(value: Any) -> Any:
    """``value`` as JSON data (what the approver and the transcript show)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value

"""What :meth:`Session.run <cortex_kernel.runtime.session.Session.run>` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .grounding import GroundingReport
from .run_events import ActionChanges, AnyEvent, RunStatus, Usage

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """What a run returns.

    Attributes
    ----------
    run_id
        Unique id of the run (also the transcript's file name).
    status
        ``ok``, ``error``, ``cancelled`` or ``limit``.
    answer
        The final answer with its ``$var``s filled in.
    message
        Why the run ended when ``status`` is not ``ok``.
    usage
        Turns, tokens, cost and seconds.
    variables
        Every value bound in this run (output keys, action ids, ``set_variable``).
    transcript
        The JSONL transcript, when one was written.
    events
        Every event of the run, in order.
    unstopped
        Work the run started that was cancelled but could not be stopped (a
        sync tool's thread), as ``"ID (what)"``; its message names them too.
    grounding
        Which figures of ``answer`` the run's data backs
        (docs/runtime.md#grounded-answers); ``None`` when the run gave no
        final answer or the check was skipped.
    """

    run_id: str
    status: RunStatus
    answer: str
    message: str
    usage: Usage
    variables: dict[str, Any]
    transcript: Path | None
    events: list[AnyEvent] = field(default_factory=list)
    unstopped: list[str] = field(default_factory=list)
    grounding: GroundingReport | None = None

    @property
    def changes(self) -> list[dict[str, Any]]:
        """What each code run in the notebook's namespace changed, in the order they ran.

        One dict per run: its action ``id``, its ``code``, and
        :meth:`ChangeReport.to_dict <cortex_kernel.runtime.changes.ChangeReport.to_dict>`
        (``added``, ``rebound``, ``deleted``, ``changed``, ``summary``…).
        """
        return [
            {"id": event.id, "code": event.code, "in_place": event.in_place, **event.changes}
            for event in self.events
            if isinstance(event, ActionChanges)
        ]

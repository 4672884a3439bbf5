"""The ``python`` built-in run in the notebook's own namespace (``in_kernel``).

Each call of :class:`NotebookPython`:

- shows a human the whole code before it runs, with the writes into the
  user's objects read from it (:func:`~cortex_kernel.runtime.code_writes.risky_writes`),
  through :meth:`NotebookPython.review` (the tool executor asks the
  session's approver with that text);
- snapshots the namespace (:func:`~cortex_kernel.runtime.changes.snapshot`),
  runs the code in a worker thread (the kernel's loop keeps serving the
  view; an interrupt abandons the thread, as for any sync tool), and diffs
  the namespace afterwards (:func:`~cortex_kernel.runtime.changes.diff`);
- keeps matplotlib figures the code opened as PNG (and closes them, so
  the inline backend does not show them twice);
- keeps undo copies up to ``$CORTEX_UNDO_MB`` megabytes a run (read when
  the tool is built; unset: :class:`~cortex_kernel.runtime.fingerprints.Budget`'s
  100 MB);
- records the run in the namespace's :class:`Ledger` (``%undo`` and
  ``%agent_code`` read it) and returns text for the model: the code's
  stdout, its last expression's value, and what it changed.

The executors never import IPython: whoever owns the namespace (the
notebook's runner) sets :attr:`Ledger.publish` to show each figure; the
views learn the code and its changes from an ``action_changes`` event of
the action.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import io
import os
import re
import sys
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..exceptions import ConfigError, ToolError
from ..runtime.changes import (
    MB,
    Budget,
    ChangeReport,
    UndoResult,
    code_names,
    diff,
    risky_writes,
    snapshot,
)
from ..runtime.changes import undo as undo_report

__all__ = ["Ledger", "NotebookPython", "PythonRun", "figure_data_uri", "ledger_for"]

# C0 controls but newline and tab, DEL and the C1 block: made visible in the
# approval text so the box shows every character that runs.
_HIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_VALUE_LIMIT = 2000
UNDO_MB_ENV = "CORTEX_UNDO_MB"


@dataclass
class PythonRun:
    """One approved code run in the namespace.

    Attributes
    ----------
    code
        The code that ran.
    report
        What it changed (``None`` when it did not get to run: a syntax error).
    figures
        The PNGs of the matplotlib figures it opened.
    error
        The exception's one-line text when the code raised.
    """

    code: str
    report: ChangeReport | None
    figures: list[bytes] = field(default_factory=list)
    error: str | None = None


@dataclass
class Ledger:
    """The code runs made in one namespace, grouped by agent run (newest last).

    Attributes
    ----------
    groups
        Each agent run's code runs, in the order they finished.
    publish
        Called with each figure's PNG bytes when a run ends (the notebook
        shows it as ``image/png`` display data); ``None``: not shown.
    """

    groups: list[list[PythonRun]] = field(default_factory=lambda: [[]])
    publish: Callable[[bytes], None] | None = None

    def begin(self) -> None:
        """Start the group of a new agent run (an empty last group is reused)."""
        if self.groups[-1]:
            self.groups.append([])

    @property
    def last(self) -> list[PythonRun]:
        """The runs of the latest agent run that ran code."""
        for group in reversed(self.groups):
            if group:
                return group
        return []

    def undo(self, namespace: MutableMapping[str, Any]) -> UndoResult:
        """Undo the latest agent run's code runs, latest first, and forget them.

        Returns
        -------
        UndoResult
            What was put back, all runs' together.
        """
        total = UndoResult()
        group = self.last
        for run in reversed(group):
            if run.report is None:
                continue
            done = undo_report(run.report, namespace)
            total.restored.extend(n for n in done.restored if n not in total.restored)
            total.removed.extend(n for n in done.removed if n not in total.removed)
            total.not_restored.update(done.not_restored)
        if group:
            self.groups.remove(group)
            if not self.groups:
                self.groups.append([])
        return total


_LEDGERS: dict[int, tuple[MutableMapping[str, Any], Ledger]] = {}


def ledger_for(namespace: MutableMapping[str, Any]) -> Ledger:
    """The :class:`Ledger` of ``namespace`` (one per namespace, made on first use)."""
    held = _LEDGERS.get(id(namespace))
    if held is None or held[0] is not namespace:
        held = _LEDGERS[id(namespace)] = (namespace, Ledger())
    return held[1]


def undo_budget() -> Budget:
    """The snapshot :class:`Budget`, its ``undo_bytes`` from ``$CORTEX_UNDO_MB`` if set.

    Raises
    ------
    ConfigError
        The variable is not a number of megabytes ``>= 0``.
    """
    raw = os.environ.get(UNDO_MB_ENV, "").strip()
    if not raw:
        return Budget()
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if not 0 <= megabytes < float("inf"):  # also NaN
        raise ConfigError(f"${UNDO_MB_ENV} must be a number of megabytes >= 0, not {raw!r}")
    return Budget(undo_bytes=int(megabytes * MB))


def _visible(code: str) -> str:
    return _HIDDEN.sub(lambda m: f"\\x{ord(m.group()):02x}", code)


class NotebookPython:
    """The in-kernel ``python`` tool's function (see the module docstring).

    Parameters
    ----------
    namespace
        The notebook's ``user_ns``.
    """

    def __init__(self, namespace: MutableMapping[str, Any]) -> None:
        self.namespace = namespace
        self.ledger = ledger_for(namespace)
        self.budget = undo_budget()

    def review(self, arguments: dict[str, Any]) -> tuple[str, list[str]]:
        """What a human approves: the whole code, then what it writes into.

        Returns
        -------
        tuple of (str, list of str)
            The text of the approval box, and one note per write into an
            existing object of the namespace (empty when none is seen).
        """
        code = str(arguments.get("code", ""))
        writes = risky_writes(code, self.namespace)
        notes = [write.describe() for write in writes]
        text = f"Run in the notebook's namespace:\n\n{_visible(code)}"
        if writes:
            names = ", ".join(dict.fromkeys(f"{w.name} ({w.kind})" for w in writes))
            text += f"\n\nThis code writes into: {names}\n" + "\n".join(
                f"  {note}" for note in notes
            )
        return text, notes

    async def __call__(self, code: str) -> str:
        """Run ``code`` in the namespace; the text the model reads back."""
        try:
            tree = ast.parse(code, mode="exec")
        except SyntaxError as exc:
            raise SyntaxError(f"the code does not parse: {exc}") from None
        before = snapshot(self.namespace, code_names(code), budget=self.budget)
        pyplot = sys.modules.get("matplotlib.pyplot")
        figures_before = set(pyplot.get_fignums()) if pyplot is not None else set()
        out = io.StringIO()
        outcome: dict[str, Any] = {}

        def work() -> None:
            last = tree.body[-1] if tree.body else None
            if isinstance(last, ast.Expr):
                tree.body.pop()
            else:
                last = None
            scope: Any = self.namespace  # a dict in IPython: exec's globals
            with contextlib.redirect_stdout(out):
                exec(compile(tree, "<agent>", "exec"), scope)
                if last is not None:
                    outcome["value"] = eval(
                        compile(ast.Expression(last.value), "<agent>", "eval"), scope
                    )

        error: BaseException | None = None
        try:
            await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except Exception as exc:  # the code's own error: reported after the diff
            error = exc
        run = PythonRun(code, diff(before, self.namespace), self._figures(figures_before))
        if error is not None:
            run.error = f"{type(error).__name__}: {error}"
        self.ledger.groups[-1].append(run)
        self._tell(run)
        if error is not None:
            changes = run.report.summary() if run.report is not None else ""
            # One error type for all: some exceptions' constructors take other arguments.
            raise ToolError(f"{run.error}\n[notebook changes: {changes}]") from error
        return self._text(out.getvalue(), outcome, run)

    def _tell(self, run: PythonRun) -> None:
        from ..runtime.run_events import ActionChanges
        from .tool import running_call

        if self.ledger.publish is not None:
            for figure in run.figures:
                self.ledger.publish(figure)
        call = running_call()
        if call is None or run.report is None:
            return
        action_id, emit, clock = call
        emit(
            ActionChanges(
                t=clock(),
                id=action_id,
                code=run.code,
                summary=run.report.summary(),
                changes=run.report.to_dict(),
                in_place=run.report.changed_in_place,
                figures=len(run.figures),
            )
        )

    @staticmethod
    def _figures(before: set[int]) -> list[bytes]:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return []
        shown = []
        for number in sorted(set(pyplot.get_fignums()) - before):
            figure = pyplot.figure(number)
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", bbox_inches="tight")
            shown.append(buffer.getvalue())
            # Shown once, by us: the inline backend would show it again after the cell.
            pyplot.close(figure)
        return shown

    @staticmethod
    def _text(stdout: str, outcome: dict[str, Any], run: PythonRun) -> str:
        parts = [stdout.rstrip("\n")] if stdout.strip() else []
        if outcome.get("value") is not None:
            shown = repr(outcome["value"])
            if len(shown) > _VALUE_LIMIT:
                shown = shown[: _VALUE_LIMIT - 1] + "…"
            parts.append(shown)
        if run.figures:
            parts.append(f"[{len(run.figures)} figure(s) shown in the notebook]")
        if run.report is not None:
            parts.append(f"[notebook changes: {run.report.summary()}]")
        return "\n".join(parts)


def figure_data_uri(png: bytes) -> str:
    """``data:image/png;base64,…`` of a figure the kernel made (never of model text)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

"""The ``python`` built-in run in the notebook's own namespace (``in_kernel``).

Each call of :class:`NotebookPython`:

- shows a human the whole code before it runs, with the writes into the
  user's objects read from it (:func:`~cortex_kernel.runtime.code_writes.risky_writes`),
  through :meth:`NotebookPython.review` (the tool executor asks the
  session's approver with that text);
- leaves out a top-level line that loads a notebook DataFrame from a file
  that is not there (``sales = pd.read_csv("sales.csv")`` for the ``sales``
  in memory), and says so in the result (:func:`_skip_missing_loads`);
- snapshots the namespace (:func:`~cortex_kernel.runtime.changes.snapshot`),
  runs the code in a worker thread (the kernel's loop keeps serving the
  view), and diffs the namespace afterwards
  (:func:`~cortex_kernel.runtime.changes.diff`);
- captures the code's ``print`` output for the model, each run its own: while
  agent code runs, ``sys.stdout`` routes by a context variable (as ipykernel
  routes threads' output), so two runs at once never mix their output and
  the kernel's own output is never taken;
- stops for real when the run is interrupted: ``KeyboardInterrupt`` is raised
  in the code's thread, and what the code changed until then is kept for
  ``%undo``. Code blocked outside Python (a C call, I/O) cannot be
  interrupted until that call returns: if it has not stopped after
  :data:`INTERRUPT_GRACE` seconds the run's report says it still runs
  (``RunResult.unstopped``) and may still change the notebook;
- keeps matplotlib figures the code opened as PNG (and closes them, so
  the inline backend does not show them twice);
- keeps undo copies up to ``$CORTEX_UNDO_MB`` megabytes a run (read when
  the tool is built; unset: :class:`~cortex_kernel.runtime.fingerprints.Budget`'s
  100 MB);
- records the run in the namespace's :class:`Ledger` (``%undo`` and
  ``%agent_code`` read it) and returns text for the model: the code's
  stdout, its last expression's value, and what it changed. When the code
  ends in an expression or an assignment to a name, that value is the
  result an ``output_key`` binds (a :class:`~cortex_kernel.runtime.results.Shown`
  whose text the model reads).

The executors never import IPython: whoever owns the namespace (the
notebook's runner) sets :attr:`Ledger.publish` to show each figure; the
views learn the code and its changes from an ``action_changes`` event of
the action.
"""

from __future__ import annotations

import ast
import base64
import ctypes
import io
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, TextIO

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
from ..runtime.code_fixes import failing_line_note
from ..runtime.results import Shown

__all__ = ["NotebookPython", "ledger_for"]

#: Seconds an interrupted run waits for its code to stop before saying it still runs.
INTERRUPT_GRACE = 2.0

# C0 controls but newline and tab, DEL and the C1 block: made visible in the
# approval text so the box shows every character that runs.
_HIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_VALUE_LIMIT = 2000
#: What the model reads back when the code printed nothing and ended on a
#: statement: a bare "ok" let a small model answer with a guess.
NOTHING_SHOWN = "(nothing printed and no value: to see one, end the code with an expression)"
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


# The running code's own output buffer (set in its worker thread: each run sees its own).
_CAPTURE: ContextVar[io.StringIO | None] = ContextVar("cortex_python_stdout", default=None)


class _RoutedStdout:
    """``sys.stdout`` while agent code runs: a run's writes go to its buffer, the rest on.

    Everything but writing is the replaced stream's (``fileno``, ``encoding``,
    ipykernel's ``set_parent``…).
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def _target(self) -> Any:
        captured = _CAPTURE.get()
        return self.stream if captured is None else captured

    def write(self, text: str) -> int:
        written: int = self._target().write(text)
        return written

    def writelines(self, lines: Any) -> None:
        self._target().writelines(lines)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _Routing:
    """Installs :class:`_RoutedStdout` while at least one code run is inside it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.router: _RoutedStdout | None = None

    def enter(self) -> None:
        with self.lock:
            if self.router is None or sys.stdout is not self.router:
                # First run, or someone replaced stdout since (%%capture): route over theirs.
                self.router = _RoutedStdout(sys.stdout)
                sys.stdout = self.router
            self.users += 1

    def leave(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0 and self.router is not None:
                if sys.stdout is self.router:
                    sys.stdout = self.router.stream
                self.router = None


_ROUTING = _Routing()


def _checkpoint() -> None:
    """A Python call: a pending asynchronous exception is raised here at the latest."""


class _Interruptible:
    """Runs a function in the current thread so another thread can interrupt it.

    :meth:`interrupt` raises ``KeyboardInterrupt`` in the code's thread, only
    while the function runs (never into the worker pool's own code).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ident: int | None = None
        self.armed = False
        self.interrupted = False
        self.done = threading.Event()

    def run(self, work: Callable[[], None]) -> None:
        try:
            try:
                with self.lock:
                    if self.interrupted:
                        return  # interrupted before it began: it never runs
                    self.ident, self.armed = threading.get_ident(), True
                work()
            finally:
                with self.lock:
                    self.armed = False
                _checkpoint()
        except KeyboardInterrupt:
            if not self.interrupted:
                raise
        finally:
            self.done.set()

    def interrupt(self) -> bool:
        """Stop the function (or keep it from starting); ``True`` while it still runs."""
        with self.lock:
            self.interrupted = True
            if not self.armed or self.ident is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.ident), ctypes.py_object(KeyboardInterrupt)
            )
            return True


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

    async def __call__(self, code: str) -> str | Shown:
        """Run ``code`` in the namespace; the text the model reads back, with the value if any."""
        try:
            tree = ast.parse(code, mode="exec")
        except SyntaxError as exc:
            where = _line_note(code, exc.lineno)
            raise SyntaxError(f"the code does not parse: {exc}{where}") from None
        code, skipped = _skip_missing_loads(code, tree, self.namespace)
        if skipped:
            tree = ast.parse(code, mode="exec")
        note = "".join(f"{line}\n" for line in skipped)
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
            assigned = _assigned_name(tree.body[-1]) if tree.body and last is None else None
            scope: Any = self.namespace  # a dict in IPython: exec's globals
            _CAPTURE.set(out)  # this thread's context only: the run's own output
            _ROUTING.enter()
            try:
                exec(compile(tree, "<agent>", "exec"), scope)
                if last is not None:
                    outcome["value"] = eval(
                        compile(ast.Expression(last.value), "<agent>", "eval"), scope
                    )
                elif assigned is not None and assigned in scope:
                    outcome["value"], outcome["name"] = scope[assigned], assigned
            finally:
                _ROUTING.leave()

        error: BaseException | None = None
        running = _Interruptible()
        try:
            await anyio.to_thread.run_sync(running.run, work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._stop(running, code, before, figures_before)
            raise
        except Exception as exc:  # the code's own error: reported after the diff
            error = exc
        run = PythonRun(code, diff(before, self.namespace), self._figures(figures_before))
        if error is not None:
            run.error = f"{type(error).__name__}: {error}"
        self.ledger.groups[-1].append(run)
        self._tell(run)
        if error is not None:
            changes = run.report.summary() if run.report is not None else ""
            hint = _file_hint(error, self.namespace) or _column_hint(error, self.namespace)
            hint += _line_note(code, _agent_line(error))
            # One error type for all: some exceptions' constructors take other arguments.
            raise ToolError(f"{note}{run.error}{hint}\n[notebook changes: {changes}]") from error
        text = note + self._text(out.getvalue(), outcome, run)
        value = outcome.get("value")
        return text if value is None else Shown(value, text)

    async def _stop(
        self, running: _Interruptible, code: str, before: Any, figures_before: set[int]
    ) -> None:
        """Interrupt the code of a cancelled call; keep what it changed, or say it runs on."""
        from .tool import note_unstopped

        if not running.interrupt():
            if running.ident is None:
                return  # it never started: nothing ran, nothing changed
        elif not await anyio.to_thread.run_sync(running.done.wait, INTERRUPT_GRACE):
            note_unstopped(
                f"its code is blocked outside Python (a C call, I/O) and still runs after "
                f"{INTERRUPT_GRACE:g} s; it stops when that call returns and may change "
                "notebook variables until then"
            )
            return
        run = PythonRun(code, diff(before, self.namespace))
        run.figures = self._figures(figures_before)
        run.error = "KeyboardInterrupt: interrupted"
        self.ledger.groups[-1].append(run)  # %undo puts back what it did until then
        self._tell(run)

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
                pngs=tuple(run.figures),
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
            if "name" in outcome:
                shown = f"{outcome['name']} = {shown}"
            shape = getattr(outcome["value"], "shape", None)
            if isinstance(shape, tuple) and len(shape) > 1:
                # A frame's repr lists a few rows: the model counted those (10
                # of 87) where its shape says how many there are.
                shown = f"({type(outcome['value']).__name__} of shape {shape})\n{shown}"
            parts.append(shown)
        if not parts and not run.figures:
            parts.append(NOTHING_SHOWN)
        if run.figures:
            parts.append(f"[{len(run.figures)} figure(s) shown in the notebook]")
        if run.report is not None:
            parts.append(f"[notebook changes: {run.report.summary()}]")
        return "\n".join(parts)


def _agent_line(error: BaseException) -> int | None:
    """The line of the agent's code ``error`` was raised on (its innermost frame there)."""
    line = None
    trace = error.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == "<agent>":
            line = trace.tb_lineno
        trace = trace.tb_next
    return line


def _line_note(code: str, number: int | None) -> str:
    """The note naming the line the code failed on: a fix is asked for that line."""
    lines = code.splitlines()
    if number is None or not 0 < number <= len(lines) or not lines[number - 1].strip():
        return ""
    return failing_line_note(number, lines[number - 1])


def _assigned_name(statement: ast.stmt) -> str | None:
    """The one name a last statement such as ``mean_age = …`` or ``n += 1`` binds.

    Its value is shown as the run's value: code ending in an assignment
    otherwise shows nothing, and the local model then guessed the figure
    it had just computed.
    """
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target: ast.expr = statement.targets[0]
    elif isinstance(statement, ast.AugAssign | ast.AnnAssign) and statement.value is not None:
        target = statement.target
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


#: pandas' readers of a file, by attribute name (``pd.read_csv(…)``).
_READERS = re.compile(r"read_(csv|json|parquet|excel|table|pickle|feather|fwf|orc)$")


def _skip_missing_loads(
    code: str, tree: ast.Module, namespace: Mapping[str, Any]
) -> tuple[str, list[str]]:
    """``code`` without the lines that load a notebook DataFrame from a file that is not there.

    Small models open their code with ``sales = pd.read_csv("sales.csv")``
    for a DataFrame ``sales`` already in memory, and after the
    ``FileNotFoundError`` answer with the code instead of running it; or
    ``customers = pd.read_csv('path_to_customers.csv')``, a placeholder. Such
    a top-level line — a pandas reader of a literal path that does not
    exist, bound to the name of a DataFrame of the notebook — is left out,
    and said so (one line each, for the model and for the code the ledger
    keeps): it could only fail. A file that exists is read as written.

    Returns
    -------
    tuple of (str, list of str)
        The code to run, and one note per line left out.
    """
    lines = code.splitlines(keepends=True)
    drop: set[int] = set()
    notes: list[str] = []
    for statement in tree.body:
        target = _missing_load(statement, namespace)
        if target is None or statement.end_lineno is None:
            continue
        span = range(statement.lineno - 1, statement.end_lineno)
        text = " ".join("".join(lines[i] for i in span).split())
        drop.update(span)
        notes.append(
            f"[not run: `{text}` (no such file; `{target}` is the DataFrame already "
            "in the notebook's memory, used as it is)]"
        )
    if not drop:
        return code, []
    return "".join(line for i, line in enumerate(lines) if i not in drop), notes


def _missing_load(statement: ast.stmt, namespace: Mapping[str, Any]) -> str | None:
    """The name ``statement`` loads from a missing file, if it is such a load."""
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(target := statement.targets[0], ast.Name)
        and isinstance(call := statement.value, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and _READERS.match(call.func.attr)
        and call.args
        and isinstance(path := call.args[0], ast.Constant)
        and isinstance(path.value, str)
    ):
        return None
    name = target.id
    if os.path.exists(path.value):
        return None
    return name if _columns(namespace.get(name)) is not None else None


def _columns(value: Any) -> Any:
    """``value.columns`` (a DataFrame's), or ``None``: also for a user object that raises."""
    try:
        return getattr(value, "columns", None)
    except Exception:
        return None


def _file_hint(error: BaseException, namespace: Mapping[str, Any]) -> str:
    """Say so when code reads from disk what the notebook already holds.

    Small models write ``pd.read_csv("sales.csv")`` for a DataFrame ``sales``
    that is in memory; the plain ``FileNotFoundError`` led them to guess.
    """
    if not isinstance(error, FileNotFoundError) or not error.filename:
        return ""
    path = PurePath(str(error.filename))
    if path.stem.startswith("_"):
        return ""
    held = next((name for name in (path.stem, path.name) if name in namespace), None)
    if held is None:
        return ""
    return (
        f" (`{held}` is already a variable in the notebook's memory: use it by name "
        "instead of reading a file)"
    )


def _column_owners(key: str, namespace: Mapping[str, Any]) -> list[str]:
    """The notebook's variables whose ``columns`` hold ``key`` (DataFrames, by name)."""
    owners = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or isinstance(value, type):
            continue
        try:
            if (columns := _columns(value)) is not None and key in columns:
                owners.append(name)
        except Exception:  # a user object with odd columns: not an owner
            continue
    return owners


def _column_hint(error: BaseException, namespace: Mapping[str, Any]) -> str:
    """Name the frames that do have a missing column, and how to write it.

    A small model asked the wrong frame (``sales['plan']`` for a column of
    ``customers``), or wrote a column as a bare name (``customers[churned]``);
    told only which frame has it, it repeated the same code.
    """
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        key, what = error.args[0], f"the column {error.args[0]!r} is in"
    elif isinstance(error, NameError) and isinstance(error.name, str):
        key, what = error.name, f"`{error.name}` is not a variable but a column of"
    else:
        return ""
    owners = _column_owners(key, namespace)[:3]
    if not owners:
        return ""
    frames = ", ".join(f"`{name}`" for name in owners)
    return f" ({what} {frames}: write {owners[0]}[{key!r}])"


def figure_data_uri(png: bytes) -> str:
    """``data:image/png;base64,…`` of a figure the kernel made (never of model text)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

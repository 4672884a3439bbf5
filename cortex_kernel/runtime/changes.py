"""What a code run changed in the notebook's namespace, and undoing it.

A code executor calls :func:`snapshot` before it runs code in the notebook's
namespace and :func:`diff` after; the :class:`ChangeReport` says which names
the run added, rebound or deleted, and which objects it changed in place
(for a DataFrame: which columns and rows, its shape before and after), with
what was not checked, in plain text for the model and the views
(:meth:`ChangeReport.summary`) and as JSON-safe data for ``_run`` and events
(:meth:`ChangeReport.to_dict`). :func:`undo` puts back what the run changed;
:func:`risky_writes` reads, before a run, where code assigns into an existing
object (for a permission mode to ask first)::

    before = snapshot(user_ns, code_names(code))
    exec(code, user_ns)
    report = diff(before, user_ns)
    report.summary()   # "changed in place: df (column 'total' added; shape (200, 4) → (200, 5))"
    undo(report, user_ns)

Which objects
-------------
Every name not starting with ``_`` (nor IPython's ``In``, ``Out``, ``exit``,
``quit``, ``get_ipython``) is watched for being added, rebound or deleted.
Content is fingerprinted (:mod:`.fingerprints`, within a :class:`Budget`)
for every DataFrame, Series, ndarray, list, dict and set bound to such a
name, and for any other object the code names (a model whose ``fit`` sets
attributes), modules, functions, classes and immutable values aside. An
object is followed by identity: a change made through any of its names (an
alias) is one change, reported under all of them.

Undo
----
Before the run, copies are kept of the watched objects, the ones the code
names first, then the smaller ones first, up to ``Budget.undo_bytes`` in all
(``copy(deep=True)`` for pandas and numpy, :func:`copy.deepcopy` for the
rest, the other watched objects inside them kept as themselves, since they
have their own copies). An object past that has no copy, and the report says
that undo is not available for it and why. The snapshot also keeps the
values the names had, so a rebound or deleted name can be put back: the
report holds them until it is dropped.

An object changed in place is restored in place, so every alias sees the
original again (``a = df`` before the run: after undo ``a is df`` still, and
both show the old contents). Where that is not possible (an array whose
shape changed, an object with ``__slots__``), the names bound to it are
rebound to the copy, and the report says that other references still see
the changed object.
"""

from __future__ import annotations

import copy as copying
import time
import types
from collections.abc import Collection, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .code_writes import code_names, risky_writes
from .fingerprints import (
    MB,
    Budget,
    Clock,
    Fingerprint,
    TableFingerprint,
    compare,
    fingerprint,
    same_content,
    size_of,
    tracked_kind,
)

__all__ = [
    "MB",
    "Budget",
    "ChangeReport",
    "UndoResult",
    "code_names",
    "diff",
    "risky_writes",
    "snapshot",
    "undo",
]

#: IPython's own names in a notebook's namespace (``In`` grows every cell).
IGNORED_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

# Values never fingerprinted: they are not data, or cannot change in place.
_NOT_TRACKED = (
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    type,
    int,
    float,
    complex,
    str,
    bytes,
    bool,
    type(None),
    tuple,
    frozenset,
    range,
    slice,
)

_MISSING = object()


@dataclass(eq=False)
class Snapshot:
    """The namespace's state before (or after) a run: fingerprints, and copies for undo.

    Attributes
    ----------
    bindings
        Every watched name and its value (the values themselves: a name the
        run rebinds or deletes can be put back).
    objects
        The fingerprinted objects by ``id``, in the order they were hashed.
    names
        The names bound to each fingerprinted object.
    fingerprints
        Each object's :class:`~.fingerprints.Fingerprint`, by ``id``.
    copies
        The undo copies, by ``id``.
    no_undo
        Why an object has no copy, by ``id``.
    budget
        The bounds the snapshot kept to.
    code_names
        The names the code mentions.
    ignore
        The names not watched (besides those starting with ``_``).
    seconds
        How long taking it took.
    copied_bytes
        About how many bytes the copies take.
    """

    bindings: dict[str, Any]
    objects: dict[int, Any]
    names: dict[int, list[str]]
    fingerprints: dict[int, Fingerprint]
    copies: dict[int, Any]
    no_undo: dict[int, str]
    budget: Budget
    code_names: frozenset[str]
    ignore: frozenset[str]
    seconds: float = 0.0
    copied_bytes: int = 0


def _watched(name: str, ignore: Collection[str]) -> bool:
    return not name.startswith("_") and name not in ignore


def _trackable(value: Any, named_in_code: bool) -> bool:
    if tracked_kind(value) is not None:
        return True
    if not named_in_code or isinstance(value, _NOT_TRACKED):
        return False
    # numpy scalars and the like are immutable too.
    return type(value).__module__.split(".")[0] != "numpy"


def snapshot(
    namespace: MutableMapping[str, Any],
    names_in_code: Iterable[str] = (),
    *,
    budget: Budget | None = None,
    ignore: Collection[str] = IGNORED_NAMES,
) -> Snapshot:
    """Fingerprint the namespace before a run, and keep copies for undo.

    Parameters
    ----------
    namespace
        The notebook's namespace (IPython's ``user_ns``).
    names_in_code
        The names the code mentions (:func:`code_names`): their objects are
        fingerprinted whatever their type, and first.
    budget
        Time, memory and undo bounds (:class:`Budget`'s defaults if ``None``).
    ignore
        Names never watched, besides those starting with ``_``.

    Returns
    -------
    Snapshot
        To pass to :func:`diff` after the run.
    """
    budget = budget or Budget()
    start = time.perf_counter()
    code = frozenset(names_in_code)
    ignored = frozenset(ignore)
    bindings = {name: value for name, value in namespace.items() if _watched(name, ignored)}
    candidates: dict[int, Any] = {}
    names: dict[int, list[str]] = {}
    for name, value in bindings.items():
        if _trackable(value, name in code):
            candidates.setdefault(id(value), value)
            names.setdefault(id(value), []).append(name)

    def priority(item: tuple[int, Any]) -> tuple[bool, int]:
        key, value = item
        named = any(name in code for name in names[key])
        return (not named, _rough_size(value))

    objects = dict(sorted(candidates.items(), key=priority))
    clock = Clock(budget)
    prints = {key: _fingerprint(value, budget, clock) for key, value in objects.items()}
    shot = Snapshot(bindings, objects, names, prints, {}, {}, budget, code, ignored)
    _keep_copies(shot)
    shot.seconds = time.perf_counter() - start
    return shot


def _fingerprint(
    value: Any, budget: Budget, clock: Clock, row_keys: Iterable[Any] | None = None
) -> Fingerprint:
    """A fingerprint, or one that says why there is none: a snapshot never fails a run."""
    try:
        return fingerprint(value, budget, clock, row_keys=row_keys)
    except Exception as error:  # a user type's __len__, __iter__ or memory_usage may raise
        why = f"content not checked: fingerprinting failed ({type(error).__name__}: {error})"
        return Fingerprint(
            kind=tracked_kind(value) or "object",
            type_name=type(value).__name__,
            nbytes=0,
            unchecked=why,
        )


def _rough_size(value: Any) -> int:
    """A size to order by, without walking the object."""
    kind = tracked_kind(value)
    if kind in ("DataFrame", "Series", "ndarray"):
        return size_of(value, depth=0)
    try:
        return len(value) * 64
    except Exception:  # no len(), or a broken one
        return 0


def _keep_copies(shot: Snapshot) -> None:
    """Copies of the watched objects, in priority order, up to the undo budget."""
    limit = shot.budget.undo_bytes
    everything = frozenset(shot.objects)
    for key, value in shot.objects.items():
        others = everything - {key}
        try:
            size = size_of(value, others)
        except Exception as error:  # a user type's __len__ or __iter__ may raise
            why = f"{type(error).__name__}: {error}"
            shot.no_undo[key] = f"undo not available: its size is unknown ({why})"
            continue
        left = limit - shot.copied_bytes
        if size > left:
            why = f"it takes about {_mb(size)}, past the undo limit of {_mb(limit)}"
            if shot.copied_bytes:
                why = f"it takes about {_mb(size)}, more than the undo limit's {_mb(left)} left"
            shot.no_undo[key] = f"undo not available: no copy was kept ({why})"
            continue
        try:
            shot.copies[key] = _copy(value, {k: shot.objects[k] for k in others})
        except Exception as error:  # any object's __deepcopy__ may refuse
            reason = f"{type(error).__name__}: {error}"
            shot.no_undo[key] = f"undo not available: it could not be copied ({reason})"
            continue
        shot.copied_bytes += size


def _copy(value: Any, others: dict[int, Any]) -> Any:
    kind = tracked_kind(value)
    if kind in ("DataFrame", "Series"):
        return value.copy(deep=True)
    if kind == "ndarray":
        return value.copy()
    if kind in ("list", "dict", "set") and _flat(value):
        return copying.copy(value)  # immutable items: a shallow copy is whole, and 5x faster
    # The other watched objects inside stay themselves: they have their own
    # copies (and restoring them in place keeps the user's references).
    return copying.deepcopy(value, dict(others))


_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes})


def _flat(value: Any) -> bool:
    """Whether a container holds only immutable scalars (a dict: as values)."""
    items = value.values() if isinstance(value, dict) else value
    return all(type(item) in _ATOMIC for item in items)


def _mb(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):,.0f} MB" if nbytes >= 10 << 20 else f"{nbytes / (1 << 20):.1f} MB"


def _after(before: Snapshot, namespace: MutableMapping[str, Any]) -> Snapshot:
    """The same objects fingerprinted again (tables' rows over the same columns); no copies."""
    start = time.perf_counter()
    bindings = {name: value for name, value in namespace.items() if _watched(name, before.ignore)}
    clock = Clock(before.budget)
    prints: dict[int, Fingerprint] = {}
    for key, value in before.objects.items():
        old = before.fingerprints[key]
        keys = old.keys if isinstance(old, TableFingerprint) else None
        prints[key] = _fingerprint(value, before.budget, clock, keys)
    shot = Snapshot(
        bindings,
        before.objects,
        {},
        prints,
        {},
        {},
        before.budget,
        before.code_names,
        before.ignore,
    )
    shot.seconds = time.perf_counter() - start
    return shot


@dataclass
class ObjectChange:
    """One object the run changed in place.

    Attributes
    ----------
    names
        The names bound to it before the run (aliases: more than one).
    kind
        ``"DataFrame"``, ``"Series"``, ``"ndarray"``, ``"list"``, ``"dict"``,
        ``"set"`` or ``"object"``.
    type_name
        Its type.
    changes
        Short phrases: ``"column 'total' added"``, ``"shape (200, 4) → (200, 5)"``.
    data
        The same as JSON-safe data (``columns_added``, ``rows_removed``…).
    undo
        Whether a copy from before the run was kept.
    undo_note
        Why not, when not.
    """

    names: list[str]
    kind: str
    type_name: str
    changes: list[str]
    data: dict[str, Any]
    undo: bool
    undo_note: str | None
    object_id: int = field(repr=False, default=0)

    @property
    def label(self) -> str:
        """Its names, ``df = alias`` when there are several."""
        return " = ".join(self.names)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe."""
        return {
            "names": list(self.names),
            "kind": self.kind,
            "type": self.type_name,
            "changes": list(self.changes),
            **self.data,
            "undo": self.undo,
            "undo_note": self.undo_note,
        }


@dataclass(eq=False)
class ChangeReport:
    """What a run changed in the namespace (see :func:`diff`).

    Attributes
    ----------
    added
        Names the run bound that were not there before.
    rebound
        Names bound to another object after the run.
    deleted
        Names the run deleted.
    changed
        The objects it changed in place.
    not_checked
        What was not checked, and why (``"big: content sampled: …"``).
    seconds
        The time taken by the snapshots and the comparison.
    before, after
        The snapshots (``before`` holds the copies and old values for undo).
    undone
        Whether :func:`undo` has nothing left to do.
    """

    added: list[str]
    rebound: list[str]
    deleted: list[str]
    changed: list[ObjectChange]
    not_checked: list[str]
    seconds: float
    before: Snapshot = field(repr=False)
    after: Snapshot = field(repr=False)
    # What undo has still to do: ("object", id) or ("rebound"|"deleted"|"added", name).
    pending: set[tuple[str, Any]] = field(default_factory=set, repr=False)
    # Objects undo could not restore in place: their names were rebound to these copies.
    replaced: dict[int, Any] = field(default_factory=dict, repr=False)
    undone: bool = False

    @property
    def empty(self) -> bool:
        """Whether the run changed nothing that was seen."""
        return not (self.added or self.rebound or self.deleted or self.changed)

    @property
    def changed_in_place(self) -> bool:
        """Whether an existing object was changed in place: a view marks the run."""
        return bool(self.changed)

    @property
    def undo_unavailable(self) -> list[str]:
        """``"big: undo not available: …"`` for each object changed without a copy."""
        return [f"{c.label}: {c.undo_note}" for c in self.changed if not c.undo and c.undo_note]

    def summary(self) -> str:
        """Short plain text for the model and the views.

        ``changed in place: df (column 'total' added; shape (200, 4) → (200, 5));
        rebound: x; added: result``, then what was not checked and where undo is
        not available, each in a sentence of its own.
        """
        parts = []
        if self.changed:
            listed = "; ".join(f"{c.label} ({'; '.join(c.changes)})" for c in self.changed)
            parts.append(f"changed in place: {listed}")
        for title, names in (
            ("rebound", self.rebound),
            ("added", self.added),
            ("deleted", self.deleted),
        ):
            if names:
                parts.append(f"{title}: {', '.join(names)}")
        text = "; ".join(parts) if parts else "no change to the notebook's variables seen"
        if self.not_checked:
            text += ". Not checked: " + "; ".join(self.not_checked)
        if self.undo_unavailable:
            text += ". " + "; ".join(self.undo_unavailable)
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, for ``_run`` and events."""
        return {
            "added": list(self.added),
            "rebound": list(self.rebound),
            "deleted": list(self.deleted),
            "changed": [change.to_dict() for change in self.changed],
            "not_checked": list(self.not_checked),
            "undo_unavailable": self.undo_unavailable,
            "summary": self.summary(),
        }


def diff(before: Snapshot, namespace: MutableMapping[str, Any]) -> ChangeReport:
    """What the run changed since ``before`` was taken.

    Parameters
    ----------
    before
        The :func:`snapshot` taken before the run.
    namespace
        The same namespace, after the run: the objects are fingerprinted
        again within the same budget, and compared.

    Returns
    -------
    ChangeReport
        It keeps ``before`` (its copies and the old values) for :func:`undo`.
    """
    start = time.perf_counter()
    after = _after(before, namespace)
    old, new = before.bindings, after.bindings
    added = [name for name in new if name not in old]
    deleted = [name for name in old if name not in new]
    rebound = [name for name in old if name in new and new[name] is not old[name]]
    changed: list[ObjectChange] = []
    not_checked: list[str] = []
    for key, value in before.objects.items():
        first, last = before.fingerprints[key], after.fingerprints[key]
        label = " = ".join(before.names[key])
        notes = dict.fromkeys(note for note in (first.unchecked, last.unchecked) if note)
        not_checked.extend(f"{label}: {note}" for note in notes)
        phrases, data = compare(first, last, value, before.copies.get(key))
        if phrases:
            changed.append(
                ObjectChange(
                    list(before.names[key]),
                    first.kind,
                    first.type_name,
                    phrases,
                    data,
                    key in before.copies,
                    before.no_undo.get(key),
                    key,
                )
            )
    # In the namespace's order, as the user reads their variables.
    order = {name: i for i, name in enumerate(old)}
    changed.sort(key=lambda change: min(order[name] for name in change.names))
    # The per-row hashes served their purpose: do not hold them as long as the report.
    for shot in (before, after):
        for print_ in shot.fingerprints.values():
            if isinstance(print_, TableFingerprint):
                print_.row_index = print_.row_hash = None
    seconds = before.seconds + (time.perf_counter() - start)
    report = ChangeReport(added, rebound, deleted, changed, not_checked, seconds, before, after)
    report.pending = {("object", change.object_id) for change in changed}
    for kind, names in (("rebound", rebound), ("deleted", deleted), ("added", added)):
        report.pending.update((kind, name) for name in names)
    return report


@dataclass
class UndoResult:
    """What :func:`undo` put back.

    Attributes
    ----------
    restored
        Names (and how, for objects changed in place) put back as they were.
    removed
        Names the run added, removed again.
    not_restored
        What was left as it is, with why.
    """

    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    not_restored: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """Short plain text: ``restored: df (in place), x; removed: result``."""
        parts = []
        if self.restored:
            parts.append("restored: " + ", ".join(self.restored))
        if self.removed:
            parts.append("removed: " + ", ".join(self.removed))
        if self.not_restored:
            parts.append(
                "not restored: " + "; ".join(f"{k} ({why})" for k, why in self.not_restored.items())
            )
        return "; ".join(parts) or "nothing to undo"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe."""
        return {
            "restored": list(self.restored),
            "removed": list(self.removed),
            "not_restored": dict(self.not_restored),
        }


def undo(
    report: ChangeReport, namespace: MutableMapping[str, Any], *, force: bool = False
) -> UndoResult:
    """Put back what the run of ``report`` changed in ``namespace``.

    Objects changed in place are restored from their copies (in place: see
    the module's docstring), rebound and deleted names get their old values
    back, and names the run added are removed. Only what is still as the
    run left it is touched: a name bound again since, or an object changed
    again since, is left alone and said so; calling again with ``force``
    restores those too. A name the run added and the user bound again since
    is always kept.

    Parameters
    ----------
    report
        The run's :class:`ChangeReport`. Each of its changes is undone once.
    namespace
        The namespace the run changed.
    force
        Restore even what changed again after the run (those later changes
        are lost).

    Returns
    -------
    UndoResult
    """
    result = UndoResult()
    if report.undone:
        result.not_restored["run"] = "already undone"
        return result
    for change in report.changed:
        if ("object", change.object_id) in report.pending:
            _undo_object(report, change, namespace, force, result)
    for name in report.rebound:
        if ("rebound", name) in report.pending:
            _undo_name(report, name, namespace, force, result)
    for name in report.deleted:
        if ("deleted", name) in report.pending:
            _undo_name(report, name, namespace, force, result)
    for name in report.added:
        if ("added", name) not in report.pending:
            continue
        report.pending.discard(("added", name))
        if namespace.get(name, _MISSING) is report.after.bindings[name]:
            del namespace[name]
            result.removed.append(name)
        elif name in namespace:
            result.not_restored[name] = "bound to another value since the run: kept"
    report.undone = not report.pending
    return result


def _undo_name(
    report: ChangeReport,
    name: str,
    namespace: MutableMapping[str, Any],
    force: bool,
    result: UndoResult,
) -> None:
    """Bind a rebound or deleted name to its value from before the run."""
    deleted = name not in report.after.bindings
    as_left = (
        name not in namespace
        if deleted
        else (namespace.get(name, _MISSING) is report.after.bindings[name])
    )
    if not (as_left or force):
        result.not_restored[name] = "bound to another value since the run (undo with force)"
        return
    value = report.before.bindings[name]
    namespace[name] = report.replaced.get(id(value), value)
    result.restored.append(name)
    report.pending.discard(("deleted" if deleted else "rebound", name))


def _undo_object(
    report: ChangeReport,
    change: ObjectChange,
    namespace: MutableMapping[str, Any],
    force: bool,
    result: UndoResult,
) -> None:
    """Restore an object changed in place from its copy."""
    before, key = report.before, change.object_id
    value, saved = before.objects[key], before.copies.get(key)
    if saved is None:
        result.not_restored[change.label] = change.undo_note or "no copy was kept"
        report.pending.discard(("object", key))
        return
    if not force:
        now = _fingerprint(value, before.budget, Clock(before.budget))
        if not same_content(now, report.after.fingerprints[key]):
            result.not_restored[change.label] = (
                "changed again since the run (undo with force restores it, losing those changes)"
            )
            return
    report.pending.discard(("object", key))
    del before.copies[key]  # the object (or its names) now own the copy's data
    if _restore_in_place(value, saved):
        result.restored.append(f"{change.label} (in place)")
        return
    report.replaced[key] = saved
    for name, bound in list(namespace.items()):
        if bound is value:
            namespace[name] = saved
    result.restored.append(
        f"{change.label} (rebound to the copy from before the run; "
        "other references to the object still see it changed)"
    )


def _restore_in_place(value: Any, saved: Any) -> bool:
    """Give ``value`` the contents of ``saved``; ``False`` where that is not possible."""
    kind = tracked_kind(value)
    if kind in ("DataFrame", "Series"):
        # pandas' own in-place update (what inplace=True methods use): the
        # object takes the copy's data, index and columns.
        update = getattr(value, "_update_inplace", None)
        if not callable(update):
            return False
        update(saved)
        value.attrs = dict(saved.attrs)
        if kind == "Series":
            value.name = saved.name
        return True
    if kind == "ndarray":
        if value.shape != saved.shape or value.dtype != saved.dtype or not value.flags.writeable:
            return False
        value[...] = saved
        return True
    if isinstance(value, list):
        value[:] = saved
    elif isinstance(value, dict | set):
        value.clear()
        value.update(saved)
    elif isinstance(getattr(value, "__dict__", None), dict):
        vars(value).clear()
        vars(value).update(vars(saved))
    else:
        return False
    return True

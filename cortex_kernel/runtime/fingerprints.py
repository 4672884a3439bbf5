"""Cheap fingerprints of notebook objects, and what two of them say changed.

A fingerprint is taken before and after a code run (:mod:`.changes`); it
keeps no copy of the object's data, only:

- a DataFrame or Series: its shape, column labels and dtypes, a content hash
  of each column (``pandas.util.hash_pandas_object``) and of the index, and,
  within a memory budget, a 64-bit hash per row and per index label, so that
  which rows were added, removed or changed can be said;
- an ndarray: its shape, dtype and a hash of its bytes;
- a list, dict, set or another object: its length, a hash of its items
  (scalars by value, other objects by identity and size) and, for small ones,
  the items' hashes one by one (which keys or items changed);

each within the bounds of a :class:`Budget`: past them the content is
sampled or not checked, and the fingerprint says so (``unchecked``).

pandas and numpy are never imported here: an object of theirs can only exist
once they are, so they are looked up in ``sys.modules``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import sys
import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__: list[str] = []

MB = 1 << 20

#: A column of a table: its label and which occurrence of that label it is
#: (labels may repeat).
ColumnKey = tuple[Hashable, int]

_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_NAN_TOKEN = hash(("float", "nan"))
_SERIES_KEY: ColumnKey = ("<values>", 0)
_LABELS_SHOWN = 5


@dataclass(frozen=True)
class Budget:
    """How much time and memory a snapshot may spend, and how much undo may keep.

    Parameters
    ----------
    content_bytes
        An object larger than this (pandas' shallow ``memory_usage``, an
        array's ``nbytes``) has its content sampled, not hashed whole.
    sample
        How many rows of a table, or elements of an array, are hashed past
        ``content_bytes``.
    row_hash_bytes
        Memory for per-row hashes (16 bytes a row) across one snapshot;
        tables past it get no per-row hashes: which rows changed is not said.
    items
        Items of a list, dict, set or object (nested ones included) hashed
        per object; past it the rest is not checked.
    detail_items
        Containers up to this many items keep each item's hash, to say which
        keys or items changed.
    undo_bytes
        The total size of the copies kept to undo a run.
    seconds
        Time for hashing in one snapshot: once spent, the remaining objects
        are fingerprinted by shape and length only. An object started is
        finished; ``content_bytes`` bounds how long one takes.
    """

    content_bytes: int = 256 * MB
    sample: int = 10_000
    row_hash_bytes: int = 64 * MB
    items: int = 100_000
    detail_items: int = 1_000
    undo_bytes: int = 100 * MB
    seconds: float = 2.0


class Clock:
    """The time and per-row-hash memory left to one snapshot."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.deadline = time.perf_counter() + budget.seconds
        self.row_bytes_left = budget.row_hash_bytes

    def spent(self) -> bool:
        """Whether the snapshot's time for hashing is over."""
        return time.perf_counter() > self.deadline

    def reason(self) -> str:
        return f"content not checked: the snapshot's {self.budget.seconds:g} s were spent"

    def take_rows(self, nbytes: int) -> bool:
        """Reserve ``nbytes`` of per-row hashes, if they fit."""
        if nbytes > self.row_bytes_left:
            return False
        self.row_bytes_left -= nbytes
        return True


@dataclass(eq=False, kw_only=True)
class Fingerprint:
    """What is known of one object at one moment (see the module's docstring).

    Attributes
    ----------
    kind
        ``"DataFrame"``, ``"Series"``, ``"ndarray"``, ``"list"``, ``"dict"``,
        ``"set"`` or ``"object"``.
    type_name
        The object's type, for reports.
    nbytes
        Its size as estimated for the budget.
    unchecked
        What of its content was not checked, and why, or ``None``.
    """

    kind: str
    type_name: str
    nbytes: int
    unchecked: str | None = None

    def signature(self) -> tuple[Any, ...]:
        """Everything compared, as one value: equal signatures mean no change seen."""
        return (self.kind, self.type_name)


@dataclass(eq=False, kw_only=True)
class TableFingerprint(Fingerprint):
    shape: tuple[int, ...]
    keys: tuple[ColumnKey, ...]
    dtypes: dict[ColumnKey, str]
    name: str | None = None  # a Series' name
    digests: dict[ColumnKey, int | None] = field(default_factory=dict)
    index_digest: int | None = None
    row_index: Any = None  # uint64 array: one hash per index label
    row_hash: Any = None  # uint64 array: one hash per row, over the columns in row_keys
    row_keys: frozenset[ColumnKey] = frozenset()

    def signature(self) -> tuple[Any, ...]:
        return (
            self.kind,
            self.shape,
            self.keys,
            tuple(self.dtypes.items()),
            self.name,
            tuple(self.digests.items()),
            self.index_digest,
        )


@dataclass(eq=False, kw_only=True)
class ArrayFingerprint(Fingerprint):
    shape: tuple[int, ...]
    dtype: str
    digest: bytes | int | None = None

    def signature(self) -> tuple[Any, ...]:
        return (self.kind, self.shape, self.dtype, self.digest)


@dataclass(eq=False, kw_only=True)
class ItemsFingerprint(Fingerprint):
    length: int
    digest: int | None = None
    # Small containers: each item's hash (a list), key -> value hash (a dict,
    # an object's attributes), or the members themselves (a set).
    detail: tuple[int, ...] | dict[Any, int] | frozenset[Any] | None = None
    # The items themselves (small containers): no replaced item's id is
    # reused by a new one while the fingerprint lives.
    keepalive: tuple[Any, ...] = ()

    def signature(self) -> tuple[Any, ...]:
        return (self.kind, self.type_name, self.length, self.digest)


# -- which objects ------------------------------------------------------------


def _module(name: str) -> Any:
    return sys.modules.get(name)


def tracked_kind(value: Any) -> str | None:
    """The kind of a value every snapshot fingerprints (named in code or not), or ``None``."""
    pd = _module("pandas")
    if pd is not None and isinstance(value, pd.DataFrame | pd.Series):
        return "DataFrame" if isinstance(value, pd.DataFrame) else "Series"
    np = _module("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return "ndarray"
    for kind in (list, dict, set):
        if isinstance(value, kind):
            return kind.__name__
    return None


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def fingerprint(
    value: Any,
    budget: Budget,
    clock: Clock,
    *,
    row_keys: Iterable[ColumnKey] | None = None,
) -> Fingerprint:
    """Fingerprint one object.

    Parameters
    ----------
    value
        The object.
    budget, clock
        The bounds, and what is left of them in this snapshot.
    row_keys
        A table's per-row hashes cover only these columns (those of the
        fingerprint it will be compared with), so that an added column does
        not make every row look changed. ``None``: all columns.
    """
    kind = tracked_kind(value)
    if kind in ("DataFrame", "Series"):
        return _table(value, kind, budget, clock, row_keys)
    if kind == "ndarray":
        return _array(value, budget, clock)
    return _items(value, kind or "object", budget, clock)


# -- tables -------------------------------------------------------------------


def _column_keys(labels: Iterable[Hashable]) -> list[ColumnKey]:
    seen: dict[Hashable, int] = {}
    keys: list[ColumnKey] = []
    for label in labels:
        try:
            count = seen.get(label, 0)
            seen[label] = count + 1
        except TypeError:  # an unhashable label: told apart by position
            label, count = repr(label), len(keys)
        keys.append((label, count))
    return keys


def _fold(np: Any, hashes: Any) -> int:
    """One 64-bit digest of per-element hashes, position by position.

    The sum of each hash times an odd weight of its position (mod 2**64):
    a changed element always changes it, two elements swapped almost
    surely; four times faster than a blake2b of the same bytes.
    """
    weights = np.arange(len(hashes), dtype=np.uint64)
    weights *= np.uint64(0x9E3779B97F4A7C15)
    weights |= np.uint64(1)
    weights *= hashes
    return int(weights.sum(dtype=np.uint64)) ^ len(hashes)


def _mix(key: ColumnKey) -> int:
    """An odd 64-bit factor per column: a row's hash sums its columns' hashes times these."""
    raw = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(raw, "little") | 1


def _hash_values(pd: Any, values: Any) -> Any:
    """pandas' per-element uint64 hash (contiguous), or ``None`` for unhashable values."""
    try:
        return pd.util.hash_pandas_object(values, index=False).to_numpy()
    except (TypeError, ValueError):
        return None


def _table(
    value: Any, kind: str, budget: Budget, clock: Clock, row_keys: Iterable[ColumnKey] | None
) -> TableFingerprint:
    pd, np = _module("pandas"), _module("numpy")
    frame = kind == "DataFrame"
    usage = value.memory_usage(index=True, deep=False)
    nbytes = int(usage.sum()) if frame else int(usage)
    keys = _column_keys(value.columns) if frame else [_SERIES_KEY]
    columns = [value.iloc[:, i] for i in range(len(keys))] if frame else [value]
    fp = TableFingerprint(
        kind=kind,
        type_name=_type_name(value),
        nbytes=nbytes,
        shape=tuple(value.shape),
        keys=tuple(keys),
        dtypes={key: str(column.dtype) for key, column in zip(keys, columns, strict=True)},
        name=None if frame else repr(value.name),
    )
    if clock.spent():
        fp.unchecked = clock.reason()
        return fp
    rows = len(value)
    sampled: slice | None = None
    if nbytes > budget.content_bytes:
        sampled = slice(None, None, max(1, math.ceil(rows / budget.sample)))
        fp.unchecked = (
            f"content sampled: {len(range(rows)[sampled]):,} of {rows:,} rows hashed "
            f"({_mb(nbytes)} > the {_mb(budget.content_bytes)} limit); "
            "a change in another row is not seen"
        )
    index_hashes = _hash_values_index(pd, value.index if sampled is None else value.index[sampled])
    fp.index_digest = None if index_hashes is None else _fold(np, index_hashes)
    keep_rows = sampled is None and index_hashes is not None and clock.take_rows(16 * rows)
    covered = frozenset(keys if row_keys is None else set(keys) & set(row_keys))
    row_hash = np.zeros(rows, dtype=np.uint64) if keep_rows else None
    unhashable = []
    for key, column in zip(keys, columns, strict=True):
        hashes = _hash_values(pd, column if sampled is None else column.iloc[sampled])
        if hashes is None:
            unhashable.append(_label(key))
            fp.digests[key] = None
            continue
        fp.digests[key] = _fold(np, hashes)
        if row_hash is not None and key in covered:
            row_hash += hashes * np.uint64(_mix(key))  # uint64 arithmetic wraps, as meant
    if row_hash is not None and not unhashable:
        fp.row_index, fp.row_hash, fp.row_keys = index_hashes, row_hash, covered
    notes = [fp.unchecked] if fp.unchecked else []
    if unhashable:
        notes.append(f"values of {', '.join(unhashable)} not checked (unhashable values)")
    if index_hashes is None:
        notes.append("which rows changed not checked (unhashable index labels)")
    elif sampled is None and fp.row_hash is None and not unhashable:
        notes.append("which rows changed not checked (the row-hash memory budget is spent)")
    fp.unchecked = "; ".join(notes) or None
    return fp


def _hash_values_index(pd: Any, index: Any) -> Any:
    try:
        return pd.util.hash_pandas_object(index).to_numpy()
    except (TypeError, ValueError):
        return None


# -- arrays -------------------------------------------------------------------


def _array(value: Any, budget: Budget, clock: Clock) -> ArrayFingerprint:
    np = _module("numpy")
    fp = ArrayFingerprint(
        kind="ndarray",
        type_name=_type_name(value),
        nbytes=int(value.nbytes),
        shape=tuple(value.shape),
        dtype=str(value.dtype),
    )
    if clock.spent():
        fp.unchecked = clock.reason()
        return fp
    if value.dtype.hasobject:  # pointers: hash the objects as a list's items
        tokens = _Tokens(budget.items)
        flat = value.reshape(-1) if value.flags.c_contiguous else value.ravel()
        fp.digest = hash(tuple(tokens.of(item) for item in itertools.islice(flat, budget.items)))
        if tokens.truncated or flat.size > budget.items:
            fp.unchecked = f"content checked for the first {budget.items:,} of {flat.size:,} items"
        return fp
    data = value
    if value.nbytes > budget.content_bytes:
        # A contiguous array is sampled by element through a flat view, so the
        # sample is the only copy; a strided one by row.
        whole = value.reshape(-1) if value.flags.c_contiguous else value
        data = whole[:: max(1, math.ceil(len(whole) / budget.sample))]
        unit = "elements" if whole.ndim == 1 else "rows"
        fp.unchecked = (
            f"content sampled: {len(data):,} of {len(whole):,} {unit} hashed "
            f"({_mb(value.nbytes)} > the {_mb(budget.content_bytes)} limit); "
            "a change elsewhere is not seen"
        )
    fp.digest = _array_digest(np, data)
    return fp


def _array_digest(np: Any, data: Any) -> bytes:
    """A hash of an array's bytes, in slices of about 16 MB (no whole copy of a strided array)."""
    digest = hashlib.blake2b(digest_size=16)
    if data.ndim == 0 or data.size == 0:
        digest.update(data.tobytes())
        return digest.digest()
    per_row = max(1, data[0:1].nbytes)
    step = max(1, (16 * MB) // per_row)
    for start in range(0, len(data), step):
        digest.update(memoryview(np.ascontiguousarray(data[start : start + step])).cast("B"))
    return digest.digest()


# -- containers and other objects ------------------------------------------------


class _Tokens:
    """Hashes of items: scalars by value, containers by their items (one level), others by id."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.truncated = False

    def of(self, item: Any, depth: int = 1) -> int:
        self.left -= 1
        if isinstance(item, float) and item != item:
            return _NAN_TOKEN  # every NaN alike (their hash is their id)
        if type(item) in _SCALARS:
            return hash((type(item).__name__, item))
        kind = type(item)
        if depth > 0 and kind in (list, tuple, dict, set, frozenset):
            return self._nested(item, depth - 1)
        return hash((kind.__name__, id(item), _size_token(item)))

    def _nested(self, item: Any, depth: int) -> int:
        if len(item) > max(self.left, 0):
            self.truncated = True
            return hash((type(item).__name__, id(item), len(item)))
        if isinstance(item, dict):
            parts: Iterable[int] = (
                hash((self.of(k, 0), self.of(v, depth))) for k, v in item.items()
            )
        else:
            parts = (self.of(element, depth) for element in item)
        if isinstance(item, set | frozenset):
            parts = sorted(parts)
        return hash((type(item).__name__, len(item), tuple(parts)))


def _size_token(item: Any) -> Any:
    """The size of an object known by identity: its shape (pandas, numpy) or length."""
    root = type(item).__module__.split(".")[0]
    if root in ("pandas", "numpy"):
        shape = getattr(item, "shape", None)
        return tuple(shape) if isinstance(shape, tuple) else None
    if isinstance(item, list | dict | set | tuple | str | bytes):
        return len(item)
    return None


def _items(value: Any, kind: str, budget: Budget, clock: Clock) -> ItemsFingerprint:
    if kind == "object":
        attributes = getattr(value, "__dict__", None)
        source: Any = attributes if isinstance(attributes, dict) else None
    else:
        source = value
    length = len(source) if source is not None else 0
    fp = ItemsFingerprint(kind=kind, type_name=_type_name(value), nbytes=0, length=length)
    if source is None:
        fp.unchecked = "content not checked (an object without attributes to compare)"
        return fp
    if clock.spent():
        fp.unchecked = clock.reason()
        return fp
    tokens = _Tokens(budget.items)
    limit = budget.items
    small = length <= budget.detail_items
    if isinstance(source, dict):
        pairs = [(k, tokens.of(v)) for k, v in itertools.islice(source.items(), limit)]
        fp.digest = hash(tuple((tokens.of(k, 0), t) for k, t in pairs))
        if small:
            fp.detail = dict(pairs)
            fp.keepalive = tuple(source.values())
    elif isinstance(source, set):
        hashes = sorted(tokens.of(item) for item in itertools.islice(source, limit))
        fp.digest = hash(tuple(hashes))
        if small:
            fp.detail = frozenset(source)
    else:
        items = tuple(tokens.of(item) for item in itertools.islice(source, limit))
        fp.digest = hash(items)
        if small:
            fp.detail = items
            fp.keepalive = tuple(source)
    if tokens.truncated or length > limit:
        fp.unchecked = f"content checked for about the first {limit:,} items of {length:,}"
    return fp


# -- sizes ------------------------------------------------------------------------


def size_of(value: Any, exclude: frozenset[int] = frozenset(), depth: int = 3) -> int:
    """About how many bytes a deep copy of ``value`` takes (objects in ``exclude`` not copied).

    Tables by pandas' shallow ``memory_usage`` (what ``copy(deep=True)``
    copies), arrays by ``nbytes``, containers and objects by their items to
    ``depth`` levels, the first 100 items of each extrapolated to all, and
    10,000 objects measured at most.
    """
    return _size(value, exclude, depth, [10_000])


def _size(value: Any, exclude: frozenset[int], depth: int, visits: list[int]) -> int:
    if id(value) in exclude:
        return 0
    visits[0] -= 1
    kind = tracked_kind(value)
    if kind in ("DataFrame", "Series"):
        usage = value.memory_usage(index=True, deep=False)
        return int(usage.sum()) if kind == "DataFrame" else int(usage)
    if kind == "ndarray":
        return int(value.nbytes)
    own = sys.getsizeof(value, 64)
    if depth <= 0 or visits[0] <= 0:
        return own
    if isinstance(value, dict):
        pairs = itertools.islice(value.items(), 100)
        items: list[Any] = list(itertools.chain.from_iterable(pairs))
        total = len(value) * 2
    elif isinstance(value, list | tuple | set | frozenset):
        items, total = list(itertools.islice(value, 100)), len(value)
    elif isinstance(getattr(value, "__dict__", None), dict):
        return own + _size(vars(value), exclude, depth - 1, visits)
    else:
        return own
    if not items:
        return own
    measured = sum(_size(item, exclude, depth - 1, visits) for item in items)
    return own + measured * total // len(items)


# -- comparing --------------------------------------------------------------------


def same_content(before: Fingerprint, after: Fingerprint) -> bool:
    """Whether two fingerprints of one object see no difference."""
    return type(before) is type(after) and before.signature() == after.signature()


def compare(
    before: Fingerprint, after: Fingerprint, current: Any, copy: Any = None
) -> tuple[list[str], dict[str, Any]]:
    """What changed between two fingerprints of one object.

    Parameters
    ----------
    before, after
        Its fingerprints from before and after the run.
    current
        The object itself (labels of changed rows are read from it).
    copy
        Its undo copy from before the run, if one was kept (labels of
        removed rows, counts of changed array elements are read from it).

    Returns
    -------
    phrases, data
        Short phrases for the summary (``"column 'a' added"``; empty when
        nothing changed) and the same as JSON-safe data.
    """
    if isinstance(before, TableFingerprint) and isinstance(after, TableFingerprint):
        return _compare_tables(before, after, current, copy)
    if isinstance(before, ArrayFingerprint) and isinstance(after, ArrayFingerprint):
        return _compare_arrays(before, after, current, copy)
    if isinstance(before, ItemsFingerprint) and isinstance(after, ItemsFingerprint):
        return _compare_items(before, after)
    if same_content(before, after):
        return [], {}
    return ["changed"], {}


def _mb(nbytes: int) -> str:
    return f"{nbytes / MB:,.0f} MB" if nbytes >= 10 * MB else f"{nbytes / MB:,.1f} MB"


def _label(key: ColumnKey) -> str:
    label, count = key
    text = repr(label) if isinstance(label, str) else str(label)
    return text if count == 0 else f"{text} (#{count + 1})"


def _json_label(key: ColumnKey) -> str:
    label, count = key
    return str(label) if count == 0 else f"{label} (#{count + 1})"


def _names(items: list[str], singular: str, plural: str) -> str:
    return f"{singular} {items[0]}" if len(items) == 1 else f"{plural} {', '.join(items)}"


def _compare_tables(
    b: TableFingerprint, a: TableFingerprint, current: Any, copy: Any
) -> tuple[list[str], dict[str, Any]]:
    phrases: list[str] = []
    data: dict[str, Any] = {}
    after_keys, before_keys = set(a.keys), set(b.keys)
    added = [k for k in a.keys if k not in before_keys]
    removed = [k for k in b.keys if k not in after_keys]
    common = [k for k in b.keys if k in after_keys]
    retyped = [k for k in common if b.dtypes[k] != a.dtypes[k]]
    same_rows = b.index_digest is not None and b.index_digest == a.index_digest
    changed = [
        k
        for k in common
        if b.digests.get(k) is not None
        and a.digests.get(k) is not None
        and b.digests[k] != a.digests[k]
    ]
    if b.kind == "DataFrame":
        if added:
            phrases.append(_names([_label(k) for k in added], "column", "columns") + " added")
            data["columns_added"] = [_json_label(k) for k in added]
        if removed:
            phrases.append(_names([_label(k) for k in removed], "column", "columns") + " removed")
            data["columns_removed"] = [_json_label(k) for k in removed]
        # Per column only when the rows are the same ones: a dropped row changes every column.
        if same_rows and changed:
            phrases.append(_names([_label(k) for k in changed], "column", "columns") + " changed")
            data["columns_changed"] = [_json_label(k) for k in changed]
        if not added and not removed and [k for k in a.keys if k in before_keys] != common:
            phrases.append("columns reordered")
            data["columns_reordered"] = True
    for k in retyped:
        where = f"column {_label(k)} " if b.kind == "DataFrame" else ""
        phrases.append(f"{where}dtype {b.dtypes[k]} → {a.dtypes[k]}")
    if retyped:
        data["dtypes_changed"] = {_json_label(k): [b.dtypes[k], a.dtypes[k]] for k in retyped}
    if b.name != a.name:
        phrases.append(f"name {b.name} → {a.name}")
    phrases.extend(_compare_rows(b, a, current, copy, data))
    if b.shape != a.shape:
        phrases.append(f"shape {b.shape} → {a.shape}")
        data["shape"] = [list(b.shape), list(a.shape)]
    if not phrases and not same_content(b, a):
        phrases.append("content changed")
    return phrases, data


def _show(index: Any, positions: Any) -> str:
    """``(labels 3, 7)``: the first few labels at ``positions`` of ``index``."""
    if index is None or len(positions) == 0:
        return ""
    shown = [repr(label) for label in index[positions[:_LABELS_SHOWN]].tolist()]
    more = ", …" if len(positions) > _LABELS_SHOWN else ""
    return f" ({'label' if len(positions) == 1 else 'labels'} {', '.join(shown)}{more})"


def _compare_rows(
    b: TableFingerprint, a: TableFingerprint, current: Any, copy: Any, data: dict[str, Any]
) -> list[str]:
    """Rows added, removed, changed (by index label) or reordered."""
    np = _module("numpy")
    if b.row_hash is None or a.row_hash is None or np is None:
        return []
    after_index = current.index if current is not None and len(current) == a.shape[0] else None
    before_index = copy.index if copy is not None and len(copy) == b.shape[0] else None
    # Rows compare only over the same columns: a removed column's values are gone.
    values_comparable = a.row_keys == b.row_keys
    unit = "row" if b.kind == "DataFrame" else "value"
    phrases: list[str] = []
    if b.index_digest == a.index_digest:
        changed = np.flatnonzero(b.row_hash != a.row_hash) if values_comparable else []
    else:
        if not (_unique(np, b.row_index) and _unique(np, a.row_index)):
            data["rows_matched"] = False
            return ["rows not matched by label (the index has duplicate labels)"]
        gone = np.flatnonzero(~np.isin(b.row_index, a.row_index))
        new = np.flatnonzero(~np.isin(a.row_index, b.row_index))
        kept = np.flatnonzero(np.isin(a.row_index, b.row_index))
        order = np.argsort(b.row_index, kind="stable")
        in_before = order[np.searchsorted(b.row_index, a.row_index[kept], sorter=order)]
        changed = kept[b.row_hash[in_before] != a.row_hash[kept]] if values_comparable else []
        if len(gone):
            phrases.append(f"{_count(len(gone), unit)} removed{_show(before_index, gone)}")
            data["rows_removed"] = len(gone)
        if len(new):
            phrases.append(f"{_count(len(new), unit)} added{_show(after_index, new)}")
            data["rows_added"] = len(new)
        if np.any(np.diff(in_before) < 0):
            phrases.append("rows reordered")
            data["rows_reordered"] = True
    if len(changed):
        phrases.append(f"{_count(len(changed), unit)} changed{_show(after_index, changed)}")
        data["rows_changed"] = len(changed)
    if not values_comparable:
        data["rows_changed"] = None  # not known: columns were removed
    return phrases


def _unique(np: Any, hashes: Any) -> bool:
    return len(np.unique(hashes)) == len(hashes)


def _count(n: int, unit: str) -> str:
    return f"{n:,} {unit}{'' if n == 1 else 's'}"


def _compare_arrays(
    b: ArrayFingerprint, a: ArrayFingerprint, current: Any, copy: Any
) -> tuple[list[str], dict[str, Any]]:
    phrases: list[str] = []
    data: dict[str, Any] = {}
    if b.shape != a.shape:
        phrases.append(f"shape {b.shape} → {a.shape}")
        data["shape"] = [list(b.shape), list(a.shape)]
    if b.dtype != a.dtype:
        phrases.append(f"dtype {b.dtype} → {a.dtype}")
        data["dtype"] = [b.dtype, a.dtype]
    if b.digest is not None and a.digest is not None and b.digest != a.digest and not phrases:
        count = _elements_changed(copy, current)
        if count is None:
            phrases.append("values changed")
        else:
            phrases.append(f"{count:,} of {math.prod(a.shape):,} elements changed")
            data["elements_changed"] = count
    return phrases, data


def _elements_changed(copy: Any, current: Any) -> int | None:
    """How many elements differ from the copy taken before the run (NaN equal to NaN)."""
    np = _module("numpy")
    if copy is None or current is None or copy.shape != current.shape or copy.dtype.hasobject:
        return None
    differ = copy != current
    if copy.dtype.kind in "fc":
        differ &= ~(np.isnan(copy) & np.isnan(current))
    return int(np.count_nonzero(differ))


def _compare_items(b: ItemsFingerprint, a: ItemsFingerprint) -> tuple[list[str], dict[str, Any]]:
    phrases: list[str] = []
    data: dict[str, Any] = {}
    if b.length != a.length:
        data["length"] = [b.length, a.length]
    if same_content(b, a):
        return phrases, data
    detail = _detail(b, a, data)
    if detail:
        phrases.extend(detail)
    elif b.digest != a.digest:
        phrases.append("content changed")
    if b.length != a.length and b.kind != "object":  # an object's: its attributes, said above
        phrases.append(f"length {b.length:,} → {a.length:,}")
    return phrases, data


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _keys(values: list[Any]) -> str:
    shown = ", ".join(_short(v) for v in values[:_LABELS_SHOWN])
    return shown + (", …" if len(values) > _LABELS_SHOWN else "")


def _detail(b: ItemsFingerprint, a: ItemsFingerprint, data: dict[str, Any]) -> list[str]:
    """Which keys, attributes, members or items changed, when both sides kept them."""
    if isinstance(b.detail, dict) and isinstance(a.detail, dict):
        noun = "attribute" if b.kind == "object" else "key"
        added = [k for k in a.detail if k not in b.detail]
        removed = [k for k in b.detail if k not in a.detail]
        changed = [k for k in b.detail if k in a.detail and a.detail[k] != b.detail[k]]
        out = []
        for verb, keys in (("added", added), ("removed", removed), ("changed", changed)):
            if keys:
                out.append(f"{noun}{'s' if len(keys) > 1 else ''} {_keys(keys)} {verb}")
                data[f"{noun}s_{verb}"] = [_short(k) for k in keys]
        return out
    if isinstance(b.detail, frozenset) and isinstance(a.detail, frozenset):
        out = []
        for verb, members in (("added", a.detail - b.detail), ("removed", b.detail - a.detail)):
            if members:
                listed = sorted(members, key=repr)
                out.append(f"{_count(len(listed), 'member')} {verb} ({_keys(listed)})")
                data[f"members_{verb}"] = len(listed)
        return out
    if isinstance(b.detail, tuple) and isinstance(a.detail, tuple):
        return _list_detail(b.detail, a.detail, data)
    return []


def _list_detail(b: tuple[int, ...], a: tuple[int, ...], data: dict[str, Any]) -> list[str]:
    if len(a) > len(b) and a[: len(b)] == b:
        data["items_appended"] = len(a) - len(b)
        return [f"{_count(len(a) - len(b), 'item')} appended"]
    if len(a) < len(b) and b[: len(a)] == a:
        data["items_removed_from_end"] = len(b) - len(a)
        return [f"{_count(len(b) - len(a), 'item')} removed from the end"]
    if len(a) == len(b):
        positions = [i for i, (x, y) in enumerate(zip(b, a, strict=True)) if x != y]
        data["items_changed"] = positions[:100]
        shown = ", ".join(map(str, positions[:_LABELS_SHOWN])) + (
            ", …" if len(positions) > _LABELS_SHOWN else ""
        )
        return [f"{_count(len(positions), 'item')} changed (at {shown})"]
    return []

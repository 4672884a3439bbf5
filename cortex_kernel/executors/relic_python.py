"""Python relics: an object of a ``module:Class`` kept alive across cells.

The object is made on first use with the manifest's ``options`` as keyword
arguments; its public methods (no leading ``_``; ``close`` excepted) are the
operations, with JSON schemas from their type hints as for callable tools.
Sync methods — and the constructor and ``close`` — run on the relic's own
thread, one at a time, so an object that is not thread-safe (a SQLite
connection) never sees two calls at once; async methods run on the event
loop. A method that raises :class:`~cortex_kernel.exceptions.RelicCrashed`
marks the object broken: the next use makes a new one.

The built-in ``sqlite`` relic is :class:`SqliteStore` run the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import anyio.to_thread
import sniffio
from pydantic import ValidationError

from ..exceptions import RelicError
from ..names import import_target
from ..runtime.docstrings import summary
from ..runtime.tools import schema_model
from .files import Workspace
from .relic_base import Relic, RelicPlace
from .relic_spec import PythonRelicSpec, SqliteRelicSpec

__all__ = ["SqliteStore"]


class SqliteStore:
    """A key-value store in one SQLite file (the built-in ``sqlite`` relic).

    Values are any JSON data. The file survives the kernel: a new kernel's
    store with the same ``path`` reads what the last one wrote.

    Parameters
    ----------
    path
        The database file (created when missing).

    Examples
    --------
    >>> store = SqliteStore(":memory:")
    >>> store.set("a", {"n": 1})
    True
    >>> store.get("a"), store.keys(), store.delete("a"), store.get("a", "none")
    ({'n': 1}, ['a'], True, 'none')
    """

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key`` (``default`` when there is none)."""
        row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set(self, key: str, value: Any) -> bool:
        """Store ``value`` (any JSON data) under ``key``, replacing what was there."""
        try:
            text = json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise RelicError(f"value for {key!r} is not JSON data: {exc}") from None
        self._db.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, text))
        return True

    def delete(self, key: str) -> bool:
        """Forget ``key``; ``False`` if it was not there."""
        return self._db.execute("DELETE FROM kv WHERE key = ?", (key,)).rowcount > 0

    def keys(self, prefix: str = "") -> list[str]:
        """The keys (those starting with ``prefix``), sorted."""
        rows = self._db.execute(
            "SELECT key FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key", (len(prefix), prefix)
        )
        return [row[0] for row in rows]

    def items(self, prefix: str = "") -> dict[str, Any]:
        """Every key (starting with ``prefix``) with its value."""
        rows = self._db.execute(
            "SELECT key, value FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key",
            (len(prefix), prefix),
        )
        return {key: json.loads(value) for key, value in rows}

    def close(self) -> None:
        """Close the database (called when the relic stops)."""
        self._db.close()


class _Worker:
    """One daemon thread running submitted calls in order.

    Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit,
    so a method stuck in a sync call would hold the kernel's exit hostage.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            work, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work())
            except BaseException as exc:  # handed to the caller, as a pool would
                future.set_exception(exc)

    def submit(self, work: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((work, future))
        return future

    def shutdown(self) -> None:
        self._queue.put(None)


def _load_class(target: str, where: str) -> type:
    value = import_target(target, what="class", where=where, error=RelicError)
    if not inspect.isclass(value):
        raise RelicError(f"{where}: {target!r} is not a class")
    return value


def _method_schema(cls: type, name: str, label: str) -> tuple[dict[str, Any], Any, str]:
    """Schema, checking model and description of method ``name`` (without ``self``)."""
    raw = inspect.getattr_static(cls, name)
    function = getattr(cls, name)
    if not isinstance(raw, staticmethod | classmethod):
        signature = inspect.signature(function)
        params = list(signature.parameters.values())[1:]
        try:
            hints = inspect.get_annotations(function, eval_str=True)
        except Exception:  # unresolvable annotations: any value
            hints = {}

        def shim(*args: Any, **kwargs: Any) -> None:  # pragma: no cover - schema holder
            raise AssertionError

        shim.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        shim.__annotations__ = {k: v for k, v in hints.items() if k in {p.name for p in params}}
        shim.__doc__ = function.__doc__
        function = shim
    schema, model = schema_model(function, label)
    return schema, model, summary(inspect.getdoc(getattr(cls, name)))


def _public_methods(cls: type) -> list[str]:
    return [
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and name != "close" and callable(value)
    ]


class PythonRelic(Relic):
    """A ``python`` (or built-in ``sqlite``) relic: one object, its methods the operations."""

    kind = "python"

    spec: PythonRelicSpec | SqliteRelicSpec

    def __init__(self, spec: PythonRelicSpec | SqliteRelicSpec, place: RelicPlace) -> None:
        super().__init__(spec, place)
        where = f"{place.source} relics '{spec.name}'"
        if isinstance(spec, SqliteRelicSpec):
            self.cls: type = SqliteStore
            workspace = Workspace(place.workspace)
            try:
                path = workspace.resolve(spec.path or f"{spec.name}.sqlite")
            except Exception as exc:
                raise RelicError(f"{where}: {exc}") from None
            self.kwargs: dict[str, Any] = {"path": str(path)}
        else:
            self.cls = _load_class(spec.target, where)
            self.kwargs = dict(spec.options)
        self._methods: dict[str, tuple[dict[str, Any], Any, str]] = {
            name: _method_schema(self.cls, name, f"{spec.name}.{name}")
            for name in _public_methods(self.cls)
        }
        self._object: Any = None
        self._thread: _Worker | None = None

    def operations(self) -> dict[str, dict[str, Any]]:
        """Its public methods, with their schemas and first docstring lines."""
        return {
            name: {"description": text, "parameters": schema}
            for name, (schema, _, text) in self._methods.items()
        }

    def validate(self, operation: str, parameters: dict[str, Any]) -> dict[str, Any]:
        """Check and coerce ``parameters`` with the method's signature."""
        _, model, _ = self._methods[operation]
        try:
            validated = model.model_validate(parameters)
        except ValidationError as exc:
            problems = [
                f"parameter '{'.'.join(str(p) for p in e['loc']) or '(all)'}': {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
            raise RelicError(
                f"bad parameters for relic operation '{self.name}.{operation}': "
                + "; ".join(problems)
            ) from None
        return {key: getattr(validated, key) for key in type(validated).model_fields}

    async def _on_thread(self, work: Callable[[], Any]) -> Any:
        assert self._thread is not None
        future = self._thread.submit(work)
        if sniffio.current_async_library() == "asyncio":
            # Cancelling the wait drops a queued call; a running one finishes on
            # the relic's thread (Python cannot stop a thread), and the next
            # call waits behind it, so the object never sees two at once.
            return await asyncio.wrap_future(future)
        return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)

    async def start(self) -> None:
        """Make the object on the relic's own thread."""
        self._thread = _Worker(f"relic-{self.name}")
        self._object = await self._on_thread(lambda: self.cls(**self.kwargs))

    def alive(self) -> str | None:
        """Alive while it has an object (a :class:`RelicCrashed` drops it)."""
        return None if self._object is not None else "its object is gone"

    async def call(self, operation: str, parameters: dict[str, Any]) -> Any:
        """Call the method; its exceptions fail the call (``RelicCrashed`` also the object)."""
        method = getattr(self._object, operation)
        if inspect.iscoroutinefunction(method):
            result = await method(**parameters)
        else:
            result = await self._on_thread(lambda: method(**parameters))
        if inspect.isawaitable(result):
            result = await result
        return result

    def stop(self) -> None:
        """Call the object's ``close()`` (if any) on its thread, then end the thread."""
        obj, self._object = self._object, None
        thread, self._thread = self._thread, None
        if thread is None:
            return
        close = getattr(obj, "close", None)
        if callable(close) and not inspect.iscoroutinefunction(close):
            # A failing close must not keep the relic (or the shutdown) alive.
            with contextlib.suppress(Exception):
                thread.submit(close).result(timeout=2)
        thread.shutdown()

    def detail(self) -> str:
        """The class."""
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

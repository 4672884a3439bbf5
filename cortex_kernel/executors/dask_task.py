"""What runs on a Dask worker for a tool call: the call itself, its interruption, a preview.

These functions travel to the workers by value (see
:func:`cortex_kernel.executors.dask_backend.DaskBackend`): a worker needs
``distributed`` and the tool's own imports, not cortex-kernel. So this module
imports nothing of ours and only the standard library at the top.

Why threads are interrupted
---------------------------
Cancelling a Dask future forgets the task on the scheduler, but a task
already running in a worker's thread runs on to its end (Python cannot
kill a thread): an interrupted cell would leave the cluster busy. Each call
therefore registers its thread under its key while it runs, and
:func:`interrupt` raises ``InterruptedError`` in that thread with
``PyThreadState_SetAsyncExc`` (the exception lands at the next bytecode
the thread runs: pure-Python work stops at once, a blocking C call such as
``time.sleep`` when it returns). The registry is only touched under its
lock, and a call clears any exception still pending for its thread before
it returns, so an interruption can never land in the worker's own code
after the call.

An interruption can also come before the call starts: a queued call is
cancelled on the scheduler, but the interrupt (a ``Client.run`` on its own
connection) can overtake the scheduler's "free this key" on its way to the
worker, which then starts the call as a thread frees up. So an interrupt
remembers the keys it found running nowhere on a worker, and a call whose
key is remembered stops as it starts, before the tool runs.

A call stopped by :func:`interrupt` returns its ``InterruptedError`` rather
than raising it: its caller has cancelled it and reads nothing, and a raised
one would make the worker log a "Compute Failed" traceback (with the task's
arguments) for a stop that was asked for. An ``InterruptedError`` the tool
raises by itself is raised as any other error.

A tool that fails on a worker is logged there as "Compute Failed" with the
task's repr, which holds the call's arguments: values the kernel's redactor
never sees (a notebook variable passed as ``$name``, say). The worker's
log is given a filter that leaves those out of the record of a cortex-kernel
call; the exception and its traceback stay.
"""

from __future__ import annotations

import ctypes
import inspect
import logging
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__: list[str] = []

_REGISTRY = "_cortex_kernel_dask_calls"
KEY_PREFIX = "cortex-"  # of every call's key (DaskBackend.call)
_NOT_LOGGED = "<a cortex-kernel tool call: its arguments are not logged>"

# Keys interrupted before they started, remembered per worker; keys are unique
# per call, so the oldest are dropped past this many.
_REMEMBERED = 10_000


def _registry() -> Any:
    # Kept in sys.modules, not in this module's globals: a function sent by
    # value gets fresh globals with every task, the worker's process one
    # registry.
    found = sys.modules.get(_REGISTRY)
    if found is None:
        made = types.ModuleType(_REGISTRY)
        made.lock = threading.Lock()  # type: ignore[attr-defined]
        made.calls = {}  # type: ignore[attr-defined]
        found = sys.modules.setdefault(_REGISTRY, made)
    # A worker that outlived an older cortex-kernel has a registry without them.
    vars(found).setdefault("interrupted", OrderedDict())
    vars(found).setdefault("stopped", set())  # keys whose running thread interrupt() hit
    if not getattr(found, "quiet_log", False):
        found.quiet_log = True  # type: ignore[attr-defined]
        logging.getLogger("distributed.worker").addFilter(_without_arguments)
    return found


def _without_arguments(record: logging.LogRecord) -> bool:
    """Leave a cortex-kernel call's arguments out of the worker's "Compute Failed" record.

    distributed logs ``(key, state, repr(task)[:1000], exception, traceback)``;
    any other shape is left as it is.
    """
    args = record.args
    if (
        isinstance(record.msg, str)
        and record.msg.startswith("Compute Failed")
        and isinstance(args, tuple)
        and len(args) == 5
        and str(args[0]).startswith(KEY_PREFIX)
    ):
        record.args = (args[0], args[1], _NOT_LOGGED, args[3], args[4])
    return True


def _async_raise(ident: int, exc: type[BaseException] | None) -> int:
    target = ctypes.py_object(exc) if exc is not None else None
    return int(ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), target))


def run_tool(function: Callable[..., Any], kwargs: dict[str, Any], key: str, topic: str) -> Any:
    """Call ``function(**kwargs)`` on this worker, announcing where it runs.

    An ``{"key", "worker"}`` event goes to the scheduler's ``topic`` as the
    call starts (the kernel shows the worker; a second start of the same key
    means the first worker was lost and Dask ran it again). An async function
    runs to completion in its own event loop. A call already interrupted
    (see :func:`interrupt`) returns an ``InterruptedError`` before the tool
    runs, and a call that :func:`interrupt` stops returns the one it raised.
    """
    from distributed import get_worker

    worker = get_worker()
    worker.log_event(topic, {"key": key, "worker": str(worker.address)})
    registry = _registry()
    ident = threading.get_ident()
    with registry.lock:
        if key in registry.interrupted:
            del registry.interrupted[key]
            return InterruptedError(f"{key} was interrupted before it started")
        registry.calls[key] = ident
    try:
        result = function(**kwargs)
        if inspect.isawaitable(result):
            import asyncio

            async def settle() -> Any:
                return await result

            result = asyncio.run(settle())
        return result
    except InterruptedError as exc:
        with registry.lock:
            stopped = key in registry.stopped
        if not stopped:
            raise  # the tool's own
        return exc
    finally:
        with registry.lock:
            registry.calls.pop(key, None)
            registry.stopped.discard(key)
        _async_raise(ident, None)  # an interruption that came too late is dropped here


def interrupt(keys: list[str]) -> list[str]:
    """Raise ``InterruptedError`` in the threads running ``keys`` here; return those hit.

    A key running nowhere here is remembered: should its call start here
    later, it stops at its start.
    """
    registry = _registry()
    hit = []
    with registry.lock:
        for key in keys:
            ident = registry.calls.get(key)
            if ident is None:
                registry.interrupted[key] = None
                while len(registry.interrupted) > _REMEMBERED:
                    registry.interrupted.popitem(last=False)
            elif _async_raise(ident, InterruptedError) == 1:
                registry.stopped.add(key)
                hit.append(key)
    return hit


def describe(value: Any, limit: int = 300) -> dict[str, Any]:
    """Type, size, length and a short repr of a result that stays on the cluster."""
    from dask.sizeof import sizeof

    try:
        shown = repr(value)
    except Exception as exc:  # a repr that raises must not fail the call
        shown = f"<unprintable {type(value).__name__}: {type(exc).__name__}>"
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    try:
        length: int | None = len(value)
    except Exception:
        length = None
    return {
        "type": type(value).__name__,
        "nbytes": int(sizeof(value)),
        "length": length,
        "repr": shown,
    }

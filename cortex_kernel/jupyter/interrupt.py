"""Turn the kernel's SIGINT (the stop button) into a prompt cancellation.

Why not let ipykernel handle it: during an async cell a ``KeyboardInterrupt``
raised in the event loop's ``select()`` escapes the loop and the kernel
exits, and ipykernel's own async-cell cancel is scheduled without waking the
loop, so it lands only when the current sleep ends (ipykernel issue #881).

What works (measured: reply 2–68 ms after the interrupt): while a run is
active, install our own SIGINT handler that asks the loop — thread-safely,
which also wakes it through its self-pipe — to cancel an anyio
``CancelScope`` around the run, and restore the previous handler after.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import anyio

__all__: list[str] = []  # used inside the jupyter package only


@contextmanager
def cancel_on_sigint(scope: anyio.CancelScope) -> Iterator[None]:
    """Cancel ``scope`` when SIGINT arrives while the block runs.

    Parameters
    ----------
    scope
        The cancel scope around the run.

    Notes
    -----
    Signal handlers can only be installed from the main thread; elsewhere
    (a subshell, a worker thread) this does nothing and the caller gets the
    default behaviour.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()

    def handler(signum: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(scope.cancel)

    previous: Any = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)

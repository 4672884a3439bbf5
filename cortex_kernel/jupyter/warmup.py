"""Warm the model layer in the background once the kernel is up and idle.

The kernel starts without the runtime, pydantic, the view or litellm
(``import litellm`` alone takes 2–4 s; the runtime's pydantic models, the
manifest and the model options ~0.45 s under load), so the first agent
cell used to pay for all of them before its request left. :class:`WarmUp`
imports them in a daemon thread after the kernel has answered its
``kernel_info`` requests (or a few seconds after start, for a front end
that never asks), so neither the kernel's start nor ``kernel_info`` waits
for it.

A cell has the interpreter to itself as far as we can arrange: the work is
split into steps (the runtime, the view, the HTTP stack, litellm, one
streamed request to an in-memory transport, :mod:`cortex_kernel.llm.warm`), and a
step starts only while no cell is executing; one that is already running
goes on (an import cannot be paused), sharing the GIL with the cell. A cell
that needs a module being imported waits for it on Python's per-module
import lock, as it would have imported it itself. Like the first cell, the
warm-up changes nothing process-wide (no environment variable of ours, no
``gc.freeze``; see :func:`~cortex_kernel.llm.litellm_model.load_litellm`).

``CORTEX_WARM_UP=0`` switches it off (the benchmark measures both ways);
with ``CORTEX_MODEL=replay:…`` litellm is not imported (nothing will use it).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable

__all__: list[str] = []  # used inside the jupyter package only

log = logging.getLogger(__name__)


def _import(name: str) -> Callable[[], None]:
    def step() -> None:
        importlib.import_module(name)

    step.__name__ = f"import {name}"
    return step


def _warm_litellm() -> None:  # named for WarmUp.ran
    from ..llm.warm import warm_litellm

    warm_litellm()


def warm_up_steps(environ: dict[str, str] | None = None) -> list[Callable[[], None]]:
    """The steps, in order: what the first agent cell would otherwise import.

    litellm (and the HTTP stack under it) only when the default model may
    need it, i.e. unless ``$CORTEX_MODEL`` names a replay file.
    """
    from ..llm import configured_model

    steps = [
        # The runtime, executors, manifest, model options: pydantic models.
        _import("cortex_kernel.agent"),
        _import("cortex_kernel.jupyter.view"),  # anywidget, ipywidgets
    ]
    if not (configured_model(environ) or "").startswith("replay:"):
        # The OpenAI SDK's resources are imported lazily by the first call.
        steps += [_import(name) for name in ("httpx", "openai", "openai.resources", "aiohttp")]
        steps += [_import("cortex_kernel.llm.litellm_model"), _warm_litellm]
    return steps


class WarmUp:
    """Run :func:`warm_up_steps` in a daemon thread, each step only while idle.

    The kernel calls :meth:`busy` and :meth:`idle` around every cell and
    :meth:`start` once it is ready; :attr:`done` is set when every step has
    run (a failing step is logged and skipped: the first cell then imports
    it and reports the error where the user sees it).
    """

    def __init__(self, steps: list[Callable[[], None]] | None = None) -> None:
        self._steps = steps
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.done = threading.Event()
        #: ``time.monotonic()`` when the thread started (``None`` before).
        self.started_at: float | None = None
        #: The step running now, if any.
        self.current: str | None = None
        #: ``(step name, seconds, ok)`` of each step run, in order.
        self.ran: list[tuple[str, float, bool]] = []

    @property
    def enabled(self) -> bool:
        """Whether ``$CORTEX_WARM_UP`` allows warming (default: yes)."""
        return os.environ.get("CORTEX_WARM_UP", "1").strip().lower() not in ("0", "false", "no")

    def busy(self) -> None:
        """A cell started: the next step waits for :meth:`idle`."""
        self._idle.clear()

    def idle(self) -> None:
        """The cell ended: steps may go on."""
        self._idle.set()

    def start(self) -> bool:
        """Start the thread (once); return whether it was started by this call."""
        with self._lock:
            if self.thread is not None or not self.enabled:
                return False
            self.started_at = time.monotonic()
            self.thread = threading.Thread(target=self._run, name="cortex-warm-up", daemon=True)
            self.thread.start()
            return True

    def _run(self) -> None:
        steps = warm_up_steps() if self._steps is None else self._steps
        try:
            for step in steps:
                self._idle.wait()
                self.current = step.__name__
                started = time.perf_counter()
                ok = True
                try:
                    step()
                except Exception:  # the first cell will meet it again, where it is shown
                    ok = False
                    log.debug("cortex warm-up: %s failed", step.__name__, exc_info=True)
                self.ran.append((step.__name__, time.perf_counter() - started, ok))
                self.current = None
        finally:
            self.done.set()

"""The Cortex kernel: IPython where every cell is a message to the agent.

A subclass of ``IPythonKernel`` (not the bare ``Kernel``, which has no comm
manager, so widget messages from the front end would go unhandled). The
work is done by the input transformer of :mod:`cortex_kernel.jupyter.magics`
in ``kernel_mode``: message cells become a top-level ``await`` of the run,
``%%python`` cells run as Python in the same namespace, and IPython keeps
doing everything else — execution count, history, display, errors,
completion — as usual.

Nothing heavy is imported here, so the kernel starts as fast as the stock
one: the runtime with its pydantic models, the manifest, the model options,
the view and litellm are imported by a background warm-up
(:mod:`cortex_kernel.jupyter.warmup`) once the kernel has answered its
``kernel_info`` requests, while it is idle, so the first message streams as
fast as the next ones (a magic used before that imports what it needs).
``tests/test_imports.py`` lists what must not be imported at start.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from ipykernel.ipkernel import IPythonKernel

from .. import __version__
from .complete import is_complete
from .magics import begin_cell, enable
from .runner import runner_for
from .warmup import WarmUp

__all__ = ["CortexKernel"]

BANNER = (
    f"Cortex Agent {__version__}: every cell is a message to the agent.\n"
    "%%python runs Python in the same namespace; %model, %history, %variables, "
    "%transcript manage the session."
)

# The warm-up starts this long after the *last* kernel_info request: a front
# end asks again until its IOPub subscription is through (jupyter_client
# waits 0.2 s for an IOPub message, then asks again; jupyter_server nudges
# the same way), and a warm-up import holding the GIL then would delay that
# reply (start → ready 1.92 s vs 1.68 s without the warm-up, was 0.2 s after
# the first request). A front end that never asks gets it this long after start.
WARM_UP_AFTER_INFO_S = 0.5
WARM_UP_FALLBACK_S = 3.0


class CortexKernel(IPythonKernel):
    """The ``cortex`` kernel ("Cortex Agent")."""

    implementation = "cortex"
    implementation_version = __version__
    banner = BANNER

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        enable(self.shell, kernel_mode=True)
        # Client sessions that ask is_complete: terminals (jupyter console),
        # which print display_data once and ignore its updates.
        self._terminal_sessions: set[str] = set()
        self.warm_up = WarmUp()
        #: ``time.monotonic()`` of the first kernel_info reply (``None`` before).
        self.kernel_info_at: float | None = None
        self._info_requests = 0  # kernel_info requests so far (the warm-up waits for quiet)
        # The main shell's running execute_request (None between cells), and the
        # lock that orders its end against a re-asserted "busy" (_publish_status).
        self._executing: dict[str, Any] | None = None
        self._executing_lock = threading.Lock()

    def start(self) -> None:
        """Start serving; warm the model layer later even if no front end asks."""
        super().start()  # type: ignore[no-untyped-call]
        self.io_loop.call_later(WARM_UP_FALLBACK_S, self._start_warm_up, 0)

    async def kernel_info_request(self, stream: Any, ident: Any, parent: Any) -> None:
        """Answer, then start the background warm-up once the requests stop."""
        await super().kernel_info_request(stream, ident, parent)  # type: ignore[no-untyped-call]
        if self.kernel_info_at is None:
            self.kernel_info_at = time.monotonic()
        self._info_requests += 1
        self.io_loop.call_later(WARM_UP_AFTER_INFO_S, self._start_warm_up, self._info_requests)

    def _start_warm_up(self, after_request: int) -> None:
        """Start the warm-up unless a kernel_info request came since this was scheduled."""
        if after_request == self._info_requests:
            self.warm_up.start()

    def _parent_session(self) -> str:
        parent = self.get_parent()  # type: ignore[no-untyped-call]
        return str((parent or {}).get("header", {}).get("session", ""))

    def _publish_status(self, status: str, channel: str, parent: Any = None) -> None:
        """Publish a status; after another request's "idle" mid-cell, "busy" again.

        JupyterLab shows one kernel status, set by every status message: the
        ``create_subshell_request`` it sends on the control channel when a run's
        view opens its comm (comms over subshells) ends with an "idle", and the
        status bar (and jupyter_server's ``execution_state``, which the idle
        culler reads) then said "Idle" for the rest of the run. A "busy" whose
        parent is the running execute_request puts it right; clients that wait
        for that request's own "idle" are unaffected.
        """
        publish: Callable[..., None] = super()._publish_status
        publish(status, channel, parent)
        if status != "idle":
            return
        # Control and subshell requests end on other threads while a cell runs.
        with self._executing_lock:
            if self._executing is not None:
                publish("busy", "shell", parent=self._executing)

    def do_is_complete(self, code: str) -> dict[str, str]:  # type: ignore[override]
        """A message is complete at Enter unless inside a fence or an open tag.

        A ``%%python`` cell continues until a blank line, as IPython's cell
        magics do in a terminal.
        """
        self._terminal_sessions.add(self._parent_session())
        assert self.shell is not None
        manager = self.shell.input_transformer_manager
        return is_complete(code, manager.check_complete)

    async def do_execute(
        self,
        code: str,
        silent: bool,
        store_history: bool = True,
        user_expressions: dict[str, Any] | None = None,
        allow_stdin: bool = False,
        *,
        cell_meta: dict[str, Any] | None = None,
        cell_id: str | None = None,
    ) -> dict[str, Any]:
        """Run a cell; silent requests (tools, inspectors) are always Python."""
        if silent and not code.lstrip().startswith("%%"):
            # Front-end extensions send Python silently; it is not a message.
            code = "%%python\n" + code
        begin_cell(code)  # only this text is read as a message; magics' bodies are Python
        # A terminal gets the run's plain-text view as it changes (see AgentRunner.run).
        runner_for(self.shell).terminal = self._parent_session() in self._terminal_sessions
        self.warm_up.busy()  # no new warm-up step while a cell runs
        parent: dict[str, Any] = self.get_parent("shell") or {}  # type: ignore[no-untyped-call]
        header = parent.get("header") or {}
        main_shell = bool(header) and header.get("subshell_id") is None
        if main_shell:
            with self._executing_lock:
                self._executing = parent
        try:
            reply: dict[str, Any] = await super().do_execute(  # type: ignore[no-untyped-call]
                code,
                silent,
                store_history=store_history,
                user_expressions=user_expressions,
                allow_stdin=allow_stdin,
                cell_meta=cell_meta,
                cell_id=cell_id,
            )
        finally:
            if main_shell:
                # Before ipykernel publishes this cell's "idle": no "busy" after it.
                with self._executing_lock:
                    self._executing = None
            self.warm_up.idle()
        return reply

    @property
    def kernel_info(self) -> dict[str, Any]:
        """IPython's, without the debugger: the kernelspec says it is not supported.

        Message cells are not Python, so the debugger could not step through
        them; JupyterLab reads both places, and they must agree.
        """
        info: dict[str, Any] = dict(super().kernel_info)
        features = [f for f in info.get("supported_features", []) if f != "debugger"]
        info["supported_features"] = features
        info["debugger"] = False
        return info

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        """Cancel the agent's background work (and its subprocesses) before exiting."""
        from .runner import existing_runner

        runner = existing_runner(self.shell)
        if runner is not None and runner.loop is not None and not runner.loop.is_closed():
            # ipykernel answers shutdown on the control thread's own loop; the
            # session's tasks live on the shell's loop, so close it there.
            future = asyncio.run_coroutine_threadsafe(runner.aclose(), runner.loop)
            try:
                await asyncio.wait_for(asyncio.wrap_future(future), timeout=3)
            except Exception:  # a stuck or failing close must not block the shutdown
                self.log.warning("cortex: background work did not close cleanly", exc_info=True)
        reply: dict[str, Any] = super().do_shutdown(restart)  # type: ignore[no-untyped-call]
        return reply

    # Cells are prose for the agent: markdown is what front ends should
    # highlight and what `nbconvert --to script` should write. Exporters
    # highlight with Pygments' "cortex" lexer (jupyter/lexer.py): markdown,
    # and %%python cells as Python.
    language_info = {  # noqa: RUF012 - ipykernel's own attribute, read-only by convention
        "name": "markdown",
        "mimetype": "text/markdown",
        "file_extension": ".md",
        "codemirror_mode": "markdown",
        "pygments_lexer": "cortex",
    }

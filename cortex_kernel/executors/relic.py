"""``relic`` actions: persistent services started on first use and kept across cells.

``{"name": RELIC, "operation": OP, "parameters": {...}}`` calls operation OP
of the relic RELIC (docs/relics.md). A relic lives in a :class:`RelicRegistry`
that belongs to whoever outlives the runs — the kernel (one registry per
kernel, shared by every session and sub-agent), ``cortex-kernel run``, or a
session built without one (it then owns and closes its own) — so a relic
keeps its state across actions, runs and cells until the user stops it
(``%relics stop NAME``, :meth:`RelicRegistry.stop`) or its owner closes.

Strategy
--------
Each kind is one small class (:class:`Relic`): ``start`` brings it up,
``alive`` says whether it still is (a cheap look: ``poll()`` of a process,
the state of a container), ``call`` runs one operation, ``stop`` kills it
synchronously and never raises — so ``%relics stop`` (a sync magic), the
kernel's shutdown and an ``atexit`` safety net can all use it. A call first
looks at ``alive``: a relic that died since its last use (its process exited,
its container is gone, its object raised :class:`RelicCrashed`) is started
afresh and the call goes on, with a ``warning`` event that says so. Starting
is serialised per relic, calls are not (a Python object's sync methods run
one at a time on the relic's own thread).
"""

from __future__ import annotations

import atexit
import contextlib
import re
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import anyio
import anyio.to_thread

from ..exceptions import RelicCrashed, RelicError, UnknownActionError
from ..protocol.models import Action
from ..protocol.parser_events import WarningEvent
from ..runtime.ports import ExecutionContext, Executor
from ..runtime.run_events import scoped_emit
from ..runtime.tools import closest_names
from .approval import ask_approval
from .relic_base import NO_PARAMETERS, Relic, RelicPlace
from .relic_spec import PythonRelicSpec, RelicSpec, ServerRelicSpec, SqliteRelicSpec

__all__ = ["RelicExecutor", "RelicRegistry", "RelicStatus"]


class RelicState(StrEnum):
    """Where a relic is in its life."""

    NOT_STARTED = "not started"
    RUNNING = "running"
    CRASHED = "crashed"
    FAILED = "failed"  # could not start; the next use tries again
    STOPPED = "stopped"  # by the user; the next use starts it again


def make_relic(spec: RelicSpec, place: RelicPlace) -> Relic:
    """The :class:`Relic` for ``spec`` (its kind's module is imported on first use)."""
    if isinstance(spec, PythonRelicSpec | SqliteRelicSpec):
        from .relic_python import PythonRelic

        return PythonRelic(spec, place)
    if isinstance(spec, ServerRelicSpec):
        from .relic_server import ServerRelic

        return ServerRelic(spec, place)
    from .relic_docker import DockerRelic

    return DockerRelic(spec, place)


@dataclass
class RelicStatus:
    """One line of ``%relics``: a relic and how it is doing.

    Attributes
    ----------
    name, kind, state
        What it is and where it is in its life.
    uptime
        Seconds since it (last) started, ``None`` when not running.
    calls
        Operations called since it was declared.
    restarts
        Times it was started again after a crash.
    detail
        Process id, container id…
    error
        The last start failure or crash.
    """

    name: str
    kind: str
    state: str
    uptime: float | None
    calls: int
    restarts: int
    detail: str = ""
    error: str | None = None


@dataclass
class _Handle:
    relic: Relic
    state: RelicState = RelicState.NOT_STARTED
    started: float | None = None
    calls: int = 0
    restarts: int = 0
    error: str | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)


# What may follow a server's "POST /": an operation name, never a path or a query.
_OPERATION = re.compile(r"[A-Za-z_][\w-]*")

_LIVE: weakref.WeakSet[RelicRegistry] = weakref.WeakSet()


@atexit.register
def _stop_everything() -> None:
    # The safety net: an interpreter that exits without closing its registry
    # (a kernel whose shutdown timed out) still leaves no process or container.
    for registry in list(_LIVE):
        registry.stop_all()


class RelicRegistry:
    """The relics of one owner (a kernel, a headless run), by name.

    Examples
    --------
    >>> registry = RelicRegistry()
    >>> registry.status()
    []
    """

    def __init__(self) -> None:
        self._handles: dict[str, _Handle] = {}
        _LIVE.add(self)

    def declare(self, spec: RelicSpec, place: RelicPlace) -> None:
        """Make ``spec`` known (it starts on first use).

        The same declaration again (a session rebuilt from the same manifest)
        keeps the running relic; a different one under a taken name stops the
        old relic and replaces it.
        """
        current = self._handles.get(spec.name)
        if current is not None and current.relic.spec == spec and current.relic.place == place:
            return
        relic = make_relic(spec, place)
        if isinstance(spec.confirm, list):
            # An operation that does not exist would never ask: say so now.
            known = relic.operations()
            unknown = sorted(op for op in spec.confirm if op not in known)
            if unknown:
                raise RelicError(
                    f"{place.source} relics '{spec.name}': confirm names no operation of it: "
                    f"{', '.join(unknown)} (its operations: {', '.join(sorted(known)) or 'none'})"
                )
        if current is not None:
            current.relic.stop()
        self._handles[spec.name] = _Handle(relic)

    def spec(self, name: str) -> RelicSpec:
        """The manifest entry of relic ``name``.

        Raises
        ------
        UnknownActionError
            No relic of that name.
        """
        return self._get(name).relic.spec

    def names(self) -> list[str]:
        """The declared relics' names."""
        return list(self._handles)

    def catalog(self, names: list[str]) -> list[dict[str, Any]]:
        """``{"name", "description", "operations"}`` of each of ``names``, for the prompt."""
        out = []
        for name in names:
            relic = self._handles[name].relic
            operations = {
                op: {k: v for k, v in described.items() if v and v != NO_PARAMETERS}
                for op, described in relic.operations().items()
            }
            description = relic.spec.description or f"a {relic.spec.kind} relic"
            out.append({"name": name, "description": description, "operations": operations})
        return out

    def check(self, name: str, operation: Any, allowed: list[str]) -> str | None:
        """Why ``operation`` of relic ``name`` cannot be called, or ``None``."""
        if name not in allowed or name not in self._handles:
            close = closest_names(name, allowed)
            hint = ("did you mean " + " or ".join(f"'{c}'" for c in close) + "? ") if close else ""
            return f"unknown relic '{name}'; {hint}relics: {', '.join(allowed) or 'none'}"
        if not isinstance(operation, str) or not operation:
            return f'a relic action needs an "operation" string; {self._ops(name)}'
        if not _OPERATION.fullmatch(operation):
            return f"bad operation name {operation!r} (letters, digits, _ and -); {self._ops(name)}"
        known = self._handles[name].relic.operations()
        if known and operation not in known:
            close = closest_names(operation, list(known))
            hint = ("did you mean " + " or ".join(f"'{c}'" for c in close) + "? ") if close else ""
            return f"relic '{name}' has no operation '{operation}'; {hint}{self._ops(name)}"
        return None

    def _ops(self, name: str) -> str:
        known = sorted(self._handles[name].relic.operations())
        return f"its operations: {', '.join(known) or 'any (not declared)'}"

    def _get(self, name: str) -> _Handle:
        handle = self._handles.get(name)
        if handle is None:
            raise UnknownActionError(
                f"unknown relic '{name}'; relics: {', '.join(self._handles) or 'none'}"
            )
        return handle

    async def call(
        self,
        name: str,
        operation: str,
        parameters: dict[str, Any] | None = None,
        *,
        warn: Callable[[str], None] | None = None,
        approve: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> Any:
        """Call ``operation`` of relic ``name``, starting (or restarting) it first if needed.

        Parameters
        ----------
        name, operation, parameters
            What to call (the parameters are checked against the operation's schema).
        warn
            Told about a restart after a crash (the executor makes it a ``warning`` event).
        approve
            Awaited with the checked parameters before the relic starts or
            is called; raising refuses the call (a human's approval).

        Raises
        ------
        UnknownActionError
            No relic of that name.
        RelicError
            It could not start, the parameters are bad, or the operation failed.
        """
        handle = self._get(name)
        relic = handle.relic
        arguments = relic.validate(operation, dict(parameters or {}))
        if approve is not None:
            await approve(arguments)
        await self._ensure_running(handle, warn)
        handle.calls += 1
        try:
            with anyio.fail_after(relic.spec.timeout):
                return await relic.call(operation, arguments)
        except TimeoutError:
            raise RelicError(
                f"relic '{name}': operation '{operation}' timed out after "
                f"{relic.spec.timeout:g} s (the relic keeps running)"
            ) from None
        except RelicCrashed as exc:
            handle.state, handle.error = RelicState.CRASHED, str(exc)
            relic.stop()
            raise RelicCrashed(
                f"relic '{name}' crashed during '{operation}': {exc}; its next use restarts it"
            ) from None

    async def _ensure_running(self, handle: _Handle, warn: Callable[[str], None] | None) -> None:
        if handle.state is RelicState.RUNNING and not handle.relic.slow_alive:
            # The common case, without a lock or a thread: a cheap look says it runs.
            why = handle.relic.alive()
            if why is None:
                return
            handle.state, handle.error = RelicState.CRASHED, why
        async with handle.lock:
            relic = handle.relic
            if handle.state is RelicState.RUNNING:
                why = await anyio.to_thread.run_sync(relic.alive)
                if why is None:
                    return
                handle.state, handle.error = RelicState.CRASHED, why
            if handle.state is RelicState.CRASHED:
                relic.stop()
                handle.restarts += 1
                if warn is not None:
                    warn(f"relic '{relic.name}' had crashed ({handle.error}); restarted it")
            await self._start(handle)

    async def _start(self, handle: _Handle) -> None:
        relic = handle.relic
        try:
            with anyio.fail_after(relic.spec.startup_timeout):
                await relic.start()
        except TimeoutError:
            relic.stop()
            handle.state = RelicState.FAILED
            handle.error = f"did not start within {relic.spec.startup_timeout:g} s"
            raise RelicError(f"relic '{relic.name}' {handle.error} (startup_timeout)") from None
        except BaseException as exc:
            relic.stop()
            handle.state = RelicState.FAILED
            handle.error = str(exc) or type(exc).__name__
            if isinstance(exc, RelicError):
                raise
            if isinstance(exc, Exception):
                raise RelicError(f"relic '{relic.name}' failed to start: {handle.error}") from exc
            raise
        handle.state, handle.started, handle.error = RelicState.RUNNING, time.monotonic(), None

    def status(self) -> list[RelicStatus]:
        """Every declared relic: name, kind, state, uptime, calls, restarts."""
        now = time.monotonic()
        out = []
        for name, handle in self._handles.items():
            running = handle.state is RelicState.RUNNING and handle.started is not None
            out.append(
                RelicStatus(
                    name=name,
                    kind=handle.relic.spec.kind,
                    state=handle.state.value,
                    uptime=(now - handle.started) if running and handle.started else None,
                    calls=handle.calls,
                    restarts=handle.restarts,
                    detail=handle.relic.detail() if running else "",
                    error=handle.error,
                )
            )
        return out

    def describe(self) -> str:
        """What ``%relics`` prints: one line per relic."""
        rows = self.status()
        if not rows:
            return "No relics: a manifest declares them (relics: [...]); see docs/relics.md."
        lines = []
        for row in rows:
            uptime = f"up {_duration(row.uptime)}" if row.uptime is not None else "—"
            line = f"{row.name}  {row.kind}  {row.state}  {uptime}  calls {row.calls}"
            if row.restarts:
                line += f"  restarted {row.restarts}×"
            if row.detail:
                line += f"  ({row.detail})"
            lines.append(line)
            if row.error and row.state in ("crashed", "failed"):
                lines.append(f"  error: {row.error}")
        return "\n".join(lines)

    def stop(self, name: str) -> bool:
        """Stop relic ``name`` (its next use starts it again); ``False`` if it was not running.

        Raises
        ------
        UnknownActionError
            No relic of that name (the message lists them).
        """
        handle = self._get(name)
        was_running = handle.state is RelicState.RUNNING
        handle.relic.stop()
        if handle.state is not RelicState.NOT_STARTED:
            handle.state, handle.started = RelicState.STOPPED, None
        return was_running

    def stop_all(self) -> int:
        """Stop every relic; returns how many were running."""
        count = 0
        for name in list(self._handles):
            with contextlib.suppress(Exception):
                count += self.stop(name)
        return count

    async def aclose(self) -> None:
        """Stop every relic (off the event loop; shielded from cancellation)."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.stop_all)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"


class RelicExecutor(Executor):
    """Runs ``relic`` actions on the relics a manifest declares.

    Parameters
    ----------
    registry
        Where the relics live (shared with the other sessions of the owner).
    names
        The relics this agent may use.
    confirm_network
        The agent's ``confirm.network``: docker relics with a network ask a
        human before every operation, as docker tools with one do.
    """

    def __init__(
        self, registry: RelicRegistry, names: list[str], confirm_network: bool = False
    ) -> None:
        self.registry = registry
        self.names = list(names)
        self.confirm_network = confirm_network

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        """Unknown relic or operation, or a missing operation: an ``action_error``."""
        body = action.body
        operation = body.get("operation", body.get("op"))
        return self.registry.check(str(action.name), operation, self.names)

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        """Call the operation (starting the relic on first use); its result is the action's.

        An operation its relic's ``confirm`` covers waits for the context's
        approver first, with the checked parameters (before the relic starts).
        """
        action_id = action.id or "?"
        emit = scoped_emit(context.emit)  # a workflow's step reports as w1/a1

        def warn(message: str) -> None:
            emit(WarningEvent(span=(0, 0), t=context.clock(), id=action_id, message=message))

        operation = body.get("operation")
        if operation is None and "op" in body:
            operation = body["op"]
            warn('relic action: "op" read as "operation"')
        parameters = body.get("parameters", {})
        if not isinstance(parameters, dict):
            raise RelicError(f"relic '{body.get('name')}': \"parameters\" must be a JSON object")
        name, operation = str(body.get("name")), str(operation)
        approve = None
        if self.registry.spec(name).confirms(operation, self.confirm_network):

            async def approve(arguments: dict[str, Any]) -> None:
                await ask_approval(
                    context,
                    action_id,
                    f"{name}.{operation}",
                    "relic",
                    arguments,
                    error=RelicError,
                    what=f"relic operation '{name}.{operation}'",
                )

        return await self.registry.call(name, operation, parameters, warn=warn, approve=approve)

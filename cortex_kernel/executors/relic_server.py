"""Server relics: a subprocess serving HTTP on 127.0.0.1, kept across cells.

At start a free port is chosen; ``{port}`` in the command (and ``$PORT`` in
its environment) is that port. The process runs in its own session with its
output in a log file (its tail is in every start or crash message) and a
minimal environment (PATH, HOME, LANG…, the relic's ``pass_env`` and
``env``: :func:`~.child_env.child_environment`). It is
ready when ``GET http://127.0.0.1:PORT{health}`` answers 2xx — polled every
50 ms until ``startup_timeout``: a health check has no event to wait on. An
operation is ``POST /OPERATION`` with the parameters as a JSON body; a 2xx
answer is the result (JSON when it is JSON), anything else fails the call
with the status and the body's start. Stopping kills the process group
(SIGTERM, then SIGKILL after 2 s).

The standard library's HTTP client is used from a worker thread: one
loopback request per call costs well under a millisecond, it needs no
event-loop-bound connection pool, and :meth:`ServerRelic.stop` stays
synchronous. An interrupted call abandons its thread, which ends when the
server answers or dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread

from ..exceptions import RelicCrashed, RelicError
from .child_env import child_environment
from .command import decode_output
from .relic_base import Relic
from .relic_spec import ServerRelicSpec

__all__: list[str] = []


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _read_tail(path: Path | None, chars: int = 1500) -> str:
    if path is None:
        return ""
    try:
        data = path.read_bytes()[-chars:]
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace").strip()


class ServerRelic(Relic):
    """A ``server`` relic: ``command`` serving HTTP/JSON on a port chosen at start."""

    kind = "server"
    spec: ServerRelicSpec

    _process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None
    _log_path: Path | None = None
    port: int | None = None

    def _with_log(self, message: str) -> str:
        text = _read_tail(self._log_path)
        return f"{message}; its output ends: {text}" if text else message

    async def start(self) -> None:
        """Start the process and wait until its health check answers."""
        spec = self.spec
        self.port = port = _free_port()
        argv = [part.replace("{port}", str(port)) for part in spec.command]
        # Not the kernel's environment: its secrets stay out of the server's reach.
        env = child_environment(spec.pass_env, {**spec.env, "PORT": str(port)})
        cwd = (self.place.base / spec.cwd).resolve() if spec.cwd else self.place.base
        handle, name = tempfile.mkstemp(prefix=f"cortex-relic-{spec.name}-", suffix=".log")
        self._log_path = Path(name)
        self._log = os.fdopen(handle, "wb")
        self._process = self._spawn(argv, env, cwd)
        url = f"http://127.0.0.1:{port}{spec.health}"
        while True:
            code = self._process.poll()
            if code is not None:
                said = f"relic '{spec.name}' exited with code {code} before it was ready"
                raise RelicError(self._with_log(said))
            if await anyio.to_thread.run_sync(_healthy, url):
                return
            await anyio.sleep(0.05)

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,  # a stop kills its children too
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            raise RelicError(
                f"relic '{self.name}' could not run {argv[0]!r}: {exc.strerror or exc}"
            ) from None

    def alive(self) -> str | None:
        """``None`` while the process runs."""
        if self._process is None:
            return "it is not running"
        code = self._process.poll()
        return None if code is None else self._with_log(f"its process exited with code {code}")

    async def call(self, operation: str, parameters: dict[str, Any]) -> Any:
        """``POST /OPERATION`` with the parameters as JSON."""
        url = f"http://127.0.0.1:{self.port}/{operation}"
        data = json.dumps(parameters).encode()
        try:
            status, body = await anyio.to_thread.run_sync(_post, url, data, abandon_on_cancel=True)
        except OSError as exc:
            why = self.alive()
            if why is not None:
                raise RelicCrashed(why) from None
            raise RelicError(f"relic '{self.name}': '{operation}' failed: {exc}") from None
        if not 200 <= status < 300:
            text = body.decode("utf-8", errors="replace").strip()[:500]
            raise RelicError(f"relic '{self.name}': '{operation}' answered HTTP {status}: {text}")
        return decode_output(body)

    def stop(self) -> None:
        """Kill the process group (TERM, then KILL), close and remove the log."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        elif process is not None:
            # Exited by itself: its children (same group) may still run.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        log, self._log = self._log, None
        if log is not None:
            log.close()
        path, self._log_path = self._log_path, None
        if path is not None:
            path.unlink(missing_ok=True)

    def detail(self) -> str:
        """Pid and port."""
        pid = self._process.pid if self._process is not None else "?"
        return f"pid {pid}, port {self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process is not None else None


def _die_with_parent() -> None:
    # Linux: a kernel killed with SIGKILL (no shutdown, no atexit) takes its
    # servers with it. Elsewhere the kernel's shutdown and atexit still stop them.
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# No proxy: the server is on our loopback, whatever http_proxy says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _healthy(url: str) -> bool:
    try:
        with _OPENER.open(url, timeout=1) as answer:
            return 200 <= int(answer.status) < 300
    except (OSError, ValueError):
        return False


def _post(url: str, data: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with _OPENER.open(request) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()

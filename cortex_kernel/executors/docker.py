"""Docker tools: one hardened, short-lived container per call (the ``docker`` SDK).

Defaults (each may be loosened only by the tool's manifest entry):
no network (``network_mode="none"``), a read-only root filesystem with a
small ``/tmp`` tmpfs, every capability dropped, ``no-new-privileges``,
memory (swap included), CPU and pids limits, an unprivileged user, a
size-capped log, and the label ``cortex-kernel=tool`` so our containers can
be found (relics reuse :class:`ContainerSpec` for their long-lived
containers, labelled ``relic``). The parameters go in as JSON on stdin;
stdout is the result (JSON when it is JSON), read from the container as it
runs and kept up to ``max_output`` bytes (the rest is read and dropped).

A kernel killed with SIGKILL cannot remove its containers: each carries the
label ``cortex-kernel.owner=HOST:PID``, and every Docker tool call or relic
start removes the containers of this host whose process is gone
(:func:`sweep_orphans`).

The SDK is blocking, so each call runs in a worker thread. Whatever ends the
call — exit, timeout, a cancelled run, an interrupted cell — the container
is killed and removed in a shielded ``finally`` before the call returns.
``DOCKER_HOST`` (or the manifest's ``executors.docker.host``) selects the
engine, local or remote, as the Docker CLI does, with its TLS settings
(``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``, or the manifest's
``tls_verify``/``cert_path``). A manifest's engine travels with the tools
and relics built from it as a :class:`DockerEngine`: two manifests naming
the same host with different TLS settings each keep their own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from ..exceptions import ToolError
from .command import CommandResult
from .memory import MEMORY_PATTERN

__all__ = ["ContainerSpec", "DockerEngine", "DockerSpec", "docker_client", "run_container"]

#: Label on every container we start (value: ``tool``), used to find strays.
LABEL = "cortex-kernel"

#: ``host:pid`` of the process that started a container.
OWNER_LABEL = f"{LABEL}.owner"

#: The engine keeps at most this much of a container's output (json-file
#: ``max-size``, two files): a tool printing gigabytes cannot fill its disk.
LOG_LIMIT = {"max-size": "1m", "max-file": "2"}


def owner() -> str:
    """This process as :data:`OWNER_LABEL` names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def sweep_orphans(client: Any) -> int:
    """Remove our containers whose kernel died without removing them (SIGKILL).

    Tool and relic containers alike, only those started from this host by a
    process that no longer exists: a live kernel's are never touched. One
    engine request when there is nothing to remove. Returns how many were removed.
    """
    host = socket.gethostname()
    removed = 0
    for found in client.api.containers(all=True, filters={"label": OWNER_LABEL}):
        started_by, _, pid = str((found.get("Labels") or {}).get(OWNER_LABEL, "")).rpartition(":")
        if started_by == host and pid.isdigit() and _dead(int(pid)):
            with contextlib.suppress(Exception):
                client.api.remove_container(found["Id"], force=True)
                removed += 1
    return removed


class DockerSpec(BaseModel):
    """A container as configured (a Docker tool's or relic's ``docker:``): image, command, limits.

    The defaults are the hardened ones; :class:`ContainerSpec` adds what the
    call decides (network, mounts, labels of ours).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str | None = Field(
        default=None, min_length=1, description="none: the sandbox image built on this machine"
    )
    command: list[str] = Field(min_length=1)
    memory: str = Field(default="256m", pattern=MEMORY_PATTERN)
    cpus: float = Field(default=1.0, gt=0)
    pids: int = Field(default=64, ge=8)
    user: str = "65534:65534"
    tmpfs_size: str = Field(default="16m", pattern=MEMORY_PATTERN)
    env: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="extra container labels (cortex-kernel=tool is always set)",
    )


@dataclass
class ContainerSpec:
    """How to run one container.

    Attributes
    ----------
    image, command
        What to run (``image`` must be set by the time the container is created).
    memory, cpus, pids
        Limits (``memory`` in Docker's notation: ``256m``).
    user
        ``uid:gid`` inside the container.
    network
        Give it the default bridge network (else none).
    workspace, workspace_mode
        A host directory mounted at ``/workspace`` (``ro`` or ``rw``), or ``None``.
    tmpfs_size
        Size of the writable ``/tmp``.
    env, labels
        Extra environment and labels (:data:`OWNER_LABEL` is ours unless
        ``labels`` says otherwise).
    """

    image: str | None
    command: Sequence[str]
    memory: str = "256m"
    cpus: float = 1.0
    pids: int = 64
    user: str = "65534:65534"
    network: bool = False
    workspace: str | None = None
    workspace_mode: str = "ro"
    tmpfs_size: str = "16m"
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    def create_options(self, api: Any) -> dict[str, Any]:
        """Keyword arguments for the low-level ``create_container`` of ``api``."""
        binds = {}
        if self.workspace:
            binds[os.path.abspath(self.workspace)] = {
                "bind": "/workspace",
                "mode": self.workspace_mode,
            }
        host_config = api.create_host_config(
            network_mode="bridge" if self.network else "none",
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.tmpfs_size},mode=1777"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=self.memory,
            memswap_limit=self.memory,
            nano_cpus=int(self.cpus * 1e9),
            pids_limit=self.pids,
            binds=binds or None,
            log_config={"type": "json-file", "config": dict(LOG_LIMIT)},
        )
        return {
            "image": self.image,
            "command": list(self.command),
            "stdin_open": True,
            "user": self.user,
            "environment": dict(self.env),
            "labels": {LABEL: "tool", OWNER_LABEL: owner(), **self.labels},
            "working_dir": "/workspace" if self.workspace else "/tmp",
            "network_disabled": not self.network,
            "host_config": host_config,
        }


def _engine_address(host: str | None) -> str:
    return host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


@dataclass(frozen=True)
class DockerEngine:
    """Which Docker engine to use, and how to reach it.

    Attributes
    ----------
    host
        The engine's address (``tcp://build-box:2376``); ``None``:
        ``DOCKER_HOST``, else the current Docker context or the local socket.
    tls_verify
        Check the engine's certificate against ``cert_path``'s ``ca.pem``
        (``None``: ``DOCKER_TLS_VERIFY`` decides).
    cert_path
        A folder with ``ca.pem``, ``cert.pem`` and ``key.pem``, as
        ``DOCKER_CERT_PATH`` (``None``: that variable decides).

    ``tls_verify`` and ``cert_path`` apply only with ``host`` set: without
    it the environment names the engine, and its own TLS settings go with it.
    """

    host: str | None = None
    tls_verify: bool | None = None
    cert_path: str | None = None

    def environment(self) -> dict[str, str]:
        """The environment ``docker.from_env`` would read for this engine.

        A copy of ``os.environ`` with this engine's settings over it; the
        process's own environment is never changed.
        """
        env = dict(os.environ)
        if self.host:
            env["DOCKER_HOST"] = self.host
            if self.cert_path is not None:
                env["DOCKER_CERT_PATH"] = self.cert_path
            if self.tls_verify is not None:
                env["DOCKER_TLS_VERIFY"] = "1" if self.tls_verify else ""
        return env


_ENGINE_API: Any = None


def _engine_api() -> Any:
    """``docker.APIClient`` whose TLS CA file wins over the environment's CA bundle.

    requests lets ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` override a
    session's own ``verify`` file (psf/requests#3829): with either set (as on
    many CI machines) an engine's ``ca.pem`` would be ignored and its
    certificate refused.
    """
    global _ENGINE_API
    if _ENGINE_API is None:
        import docker

        class EngineAPI(docker.APIClient):  # type: ignore[misc]
            def merge_environment_settings(self, *args: Any) -> Any:
                url, proxies, stream, verify, cert = args
                if verify is None and isinstance(self.verify, str):
                    verify = self.verify
                return super().merge_environment_settings(url, proxies, stream, verify, cert)

        _ENGINE_API = EngineAPI
    return _ENGINE_API


def _why(exc: BaseException) -> str:
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "SSLError" in text or "SSL" in text:
        reason = "certificate verify failed" if "CERTIFICATE_VERIFY_FAILED" in text else "TLS error"
        return (
            f"TLS with the engine failed ({reason}); check DOCKER_CERT_PATH or the manifest's "
            "executors.docker.cert_path (ca.pem, cert.pem, key.pem) and DOCKER_TLS_VERIFY"
        )
    return type(exc).__name__


def docker_client(engine: DockerEngine | None = None) -> Any:
    """A client for ``engine`` (default: ``DOCKER_HOST`` or the local socket).

    Raises
    ------
    ToolError
        When no engine answers, naming the address and how to start one.
    """
    import docker
    import docker.errors

    engine = engine or DockerEngine()
    address = _engine_address(engine.host)
    try:
        # As docker.from_env, on the environment with this engine's settings over it.
        environment = engine.environment()
        options = docker.utils.kwargs_from_env(environment=environment)
        if "base_url" not in options:  # as docker.from_env: the current docker context
            for name, value in docker.ContextAPI.kwargs_from_context(
                environment=environment
            ).items():
                options.setdefault(name, value)
        client = docker.DockerClient.__new__(docker.DockerClient)
        client.api = _engine_api()(timeout=30, **options)
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        raise ToolError(
            f"no Docker engine answers at {address} ({_why(exc)}); start one "
            "(`sudo systemctl start docker`, or Docker Desktop) or point DOCKER_HOST at a "
            "running engine"
        ) from None
    return client


def remove_container(container: Any) -> None:
    """Kill and remove ``container`` (already gone is fine)."""
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise


@dataclass
class ContainerRun:
    """A finished container call, with the moments of interest (for benchmarks)."""

    result: CommandResult
    oom_killed: bool
    started: float
    created: float


async def run_container(
    spec: ContainerSpec,
    *,
    stdin: bytes = b"",
    time_limit: float | None = None,
    engine: DockerEngine | None = None,
    name: str = "docker",
    max_output: int = 10_000_000,
) -> ContainerRun:
    """Run ``spec`` to completion; the container is always removed.

    Stdout and stderr are read while the container runs (attached before it
    starts), ``max_output`` bytes of each kept and the rest dropped: memory
    stays bounded whatever the tool prints (``result.truncated`` says so).
    Orphans of dead kernels are swept first (:func:`sweep_orphans`).

    Raises
    ------
    ToolError
        No engine, a missing image, or a call past ``time_limit``.
    """
    import docker.errors

    if spec.image is None:
        raise ToolError(f"tool '{name}': no image to run")
    client = await anyio.to_thread.run_sync(docker_client, engine)
    container: Any = None
    output: Any = None
    out, err = bytearray(), bytearray()
    cut = [False, False]
    t0 = time.perf_counter()

    def create() -> str:
        with contextlib.suppress(docker.errors.DockerException):
            sweep_orphans(client)  # best effort: the call itself does not depend on it
        created: str = client.api.create_container(**spec.create_options(client.api))["Id"]
        return created

    def collect() -> None:
        # A connection lost mid-way (the container removed under it) ends the output.
        with contextlib.suppress(OSError, docker.errors.DockerException):
            for chunk_out, chunk_err in output:
                if chunk_out:
                    cut[0] = _keep(out, chunk_out, max_output) or cut[0]
                if chunk_err:
                    cut[1] = _keep(err, chunk_err, max_output) or cut[1]

    try:
        try:
            # Shielded: a cancellation landing as the create returns would
            # otherwise lose the id, and with it the container.
            with anyio.CancelScope(shield=True):
                created_id = await anyio.to_thread.run_sync(create)
                container = await anyio.to_thread.run_sync(client.containers.get, created_id)
        except docker.errors.ImageNotFound:
            raise ToolError(
                f"tool '{name}': image {spec.image!r} is not on the Docker engine at "
                f"{_engine_address(engine.host if engine else None)}; build or pull it first"
            ) from None
        created = time.perf_counter() - t0
        with anyio.fail_after(time_limit):
            # Attach before start so no input is lost and no output missed;
            # stdin_once closes stdin after our end is shut.
            stream = await anyio.to_thread.run_sync(
                lambda: client.api.attach_socket(
                    container.id, params={"stdin": 1, "stdout": 0, "stderr": 0, "stream": 1}
                )
            )
            output = await anyio.to_thread.run_sync(
                lambda: client.api.attach(
                    container.id, stdout=True, stderr=True, stream=True, logs=False, demux=True
                )
            )
            async with anyio.create_task_group() as group:
                # Ends when the container's output does (it exited or was removed).
                group.start_soon(lambda: anyio.to_thread.run_sync(collect, abandon_on_cancel=True))
                await anyio.to_thread.run_sync(container.start, abandon_on_cancel=True)
                started = time.perf_counter() - t0
                await anyio.to_thread.run_sync(_finish_stdin, stream, stdin, abandon_on_cancel=True)
                status = await anyio.to_thread.run_sync(container.wait, abandon_on_cancel=True)
        await anyio.to_thread.run_sync(container.reload)
        oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
    except TimeoutError:
        raise ToolError(
            f"tool '{name}' timed out after {time_limit:g} s; its container was killed and removed"
        ) from None
    except docker.errors.DockerException as exc:
        raise ToolError(f"tool '{name}': the Docker engine failed: {exc}") from None
    finally:
        if container is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_container, container)
        if output is not None:
            with contextlib.suppress(Exception):
                output.close()
    code = int(status.get("StatusCode", -1))
    result = CommandResult(code, bytes(out), bytes(err), truncated=cut[0] or cut[1])
    return ContainerRun(result, oom, started, created)


def _keep(into: bytearray, chunk: bytes, limit: int) -> bool:
    """Append what fits of ``chunk`` under ``limit``; whether some was dropped."""
    room = limit - len(into)
    if room > 0:
        into += chunk[:room]
    return len(chunk) > room


def _finish_stdin(stream: Any, data: bytes) -> None:
    raw = getattr(stream, "_sock", stream)
    try:
        if data:
            raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)
    finally:
        raw.close()

"""Docker relics: one long-lived hardened container, operations run in it with ``docker exec``.

The container is made from the relic's ``docker`` entry with the very same
hardening as Docker tools (:class:`~cortex_kernel.executors.docker.ContainerSpec`:
no network unless granted, read-only root with a small ``/tmp`` tmpfs, every
capability dropped, ``no-new-privileges``, memory/CPU/pids limits, a
non-root user), labelled ``cortex-kernel=relic`` and
``cortex-kernel.relic=NAME``, and kept running until the relic stops. Its
``command`` is the service (``["sleep", "infinity"]`` when the operations
are all it needs). Each operation's ``command`` runs in it as that user with
``docker exec``, the parameters as JSON in ``$CORTEX_PARAMETERS``; a zero
exit's stdout is the result (JSON when it is JSON), anything else fails the
call with stderr's tail. State the operations leave in the container
(``/tmp``, a daemon's memory) lasts as long as the relic.

A kernel killed with SIGKILL cannot stop its containers; each carries the
label ``cortex-kernel.owner=HOST:PID``, and the next Docker relic started on
that host (or the next Docker tool call) removes those whose process is
gone (:func:`~.docker.sweep_orphans`, which does the same for tool containers).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio
import anyio.to_thread

from ..exceptions import RelicCrashed, RelicError, ToolError
from .command import decode_output, tail
from .docker import (
    LABEL,
    OWNER_LABEL,
    ContainerSpec,
    docker_client,
    owner,
    remove_container,
    sweep_orphans,
)
from .images import sandbox_image
from .relic_base import Relic
from .relic_spec import DockerRelicSpec

__all__: list[str] = []


class DockerRelic(Relic):
    """A ``docker`` relic: a running container and the commands run in it."""

    kind = "docker"
    slow_alive = True
    spec: DockerRelicSpec

    _container: Any = None
    _client: Any = None

    def container_spec(self, image: str) -> ContainerSpec:
        """The hardened container of this relic (the Docker tools' defaults)."""
        spec = self.spec
        mounted = spec.workspace != "none"
        return ContainerSpec(
            image,
            spec.docker.command,
            memory=spec.docker.memory,
            cpus=spec.docker.cpus,
            pids=spec.docker.pids,
            user=spec.docker.user,
            network=spec.network,
            workspace=str(self.place.workspace) if mounted else None,
            workspace_mode=spec.workspace if mounted else "ro",
            tmpfs_size=spec.docker.tmpfs_size,
            env=spec.docker.env,
            labels={
                **spec.docker.labels,
                LABEL: "relic",
                f"{LABEL}.relic": spec.name,
                OWNER_LABEL: owner(),
            },
        )

    async def start(self) -> None:
        """Create and start the container; ready once the engine says it runs."""
        engine = self.place.docker
        try:
            image = self.spec.docker.image or await sandbox_image(engine)
            self._client = client = await anyio.to_thread.run_sync(docker_client, engine)
        except ToolError as exc:
            raise RelicError(f"relic '{self.name}': {exc}") from None
        options = self.container_spec(image).create_options(client.api)
        await anyio.to_thread.run_sync(self._create_and_start, client, options)

    def _create_and_start(self, client: Any, options: dict[str, Any]) -> None:
        import docker.errors

        sweep_orphans(client)
        try:
            created = client.api.create_container(**options)["Id"]
            self._container = client.containers.get(created)
            self._container.start()
            self._container.reload()
        except docker.errors.ImageNotFound:
            raise RelicError(
                f"relic '{self.name}': image {options['image']!r} is not on the Docker "
                "engine; build or pull it first"
            ) from None
        except docker.errors.DockerException as exc:
            raise RelicError(f"relic '{self.name}': the Docker engine failed: {exc}") from None
        why = self._state()
        if why is not None:
            raise RelicError(f"relic '{self.name}': {why}")

    def _state(self) -> str | None:
        import docker.errors

        container = self._container
        if container is None:
            return "it has no container"
        try:
            container.reload()
        except docker.errors.NotFound:
            return f"its container {container.short_id} is gone"
        except docker.errors.DockerException as exc:
            return f"the Docker engine failed: {exc}"
        state = container.attrs.get("State", {})
        if state.get("Running"):
            return None
        logs = tail(container.logs(stdout=True, stderr=True))
        said = f"; its output ends: {logs}" if logs else ""
        return f"its container exited with code {state.get('ExitCode')}{said}"

    def alive(self) -> str | None:
        """``None`` while the container runs (one engine request)."""
        return self._state()

    async def call(self, operation: str, parameters: dict[str, Any]) -> Any:
        """``docker exec`` the operation's command with ``$CORTEX_PARAMETERS``."""
        command = self.spec.operations[operation].command
        assert command is not None  # every operation of a docker relic has one
        result = await anyio.to_thread.run_sync(
            self._exec, list(command), json.dumps(parameters), abandon_on_cancel=True
        )
        code, out, err = result
        if code != 0:
            raise RelicError(
                f"relic '{self.name}': '{operation}' exited with code {code}: {tail(err)}"
            )
        return decode_output(out)

    def _exec(self, command: list[str], parameters: str) -> tuple[int, bytes, bytes]:
        import docker.errors

        try:
            code, (out, err) = self._container.exec_run(
                command,
                environment={"CORTEX_PARAMETERS": parameters},
                user=self.spec.docker.user,
                demux=True,
            )
        except docker.errors.DockerException as exc:
            why = self._state()
            if why is not None:
                raise RelicCrashed(why) from None
            raise RelicError(f"relic '{self.name}': docker exec failed: {exc}") from None
        return int(code if code is not None else -1), out or b"", err or b""

    def stop(self) -> None:
        """Kill and remove the container (never raises)."""
        container, self._container = self._container, None
        if container is not None:
            # Already gone, or the engine is away: nothing left to do here.
            with contextlib.suppress(Exception):
                remove_container(container)
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def detail(self) -> str:
        """The container's short id."""
        return f"container {self._container.short_id}" if self._container is not None else ""

"""The base of every relic kind: where it lives and the four things it must do.

See :mod:`.relic` for the registry and the executor; one module per kind
(:mod:`.relic_python`, :mod:`.relic_server`, :mod:`.relic_docker`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import RelicError, ToolError
from ..runtime.tools import Tool
from .relic_spec import DockerRelicSpec, RelicSpec, ServerRelicSpec

if TYPE_CHECKING:
    from .docker import DockerEngine

__all__ = ["RelicPlace"]

#: The schema of an operation that takes nothing.
NO_PARAMETERS = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class RelicPlace:
    """Where a relic's relative paths and containers go.

    Attributes
    ----------
    base
        The manifest's folder (a server's ``cwd`` is relative to it).
    workspace
        The workspace (a SQLite relic's file, a container's ``/workspace``).
    docker
        The Docker engine, with its TLS settings (``None``: ``DOCKER_HOST``
        or the local socket).
    source
        How messages name the manifest.
    """

    base: Path
    workspace: Path
    docker: DockerEngine | None = None
    source: str = "the manifest"


class Relic(ABC):
    """One running (or not yet running) service of one kind.

    Parameters
    ----------
    spec
        What it is (its manifest entry).
    place
        Where its files and containers go.
    """

    kind: str = "?"
    #: ``alive`` blocks (asks an engine): the registry runs it in a worker thread.
    slow_alive: bool = False

    def __init__(self, spec: RelicSpec, place: RelicPlace) -> None:
        self.spec = spec
        self.place = place

    @property
    def name(self) -> str:
        """The relic's name."""
        return self.spec.name

    def operations(self) -> dict[str, dict[str, Any]]:
        """Operation name -> ``{"description", "parameters"}`` (JSON Schema)."""
        spec = self.spec
        declared = spec.operations if isinstance(spec, ServerRelicSpec | DockerRelicSpec) else {}
        return {
            op: {"description": o.description, "parameters": o.parameters}
            for op, o in declared.items()
        }

    def validate(self, operation: str, parameters: dict[str, Any]) -> dict[str, Any]:
        """Check ``parameters`` against the operation's schema.

        Raises
        ------
        RelicError
            Naming the operation and the bad parameter.
        """
        described = self.operations().get(operation)
        if described is None:
            return parameters
        label = f"{self.name}.{operation}"
        try:
            return Tool(label, "", _never, described["parameters"]).validate(parameters)
        except ToolError as exc:
            message = str(exc).replace(f"tool '{label}'", f"relic operation '{label}'")
            raise RelicError(message) from None

    @abstractmethod
    async def start(self) -> None:
        """Bring the service up (within the registry's ``startup_timeout``)."""

    @abstractmethod
    def alive(self) -> str | None:
        """``None`` while it runs, else why it does not (``its process exited with code 1``)."""

    @abstractmethod
    async def call(self, operation: str, parameters: dict[str, Any]) -> Any:
        """Run ``operation``; raise :class:`RelicError` (or :class:`RelicCrashed`) on failure."""

    @abstractmethod
    def stop(self) -> None:
        """Stop it and everything it started; idempotent, never raises."""

    def detail(self) -> str:
        """What ``%relics`` shows beside the state (a pid, a container id)."""
        return ""


def _never(**_: Any) -> None:  # pragma: no cover - schema holder only
    raise AssertionError

"""What a relic is (docs/relics.md): one class per kind, told apart by ``kind``.

A manifest's ``relics:`` entries are parsed into these by the composition
root; :class:`~cortex_kernel.executors.relic.RelicRegistry` starts and calls
them. Each kind has its own fields only, so a field of another kind is an
error naming both (the manifest's loader says which are this kind's).

- :class:`PythonRelicSpec`: an object of ``class`` (``module:Class``) made
  with ``options`` as keyword arguments; its public methods are the operations.
- :class:`SqliteRelicSpec`: the built-in key-value store in the file
  ``path`` of the workspace (default ``NAME.sqlite``): ``get``, ``set``,
  ``delete``, ``keys``, ``items``.
- :class:`ServerRelicSpec`: ``command`` serving HTTP on 127.0.0.1 (``{port}``
  in it, and ``$PORT``, is the port chosen at start); ``GET health`` answers
  200 when it is ready; an operation is ``POST /OPERATION`` with the
  parameters as a JSON body, and the JSON response is the result.
- :class:`DockerRelicSpec`: a long-lived hardened container (``docker``, as
  for Docker tools); each operation's ``command`` runs in it with ``docker exec``.

``confirm`` follows the tools' rules: ``true`` asks a human before every
operation, a list before those operations, and a docker relic with
``network: true`` asks whenever the agent's ``confirm.network`` is set.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..names import ENV_NAME_PATTERN, NAME_PATTERN, TARGET_PATTERN
from .docker import DockerSpec

__all__ = ["PythonRelicSpec", "RelicSpec", "SqliteRelicSpec"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RelicOperation(_Strict):
    """One operation of a ``server`` or ``docker`` relic, as the model sees it.

    ``command`` (docker relics only) is run with ``docker exec`` in the
    relic's container: the parameters as JSON in ``$CORTEX_PARAMETERS`` and
    on stdin, stdout the result (JSON when it is JSON).
    """

    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the parameters",
    )
    command: list[str] | None = Field(
        default=None, min_length=1, description="docker relics: run in the container per call"
    )


class _Relic(_Strict):
    """What every kind has."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    timeout: float | None = Field(default=60.0, gt=0, description="seconds per operation")
    startup_timeout: float = Field(default=30.0, gt=0, description="seconds to start")
    confirm: bool | list[str] = Field(
        default=False,
        description="ask a human before every operation (true) or before these operations",
    )

    def reaches_network(self) -> bool:
        """Whether the relic has a network of its own (a docker relic's ``network: true``)."""
        return False

    def confirms(self, operation: str, network: bool = False) -> bool:
        """Whether calling ``operation`` needs a human's approval.

        Parameters
        ----------
        operation
            The operation called.
        network
            The agent's ``confirm.network``: a relic with a network then
            needs approval as a Docker tool with one does.
        """
        if self.confirm is True or (isinstance(self.confirm, list) and operation in self.confirm):
            return True
        return network and self.reaches_network()


def _check_names(operations: dict[str, RelicOperation]) -> None:
    bad = sorted(op for op in operations if not re.fullmatch(r"[A-Za-z_][\w-]*", op))
    if bad:
        raise ValueError(f"operation names are letters, digits, _ and -: {', '.join(bad)}")


class PythonRelicSpec(_Relic):
    """An object of ``class`` whose public methods are the operations."""

    kind: Literal["python"]
    target: str = Field(
        alias="class", pattern=TARGET_PATTERN, description="the class, module:Class"
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of the class"
    )


class SqliteRelicSpec(_Relic):
    """The built-in key-value store, in a file of the workspace."""

    kind: Literal["sqlite"]
    path: str | None = Field(default=None, description="file in the workspace (NAME.sqlite)")


class ServerRelicSpec(_Relic):
    """An HTTP server on 127.0.0.1; an operation is ``POST /OPERATION``."""

    kind: Literal["server"]
    command: list[str] = Field(min_length=1, description="program and arguments ({port} replaced)")
    health: str = Field(default="/health", pattern=r"^/", description="readiness path")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment")
    pass_env: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] = Field(
        default_factory=list,
        description="names (or PREFIX*) of the kernel's environment variables to pass on",
    )
    cwd: str | None = Field(default=None, description="working directory")
    operations: dict[str, RelicOperation] = Field(
        default_factory=dict, description="the operations"
    )

    @model_validator(mode="after")
    def _no_commands(self) -> ServerRelicSpec:
        _check_names(self.operations)
        if any(spec.command is not None for spec in self.operations.values()):
            raise ValueError("only docker relics' operations have a 'command'")
        return self


class DockerRelicSpec(_Relic):
    """A long-lived hardened container; each operation's ``command`` runs in it."""

    kind: Literal["docker"]
    docker: DockerSpec = Field(description="image and command")
    network: bool = Field(default=False, description="give the container a network")
    workspace: Literal["none", "ro", "rw"] = Field(
        default="none", description="mount the workspace at /workspace"
    )
    operations: dict[str, RelicOperation] = Field(
        default_factory=dict, description="the operations, each with the command it runs"
    )

    def reaches_network(self) -> bool:
        """``network``."""
        return self.network

    @model_validator(mode="after")
    def _commands(self) -> DockerRelicSpec:
        _check_names(self.operations)
        missing = sorted(op for op, spec in self.operations.items() if spec.command is None)
        if not self.operations or missing:
            raise ValueError(
                "a docker relic needs operations, each with a 'command' run in its container"
                + (f" (no command: {', '.join(missing)})" if missing else "")
            )
        return self


#: A relic of any kind; ``kind`` says which.
RelicSpec = Annotated[
    PythonRelicSpec | ServerRelicSpec | DockerRelicSpec | SqliteRelicSpec,
    Field(discriminator="kind"),
]

#: Each kind's class, by ``kind``.
RELIC_KINDS: dict[str, type[_Relic]] = {
    "python": PythonRelicSpec,
    "server": ServerRelicSpec,
    "docker": DockerRelicSpec,
    "sqlite": SqliteRelicSpec,
}

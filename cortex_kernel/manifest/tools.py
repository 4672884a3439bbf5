"""Tools in a manifest: the kinds of tool entry, the built-ins, approvals, where tools run.

``tools:`` entries are :data:`ToolSpec` (a ``callable``, a ``command`` or a
``docker`` container, told apart by which of those keys an entry has);
:mod:`cortex_kernel.toolset` turns them into tools. ``builtins:`` switches
the built-in tools on, ``confirm:`` makes classes of tools ask a human, and
``executor:`` / ``executors:`` say where tools run.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from ..executors.docker import DockerSpec
from ..executors.memory import MEMORY_PATTERN, memory_bytes
from ..names import ENV_NAME_PATTERN, NAME_PATTERN, TARGET_PATTERN
from .fields import Strict, pass_env_field

__all__ = [
    "TOOL_KINDS",
    "Approvals",
    "Builtins",
    "CallableTool",
    "CommandTool",
    "DockerSettings",
    "DockerTool",
    "ExecutorSettings",
    "ExecutorSpec",
    "FilesBuiltin",
    "SandboxBuiltin",
    "ToolSpec",
]


class _ToolBase(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    confirm: bool = Field(default=False, description="ask a human before every call")
    timeout: float | None = Field(default=None, gt=0, description="seconds per call")
    repeatable: bool = Field(
        default=False,
        description="run every call, even one repeating a call of the same turn "
        "(a random draw, a counter); otherwise a repeat gets the first call's result",
    )


class CallableTool(_ToolBase):
    """A Python function ``module:function``; its schema comes from its type hints."""

    callable: str = Field(pattern=TARGET_PATTERN)
    executor: Literal["local", "dask"] | None = Field(
        default=None, description="where it runs: local (the kernel) or dask; none: executor.kind"
    )


class CommandTool(_ToolBase):
    """A subprocess: parameters as JSON on stdin, or as arguments from ``args``.

    ``args`` items are templates: ``{name}`` is replaced by the parameter's
    value (as one argument, never through a shell). A value that would start
    an argument with ``-`` is refused (it would be read as an option), unless
    ``allow_options`` allows it or an earlier argument is ``--``. The process
    gets PATH, HOME, LANG… and the ``pass_env`` names of the kernel's
    environment, plus ``env``; nothing else.
    """

    command: list[str] = Field(min_length=1)
    args: list[str] | None = None
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the parameters",
    )
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    pass_env: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] = pass_env_field()
    allow_options: bool | list[str] = Field(
        default=False,
        description="args: a value may start with '-' (true: every parameter; a list: those); "
        "otherwise refused, as it would be read as an option",
    )


class DockerTool(_ToolBase):
    """A command in a hardened container (no network, read-only, no capabilities…)."""

    docker: DockerSpec
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the parameters",
    )
    network: bool = Field(default=False, description="give the container a network")
    workspace: Literal["none", "ro", "rw"] = Field(
        default="none", description="mount the workspace at /workspace"
    )


#: Each tool kind's class, by the key that marks an entry as that kind.
TOOL_KINDS: dict[str, type[CallableTool | CommandTool | DockerTool]] = {
    "callable": CallableTool,
    "command": CommandTool,
    "docker": DockerTool,
}


def _tool_kind(value: Any) -> str | None:
    if isinstance(value, Mapping):
        kinds = [kind for kind in TOOL_KINDS if kind in value]
        return kinds[0] if len(kinds) == 1 else None
    for kind, cls in TOOL_KINDS.items():
        if isinstance(value, cls):
            return kind
    return None


ToolSpec = Annotated[
    Annotated[CallableTool, Tag("callable")]
    | Annotated[CommandTool, Tag("command")]
    | Annotated[DockerTool, Tag("docker")],
    Discriminator(
        _tool_kind,
        custom_error_type="tool_kind",
        custom_error_message="a tool needs exactly one of 'callable' (module:function), "
        "'command' (a list of strings) or 'docker' ({image, command})",
    ),
]


class SandboxBuiltin(Strict):
    """The ``python`` or ``shell`` built-in tool: code run in a sandbox."""

    enabled: bool = False
    sandbox: Literal["subprocess", "docker"] = "subprocess"
    in_kernel: bool = Field(
        default=False, description="python only: run in the notebook's namespace"
    )
    timeout: float = Field(default=30.0, gt=0)
    memory: str = Field(default="512m", pattern=MEMORY_PATTERN)
    image: str | None = Field(default=None, description="docker sandbox image (default: built)")
    network: bool = False
    confirm: bool | None = None
    pass_env: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] = pass_env_field()


class FilesBuiltin(Strict):
    """``read_file``, ``write_file`` and ``list_files`` inside ``workspace``.

    The default workspace is a folder of its own beside the manifest, made on
    the first write; a writable workspace that holds the manifest or the
    notebook is refused when the session is built (the agent could rewrite
    what it may do).
    """

    enabled: bool = True
    workspace: str = Field(
        default="cortex-workspace",
        description="folder of the files (relative: to the manifest's); never the manifest's "
        "or the notebook's own folder when write is on",
    )
    write: bool = True
    max_bytes: int = Field(default=1_000_000, ge=1)


class Builtins(Strict):
    """The built-in tools and whether each is on."""

    python: SandboxBuiltin = SandboxBuiltin()
    shell: SandboxBuiltin = SandboxBuiltin()
    files: FilesBuiltin | None = None


class Approvals(Strict):
    """Classes of tools that always need a human's approval."""

    shell: bool = False
    python: bool = False
    write_file: bool = False
    network: bool = Field(default=False, description="containers with a network")


class DockerSettings(Strict):
    """Where the Docker engine is (default: ``DOCKER_HOST`` or the local socket).

    With ``host`` set, ``tls_verify`` and ``cert_path`` replace
    ``DOCKER_TLS_VERIFY`` and ``DOCKER_CERT_PATH`` for it.
    """

    host: str | None = Field(default=None, description="e.g. tcp://build-box:2376")
    tls_verify: bool | None = Field(
        default=None, description="check the engine's certificate against cert_path/ca.pem"
    )
    cert_path: str | None = Field(
        default=None,
        description="folder with ca.pem, cert.pem, key.pem (relative: to the manifest)",
    )


class ExecutorSettings(Strict):
    """Executor settings shared by the tools."""

    workspace: str = Field(default=".", description="directory for files and mounts")
    docker: DockerSettings = DockerSettings()
    max_output_bytes: int = Field(default=10_000_000, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _ignore_preview_chars(cls, data: Any) -> Any:
        # `preview_chars` (until 0.3.0) was accepted and never changed any
        # preview: a manifest that sets it still loads, and is told so.
        if isinstance(data, Mapping) and "preview_chars" in data:
            warnings.warn(
                "executors.preview_chars is ignored (it never changed a preview); remove it",
                FutureWarning,
                stacklevel=2,
            )
            data = {key: value for key, value in data.items() if key != "preview_chars"}
        return data


class ExecutorSpec(Strict):
    """Where Python tools run by default: in the kernel, or on a Dask cluster.

    ``executor: dask`` is short for ``{kind: dask}``. With no ``address`` the
    cluster is ``$CORTEX_DASK_ADDRESS``, else a ``distributed.Client`` made in
    the notebook, else distributed's default client.
    """

    kind: Literal["local", "dask"] = "local"
    address: str | None = Field(
        default=None,
        pattern=r"^(tcp|tls|ucx|ws|wss|inproc)://",
        description="the Dask scheduler, e.g. tcp://10.0.0.5:8786",
    )
    keep_on_cluster: str | None = Field(
        default="16m",
        pattern=MEMORY_PATTERN,
        description="results larger than this stay on the cluster (the variable holds a "
        "future with a preview); null: always bring them back",
    )
    connect_timeout: float = Field(default=10.0, gt=0, description="seconds")

    @property
    def keep_bytes(self) -> int | None:
        """``keep_on_cluster`` in bytes."""
        if self.keep_on_cluster is None:
            return None
        return memory_bytes(self.keep_on_cluster)

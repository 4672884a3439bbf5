"""Agent manifests: what an agent is and what it may do, in YAML or TOML.

A manifest file holds one agent (its fields at the top level) or several
(``agents: [...]`` plus an optional ``default:`` name). Every field is
checked by pydantic with unknown keys refused, and a bad file gives one
:class:`~cortex_kernel.exceptions.ConfigError` naming the file, the field
(with its line for YAML, where the parser knows it) and what is allowed —
never a traceback.

Example (YAML)::

    name: helper
    model: {name: "openai/gpt-4o-mini", temperature: 0.2}
    instructions: Answer briefly.
    tools:
      - {name: add, callable: "mypkg.tools:add"}
      - name: count_lines
        command: ["wc", "-l"]
        timeout: 10
      - name: fetch
        docker: {image: "cortex-kernel-sandbox", command: ["python3", "/tool.py"]}
        network: true
        confirm: true
    builtins:
      shell: {enabled: true, sandbox: subprocess}
      files: {workspace: ./work}

The JSON Schema of this format ships as ``cortex_kernel/manifest.schema.json``
(:func:`json_schema` regenerates it) so editors can validate and complete it.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from .exceptions import ConfigError
from .model_options import ModelOptions

__all__ = [
    "ACTION_SOURCES",
    "FEED_SOURCES",
    "INTERNAL_FEEDS",
    "SCHEMA_PATH",
    "AgentManifest",
    "Approvals",
    "Builtins",
    "CallableTool",
    "CommandTool",
    "DockerSettings",
    "DockerTool",
    "ExecutorSettings",
    "ExecutorSpec",
    "FeedSourceSpec",
    "FeedSpec",
    "FilesBuiltin",
    "LimitsSpec",
    "ManifestFile",
    "McpServerSpec",
    "ModelSpec",
    "RelicOperation",
    "RelicSpec",
    "SandboxBuiltin",
    "ToolSpec",
    "default_agent",
    "json_schema",
    "load_manifest",
    "validate_manifest",
]

#: The generated JSON Schema shipped with the package.
SCHEMA_PATH = Path(__file__).with_name("manifest.schema.json")

_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
# A pass_env entry: an environment variable's name, or a prefix ending in *.
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*\*?$"
_MEMORY = r"^[0-9]+[bkmgBKMG]?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _pass_env() -> Any:
    """The ``pass_env`` field: kernel variables a child process gets besides PATH, HOME…"""
    return Field(
        default_factory=list,
        description="names (or PREFIX*) of the kernel's environment variables to pass on; "
        "a secret-looking name only when named in full (children get PATH, HOME, LANG… only)",
    )


class ModelSpec(ModelOptions):
    """The model and its options: the same options as ``%model`` and ``--model``.

    Every field of :class:`~cortex_kernel.model_options.ModelOptions` is allowed
    here under the same name; options given on the command line or in
    ``%%agent`` win over these.
    """

    name: str | None = Field(
        default=None, description="litellm model string or replay:PATH; none: the default"
    )

    def options(self) -> ModelOptions:
        """The options alone (without the model's name)."""
        return ModelOptions(**self.model_dump(exclude={"name"}))


class ListedModel(ModelSpec):
    """A model an ``llm`` action may name, with its own options.

    It gets only the options written here (none for a bare string entry),
    not the agent model's: those may be another provider's endpoint.
    """

    name: str = Field(description="litellm model string an llm action may name")


class LimitsSpec(_Strict):
    """Per-run limits (any left out keeps the runtime's default)."""

    max_turns: int | None = Field(default=None, ge=1)
    max_actions: int | None = Field(default=None, ge=0)
    max_parallel: int | None = Field(default=None, ge=1)
    max_depth: int | None = Field(default=None, ge=0)
    wall_time: float | None = Field(default=None, gt=0, description="seconds per run")
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, ge=0, description="dollars per run")
    result_chars: int | None = Field(default=None, ge=1)
    result_tokens: int | None = Field(
        default=None, ge=100, description="tokens of all the results opening one turn"
    )
    action_timeout: float | None = Field(
        default=None, gt=0, description="seconds per action attempt when it names no timeout"
    )


class _ToolBase(_Strict):
    name: str = Field(pattern=_NAME)
    description: str = ""
    confirm: bool = Field(default=False, description="ask a human before every call")
    timeout: float | None = Field(default=None, gt=0, description="seconds per call")


class CallableTool(_ToolBase):
    """A Python function ``module:function``; its schema comes from its type hints."""

    callable: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
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
    pass_env: list[Annotated[str, Field(pattern=_ENV_NAME)]] = _pass_env()
    allow_options: bool | list[str] = Field(
        default=False,
        description="args: a value may start with '-' (true: every parameter; a list: those); "
        "otherwise refused, as it would be read as an option",
    )


class DockerSpec(_Strict):
    """Image and command of a Docker tool, and what it may reach."""

    image: str | None = Field(
        default=None, min_length=1, description="none: the sandbox image built on this machine"
    )
    command: list[str] = Field(min_length=1)
    memory: str = Field(default="256m", pattern=_MEMORY)
    cpus: float = Field(default=1.0, gt=0)
    pids: int = Field(default=64, ge=8)
    user: str = "65534:65534"
    tmpfs_size: str = Field(default="16m", pattern=_MEMORY)
    env: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="extra container labels (cortex-kernel=tool is always set)",
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


_TOOL_KINDS = ("callable", "command", "docker")


def _tool_kind(value: Any) -> str | None:
    if isinstance(value, Mapping):
        kinds = [kind for kind in _TOOL_KINDS if kind in value]
        return kinds[0] if len(kinds) == 1 else None
    for kind, cls in (("callable", CallableTool), ("command", CommandTool), ("docker", DockerTool)):
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


class SandboxBuiltin(_Strict):
    """The ``python`` or ``shell`` built-in tool: code run in a sandbox."""

    enabled: bool = False
    sandbox: Literal["subprocess", "docker"] = "subprocess"
    in_kernel: bool = Field(
        default=False, description="python only: run in the notebook's namespace"
    )
    timeout: float = Field(default=30.0, gt=0)
    memory: str = Field(default="512m", pattern=_MEMORY)
    image: str | None = Field(default=None, description="docker sandbox image (default: built)")
    network: bool = False
    confirm: bool | None = None
    pass_env: list[Annotated[str, Field(pattern=_ENV_NAME)]] = _pass_env()


class FilesBuiltin(_Strict):
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


class Builtins(_Strict):
    """The built-in tools and whether each is on."""

    python: SandboxBuiltin = SandboxBuiltin()
    shell: SandboxBuiltin = SandboxBuiltin()
    files: FilesBuiltin | None = None


class Approvals(_Strict):
    """Classes of tools that always need a human's approval."""

    shell: bool = False
    python: bool = False
    write_file: bool = False
    network: bool = Field(default=False, description="containers with a network")


class DockerSettings(_Strict):
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


class ExecutorSettings(_Strict):
    """Executor settings shared by the tools."""

    workspace: str = Field(default=".", description="directory for files and mounts")
    docker: DockerSettings = DockerSettings()
    max_output_bytes: int = Field(default=10_000_000, ge=1)
    preview_chars: int = Field(default=2000, ge=1)


class ExecutorSpec(_Strict):
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
        pattern=_MEMORY,
        description="results larger than this stay on the cluster (the variable holds a "
        "future with a preview); null: always bring them back",
    )
    connect_timeout: float = Field(default=10.0, gt=0, description="seconds")

    @property
    def keep_bytes(self) -> int | None:
        """``keep_on_cluster`` in bytes."""
        if self.keep_on_cluster is None:
            return None
        text = self.keep_on_cluster.lower()
        units = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
        if text[-1] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)


class McpServerSpec(_Strict):
    """An MCP server whose tools the agent may call (as ``NAME__tool``).

    Exactly one of ``command`` (a stdio server: the program and its arguments)
    or ``url`` (a streamable HTTP endpoint).
    """

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$", description="prefix of its tools' names")
    command: list[str] | None = Field(
        default=None, min_length=1, description="stdio server: program and arguments"
    )
    url: str | None = Field(
        default=None, pattern=r"^https?://", description="streamable HTTP endpoint"
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="extra environment (stdio; PATH, HOME… are passed)"
    )
    pass_env: list[Annotated[str, Field(pattern=_ENV_NAME)]] = _pass_env()
    cwd: str | None = Field(default=None, description="working directory (stdio)")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers (url)")
    confirm: bool | list[str] = Field(
        default=False, description="true: every tool asks a human; a list: those tools do"
    )
    timeout: float | None = Field(default=60.0, gt=0, description="seconds per call")
    startup_timeout: float = Field(
        default=30.0, gt=0, description="seconds to start and list the tools"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "an MCP server needs exactly one of 'command' (a stdio server, a list of "
                "strings) or 'url' (a streamable HTTP endpoint)"
            )
        return self


class SubAgent(_Strict):
    """Another agent this one may call with an ``agent`` action."""

    name: str = Field(pattern=_NAME)
    manifest: str | None = Field(default=None, description="path; none: same file")
    description: str = ""


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


_RELIC_FIELDS: dict[str, tuple[str, ...]] = {
    "python": ("target", "options"),
    "server": ("command", "health", "env", "pass_env", "cwd"),
    "docker": ("docker", "network", "workspace"),
    "sqlite": ("path",),
}
_RELIC_NEEDS = {"python": "target", "server": "command", "docker": "docker"}
_FIELD_KEYS = {"target": "class"}


class RelicSpec(_Strict):
    """A persistent service, started on first use and kept across cells.

    ``kind`` says what it is (see ``docs/relics.md``):

    - ``python``: an object of ``class`` (``module:Class``) made with
      ``options`` as keyword arguments; its public methods are the operations.
    - ``server``: ``command`` serving HTTP on 127.0.0.1 (``{port}`` in it, and
      ``$PORT``, is the port chosen at start); ``GET health`` answers 200 when
      it is ready; an operation is ``POST /OPERATION`` with the parameters as a
      JSON body, and the JSON response is the result.
    - ``docker``: a long-lived hardened container (``docker``, as for Docker
      tools); each operation's ``command`` runs in it with ``docker exec``.
    - ``sqlite``: the built-in key-value store in the file ``path`` of the
      workspace (default ``NAME.sqlite``): ``get``, ``set``, ``delete``,
      ``keys``, ``items``.

    ``confirm`` follows the tools' rules: ``true`` asks a human before every
    operation, a list before those operations, and a docker relic with
    ``network: true`` asks whenever the agent's ``confirm.network`` is set.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(pattern=_NAME)
    kind: Literal["python", "server", "docker", "sqlite"]
    description: str = ""
    target: str | None = Field(
        default=None,
        alias="class",
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description="python: the class, module:Class",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="python: keyword arguments of the class"
    )
    command: list[str] | None = Field(
        default=None, min_length=1, description="server: program and arguments ({port} replaced)"
    )
    health: str = Field(default="/health", pattern=r"^/", description="server: readiness path")
    env: dict[str, str] = Field(default_factory=dict, description="server: extra environment")
    pass_env: list[Annotated[str, Field(pattern=_ENV_NAME)]] = Field(
        default_factory=list,
        description="server: names (or PREFIX*) of the kernel's environment variables to pass on",
    )
    cwd: str | None = Field(default=None, description="server: working directory")
    docker: DockerSpec | None = Field(default=None, description="docker: image and command")
    network: bool = Field(default=False, description="docker: give the container a network")
    workspace: Literal["none", "ro", "rw"] = Field(
        default="none", description="docker: mount the workspace at /workspace"
    )
    path: str | None = Field(default=None, description="sqlite: file in the workspace")
    operations: dict[str, RelicOperation] = Field(
        default_factory=dict,
        description="server and docker: the operations (python: its public methods)",
    )
    timeout: float | None = Field(default=60.0, gt=0, description="seconds per operation")
    startup_timeout: float = Field(default=30.0, gt=0, description="seconds to start")
    confirm: bool | list[str] = Field(
        default=False,
        description="ask a human before every operation (true) or before these operations",
    )

    def confirms(self, operation: str, network: bool = False) -> bool:
        """Whether calling ``operation`` needs a human's approval.

        Parameters
        ----------
        operation
            The operation called.
        network
            The agent's ``confirm.network``: a docker relic with a network
            then needs approval as a docker tool with one does.
        """
        if self.confirm is True or (isinstance(self.confirm, list) and operation in self.confirm):
            return True
        return network and self.kind == "docker" and self.network

    @model_validator(mode="after")
    def _fields_of_kind(self) -> RelicSpec:
        needed = _RELIC_NEEDS.get(self.kind)
        if needed is not None and getattr(self, needed) is None:
            raise ValueError(f"a {self.kind} relic needs '{_FIELD_KEYS.get(needed, needed)}'")
        own = set(_RELIC_FIELDS[self.kind])
        foreign = sorted(
            _FIELD_KEYS.get(key, key)
            for fields in _RELIC_FIELDS.values()
            for key in fields
            if key not in own and key in self.model_fields_set
        )
        if foreign:
            raise ValueError(
                f"{', '.join(foreign)}: not a field of {self.kind} relics "
                f"(theirs: {', '.join(_FIELD_KEYS.get(k, k) for k in _RELIC_FIELDS[self.kind])})"
            )
        if self.operations and self.kind in ("python", "sqlite"):
            raise ValueError(f"a {self.kind} relic's operations are its methods; drop 'operations'")
        commands = [op for op, spec in self.operations.items() if spec.command is not None]
        if self.kind == "docker":
            missing = sorted(op for op in self.operations if op not in commands)
            if not self.operations or missing:
                raise ValueError(
                    "a docker relic needs operations, each with a 'command' run in its container"
                    + (f" (no command: {', '.join(missing)})" if missing else "")
                )
        elif commands:
            raise ValueError("only docker relics' operations have a 'command'")
        bad = sorted(op for op in self.operations if not re.fullmatch(r"[A-Za-z_][\w-]*", op))
        if bad:
            raise ValueError(f"operation names are letters, digits, _ and -: {', '.join(bad)}")
        return self


class WorkflowStep(_Strict):
    """One step of a workflow: an action body with its type."""

    id: str = Field(pattern=_NAME)
    type: Literal["tool", "llm", "agent", "relic", "workflow"]
    body: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)


class WorkflowSpec(_Strict):
    """A named, parameterised DAG of steps.

    ``parameters`` maps each parameter to its default (``null``: required);
    steps read them as ``$name`` and each other's results as ``$step_id``.
    ``outputs`` names the steps whose results make the workflow's result
    (default: the steps nothing depends on).
    """

    name: str = Field(pattern=_NAME)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    steps: list[WorkflowStep] = Field(min_length=1)
    outputs: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_steps(self) -> WorkflowSpec:
        ids = [step.id for step in self.steps]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"workflow '{self.name}': step ids repeat: {', '.join(repeated)}")
        unknown = [
            f"{step.id} depends on '{dep}'"
            for step in self.steps
            for dep in step.depends_on
            if dep not in ids
        ] + [f"output '{out}'" for out in self.outputs if out not in ids]
        if unknown:
            raise ValueError(
                f"workflow '{self.name}' names steps it does not have: {'; '.join(unknown)} "
                f"(steps: {', '.join(ids)})"
            )
        return self


#: Feed source kinds run as an action of the same type.
ACTION_SOURCES = ("tool", "llm", "relic", "workflow")
FEED_SOURCES = ("internal", *ACTION_SOURCES, "callable", "mcp_resource")
INTERNAL_FEEDS = ("system_clock", "notebook_variables", "run_status")


class FeedSpec(_Strict):
    """A context feed: where its text comes from, how often, and how much of it.

    ``source`` has exactly one of ``internal`` (``system_clock``,
    ``run_status``, ``notebook_variables``), ``tool``, ``llm``, ``relic``,
    ``workflow`` (with ``parameters``), ``callable`` (``module:function``) or
    ``mcp_resource`` (``{server: NAME, uri: URI}``, read from a declared MCP server);
    see :mod:`cortex_kernel.runtime.feeds`.
    """

    id: str = Field(pattern=_NAME)
    type: Literal["on_demand", "periodic", "internal"] = "on_demand"
    source: dict[str, Any] = Field(default_factory=dict)
    ttl: float = Field(default=0.0, ge=0, description="on_demand: seconds a value is reused")
    interval: float = Field(default=30.0, gt=0, description="periodic: seconds between fetches")
    max_bytes: int = Field(default=4000, ge=64)
    max_tokens: int | None = Field(default=None, ge=1)
    description: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> FeedSpec:
        kinds = [kind for kind in FEED_SOURCES if kind in self.source]
        if not kinds and self.type == "internal" and self.id in INTERNAL_FEEDS:
            return self
        if len(kinds) != 1:
            raise ValueError(
                f"source needs exactly one of {', '.join(FEED_SOURCES)} "
                f"(got {', '.join(sorted(self.source)) or 'no field'})"
            )
        if kinds[0] == "internal" and self.source["internal"] not in INTERNAL_FEEDS:
            raise ValueError(
                f"unknown internal source {self.source['internal']!r}; "
                f"known: {', '.join(INTERNAL_FEEDS)}"
            )
        resource = self.source.get("mcp_resource")
        if kinds[0] == "mcp_resource" and not (
            isinstance(resource, dict) and set(resource) == {"server", "uri"}
        ):
            raise ValueError("mcp_resource needs {server: NAME, uri: URI}")
        return self

    @property
    def kind(self) -> str:
        """The source kind (``internal``, ``tool``, ``callable``…)."""
        return next((k for k in FEED_SOURCES if k in self.source), "internal")

    @property
    def internal_name(self) -> str:
        """The built-in source of an ``internal`` feed."""
        return str(self.source.get("internal", self.id))


class FeedSourceSpec(_Strict):
    """A named feed source: one that model output may choose, by its name.

    A feed the model declares (``add_context_feed``, ``update_context_feed``,
    ``<context_feed>``) names one of these (or a harmless built-in,
    ``system_clock`` or ``run_status``); it can never write a source itself,
    so what runs is always what the manifest or the user declared. ``source``
    is written as a feed's (``{callable: …}``, ``{tool: …, parameters: …}``…).
    """

    name: str = Field(pattern=_NAME)
    description: str = ""
    source: dict[str, Any]

    @model_validator(mode="after")
    def _valid_source(self) -> FeedSourceSpec:
        try:
            FeedSpec(id=self.name, source=self.source)
        except ValidationError as exc:
            message = str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")
            raise ValueError(f"feed source '{self.name}': {message}") from None
        return self


InternalAction = Literal[
    "set_variable",
    "delete_variable",
    "list_variables",
    "add_context_feed",
    "remove_context_feed",
    "update_context_feed",
    "list_context_feeds",
    "clear_context",
]


def _default_internal() -> list[InternalAction]:
    # docs/feeds.md#internal-actions: reading feeds and setting variables; the rest must be granted.
    return ["set_variable", "list_context_feeds", "list_variables"]


class AgentManifest(_Strict):
    """One agent: model, instructions, tools and what it may do.

    Sub-agents, relics, workflows and context feeds are checked here and run
    by the executors the composition root installs.
    """

    name: str = Field(default="cortex", pattern=_NAME)
    description: str = ""
    model: ModelSpec = ModelSpec()
    instructions: str = ""
    protocol: Literal["xml", "tools"] = "xml"
    tools: list[ToolSpec] = Field(default_factory=list)
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    builtins: Builtins = Builtins()
    confirm: Approvals = Approvals()
    sub_agents: list[SubAgent] = Field(default_factory=list)
    relics: list[RelicSpec] = Field(default_factory=list)
    workflows: list[WorkflowSpec] = Field(default_factory=list)
    context_feeds: list[FeedSpec] = Field(default_factory=list)
    feed_sources: list[FeedSourceSpec] = Field(
        default_factory=list,
        description="named sources a feed the model declares may use (by name; model output "
        "never writes a source itself)",
    )
    internal_actions: list[InternalAction] = Field(default_factory=_default_internal)
    read_notebook: bool = Field(
        default=False,
        description="let $name in model output read the notebook's own variables (off: only "
        "values agent actions produced)",
    )
    llm_models: list[ListedModel] = Field(
        default_factory=list,
        description="models an llm action may name besides the agent's own: a model string, "
        "or a table like model's with its own options ({name, api_base, temperature, …})",
    )
    limits: LimitsSpec = LimitsSpec()
    executor: ExecutorSpec = Field(
        default=ExecutorSpec(),
        description="where Python tools run by default: local, or dask ({kind: dask, address})",
    )
    executors: ExecutorSettings = ExecutorSettings()

    @field_validator("model", mode="before")
    @classmethod
    def _model_string(cls, value: Any) -> Any:
        # `model: openai/gpt-4o` is the common case; the mapping form adds options.
        return {"name": value} if isinstance(value, str) else value

    @field_validator("llm_models", mode="before")
    @classmethod
    def _llm_model_strings(cls, value: Any) -> Any:
        # As `model:`: a string is short for a table with only its name.
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="after")
    def _unique_llm_models(self) -> AgentManifest:
        names = [listed.name for listed in self.llm_models]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise ValueError(
                    f"llm_models[{index}]: '{name}' is listed twice; each model once, "
                    "with its options"
                )
        return self

    @field_validator("executor", mode="before")
    @classmethod
    def _executor_string(cls, value: Any) -> Any:
        # `executor: dask` is short for `executor: {kind: dask}`.
        return {"kind": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _unique_tools(self) -> AgentManifest:
        seen: dict[str, int] = {}
        for index, spec in enumerate(self.tools):
            if spec.name in seen:
                raise ValueError(
                    f"tool name '{spec.name}' is used by tools[{seen[spec.name]}] and "
                    f"tools[{index}]; tool names must be unique"
                )
            seen[spec.name] = index
        servers = [server.name for server in self.mcp_servers]
        repeated = sorted({n for n in servers if servers.count(n) > 1})
        if repeated:
            raise ValueError(f"MCP server names must be unique; repeated: {', '.join(repeated)}")
        relics = [relic.name for relic in self.relics]
        repeated = sorted({n for n in relics if relics.count(n) > 1})
        if repeated:
            raise ValueError(f"relic names must be unique; repeated: {', '.join(repeated)}")
        sources = [source.name for source in self.feed_sources]
        repeated = sorted({n for n in sources if sources.count(n) > 1})
        if repeated:
            raise ValueError(f"feed source names must be unique; repeated: {', '.join(repeated)}")
        return self


class ManifestFile(_Strict):
    """A file with several agents; ``default`` names the one used unless chosen."""

    agents: list[AgentManifest] = Field(min_length=1)
    default: str | None = None

    @model_validator(mode="after")
    def _names(self) -> ManifestFile:
        names = [agent.name for agent in self.agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(duplicates)}")
        if self.default is not None and self.default not in names:
            raise ValueError(
                f"default agent '{self.default}' is not defined; agents: {', '.join(names)}"
            )
        return self

    @property
    def path(self) -> Path | None:
        """The file this was loaded from (set by :func:`load_manifest`)."""
        return self.__dict__.get("_path")

    def names(self) -> list[str]:
        """The agents' names, in file order."""
        return [agent.name for agent in self.agents]

    def agent(self, name: str | None = None) -> AgentManifest:
        """The agent called ``name`` (default: ``default`` or the first one).

        Raises
        ------
        ConfigError
            When no agent has that name; the message lists those that exist.
        """
        wanted = name or self.default
        if wanted is None:
            return self.agents[0]
        for agent in self.agents:
            if agent.name == wanted:
                return agent
        where = f" in {self.path}" if self.path else ""
        raise ConfigError(f"no agent named '{wanted}'{where}; agents: {', '.join(self.names())}")


def default_agent() -> AgentManifest:
    """The built-in agent used when no manifest is given: no tools beyond ``@tool``."""
    return AgentManifest()


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a manifest file (one agent, or ``agents: [...]``)."""
    single = AgentManifest.model_json_schema()
    several = ManifestFile.model_json_schema()
    definitions = {**single.pop("$defs", {}), **several.pop("$defs", {})}
    definitions["AgentManifest"] = single
    definitions["ManifestFile"] = several
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/cortex-kernel/cortex-kernel/manifest.schema.json",
        "title": "cortex-kernel agent manifest",
        "anyOf": [{"$ref": "#/$defs/AgentManifest"}, {"$ref": "#/$defs/ManifestFile"}],
        "$defs": definitions,
    }


# -- loading ---------------------------------------------------------------------


def _read(path: Path) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """The file's data and, for YAML, the line of every key and item."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text), {}
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise ConfigError(
            f"{path}: unknown manifest format '{path.suffix}'; use .yaml, .yml, .toml or .json"
        )
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[tuple[str | int, ...], int] = {}
        if node is not None:
            # Before anything walks the data: aliases make a tree of shared nodes.
            _check_expansion(path, node)
            _yaml_lines(node, (), lines)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return data, lines


#: Most values a YAML manifest may hold once its aliases (and ``<<`` merges) are
#: expanded: far above any real manifest, far below an alias bomb's billions.
MAX_YAML_VALUES = 100_000


def _check_expansion(path: Path, root: Any) -> None:
    """Refuse a document whose aliases expand to more than :data:`MAX_YAML_VALUES` values.

    An alias is the anchored node itself, so the composed graph stays small
    while a walk of it (line numbers, validation) visits every repetition: a
    650-byte "billion laughs" file is 10^9 values. Each node's expanded size is
    counted once (memoised), so this check is linear in the file.

    Raises
    ------
    ConfigError
        Naming the line of the first collection that grows past the limit.
    """
    import yaml

    sizes: dict[int, int] = {}
    counting: set[int] = set()  # the ancestors of the node popped
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_counted = stack.pop()
        key = id(node)
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            sizes[key] = 1
            continue
        if children_counted:
            counting.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(child), 1) for child in children)
            if sizes[key] > MAX_YAML_VALUES:
                raise ConfigError(
                    f"{path}:{node.start_mark.line + 1}: aliases expand the manifest past "
                    f"{MAX_YAML_VALUES:,} values (an alias bomb?); write the values out instead"
                )
        elif key in counting:  # reached again below itself
            raise ConfigError(
                f"{path}:{node.start_mark.line + 1}: an alias inside this collection refers "
                "to the collection itself (a recursive alias)"
            )
        elif key not in sizes:
            counting.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children)


_Lines = dict[tuple[str | int, ...], int]


def _yaml_lines(node: Any, at: tuple[str | int, ...], lines: _Lines) -> None:
    import yaml

    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            here = (*at, str(key.value))
            _yaml_lines(value, here, lines)
            lines[here] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _yaml_lines(item, (*at, index), lines)


def _field_path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(top level)"


def _allowed(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The field names allowed at ``loc`` (pydantic's location, tags included)."""
    kinds: dict[str, type[BaseModel]] = {
        "callable": CallableTool,
        "command": CommandTool,
        "docker": DockerTool,
    }
    current: Any = model
    for index, part in enumerate(loc):
        if isinstance(part, int):
            continue
        if part in kinds and index >= 2 and loc[index - 2] == "tools":
            current = kinds[part]
            continue
        info = current.model_fields.get(part) or next(
            (f for f in current.model_fields.values() if f.alias == part), None
        )
        if info is None:
            break
        current = _inner_model(info.annotation)
        if current is None:
            return []
    return sorted(info.alias or name for name, info in current.model_fields.items())


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _untagged(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """``loc`` without the tool-kind tags pydantic puts after ``tools[i]``."""
    out: list[str | int] = []
    for index, part in enumerate(loc):
        after_tool = index >= 2 and loc[index - 2] == "tools" and isinstance(loc[index - 1], int)
        if after_tool and part in _TOOL_KINDS:
            continue
        out.append(part)
    return tuple(out)


def _describe(
    path: Path,
    error: Mapping[str, Any],
    model: type[BaseModel],
    lines: Mapping[tuple[str | int, ...], int],
    prefix: tuple[str | int, ...],
) -> str:
    tagged = tuple(error["loc"])
    loc = _untagged(tagged)
    full = (*prefix, *loc)
    line = None
    for cut in range(len(full), -1, -1):
        line = lines.get(full[:cut])
        if line is not None:
            break
    where = f"{path}:{line}" if line is not None else str(path)
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        allowed = _allowed(model, tagged[:-1])
        message = f"unknown field; allowed here: {', '.join(allowed)}"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return f"{where}: {_field_path(full)}: {message}"


def load_manifest(path: str | Path) -> ManifestFile:
    """Read and validate a manifest (``.yaml``, ``.yml``, ``.toml`` or ``.json``).

    Returns
    -------
    ManifestFile
        Its agents (a one-agent file gives a list of one).

    Raises
    ------
    ConfigError
        Naming the file, the field (and line, for YAML) and what is allowed.
    """
    file = Path(path).expanduser()
    data, lines = _read(file)
    return validate_manifest(data, file, lines)


def validate_manifest(
    data: Any, file: Path, lines: Mapping[tuple[str | int, ...], int] | None = None
) -> ManifestFile:
    """Validate already-read manifest ``data`` (as :func:`load_manifest` does).

    ``lines`` maps field locations to line numbers, when the format has them.
    """
    lines = lines or {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: a manifest is a mapping of fields, not {type(data).__name__}")
    several = "agents" in data
    model: type[BaseModel] = ManifestFile if several else AgentManifest
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        messages = [_describe(file, e, model, lines, ()) for e in exc.errors(include_url=False)]
        shown = messages[:5]
        more = f"\n(and {len(messages) - 5} more)" if len(messages) > 5 else ""
        raise ConfigError("invalid manifest: " + "\n".join(shown) + more) from None
    result = parsed if isinstance(parsed, ManifestFile) else ManifestFile(agents=[parsed])
    result.__dict__["_path"] = file
    return result


def schema_text() -> str:
    """The shipped schema's text (stable key order, trailing newline)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m cortex_kernel.manifest: regenerate the shipped schema
    SCHEMA_PATH.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")

"""Turn a manifest's tool entries into :class:`~cortex_kernel.runtime.tools.Tool` objects.

This is composition, not execution: each entry becomes a ``Tool`` whose
function calls the matching executor (:mod:`.executors.command`,
:mod:`.executors.docker`, :mod:`.executors.sandbox`, :mod:`.executors.files`).
Callables keep the pydantic schema of their signature; command and Docker
tools are checked against the JSON Schema their entry declares.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from .exceptions import ConfigError, ToolError
from .executors.command import command_output, render_args, run_command
from .executors.docker import ContainerSpec, DockerEngine, run_container
from .executors.files import Workspace
from .executors.images import sandbox_image
from .executors.notebook_python import NotebookPython
from .executors.sandbox import run_code
from .manifest import (
    AgentManifest,
    CallableTool,
    CommandTool,
    DockerSettings,
    DockerTool,
    SandboxBuiltin,
)
from .names import import_target
from .runtime.docstrings import summary
from .runtime.tools import Tool, ToolRegistry, schema_model

__all__ = ["build_tools", "docker_engine"]


def _import(target: str, where: str) -> Callable[..., Any]:
    value = import_target(target, where=where)
    if not callable(value):
        raise ConfigError(f"{where}: {target!r} is not callable")
    return value  # type: ignore[no-any-return]


def _callable_tool(spec: CallableTool, where: str) -> Tool:
    function = _import(spec.callable, where)
    parameters, model = schema_model(function, spec.name)
    import inspect

    description = spec.description or summary(inspect.getdoc(function))
    return Tool(
        spec.name,
        description,
        function,
        parameters,
        model,
        kind="python",
        source=where,
        confirm=spec.confirm,
        timeout=spec.timeout,
        repeatable=spec.repeatable,
        executor=spec.executor,
    )


def _declared(
    spec: CommandTool | DockerTool, fallback: str, call: Callable[..., Any], kind: str, where: str
) -> Tool:
    """A tool checked against the JSON Schema its manifest entry declares."""
    description = spec.description or fallback
    return Tool(
        spec.name,
        description,
        call,
        spec.parameters,
        None,
        kind=kind,
        source=where,
        confirm=spec.confirm,
        timeout=spec.timeout,
        repeatable=spec.repeatable,
    )


def _command_tool(spec: CommandTool, where: str, base: Path, max_output: int) -> Tool:
    async def call(**parameters: Any) -> Any:
        if spec.args is not None:
            argv = [
                *spec.command,
                *render_args(
                    spec.args,
                    parameters,
                    allow_options=spec.allow_options,
                    options_ended="--" in spec.command[1:],
                ),
            ]
            stdin = b""
        else:
            argv = list(spec.command)
            stdin = json.dumps(parameters).encode()
        cwd = str((base / spec.cwd).resolve()) if spec.cwd else None
        result = await run_command(
            argv,
            stdin=stdin,
            time_limit=spec.timeout,
            cwd=cwd,
            env=spec.env,
            pass_env=spec.pass_env,
            max_output=max_output,
            name=spec.name,
        )
        return command_output(spec.name, result)

    return _declared(spec, f"runs {' '.join(spec.command)}", call, "command", where)


def _docker_tool(
    spec: DockerTool, where: str, workspace: Path, engine: DockerEngine, max_output: int
) -> Tool:
    container = ContainerSpec(
        spec.docker.image,
        spec.docker.command,
        memory=spec.docker.memory,
        cpus=spec.docker.cpus,
        pids=spec.docker.pids,
        user=spec.docker.user,
        network=spec.network,
        workspace=str(workspace) if spec.workspace != "none" else None,
        workspace_mode=spec.workspace if spec.workspace != "none" else "ro",
        tmpfs_size=spec.docker.tmpfs_size,
        env=spec.docker.env,
        labels={**spec.docker.labels, "cortex-kernel.tool": spec.name},
    )

    async def call(**parameters: Any) -> Any:
        if container.image is None:
            container.image = await sandbox_image(engine)
        run = await run_container(
            container,
            stdin=json.dumps(parameters).encode(),
            time_limit=spec.timeout,
            engine=engine,
            name=spec.name,
            max_output=max_output,
        )
        if run.oom_killed:
            raise ToolError(
                f"tool '{spec.name}' ran out of memory (limit {spec.docker.memory}) and was killed"
            )
        return command_output(spec.name, run.result)

    image = spec.docker.image or "the sandbox"
    made = _declared(
        spec, f"runs {' '.join(spec.docker.command)} in {image}", call, "docker", where
    )
    made.labels["network"] = spec.network
    return made


_CODE_SCHEMA = {
    "python": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source; print results"}},
        "required": ["code"],
    },
    "shell": {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "a POSIX sh command line"}},
        "required": ["command"],
    },
}


def _code_tool(
    language: str,
    spec: SandboxBuiltin,
    confirm: bool,
    where: str,
    base: Path,
    engine: DockerEngine,
    namespace: MutableMapping[str, Any] | None,
) -> Tool:
    key = "code" if language == "python" else "command"
    review = None
    if language == "python" and spec.in_kernel:
        if namespace is None:
            raise ConfigError(f"{where}: in_kernel needs a notebook namespace (use it in Jupyter)")
        notebook = NotebookPython(namespace)
        function: Callable[..., Any] = notebook
        review = notebook.review
        description = (
            "Run Python in the notebook's own namespace: the user's variables (DataFrames, "
            "models, everything defined) are already in memory, so use them by name, never "
            "load them from a file (a DataFrame `orders`: code `(orders['status'] == "
            "'late').sum()`). What the code binds stays. Returns its stdout, the last "
            "expression's value and what it changed; matplotlib figures are shown to the user"
        )
    else:

        async def function(**parameters: Any) -> Any:
            return await run_code(
                "python" if language == "python" else "shell",
                str(parameters[key]),
                sandbox=spec.sandbox,
                time_limit=spec.timeout,
                memory=spec.memory,
                image=spec.image,
                network=spec.network,
                engine=engine,
                cwd=str(base) if spec.sandbox == "subprocess" else None,
                pass_env=spec.pass_env,
            )

        description = (
            f"Run {'Python code' if language == 'python' else 'a shell command'} in a "
            f"{spec.sandbox} sandbox ({spec.timeout:g} s, {spec.memory}); returns its stdout"
        )
    return Tool(
        language,
        description,
        function,
        _CODE_SCHEMA[language],
        None,
        kind="builtin",
        source=where,
        confirm=confirm,
        timeout=None if spec.in_kernel else spec.timeout,
        labels={"network": spec.network},
        review=review,
        reads_notebook=language == "python" and spec.in_kernel,
    )


def _files_workspace(
    agent: AgentManifest,
    base: Path,
    protected: Mapping[Path, str] | None = None,
    source: str = "the manifest",
) -> Workspace | None:
    """The workspace of ``agent``'s file built-ins, or ``None`` when they are off.

    Parameters
    ----------
    agent
        The agent's manifest.
    base
        Directory a relative workspace is taken from (the manifest's folder).
    protected
        Resolved paths a writable workspace must not contain, each with how
        a message names it (the session's manifests, the notebook's folder).
    source
        How messages name the manifest (its path).

    Raises
    ------
    ConfigError
        When ``write_file`` is on and the workspace is, or holds, a protected
        path: the agent could rewrite its own manifest, or put modules where
        the kernel imports from.
    """
    files = agent.builtins.files
    if files is None or not files.enabled:
        return None
    workspace = Workspace(base / files.workspace, max_bytes=files.max_bytes)
    held = [
        f"{what} {path}"
        for path, what in (protected or {}).items()
        if files.write and (path == workspace.root or workspace.root in path.parents)
    ]
    if held:
        raise ConfigError(
            f"{source} builtins.files.workspace: {workspace.root} holds {' and '.join(held)}, "
            "which write_file could then rewrite; give the files a folder of their own "
            "(the default is cortex-workspace beside the manifest) or set write: false"
        )
    return workspace


def docker_engine(settings: DockerSettings, base: Path) -> DockerEngine:
    """The Docker engine a manifest's ``executors.docker`` names, for its tools and relics.

    Parameters
    ----------
    settings
        The manifest's ``executors.docker``.
    base
        The manifest's folder: a relative ``cert_path`` is taken from it.

    Returns
    -------
    DockerEngine
        The settings as a value each tool and relic keeps: nothing global is
        registered, so another manifest naming the same host keeps its own.
    """
    cert_path = str((base / settings.cert_path).resolve()) if settings.cert_path else None
    return DockerEngine(settings.host, settings.tls_verify, cert_path)


def build_tools(
    agent: AgentManifest,
    *,
    source: str = "the manifest",
    base: Path | None = None,
    namespace: MutableMapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
    protected: Mapping[Path, str] | None = None,
) -> ToolRegistry:
    """The tools ``agent`` declares, in a registry (new, or ``registry``).

    Parameters
    ----------
    agent
        The agent's manifest.
    source
        How messages name the manifest (its path).
    base
        Directory relative paths are taken from (the manifest's folder).
    namespace
        The notebook namespace, for ``python`` with ``in_kernel: true``.
    registry
        Where to add the tools (default: a new registry).
    protected
        Resolved paths a writable files workspace may not be or hold (the
        session's manifests, the notebook's folder), each with how a message
        names it.

    Raises
    ------
    ConfigError
        A callable that cannot be imported, a name used twice, a writable
        workspace holding a protected path.
    """
    tools = registry if registry is not None else ToolRegistry()
    root = base if base is not None else Path.cwd()
    settings = agent.executors
    workspace_dir = (root / settings.workspace).resolve()
    engine = docker_engine(settings.docker, root)
    for index, spec in enumerate(agent.tools):
        where = f"{source} tools[{index}]"
        if isinstance(spec, CallableTool):
            made = _callable_tool(spec, where)
        elif isinstance(spec, CommandTool):
            made = _command_tool(spec, where, root, settings.max_output_bytes)
        else:
            made = _docker_tool(spec, where, workspace_dir, engine, settings.max_output_bytes)
            if spec.network and agent.confirm.network:
                made.confirm = True
        tools.add(made)
    for language in ("python", "shell"):
        builtin: SandboxBuiltin = getattr(agent.builtins, language)
        if builtin.enabled:
            confirm = builtin.confirm
            if confirm is None:
                # Code in the notebook's own namespace asks first unless the
                # manifest grants it (confirm: false): it can change the user's data.
                confirm = (
                    (language == "python" and builtin.in_kernel)
                    or getattr(agent.confirm, language)
                    or (builtin.network and agent.confirm.network)
                )
            where = f"{source} builtins.{language}"
            tools.add(
                _code_tool(language, builtin, confirm, where, workspace_dir, engine, namespace)
            )
    files = agent.builtins.files
    workspace = _files_workspace(agent, root, protected, source)
    if files is not None and workspace is not None:
        where = f"{source} builtins.files"
        functions: list[tuple[Callable[..., Any], bool]] = [
            (workspace.read_file, False),
            (workspace.list_files, False),
        ]
        if files.write:
            functions.append((workspace.write_file, agent.confirm.write_file))
        for function, confirm in functions:
            name = function.__name__
            parameters, model = schema_model(function, name)
            tools.add(
                Tool(
                    name,
                    summary(function.__doc__),
                    function,
                    parameters,
                    model,
                    kind="builtin",
                    source=where,
                    confirm=confirm,
                )
            )
    return tools

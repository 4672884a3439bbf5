"""The composition root: the one place that wires a :class:`Session` together.

The CLI (``cortex-kernel run``), the Jupyter kernel and the ``%%agent``
magic (and the tests) build their sessions here: :func:`build_session`
resolves the model, loads the agent's manifest (or takes the default agent),
and injects the executors, the manifest's tools, the protocol prompt and the
model resolver into the runtime through its ports
(:mod:`cortex_kernel.runtime.ports`). Nothing else constructs executors or
picks a prompt, and nothing touches a session up afterwards: what a session
is is one frozen :class:`~cortex_kernel.runtime.ports.SessionConfig` built
here; a setting changed later (``%model``) is a new one, made by
:func:`with_model` or :meth:`~cortex_kernel.runtime.ports.SessionConfig.replace`.

A session's manifests are read once, when it is built (a snapshot of its
file and of every file its sub-agents come from): an ``agent`` action builds
the sub-agent's session from that snapshot, never from the file as it is on
disk by then, so nothing written during a run changes what an agent may do.
A sub-agent's configuration is derived from its caller's: the same approver
and relic registry, its ``max_depth`` no deeper.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .exceptions import ConfigError, CortexError
from .executors import INTERNAL_ACTIONS, default_executors
from .executors.dask_backend import DaskBackend
from .executors.mcp import McpServerConfig
from .executors.mcp_hub import McpHub
from .executors.relic import RelicExecutor, RelicRegistry
from .executors.relic_base import RelicPlace
from .executors.subagent import AgentExecutor
from .executors.tool import ToolExecutor
from .executors.workflow import WorkflowExecutor
from .llm import resolve_model
from .llm.prompt import ProtocolPrompt
from .manifest import AgentManifest, Manifest, default_agent, load_manifest
from .model_options import ModelOptions, ProtocolName, protocol_named
from .protocol.models import ActionType
from .runtime.feeds import FeedRegistry, FeedSpec
from .runtime.limits import Limits
from .runtime.ports import (
    Approver,
    Catalog,
    Executor,
    Model,
    ModelChoice,
    ModelResolver,
    PromptBuilder,
    Service,
    SessionConfig,
)
from .runtime.session import Session
from .runtime.tools import ToolRegistry
from .runtime.variables import VariableStore
from .toolset import build_tools, docker_engine

__all__ = ["build_session", "mcp_hub", "with_model"]


def with_model(
    config: SessionConfig, model: str | Model | None = None, options: ModelOptions | None = None
) -> SessionConfig:
    """``config`` with the model the user chose.

    Parameters
    ----------
    config
        A session's configuration.
    model
        A model string (``replay:PATH``, ``openai/gpt-4o``…) or a
        :class:`Model` (used as it is); ``None``: the agent's own
        (:attr:`~cortex_kernel.runtime.ports.SessionConfig.own_model`).
    options
        Options over the agent's own (:class:`~cortex_kernel.model_options.ModelOptions`);
        their ``protocol`` is the session's protocol.

    Raises
    ------
    ConfigError
        A bad model string or option.
    """
    chosen, protocol = _choose(config.own_model, model, options)
    return config.replace(model=chosen, protocol=protocol)


def _choose(
    own: ModelChoice, model: str | Model | None, options: ModelOptions | None
) -> tuple[Model, ProtocolName]:
    """The model and protocol of ``model`` with ``options`` over the agent's own choice."""
    merged = own.options.merged(options)
    if not isinstance(model, Model):
        model = resolve_model(model or own.name, merged)
    return model, merged.protocol or "xml"


def _listed_models(listed: Mapping[str, ModelOptions]) -> ModelResolver:
    """The models an ``llm`` action may name, each with the options the manifest gives it.

    A model not listed (a replay file beside the session's replay) gets none.
    """

    def resolve_listed(name: str) -> Model:
        return resolve_model(name, listed.get(name))

    return resolve_listed


def _count_tokens(text: str) -> int:
    # Imported on first use: litellm costs seconds, and most feeds set no max_tokens.
    from .llm.litellm_model import text_tokens

    return text_tokens(text)


@dataclass(frozen=True)
class _Owner:
    """What the owner of a session gives it besides the manifest (see :func:`build_session`)."""

    options: ModelOptions | None = None
    approver: Approver | None = None
    relics: RelicRegistry | None = None
    namespace: MutableMapping[str, Any] | None = None
    variables: VariableStore | None = None
    read_notebook: bool = False
    transcript_dir: Path | None = None
    limits: Limits | None = None
    tools: ToolRegistry | None = None
    feeds: FeedRegistry | None = None
    host_feeds: Sequence[FeedSpec] = ()
    feed_providers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    prompt: PromptBuilder | None = None
    allowed_internal: frozenset[str] | None = None
    notebook_python: bool = False


def build_session(  # noqa: PLR0913 - every setting at once: nothing is set afterwards
    model: str | Model | None = None,
    manifest: str | Path | None = None,
    protocol: str | None = None,
    options: ModelOptions | None = None,
    *,
    agent: str | None = None,
    approver: Approver | None = None,
    relics: RelicRegistry | None = None,
    namespace: MutableMapping[str, Any] | None = None,
    variables: VariableStore | None = None,
    read_notebook: bool = False,
    transcript_dir: Path | None = None,
    limits: Limits | None = None,
    tools: ToolRegistry | None = None,
    feeds: FeedRegistry | None = None,
    host_feeds: Sequence[FeedSpec] = (),
    feed_providers: Mapping[str, Callable[..., Any]] | None = None,
    prompt: PromptBuilder | None = None,
    allowed_internal: frozenset[str] | None = None,
    notebook_python: bool = False,
) -> Session:
    """Compose a session: everything it is, in one go.

    Parameters
    ----------
    model
        ``replay:PATH[?tps=N]``, a litellm model string, a :class:`Model`
        (shared between sessions, as the eval does), or ``None`` for the
        manifest's model or the default (see :func:`cortex_kernel.llm.resolve_model`).
    manifest
        An agent manifest (YAML or TOML); ``None`` for the built-in default agent.
    protocol
        ``"xml"`` (default) or ``"tools"``; ``options.protocol`` when not given,
        then the manifest's.
    options
        Model options (:class:`~cortex_kernel.model_options.ModelOptions`); each
        one set here wins over the manifest's ``model:`` table.
    agent
        Which agent of a manifest that defines several (default: its ``default``).
    approver
        Decides on tools and relic operations marked ``confirm: true``, in
        this session and its sub-agents' (``None``: such calls are refused).
    relics
        Where the manifest's relics live: the owner's registry (the kernel
        passes one per kernel, so relics outlive sessions). ``None``: the
        session makes its own and stops it in :meth:`Session.aclose`.
    namespace, variables
        The notebook's ``user_ns`` (output keys are written there), or a
        :class:`~cortex_kernel.runtime.variables.VariableStore` over it that
        the owner made first (the kernel's ``notebook_variables`` feed reads it).
    read_notebook
        Let ``$name`` read the notebook's own variables (a manifest may grant it too).
    transcript_dir
        Where run transcripts go (default: the per-user state folder).
    limits
        Per-run limits instead of the manifest's.
    tools
        A tool registry to start from (the manifest's tools are added to it).
    feeds
        The context feeds instead of the manifest's.
    host_feeds
        Feeds the owner adds to the manifest's, unless one has the same id
        (the kernel's ``notebook_variables``).
    feed_providers
        Built-in feed sources the owner fills (``notebook_variables``).
    prompt
        Another system prompt builder (default: the protocol prompt).
    allowed_internal
        The internal actions the agent may use instead of the manifest's.
    notebook_python
        With no manifest, give the default agent the ``python`` built-in in
        ``namespace`` (each call approved first); a manifest says for itself.

    Raises
    ------
    ConfigError
        A bad model string, protocol or manifest (the message names the file and field).
    """
    if protocol is not None:
        chosen = ModelOptions(protocol=protocol_named(protocol))
        options = (options or ModelOptions()).merged(chosen)
    owner = _Owner(
        options=options,
        approver=approver,
        relics=relics,
        namespace=namespace,
        variables=variables,
        read_notebook=read_notebook,
        transcript_dir=transcript_dir,
        limits=limits,
        tools=tools,
        feeds=feeds,
        host_feeds=tuple(host_feeds),
        feed_providers=dict(feed_providers or {}),
        prompt=prompt,
        allowed_internal=allowed_internal,
        notebook_python=notebook_python,
    )
    if manifest is not None:
        snapshot = _Snapshot.read(Path(manifest).expanduser(), agent)
        return _compose(model, snapshot, snapshot.top, owner)
    if agent is not None:
        raise ConfigError(
            f"no agent named '{agent}': there is no manifest; load one with --manifest "
            "(or %manifest) to choose among its agents"
        )
    return _compose(model, None, None, owner)


def _notebook_folders() -> dict[Path, str]:
    """Folders no writable files workspace may hold: the kernel imports modules from them."""
    folders = {Path.cwd().resolve(): "the working directory (the notebook's folder)"}
    notebook = os.environ.get("CORTEX_NOTEBOOK_DIR")
    if notebook:
        folders.setdefault(Path(notebook).expanduser().resolve(), "the notebook's folder")
    return folders


@dataclass(frozen=True)
class _Snapshot:
    """The manifests of one session and its sub-agents, read once when it was built.

    ``files`` maps each file's resolved path to what was read from it
    (``failed``: why it could not be, said when a sub-agent from it is
    called, as a name no file defines is); ``links`` maps each agent of the
    tree, (file, name), to where its sub-agents are (name -> file);
    ``protected`` is what no writable files workspace may hold (the
    manifests, the notebook's folder).
    """

    top: tuple[Path, str]
    files: Mapping[Path, Manifest]
    failed: Mapping[Path, str]
    links: Mapping[tuple[Path, str], Mapping[str, Path]]
    protected: Mapping[Path, str]

    @classmethod
    def read(cls, path: Path, agent: str | None) -> _Snapshot:
        """Read ``path`` and every file the agent's sub-agents (and theirs) come from.

        Raises
        ------
        ConfigError
            A bad ``path``, or no agent ``agent`` in it.
        """
        first = path.resolve()
        files: dict[Path, Manifest] = {first: load_manifest(path)}
        failed: dict[Path, str] = {}
        links: dict[tuple[Path, str], dict[str, Path]] = {}
        top = (first, files[first].agent(agent).name)
        pending = [top]
        while pending:
            key, name = pending.pop()
            if (key, name) in links:
                continue
            loaded = files[key]
            here = links[(key, name)] = {}
            for sub in loaded.agent(name).sub_agents:
                target = key  # no manifest: the same file
                if sub.manifest is not None:
                    manifest = Path(sub.manifest)
                    file = manifest if manifest.is_absolute() else _base(loaded) / manifest
                    target = file.resolve()
                    if target not in files and target not in failed:
                        try:
                            files[target] = load_manifest(file)
                        except ConfigError as exc:
                            failed[target] = str(exc)
                here[sub.name] = target
                if target in files and sub.name in files[target].names():
                    pending.append((target, sub.name))
        protected = {**_notebook_folders(), **dict.fromkeys(files, "the manifest")}
        return cls(top, files, failed, links, protected)


def _base(loaded: Manifest) -> Path:
    # Absolute: a sub-agent built later does not depend on the working directory then.
    return loaded.path.absolute().parent


def _compose(
    model: str | Model | None,
    snapshot: _Snapshot | None,
    which: tuple[Path, str] | None,
    owner: _Owner,
    caller: SessionConfig | None = None,
) -> Session:
    """The session of agent ``which`` of ``snapshot`` (``None``: the default agent).

    ``caller``: the configuration of the run that calls it as a sub-agent.
    """
    if snapshot is not None and which is not None:
        loaded = snapshot.files[which[0]]
        spec = loaded.agent(which[1])
        source, base = str(loaded.path), _base(loaded)
        protected = snapshot.protected
    else:
        protected = _notebook_folders()
    variables = owner.variables
    namespace = variables.namespace if variables is not None else owner.namespace
    if snapshot is None or which is None:
        notebook = owner.notebook_python and namespace is not None
        spec, source, base = default_agent(notebook), "the default agent", Path.cwd()
    tools = owner.tools if owner.tools is not None else ToolRegistry()
    build_tools(
        spec, source=source, base=base, namespace=namespace, registry=tools, protected=protected
    )
    limits = owner.limits if owner.limits is not None else spec.limits
    if caller is not None and caller.limits.max_depth < limits.max_depth:
        limits = limits.model_copy(update={"max_depth": caller.limits.max_depth})
    executors = default_executors()
    services: list[Service] = []
    _tool_backend(executors, spec, namespace, services)
    hub = McpHub(base)
    for server in spec.mcp_servers:
        hub.add(McpServerConfig(**server.model_dump(), source=source))
    relics = owner.relics
    catalog: dict[str, tuple[dict[str, Any], ...]] = {}
    if spec.relics:
        if relics is None:  # the session's own, closed with it
            relics = RelicRegistry()
            services.append(relics)
        _relics(executors, catalog, relics, spec, source, base)
    if spec.sub_agents and snapshot is not None and which is not None:
        _sub_agents(executors, catalog, spec, snapshot, which, relics)
    if spec.workflows:
        executors[ActionType.WORKFLOW] = WorkflowExecutor(
            {w.name: w for w in spec.workflows}, max_parallel=limits.max_parallel
        )
        catalog["workflows"] = tuple(
            {"name": w.name, "description": w.description, "parameters": w.parameters}
            for w in spec.workflows
        )
    feeds = owner.feeds
    if feeds is None:
        declared = {feed.id for feed in spec.context_feeds}
        feeds = FeedRegistry(
            [*spec.context_feeds, *(f for f in owner.host_feeds if f.id not in declared)],
            sources=spec.feed_sources,
            count_tokens=_count_tokens,
        )
    listed = {listed.name: listed.options() for listed in spec.llm_models}
    own = ModelChoice(
        spec.model.name,
        spec.model.options().merged(ModelOptions(protocol=spec.model.protocol or spec.protocol)),
    )
    chosen, protocol = _choose(own, model, owner.options)
    config = SessionConfig(
        model=chosen,
        protocol=protocol,
        prompt=owner.prompt if owner.prompt is not None else ProtocolPrompt(),
        executors=executors,
        own_model=own,
        resolve_model=_listed_models(listed),
        llm_models=frozenset(listed),
        allowed_internal=(
            owner.allowed_internal
            if owner.allowed_internal is not None
            else frozenset(spec.internal_actions) & INTERNAL_ACTIONS
        ),
        limits=limits,
        agent_name=spec.name,
        instructions=spec.instructions,
        catalog=Catalog(**catalog),
        approver=owner.approver,
        read_notebook=owner.read_notebook or spec.read_notebook,
        transcript_dir=owner.transcript_dir,
    )
    return Session(
        config,
        tools=tools,
        variables=variables,
        namespace=None if variables is not None else namespace,
        feeds=feeds,
        # mcp_resource feeds read through the hub (see runtime.feeds.source_fetcher).
        feed_providers={"mcp_resource": lambda: hub.read_resource, **owner.feed_providers},
        tool_sources=[hub],
        services=services,
        relics=relics,
    )


def _sub_agents(
    executors: dict[ActionType, Executor],
    catalog: dict[str, tuple[dict[str, Any], ...]],
    spec: AgentManifest,
    snapshot: _Snapshot,
    which: tuple[Path, str],
    relics: RelicRegistry | None,
) -> None:
    """``agent`` actions: each call builds a fresh session of the named sub-agent.

    From the snapshot, not the file: a manifest rewritten on disk since (by
    the agent's own tools, say) gives no sub-agent new tools, models or
    endpoints. From the caller's configuration: whoever approves the
    caller's ``confirm: true`` calls approves its sub-agents' too (``--yes``,
    the view's buttons, ``%approvals``), and they share its relics.
    """
    where = snapshot.links[which]

    def factory(name: str, caller: SessionConfig) -> Session:
        sub = (where[name], name)
        if sub[0] in snapshot.failed:
            raise ConfigError(snapshot.failed[sub[0]])
        sub_spec = snapshot.files[sub[0]].agent(name)  # raises, listing its agents, if unknown
        # A sub-agent with no model of its own thinks with its caller's.
        model = None if sub_spec.model.name else caller.model
        owner = _Owner(
            approver=caller.approver, relics=relics, transcript_dir=caller.transcript_dir
        )
        return _compose(model, snapshot, sub, owner, caller)

    described = {sub.name: sub.description for sub in spec.sub_agents}
    executors[ActionType.AGENT] = AgentExecutor(described, factory)
    catalog["agents"] = tuple(
        {"name": name, "description": text or f"the {name} agent", "parameters": {"message": "str"}}
        for name, text in described.items()
    )


def _relics(
    executors: dict[ActionType, Executor],
    catalog: dict[str, tuple[dict[str, Any], ...]],
    relics: RelicRegistry,
    spec: AgentManifest,
    source: str,
    base: Path,
) -> None:
    """``relic`` actions on the owner's registry (or one the session owns)."""
    place = RelicPlace(
        base=base,
        workspace=(base / spec.executors.workspace).resolve(),
        docker=docker_engine(spec.executors.docker, base),
        source=source,
    )
    try:
        for relic in spec.relics:
            relics.declare(relic, place)
    except CortexError as exc:
        raise ConfigError(str(exc)) from None
    names = [relic.name for relic in spec.relics]
    executors[ActionType.RELIC] = RelicExecutor(relics, names, confirm_network=spec.confirm.network)
    catalog["relics"] = tuple(relics.catalog(names))


def _tool_backend(
    executors: Mapping[ActionType, Executor],
    spec: AgentManifest,
    namespace: Any,
    services: list[Service],
) -> None:
    """Python tools on a Dask cluster: the backend connects on the first call that needs it."""
    executor = executors.get(ActionType.TOOL)
    if not isinstance(executor, ToolExecutor):
        return
    settings = spec.executor
    backend = DaskBackend(
        settings.address,
        keep_on_cluster=settings.keep_bytes,
        connect_timeout=settings.connect_timeout,
        namespace=namespace,
    )
    executor.backends[backend.name] = backend
    executor.default = settings.kind
    services.append(backend)  # its client is closed with the session


def mcp_hub(session: Session) -> McpHub:
    """The session's MCP servers (``%mcp`` adds and removes them).

    Raises
    ------
    ConfigError
        The session was not built by :func:`build_session`.
    """
    for source in session.tool_sources:
        if isinstance(source, McpHub):
            return source
    raise ConfigError("this session has no MCP hub: build it with build_session")

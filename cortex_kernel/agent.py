"""The composition root: the one place that wires a :class:`Session` together.

The CLI (``cortex-kernel run``), the Jupyter kernel and the ``%%agent``
magic (and the tests) build their sessions here: :func:`build_session`
resolves the model, loads the agent's manifest (or takes the default agent),
and injects the executors, the manifest's tools, the protocol prompt and the
model resolver into the runtime through its ports
(:mod:`cortex_kernel.runtime.ports`). Nothing else constructs executors or
picks a prompt.

A session's manifests are read once, when it is built (a snapshot of its
file and of every file its sub-agents come from): an ``agent`` action builds
the sub-agent's session from that snapshot, never from the file as it is on
disk by then, so nothing written during a run changes what an agent may do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .exceptions import ConfigError, CortexError
from .executors import INTERNAL_ACTIONS, default_executors
from .executors.approval import Approver
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
from .manifest import AgentManifest, ManifestFile, default_agent, load_manifest
from .model_options import ModelOptions
from .protocol.models import ActionType
from .runtime.feeds import FeedRegistry
from .runtime.limits import Limits
from .runtime.ports import Model, ModelResolver, protocol_named
from .runtime.session import Session
from .toolset import build_tools, docker_engine

__all__ = ["build_session", "mcp_hub", "resolve"]


def resolve(
    model: str | Model | None, protocol: str = "xml", options: ModelOptions | None = None
) -> Model:
    """The model for ``model`` (``replay:PATH[?tps=N]``, a provider model string, or ``None``).

    ``options`` (temperature, max tokens, seed, endpoint) go to a provider
    model; a replay model ignores them. A :class:`Model` is used as it is.
    See :func:`cortex_kernel.llm.resolve_model`.
    """
    if isinstance(model, Model):
        return model
    kwargs = options.model_kwargs() if options is not None else {}
    return resolve_model(model, protocol=protocol, **kwargs)


def _resolve_named(name: str) -> Model:
    # The model an ``llm`` action names: plain, like ``%model NAME``.
    return resolve_model(name)


def _resolver(listed: dict[str, ModelOptions]) -> ModelResolver:
    """``_resolve_named`` with the options the manifest's ``llm_models`` give each model."""

    def resolve_listed(name: str) -> Model:
        options = listed.get(name)
        if options is None:
            return _resolve_named(name)
        # A sub-completion offers no tools: the protocol does not matter.
        return resolve(name, "xml", options)

    return resolve_listed


def _count_tokens(text: str) -> int:
    # Imported on first use: litellm costs seconds, and most feeds set no max_tokens.
    from .llm.litellm_model import text_tokens

    return text_tokens(text)


def build_session(
    model: str | Model | None = None,
    manifest: str | Path | None = None,
    protocol: str | None = None,
    options: ModelOptions | None = None,
    *,
    agent: str | None = None,
    approver: Approver | None = None,
    relics: RelicRegistry | None = None,
    **kw: Any,
) -> Session:
    """Compose a session.

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
    **kw
        Passed to :class:`Session` (``namespace``, ``transcript_dir``,
        ``limits``, ``tools``; ``prompt`` or ``executors`` to replace ours).

    Raises
    ------
    ConfigError
        A bad model string, protocol or manifest (the message names the file and field).
    """
    if manifest is not None:
        snapshot = _Snapshot.read(Path(manifest).expanduser(), agent)
        return _compose(model, snapshot, snapshot.top, protocol, options, approver, relics, kw)
    if agent is not None:
        raise ConfigError(
            f"no agent named '{agent}': there is no manifest; load one with --manifest "
            "(or %manifest) to choose among its agents"
        )
    return _compose(model, None, None, protocol, options, approver, relics, kw)


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
    files: Mapping[Path, ManifestFile]
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
        files: dict[Path, ManifestFile] = {first: load_manifest(path)}
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


def _base(loaded: ManifestFile) -> Path:
    # Absolute: a sub-agent built later does not depend on the working directory then.
    return (loaded.path or Path("manifest")).absolute().parent


def _compose(
    model: str | Model | None,
    snapshot: _Snapshot | None,
    which: tuple[Path, str] | None,
    protocol: str | None,
    options: ModelOptions | None,
    approver: Approver | None,
    relics: RelicRegistry | None,
    kw: dict[str, Any],
) -> Session:
    """:func:`build_session` for the agent ``which`` of ``snapshot`` (``None``: the default)."""
    if snapshot is not None and which is not None:
        loaded = snapshot.files[which[0]]
        spec = loaded.agent(which[1])
        source, base = str(loaded.path), _base(loaded)
    else:
        spec, source, base = default_agent(), "the default agent", Path.cwd()
    if protocol is None and options is not None:
        protocol = options.protocol
    if protocol is None:
        protocol = spec.model.protocol or spec.protocol
    chosen = protocol_named(protocol)
    kw.setdefault("prompt", ProtocolPrompt())
    kw.setdefault("executors", default_executors())
    kw.setdefault("allowed_internal", frozenset(spec.internal_actions) & INTERNAL_ACTIONS)
    kw.setdefault("resolve_model", _resolve_named)
    kw.setdefault("limits", Limits(**spec.limits.model_dump(exclude_none=True)))
    feeds = kw.pop("feeds", None)
    merged = spec.model.options().merged(options)
    chosen_model = model if model is not None else spec.model.name
    session = Session(resolve(chosen_model, chosen, merged), protocol=chosen, **kw)
    _configure(session, spec, source, base, kw.get("namespace"), snapshot, which)
    session.relics = relics  # the owner's, for its sub-agents too (None: made below if needed)
    if spec.relics:
        _relics(session, spec, source, base, relics)
    if feeds is None:
        feeds = FeedRegistry(
            spec.context_feeds, sources=spec.feed_sources, count_tokens=_count_tokens
        )
    session.feeds = feeds
    session.approver = approver
    return session


def _sub_agents(
    session: Session, spec: AgentManifest, snapshot: _Snapshot, which: tuple[Path, str]
) -> None:
    """``agent`` actions: each call builds a fresh session of the named sub-agent.

    From the snapshot, not the file: a manifest rewritten on disk since (by
    the agent's own tools, say) gives no sub-agent new tools, models or endpoints.
    """
    where = snapshot.links[which]

    def factory(name: str) -> Session:
        sub = (where[name], name)
        if sub[0] in snapshot.failed:
            raise ConfigError(snapshot.failed[sub[0]])
        sub_spec = snapshot.files[sub[0]].agent(name)  # raises, listing its agents, if unknown
        # A sub-agent with no model of its own thinks with its parent's.
        model = None if sub_spec.model.name else session.model
        kw: dict[str, Any] = {"transcript_dir": session.transcript_dir}
        # Whoever approves the session's confirm: true calls approves its
        # sub-agents' too (--yes, the view's buttons, %approvals).
        return _compose(model, snapshot, sub, None, None, session.approver, session.relics, kw)

    described = {sub.name: sub.description for sub in spec.sub_agents}
    session.executors[ActionType.AGENT] = AgentExecutor(
        described, factory, max_depth=session.limits.max_depth
    )
    session.catalog["agents"] = [
        {"name": name, "description": text or f"the {name} agent", "parameters": {"message": "str"}}
        for name, text in described.items()
    ]


def _configure(
    session: Session,
    spec: AgentManifest,
    source: str,
    base: Path,
    namespace: Any,
    snapshot: _Snapshot | None,
    which: tuple[Path, str] | None,
) -> None:
    """The manifest's part of the session: name, instructions, tools, declared-only types."""
    session.agent_name = spec.name
    session.instructions = spec.instructions
    session.read_notebook = session.read_notebook or spec.read_notebook
    listed = {model.name: model.options() for model in spec.llm_models}
    session.llm_models = frozenset(listed)
    if session.resolve_model is _resolve_named:  # not one the caller chose
        session.resolve_model = _resolver(listed)
    build_tools(
        spec,
        source=source,
        base=base,
        namespace=namespace,
        registry=session.tools,
        protected=snapshot.protected if snapshot is not None else _notebook_folders(),
    )
    _tool_backends(session, spec, namespace)
    if spec.mcp_servers:
        hub = mcp_hub(session, base)
        for server in spec.mcp_servers:
            hub.add(McpServerConfig(**server.model_dump(), source=source))
    if spec.sub_agents and snapshot is not None and which is not None:
        _sub_agents(session, spec, snapshot, which)
    if spec.workflows:
        session.executors[ActionType.WORKFLOW] = WorkflowExecutor(
            {w.name: w for w in spec.workflows}, max_parallel=session.limits.max_parallel
        )
        session.catalog["workflows"] = [
            {"name": w.name, "description": w.description, "parameters": w.parameters}
            for w in spec.workflows
        ]


def _relics(
    session: Session, spec: AgentManifest, source: str, base: Path, relics: RelicRegistry | None
) -> None:
    """``relic`` actions on the owner's registry (or one the session owns)."""
    if relics is None:
        relics = RelicRegistry()
        session.services.append(relics)
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
    session.relics = relics
    session.executors[ActionType.RELIC] = RelicExecutor(
        relics, names, confirm_network=spec.confirm.network
    )
    session.catalog["relics"] = relics.catalog(names)


def _tool_backends(session: Session, spec: AgentManifest, namespace: Any) -> None:
    """Python tools on a Dask cluster: the backend connects on the first call that needs it."""
    executor = session.executors.get(ActionType.TOOL)
    if not isinstance(executor, ToolExecutor):
        return  # replaced by the caller: it decides where tools run
    settings = spec.executor
    backend = DaskBackend(
        settings.address,
        keep_on_cluster=settings.keep_bytes,
        connect_timeout=settings.connect_timeout,
        namespace=namespace,
    )
    executor.backends[backend.name] = backend
    executor.default = settings.kind
    session.services.append(backend)  # its client is closed with the session


def mcp_hub(session: Session, base: Path | None = None) -> McpHub:
    """The session's MCP servers (added, empty, on first use).

    Parameters
    ----------
    session
        A session built by :func:`build_session`.
    base
        Folder a server's relative ``cwd`` is taken from (default: the current one).
    """
    for source in session.tool_sources:
        if isinstance(source, McpHub):
            return source
    hub = McpHub(base)
    session.tool_sources.append(hub)
    # mcp_resource feeds read through the hub (see runtime.feeds.source_fetcher).
    session.feed_providers["mcp_resource"] = lambda: hub.read_resource
    return hub

"""One agent cell, run on the kernel's own event loop.

Both front doors — a message cell in the Cortex kernel and a ``%%agent``
cell in any IPython kernel — are rewritten by an input transformer
(:mod:`cortex_kernel.jupyter.magics`) into ``await <this module>.run_cell(…)``,
so the run is an ordinary top-level ``await`` of IPython: it streams while
the loop keeps serving comm messages, the execution count advances, the
answer is the cell's ``execute_result`` and a failure is the cell's error.

:class:`AgentRunner` holds the notebook's session (built lazily, so the
kernel starts without importing the runtime, pydantic models or litellm);
:func:`run_cell` is what the rewritten cell awaits.

Session lifetime
----------------
A session is open (``async with session:``, see
:mod:`cortex_kernel.runtime.session`) for as long as the notebook may use
it. ipykernel runs its loop with tornado's ``IOLoop.start()``, not under a
task group, so the outermost scope there is the loop's own lifetime:
:class:`SessionHost` is one task on the kernel's loop whose task group holds
each session open in a task of its own, from the session's first run until
it is retired (a new manifest or agent) or the kernel shuts down
(:meth:`AgentRunner.aclose`, called by ``CortexKernel.do_shutdown``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigError, RunFailed, RunInterrupted, RunLimitReached
from .approvals import ViewApprover
from .interpolate import interpolate
from .interrupt import cancel_on_sigint

if TYPE_CHECKING:
    # Imported where used: the kernel imports this module at start, and these
    # pull in pydantic and the runtime (the background warm-up imports them).
    from ..executors.relic import RelicRegistry
    from ..model_options import ModelOptions
    from ..runtime.run_result import RunResult
    from ..runtime.session import Session

__all__ = ["AgentRunner", "run_cell", "runner_for"]

log = logging.getLogger(__name__)


# Errors shown as one clear line instead of a traceback through our frames.
CELL_ERRORS: tuple[type[BaseException], ...] = (
    RunFailed,
    RunLimitReached,
    RunInterrupted,
    ConfigError,
)


class FinalAnswer:
    """The cell's result: the final answer, shown as formatted markdown.

    The answer is the model's text (with tool results in it), and a front
    end trusts a cell it executed: every representation is inert (see
    :mod:`cortex_kernel.jupyter.safe_markup`). ``text/html`` is the
    markdown rendered and sanitized (what JupyterLab, Notebook 7, VS Code
    and nbconvert show); ``text/markdown`` is it written back with raw HTML
    escaped (for renderers of markdown only, such as LaTeX export);
    ``text/plain`` is the answer itself, so saved notebooks and nbval see it
    without quotes, with terminal control characters made visible. No
    ``$`` is typeset as math.

    Parameters
    ----------
    text
        The answer as shown: figures no result backs marked ``*(unverified)*``
        (:func:`~cortex_kernel.runtime.grounding.marked_answer`).
    note
        The grounding note, a line under the answer in every representation;
        ``""`` for none.
    """

    def __init__(self, text: str, note: str = "") -> None:
        self.text = text
        self.note = note

    def _shown(self, *, markdown: bool) -> str:
        if not self.note:
            return self.text
        return f"{self.text}\n\n*⚠ {self.note}*" if markdown else f"{self.text}\n\n⚠ {self.note}"

    def __repr__(self) -> str:
        from .safe_markup import terminal_safe

        return terminal_safe(self._shown(markdown=False))

    def _repr_markdown_(self) -> str:
        from .safe_markup import markdown_source

        return markdown_source(self._shown(markdown=True))

    def _repr_html_(self) -> str:
        from .safe_markup import markdown_html

        return markdown_html(self._shown(markdown=True))


@dataclass
class _DemoTrace:
    """What the demo model left in a session: the names its runs bound, its results,
    and its runs' keys in the session's history."""

    names: set[str] = field(default_factory=set)
    results: list[RunResult] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)


class _Options(argparse.Namespace):
    model: str | None
    manifest: str | None
    agent: str | None
    model_options: ModelOptions


_USAGE = (
    "Usage: %%agent [--model M] [--temperature T] [--max-tokens N] [--seed S] "
    "[--api-base URL] [--protocol xml|tools] [--manifest P] [--agent NAME]"
)


def parse_options(line: str) -> _Options:
    """Parse the ``%%agent`` line: ``--model M --manifest P --agent NAME`` and
    the model options of :mod:`cortex_kernel.model_options` (``--temperature``…).

    Raises
    ------
    ConfigError
        On an unknown option, a missing value or a bad value.
    """
    from ..model_options import add_model_arguments, options_from_args

    parser = argparse.ArgumentParser(prog="%%agent", add_help=False, exit_on_error=False)
    parser.add_argument("--model")
    parser.add_argument("--manifest")
    parser.add_argument("--agent")
    add_model_arguments(parser)
    try:
        options, extra = parser.parse_known_args(shlex.split(line), namespace=_Options())
    except (argparse.ArgumentError, ValueError) as exc:
        raise ConfigError(f"%%agent: {exc}. {_USAGE}") from exc
    if extra:
        raise ConfigError(f"%%agent: unknown option(s) {' '.join(extra)}. {_USAGE}")
    options.model_options = options_from_args(options, where="%%agent")
    return options


class SessionHost:
    """Holds sessions open for the lifetime of the kernel's loop (see the module docstring).

    The host task is started by the first :meth:`open`, on the running loop.
    """

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._group: Any = None  # the host's anyio TaskGroup
        self._ready: Any = None
        self._stop: Any = None
        self._held: dict[int, Any] = {}  # id(session) -> anyio.Event that releases it

    def holds(self, session: Session) -> bool:
        """Whether ``session`` is held open."""
        return id(session) in self._held

    async def open(self, session: Session) -> None:
        """Hold ``session`` open (its background group) until :meth:`release` or :meth:`aclose`."""
        import anyio

        if self.holds(session):
            return
        if self._task is None or self._task.done():
            self._ready, self._stop = anyio.Event(), anyio.Event()
            # The kernel boundary: the one task not started in a task group
            # (ipykernel's loop is not run under one); aclose() stops it.
            self._task = asyncio.get_running_loop().create_task(self._host())
        await self._ready.wait()
        await self._group.start(self._hold, session)

    def release(self, session: Session) -> None:
        """Close ``session`` in the host (its MCP servers stop); returns at once."""
        event = self._held.pop(id(session), None)
        if event is not None:
            event.set()

    async def aclose(self) -> None:
        """Close every session held, then end the host task."""
        for key in list(self._held):
            self._held.pop(key).set()
        task, self._task = self._task, None
        if task is not None and self._stop is not None:
            self._stop.set()
            await task

    async def _host(self) -> None:
        import anyio

        try:
            async with anyio.create_task_group() as group:
                self._group = group
                self._ready.set()
                await self._stop.wait()
                # Every hold was released by aclose(): the group waits for them to close.
        finally:
            self._group = None

    async def _hold(self, session: Session, *, task_status: Any) -> None:
        import anyio

        release = anyio.Event()
        try:
            async with session:
                self._held[id(session)] = release
                task_status.started()
                await release.wait()
        except Exception:  # one session's failing close must not end the others
            log.exception("cortex: closing a session failed")


class AgentRunner:
    """The agent side of one IPython shell: its session, its runs, its transcripts.

    Parameters
    ----------
    shell
        The IPython shell whose ``user_ns`` receives the results.
    """

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.model_spec: str | None = None
        self._model_options: ModelOptions | None = None  # see model_options
        self.manifest: str | None = None
        self.read_notebook = False  # %read_notebook: may $name read the user's variables?
        self.agent: str | None = None  # which agent of the manifest (None: its default)
        # The notebook_variables feed, on by default (%feeds remove turns it off);
        # its values only when the user opts in (%feeds values on).
        self.notebook_variables = True
        self.notebook_values = False
        self.approver = ViewApprover()
        # %approvals was used: the user's mode stands over any manifest's.
        self._approvals_chosen = False
        self.results: list[RunResult] = []
        self.current_cell_id: str | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop the runs use
        # Set by the kernel per cell: the client is a terminal (jupyter console),
        # which shows a display once and ignores its updates.
        self.terminal = False
        self._session: Session | None = None
        self._relics: RelicRegistry | None = None
        self._manifest_sessions: dict[tuple[str, str | None], Session] = {}
        # What the offline demo model left in each session (by id): forgotten
        # when a real model takes over (see _leave_demo).
        self._demo: dict[int, _DemoTrace] = {}
        #: Holds the sessions open while the kernel's loop runs.
        self.host = SessionHost()
        shell.events.register("pre_run_cell", self._pre_run_cell)

    @property
    def model_options(self) -> ModelOptions:
        """The notebook's model options (``%model --temperature 0``…); none set at first."""
        if self._model_options is None:
            from ..model_options import ModelOptions

            self._model_options = ModelOptions()
        return self._model_options

    @model_options.setter
    def model_options(self, options: ModelOptions) -> None:
        self._model_options = options

    def _pre_run_cell(self, info: Any) -> None:
        # The front end's cell id keys the conversation turn (re-run replaces it).
        self.current_cell_id = getattr(info, "cell_id", None)

    def _build(self, model: str | None, manifest: str | None, agent: str | None = None) -> Session:
        from ..agent import build_session
        from ..runtime.variables import VariableStore

        # The notebook_variables source describes the notebook without the
        # names this session's own actions bound there: it reads its store.
        store = VariableStore(self.shell.user_ns)
        host_feeds = []
        providers = {}
        if self.notebook_variables:
            from .notebook_vars import notebook_variables_feed, notebook_variables_source

            providers["notebook_variables"] = notebook_variables_source(self.shell, store)
            host_feeds.append(notebook_variables_feed(self.notebook_values))
        # Transcripts go where the runtime puts them ($CORTEX_TRANSCRIPT_DIR
        # or the temp dir); %transcript export keeps a copy.
        return build_session(
            model=None if model is None else notebook_relative(model),
            manifest=manifest,
            options=self.model_options,
            variables=store,
            read_notebook=self.read_notebook,
            agent=agent,
            approver=self.approver,
            relics=self.relics,
            host_feeds=host_feeds,
            feed_providers=providers,
            notebook_python=True,
        )

    def sessions(self) -> list[Session]:
        """Every session this runner holds (the notebook's, and those of ``%%agent --manifest``)."""
        held = [] if self._session is None else [self._session]
        return held + list(self._manifest_sessions.values())

    @property
    def relics(self) -> RelicRegistry:
        """The kernel's relics: every session of this kernel shares them, and they
        live until the user stops them or the kernel shuts down."""
        if self._relics is None:
            from ..executors.relic import RelicRegistry

            self._relics = RelicRegistry()
        return self._relics

    @property
    def session(self) -> Session:
        """The notebook's session (built on first use)."""
        if self._session is None:
            self._session = self._build(self.model_spec, self.manifest, self.agent)
        return self._session

    def set_model(self, spec: str | None, options: ModelOptions | None = None) -> None:
        """Switch the notebook's model and its options; the history is kept.

        A new ``spec`` starts from its own ``options`` (the protocol stays);
        ``spec=None`` keeps the model and changes only the options given.
        Every session of the notebook gets it (with a manifest's own options
        under the notebook's). The model is checked now (a missing replay
        file, a bad option): a failing ``%model`` raises :class:`ConfigError`
        and changes nothing.
        """
        from ..model_options import ModelOptions

        options = options if options is not None else ModelOptions()
        if spec is None:
            merged = self.model_options.merged(options)
        else:
            merged = ModelOptions(protocol=self.model_options.protocol).merged(options)
        model = spec or self.model_spec
        self._reconfigure(model, merged)
        self.model_options = merged
        if spec is not None:
            self.model_spec = spec

    def set_protocol(self, protocol: str) -> None:
        """Speak ``xml`` (protocol text) or ``tools`` (native function calling) from now on."""
        from ..model_options import ModelOptions

        chosen = ModelOptions.from_mapping({"protocol": protocol}, where="%protocol")
        self.model_options = self.model_options.merged(chosen)
        for session in self.sessions():  # the same model, spoken to another way
            session.config = session.config.replace(protocol=chosen.protocol or "xml")

    def set_read_notebook(self, allowed: bool) -> None:
        """Let ``$name`` in model output read the notebook's variables (or stop it)."""
        self.read_notebook = allowed
        for session in self.sessions():
            session.config = session.config.replace(read_notebook=allowed)

    def _reconfigure(self, model: str | None, options: ModelOptions) -> None:
        """Give every session ``model`` with ``options``; all or none (a bad model changes none)."""
        from ..agent import with_model

        spec = None if model is None else notebook_relative(model)
        if not self.sessions():
            from ..llm import resolve_model

            resolve_model(spec, options)  # checked now, though nothing uses it yet
        configs = [(s, with_model(s.config, spec, options)) for s in self.sessions()]
        for session, config in configs:
            session.config = config
            self._leave_demo(session, config.model)

    def _leave_demo(self, session: Session, model: Any) -> None:
        """Forget what the demo model did in ``session`` once ``model``, a real one, takes over.

        The demo's canned exchange is not a conversation the user had: a real
        model shown it copies it. Its turns go (a real model's turns stay: a
        cell's own ``--model`` may have run meanwhile), and so do the
        variables it bound and ``_run``/``_response`` while they still hold
        its values (a name the user reassigned stays).
        """
        from ..llm import is_demo

        trace = self._demo.get(id(session))
        if trace is None or is_demo(model):
            return
        del self._demo[id(session)]
        session.forget(trace.keys)
        for name in trace.names:
            session.variables.delete(name)
        ns = self.shell.user_ns
        if any(ns.get("_run") is result for result in trace.results):
            ns.pop("_run", None)
            if any(ns.get("_response") is result.answer for result in trace.results):
                ns.pop("_response", None)
        self.results = [r for r in self.results if all(r is not d for d in trace.results)]

    def set_manifest(self, path: str | None) -> list[str]:
        """Use another manifest: a new session (and a new history) from the next cell.

        The file is checked now (a bad one raises :class:`ConfigError` and
        changes nothing). Returns the names of its agents.
        """
        names: list[str] = []
        approvals = None
        if path is not None:
            from ..manifest import load_manifest

            loaded = load_manifest(path)
            names = loaded.names()
            approvals = loaded.agent().approvals
        self.manifest = path
        self.agent = None
        self._retire()
        self._manifest_approvals(approvals)
        return names

    def set_approvals(self, policy: str) -> None:
        """``%approvals POLICY``: the user's mode, over any manifest's from now on.

        Raises
        ------
        KeyError
            Not a mode (:data:`~cortex_kernel.jupyter.approvals.POLICIES`).
        """
        self.approver.set_policy(policy)
        self._approvals_chosen = True

    def _manifest_approvals(self, policy: str | None) -> None:
        """The notebook manifest's ``approvals:`` (unset: ``ask``), unless ``%approvals`` chose.

        Decisions it takes name it in the transcript (``by``).
        """
        if self._approvals_chosen:
            return
        self.approver.policy = "ask"
        self.approver.by = "user"
        if policy is not None and policy != "ask":
            self.approver.set_policy(policy)
            self.approver.by = f"manifest approvals: {policy}"

    def set_agent(self, name: str) -> None:
        """Talk to the manifest's agent ``name`` from the next cell (a new conversation)."""
        from ..manifest import load_manifest

        if self.manifest is None:
            raise ConfigError(
                f"no agent named '{name}': no manifest is loaded; use %manifest PATH first"
            )
        # Raises, listing the agents, if unknown.
        approvals = load_manifest(self.manifest).agent(name).approvals
        self.agent = name
        self._retire()
        self._manifest_approvals(approvals)

    def reset(self) -> None:
        """Forget the conversation."""
        if self._session is not None:
            self._session.reset()

    def _retire(self) -> None:
        """Drop the session (the next cell builds one); the host closes it in the background."""
        session, self._session = self._session, None
        if session is not None:
            self._demo.pop(id(session), None)
            self.host.release(session)

    async def aclose(self) -> None:
        """Close every session (background work, MCP servers) and the host task; stop the relics."""
        try:
            await self.host.aclose()
        finally:
            if self._relics is not None:
                await self._relics.aclose()

    def _session_for(self, options: _Options) -> Session:
        manifest = options.manifest or self.manifest
        agent = options.agent if options.agent else (None if options.manifest else self.agent)
        if options.agent and manifest is None:
            raise ConfigError(
                f"%%agent --agent {options.agent}: no manifest is loaded; add "
                "--manifest PATH or use %manifest PATH first"
            )
        if (manifest, agent) != (self.manifest, self.agent):
            assert manifest is not None
            key = (manifest, agent)
            if key not in self._manifest_sessions:
                self._manifest_sessions[key] = self._build(self.model_spec, manifest, agent)
            return self._manifest_sessions[key]
        return self.session

    def _watch_demo(self, session: Session, model: Any) -> set[str] | None:
        """Before a run on ``model``: the session's names now if it is the demo, else ``None``.

        A real model (a cell's own ``--model`` too) first makes the session
        forget what the demo left in it.
        """
        from ..llm import is_demo

        if is_demo(model):
            return set(session.variables)
        self._leave_demo(session, model)
        return None

    def _record(
        self, session: Session, result: RunResult, key: str, demo_names: set[str] | None
    ) -> None:
        """Keep the run's result (``_run``, ``_response``); a demo run's leavings are noted
        (``key``: its turns' key in the session's history)."""
        self.results.append(result)
        self.shell.user_ns["_run"] = result
        self.shell.user_ns["_response"] = result.answer
        if demo_names is not None:
            trace = self._demo.setdefault(id(session), _DemoTrace())
            trace.names |= (set(session.variables) - demo_names) | set(result.variables)
            trace.results.append(result)
            trace.keys.add(key)

    def _run_key(self) -> str:
        """The cell's run's key in its session's history: the cell's id, else one of its own.

        Never the session's default: the demo's turns are forgotten by key (:meth:`_leave_demo`).
        """
        return self.current_cell_id or f"run-{uuid.uuid4().hex[:12]}"

    async def run(
        self, message: str, options_line: str = "", *, message_cell: bool = False
    ) -> FinalAnswer | None:
        """Run one agent cell: show the live view, bind the results, return the answer.

        ``message_cell``: a Cortex kernel message cell, hinted ``%%python`` when
        it is a Python program.

        Raises
        ------
        RunFailed, RunLimitReached
            The run ended with an error or at a limit (the cell fails).
        RunInterrupted
            The user interrupted the run.
        """
        __tracebackhide__ = True
        import anyio
        from IPython.display import display

        from ..runtime.grounding import marked_answer
        from .view import RunView
        from .viewstate import TerminalView

        self.loop = asyncio.get_running_loop()
        options = parse_options(options_line)
        session = self._session_for(options)
        await self.host.open(session)
        # A bad --model fails the cell before a view is shown (never a view
        # stuck at "running" above the error). A fresh model per cell: a
        # replay file starts from its first turn. The cell's configuration
        # is its own: the session's stays as it is.
        cell_options = options.model_options
        config = session.config
        if options.model or cell_options.model_kwargs():
            from ..agent import with_model

            model = options.model or self.model_spec
            config = with_model(
                config,
                None if model is None else notebook_relative(model),
                self.model_options.merged(cell_options),
            )
        elif cell_options.protocol is not None:
            config = config.replace(protocol=cell_options.protocol)
        text = interpolate(message, self.shell.user_ns)
        # Notebook functions marked with @cortex_kernel.tool are the agent's tools.
        session.tools.collect(self.shell.user_ns)
        view = RunView(on_approval=self.approver.decide)
        for warning in _message_warnings(message, self.shell.user_ns, message_cell):
            view.state.apply({"type": "warning", "message": warning})
        note = getattr(config.model, "note", None)
        if note and not options.model:
            # e.g. no provider key: the offline demo model answers, and says so.
            view.state.apply({"type": "warning", "message": str(note)})
        handle = display(view, display_id=True)  # type: ignore[no-untyped-call]

        terminal = TerminalView(view.state) if self.terminal else None

        def on_event(event: Any) -> None:
            try:
                view.push(event)
                if terminal is not None:
                    terminal.push(event)
            except Exception:  # a view bug must never break the run
                log.exception("cortex view failed on %r", getattr(event, "type", event))

        from ..executors.notebook_python import ledger_for

        demo_names = self._watch_demo(session, config.model)
        ledger = ledger_for(self.shell.user_ns)
        ledger.begin()  # %undo and %agent_code act on this cell's code runs
        ledger.publish = _show_figure
        result: RunResult | None = None
        before = session.last_result
        key = self._run_key()
        try:
            with anyio.CancelScope() as scope, cancel_on_sigint(scope):
                result = await session.run(text, key=key, on_event=on_event, config=config)
        finally:
            _warn_unstopped(view, result or session.last_result, before)
            view.finish(handle)
            if terminal is not None:
                terminal.finish()
        if result is None and session.last_result is not before:
            result = session.last_result  # the interrupted run, settled as cancelled
        if result is not None:
            self._record(session, result, key, demo_names)
        if result is None or scope.cancelled_caught or result.status == "cancelled":
            stuck = result.unstopped if result is not None else []
            raise RunInterrupted(
                "Run interrupted: running actions were cancelled; the kernel is ready."
                + (f" Could not be stopped, still running: {', '.join(stuck)}." if stuck else ""),
                result=result,
            )
        if result.status == "limit":
            raise RunLimitReached(result.message or "The run reached a limit.", result=result)
        if result.status == "no_answer" and result.answer:
            # The last thought, marked provisional: better than nothing, not an error.
            return FinalAnswer(*marked_answer(result.answer, result.grounding))
        if result.status not in ("ok", "incomplete"):
            # incomplete: the answer is shown, its unfilled $vars marked ⟨name: reason⟩.
            raise RunFailed(
                result.message or f"The run ended with status {result.status}.", result=result
            )
        if not result.answer:
            return None
        # Figures no result backs are marked, and a note says so (the status stays ok).
        return FinalAnswer(*marked_answer(result.answer, result.grounding))


def _warn_unstopped(view: Any, result: RunResult | None, before: RunResult | None) -> None:
    """Say in the view which cancelled actions still run (their node reads ``still running``)."""
    if result is None or result is before or not result.unstopped:
        return
    view.state.apply(
        {
            "type": "warning",
            "message": "Cancelled but still running, so they may still have effects "
            "(change notebook variables, write files): " + "; ".join(result.unstopped),
        }
    )


def _message_warnings(message: str, namespace: Any, message_cell: bool) -> list[str]:
    """What the view says about the message as written: unbound ``{name}``s, Python."""
    from .interpolate import unbound_references

    warnings = []
    unbound = unbound_references(message, namespace)
    if unbound:
        refs = ", ".join("{" + name + "}" for name in unbound)
        warnings.append(
            f"{refs} {'names' if len(unbound) == 1 else 'name'} no notebook variable, so "
            "the message was sent with it as written (define it first, or write {{name}} "
            "for a literal)"
        )
    if message_cell:
        from .hints import python_hint

        hint = python_hint(message)
        if hint:
            warnings.append(hint)
    return warnings


def _show_figure(png: bytes) -> None:
    """A figure of the agent's code, as ``image/png`` display data in the running cell."""
    from IPython.display import Image, display

    display(Image(data=png, format="png"))  # type: ignore[no-untyped-call]


def notebook_relative(spec: str) -> str:
    """``replay:PATH`` with a relative PATH made absolute against the notebook's folder.

    The folder is ``$CORTEX_NOTEBOOK_DIR`` when a runner sets it (papermill,
    whose kernels run in the caller's directory); otherwise the kernel's
    working directory, which Jupyter front ends set to the notebook's folder.
    """
    if not spec.startswith("replay:"):
        return spec
    path, sep, query = spec.removeprefix("replay:").partition("?")
    base = os.environ.get("CORTEX_NOTEBOOK_DIR")
    if not path or not base or Path(path).expanduser().is_absolute():
        return spec
    return f"replay:{Path(base) / path}{sep}{query}"


_RUNNERS: weakref.WeakKeyDictionary[Any, AgentRunner] = weakref.WeakKeyDictionary()


def existing_runner(shell: Any) -> AgentRunner | None:
    """The :class:`AgentRunner` of ``shell`` if one was created."""
    return _RUNNERS.get(shell)


def runner_for(shell: Any) -> AgentRunner:
    """The :class:`AgentRunner` of ``shell`` (created on first use)."""
    runner = _RUNNERS.get(shell)
    if runner is None:
        runner = _RUNNERS[shell] = AgentRunner(shell)
    return runner


async def run_cell(
    message: str, options_line: str = "", wrap: str = "", *, message_cell: bool = False
) -> FinalAnswer | None:
    """What a rewritten agent cell awaits (see :mod:`cortex_kernel.jupyter.magics`).

    ``wrap`` is the cell magic around the message (``time``, ``capture [args]``);
    ``message_cell``: a Cortex kernel message cell (not ``%%agent``).
    """
    __tracebackhide__ = True
    from IPython import get_ipython

    shell = get_ipython()
    run = runner_for(shell).run(message, options_line, message_cell=message_cell)
    kind, _, args = wrap.partition(" ")
    if kind == "time":
        from .wrap import timed

        answer: FinalAnswer | None = await timed(run)
        return answer
    if kind == "capture":
        from .wrap import capture

        await capture(run, args, shell.user_ns)
        return None
    return await run

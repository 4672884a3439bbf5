"""``%%agent`` and the Cortex line magics, for the Cortex kernel and any IPython.

Why an input transformer and not a plain cell magic: a cell magic is called
synchronously from inside the running event loop, so it can neither await
the run (``run_until_complete``: "event loop is already running") nor be
interrupted cleanly from a worker thread. Rewriting the cell, before
IPython's own magic handling, into ``await cortex_kernel.jupyter.runner.run_cell(…)``
makes the run a top-level ``await`` on the kernel's loop: it streams, the
front end's comm messages are served while it runs, and the interrupt
cancels it (see :mod:`cortex_kernel.jupyter.interrupt`).

In the Cortex kernel (``kernel_mode``) every cell is a message except:

- a cell starting with ``%%python``: the rest is Python, same namespace,
  IPython's magics included (``%time``, ``%%timeit``, ``%%capture``…);
- ``%%time`` and ``%%capture [options] [name]`` around a message: the run,
  timed or captured as IPython would time or capture a cell;
- any other cell magic (``%%agent --model M``, ``%%bash``…): as in IPython;
- a cell whose non-blank lines all start with ``%`` (line magics) or ``#``
  (comments, not worth a model call).

Only the cell itself is read this way. IPython's magics transform and run
their own bodies again (``%time CODE``, ``%%capture``'s body…); those nested
transforms are Python, as in the stock kernel: the kernel names each cell's
code (:func:`begin_cell`), and a transform of any other text passes through.

Line magics (both kernels): ``%model`` (with model options: ``--temperature``,
``--max-tokens``, ``--seed``, ``--api-base``, ``--protocol``), ``%protocol``,
``%manifest``, ``%agent``, ``%approvals``, ``%undo``, ``%agent_code``, ``%mcp``,
``%agent_history`` (also ``%history`` in the Cortex kernel), ``%feeds``,
``%relics``, ``%variables``, ``%transcript``, ``%read_notebook``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .feeds_magic import feeds_magic
from .mcp_magic import mcp_magic
from .runner import CELL_ERRORS, runner_for

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

_RUN_CALL = "await __import__('cortex_kernel.jupyter.runner', fromlist=['_']).run_cell"


def _first_line(lines: list[str]) -> int | None:
    for index, line in enumerate(lines):
        if line.strip():
            return index
    return None


# Set by the Cortex kernel: the code of the cell being run (see begin_cell).
_CELL: dict[str, str | None] = {"code": None}

_LEAVE = frozenset({"exit", "quit", "exit()", "quit()"})

# Cell magics that wrap a message cell instead of Python (see cortex_kernel.jupyter.wrap).
_WRAPPING = ("%%time", "%%capture")


def begin_cell(code: str) -> None:
    """Name the code of the cell about to run (the Cortex kernel calls this per cell).

    From the first call on, a transform of any other text — IPython magics
    transforming or running their bodies — is Python. (ipykernel may
    transform the cell itself twice: once to decide whether it awaits, once
    in ``run_cell``.)
    """
    _CELL["code"] = code.rstrip("\n")


def _own_cell(lines: list[str]) -> bool:
    code = _CELL["code"]
    return code is None or "".join(lines).rstrip("\n") == code


def _agent_call(
    message: str, options: str, wrap: str = "", *, message_cell: bool = False
) -> list[str]:
    extra = f", {wrap.strip()!r}" if wrap else ""
    if message_cell:  # a Cortex kernel message cell (hints that it may be Python)
        extra += ", message_cell=True"
    return [f"{_RUN_CALL}({message!r}, {options.strip()!r}{extra})\n"]


def transform_agent_cell(lines: list[str]) -> list[str]:
    """Rewrite a ``%%agent [options]`` cell into an awaited run; other cells pass."""
    first = _first_line(lines)
    if first is None:
        return lines
    head = lines[first].strip()
    if head != "%%agent" and not head.startswith("%%agent "):
        return lines
    return _agent_call("".join(lines[first + 1 :]), head[len("%%agent") :])


def transform_kernel_cell(lines: list[str]) -> list[str]:
    """The Cortex kernel's rule: every cell is a message unless it is Python or magics."""
    if not _own_cell(lines):
        return lines  # a magic's body (%time CODE, %%capture…): Python
    first = _first_line(lines)
    if first is None:
        return lines
    head = lines[first].strip()
    if head == "%%python" or head.startswith("%%python "):
        return lines[first + 1 :]
    magic = head.split(maxsplit=1)[0]
    if magic in _WRAPPING:
        return _agent_call("".join(lines[first + 1 :]), "", head[2:], message_cell=True)
    if head.startswith("%%"):
        return transform_agent_cell(lines)
    if all(line.lstrip().startswith(("%", "#")) for line in lines if line.strip()):
        return lines
    if "".join(lines).strip() in _LEAVE:
        return lines  # IPython's exit / quit: leave, as in any IPython front end
    return _agent_call("".join(lines), "", message_cell=True)


# -- line magics ----------------------------------------------------------------


def _model(line: str) -> None:
    """%model [SPEC] [--temperature T] [--max-tokens N] [--seed S] [--api-base URL]
    [--protocol xml|tools] [--timeout S] [--first-token-timeout S] [--retries N]
    — show the model, or switch model and options (history kept)."""
    from ..model_options import ModelOptions, parse_model_line

    runner = runner_for(_shell())
    spec, options = parse_model_line(line)
    if spec is not None or options != ModelOptions():
        runner.set_model(spec, options)
    model = runner.session.config.model
    name = runner.model_spec or model.name
    described = runner.model_options.describe()
    print(f"model: {name}" + (f" {described}" if described else ""))
    limits = getattr(model, "limits", None)
    if callable(limits):  # a provider model: how long it is waited for
        print(f"waits: {limits()}")


def _protocol(line: str) -> None:
    """%protocol [xml|tools] — show or choose how the model acts: protocol text or tool calls."""
    runner = runner_for(_shell())
    choice = line.strip()
    if choice:
        runner.set_protocol(choice)
    print(f"protocol: {runner.model_options.protocol or 'xml'}")


def _manifest(line: str) -> None:
    """%manifest [PATH] — show the manifest, or use PATH (a new session from the next cell)."""
    runner = runner_for(_shell())
    path = line.strip()
    if path:
        names = runner.set_manifest(path)
        print(
            f"manifest: {path}, agents: {', '.join(names)} "
            "(a new conversation starts with the next cell)"
        )
    else:
        print(f"manifest: {runner.manifest or '(none: the built-in default agent)'}")


def _agent_line(line: str, cell: str | None = None) -> None:
    """%agent [NAME] — the agent in use; %%agent runs a cell through the transformer."""
    if cell is not None:
        # Reached only when the transformer was bypassed (run_cell_magic called directly).
        print("%%agent must be the first line of a cell; run the cell itself.")
        return
    runner = runner_for(_shell())
    name = line.strip()
    if name:
        runner.set_agent(name)
        print(f"agent: {name} (a new conversation starts with the next cell)")
    else:
        session = runner.session
        print(f"agent: {session.config.agent_name} (manifest: {runner.manifest or 'none'})")


def _approvals(line: str) -> None:
    """%approvals [ask|auto|bypass|deny] — how code runs and tools marked confirm: true
    are decided: ask each time (default); auto approves but asks before code that
    writes into your objects (approve is an alias); bypass approves all; deny refuses all.
    Until it is used, the manifest's approvals: field sets the mode."""
    from .approvals import POLICIES

    runner = runner_for(_shell())
    policy = line.strip()
    if policy in POLICIES:
        runner.set_approvals(policy)
    elif policy:
        print("usage: %approvals [ask|auto|bypass|deny]")
        return
    by = runner.approver.by
    source = " (the manifest's)" if by.startswith("manifest") else ""
    print(f"approvals: {runner.approver.policy}{source}")


def _undo(line: str) -> None:
    """%undo — put back what the last agent cell's code changed in your variables."""
    from ..executors.notebook_python import ledger_for
    from .safe_markup import terminal_safe

    shell = _shell()
    ledger = ledger_for(shell.user_ns)
    if not ledger.last:
        print("nothing to undo: no code of the agent ran since the last %undo")
        return
    print(terminal_safe(ledger.undo(shell.user_ns).summary()))


def _agent_code(line: str) -> None:
    """%agent_code — the last agent cell's code runs as a new %%python cell, to re-run
    the analysis without the model."""
    from ..executors.notebook_python import ledger_for

    shell = _shell()
    runs = [run for run in ledger_for(shell.user_ns).last if run.error is None]
    if not runs:
        print("no code of the agent ran yet")
        return
    code = "\n\n".join(run.code.strip("\n") for run in runs)
    # The Cortex kernel reads a plain cell as a message: the code is marked Python.
    shell.set_next_input(f"%%python\n{code}" if _CELL["code"] is not None else code)


def _history(line: str) -> None:
    """%history [show|reset] — the conversation as the agent sees it, or forget it."""
    from .safe_markup import terminal_safe

    runner = runner_for(_shell())
    command = line.strip() or "show"
    if command == "reset":
        runner.reset()
        print("conversation history cleared")
        return
    if command != "show":
        print("usage: %history [show|reset]")
        return
    messages = runner.session.history()
    if not messages:
        print("(no conversation yet)")
        return
    for message in messages:
        content = str(message.get("content") or "")
        if len(content) > 300:
            content = content[:299] + "…"
        print(terminal_safe(f"[{message.get('role', '?')}] {content}"))


def _read_notebook(line: str) -> None:
    """%read_notebook [on|off] — may $name in the agent's actions read your variables?

    Off by default: model output reads only what agent actions produced. On,
    a ``$name`` falls back to the notebook's variables (paths still read only
    keys, indexes and public attributes of plain data). Setting it prints nothing.
    """
    runner = runner_for(_shell())
    choice = line.strip().lower()
    if choice in ("on", "off"):
        runner.set_read_notebook(choice == "on")
    elif choice:
        print("usage: %read_notebook [on|off]")
    else:
        print(f"read_notebook: {'on' if runner.read_notebook else 'off'}")


def _relics(line: str) -> None:
    """%relics [list|stop NAME|stop --all] — the kernel's persistent services."""
    from ..exceptions import CortexError

    registry = runner_for(_shell()).relics
    command = line.strip().split()
    if not command or command == ["list"]:
        print(registry.describe())
    elif command[0] == "stop" and command[1:] == ["--all"]:
        print(f"stopped {registry.stop_all()} relic(s)")
    elif command[0] == "stop" and len(command) == 2:
        try:
            running = registry.stop(command[1])
        except CortexError as exc:
            print(exc)
            return
        print(f"stopped {command[1]}" if running else f"{command[1]} was not running")
    else:
        print("usage: %relics [list] | %relics stop NAME | %relics stop --all")


def _variables(line: str) -> None:
    """%variables — the variables the agent's runs produced, with types and previews."""
    from ..safejson import safe_repr
    from .safe_markup import terminal_safe

    runner = runner_for(_shell())
    # Named values only (output keys, set_variable): action ids are not variables.
    variables = runner.session.variables.values
    if not variables:
        print("(no variables yet)")
        return
    width = max(len(name) for name in variables)
    for name, value in variables.items():
        text = safe_repr(value)
        if len(text) > 80:
            text = text[:79] + "…"
        print(terminal_safe(f"{name:<{width}}  {type(value).__name__:<10}  {text}"))


def _transcript(line: str) -> None:
    """%transcript [path|export FILE] — where transcripts go and the last one,
    just the last one's path, or all runs' into FILE (created 0600)."""
    from ..runtime.transcript import default_transcript_dir, open_private

    runner = runner_for(_shell())
    words = line.split(maxsplit=1)
    paths = [r.transcript for r in runner.results if r.transcript is not None]
    last = paths[-1] if paths else "(no transcript yet: run an agent cell first)"
    if not words:
        folder = runner.session.config.transcript_dir or default_transcript_dir()
        print(f"transcripts: {folder} (private: folder 0700, files 0600)")
        print(f"last run: {last}")
        return
    if words[0] == "path":
        print(last)
        return
    if words[0] == "export" and len(words) == 2:
        target = Path(words[1].strip()).expanduser()
        with open_private(target) as out:
            for path in paths:
                out.write(Path(path).read_text(encoding="utf-8", errors="backslashreplace"))
        print(f"{len(paths)} run transcript(s) written to {target}")
        return
    print("usage: %transcript [path|export FILE]")


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _short_error(
    shell: Any,
    etype: type[BaseException],
    value: BaseException,
    tb: Any,
    tb_offset: int | None = None,
) -> list[str]:
    # A failed or interrupted run is one clear line, not a traceback through
    # the rewritten cell and our frames.
    from .safe_markup import terminal_safe

    # The message can hold model text: a terminal shows its control characters.
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {terminal_safe(str(value))}"]
    shell._showtraceback(etype, value, stb)
    return stb


def enable(shell: Any, *, kernel_mode: bool = False) -> None:
    """Install the transformer and the magics into ``shell`` (idempotent).

    Parameters
    ----------
    shell
        An IPython ``InteractiveShell``.
    kernel_mode
        ``True`` in the Cortex kernel: every cell is a message.
    """
    runner_for(shell)  # registers the pre_run_cell hook before the first agent cell
    transform = transform_kernel_cell if kernel_mode else transform_agent_cell
    cleanup: list[Callable[[list[str]], list[str]]] = shell.input_transformers_cleanup
    for existing in (transform_kernel_cell, transform_agent_cell):
        if existing in cleanup:
            cleanup.remove(existing)
    # First: before IPython's own cleanup (indent stripping) and magic handling.
    cleanup.insert(0, transform)
    # Not for check_complete: the kernel's own is_complete reads messages
    # (cortex_kernel.jupyter.complete); IPython then judges only Python.
    for function in (transform_kernel_cell, transform_agent_cell):
        setattr(function, "has_side_effects", True)  # noqa: B010 - IPython reads it
    magics: dict[str, Callable[..., None]] = {
        "model": _model,
        "protocol": _protocol,
        "manifest": _manifest,
        "approvals": _approvals,
        "undo": _undo,
        "agent_code": _agent_code,
        "mcp": mcp_magic,
        "agent_history": _history,
        "feeds": feeds_magic,
        "relics": _relics,
        "variables": _variables,
        "read_notebook": _read_notebook,
        "transcript": _transcript,
    }
    if kernel_mode:
        magics["history"] = _history
    for name, func in magics.items():
        shell.register_magic_function(func, "line", name)
    shell.register_magic_function(_agent_line, "line_cell", "agent")
    if not shell.custom_exceptions or set(shell.custom_exceptions) <= set(CELL_ERRORS):
        shell.set_custom_exc(CELL_ERRORS, _short_error)


def disable(shell: Any) -> None:
    """Remove the transformer (the magics stay registered, harmlessly)."""
    cleanup = shell.input_transformers_cleanup
    for existing in (transform_kernel_cell, transform_agent_cell):
        if existing in cleanup:
            cleanup.remove(existing)
    if set(shell.custom_exceptions) == set(CELL_ERRORS):
        shell.set_custom_exc((), None)


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext cortex_kernel``: ``%%agent`` cells and the line magics."""
    enable(shell, kernel_mode=False)


def unload_ipython_extension(shell: Any) -> None:
    """``%unload_ext cortex_kernel``."""
    disable(shell)

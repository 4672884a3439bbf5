"""Command tools: a subprocess per call, in its own session, killed as a group.

Parameters go to the process as one JSON object on stdin, or as arguments
built from the manifest's ``args`` templates (``"{path}"`` becomes the value
of ``path``, one argument each, never through a shell; a value that would
start an argument with ``-`` is refused unless the manifest allows it, as the
program would read it as an option). Stdout is parsed as
JSON when it is JSON, else kept as text; stderr is kept (its tail is in the
error of a failed call). The process starts a new session, so a timeout, a
cancelled run or an interrupted cell kills the whole process group — the
tool's children included — and waits for it before returning. The process
gets a minimal environment (:func:`~.child_env.child_environment`), never
the kernel's secrets.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import string
import subprocess
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from ..exceptions import ToolError
from .child_env import child_environment

__all__ = ["command_output", "render_args", "run_command"]


@dataclass
class CommandResult:
    """What a finished process gave back."""

    returncode: int
    stdout: bytes
    stderr: bytes
    truncated: bool = False


def decode_output(data: bytes) -> Any:
    """Stdout as JSON when it is JSON, else as text (one trailing newline dropped)."""
    text = data.decode("utf-8", errors="replace")
    stripped = text.strip()
    looks_json = stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null")
    if looks_json or _number(stripped):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text[:-1] if text.endswith("\n") else text


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return bool(text)


def tail(data: bytes, lines: int = 20, chars: int = 2000) -> str:
    """The last lines of ``data`` as text, for an error message."""
    text = data.decode("utf-8", errors="replace").rstrip()
    kept = "\n".join(text.splitlines()[-lines:])
    return kept[-chars:]


def render_args(
    templates: Sequence[str],
    parameters: Mapping[str, Any],
    *,
    allow_options: bool | Collection[str] = False,
    options_ended: bool = False,
) -> list[str]:
    """Build argv items from ``{name}`` templates; a missing name is an error.

    Parameters
    ----------
    templates
        The manifest's ``args``.
    parameters
        The call's values (strings as they are, anything else as JSON).
    allow_options
        Parameters whose values may start an argument with ``-`` (``True``: all).
    options_ended
        The command already ends its options with ``--``: any value is safe.

    Raises
    ------
    ToolError
        A template names a missing parameter, or a value would start an
        argument with ``-`` (read as an option: ``--output=/victim``) and is
        not allowed to; nothing has run.
    """
    values = {
        key: value if isinstance(value, str) else json.dumps(value)
        for key, value in parameters.items()
    }
    out = []
    ended = options_ended
    for template in templates:
        try:
            argument = template.format_map(values)
        except KeyError as exc:
            raise ToolError(
                f"argument template {template!r} names parameter {exc.args[0]!r}, "
                "which the call did not give"
            ) from None
        except (ValueError, IndexError) as exc:
            raise ToolError(f"bad argument template {template!r}: {exc}") from None
        if argument.startswith("-") and not ended:
            name = _leading_parameter(template, values)
            allowed = allow_options is True or (
                not isinstance(allow_options, bool) and name in allow_options
            )
            if name is not None and not allowed:
                shown = values[name] if len(values[name]) <= 60 else values[name][:57] + "..."
                raise ToolError(
                    f"parameter {name!r}: {shown!r} starts with '-', which the program would "
                    "read as an option; refused (the tool's manifest entry can allow it with "
                    "allow_options)"
                )
        # A literal "--" ends the options: later values are operands, dash or not.
        ended = ended or template == "--"
        out.append(argument)
    return out


def _leading_parameter(template: str, values: Mapping[str, str]) -> str | None:
    """The parameter whose value begins ``template``'s text (``None``: the template's own)."""
    for literal, field, _, _ in string.Formatter().parse(template):
        if literal:
            return None
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if values.get(root, ""):
            return root
    return None


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _read(stream: ByteReceiveStream | None, into: bytearray, limit: int) -> bool:
    """Read ``stream`` to its end; keep at most ``limit`` bytes. Returns whether it was cut."""
    cut = False
    if stream is None:
        return cut
    async for chunk in stream:
        room = limit - len(into)
        if room > 0:
            into += chunk[:room]
        if len(chunk) > room:
            cut = True
    return cut


async def run_command(
    argv: Sequence[str],
    *,
    stdin: bytes | None = None,
    time_limit: float | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    pass_env: Iterable[str] = (),
    max_output: int = 10_000_000,
    name: str = "command",
) -> CommandResult:
    """Run ``argv`` to completion in a new session.

    Parameters
    ----------
    argv
        The program and its arguments (no shell).
    stdin
        Bytes written to the process's stdin, which is then closed.
    time_limit
        Seconds; past it the process group is killed and :class:`ToolError` raised.
    cwd, env
        Working directory; environment variables set for the process.
    pass_env
        Names (or ``PREFIX*``) of our environment variables it also gets;
        besides these and ``env`` it gets PATH, HOME, LANG… only
        (:func:`~.child_env.child_environment`).
    max_output
        Bytes of stdout (and of stderr) kept; the rest is read and dropped.
    name
        The tool's name, for messages.

    Raises
    ------
    ToolError
        The program cannot start, or it ran past ``time_limit``.
    """
    environment = child_environment(pass_env, env)
    try:
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=environment,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"tool '{name}': cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    out, err = bytearray(), bytearray()
    cut = [False, False]
    try:
        with anyio.fail_after(time_limit):
            async with anyio.create_task_group() as group:

                async def read_out() -> None:
                    cut[0] = await _read(process.stdout, out, max_output)

                async def read_err() -> None:
                    cut[1] = await _read(process.stderr, err, max_output)

                group.start_soon(read_out)
                group.start_soon(read_err)
                if process.stdin is not None:
                    try:
                        if stdin:
                            await process.stdin.send(stdin)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        pass  # the program exited without reading its input
                    finally:
                        await process.stdin.aclose()
            returncode = await process.wait()
    except TimeoutError:
        raise ToolError(
            f"tool '{name}' timed out after {time_limit:g} s; its process group was killed"
        ) from None
    finally:
        # Normal exit, timeout or cancellation: no child of the tool survives the call.
        _kill_group(process)
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    return CommandResult(returncode, bytes(out), bytes(err), truncated=cut[0] or cut[1])


def command_failed(name: str, result: CommandResult) -> ToolError:
    """The error for a non-zero exit, with the tail of stderr."""
    code = result.returncode
    why = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
    text = tail(result.stderr) or tail(result.stdout) or "(no output)"
    return ToolError(f"tool '{name}' {why}; stderr (last lines):\n{text}")


def command_output(name: str, result: CommandResult) -> Any:
    """The tool's result: stdout (JSON when it is JSON); stderr kept as an ``action_log``.

    Raises
    ------
    ToolError
        For a non-zero exit, with the tail of stderr.
    """
    from .tool import log_stderr

    if result.returncode != 0:
        raise command_failed(name, result)
    log_stderr(tail(result.stderr, lines=200, chars=20_000))
    return decode_output(result.stdout)

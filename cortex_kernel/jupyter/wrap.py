"""``%%time`` and ``%%capture`` around a message cell.

IPython's own ``%%time`` compiles its body as Python and ``%%capture`` runs
it with the synchronous ``run_cell`` ("This event loop is already running"
for an awaited run). Around a message, the Cortex kernel's transformer
rewrites the cell into an awaited run wrapped here, with the same output as
IPython's magics give a Python cell.
"""

from __future__ import annotations

import argparse
import os
import shlex
import time
from collections.abc import Awaitable
from typing import Any

from ..exceptions import ConfigError

__all__: list[str] = []  # used inside the jupyter package only


async def timed(run: Awaitable[Any]) -> Any:
    """Await ``run`` and print its times as IPython's ``%%time`` does."""
    from IPython.core.magics.execution import _format_time as untyped_format

    def _format_time(seconds: float) -> str:
        return str(untyped_format(seconds))  # type: ignore[no-untyped-call]

    wall0, cpu0 = time.perf_counter(), os.times()
    try:
        return await run
    finally:
        cpu1 = os.times()
        user, system = cpu1.user - cpu0.user, cpu1.system - cpu0.system
        print(
            f"CPU times: user {_format_time(user)}, sys: {_format_time(system)}, "
            f"total: {_format_time(user + system)}"
        )
        print(f"Wall time: {_format_time(time.perf_counter() - wall0)}")


def _capture_options(line: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="%%capture", add_help=False, exit_on_error=False)
    parser.add_argument("--no-stderr", action="store_true")
    parser.add_argument("--no-stdout", action="store_true")
    parser.add_argument("--no-display", action="store_true")
    parser.add_argument("output", nargs="?", default="")
    try:
        return parser.parse_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as exc:
        raise ConfigError(
            f"%%capture: {exc}. Usage: %%capture [--no-stderr] [--no-stdout] "
            "[--no-display] [output]"
        ) from exc


async def capture(run: Awaitable[Any], line: str, namespace: dict[str, Any]) -> None:
    """Await ``run`` inside IPython's ``capture_output``; bind the capture as IPython does.

    The answer is displayed into the capture (it is the cell's output), so
    ``captured.show()`` or ``captured.outputs`` replays the whole cell.
    """
    from IPython.display import display
    from IPython.utils.capture import capture_output

    options = _capture_options(line)
    keep_display = not options.no_display
    with capture_output(not options.no_stdout, not options.no_stderr, keep_display) as io:
        answer = await run
        if answer is not None and keep_display:
            display(answer)  # type: ignore[no-untyped-call]
    if options.output:
        namespace[options.output] = io

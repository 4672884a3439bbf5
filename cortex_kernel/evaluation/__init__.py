"""``cortex-kernel eval``: how well does a model speak the protocol?

A suite of tasks (:mod:`.suite`) runs through the kernel's own runtime, each
task in a fresh session (:mod:`.runner`); the figures per task and overall
(:mod:`.report`) are printed and written as JSON under ``benchmarks/results/``.
Deterministic by default: temperature 0 and a fixed seed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from ..exceptions import CortexError
from ..model_options import ModelOptions
from .report import overall, report, table, write_report
from .runner import TaskResult, run_suite, run_task
from .suite import DEFAULT_SUITE, Check, Suite, Task, load_suite

__all__ = [
    "DEFAULT_OPTIONS",
    "DEFAULT_SUITE",
    "Check",
    "Suite",
    "Task",
    "TaskResult",
    "load_suite",
    "overall",
    "report",
    "run_eval",
    "run_suite",
    "run_task",
    "table",
    "write_report",
]

#: What an eval uses unless told otherwise: reproducible, and bounded turns.
DEFAULT_OPTIONS = ModelOptions(temperature=0, seed=1234, max_tokens=600)


def run_eval(
    *,
    model: str | None,
    suite: str | None = None,
    options: ModelOptions | None = None,
    samples: int = 1,
    tasks: list[str] | None = None,
    out: str | None = None,
    wall_time: float | None = None,
) -> int:
    """Run a suite and print and save its report; the exit status of ``cortex-kernel eval``.

    ``wall_time`` (seconds), when given, replaces the suite's ``limits.wall_time``
    for every run of every task.
    """
    from ..bench import benchmarks_dir
    from ..llm import PROMPT_VERSION

    chosen = DEFAULT_OPTIONS.merged(options)
    protocol = chosen.protocol or "xml"
    if samples < 1:
        print("cortex-kernel eval: --samples must be at least 1", file=sys.stderr)
        return 2
    if wall_time is not None and not wall_time > 0:
        print("cortex-kernel eval: --wall-time must be more than 0 seconds", file=sys.stderr)
        return 2
    try:
        loaded = load_suite(suite)
        if tasks:
            loaded = loaded.select(tasks)
        if wall_time is not None:
            loaded = loaded.with_limits(wall_time=wall_time)
    except CortexError as exc:
        print(f"cortex-kernel eval: {exc}", file=sys.stderr)
        return 2

    def progress(line: str) -> None:
        print(f"eval {line}", file=sys.stderr, flush=True)

    try:
        results = anyio.run(
            lambda: run_suite(
                loaded,
                model=model,
                protocol=protocol,
                options=chosen,
                samples=samples,
                progress=progress,
            )
        )
    except CortexError as exc:
        print(f"cortex-kernel eval: {exc}", file=sys.stderr)
        return 2
    data = report(
        results,
        suite=str(loaded.path),
        model=model or "(default)",
        protocol=protocol,
        options=chosen.model_dump(exclude_none=True),
        samples=samples,
        prompt_version=str(PROMPT_VERSION),
        limits=loaded.limits,
    )
    print(table(data))
    path = write_report(data, Path(out) if out else benchmarks_dir() / "results")
    print(f"-> {path}")
    return 0

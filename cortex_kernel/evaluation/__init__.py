"""``cortex-kernel eval``: how well does a model speak the protocol?

A suite of tasks (:mod:`.suite`) runs through the kernel's own runtime, each
task in a fresh session (:mod:`.runner`); the figures per task and overall
(:mod:`.report`) are printed and written as JSON under ``benchmarks/results/``.
Deterministic by default: temperature 0 and a fixed seed. ``--suite data``
asks questions of DataFrames in the session's namespace, answered by the
agent's python tool and checked on values computed from the data
(:file:`suites/data.yaml`). ``--suite bfcl`` runs BFCL's AST categories
instead, scored by BFCL's own checker (:mod:`.bfcl`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from ..exceptions import ConfigError, CortexError
from ..model_options import ModelOptions
from .report import overall, report, table, write_report
from .runner import TaskResult, run_suite, run_task
from .suite import DATA_SUITE, DEFAULT_SUITE, Check, Suite, Task, load_suite

__all__ = [
    "DATA_SUITE",
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
    sample: int | None = None,
) -> int:
    """Run a suite and print and save its report; the exit status of ``cortex-kernel eval``.

    ``suite`` is a suite file or a built-in suite's name (``default``,
    ``data``). ``wall_time`` (seconds), when given, replaces the suite's
    ``limits.wall_time`` for every run of every task. ``suite`` ``bfcl`` or ``bfcl:CATEGORY,…``
    runs BFCL's cases (:mod:`.bfcl`): ``sample`` cases per category, drawn
    with the options' ``seed`` (0 when not given), or every case.
    """
    chosen = DEFAULT_OPTIONS.merged(options)
    if samples < 1:
        return _usage("--samples must be at least 1")
    if wall_time is not None and not wall_time > 0:
        return _usage("--wall-time must be more than 0 seconds")
    if sample is not None and sample < 1:
        return _usage("--sample must be at least 1")
    from .bfcl import is_bfcl_suite

    if suite is not None and is_bfcl_suite(suite):
        seed = options.seed if options is not None and options.seed is not None else 0
        return _run_bfcl_eval(
            suite, model, chosen, samples, tasks, out, wall_time, sample=sample, seed=seed
        )
    if sample is not None:
        return _usage("--sample N draws N cases per category of --suite bfcl; use --task here")
    from ..bench import benchmarks_dir
    from ..llm import PROMPT_VERSION

    protocol = chosen.protocol or "xml"
    try:
        loaded = load_suite(suite)
        if tasks:
            loaded = loaded.select(tasks)
        if wall_time is not None:
            loaded = loaded.with_limits(wall_time=wall_time)
    except CortexError as exc:
        print(f"cortex-kernel eval: {exc}", file=sys.stderr)
        return 2

    try:
        results = anyio.run(
            lambda: run_suite(
                loaded,
                model=model,
                protocol=protocol,
                options=chosen,
                samples=samples,
                progress=_progress,
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


def _usage(message: str) -> int:
    print(f"cortex-kernel eval: {message}", file=sys.stderr)
    return 2


def _progress(line: str) -> None:
    print(f"eval {line}", file=sys.stderr, flush=True)


def _run_bfcl_eval(
    suite: str,
    model: str | None,
    chosen: ModelOptions,
    samples: int,
    tasks: list[str] | None,
    out: str | None,
    wall_time: float | None,
    *,
    sample: int | None,
    seed: int,
) -> int:
    """:func:`run_eval` for ``--suite bfcl[:CATEGORIES]``."""
    from ..bench import benchmarks_dir
    from ..llm import PROMPT_VERSION
    from ..runtime.limits import Limits
    from .bfcl import (
        BFCL_VERSION,
        WALL_TIME,
        BfclData,
        fetch_wheel,
        parse_bfcl_suite,
        run_bfcl,
        sample_cases,
    )

    protocol = chosen.protocol or "xml"
    if tasks and sample is not None:
        return _usage("--task and --sample: give one (--task picks BFCL cases by id)")
    limits = Limits(max_turns=1, wall_time=wall_time or WALL_TIME)
    try:
        categories = parse_bfcl_suite(suite)
        wheel = fetch_wheel()
        _progress(f"bfcl-eval {BFCL_VERSION}: {wheel}")
        data = BfclData(wheel)
        every = [case for category in categories for case in data.cases(category)]
        if tasks:
            unknown = sorted(set(tasks) - {case.id for case in every})
            if unknown:
                raise ConfigError(f"--suite {suite}: no case(s) {', '.join(unknown)}")
            cases = [case for case in every if case.id in tasks]
        else:
            cases = [
                case
                for category in categories
                for case in sample_cases([c for c in every if c.category == category], sample, seed)
            ]
        results = anyio.run(
            lambda: run_bfcl(
                data,
                cases,
                model=model,
                protocol=protocol,
                options=chosen,
                limits=limits,
                samples=samples,
                progress=_progress,
            )
        )
    except CortexError as exc:
        return _usage(str(exc))
    drawn = {"sample": sample, "seed": seed} if sample is not None and not tasks else {}
    figures = report(
        results,
        suite=f"bfcl:{','.join(categories)}",
        model=model or "(default)",
        protocol=protocol,
        options=chosen.model_dump(exclude_none=True),
        samples=samples,
        prompt_version=str(PROMPT_VERSION),
        limits={"max_turns": limits.max_turns, "wall_time": limits.wall_time},
        extra={"bfcl": {"version": BFCL_VERSION, "categories": categories, **drawn}},
    )
    print(table(figures))
    path = write_report(figures, Path(out) if out else benchmarks_dir() / "results")
    print(f"-> {path}")
    return 0

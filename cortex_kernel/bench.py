"""``cortex-kernel bench``: find and run the benchmarks of a source checkout.

Each benchmark is a module ``benchmarks/bench_<name>.py`` with a
``main() -> dict`` that prints its figures and ratios and returns them; this
runner writes the dict as JSON to ``benchmarks/results/<name>.json``.
The benchmarks share :func:`percentile` from here (they are loaded from their
file, not as a package, so a helper module beside them would not import).

The benchmarks are developer tooling: they live in the source checkout
beside the package and its tests (some use the tests' loopback provider)
and are not shipped in the wheel. Run from an installed package, with no
checkout in the current directory, ``cortex-kernel bench`` says so and
exits with status 2 (:class:`NoCheckout`); ``CORTEX_BENCH_DIR`` names a
``benchmarks`` folder elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "NoCheckout",
    "available_benchmarks",
    "benchmarks_dir",
    "load_benchmark",
    "percentile",
    "run_benchmarks",
    "source_checkout",
]


class NoCheckout(Exception):
    """The benchmarks were asked for where there is no source checkout (an installed package)."""


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile of ``values``, interpolated between the two nearest ranks.

    The benchmarks' p50 and p99. Linear interpolation (numpy's default, and
    ``statistics.quantiles(method="inclusive")``), so ``q=0.5`` is exactly
    ``statistics.median`` and ``q=1`` the maximum.

    Parameters
    ----------
    values
        The measurements, in any order.
    q
        Between 0 and 1: 0.5 for p50, 0.99 for p99.

    Returns
    -------
    float
        The quantile; 0.0 when there are no values (a benchmark that measured
        nothing prints zeros rather than failing).

    Raises
    ------
    ValueError
        ``q`` is not between 0 and 1.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be between 0 and 1, not {q!r}")
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def benchmarks_dir() -> Path:
    """The folder that holds ``bench_*.py``."""
    env = os.environ.get("CORTEX_BENCH_DIR")
    if env:
        return Path(env)
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        candidate = base / "benchmarks"
        if any(candidate.glob("bench_*.py")):
            return candidate
    return Path.cwd() / "benchmarks"


def source_checkout() -> Path:
    """The root of the source checkout the benchmarks belong to.

    Raises
    ------
    NoCheckout
        No ``benchmarks/bench_*.py`` in the current directory, beside the
        package, or at ``CORTEX_BENCH_DIR``.
    """
    folder = benchmarks_dir()
    if not any(folder.glob("bench_*.py")):
        raise NoCheckout(
            "the benchmarks are developer tooling of the source checkout "
            f"(benchmarks/bench_*.py), not part of the installed package; none at {folder}. "
            "Run it from the root of a clone of the repository (make bench)"
        )
    return folder.parent


def available_benchmarks() -> list[str]:
    """Names of the benchmarks found, sorted."""
    return sorted(p.stem.removeprefix("bench_") for p in benchmarks_dir().glob("bench_*.py"))


def load_benchmark(name: str) -> Any:
    """Import ``benchmarks/bench_<name>.py`` as a module (tests use it too)."""
    path = benchmarks_dir() / f"bench_{name}.py"
    spec = importlib.util.spec_from_file_location(f"cortex_bench_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_benchmarks(name: str | None = None) -> int:
    """Run one benchmark or all of them; write each result as JSON.

    Returns 0, or 2 (with one line on stderr) for an unknown name or when
    there is no source checkout to take the benchmarks from.
    """
    try:
        source_checkout()
    except NoCheckout as exc:
        print(f"cortex-kernel bench: {exc}", file=sys.stderr)
        return 2
    names = available_benchmarks()
    if name is not None:
        if name not in names:
            print(f"unknown benchmark {name!r}; available: {', '.join(names)}", file=sys.stderr)
            return 2
        names = [name]
    results_dir = benchmarks_dir() / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    for bench in names:
        load_before = _load_average()
        print(f"== bench {bench} == (load average {_load_text(load_before)})", flush=True)
        started = time.time()
        result = load_benchmark(bench).main()
        load_after = _load_average()
        result.setdefault("benchmark", bench)
        result.setdefault("timestamp", started)
        # The machine's load with every figure: on a shared machine the
        # neighbours move wall-time figures (CPU-time ratios much less).
        result.setdefault("load_average", {"before": load_before, "after": load_after})
        out = results_dir / f"{bench}.json"
        out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"-> {out} (load average {_load_text(load_after)})", flush=True)
    return 0


def _load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (``None`` where the system has none)."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:  # pragma: no cover - Windows
        return None


def _load_text(load: list[float] | None) -> str:
    return "unknown" if load is None else ", ".join(f"{value:.2f}" for value in load)

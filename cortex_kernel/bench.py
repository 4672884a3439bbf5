"""``cortex-kernel bench``: find and run the benchmarks of ``benchmarks/``.

Each benchmark is a module ``benchmarks/bench_<name>.py`` with a
``main() -> dict`` that prints its figures and ratios and returns them; this
runner writes the dict as JSON to ``benchmarks/results/<name>.json``.
The benchmarks live beside the package in a source checkout (they are not
shipped in the wheel); ``CORTEX_BENCH_DIR`` points elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["available_benchmarks", "benchmarks_dir", "load_benchmark", "run_benchmarks"]


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
    """Run one benchmark or all of them; write each result as JSON."""
    names = available_benchmarks()
    if not names:
        print(f"no benchmarks found under {benchmarks_dir()}", file=sys.stderr)
        return 1
    if name is not None:
        if name not in names:
            print(f"unknown benchmark {name!r}; available: {', '.join(names)}", file=sys.stderr)
            return 2
        names = [name]
    results_dir = benchmarks_dir() / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    for bench in names:
        print(f"== bench {bench} ==", flush=True)
        started = time.time()
        result = load_benchmark(bench).main()
        result.setdefault("benchmark", bench)
        result.setdefault("timestamp", started)
        out = results_dir / f"{bench}.json"
        out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"-> {out}", flush=True)
    return 0

"""What a relic call costs beyond the operation's own work.

A relic call goes through :meth:`RelicRegistry.call`: the liveness look,
parameter validation against the method's signature, the hop to the relic's
own thread and back. Measured here, p50 / p99 per call, once the relic runs:

- **python** — ``Counter.get`` of a Python-object relic (does nothing);
- **sqlite** — ``get`` of one small key in the built-in SQLite relic (a
  real read: the figure includes SQLite's own work);
- baselines: the same ``get`` called directly on the object (no relic), and a
  sync callable tool doing nothing (``Tool.call``: validation + a worker
  thread) — the nearest thing a tool call pays.

:func:`relic_call_overhead` is what ``cortex-kernel bench feeds`` reuses for
its relic figure.

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    200 calls per figure instead of 5,000 (for tests).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cortex_kernel.bench import percentile
from cortex_kernel.executors.relic import RelicRegistry
from cortex_kernel.executors.relic_base import RelicPlace
from cortex_kernel.executors.relic_python import SqliteStore
from cortex_kernel.executors.relic_spec import PythonRelicSpec, SqliteRelicSpec
from cortex_kernel.runtime.tools import ToolRegistry


class Counter:
    """A Python-object relic whose operation does nothing."""

    def get(self) -> int:
        """The value (always 0)."""
        return 0


def noop() -> None:
    """Do nothing (the sync callable tool baseline)."""


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_us": round(percentile(values, 0.5) * 1e6, 1),
        "p99_us": round(percentile(values, 0.99) * 1e6, 1),
        "calls": len(values),
    }


async def _time(call: Callable[[], Awaitable[Any]], n: int) -> dict[str, float]:
    for _ in range(20):  # warm-up: start, imports, first thread hops
        await call()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return _ms(times)


async def relic_call_overhead(n: int = 5000) -> dict[str, Any]:
    """p50 / p99 (µs) of ``n`` calls to a Python-object and a SQLite relic, with baselines.

    Returns
    -------
    dict
        ``python``, ``sqlite``, ``direct_sqlite_get``, ``sync_tool`` (each
        ``{p50_us, p99_us, calls}``) and the ratios ``python_vs_sync_tool``,
        ``sqlite_vs_direct`` (p50).
    """
    sys.modules.setdefault("cortex_bench_relics", sys.modules[__name__])
    folder = Path(tempfile.mkdtemp(prefix="cortex-bench-relics-"))
    place = RelicPlace(base=folder, workspace=folder)
    registry = RelicRegistry()
    registry.declare(
        PythonRelicSpec(name="counter", kind="python", target="cortex_bench_relics:Counter"), place
    )
    registry.declare(SqliteRelicSpec(name="store", kind="sqlite"), place)
    tools = ToolRegistry()
    tools.register(noop)
    tool = tools.get("noop")
    direct = SqliteStore(str(folder / "direct.sqlite"))
    try:
        await registry.call("store", "set", {"key": "k", "value": {"n": 1}})
        direct.set("k", {"n": 1})

        async def direct_get() -> Any:
            return direct.get("k")

        result: dict[str, Any] = {
            "python": await _time(lambda: registry.call("counter", "get", {}), n),
            "sqlite": await _time(lambda: registry.call("store", "get", {"key": "k"}), n),
            "direct_sqlite_get": await _time(direct_get, n),
            "sync_tool": await _time(lambda: tool.call({}), n),
        }
    finally:
        direct.close()
        await registry.aclose()
    result["python_vs_sync_tool"] = round(
        result["python"]["p50_us"] / result["sync_tool"]["p50_us"], 2
    )
    result["sqlite_vs_direct"] = round(
        result["sqlite"]["p50_us"] / result["direct_sqlite_get"]["p50_us"], 1
    )
    return result


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures, return them."""
    quick = os.environ.get("CORTEX_BENCH_QUICK") == "1"
    result = anyio.run(relic_call_overhead, 200 if quick else 5000)
    result["quick"] = quick
    for name in ("python", "sqlite", "direct_sqlite_get", "sync_tool"):
        figures = result[name]
        print(f"{name:>18}: p50 {figures['p50_us']:.1f} µs  p99 {figures['p99_us']:.1f} µs")
    print(
        f"python relic / sync tool (p50): {result['python_vs_sync_tool']}x; "
        f"sqlite relic / direct get (p50): {result['sqlite_vs_direct']}x"
    )
    return result


if __name__ == "__main__":
    main()

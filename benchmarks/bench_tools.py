"""What a tool call costs beyond the tool's own work, per kind of tool.

Each tool does nothing, so the time measured is our overhead plus the
platform's (a thread hop, a process spawn, a container's life):

1. **Per call** — p50 / p99 of ``Tool.call`` (parameters validated, then
   run) for an in-process callable (sync, in a worker thread; and async), a
   command tool (``true`` as a subprocess in its own session) and a Docker
   tool (``true`` in a hardened container of the sandbox image, created,
   started, waited for and removed).
2. **Concurrency** — 50 command tools at once vs the same 50 one after the
   other (wall time each, and the ratio), for ``true`` (pure spawn cost) and
   for ``sleep 0.05`` (a tool that waits, as most do).
3. **Container start to first byte** — a container that prints at once:
   from ``create`` to the first byte of its stdout over an attached stream,
   split into create, start and first byte.

Without a Docker engine the Docker figures are ``null`` with the reason.

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    Fewer calls (for tests): 50 callable, 10 command, 2 Docker; default
    1,000 / 100 / 20.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cortex_kernel.bench import percentile
from cortex_kernel.exceptions import ToolError
from cortex_kernel.executors.command import run_command
from cortex_kernel.executors.docker import ContainerSpec, docker_client
from cortex_kernel.executors.images import ensure_sandbox_image
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.runtime.tools import ToolRegistry
from cortex_kernel.toolset import build_tools


def noop() -> None:
    """Do nothing (a sync callable tool)."""


async def anoop() -> None:
    """Do nothing (an async callable tool)."""


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 0.5) * 1000, 3),
        "p99_ms": round(percentile(values, 0.99) * 1000, 3),
        "calls": len(values),
    }


async def _time_calls(call: Callable[[], Awaitable[Any]], n: int) -> dict[str, float]:
    await call()  # warm-up (imports, first thread, first spawn)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return _ms(times)


def _tools(image: str | None) -> ToolRegistry:
    entries: list[dict[str, Any]] = [
        {"name": "sync_noop", "callable": "cortex_bench_tools:noop"},
        {"name": "async_noop", "callable": "cortex_bench_tools:anoop"},
        {"name": "command_noop", "command": ["true"]},
    ]
    if image is not None:
        entries.append({"name": "docker_noop", "docker": {"image": image, "command": ["true"]}})
    return build_tools(AgentManifest.model_validate({"tools": entries}))


def _first_byte(image: str) -> dict[str, float]:
    client = docker_client()
    spec = ContainerSpec(image, ["echo", "x"])
    t0 = time.perf_counter()
    container_id = client.api.create_container(**spec.create_options(client.api))["Id"]
    try:
        created = time.perf_counter()
        stream = client.api.attach(container_id, stdout=True, stderr=False, stream=True)
        client.api.start(container_id)
        started = time.perf_counter()
        next(iter(stream))
        first = time.perf_counter()
    finally:
        client.api.remove_container(container_id, force=True)
    return {
        "create_ms": round((created - t0) * 1000, 2),
        "start_ms": round((started - created) * 1000, 2),
        "start_to_first_byte_ms": round((first - created) * 1000, 2),
        "create_to_first_byte_ms": round((first - t0) * 1000, 2),
    }


async def _fifty(argv: list[str]) -> dict[str, float]:
    """50 calls of ``argv`` one after the other, then all at once."""

    async def one() -> None:
        await run_command(argv)

    start = time.perf_counter()
    for _ in range(50):
        await one()
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(50):
            group.start_soon(one)
    concurrent = time.perf_counter() - start
    return {
        "sequential_s": round(sequential, 3),
        "concurrent_s": round(concurrent, 3),
        "speedup": round(sequential / concurrent, 2),
    }


async def _bench(quick: bool) -> dict[str, Any]:
    n_callable, n_command, n_docker = (50, 10, 2) if quick else (1000, 100, 20)
    image: str | None = None
    docker_reason = ""
    try:
        image = ensure_sandbox_image(docker_client())
    except ToolError as exc:
        docker_reason = str(exc)
    tools = _tools(image)
    result: dict[str, Any] = {"quick": quick}
    per_call: dict[str, Any] = {}
    for name, n in (
        ("sync_noop", n_callable),
        ("async_noop", n_callable),
        ("command_noop", n_command),
        ("docker_noop", n_docker),
    ):
        if name not in tools:
            per_call[name] = None
            continue
        tool = tools.get(name)
        per_call[name] = await _time_calls(lambda tool=tool: tool.call({}), n)  # type: ignore[misc]
    result["per_call"] = per_call

    result["fifty_commands"] = await _fifty(["true"])
    result["fifty_sleeps"] = await _fifty(["sleep", "0.05"])
    if image is not None:
        result["container_first_byte"] = await anyio.to_thread.run_sync(_first_byte, image)
    else:
        result["container_first_byte"] = None
        result["docker_unavailable"] = docker_reason
    return result


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures, return them."""
    sys.modules.setdefault("cortex_bench_tools", sys.modules[__name__])
    quick = os.environ.get("CORTEX_BENCH_QUICK") == "1"
    result = anyio.run(_bench, quick)
    for name, figures in result["per_call"].items():
        if figures is None:
            print(f"{name:>14}: skipped ({result.get('docker_unavailable', '')})")
        else:
            print(f"{name:>14}: p50 {figures['p50_ms']:.3f} ms  p99 {figures['p99_ms']:.3f} ms")
    for key, what in (("fifty_commands", "`true`"), ("fifty_sleeps", "`sleep 0.05`")):
        fifty = result[key]
        print(
            f"50 command tools running {what}: sequential {fifty['sequential_s']:.3f} s, "
            f"concurrent {fifty['concurrent_s']:.3f} s ({fifty['speedup']}x)"
        )
    if result["container_first_byte"]:
        fb = result["container_first_byte"]
        print(
            f"container: create {fb['create_ms']} ms, "
            f"start-to-first-byte {fb['start_to_first_byte_ms']} ms, "
            f"create-to-first-byte {fb['create_to_first_byte_ms']} ms"
        )
    return result


if __name__ == "__main__":
    main()

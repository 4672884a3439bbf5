"""``cortex-kernel bench scale``: CPU-bound tool calls in the kernel vs on a Dask cluster.

Everything goes through a real Cortex kernel driven by jupyter_client, with
a ``LocalCluster`` of 2 worker processes (one thread each) started here.
The tools are notebook ``@tool`` functions doing a fixed amount of pure
Python work (calibrated to ~0.2 s alone); ``burn_local`` runs in the
kernel's threads, ``burn_dask`` (``@tool(executor="dask")``) on the cluster,
found through the ``Client`` the notebook made.

Figures, for each executor:

- ``overhead``: a chain of calls, each starting when the previous one ends
  (nothing queues): action duration minus the tool's own time, p50 and p99 (ms).
- ``fan_out``: N fire-and-forget calls at once (the cell returns, the calls
  go on): makespan, and the round trip of a ``%%python`` cell sent every
  ~0.25 s meanwhile (p50, p99, max) against the same cell on an idle kernel
  (the baseline), and the kernel's CPU seconds per call.
- ``projection``: from the measured per-call overhead and kernel CPU per
  call, the makespan the Dask fan-out would have with N workers
  (``max(ceil(calls / N) * (work + overhead), calls * kernel_cpu)``) and the
  number of workers past which the kernel, not the cluster, is the limit.

On this 2-core machine the point is overhead and responsiveness: two worker
processes and the kernel share two cores. ``CORTEX_BENCH_QUICK=1``: 20
calls of ~0.05 s, a chain of 5.
"""

from __future__ import annotations

import json
import math
import os
import queue
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from cortex_kernel.bench import percentile

QUICK = os.environ.get("CORTEX_BENCH_QUICK", "") not in ("", "0")
CALLS, WORK_S, CHAIN = (20, 0.05, 5) if QUICK else (200, 0.2, 30)
PROJECT_TO = (2, 4, 8, 16, 32, 64, 128)

TOOLS = """%%python
import os, time
from distributed import Client
from cortex_kernel import tool

client = Client("{address}")

def _work(n):
    start = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i
    return {{"spent": time.perf_counter() - start, "end": time.time(), "pid": os.getpid()}}

@tool
def burn_local(n: int, i: int) -> dict:
    \"\"\"CPU-bound work in the kernel.\"\"\"
    return _work(n)

@tool(executor="dask")
def burn_dask(n: int, i: int) -> dict:
    \"\"\"CPU-bound work on the cluster.\"\"\"
    return _work(n)
"""


def _work(n: int) -> float:
    start = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i
    return time.perf_counter() - start


def calibrate(seconds: float) -> int:
    """Iterations of the tools' loop that take ``seconds`` alone (here, now)."""
    n = 20_000
    while _work(n) < 0.02:
        n *= 2
    return max(1, int(n * seconds / statistics.median(_work(n) for _ in range(3))))


def _execute(
    kc: BlockingKernelClient,
    code: str,
    timeout: float = 600.0,
    replies: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Run ``code``; return ``{"status", "stdout", "seconds"}``.

    Shell replies to other requests that arrive meanwhile are noted in
    ``replies`` (msg_id -> perf_counter time).
    """
    started = time.perf_counter()
    msg_id = kc.execute(code)
    stdout: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            stdout.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        if replies is not None:
            replies[reply["parent_header"].get("msg_id", "")] = time.perf_counter()
        reply = kc.get_shell_msg(timeout=timeout)
    return {
        "status": reply["content"]["status"],
        "error": reply["content"].get("evalue", ""),
        "stdout": "".join(stdout),
        "seconds": time.perf_counter() - started,
    }


def _python(kc: BlockingKernelClient, code: str) -> str:
    done = _execute(kc, "%%python\n" + code)
    if done["status"] != "ok":
        raise RuntimeError(f"cell failed: {done['error']}")
    return str(done["stdout"])


def _action(action_id: str, tool: str, n: int, mode: str, after: str | None = None) -> str:
    depends = f' depends_on="{after}"' if after else ""
    body = json.dumps({"name": tool, "parameters": {"n": n, "i": 0}})
    return (
        f'<action type="tool" mode="{mode}" id="{action_id}" output_key="{action_id}"{depends}>'
        f"{body}</action>"
    )


def _replay(path: Path, *turns: str) -> Path:
    path.write_text("".join(json.dumps({"content": t}) + "\n" for t in turns), encoding="utf-8")
    return path


def _percentiles(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 0.5), 2),
        "p99": round(percentile(values, 0.99), 2),
        "max": round(max(values), 2),
    }


def bench_overhead(kc: BlockingKernelClient, folder: Path, tool: str, n: int) -> dict[str, Any]:
    """A chain of CHAIN calls: action duration minus the tool's own time (ms)."""
    prefix = f"c_{tool}_"
    chain = "".join(
        _action(f"{prefix}{k}", tool, n, "async", f"{prefix}{k - 1}" if k else None)
        for k in range(CHAIN)
    )
    replay = _replay(folder / f"chain_{tool}.jsonl", chain, "<response>done</response>")
    done = _execute(kc, f"%%agent --model replay:{replay}\nchain")
    if done["status"] != "ok":
        return {"error": done["error"]}
    rows = json.loads(
        _python(
            kc,
            "import json\n"
            "print(json.dumps([[e.id, e.duration] for e in _run.events "
            f"if e.type == 'action_succeeded' and e.id.startswith({prefix!r})]))",
        )
    )
    spent = json.loads(
        _python(
            kc,
            f"print(json.dumps({{k: v['spent'] for k, v in _run.variables.items() "
            f"if k.startswith({prefix!r})}}))",
        )
    )
    overheads = [(duration - spent[action_id]) * 1000 for action_id, duration in rows]
    return {"calls": len(overheads), "work_s": statistics.median(spent.values()),
            **{f"{k}_ms": v for k, v in _percentiles(overheads).items()}}  # fmt: skip


def bench_fan_out(
    kc: BlockingKernelClient, folder: Path, tool: str, n: int, pid: int, idle_ms: list[float]
) -> dict[str, Any]:
    """CALLS fire-and-forget calls; probe cells meanwhile; makespan and kernel CPU."""
    prefix = f"r_{tool}_"
    plan = "".join(_action(f"{prefix}{k}", tool, n, "fire_and_forget") for k in range(CALLS))
    replay = _replay(folder / f"fan_{tool}.jsonl", plan + "<response>started</response>")
    probe = f"%%python\nprint(sum(1 for k in list(globals()) if k.startswith({prefix!r})))"
    kernel = psutil.Process(pid)
    cpu0 = sum(kernel.cpu_times()[:2])
    started_wall = time.time()
    started = time.perf_counter()
    # The probes start right away: a cell the user sends during the fan-out
    # waits for whatever holds the kernel (the agent cell itself, the GIL).
    agent = kc.execute(f"%%agent --model replay:{replay}\nfan out")
    replies: dict[str, float] = {}
    trips: list[float] = []
    finished = 0
    deadline = time.monotonic() + (120 if QUICK else 900)
    while finished < CALLS and time.monotonic() < deadline:
        done = _execute(kc, probe, timeout=900, replies=replies)
        trips.append(done["seconds"] * 1000)
        finished = int(done["stdout"].strip() or 0)
        if finished < CALLS:
            time.sleep(0.25)
    cell_returned = replies.get(agent)
    seen = time.perf_counter() - started
    cpu = sum(kernel.cpu_times()[:2]) - cpu0
    ends = json.loads(
        _python(
            kc,
            "import json\nprint(json.dumps([v['end'] for k, v in list(globals().items()) "
            f"if k.startswith({prefix!r})]))",
        )
    )
    return {
        "calls": CALLS,
        "finished": finished,
        "makespan_s": round(max(ends) - started_wall, 3) if ends else None,
        "last_seen_s": round(seen, 3),
        "cell_return_s": round(cell_returned - started, 3) if cell_returned else None,
        "kernel_cpu_s": round(cpu, 3),
        "kernel_cpu_ms_per_call": round(cpu / CALLS * 1000, 3),
        "probes": len(trips),
        "probe_ms": _percentiles(trips),
        "probe_vs_idle_p50": round(statistics.median(trips) / statistics.median(idle_ms), 2),
    }


def projection(work_s: float, overhead_ms: float, kernel_ms: float) -> dict[str, Any]:
    """Makespan of the fan-out with N workers, from the measured per-call costs."""
    per_call = work_s + overhead_ms / 1000
    kernel_s = kernel_ms / 1000
    rows = {
        str(workers): round(max(math.ceil(CALLS / workers) * per_call, CALLS * kernel_s), 2)
        for workers in PROJECT_TO
    }
    return {
        "calls": CALLS,
        "per_call_s": round(per_call, 4),
        "kernel_s_per_call": round(kernel_s, 5),
        "makespan_s_by_workers": rows,
        "kernel_bound_past_workers": math.floor(per_call / kernel_s) if kernel_s > 0 else None,
        "formula": "max(ceil(calls / N) * (work + overhead_p50), calls * kernel_cpu_per_call)",
    }


def main() -> dict[str, Any]:
    """Run both executors; print and return the figures."""
    import distributed

    n = calibrate(WORK_S)
    env = dict(os.environ)
    with (
        distributed.LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        tempfile.TemporaryDirectory() as tmp,
    ):
        km = KernelManager(kernel_name="cortex")
        km.start_kernel(env=env, stderr=subprocess.DEVNULL)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            pid = km.provisioner.process.pid  # type: ignore[union-attr]
            _python(kc, TOOLS.format(address=cluster.scheduler_address).split("\n", 1)[1])
            idle = [_execute(kc, "%%python\nprint(0)")["seconds"] * 1000 for _ in range(20)]
            result: dict[str, Any] = {
                "quick": QUICK,
                "work_iterations": n,
                "workers": 2,
                "idle_probe_ms": _percentiles(idle),
            }
            for tool in ("burn_local", "burn_dask"):
                result[tool] = {
                    "overhead": bench_overhead(kc, Path(tmp), tool, n),
                    "fan_out": bench_fan_out(kc, Path(tmp), tool, n, pid, idle),
                }
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    dask, local = result["burn_dask"], result["burn_local"]
    if "error" not in dask["overhead"] and "error" not in dask["fan_out"]:
        result["projection"] = projection(
            dask["overhead"]["work_s"],
            dask["overhead"]["p50_ms"],
            dask["fan_out"]["kernel_cpu_ms_per_call"],
        )
    _print(result, local, dask)
    return result


def _print(result: dict[str, Any], local: dict[str, Any], dask: dict[str, Any]) -> None:
    print(f"{CALLS} calls of ~{WORK_S:g} s of pure-Python work; LocalCluster of 2 processes")
    for name, figures in (("in-kernel", local), ("dask", dask)):
        over, fan = figures["overhead"], figures["fan_out"]
        if "error" in over or "error" in fan:
            print(f"{name}: error {over.get('error') or fan.get('error')}")
            continue
        print(
            f"{name:>9}: per-call overhead p50 {over['p50_ms']:.1f} ms,"
            f" p99 {over['p99_ms']:.1f} ms;"
            f" makespan {fan['makespan_s']:.1f} s; %%python round trip during the fan-out"
            f" p50 {fan['probe_ms']['p50']:.0f} ms, p99 {fan['probe_ms']['p99']:.0f} ms"
            f" ({fan['probe_vs_idle_p50']:.1f}x idle {result['idle_probe_ms']['p50']:.0f} ms);"
            f" kernel CPU {fan['kernel_cpu_ms_per_call']:.1f} ms/call"
        )
    if local["fan_out"].get("makespan_s") and dask["fan_out"].get("makespan_s"):
        ratio = local["fan_out"]["makespan_s"] / dask["fan_out"]["makespan_s"]
        print(f"makespan in-kernel / dask: {ratio:.2f}x (baseline: the in-kernel executor)")
    if "projection" in result:
        proj = result["projection"]
        rows = ", ".join(f"{k}: {v:.1f}s" for k, v in proj["makespan_s_by_workers"].items())
        print(f"projected Dask makespan by workers ({proj['formula']}): {rows}")
        print(f"the kernel becomes the limit past ~{proj['kernel_bound_past_workers']} workers")


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

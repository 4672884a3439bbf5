"""``cortex-kernel bench kernel``: what the Cortex kernel costs over the stock one.

Figures (each printed, returned, and written as JSON by ``cortex-kernel bench``):

- ``startup``: kernel start to ``kernel_info`` reply, ``cortex`` vs stock
  ``python3`` (median seconds; goal: ratio <= 1.3).
- ``round_trip``: execute request to idle for a cell answered by an instant
  replay model with no actions, vs a stock ``pass`` cell (median ms; goal:
  <= 30 ms more).
- ``stream``: one cell streaming at 1,000 tokens/s from a replay model:
  comm messages per second per view (goal: <= 25) and bytes per update.

``CORTEX_BENCH_QUICK=1`` runs fewer repetitions and a shorter stream (for
the test suite). Both kernels are started through jupyter_client as a front
end would; the ``cortex`` kernelspec must be installed.
"""

from __future__ import annotations

import json
import os
import queue
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

QUICK = os.environ.get("CORTEX_BENCH_QUICK", "") not in ("", "0")
GOALS = {"startup_ratio": 1.3, "round_trip_extra_ms": 30.0, "messages_per_second": 25.0}


def _start(name: str, env: dict[str, str]) -> tuple[KernelManager, BlockingKernelClient, float]:
    started = time.perf_counter()
    km = KernelManager(kernel_name=name)
    # The kernels' own startup warnings are not the benchmark's output.
    km.start_kernel(env=env, stderr=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)  # sends kernel_info until a reply arrives
    return km, kc, time.perf_counter() - started


def _stop(km: KernelManager, kc: BlockingKernelClient) -> None:
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def _execute(kc: BlockingKernelClient, code: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run ``code``; return its iopub messages (until idle)."""
    msg_id = kc.execute(code)
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    kc.get_shell_msg(timeout=timeout)
    return messages


def _replay_files(folder: Path, stream_tokens: int) -> tuple[Path, Path]:
    instant = folder / "instant.jsonl"
    instant.write_text(
        "".join(json.dumps({"content": "<response>Hi.</response>"}) + "\n" for _ in range(200)),
        encoding="utf-8",
    )
    # ~1 replay token per word: a thought and a response of `stream_tokens` tokens.
    half = max(1, stream_tokens // 2)
    text = "<thought>" + " think" * half + "</thought><response>" + " word" * half + "</response>"
    stream = folder / "stream.jsonl"
    stream.write_text(json.dumps({"content": text}) + "\n", encoding="utf-8")
    return instant, stream


def bench_startup(env: dict[str, str], repeats: int) -> dict[str, Any]:
    """Median seconds from start to kernel_info reply, for both kernels."""
    times: dict[str, list[float]] = {"cortex": [], "python3": []}
    for _ in range(repeats):
        for name in times:  # interleaved, so machine noise hits both alike
            km, kc, seconds = _start(name, env)
            times[name].append(seconds)
            _stop(km, kc)
    cortex = statistics.median(times["cortex"])
    python3 = statistics.median(times["python3"])
    return {
        "cortex_s": round(cortex, 4),
        "python3_s": round(python3, 4),
        "ratio": round(cortex / python3, 3),
        "goal_ratio": GOALS["startup_ratio"],
        "repeats": repeats,
    }


def _round_trips(kc: BlockingKernelClient, code: str, repeats: int) -> list[float]:
    _execute(kc, code)  # warm-up: first-use imports are not the steady state
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        _execute(kc, code)
        out.append((time.perf_counter() - started) * 1000)
    return out


def bench_round_trip(env: dict[str, str], instant: Path, repeats: int) -> dict[str, Any]:
    """Median ms of an instant agent cell vs a stock ``pass`` cell."""
    km, kc, _ = _start("cortex", {**env, "CORTEX_MODEL": f"replay:{instant}"})
    try:
        agent = statistics.median(_round_trips(kc, "Say hi.", repeats))
    finally:
        _stop(km, kc)
    km, kc, _ = _start("python3", env)
    try:
        stock = statistics.median(_round_trips(kc, "pass", repeats))
    finally:
        _stop(km, kc)
    return {
        "agent_cell_ms": round(agent, 2),
        "pass_cell_ms": round(stock, 2),
        "extra_ms": round(agent - stock, 2),
        "goal_extra_ms": GOALS["round_trip_extra_ms"],
        "repeats": repeats,
    }


def bench_stream(env: dict[str, str], stream: Path, tokens: int) -> dict[str, Any]:
    """Comm messages per second per view, and bytes per update, at 1,000 tokens/s."""
    km, kc, _ = _start("cortex", env)
    try:
        _execute(kc, "%%python\nimport cortex_kernel.jupyter.view")  # imports off the clock
        messages = _execute(kc, f"%%agent --model replay:{stream}?tps=1000\nstream")
    finally:
        _stop(km, kc)
    updates = [
        m
        for m in messages
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "custom"
    ]
    if len(updates) < 2:
        return {"error": f"only {len(updates)} widget updates seen"}
    stamps = [_timestamp(m) for m in updates]
    span = max(stamps[-1] - stamps[0], 1e-9)
    sizes = [len(json.dumps(m["content"]["data"]["content"])) for m in updates]
    return {
        "tokens": tokens,
        "tokens_per_second": 1000,
        "updates": len(updates),
        "seconds": round(span, 3),
        "messages_per_second": round((len(updates) - 1) / span, 2),
        "goal_messages_per_second": GOALS["messages_per_second"],
        "bytes_per_update_mean": round(statistics.mean(sizes), 1),
        "bytes_per_update_max": max(sizes),
    }


def _timestamp(msg: dict[str, Any]) -> float:
    date = msg["header"]["date"]
    return float(date.timestamp()) if hasattr(date, "timestamp") else time.time()


def main() -> dict[str, Any]:
    """Run the three measurements; print and return their figures."""
    env = dict(os.environ)
    repeats_start, repeats_cell = (2, 5) if QUICK else (7, 40)
    tokens = 600 if QUICK else 5000
    with tempfile.TemporaryDirectory() as tmp:
        instant, stream = _replay_files(Path(tmp), tokens)
        result: dict[str, Any] = {
            "quick": QUICK,
            "startup": bench_startup(env, repeats_start),
            "round_trip": bench_round_trip(env, instant, repeats_cell),
            "stream": bench_stream(env, stream, tokens),
        }
    startup, trip, streamed = result["startup"], result["round_trip"], result["stream"]
    print(
        f"startup: cortex {startup['cortex_s']:.3f}s vs python3 {startup['python3_s']:.3f}s "
        f"-> ratio {startup['ratio']:.2f} (goal <= {GOALS['startup_ratio']})"
    )
    print(
        f"round trip: agent cell {trip['agent_cell_ms']:.1f} ms vs pass {trip['pass_cell_ms']:.1f}"
        f" ms -> +{trip['extra_ms']:.1f} ms (goal <= {GOALS['round_trip_extra_ms']:.0f})"
    )
    if "error" in streamed:
        print(f"stream: {streamed['error']}")
    else:
        print(
            f"stream @1000 tok/s: {streamed['messages_per_second']:.1f} msg/s per view "
            f"(goal <= {GOALS['messages_per_second']:.0f}), "
            f"{streamed['bytes_per_update_mean']:.0f} bytes/update (max "
            f"{streamed['bytes_per_update_max']})"
        )
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

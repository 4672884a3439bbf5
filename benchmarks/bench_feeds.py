"""What context feeds cost and save (docs/feeds.md).

1. **Periodic cache** — a 20-turn run through the replay model (each turn a
   tool that works ``TURN_S`` seconds) reading a feed whose source takes
   ``SOURCE_S`` seconds: as a ``periodic`` feed refreshed in the background
   every ``INTERVAL_S``, against the baseline of fetching it every turn (an
   ``on_demand`` feed with ``ttl: 0``). Figures: source calls, the turns
   served from the cache (hit rate), source calls saved, source calls on the
   turns' critical path, and the run's wall time each way.
2. **Prompt build with 20 feeds** — one turn's prompt work as the run does it
   (refresh the due feeds, render the slots, build the system prompt), with
   20 cached feeds of ~400 characters, against the same prompt with no feed;
   p50 / p99 and the ratio. Also the first, uncached build (20 fetches of
   instant callables).
3. **Relic call overhead** — p50 / p99 of a call to a live relic through
   the relic registry (a Python object doing nothing, the SQLite store's
   ``get``), with the relics benchmark's baselines (a sync callable tool
   doing nothing; the same SQLite ``get`` called directly); a relic feed
   source pays this per fetch.

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    Fewer prompt builds (for tests): 50 instead of 2,000.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cortex_kernel.agent import build_session
from cortex_kernel.bench import percentile
from cortex_kernel.llm.prompt import ProtocolPrompt
from cortex_kernel.runtime.feeds import FeedRegistry, FeedSpec, source_fetcher
from cortex_kernel.runtime.limits import Limits
from cortex_kernel.runtime.ports import FeedSlot, PromptContext
from cortex_kernel.runtime.tools import ToolRegistry

TURNS = 20
TURN_S = 0.05
INTERVAL_S = 0.25
SOURCE_S = 0.02

CALLS = {"n": 0}


async def quote() -> dict[str, Any]:
    """A feed source that takes SOURCE_S seconds (a small HTTP call, say)."""
    CALLS["n"] += 1
    await anyio.sleep(SOURCE_S)
    return {"symbol": "ACME", "price": 100 + CALLS["n"]}


def instant(n: int = 0) -> str:
    """A feed source that returns at once, ~400 characters."""
    return f"feed {n}: " + "lorem ipsum dolor sit amet " * 15


async def work() -> str:
    """A tool that works TURN_S seconds (the turn's own time)."""
    await anyio.sleep(TURN_S)
    return "done"


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 0.5) * 1000, 4),
        "p99_ms": round(percentile(values, 0.99) * 1000, 4),
        "n": len(values),
    }


async def _run_20_turns(spec: FeedSpec, folder: Path) -> dict[str, Any]:
    action = (
        '<action type="tool" mode="sync" id="w{}">{{"name": "work", "parameters": {{}}}}</action>'
    )
    turns = [action.format(i) for i in range(TURNS - 1)] + ["<response>done</response>"]
    path = folder / f"{spec.type}.jsonl"
    path.write_text("".join(json.dumps({"content": t}) + "\n" for t in turns), encoding="utf-8")
    CALLS["n"] = 0
    tools = ToolRegistry()
    tools.register(work, repeatable=True)  # the same call each turn is the point here
    session = build_session(
        f"replay:{path}",
        transcript_dir=folder,
        feeds=FeedRegistry([spec]),
        tools=tools,
        limits=Limits(max_turns=TURNS + 5),
    )
    started = time.perf_counter()
    result = await session.run("watch the quote")
    seconds = time.perf_counter() - started
    await session.aclose()
    assert result.status == "ok", result.message
    stats = session.feeds.stats()["quote"]
    return {
        "source_calls": CALLS["n"],
        "cache_hits": stats["hits"],
        "feed_updated_events": sum(1 for e in result.events if e.type == "feed_updated"),
        "run_s": round(seconds, 4),
    }


async def _periodic_cache(folder: Path) -> dict[str, Any]:
    source = {"callable": "cortex_bench_feeds:quote"}
    every_turn = await _run_20_turns(FeedSpec(id="quote", ttl=0, source=source), folder)
    periodic = await _run_20_turns(
        FeedSpec(id="quote", type="periodic", interval=INTERVAL_S, source=source), folder
    )
    # Turns that fetched on their critical path: every turn for the baseline,
    # only the first for a periodic feed (later turns read the cache).
    return {
        "turns": TURNS,
        "turn_work_s": TURN_S,
        "interval_s": INTERVAL_S,
        "source_s": SOURCE_S,
        "every_turn": {**every_turn, "fetches_on_turn_path": TURNS},
        "periodic": {**periodic, "fetches_on_turn_path": 1},
        "cache_hit_rate": round(periodic["cache_hits"] / TURNS, 3),
        "source_calls_saved": every_turn["source_calls"] - periodic["source_calls"],
        "source_calls_saved_pct": round(
            100 * (1 - periodic["source_calls"] / every_turn["source_calls"]), 1
        ),
        "run_time_ratio": round(periodic["run_s"] / every_turn["run_s"], 3),
    }


async def _prompt_build(n: int) -> dict[str, Any]:
    prompt = ProtocolPrompt()
    specs = [
        FeedSpec(
            id=f"feed_{i:02d}",
            ttl=3600,
            source={"callable": "cortex_bench_feeds:instant", "parameters": {"n": i}},
        )
        for i in range(20)
    ]
    registry = FeedRegistry(specs)
    fetch = source_fetcher(_no_action, lambda action: None, {})

    async def build(with_feeds: bool) -> str:
        slots: list[FeedSlot] = []
        if with_feeds:
            await registry.refresh(fetch)
            slots = [FeedSlot(id=i, text=t, error=e) for i, t, e in registry.slots()]
        context = PromptContext(feeds=slots, internal_actions=["set_variable"])
        # The feeds go in their own message, after the conversation.
        return prompt.system_prompt(context) + prompt.feeds_message(context)

    started = time.perf_counter()
    first = await build(True)
    first_s = time.perf_counter() - started
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(n):
        for with_feeds in (False, True):
            started = time.perf_counter()
            await build(with_feeds)
            times[with_feeds].append(time.perf_counter() - started)
    feeds_ms, bare_ms = _ms(times[True]), _ms(times[False])
    return {
        "feeds": 20,
        "prompt_chars": len(first),
        "first_build_ms": round(first_s * 1000, 3),
        "with_20_feeds": feeds_ms,
        "no_feeds": bare_ms,
        "p50_ratio": round(feeds_ms["p50_ms"] / bare_ms["p50_ms"], 2),
    }


async def _no_action(action: Any, body: dict[str, Any]) -> Any:
    raise RuntimeError("no action sources in this benchmark")


def _relic_overhead(quick: bool) -> dict[str, Any]:
    """The relics benchmark's call overhead (``RelicRegistry.call`` on live relics)."""
    from cortex_kernel.bench import load_benchmark

    try:
        relics = load_benchmark("relics")
    except FileNotFoundError:
        return {"status": "missing", "reason": "benchmarks/bench_relics.py is not here"}
    figures: dict[str, Any] = anyio.run(relics.relic_call_overhead, 50 if quick else 2000)
    return figures


async def _bench(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        periodic = await _periodic_cache(Path(tmp))
    return {
        "quick": quick,
        "periodic_cache": periodic,
        "prompt_build": await _prompt_build(50 if quick else 2000),
    }


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures, return them."""
    sys.modules.setdefault("cortex_bench_feeds", sys.modules[__name__])
    quick = os.environ.get("CORTEX_BENCH_QUICK") == "1"
    result = anyio.run(_bench, quick)
    result["relic_call"] = _relic_overhead(quick)
    cache = result["periodic_cache"]
    every, periodic = cache["every_turn"], cache["periodic"]
    print(
        f"{TURNS}-turn run, turn {TURN_S * 1000:.0f} ms, source {SOURCE_S * 1000:.0f} ms, "
        f"periodic every {INTERVAL_S * 1000:.0f} ms:"
    )
    print(
        f"  fetch every turn (baseline): {every['source_calls']} source calls, "
        f"{every['fetches_on_turn_path']} on the turns' path, run {every['run_s']:.3f} s"
    )
    print(
        f"  periodic: {periodic['source_calls']} source calls, "
        f"{periodic['fetches_on_turn_path']} on the turns' path, run {periodic['run_s']:.3f} s; "
        f"cache hit rate {cache['cache_hit_rate']:.0%}, "
        f"{cache['source_calls_saved']} calls saved ({cache['source_calls_saved_pct']}%), "
        f"run time x{cache['run_time_ratio']}"
    )
    build = result["prompt_build"]
    print(
        f"prompt build, 20 cached feeds ({build['prompt_chars']} chars): "
        f"p50 {build['with_20_feeds']['p50_ms']:.3f} ms, "
        f"p99 {build['with_20_feeds']['p99_ms']:.3f} ms; "
        f"no feeds p50 {build['no_feeds']['p50_ms']:.3f} ms (x{build['p50_ratio']}); "
        f"first build with 20 fetches {build['first_build_ms']:.3f} ms"
    )
    relic = result["relic_call"]
    if relic.get("status") == "missing":
        print(f"relic call overhead: missing ({relic['reason']})")
    else:
        for kind in ("python", "sqlite"):
            print(
                f"relic call overhead, {kind}: p50 {relic[kind]['p50_us']} us, "
                f"p99 {relic[kind]['p99_us']} us (a sync tool doing nothing: "
                f"p50 {relic['sync_tool']['p50_us']} us)"
            )
    return result


if __name__ == "__main__":
    main()

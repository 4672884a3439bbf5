"""The model path's cost: litellm + our adapter + the parser, against raw httpx.

A loopback OpenAI-compatible server (``tests/llm/fake_openai.py``) streams a
protocol document as SSE chunks of 4 characters. Three figures:

1. **First event** — from the server's first body byte (stamped just before
   the write) to the first parser event in our hands, through
   ``LiteLLMModel.stream`` → ``Parser.feed``; beside it the first text chunk
   out of our adapter, and the first content delta of a raw httpx reader.
   The document opens with ``<thought>`` in 4-character chunks, so the first
   event needs three chunks (the parser holds a partial tag back): at
   1,000 chunks/s that alone is ~2 ms.
2. **Paced** — at 1,000 chunks/s, the delay from each chunk's send to its
   arrival (parser events for ours, the decoded delta for raw httpx);
   median and p99, and our overhead (ours − raw).
3. **Unpaced** — the server sends as fast as it can; client time per chunk
   for both paths and the difference: the per-chunk CPU cost of our path.

The server runs in a child process (so it does not compete with the client
for the GIL); its send times are ``time.perf_counter`` values, the
system-wide monotonic clock on Linux, comparable with the client's. The
first litellm call (import and client set-up) is done before timing and
reported on its own.

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    200 chunks, one repetition (for tests); default 2,000 chunks, best of 3.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.llm.fake_openai

from cortex_kernel.llm.litellm_model import LiteLLMModel, load_litellm
from cortex_kernel.protocol.parser import Parser
from cortex_kernel.runtime.ports import CompletionRequest
from tests.llm.fake_openai import FakeOpenAIProcess, Reply, text_reply

RATE = 1000.0  # chunks per second in the paced run
CHUNK = 4
API_KEY = "sk-bench-0000000000"
MESSAGES = [{"role": "user", "content": "benchmark"}]

_SEGMENT = (
    "<thought>I look at the data first and start the slow part now "
    '<action type="tool" mode="async" id="q{n}" output_key="rows{n}">'
    '{{"name": "run_sql", "parameters": {{"query": "select * from t{n} limit 10"}}}}</action>'
    " while I keep thinking about the columns.</thought>"
    '<response final="false">Step {n} is running.</response>'
)


def _document(chunks: int) -> str:
    text = ""
    n = 0
    while len(text) < chunks * CHUNK:
        n += 1
        text += _SEGMENT.format(n=n)
    return text[: chunks * CHUNK]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _ours(api_base: str) -> tuple[float | None, list[float]]:
    """Read one stream through our path; return (first event time, per-chunk times)."""
    model = LiteLLMModel("openai/x", api_base=api_base, api_key=API_KEY, timeout=30, num_retries=0)
    parser = Parser()
    first_event: float | None = None
    arrivals: list[float] = []
    completion = model.stream(CompletionRequest(messages=MESSAGES))
    async with completion:
        async for chunk in completion:
            events = parser.feed(chunk)
            now = time.perf_counter()
            arrivals.append(now)
            if first_event is None and events:
                first_event = now
    parser.close()
    return first_event, arrivals


async def _raw(api_base: str) -> list[float]:
    """Read one stream with bare httpx and SSE decoding; per-chunk arrival times."""
    arrivals: list[float] = []
    body = {"model": "x", "messages": MESSAGES, "stream": True}
    headers = {"authorization": f"Bearer {API_KEY}"}
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{api_base}/chat/completions", json=body, headers=headers) as reply,
    ):
        async for line in reply.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            choices = event.get("choices") or []
            if choices and choices[0]["delta"].get("content"):
                arrivals.append(time.perf_counter())
    return arrivals


def _script(text: str, repeat: int) -> list[Reply]:
    """Every reply of the run, in request order (the server is in another process)."""
    paced = text_reply(text, chunk_size=CHUNK, delay=1.0 / RATE)
    unpaced = text_reply(text, chunk_size=CHUNK)
    return [
        text_reply("<response>warm</response>"),
        text_reply("warm"),
        *[paced] * (2 * repeat),
        *[unpaced] * (2 * repeat),
    ]


async def _measure(chunks: int, repeat: int) -> dict[str, Any]:
    text = _document(chunks)
    arrivals_of: list[list[float]] = []  # per request, in order
    first_events: list[float] = []
    with FakeOpenAIProcess(_script(text, repeat)) as server:
        # Warm-up: litellm's first call builds clients and imports lazily.
        started = time.perf_counter()
        await _ours(server.api_base)
        first_call_s = time.perf_counter() - started
        await _raw(server.api_base)
        arrivals_of += [[], []]
        for _ in range(repeat):
            first, arrivals = await _ours(server.api_base)
            assert first is not None
            first_events.append(first)
            arrivals_of.append(arrivals)
            arrivals_of.append(await _raw(server.api_base))
        for _ in range(repeat):
            arrivals_of.append((await _ours(server.api_base))[1])
            arrivals_of.append(await _raw(server.api_base))
        records = server.stop()

    first_ours: list[float] = []
    first_chunk_ours: list[float] = []
    first_raw: list[float] = []
    paced_ours: list[float] = []
    paced_raw: list[float] = []
    for r in range(repeat):
        ours_i, raw_i = 2 + 2 * r, 3 + 2 * r
        first_ours.append(first_events[r] - records[ours_i]["first_byte_at"])
        first_chunk_ours.append(arrivals_of[ours_i][0] - records[ours_i]["first_byte_at"])
        first_raw.append(arrivals_of[raw_i][0] - records[raw_i]["first_byte_at"])
        for index, into in ((ours_i, paced_ours), (raw_i, paced_raw)):
            sent = records[index]["chunk_sent_at"]
            into += [a - s for a, s in zip(arrivals_of[index], sent, strict=False)]
    base = 2 + 2 * repeat
    per_chunk = [
        (arrivals[-1] - arrivals[0]) / max(1, len(arrivals) - 1) for arrivals in arrivals_of[base:]
    ]
    ours_us = min(per_chunk[0::2]) * 1e6
    raw_us = min(per_chunk[1::2]) * 1e6
    return {
        "chunks": chunks,
        "chunk_chars": CHUNK,
        "rate_chunks_per_s": RATE,
        "repeat": repeat,
        "first_call_s": round(first_call_s, 4),
        "first_event_ms": round(min(first_ours) * 1e3, 3),
        "first_chunk_ms": round(min(first_chunk_ours) * 1e3, 3),
        "raw_first_chunk_ms": round(min(first_raw) * 1e3, 3),
        "paced_latency_ms": {
            "ours_median": round(statistics.median(paced_ours) * 1e3, 3),
            "ours_p99": round(_percentile(paced_ours, 0.99) * 1e3, 3),
            "raw_median": round(statistics.median(paced_raw) * 1e3, 3),
            "raw_p99": round(_percentile(paced_raw, 0.99) * 1e3, 3),
            "overhead_median": round(
                (statistics.median(paced_ours) - statistics.median(paced_raw)) * 1e3, 3
            ),
        },
        "unpaced_us_per_chunk": {
            "ours": round(ours_us, 1),
            "raw_httpx": round(raw_us, 1),
            "overhead": round(ours_us - raw_us, 1),
            "ratio": round(ours_us / raw_us, 2) if raw_us else None,
        },
    }


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures and return them."""
    quick = os.environ.get("CORTEX_BENCH_QUICK") == "1"
    chunks, repeat = (200, 1) if quick else (2000, 3)
    started = time.perf_counter()
    load_litellm()
    import_s = time.perf_counter() - started
    result = anyio.run(_measure, chunks, repeat)
    result["litellm_import_s"] = round(import_s, 3)
    result["quick"] = quick
    paced = result["paced_latency_ms"]
    unpaced = result["unpaced_us_per_chunk"]
    print(f"litellm import               {result['litellm_import_s']:8.3f} s")
    print(f"first call (warm-up)         {result['first_call_s']:8.3f} s")
    print(f"first byte -> first event    {result['first_event_ms']:8.3f} ms (ours)")
    print(f"first byte -> first chunk    {result['first_chunk_ms']:8.3f} ms (ours)")
    print(f"first byte -> first chunk    {result['raw_first_chunk_ms']:8.3f} ms (raw httpx)")
    print(
        f"paced {RATE:.0f}/s latency median  ours {paced['ours_median']:.3f} ms, "
        f"raw {paced['raw_median']:.3f} ms, overhead {paced['overhead_median']:.3f} ms"
    )
    print(
        f"unpaced per chunk            ours {unpaced['ours']:.1f} us, raw "
        f"{unpaced['raw_httpx']:.1f} us, overhead {unpaced['overhead']:.1f} us "
        f"(x{unpaced['ratio']})"
    )
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

"""The model path's cost per streamed chunk: provider bytes to parser events and view.

A loopback OpenAI-compatible server (``tests/llm/fake_openai.py`` of the
source checkout, in a child process so it does not compete for the GIL)
streams protocol text as SSE chunks of 4 characters, one chunk per SSE event
and per HTTP chunk, through litellm's real HTTP path. The text is the parser
benchmark's corpus (``bench_parser.build_turns``): prose with accented
words, CJK and emoji, actions whose JSON bodies hold code, multi-line SQL and
long documents (escapes such as ``\\n`` and ``\\u00e9``), and short ones.

Every reader gets one chunk per call: litellm's iterators yield each SSE
event on its own, and ours and the floor are checked to (``texts_per_chunk``
is 1.0 when each text out of the adapter held one chunk; below 1 would mean
a network read joined several). The **floor** does less than any reader of
the text can: httpx's raw bytes (no decoding layer), lines split on
``\\n``, ``json.loads`` of each ``data:`` line and the delta's content, no
checks and no parser. Figures:

1. **First event** — from the server's first body byte (stamped just before
   the write) to the first parser event in our hands, through
   ``LiteLLMModel.stream`` → ``Parser.feed``; beside it the first text out
   of our adapter and the floor's first content. The text opens with
   ``<thought>`` in 4-character chunks, so the first event needs three
   chunks (the parser holds a partial tag back).
2. **Unpaced, per path** — the server sends as fast as it can; the client's
   CPU time per chunk (``time.process_time``) from the first text to the
   last, adapter and parser, for each way litellm can carry the stream, and
   the floor:

   - ``ours``: what the product does (litellm sends the request, the kernel
     reads the SSE body itself; ``ours_reader`` says whether it did);
   - ``litellm_wrapper``: litellm's own HTTP handler, chunks through its
     ``CustomStreamWrapper`` (pydantic chunk objects);
   - ``litellm_sdk``: litellm through the OpenAI SDK and the wrapper
     (``EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER=false``);
   - ``floor``: as above.

3. **Paced** — at 1,000 chunks/s, the delay from each chunk's send to its
   text passing the parser (ours) or out of the floor; median, p99 and our
   overhead.
4. **End to end** — a whole run (``Session.run``: adapter, parser,
   scheduler running the text's async tool actions, transcript) with every
   event folded into the view's state (``RunState.apply``), the server
   paced at 1,000 and 5,000 chunks/s: CPU µs per provider chunk (the
   process's, so threads count), the share of a core that is, and how late
   the last event came after the last chunk was sent. Beside it, the floor
   reading the same paced stream: at a paced rate every chunk is its own
   wake-up of the event loop (epoll, socket read, HTTP framing), a cost any
   Python reader pays, and this machine's floor.
5. **Dispatch** — for each protocol (``xml``: protocol text with ``async``
   tool actions; ``tools``: native function calls), a whole run whose
   first turn streams the same calls at :data:`DISPATCH_RATE` chunks/s
   (4 characters a chunk; a native call's id and name come in a chunk of
   their own): per call, from the send of the chunk that holds its last
   byte to the runtime's ``action_started`` event (the action's start),
   and to the tool body's first line; median and p99. Beside it, how long
   after its last byte the stream ended (when the call would have started
   had it waited for the stream's end, as native calls did before). A
   native call is complete only when the stream moves past it (the next
   call's first delta, or the finish chunk), so its figure includes that
   wait, one chunk interval; from that next chunk's send to the start is
   the adapter's own delay (``start_after_next_chunk``).
6. **In process** — the same run with the text streamed from memory (one
   4-character chunk per pass of the event loop, no HTTP): the CPU per
   chunk of the runtime alone (scrubbing, parser, stamping, redaction,
   scheduler, transcript, view), without the view, and the in-memory
   model's own loop, which is subtracted. No socket and no other process:
   far steadier than the paced figures, which this machine's wake-ups
   dominate.

The first litellm call (import and client set-up) is made before timing and
reported on its own.

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    200 chunks, one repetition (for tests); default 2,000 chunks, best of 3.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx

from cortex_kernel.agent import build_session
from cortex_kernel.bench import load_benchmark, percentile, source_checkout
from cortex_kernel.jupyter.viewstate import RunState
from cortex_kernel.llm import litellm_model
from cortex_kernel.llm.litellm_model import LiteLLMModel, load_litellm
from cortex_kernel.protocol.parser import Parser
from cortex_kernel.runtime.ports import Completion, CompletionRequest, Model
from cortex_kernel.runtime.tools import ToolRegistry

# The loopback provider is the test suite's (developer tooling of the source
# checkout, as the benchmarks are); `cortex-kernel bench` refuses to run
# outside a checkout, so this import has one to come from.
sys.path.insert(0, str(source_checkout()))
from tests.llm.fake_openai import FakeOpenAIProcess, Reply, text_reply

corpus = load_benchmark("parser")  # the texts (and their tools) of the parser benchmark

RATE = 1000.0  # chunks per second in the paced run
DISPATCH_RATE = 100.0  # chunks per second in the dispatch runs: a fast hosted model's pace
END_TO_END_RATES = (1000.0, 5000.0)
CHUNK = 4
API_KEY = "sk-bench-0000000000"
MESSAGES = [{"role": "user", "content": "benchmark"}]
PATHS = ("ours", "litellm_wrapper", "litellm_sdk", "floor")
_HANDLER_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"

Arrival = tuple[float, int, float]  # (perf_counter, characters so far, process CPU s)


def _document(chunks: int) -> str:
    """``chunks`` chunks of the corpus's text, opening with ``<thought>``."""
    text = corpus.build_turns(1, seed=5, chars=chunks * CHUNK)[0]
    return str(text[: chunks * CHUNK])


def _run_document(chunks: int) -> str:
    """One turn of about ``chunks`` chunks: thoughts with async actions, a final answer."""
    return str(corpus.build_turns(1, seed=5, chars=max(1, chunks * CHUNK - 400))[0])


def _chunks_of(text: str) -> int:
    return -(-len(text) // CHUNK)


def _model(api_base: str) -> LiteLLMModel:
    # A hosted provider's waiting rules (30 s to the first token, then 30 s
    # between chunks): the rates measured here are a hosted model's, and a
    # loopback server would otherwise get the local ones (600 s first token).
    return LiteLLMModel(
        "openai/x",
        api_base=api_base,
        api_key=API_KEY,
        timeout=30,
        first_token_timeout=30,
        num_retries=0,
    )


@contextmanager
def _path(name: str) -> Iterator[None]:
    """Route our adapter through one of litellm's ways of carrying the stream.

    ``ours`` changes nothing: the product as it is.
    """
    if name == "ours":
        yield
        return
    saved_env = os.environ.get(_HANDLER_ENV)
    saved_reader = getattr(litellm_model, "sse_response")  # noqa: B009
    os.environ[_HANDLER_ENV] = "false" if name == "litellm_sdk" else "true"
    setattr(litellm_model, "sse_response", lambda stream: None)  # noqa: B010 (a bench-only switch)
    try:
        yield
    finally:
        setattr(litellm_model, "sse_response", saved_reader)  # noqa: B010
        if saved_env is None:
            os.environ.pop(_HANDLER_ENV, None)
        else:
            os.environ[_HANDLER_ENV] = saved_env


async def _ours(api_base: str) -> tuple[float | None, list[Arrival], str]:
    """Read one stream through our adapter and the parser.

    Returns the first parser event's time, one arrival per text handed to
    the parser, and which reader carried the body (``sse``: ours; else
    litellm's wrapper).
    """
    model = _model(api_base)
    parser = Parser()
    first_event: float | None = None
    arrivals: list[Arrival] = []
    chars = 0
    completion = model.stream(CompletionRequest(messages=MESSAGES))
    async with completion:
        async for chunk in completion:
            events = parser.feed(chunk)
            now = time.perf_counter()
            chars += len(chunk)
            arrivals.append((now, chars, time.process_time()))
            if first_event is None and events:
                first_event = now
        reader = "sse" if getattr(completion, "_events", None) is not None else "litellm"
    parser.close()
    return first_event, arrivals, reader


async def _floor(api_base: str) -> tuple[list[Arrival], int]:
    """Read one stream doing less than any reader of its text can; (arrivals, reads).

    httpx's raw bytes, split into lines, ``json.loads`` of each ``data:``
    line and its delta's content: no decoding layer, no checks, no parser.
    One arrival per SSE event with text, as :func:`_ours` has per text.
    """
    arrivals: list[Arrival] = []
    chars = 0
    reads = 0
    tail = b""
    loads = json.loads
    body = {"model": "x", "messages": MESSAGES, "stream": True}
    headers = {"authorization": f"Bearer {API_KEY}"}
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{api_base}/chat/completions", json=body, headers=headers) as reply,
    ):
        async for data in reply.aiter_raw():
            reads += 1
            lines = (tail + data).split(b"\n")
            tail = lines.pop()
            for line in lines:
                if line[:6] != b"data: " or line == b"data: [DONE]":
                    continue
                choices = loads(line[6:])["choices"]
                content = choices[0]["delta"].get("content") if choices else None
                if content:
                    chars += len(content)
                    arrivals.append((time.perf_counter(), chars, time.process_time()))
    return arrivals, reads


def _delays(arrivals: list[Arrival], sent: list[float], length: int) -> list[float]:
    """Per chunk: from its send to the first arrival that completes it."""
    delays: list[float] = []
    at = 0
    for index, sent_at in enumerate(sent):
        end = min(length, (index + 1) * CHUNK)
        while at < len(arrivals) and arrivals[at][1] < end:
            at += 1
        if at == len(arrivals):
            break
        delays.append(arrivals[at][0] - sent_at)
    return delays


class _MemoryCompletion(Completion):
    """Chunks from memory, one per pass of the event loop (as one network read each)."""

    def __init__(self, chunks: list[str]) -> None:
        super().__init__()
        self._chunks = chunks

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[str]:
        for chunk in self._chunks:
            await anyio.lowlevel.checkpoint()
            yield chunk

    async def aclose(self) -> None:
        return None


class _MemoryModel(Model):
    """Streams ``text`` in chunks of :data:`CHUNK` characters, every turn."""

    def __init__(self, text: str) -> None:
        self.name = "memory"
        self.chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]

    def stream(self, request: CompletionRequest) -> Completion:
        return _MemoryCompletion(self.chunks)


async def _memory_model_alone(model: _MemoryModel) -> float:
    """Process CPU s of reading the in-memory stream with nothing else."""
    started = time.process_time()
    async with model.stream(CompletionRequest(messages=MESSAGES)) as completion:
        async for _ in completion:
            pass
    return time.process_time() - started


async def _end_to_end(api_base: str, folder: Path) -> tuple[float, float, str]:
    """One whole run through litellm; see :func:`_whole_run`."""
    return await _whole_run(_model(api_base), folder)


async def _whole_run(model: Model, folder: Path, view: bool = True) -> tuple[float, float, str]:
    """One whole run, the view's state fed or not; (process CPU s, last event time, status)."""
    tools = corpus.register_tools(ToolRegistry())
    session = build_session(model, tools=tools, transcript_dir=folder)
    state = RunState()
    last = 0.0

    def on_event(event: Any) -> None:
        nonlocal last
        state.apply(event)
        last = time.perf_counter()

    started = time.process_time()
    result = await session.run("benchmark", on_event=on_event if view else None)
    cpu = time.process_time() - started
    await session.aclose()
    return cpu, last, result.status


def _dispatch_calls(count: int) -> list[tuple[str, str]]:
    """``count`` calls of the dispatch runs: (id, arguments JSON)."""
    return [
        (f"c{n}", json.dumps({"n": n, "query": f"rows of table t{n} changed since monday"}))
        for n in range(count)
    ]


def _dispatch_replies(protocol: str, count: int) -> tuple[list[Reply], list[int]]:
    """A dispatch run's two replies, and per call the index of the event holding its last byte."""
    calls = _dispatch_calls(count)
    delay = 1.0 / DISPATCH_RATE
    if protocol == "xml":
        text = "".join(
            f'<action type="tool" mode="async" id="{call_id}">'
            f'{{"name": "mark", "parameters": {arguments}}}</action>'
            for call_id, arguments in calls
        )
        ends = [m.end() for m in re.finditer("</action>", text)]
        last = [(end - 1) // CHUNK for end in ends]
        first = text_reply(text, chunk_size=CHUNK, delay=delay)
        return [first, text_reply("<response>done</response>")], last
    deltas: list[dict[str, Any]] = []
    last = []
    for index, (call_id, arguments) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function"}
        deltas.append({"tool_calls": [{**head, "function": {"name": "mark", "arguments": ""}}]})
        for start in range(0, len(arguments), CHUNK):
            piece = arguments[start : start + CHUNK]
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        last.append(len(deltas) - 1)
    first = Reply(kind="stream", chunks=deltas, delay=delay)
    return [first, text_reply("done")], last


async def _dispatch_run(api_base: str, protocol: str, folder: Path) -> dict[str, float]:
    """One dispatch run: per call id, when its action started and its tool body ran."""
    started: dict[str, float] = {}
    bodies: dict[int, float] = {}
    tools = ToolRegistry()

    @tools.register
    def mark(n: int, query: str) -> int:
        """Note when this call's body began."""
        bodies[n] = time.perf_counter()
        return n

    def on_event(event: Any) -> None:
        if event.type == "action_started":
            started[event.id] = time.perf_counter()

    model = _model(api_base)
    session = build_session(model, tools=tools, transcript_dir=folder, protocol=protocol)
    result = await session.run("benchmark", on_event=on_event)
    await session.aclose()
    assert result.status == "ok", result.message
    times = {f"started:{key}": value for key, value in started.items()}
    times.update({f"body:c{key}": value for key, value in bodies.items()})
    return times


def _dispatch_figures(
    runs: list[tuple[dict[str, float], dict[str, Any]]], last: list[int], count: int, native: bool
) -> dict[str, float]:
    """Median and p99 (ms) of last byte → action start, → tool body, → the stream's end."""
    to_start: list[float] = []
    to_body: list[float] = []
    to_end: list[float] = []
    after_next: list[float] = []  # from the chunk after the last byte: the adapter's own delay
    for times, record in runs:
        sent = record["chunk_sent_at"]
        for n in range(count):
            last_byte = sent[last[n]]
            to_start.append(times[f"started:c{n}"] - last_byte)
            to_body.append(times[f"body:c{n}"] - last_byte)
            to_end.append(sent[-1] - last_byte)
            after_next.append(times[f"started:c{n}"] - sent[last[n] + 1])
    figures = {
        "start_median_ms": round(statistics.median(to_start) * 1e3, 3),
        "start_p99_ms": round(percentile(to_start, 0.99) * 1e3, 3),
        "body_median_ms": round(statistics.median(to_body) * 1e3, 3),
        "body_p99_ms": round(percentile(to_body, 0.99) * 1e3, 3),
        "stream_end_median_ms": round(statistics.median(to_end) * 1e3, 3),
        "calls": len(to_start),
    }
    if native:  # an action in protocol text needs no later chunk to start
        figures["start_after_next_chunk_median_ms"] = round(statistics.median(after_next) * 1e3, 3)
    return figures


async def _dispatch(count: int, repeat: int) -> dict[str, Any]:
    """The dispatch figures of both protocols on the same paced stream (see the module's notes)."""
    out: dict[str, Any] = {"rate_chunks_per_s": DISPATCH_RATE, "calls_per_run": count}
    for protocol in ("xml", "tools"):
        replies, last = _dispatch_replies(protocol, count)
        runs: list[dict[str, float]] = []
        with (
            FakeOpenAIProcess(replies * (repeat + 1)) as server,
            tempfile.TemporaryDirectory() as folder,
        ):
            for _ in range(repeat + 1):  # the first run warms up
                runs.append(await _dispatch_run(server.api_base, protocol, Path(folder)))
            records = server.stop()
        paired = list(zip(runs[1:], records[2::2], strict=True))
        out[protocol] = _dispatch_figures(paired, last, count, native=protocol == "tools")
    return out


def _script(text: str, run_text: str, repeat: int) -> list[Reply]:
    """Every reply of the run, in request order (the server is in another process)."""
    paced = text_reply(text, chunk_size=CHUNK, delay=1.0 / RATE)
    unpaced = text_reply(text, chunk_size=CHUNK)
    return [
        text_reply("<response>warm</response>"),
        text_reply("warm"),
        *[unpaced] * (len(PATHS) * (repeat + 1)),
        *[paced] * (2 * repeat),
        text_reply(run_text, chunk_size=CHUNK),  # the end-to-end warm-up
        *[
            text_reply(run_text, chunk_size=CHUNK, delay=1.0 / rate)
            for rate in END_TO_END_RATES
            for _ in range(2 * repeat)  # a run, then the floor on the same stream
        ],
    ]


async def _read(api_base: str, name: str) -> tuple[list[Arrival], float]:
    """One stream through ``name``: its arrivals and texts per chunk (1.0: one chunk a call)."""
    if name == "floor":
        arrivals = (await _floor(api_base))[0]
    else:
        with _path(name):
            arrivals = (await _ours(api_base))[1]
    return arrivals, len(arrivals) / max(1, _chunks_of_chars(arrivals))


def _chunks_of_chars(arrivals: list[Arrival]) -> int:
    return -(-arrivals[-1][1] // CHUNK) if arrivals else 0


def _cpu_per_chunk(arrivals: list[Arrival]) -> float:
    """CPU s per chunk from the first text to the last (the request's set-up left out)."""
    chunks = (arrivals[-1][1] - arrivals[0][1]) / CHUNK
    return (arrivals[-1][2] - arrivals[0][2]) / max(1.0, chunks)


async def _measure(chunks: int, repeat: int) -> dict[str, Any]:
    text = _document(chunks)
    run_text = _run_document(chunks)
    cpu: dict[str, list[float]] = {name: [] for name in PATHS}
    per_chunk: dict[str, float] = {}
    readers: set[str] = set()
    paced_of: list[list[Arrival]] = []  # paced requests, in order: ours, floor, ours…
    first_events: list[float] = []
    runs: list[tuple[float, float, str]] = []
    floor_cpu: list[float] = []  # the floor reading the same paced stream
    with FakeOpenAIProcess(_script(text, run_text, repeat)) as server:
        # Warm-up: litellm's first call builds clients and imports lazily.
        started = time.perf_counter()
        readers.add((await _ours(server.api_base))[2])
        first_call_s = time.perf_counter() - started
        await _floor(server.api_base)
        for round_ in range(repeat + 1):  # the first round warms each path
            for name in PATHS:
                arrivals, texts = await _read(server.api_base, name)
                per_chunk[name] = min(per_chunk.get(name, texts), texts)
                if round_:
                    cpu[name].append(_cpu_per_chunk(arrivals))
        for _ in range(repeat):
            first, arrivals, reader = await _ours(server.api_base)
            assert first is not None
            readers.add(reader)
            first_events.append(first)
            paced_of.append(arrivals)
            paced_of.append((await _floor(server.api_base))[0])
        with tempfile.TemporaryDirectory() as folder:
            await _end_to_end(server.api_base, Path(folder))
            for _ in END_TO_END_RATES:
                for _ in range(repeat):
                    runs.append(await _end_to_end(server.api_base, Path(folder)))
                    arrivals = (await _floor(server.api_base))[0]
                    floor_cpu.append(arrivals[-1][2] - arrivals[0][2])
        records = server.stop()
    memory = _MemoryModel(run_text)
    in_process: dict[str, list[float]] = {"run": [], "run_without_view": [], "model_alone": []}
    with tempfile.TemporaryDirectory() as folder:
        await _whole_run(memory, Path(folder))  # warm-up
        for _ in range(3 * repeat):  # alternating, the best of each
            in_process["run"].append((await _whole_run(memory, Path(folder)))[0])
            in_process["run_without_view"].append(
                (await _whole_run(memory, Path(folder), view=False))[0]
            )
            in_process["model_alone"].append(await _memory_model_alone(memory))

    paced_first = 2 + len(PATHS) * (repeat + 1)  # index of the first paced request
    first_ours: list[float] = []
    first_chunk_ours: list[float] = []
    first_floor: list[float] = []
    paced_ours: list[float] = []
    paced_floor: list[float] = []
    for r in range(repeat):
        ours_i, floor_i = paced_first + 2 * r, paced_first + 2 * r + 1
        ours_arrivals, floor_arrivals = paced_of[2 * r], paced_of[2 * r + 1]
        first_ours.append(first_events[r] - records[ours_i]["first_byte_at"])
        first_chunk_ours.append(ours_arrivals[0][0] - records[ours_i]["first_byte_at"])
        first_floor.append(floor_arrivals[0][0] - records[floor_i]["first_byte_at"])
        paced_ours += _delays(ours_arrivals, records[ours_i]["chunk_sent_at"], len(text))
        paced_floor += _delays(floor_arrivals, records[floor_i]["chunk_sent_at"], len(text))
    cpu_us = {name: round(min(cpu[name]) * 1e6, 1) for name in PATHS}

    run_records = records[-2 * len(runs) :: 2]
    run_chunks = _chunks_of(run_text)
    end_to_end: dict[str, Any] = {}
    for k, rate in enumerate(END_TO_END_RATES):
        rows = []
        for i in range(k * repeat, (k + 1) * repeat):
            used, last, status = runs[i]
            sent = run_records[i]["chunk_sent_at"]
            rows.append(
                {
                    "cpu_us": used / run_chunks * 1e6,
                    "sent_rate": (len(sent) - 1) / (sent[-1] - sent[0]),
                    "lag_ms": (last - sent[-1]) * 1e3,
                    "status": status,
                }
            )
        best = min(rows, key=lambda row: row["cpu_us"])
        floor = min(floor_cpu[k * repeat : (k + 1) * repeat]) / max(1, run_chunks - 1) * 1e6
        end_to_end[f"{rate:.0f}"] = {
            "cpu_us_per_chunk": round(best["cpu_us"], 1),
            "floor_cpu_us_per_chunk": round(floor, 1),
            "over_floor_us": round(best["cpu_us"] - floor, 1),
            "core_share": round(best["cpu_us"] * rate / 1e6, 3),
            "sent_chunks_per_s": round(best["sent_rate"]),
            "last_event_after_last_chunk_ms": round(best["lag_ms"], 2),
            "status": best["status"],
        }
    memory_us = {
        name: round(min(values) / run_chunks * 1e6, 1) for name, values in in_process.items()
    }
    memory_us["ours"] = round(memory_us["run"] - memory_us["model_alone"], 1)
    memory_us["ours_without_view"] = round(
        memory_us["run_without_view"] - memory_us["model_alone"], 1
    )
    return {
        "chunks": chunks,
        "chunk_chars": CHUNK,
        "rate_chunks_per_s": RATE,
        "repeat": repeat,
        "text_chars": len(text),
        "text_actions_with_escapes": corpus.corpus_stats(run_text)["actions_with_escapes"],
        "ours_reader": "/".join(sorted(readers)),
        "first_call_s": round(first_call_s, 4),
        "first_event_ms": round(min(first_ours) * 1e3, 3),
        "first_chunk_ms": round(min(first_chunk_ours) * 1e3, 3),
        "floor_first_chunk_ms": round(min(first_floor) * 1e3, 3),
        "paced_latency_ms": {
            "ours_median": round(statistics.median(paced_ours) * 1e3, 3),
            "ours_p99": round(percentile(paced_ours, 0.99) * 1e3, 3),
            "floor_median": round(statistics.median(paced_floor) * 1e3, 3),
            "floor_p99": round(percentile(paced_floor, 0.99) * 1e3, 3),
            "overhead_median": round(
                (statistics.median(paced_ours) - statistics.median(paced_floor)) * 1e3, 3
            ),
        },
        "unpaced_cpu_us_per_chunk": cpu_us,
        "texts_per_chunk": {name: round(value, 3) for name, value in per_chunk.items()},
        "end_to_end_chunks": run_chunks,
        "end_to_end": end_to_end,
        "in_process_us_per_chunk": memory_us,
    }


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures and return them."""
    quick = os.environ.get("CORTEX_BENCH_QUICK") == "1"
    chunks, repeat = (200, 1) if quick else (2000, 3)
    started = time.perf_counter()
    load_litellm()
    import_s = time.perf_counter() - started
    result = anyio.run(_measure, chunks, repeat)
    result["dispatch"] = anyio.run(_dispatch, 4 if quick else 20, repeat)
    result["litellm_import_s"] = round(import_s, 3)
    result["quick"] = quick
    paced = result["paced_latency_ms"]
    cpu = result["unpaced_cpu_us_per_chunk"]
    texts = result["texts_per_chunk"]
    print(f"litellm import               {result['litellm_import_s']:8.3f} s")
    print(f"first call (warm-up)         {result['first_call_s']:8.3f} s")
    print(f"first byte -> first event    {result['first_event_ms']:8.3f} ms (ours)")
    print(f"first byte -> first chunk    {result['first_chunk_ms']:8.3f} ms (ours)")
    print(f"first byte -> first chunk    {result['floor_first_chunk_ms']:8.3f} ms (floor)")
    print(
        "unpaced CPU per chunk        "
        + ", ".join(f"{name} {cpu[name]:.1f} us" for name in PATHS)
        + f" (ours / floor x{cpu['ours'] / cpu['floor']:.2f}, "
        f"litellm's wrapper / ours x{cpu['litellm_wrapper'] / cpu['ours']:.1f}, "
        f"litellm's SDK path / ours x{cpu['litellm_sdk'] / cpu['ours']:.1f}); "
        f"ours read by {result['ours_reader']}"
    )
    print(
        "texts per chunk              "
        + ", ".join(f"{name} {value:.2f}" for name, value in texts.items())
        + " (1.00: one chunk per call)"
    )
    print(
        f"paced {RATE:.0f}/s latency median  ours {paced['ours_median']:.3f} ms, "
        f"floor {paced['floor_median']:.3f} ms, overhead {paced['overhead_median']:.3f} ms"
    )
    for rate, row in result["end_to_end"].items():
        print(
            f"end to end at {rate:>5}/s       {row['cpu_us_per_chunk']:.1f} us CPU per chunk "
            f"(the floor on the same stream {row['floor_cpu_us_per_chunk']:.1f} us, "
            f"+{row['over_floor_us']:.1f}; {row['core_share']:.0%} of a core; "
            f"sent at {row['sent_chunks_per_s']}/s, "
            f"last event {row['last_event_after_last_chunk_ms']:.1f} ms after the last chunk, "
            f"run {row['status']})"
        )
    dispatch = result["dispatch"]
    for protocol in ("xml", "tools"):
        row = dispatch[protocol]
        after_next = row.get("start_after_next_chunk_median_ms")
        next_chunk = "" if after_next is None else f"from the next chunk {after_next:.2f} ms; "
        print(
            f"{protocol:>5} call's last byte -> start  median {row['start_median_ms']:.2f} ms, "
            f"p99 {row['start_p99_ms']:.2f} ms (tool body {row['body_median_ms']:.2f} / "
            f"{row['body_p99_ms']:.2f} ms; {next_chunk}the stream ended "
            f"{row['stream_end_median_ms']:.0f} ms after it; "
            f"{row['calls']} calls at {DISPATCH_RATE:.0f} chunks/s)"
        )
    memory = result["in_process_us_per_chunk"]
    print(
        f"in process (no HTTP)         ours {memory['ours']:.1f} us CPU per chunk "
        f"(without the view {memory['ours_without_view']:.1f}; the whole run "
        f"{memory['run']:.1f} less the in-memory model's own loop {memory['model_alone']:.1f})"
    )
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

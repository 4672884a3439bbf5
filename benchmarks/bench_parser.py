"""The parser against a fair peer, and what it costs a turn (docs/benchmarks.md#parser).

Three figures, on the parser (pure Python: the package has no compiled build):

1. **Throughput against a fair peer.** One protocol document that looks like
   a model's output (prose with accented words, CJK and emoji; actions whose
   JSON bodies hold code, multi-line SQL and long documents, so about half of
   them have escapes such as ``\\n``, ``\\"`` and ``\\u00e9``; short bodies
   without any) is fed in chunks of 4, 16 and 256 characters to
   :class:`cortex_kernel.protocol.Parser` and, in the same process, to the
   peer: the standard library's :class:`xml.etree.ElementTree.XMLPullParser`
   fed the same chunks (the document wrapped in one root element), its
   events drained after every feed, each element cleared once used and the
   root emptied after every top-level element (the streaming idiom: memory
   stays bounded), and each action body decoded when its end tag arrives by
   the same C scanner of :mod:`json` our parser calls (no ``json.loads``
   wrapper). Both deliver start and end events and decoded bodies; ours also
   streams text as it arrives and validates each action. MB/s are per CPU
   second of this process.
2. **Dispatch latency**: the duration of the ``feed`` call that delivers an
   action's closing ``>``, which is when its ``action_parsed`` event is in
   the caller's hands (wall time, p50 and p99 over every chunk size); the
   peer's figure beside it (its ``feed`` + ``read_events`` + the body's
   decoding). Each is the pass with the lower p99 of as many passes as
   throughput has repetitions, ours and the peer's in turn: on a shared
   machine a neighbour taking the core in the middle of a ``feed`` only
   ever adds, as for throughput's best of N.
3. **The parser's share of a turn's CPU**: whole runs through the runtime
   (``Session.run``: redaction, parser, scheduler running the actions' tools,
   transcript, every event folded into the view's state) on the replay
   model, three turns of the same kind of text, tokens streamed as fast as
   the run reads them. The parser's own time in the run (its ``feed`` and
   ``close`` calls, timed where the runtime makes them, in wall time) and
   the CPU of parsing the very chunks the run fed, alone, are divided by
   the run's CPU; each figure is the best of the runs. A run on a real
   provider also reads HTTP (``bench llm``), so its share is lower still.

The goal (what users feel, not MB/s against C): the pure-Python parser at
least ``GOAL_RATIO`` of the peer at every chunk size, dispatch p99 at most
``GOAL_DISPATCH_P99_US``, with one type per event (each kind of event,
``text``, ``action_parsed``…, made by one class).

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    A ~100 KB document, one repetition, one timed run (for tests); default
    ~1 MB, best of 3, best of 5 runs.
``CORTEX_BENCH_SIZE``
    Document size in characters (overrides the above).
``CORTEX_BENCH_REPEAT``
    Repetitions per measurement; the best (fastest) one is reported.
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol, cast

import anyio

from cortex_kernel.bench import percentile
from cortex_kernel.protocol import IdAllocator, Parser

CHUNK_SIZES: Final = (4, 16, 256)
GOAL_RATIO: Final = 0.5  # pure Python / fair peer, at every chunk size
GOAL_DISPATCH_P99_US: Final = 50.0
# Throughput is timed in CPU seconds of this process: on a machine shared
# with other work, wall time measures the neighbours as much as the parser.
# Dispatch latency stays wall time (perf_counter): it is what a caller waits.
_CPU_CLOCK: Final = time.process_time


class ParserLike(Protocol):
    """What the benchmark measures: :class:`~cortex_kernel.protocol.Parser`'s two calls."""

    def feed(self, chunk: str) -> Sequence[Any]: ...

    def close(self) -> Sequence[Any]: ...


ParserFactory = Callable[[], ParserLike]


def _our_parser() -> ParserLike:
    return Parser(IdAllocator())


# -- the corpus ----------------------------------------------------------------

_PHRASE: Final = (
    "the data frame has missing values in the price column so I should look at "
    "rows where it is null first and then decide whether to drop or impute them "
    "using the median of each category because outliers would skew a mean and "
    "the report needs totals per region quarter and product line"
)
_WORDS: Final = tuple(_PHRASE.split())
# Words a model writes in other languages or with signs: two-byte, three-byte
# and four-byte UTF-8 (emoji), so MB are bytes and not characters.
_INTERNATIONAL: Final = (
    "café",
    "naïve",
    "résumé",
    "Zürich",
    "São Paulo",
    "größer",
    "données",
    "Ελλάδα",
    "Москва",
    "数据",
    "分析结果",
    "東京",
    "≈",
    "→",
    "½",
    "📈",
    "✅",
    "“quoted”",
)
_TOOLS_NO_ESCAPES: Final = ("search_docs", "read_csv")
_PYTHON_LINES: Final = (
    "import pandas as pd",
    'sales = pd.read_csv("data/sales.csv", parse_dates=["date"])',
    'by_region = sales.groupby("region")["units"].sum()',
    "print(by_region.sort_values(ascending=False).head(10))",
    'sales["price"] = sales["price"].fillna(sales["price"].median())',
    'for region, rows in sales.groupby("region"):',
    "    print(f\"{region}: {len(rows)} rows, {rows['units'].sum()} units\")",
    "totals = {k: round(v, 2) for k, v in by_region.items() if v > 0}",
    'title = "Ventes par région — T3"  # café, Zürich',
    'path = r"C:\\data\\exports\\q3.csv"',
    "    return value * 1.5 if value >= 10 else value",
)
_SQL_LINES: Final = (
    "SELECT region, product_line, SUM(units) AS units, AVG(price) AS price",
    "FROM sales",
    "WHERE date >= '2024-07-01' AND price > 0",
    "GROUP BY region, product_line",
    "ORDER BY units DESC",
    "LIMIT 20",
)


def _sentence(rng: random.Random, words: int) -> str:
    chosen = [
        rng.choice(_INTERNATIONAL) if rng.random() < 0.06 else rng.choice(_WORDS)
        for _ in range(words)
    ]
    text = " ".join(chosen)
    return text[0].upper() + text[1:] + rng.choice(".....:!?")


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(6, 18)) for _ in range(sentences))


def _report(rng: random.Random) -> str:
    """A markdown document a ``write_file`` action carries: a long string."""
    lines = [f"# Rapport {rng.randint(1, 99)} — données par région", ""]
    for _ in range(rng.randint(6, 30)):
        kind = rng.random()
        if kind < 0.5:
            lines.append(_paragraph(rng, rng.randint(1, 3)))
        elif kind < 0.8:
            lines.append(
                f"- **{rng.choice(_WORDS)}**: {rng.randint(1, 9999)} units ({_sentence(rng, 4)})"
            )
        else:
            lines.append(
                f'| {rng.choice(_INTERNATIONAL)} | {rng.random():.3f} | "{rng.choice(_WORDS)}" |'
            )
        lines.append("")
    return "\n".join(lines)


def _body(rng: random.Random, index: int) -> tuple[str, dict[str, Any]]:
    """A tool name and its parameters; about half hold a string with escapes."""
    kind = rng.random()
    if kind < 0.3:
        code = "\n".join(rng.choice(_PYTHON_LINES) for _ in range(rng.randint(3, 25)))
        return "run_python", {"code": code}
    if kind < 0.45:
        lines = _SQL_LINES[: rng.randint(2, len(_SQL_LINES))]
        query = ("\n" if rng.random() < 0.7 else " ").join(lines)
        return "run_sql", {"query": query, "database": "warehouse"}
    if kind < 0.55:
        return "write_file", {"path": f"reports/région_{index}.md", "content": _report(rng)}
    if kind < 0.75:
        return "search_docs", {"query": _sentence(rng, rng.randint(4, 12)), "top_k": 5}
    columns = rng.sample(("region", "units", "price", "date", "category", "product_line"), 3)
    return "read_csv", {
        "path": f"data/file_{index}.csv",
        "limit": rng.randint(1, 500),
        "columns": columns,
    }


def _action(rng: random.Random, index: int, mode: str | None = None) -> str:
    tool, parameters = _body(rng, index)
    depends = f' depends_on="a{index - 1}"' if index > 1 and rng.random() < 0.3 else ""
    mode = mode or rng.choice(("sync", "async", "async", "fire_and_forget"))
    # Most models write unicode as it is; some servers and fine-tunes escape it.
    body = json.dumps({"name": tool, "parameters": parameters}, ensure_ascii=rng.random() < 0.2)
    # The corpus is XML as well (for the peer): '<' and '&' only as JSON escapes.
    body = body.replace("<", "\\u003c").replace("&", "\\u0026")
    return (
        f'<action type="tool" id="a{index}" mode="{mode}" output_key="r{index}"{depends}>'
        f"{body}</action>"
    )


def build_document(size: int, seed: int = 7) -> str:
    """A well-formed protocol document of about ``size`` characters.

    Turns of: text, a thought with prose and one to three embedded actions,
    and a response (sometimes ``final="false"``). Valid XML as well, so the
    standard library can parse it wrapped in a root element.
    """
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    index = 0
    while total < size:
        turn = [_paragraph(rng, 1), "\n<thought>", _paragraph(rng, rng.randint(2, 5))]
        for _ in range(rng.randint(1, 3)):
            index += 1
            turn.append(" " + _action(rng, index) + " ")
            turn.append(_paragraph(rng, rng.randint(1, 3)))
        final = "true" if rng.random() < 0.5 else "false"
        turn.append(f'</thought>\n<response final="{final}">')
        turn.append(_paragraph(rng, rng.randint(2, 6)))
        turn.append("</response>\n")
        chunk = "".join(turn)
        parts.append(chunk)
        total += len(chunk)
    return "".join(parts)


def build_turns(turns: int = 3, seed: int = 11, chars: int = 0) -> list[str]:
    """The model's turns of one run: the same kind of text as :func:`build_document`.

    Each turn thinks, in thoughts that start one to three async actions each,
    until it holds ``chars`` characters (one thought at least); then every
    turn but the last ends with a sync action (the runtime ends the turn
    there, runs it and asks again) and the last one with a final response.
    """
    rng = random.Random(seed)
    out: list[str] = []
    index = 0
    for number in range(turns):
        parts: list[str] = []
        while not parts or sum(map(len, parts)) < chars:
            parts += ["<thought>", _paragraph(rng, rng.randint(2, 5))]
            for _ in range(rng.randint(1, 3)):
                index += 1
                parts += [
                    " ",
                    _action(rng, index, "async"),
                    " ",
                    _paragraph(rng, rng.randint(1, 2)),
                ]
            parts.append("</thought>\n")
        if number == turns - 1:
            parts += ['<response final="true">', _paragraph(rng, rng.randint(3, 6)), "</response>"]
        else:
            index += 1
            parts.append(_action(rng, index, "sync"))
        out.append("".join(parts))
    return out


def register_tools(tools: Any) -> Any:
    """Register the corpus's tools on ``tools``, a ``ToolRegistry``; return it."""
    for tool in (run_python, run_sql, write_file, search_docs, read_csv):
        tools.register(tool)
    return tools


def corpus_stats(document: str) -> dict[str, Any]:
    """What the document holds: actions, escapes, long strings, non-ASCII."""
    bodies = [
        part.split(">", 1)[1].split("</action>", 1)[0] for part in document.split("<action ")[1:]
    ]
    return {
        "actions": len(bodies),
        "actions_with_escapes": sum("\\" in body for body in bodies),
        "longest_body_chars": max((len(body) for body in bodies), default=0),
        "non_ascii_share": round(sum(not c.isascii() for c in document) / max(1, len(document)), 4),
    }


# -- the peer --------------------------------------------------------------------

# The C scanner of a default decoder and json's whitespace: what our parser
# calls for a strict body (cortex_kernel.protocol._actions), so the peer
# pays for decoding exactly what we do and not json.loads' Python layers.
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]  # typeshed: the class, in truth its instance
)
_SPACE: Final = re.compile(r"[ \t\n\r]*").match  # json.decoder.WHITESPACE


def _decode(text: str) -> Any:
    """``text`` as JSON (strict, surrounding whitespace allowed), by the C scanner."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        value, end = _SCAN(text, _SPACE(text, 0).end())  # type: ignore[union-attr]  # `*` matches
    if end != len(text) and _SPACE(text, end).end() != len(text):  # type: ignore[union-attr]
        raise ValueError("trailing data")
    return value


class PullPeer:
    """The fair peer as a :class:`ParserLike`: XMLPullParser, cleared, bodies decoded.

    Returns ``(kind, element)`` pairs, with ``("action_parsed", body)`` after
    an action's end: what the throughput loop counts and the dispatch pass
    times. The throughput figure uses :func:`_run_peer`, the same steps
    written out without the calls this class adds.
    """

    def __init__(self) -> None:
        self._parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
        self._parser.feed("<root>")
        self._root = cast("tuple[str, ET.Element]", next(iter(self._parser.read_events())))[1]

    def feed(self, chunk: str) -> list[Any]:
        self._parser.feed(chunk)
        return self._drain()

    def close(self) -> list[Any]:
        self._parser.feed("</root>")
        self._parser.close()
        return self._drain()

    def _drain(self) -> list[Any]:
        out: list[Any] = []
        for event in self._parser.read_events():
            kind, element = cast("tuple[str, ET.Element]", event)
            out.append(event)
            if kind == "end":
                tag = element.tag
                if tag == "action":
                    out.append(("action_parsed", _decode(element.text or "")))
                element.clear()
                if tag != "action":
                    self._root.clear()
        return out


def _run_peer(chunks: list[str]) -> tuple[float, int]:
    """CPU seconds of the peer over ``chunks``, and its event count."""
    clock = _CPU_CLOCK
    count = 0
    started = clock()
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    feed = parser.feed
    read_events = parser.read_events
    decode = _decode
    feed("<root>")
    root = cast("tuple[str, ET.Element]", next(iter(read_events())))[1]
    for chunk in chunks:
        feed(chunk)
        for event in read_events():
            count += 1
            kind, element = cast("tuple[str, ET.Element]", event)
            if kind == "end":
                tag = element.tag
                if tag == "action":
                    decode(element.text or "")
                element.clear()
                if tag != "action":  # a thought or a response: done with the tree so far
                    root.clear()
    feed("</root>")
    parser.close()
    count += sum(1 for _ in read_events())
    return clock() - started, count


# -- ours ------------------------------------------------------------------------


def _run_parser(make_parser: ParserFactory, chunks: list[str]) -> tuple[float, int]:
    """CPU seconds of a parser over ``chunks``, and its event count."""
    clock = _CPU_CLOCK
    count = 0
    started = clock()
    parser = make_parser()
    feed = parser.feed
    for chunk in chunks:
        for _ in feed(chunk):
            count += 1
    count += len(parser.close())
    return clock() - started, count


def _is_action(event: Any) -> bool:
    kind = event[0] if type(event) is tuple else getattr(event, "type", None)
    return kind == "action_parsed"


def dispatch_latencies(make_parser: Callable[[], Any], chunks: list[str]) -> list[float]:
    """Seconds of each ``feed`` call that returned an ``action_parsed``.

    A separate pass, so that the clock calls do not weigh on the throughput
    figures.
    """
    parser = make_parser()
    feed = parser.feed
    clock = time.perf_counter
    latencies: list[float] = []
    for chunk in chunks:
        before = clock()
        events = feed(chunk)
        after = clock()
        latencies.extend(after - before for e in events if _is_action(e))
    parser.close()
    return latencies


def event_types(make_parser: ParserFactory, document: str) -> dict[str, list[str]]:
    """Per kind of event a parser makes for ``document`` (fed in chunks of 16), its classes."""
    parser = make_parser()
    events = [event for chunk in _chunks(document, 16) for event in parser.feed(chunk)]
    kinds: dict[str, set[str]] = {}
    for event in [*events, *parser.close()]:
        kinds.setdefault(str(event.type), set()).add(type(event).__name__)
    return {kind: sorted(names) for kind, names in sorted(kinds.items())}


def _chunks(document: str, size: int) -> list[str]:
    return [document[i : i + size] for i in range(0, len(document), size)]


def measure(make_parser: ParserFactory = _our_parser, *, size: int, repeat: int) -> dict[str, Any]:
    """Throughput against the peer, dispatch latency and event types of one parser.

    Prints its table and returns the figures, with ``meets_goal`` for this
    parser (the tests give it a parser known to be fast and one known to be
    slow).
    """
    document = build_document(size)
    megabytes = len(document.encode("utf-8")) / 1e6
    stats = corpus_stats(document)
    results: dict[str, Any] = {
        "document_chars": len(document),
        "document_mb": round(megabytes, 3),
        **stats,
        "repeat": repeat,
        "chunks": {},
    }
    print(
        f"document: {len(document):,} chars, {megabytes:.2f} MB, {stats['actions']} actions "
        f"({stats['actions_with_escapes']} with escapes, longest body "
        f"{stats['longest_body_chars']:,} chars), {stats['non_ascii_share']:.1%} non-ASCII; "
        f"best of {repeat}"
    )
    print(f"{'chunk':>6} {'ours MB/s':>10} {'peer MB/s':>10} {'ours/peer':>10}")
    chunked = [_chunks(document, size_chars) for size_chars in CHUNK_SIZES]
    for size_chars, chunks in zip(CHUNK_SIZES, chunked, strict=True):
        ours_best = peer_best = float("inf")
        for _ in range(repeat):  # alternating, the best of each
            peer_best = min(peer_best, _run_peer(chunks)[0])
            ours_best = min(ours_best, _run_parser(make_parser, chunks)[0])
        ours_mbps = megabytes / ours_best
        peer_mbps = megabytes / peer_best
        ratio = ours_mbps / peer_mbps
        results["chunks"][str(size_chars)] = {
            "ours_mb_s": round(ours_mbps, 2),
            "peer_mb_s": round(peer_mbps, 2),
            "ratio": round(ratio, 3),
        }
        print(f"{size_chars:>6} {ours_mbps:>10.2f} {peer_mbps:>10.2f} {ratio:>10.2f}")
    results["min_ratio"] = min(c["ratio"] for c in results["chunks"].values())
    ours_passes: list[dict[str, Any]] = []
    peer_passes: list[dict[str, Any]] = []
    for _ in range(repeat):  # in turn, as for throughput
        ours_passes.append(dispatch_pass(make_parser, chunked))
        peer_passes.append(dispatch_pass(PullPeer, chunked))
    results["dispatch_latency_us"] = best_pass(ours_passes)
    results["peer_dispatch_latency_us"] = best_pass(peer_passes)
    types = event_types(make_parser, document)
    results["event_types"] = types
    results["one_type_per_event"] = all(len(names) == 1 for names in types.values())
    ours, peer = results["dispatch_latency_us"], results["peer_dispatch_latency_us"]
    print(
        f"dispatch (the feed call delivering an action's '>', best of {repeat} passes by p99): "
        f"ours p50 {ours['p50']:.1f} µs, p99 {ours['p99']:.1f} µs "
        f"(p99 of each pass: {', '.join(f'{p:.1f}' for p in ours['p99_of_passes'])}); "
        f"peer p50 {peer['p50']:.1f} µs, p99 {peer['p99']:.1f} µs"
    )
    print(
        "event types: "
        + ", ".join(f"{kind} {'/'.join(names)}" for kind, names in types.items())
        + ("" if results["one_type_per_event"] else " (a kind with several classes)")
    )
    results["meets_goal"] = (
        results["min_ratio"] >= GOAL_RATIO
        and ours["samples"] > 0
        and ours["p99"] <= GOAL_DISPATCH_P99_US
        and results["one_type_per_event"]
    )
    return results


def dispatch_pass(make_parser: Callable[[], Any], chunked: list[list[str]]) -> dict[str, Any]:
    """p50, p99 and sample count of one dispatch pass over every chunk size."""
    latencies: list[float] = []
    for chunks in chunked:
        latencies += dispatch_latencies(make_parser, chunks)
    return _latency_figures(latencies)


def best_pass(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """The pass with the lowest p99, and every pass's p99 beside it."""
    best = dict(min(passes, key=lambda figures: float(figures["p99"])))
    best["p99_of_passes"] = [figures["p99"] for figures in passes]
    return best


def _latency_figures(latencies: list[float]) -> dict[str, Any]:
    return {
        "p50": round(percentile(latencies, 0.50) * 1e6, 2),
        "p99": round(percentile(latencies, 0.99) * 1e6, 2),
        "samples": len(latencies),
    }


# -- a turn's CPU ----------------------------------------------------------------


class _TimedParser:
    """The runtime's parser, its calls timed and its input kept (a bench-only stand-in)."""

    seconds: ClassVar[float] = 0.0
    chunks: ClassVar[list[list[str]]] = []

    def __init__(self, ids: IdAllocator | None = None) -> None:
        self._parser = Parser(ids)
        self._chunks: list[str] = []
        _TimedParser.chunks.append(self._chunks)

    def feed(self, text: str) -> list[Any]:
        self._chunks.append(text)
        started = time.perf_counter()
        events = self._parser.feed(text)
        _TimedParser.seconds += time.perf_counter() - started
        return events

    def close(self) -> list[Any]:
        started = time.perf_counter()
        events = self._parser.close()
        _TimedParser.seconds += time.perf_counter() - started
        return events


def run_python(code: str) -> str:
    """Run Python code (the bench's tools return at once: the figure is the run's own cost)."""
    return f"ran {len(code)} characters"


def run_sql(query: str, database: str = "main") -> str:
    """Run a SQL query."""
    return f"10 rows from {database}"


def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {len(content)} characters to {path}"


def search_docs(query: str, top_k: int = 5) -> list[str]:
    """Search the documentation."""
    return [f"result {i}" for i in range(top_k)]


def read_csv(path: str, limit: int = 100, columns: list[str] | None = None) -> dict[str, Any]:
    """Read a CSV file."""
    return {"path": path, "rows": limit, "columns": columns or []}


async def _one_run(replay: Path, folder: Path) -> tuple[float, float, str]:
    """One whole run: (process CPU s, parser s inside it, status)."""
    from cortex_kernel.agent import build_session
    from cortex_kernel.jupyter.viewstate import RunState
    from cortex_kernel.runtime.tools import ToolRegistry

    tools = register_tools(ToolRegistry())
    session = build_session(f"replay:{replay}", tools=tools, transcript_dir=folder)
    state = RunState()
    _TimedParser.seconds = 0.0
    started = _CPU_CLOCK()
    result = await session.run("Summarise the sales by region.", on_event=state.apply)
    cpu = _CPU_CLOCK() - started
    await session.aclose()
    return cpu, _TimedParser.seconds, result.status


def turn_share(runs: int) -> dict[str, Any]:
    """The parser's share of the CPU of whole runs on the replay model (best of ``runs``)."""
    import cortex_kernel.runtime.loop as loop_module

    turns = build_turns(3, chars=2500)
    saved = getattr(loop_module, "Parser")  # noqa: B009
    setattr(loop_module, "Parser", _TimedParser)  # noqa: B010 (a bench-only switch)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            replay = Path(tmp) / "turns.jsonl"
            replay.write_text("".join(json.dumps({"content": t}) + "\n" for t in turns))
            anyio.run(_one_run, replay, Path(tmp))  # warm-up: imports, first-call caches
            _TimedParser.chunks = []
            measured = [anyio.run(_one_run, replay, Path(tmp)) for _ in range(runs)]
    finally:
        setattr(loop_module, "Parser", saved)  # noqa: B010
    fed = _TimedParser.chunks[: len(_TimedParser.chunks) // runs]  # one run's turns
    alone = min(_parse_alone(fed) for _ in range(max(3, runs)))
    # Each the best of the runs: the parser's time in a run is wall time
    # (two perf_counter calls per feed cost far less than a CPU clock's), and
    # a neighbour taking the core in the middle of a feed only ever adds.
    cpu = min(run[0] for run in measured)
    in_run = min(run[1] for run in measured)
    status = "ok" if all(run[2] == "ok" for run in measured) else measured[0][2]
    chunks = sum(len(turn) for turn in fed)
    chars = sum(len(c) for turn in fed for c in turn)
    figures = {
        "turns": len(fed),
        "chunks": chunks,
        "chars_per_chunk": round(chars / max(1, chunks), 1),
        "actions": sum(t.count("</action>") for t in turns),
        "run_cpu_ms": round(cpu * 1e3, 2),
        "run_cpu_us_per_chunk": round(cpu / max(1, chunks) * 1e6, 1),
        "parser_in_run_ms": round(in_run * 1e3, 2),
        "parser_alone_ms": round(alone * 1e3, 2),
        "share_in_run": round(in_run / cpu, 3),
        "share_alone": round(alone / cpu, 3),
        "runs": runs,
        "status": status,
    }
    print(
        f"a run on the replay model ({figures['turns']} turns, {figures['actions']} actions, "
        f"{chunks:,} chunks of {figures['chars_per_chunk']} chars, best of {runs}): "
        f"{figures['run_cpu_ms']:.1f} ms CPU ({figures['run_cpu_us_per_chunk']:.1f} µs a chunk), "
        f"the parser {figures['parser_in_run_ms']:.1f} ms in it ({figures['share_in_run']:.1%}), "
        f"{figures['parser_alone_ms']:.1f} ms alone ({figures['share_alone']:.1%}); run {status}"
    )
    return figures


def _parse_alone(turns: Iterable[list[str]]) -> float:
    """CPU seconds of parsing the chunks a run fed, turn by turn, with nothing else."""
    started = _CPU_CLOCK()
    ids = IdAllocator()
    for chunks in turns:
        parser = Parser(ids)
        for chunk in chunks:
            parser.feed(chunk)
        parser.close()
    return _CPU_CLOCK() - started


# -- the whole benchmark -----------------------------------------------------------


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures and return them."""
    quick = os.environ.get("CORTEX_BENCH_QUICK", "") not in ("", "0")
    size = int(os.environ.get("CORTEX_BENCH_SIZE", 100_000 if quick else 1_000_000))
    repeat = max(1, int(os.environ.get("CORTEX_BENCH_REPEAT", 1 if quick else 3)))
    results = measure(size=size, repeat=repeat)
    results["turn"] = turn_share(1 if quick else 5)
    results["goal"] = {
        "ratio": GOAL_RATIO,
        "dispatch_p99_us": GOAL_DISPATCH_P99_US,
        "one_type_per_event": True,
    }
    verdict = "met" if results["meets_goal"] else "not met"
    print(
        f"goal: >= {GOAL_RATIO} x the peer at every chunk size "
        f"(min {results['min_ratio']:.2f}), dispatch p99 <= {GOAL_DISPATCH_P99_US:.0f} µs "
        f"({results['dispatch_latency_us']['p99']:.1f}), one type per event "
        f"({'yes' if results['one_type_per_event'] else 'no'}): {verdict}"
    )
    return results


if __name__ == "__main__":  # pragma: no cover - by hand
    main()

"""Parser throughput against the standard library's XMLPullParser (docs/benchmarks.md#parser).

Builds a well-formed protocol document (thoughts with embedded actions,
responses, some text between them), feeds it in chunks of 4, 16 and 256
characters to :class:`cortex_kernel.protocol.Parser` and, in the same
process, to two baselines built on expat:

- ``pull``: :class:`xml.etree.ElementTree.XMLPullParser` (the document
  wrapped in one root element, ``read_events()`` drained after every feed);
- ``pull_json``: the same, plus ``json.loads`` of each action's body when
  its end tag arrives — a pull parser doing the work ours does (the contract's
  baseline; goal: ours / pull_json >= 1.0 at every chunk size).

The parser measured first is the one imported: the compiled build (mypyc,
see ``hatch_build.py``) when it is installed or first on ``sys.path``, else
the pure-Python modules; ``build`` in the results says which. When that is
the pure-Python one and a compiled build of the same sources sits in
``build/compiled`` (``make bench`` and ``make test`` build it;
``CORTEX_COMPILED_DIR`` names another), the same measurement runs again on
it, in a child process with it first on ``sys.path``, under ``compiled``.
The goal is judged on the build a wheel ships (``goal_build``): the compiled
one when there is one, as a C compiler makes it (docs/protocol.md#streaming-guarantees item 5).

It reports MB/s (per CPU second of this process) for the three and both
ratios per chunk size, and the
dispatch latency: the duration of the ``feed`` call that delivers an
action's closing ``>``, which is when its ``action_parsed`` event is in the
caller's hands (p50 and p99, µs; goal: p99 < 20 µs).

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    A ~100 KB document and one repetition (for tests); default ~1 MB, best of 3.
``CORTEX_BENCH_SIZE``
    Document size in characters (overrides the above).
``CORTEX_BENCH_REPEAT``
    Repetitions per measurement; the best (fastest) one is reported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, cast

import cortex_kernel.protocol.parser as parser_module
from cortex_kernel.bench import percentile
from cortex_kernel.protocol import ActionParsed, IdAllocator, Parser

CHUNK_SIZES = (4, 16, 256)
GOAL_RATIO = 1.0  # ours / (XMLPullParser + json.loads): docs/benchmarks.md#parser
GOAL_DISPATCH_P99_US = 20.0
# Throughput is timed in CPU seconds of this process: on a machine shared
# with other work, wall time measures the neighbours as much as the parser.
# Dispatch latency stays wall time (perf_counter): it is what a caller waits.
_CPU_CLOCK = time.process_time

_PHRASE = (
    "the data frame has missing values in the price column so I should look at "
    "rows where it is null first and then decide whether to drop or impute them "
    "using the median of each category because outliers would skew a mean"
)
_WORDS = tuple(_PHRASE.split())
_TOOLS = ("read_csv", "describe", "plot_histogram", "run_sql", "search_docs")


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(6, 18)) for _ in range(sentences))


def _action(rng: random.Random, index: int) -> str:
    tool = rng.choice(_TOOLS)
    depends = f' depends_on="a{index - 1}"' if index > 1 and rng.random() < 0.3 else ""
    mode = rng.choice(("sync", "async", "async", "fire_and_forget"))
    return (
        f'<action type="tool" id="a{index}" mode="{mode}" output_key="r{index}"{depends}>'
        f'{{"name": "{tool}", "parameters": {{"path": "data/file_{index}.csv", '
        f'"limit": {rng.randint(1, 500)}, "note": "{_sentence(rng, 5)}"}}}}'
        "</action>"
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


def _chunks(document: str, size: int) -> list[str]:
    return [document[i : i + size] for i in range(0, len(document), size)]


def _run_ours(chunks: list[str]) -> tuple[float, int]:
    clock = _CPU_CLOCK
    count = 0
    started = clock()
    parser = Parser(IdAllocator())
    feed = parser.feed
    for chunk in chunks:
        for _ in feed(chunk):
            count += 1
    count += len(parser.close())
    return clock() - started, count


def _run_stdlib(chunks: list[str]) -> tuple[float, int]:
    clock = _CPU_CLOCK
    count = 0
    started = clock()
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    feed = parser.feed
    read_events = parser.read_events
    feed("<root>")
    for chunk in chunks:
        feed(chunk)
        for _ in read_events():
            count += 1
    feed("</root>")
    parser.close()
    for _ in read_events():
        count += 1
    return clock() - started, count


def _run_stdlib_json(chunks: list[str]) -> tuple[float, int]:
    """The XMLPullParser baseline plus ``json.loads`` of each action body at its end.

    Written out beside :func:`_run_stdlib` rather than sharing a loop with a
    per-event hook: a call per chunk would slow the bare baseline by a
    quarter at chunks of 4 and flatter our ratio.
    """
    clock = _CPU_CLOCK
    count = 0
    started = clock()
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    feed = parser.feed
    read_events = parser.read_events
    loads = json.loads
    feed("<root>")
    for chunk in chunks:
        feed(chunk)
        for event in read_events():
            count += 1
            kind, element = cast("tuple[str, ET.Element]", event)  # start/end events only
            if kind == "end" and element.tag == "action":
                loads(element.text or "")
    feed("</root>")
    parser.close()
    for _ in read_events():
        count += 1
    return clock() - started, count


def _dispatch_latencies(chunks: list[str]) -> list[float]:
    """Seconds of each ``feed`` call that returned an ``action_parsed``.

    Measured in a separate pass so that the clock calls do not weigh on
    the throughput figures.
    """
    parser = Parser(IdAllocator())
    feed = parser.feed
    clock = time.perf_counter
    latencies: list[float] = []
    for chunk in chunks:
        before = clock()
        events = feed(chunk)
        after = clock()
        latencies.extend(after - before for e in events if type(e) is ActionParsed)
    parser.close()
    return latencies


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures and return them."""
    results = _measure()
    if results["build"] == "pure":
        compiled, why_not = _compiled_build()
        if compiled is None:
            print(f"compiled build: not measured ({why_not})")
            results["compiled"] = None
        else:
            print(f"compiled build ({compiled}):", flush=True)
            results["compiled"] = _measure_in(compiled)
    shipped = results.get("compiled") or results
    results["goal_build"] = shipped["build"]
    results["meets_goal"] = (
        shipped["min_ratio_json"] >= GOAL_RATIO and shipped["dispatch_latency_us"]["meets_goal"]
    )
    met = "met" if results["meets_goal"] else "not met"
    print(
        f"goal, on the {shipped['build']} build (what a wheel ships): "
        f"ours / (XMLPullParser + json.loads) >= {GOAL_RATIO} at every chunk size "
        f"(min {shipped['min_ratio_json']:.2f}), dispatch p99 < {GOAL_DISPATCH_P99_US:.0f} µs "
        f"({shipped['dispatch_latency_us']['p99']:.1f}): {met}"
    )
    return results


def _compiled_build() -> tuple[Path | None, str]:
    """The compiled copy of the package to measure, or why there is none.

    ``CORTEX_COMPILED_DIR``, else ``build/compiled`` of the source checkout;
    it counts only when built from the sources as they are now (the hash
    ``hatch_build.py`` keeps beside it), so a stale build is never reported.
    """
    root = Path(__file__).resolve().parents[1]
    env = os.environ.get("CORTEX_COMPILED_DIR", "")
    out = Path(env).resolve() if env else root / "build" / "compiled"
    stamp = out / ".compiled-from"
    hook = root / "hatch_build.py"
    if not stamp.is_file() or not hook.is_file():
        return None, f"none at {out}; `make bench` builds it when a C compiler is present"
    spec = importlib.util.spec_from_file_location("cortex_hatch_build", hook)
    if spec is None or spec.loader is None:  # pragma: no cover - a file that is there
        return None, f"cannot load {hook}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if stamp.read_text() != module.source_hash(root):
        return None, f"{out} was built from other sources: python hatch_build.py --out {out}"
    return out, ""


def _measure_in(compiled: Path) -> dict[str, Any]:
    """:func:`_measure` in a child process with ``compiled`` first on ``sys.path``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(compiled), env.get("PYTHONPATH"))))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "parser.json"
        child = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--measure-to", str(out)],
            env=env,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        print(child.stdout, end="")  # its table, through this process's stdout
        result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    if result["build"] != "mypyc":
        raise RuntimeError(f"{compiled}: the parser imported there is not compiled")
    return result


def _measure() -> dict[str, Any]:
    """Measure the parser imported here; print its figures and return them."""
    quick = os.environ.get("CORTEX_BENCH_QUICK", "") not in ("", "0")
    size = int(os.environ.get("CORTEX_BENCH_SIZE", 100_000 if quick else 1_000_000))
    repeat = max(1, int(os.environ.get("CORTEX_BENCH_REPEAT", 1 if quick else 3)))
    document = build_document(size)
    megabytes = len(document.encode("utf-8")) / 1e6
    compiled = not (parser_module.__file__ or "").endswith(".py")
    results: dict[str, Any] = {
        "build": "mypyc" if compiled else "pure",
        "document_chars": len(document),
        "document_mb": round(megabytes, 3),
        "actions": document.count("</action>"),
        "repeat": repeat,
        "goal_ratio": GOAL_RATIO,
        "goal_dispatch_p99_us": GOAL_DISPATCH_P99_US,
        "chunks": {},
    }
    all_latencies: list[float] = []
    print(
        f"document: {len(document):,} chars, {results['actions']} actions, best of {repeat}; "
        f"parser: {results['build']}"
    )
    print(
        f"{'chunk':>6} {'ours MB/s':>10} {'pull MB/s':>10} {'ratio':>6} "
        f"{'pull+json MB/s':>15} {'ratio':>6}"
    )
    for size_chars in CHUNK_SIZES:
        chunks = _chunks(document, size_chars)
        ours_best = pull_best = json_best = float("inf")
        for _ in range(repeat):
            pull_best = min(pull_best, _run_stdlib(chunks)[0])
            json_best = min(json_best, _run_stdlib_json(chunks)[0])
            ours_best = min(ours_best, _run_ours(chunks)[0])
        all_latencies.extend(_dispatch_latencies(chunks))
        ours_mbps = megabytes / ours_best
        pull_mbps = megabytes / pull_best
        json_mbps = megabytes / json_best
        ratio = ours_mbps / pull_mbps
        ratio_json = ours_mbps / json_mbps
        results["chunks"][str(size_chars)] = {
            "ours_mb_s": round(ours_mbps, 2),
            "stdlib_mb_s": round(pull_mbps, 2),
            "ratio": round(ratio, 3),
            "stdlib_json_mb_s": round(json_mbps, 2),
            "ratio_json": round(ratio_json, 3),
            "meets_goal": ratio_json >= GOAL_RATIO,
        }
        print(
            f"{size_chars:>6} {ours_mbps:>10.2f} {pull_mbps:>10.2f} {ratio:>6.2f} "
            f"{json_mbps:>15.2f} {ratio_json:>6.2f}"
        )
    p50 = percentile(all_latencies, 0.50) * 1e6
    p99 = percentile(all_latencies, 0.99) * 1e6
    results["dispatch_latency_us"] = {
        "p50": round(p50, 2),
        "p99": round(p99, 2),
        "samples": len(all_latencies),
    }
    results["dispatch_latency_us"]["meets_goal"] = p99 < GOAL_DISPATCH_P99_US
    results["min_ratio"] = min(c["ratio"] for c in results["chunks"].values())
    results["min_ratio_json"] = min(c["ratio_json"] for c in results["chunks"].values())
    print(f"dispatch latency (feed call delivering '>'): p50 {p50:.1f} µs, p99 {p99:.1f} µs")
    return results


if __name__ == "__main__":  # pragma: no cover - run by _measure_in, or by hand
    if sys.argv[1:2] == ["--measure-to"]:
        Path(sys.argv[2]).write_text(json.dumps(_measure()), encoding="utf-8")
    else:
        main()

"""What the protocol grammar (``--constrain``) costs, for 4, 40 and 200 tools.

1. **Size and build** — the GBNF text of
   :func:`cortex_kernel.llm.grammar.protocol_grammar` for a session with N
   tools (each with the shapes pydantic writes: required and optional
   parameters, an enum, an array, an optional nested object): characters,
   rule lines, the rules llama.cpp expands it into, and the time to build
   it and to check it (:func:`cortex_kernel.llm.gbnf.check`, done once per
   distinct tool set before it is sent; p50).
2. **Stacks per character** — llama.cpp's sampler checks every candidate
   token against every live stack of the grammar, so the stacks alive at
   each character of a typical turn (two async tool calls, the second in a
   thought, and a progress note) are its cost per token, independent of
   the model.
   Counted with the tests' recognizer, which keeps llama.cpp's stacks
   (``tests/llm/gbnf.py``): max and mean, and that recognizer's own time
   per character in Python (a relative figure; llama.cpp's is native).
3. **A real server** (when one answers): the same prompt to a llama.cpp or
   llama-cpp-python server with and without the grammar (4 tools, temperature
   0, ``max_tokens`` 160): completion tokens, seconds from the first to the
   last token, tokens/s, and the slowdown the grammar causes. The endpoint
   is ``CORTEX_BENCH_LOCAL_MODEL`` (``http://127.0.0.1:8377/v1``), else the
   one ``make local-model`` wrote to
   ``~/.cache/cortex-kernel/local-model/server.port``; ``null`` with the
   reason when none answers. Nothing is started here.

Environment
-----------
``CORTEX_BENCH_QUICK=1``
    One build per size and no real server (for tests); default best of 5.
``CORTEX_BENCH_LOCAL_MODEL``
    The ``api_base`` of a server to measure (``off``: none).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cortex_kernel.bench import percentile
from cortex_kernel.llm.gbnf import check, parse
from cortex_kernel.llm.grammar import protocol_grammar
from cortex_kernel.llm.prompt import ProtocolPrompt
from cortex_kernel.runtime.ports import PromptContext
from tests.llm.gbnf import Matcher, stack_counts

SIZES = (4, 40, 200)
PORT_FILE = Path.home() / ".cache" / "cortex-kernel" / "local-model" / "server.port"
QUESTION = "What is the population of Paris and of Lyon? Use the tools."


def tool(i: int) -> dict[str, Any]:
    """Tool ``i``: the parameter shapes a notebook tool's signature gives, its own names."""
    names = ("population", "weather", "search", "convert", "lookup", "fetch", "rank", "plot")
    return {
        "name": f"{names[i % len(names)]}_{i}" if i >= len(names) else names[i],
        "description": f"tool number {i}",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "a city"},
                "limit": {"type": "integer", "default": 10},
                "unit": {"enum": ["metric", "imperial", f"unit{i}"], "default": "metric"},
                f"option_{i}": {"type": "boolean", "default": False},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                "near": {
                    "anyOf": [
                        {
                            "type": "object",
                            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                            "required": ["lat", "lon"],
                        },
                        {"type": "null"},
                    ],
                    "default": None,
                },
            },
            "required": ["city"],
        },
    }


def context(count: int) -> PromptContext:
    return PromptContext(
        tools=[tool(i) for i in range(count)],
        internal_actions=["list_context_feeds", "list_variables", "set_variable"],
    )


def sample_turn(count: int) -> str:
    """A turn of the kind small models write: a call, another in a thought, a progress note.

    (Not the answer: the grammar keeps it for the turn the results open.)
    """
    first, second = tool(0)["name"], tool(count - 1)["name"]
    return (
        f'<action type="tool" mode="async" id="p" output_key="paris">{{"name": "{first}", '
        '"parameters": {"city": "Paris", "unit": "metric"}}</action>\n'
        "<thought>Lyon at once too.\n"
        f'<action type="tool" mode="async" id="l" output_key="lyon">{{"name": "{second}", '
        '"parameters": {"city": "Lyon", "limit": 3, "near": {"lat": 45.7, "lon": 4.8}}}</action>'
        '\nThen I answer.</thought>\n<response final="false">Paris: $paris, Lyon: $lyon.</response>'
    )


def _timed(repeat: int, work: Any) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return percentile(times, 0.5)


def measure_size(count: int, repeat: int) -> dict[str, Any]:
    offered = context(count)
    grammar = protocol_grammar(offered)
    problem = check(grammar)
    if problem is not None:
        raise AssertionError(f"the grammar for {count} tools would not load: {problem}")
    matcher = Matcher(grammar)
    turn = sample_turn(count)
    started = time.perf_counter()
    counts = list(stack_counts(matcher, turn))
    per_char = (time.perf_counter() - started) / len(turn)
    return {
        "grammar_chars": len(grammar),
        "grammar_rules": grammar.count("\n"),
        "llama_cpp_rules": len(parse(grammar).rules),
        "build_ms": round(_timed(repeat, lambda: protocol_grammar(offered)) * 1000, 2),
        "check_ms": round(_timed(repeat, lambda: check(grammar)) * 1000, 2),
        "stacks_max": max(counts),
        "stacks_mean": round(statistics.mean(counts), 2),
        "recognizer_us_per_char": round(per_char * 1e6, 1),
    }


# -- a real server ------------------------------------------------------------------------


def local_api_base() -> str | None:
    configured = os.environ.get("CORTEX_BENCH_LOCAL_MODEL", "").strip()
    if configured:
        return None if configured == "off" else configured.rstrip("/")
    try:
        port = int(PORT_FILE.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    return f"http://127.0.0.1:{port}/v1"


def _stream(client: Any, api_base: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed completion: its text, token count and timings."""
    started = time.perf_counter()
    first: float | None = None
    last = started
    parts: list[str] = []
    usage: dict[str, Any] = {}
    with client.stream("POST", f"{api_base}/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    now = time.perf_counter()
                    first = now if first is None else first
                    last = now
                    parts.append(text)
    tokens = int(usage.get("completion_tokens") or len(parts))
    decoding = last - (first or last)
    return {
        "completion_tokens": tokens,
        "first_token_s": round((first or last) - started, 2),
        "decode_s": round(decoding, 2),
        "tokens_per_s": round((tokens - 1) / decoding, 2) if decoding > 0 and tokens > 1 else None,
        "text": "".join(parts),
    }


def measure_server(api_base: str) -> dict[str, Any]:
    import httpx

    from cortex_kernel.llm import constrain

    offered = context(4)
    grammar, problem = constrain.grammar_for(offered)
    if grammar is None:
        return {"skipped": f"no grammar: {problem}"}
    system = ProtocolPrompt().system_prompt(offered)
    body: dict[str, Any] = {
        "model": "local",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": QUESTION}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "seed": 7,
        "max_tokens": 160,
    }
    result: dict[str, Any] = {"api_base": api_base}
    with httpx.Client(timeout=900) as client:
        try:
            client.get(f"{api_base}/models").raise_for_status()
        except httpx.HTTPError as exc:
            return {"skipped": f"no server answers at {api_base}: {type(exc).__name__}"}
        result["without_grammar"] = _stream(client, api_base, body)
        result["with_grammar"] = _stream(client, api_base, {**body, "grammar": grammar})
    plain = result["without_grammar"]["tokens_per_s"]
    constrained = result["with_grammar"]["tokens_per_s"]
    if plain and constrained:
        result["grammar_slowdown"] = round(plain / constrained, 2)
    return result


def main() -> dict[str, Any]:
    """Run the benchmark, print its figures, return them."""
    quick = os.environ.get("CORTEX_BENCH_QUICK") == "1"
    repeat = 1 if quick else 5
    result: dict[str, Any] = {"quick": quick, "sizes": {}}
    for count in SIZES:
        figures = measure_size(count, repeat)
        result["sizes"][str(count)] = figures
        print(
            f"{count:>4} tools: {figures['grammar_chars']:>7} chars, "
            f"{figures['grammar_rules']:>5} rules ({figures['llama_cpp_rules']} in llama.cpp), "
            f"build {figures['build_ms']} ms, check {figures['check_ms']} ms, "
            f"stacks max {figures['stacks_max']} mean {figures['stacks_mean']}, "
            f"recognizer {figures['recognizer_us_per_char']} us/char"
        )
    api_base = None if quick else local_api_base()
    if api_base is None:
        result["server"] = {"skipped": "no local model configured (make local-model)"}
    else:
        result["server"] = measure_server(api_base)
    server = result["server"]
    if "skipped" in server:
        print(f"real server: skipped ({server['skipped']})")
    else:
        for key in ("without_grammar", "with_grammar"):
            run = server[key]
            print(
                f"{key}: {run['completion_tokens']} tokens, first token {run['first_token_s']} s, "
                f"{run['tokens_per_s']} tokens/s"
            )
        print(f"grammar slowdown: {server.get('grammar_slowdown')}x")
    return result


if __name__ == "__main__":
    main()

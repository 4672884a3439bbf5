"""Print the system prompt's size with 4 and with 20 tools (issue 9 §4).

Tokens are counted by the local model's own tokenizer when ``make
local-model`` is up (``POST /extras/tokenize`` of llama-cpp-python's
server), else estimated by litellm's counter (cl100k). Usage::

    .venv/bin/python scripts/prompt_tokens.py [--api-base http://127.0.0.1:8377]
    .venv/bin/python scripts/prompt_tokens.py --first-token [--constrain auto] [--feed]

``--first-token`` runs two cells in one session on the local model (the
default suite's tools; a question, then a follow-up on its answer) and
prints, for every turn, the seconds from sending it to its first text: the
second cell's first turn shows whether the server's prefix cache kept the
system prompt and the first cell.
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from typing import Any

from cortex_kernel.evaluation import load_suite
from cortex_kernel.llm.prompt import PROMPT_VERSION, ProtocolPrompt
from cortex_kernel.runtime.ports import PromptContext
from cortex_kernel.runtime.tools import ToolRegistry


def tool_specs(count: int) -> list[dict[str, Any]]:
    """The default suite's tools, then numbered look-alikes up to ``count``."""
    registry = ToolRegistry()
    for name, function in load_suite().tools.items():
        registry.register(function, name=name)
    specs = registry.specs()
    base = list(specs)
    while len(specs) < count:
        extra = dict(base[len(specs) % len(base)])
        extra["name"] = f"{extra['name']}_{len(specs)}"
        specs.append(extra)
    return specs[:count]


def count_tokens(text: str, api_base: str | None) -> tuple[int, str]:
    if api_base:
        request = urllib.request.Request(
            api_base.rstrip("/").removesuffix("/v1") + "/extras/tokenize",
            data=json.dumps({"input": text}).encode(),
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as reply:
                return len(json.loads(reply.read())["tokens"]), "Qwen2.5 tokenizer"
        except OSError:
            pass
    from cortex_kernel.llm.litellm_model import load_litellm

    return int(load_litellm().token_counter(text=text)), "litellm estimate"


#: The parser's events of text the model wrote.
WRITTEN = {"text", "thought_start", "action_open", "action_parsed", "response_start"}
CELLS = ("What is the population of Toulouse?", "Double that number.")


async def first_tokens(api_base: str, constrain: str, feed: bool = False) -> None:
    """Run :data:`CELLS` in one session; print each turn's seconds to its first text."""
    import tempfile
    import time
    from pathlib import Path

    from cortex_kernel.agent import build_session
    from cortex_kernel.model_options import ModelOptions

    registry = ToolRegistry()
    suite = load_suite()
    for name, function in suite.tools.items():
        registry.register(function, name=name)
    options = ModelOptions.model_validate(
        {"api_base": api_base, "temperature": 0, "constrain": constrain}
    )
    namespace: dict[str, Any] = dict(suite.tools)
    extra: dict[str, Any] = {}
    if feed:
        # The kernel's notebook_variables feed, over a namespace that gains a
        # variable between the cells (as when the user runs a cell in between).
        from cortex_kernel.jupyter.notebook_vars import (
            describe_variables,
            notebook_variables_feed,
        )

        namespace["cities"] = ["Toulouse", "Lyon"]
        extra = {
            "host_feeds": [notebook_variables_feed()],
            "feed_providers": {
                "notebook_variables": lambda values=False: describe_variables(namespace)
            },
        }
    session = build_session(
        model="openai/local",
        options=options,
        namespace=namespace,
        tools=registry,
        transcript_dir=Path(tempfile.mkdtemp(prefix="cortex-first-token-")),
        **extra,
    )
    sent: list[float] = []
    firsts: dict[int, float] = {}

    def on_event(event: object) -> None:
        kind = getattr(event, "type", "")
        if getattr(event, "parent", None) is not None:
            return
        if kind == "turn_started":
            sent.append(time.perf_counter())
        elif sent and len(sent) not in firsts and kind in WRITTEN:
            firsts[len(sent)] = time.perf_counter() - sent[-1]

    async with session:
        for cell, message in enumerate(CELLS, 1):
            sent.clear()
            firsts.clear()
            result = await session.run(message, on_event=on_event)
            namespace[f"note_{cell}"] = f"cell {cell} ran"  # the feed differs next cell
            turns = ", ".join(f"turn {n}: {s:.2f} s" for n, s in sorted(firsts.items()))
            print(f"cell {cell} ({result.status}, {result.answer.strip()[:40]!r}): {turns}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", default="http://127.0.0.1:8377")
    parser.add_argument("--first-token", action="store_true", help="time two cells' turns")
    parser.add_argument("--constrain", default="auto", choices=("auto", "grammar", "off"))
    parser.add_argument(
        "--feed",
        action="store_true",
        help="with --first-token: add the notebook_variables feed, changed between the cells",
    )
    args = parser.parse_args()
    if args.first_token:
        import asyncio

        root = args.api_base.rstrip("/").removesuffix("/v1")
        asyncio.run(first_tokens(root + "/v1", args.constrain, args.feed))
        return
    internal = ["delete_variable", "list_variables", "set_variable"]
    for protocol in ("xml", "tools"):
        for count in (4, 20):
            context = PromptContext(
                tools=tool_specs(count), internal_actions=internal, protocol=protocol
            )
            text = ProtocolPrompt().system_prompt(context)
            tokens, how = count_tokens(text, args.api_base)
            print(
                f"prompt v{PROMPT_VERSION} {protocol:<5} {count:>2} tools: "
                f"{tokens:>5} tokens ({how}), {len(text):>6} characters"
            )


if __name__ == "__main__":
    main()

"""Print the system prompt's size with 4 and with 20 tools (issue 9 §4).

Tokens are counted by the local model's own tokenizer when ``make
local-model`` is up (``POST /extras/tokenize`` of llama-cpp-python's
server), else estimated by litellm's counter (cl100k). Usage::

    .venv/bin/python scripts/prompt_tokens.py [--api-base http://127.0.0.1:8377]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", default="http://127.0.0.1:8377")
    args = parser.parse_args()
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

"""Helpers shared by the litellm boundary tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cortex_kernel.llm.litellm_model import LiteLLMCompletion, LiteLLMModel
from cortex_kernel.protocol.parser import Parser
from cortex_kernel.runtime.ports import CompletionRequest
from cortex_kernel.runtime.tools import ToolRegistry
from tests.llm.fake_openai import FakeOpenAI

API_KEY = "sk-test-cortex-0123456789"
MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]

_DELTAS = {"text", "thought_delta", "response_delta"}


def make_model(server: FakeOpenAI, name: str = "openai/x", **options: Any) -> LiteLLMModel:
    """A model that talks to ``server`` with fast retries and a short timeout."""
    settings: dict[str, Any] = {
        "timeout": 2.0,
        "first_token_timeout": 2.0,
        "num_retries": 2,
        "backoff": 0.01,
    }
    settings.update(options)
    return LiteLLMModel(name, api_base=server.api_base, api_key=API_KEY, **settings)


def registry(*functions: Callable[..., Any]) -> ToolRegistry:
    """A tool registry with each of ``functions`` registered as a tool."""
    tools = ToolRegistry()
    for function in functions:
        tools.register(function)
    return tools


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def adder() -> ToolRegistry:
    """A tool registry with one tool, ``add(a, b)``."""
    return registry(add)


def request(**fields: Any) -> CompletionRequest:
    """A small request."""
    fields.setdefault("messages", MESSAGES)
    return CompletionRequest(**fields)


async def collect(completion: LiteLLMCompletion) -> list[str]:
    """All chunks of ``completion``, closing it afterwards."""
    async with completion:
        return [chunk async for chunk in completion]


def parse_chunks(chunks: list[str]) -> list[tuple[Any, ...]]:
    """Parser events of ``chunks``, as comparable tuples with adjacent deltas merged."""
    parser = Parser()
    events = [event for chunk in chunks for event in parser.feed(chunk)] + parser.close()
    merged: list[tuple[Any, ...]] = []
    for event in events:
        if event.type in _DELTAS:
            text = event.text  # type: ignore[union-attr]
            if merged and merged[-1][0] == event.type:
                merged[-1] = (event.type, merged[-1][1] + text)
            else:
                merged.append((event.type, text))
            continue
        data = event.model_dump(exclude={"span", "t", "turn"})
        merged.append((event.type, repr(sorted(data.items()))))
    return merged

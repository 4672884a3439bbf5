"""Warm litellm's first call without a network: one streamed request in memory.

Importing litellm is only part of what a first request pays: litellm and
the OpenAI SDK import hundreds more modules lazily on the first call
(``openai.resources``, the SSE decoder, the cost calculator's tokenizer…),
about a second more here. :func:`warm_litellm` makes one streamed request
through our own :class:`~cortex_kernel.llm.litellm_model.LiteLLMModel` path
(retries, usage, error mapping included) whose HTTP transport is an
in-memory ``httpx.MockTransport`` — the OpenAI SDK's client, or litellm's
own HTTP handler when the user chose it (see
:func:`~cortex_kernel.llm.litellm_model.litellm_base_handler`): nothing leaves the
process, no key is needed and no provider is billed. Then it builds the
HTTP client litellm would make for a real call (SSL context, transport).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import httpx

from ..runtime.ports import CompletionRequest
from .litellm_model import LiteLLMModel, litellm_base_handler, load_litellm

__all__ = ["warm_litellm"]

_CHUNK = {"id": "warm-up", "object": "chat.completion.chunk", "created": 0, "model": "warm-up"}


def _sse(*events: dict[str, object]) -> bytes:
    lines = [b"data: " + json.dumps({**_CHUNK, **event}).encode() + b"\n\n" for event in events]
    return b"".join(lines) + b"data: [DONE]\n\n"


_BODY = _sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
)


def _answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_BODY)


_BASE = "http://warm-up.invalid/v1"  # never resolved: the transport is in memory


async def _stream_once() -> str:
    transport = httpx.MockTransport(_answer)
    client: Any
    if litellm_base_handler():
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        client = AsyncHTTPHandler(transport=transport)
        http = client.client
    else:
        from openai import AsyncOpenAI

        http = httpx.AsyncClient(transport=transport)
        # Any: openai 3 is typed for httpx2's client and takes httpx's too.
        client = AsyncOpenAI(api_key="warm-up", base_url=_BASE, http_client=cast(Any, http))
    # An OpenAI model (and a priced one, so the cost path runs too): any other
    # provider would not use this client, and would reach the network.
    model = LiteLLMModel(
        "openai/gpt-4o-mini", api_base=_BASE, api_key="warm-up", num_retries=0, client=client
    )
    completion = model.stream(CompletionRequest(messages=[{"role": "user", "content": "hi"}]))
    try:
        async with completion:
            return "".join([chunk async for chunk in completion])
    finally:
        await http.aclose()


async def _http_client_once() -> None:
    """Build (and drop) the HTTP client litellm makes for a real OpenAI-style call.

    Its SSL context (the CA bundle read from disk) is cached by litellm, and
    the transport imports httpcore, h11 and h2: ~0.1 s of the first call.
    """
    try:
        if litellm_base_handler():
            # Cached by litellm and reused by the first real call: kept open.
            from litellm.llms.custom_httpx.http_handler import get_async_httpx_client
            from litellm.types.utils import LlmProviders

            get_async_httpx_client(LlmProviders.OPENAI, params={"ssl_verify": None})
            return
        from litellm.llms.openai.common_utils import BaseOpenAILLM

        client = BaseOpenAILLM.get_async_http_client()
    except Exception:  # litellm's internals moved: the first call pays, as before
        return
    if client is not None:
        await client.aclose()


async def _warm() -> str:
    text = await _stream_once()
    await _http_client_once()
    return text


def warm_litellm() -> str:
    """Import litellm and run one in-memory streamed request; return its text.

    Call it from a thread that has no running event loop (it runs its own).
    Nothing process-wide changes: no environment variable, no object frozen
    out of the garbage collector.
    """
    load_litellm()
    return asyncio.run(_warm())

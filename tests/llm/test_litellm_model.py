"""LiteLLMModel through litellm's real HTTP client against the fake provider."""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import pytest

from cortex_kernel.exceptions import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    ConnectionFailed,
    ContextWindowError,
    ModelTimeout,
    ProviderDown,
    ProviderProtocolError,
    RateLimitError,
)
from cortex_kernel.llm.litellm_model import LiteLLMModel, load_litellm
from tests.llm.fake_openai import FakeOpenAI
from tests.llm.support import API_KEY, MESSAGES, collect, make_model, parse_chunks, request

pytestmark = pytest.mark.anyio

PROTOCOL_TEXT = (
    "Let me look.<thought>I need the weather first "
    '<action type="tool" mode="async" id="w" output_key="weather">'
    '{"name": "get_weather", "parameters": {"city": "Paris"}}</action>'
    " then I answer.</thought>"
    '<response final="true">It is $weather.</response>'
)


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 64])
async def test_protocol_split_inside_tags_gives_the_same_events(
    server: FakeOpenAI, chunk_size: int
) -> None:
    server.stream(PROTOCOL_TEXT, chunk_size=chunk_size)
    chunks = await collect(make_model(server).stream(request()))
    assert "".join(chunks) == PROTOCOL_TEXT
    # Deltas that came in one network read arrive as one chunk (the split
    # points are the reads'), so the split is whatever the socket made of it.
    assert parse_chunks(chunks) == parse_chunks([PROTOCOL_TEXT])
    kinds = [event[0] for event in parse_chunks(chunks)]
    assert "action_parsed" in kinds and "response_end" in kinds


async def test_the_request_carries_the_prompt_and_asks_for_usage(server: FakeOpenAI) -> None:
    server.stream("ok")
    model = make_model(server, temperature=0.25)
    await collect(model.stream(request()))
    body = server.requests[0].body
    assert body["messages"] == MESSAGES
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.25
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retries_then_success(server: FakeOpenAI, status: int) -> None:
    server.error(status, times=2).stream("<response>fine</response>")
    completion = make_model(server, num_retries=3).stream(request())
    chunks = await collect(completion)
    assert "".join(chunks) == "<response>fine</response>"
    assert len(server.requests) == 3
    assert completion.attempts == 3


async def test_retry_after_is_honoured(server: FakeOpenAI) -> None:
    server.error(429, retry_after=0.3).stream("ok")
    model = make_model(server, backoff=0.0)
    waits: list[float] = []
    chosen = model.retry_delay

    def recorded(attempt: int, exc: BaseException) -> float:
        waits.append(chosen(attempt, exc))
        return waits[-1]

    model.retry_delay = recorded  # type: ignore[method-assign]
    await collect(model.stream(request()))
    # The wait before the second request is the server's retry-after, not the backoff (0).
    assert waits == [0.3]
    assert len(server.requests) == 2


async def test_rate_limit_exhausted_gives_the_mapped_error(server: FakeOpenAI) -> None:
    server.error(429, times=3, retry_after=0, message="slow down")
    with pytest.raises(RateLimitError) as caught:
        await collect(make_model(server, num_retries=2).stream(request()))
    assert len(server.requests) == 3
    message = str(caught.value)
    assert "429" in message and "3 attempts" in message and "--retries" in message
    assert "slow down" in message


async def test_server_errors_exhausted_give_provider_down(server: FakeOpenAI) -> None:
    server.error(502, times=2)
    with pytest.raises(ProviderDown, match="--retries"):
        await collect(make_model(server, num_retries=1).stream(request()))
    assert len(server.requests) == 2


async def test_authentication_is_not_retried_and_names_the_variable(server: FakeOpenAI) -> None:
    server.error(401, message="invalid key")
    with pytest.raises(AuthenticationError) as caught:
        await collect(make_model(server, name="openai/gpt-4o-mini").stream(request()))
    assert len(server.requests) == 1
    assert "OPENAI_API_KEY" in str(caught.value)


async def test_bad_request_is_not_retried(server: FakeOpenAI) -> None:
    server.error(400, message="temperature must be <= 2")
    with pytest.raises(BadRequestError, match="temperature must be"):
        await collect(make_model(server).stream(request()))
    assert len(server.requests) == 1


async def test_context_window_error(server: FakeOpenAI) -> None:
    server.error(400, message="This model's maximum context length is 8192 tokens.")
    with pytest.raises(ContextWindowError, match="context"):
        await collect(make_model(server).stream(request()))
    assert len(server.requests) == 1


async def test_a_mid_stream_cut_is_not_retried_and_says_the_turn_was_dropped(
    server: FakeOpenAI,
) -> None:
    server.stream("<thought>half a thou", chunk_size=4, cut_after=3)
    completion = make_model(server).stream(request())
    received: list[str] = []
    with pytest.raises(ConnectionFailed) as caught:
        async with completion:
            async for chunk in completion:
                received.append(chunk)
    assert "".join(received) == "<thought>hal"
    assert "discarded" in str(caught.value)
    assert len(server.requests) == 1  # tokens had streamed: never silently re-run


async def test_a_cut_before_the_first_token_is_retried(server: FakeOpenAI) -> None:
    server.stream("never", cut_after=0).stream("<response>ok</response>")
    chunks = await collect(make_model(server).stream(request()))
    assert "".join(chunks) == "<response>ok</response>"
    assert len(server.requests) == 2


async def test_a_hang_before_the_first_byte_hits_the_timeout(server: FakeOpenAI) -> None:
    server.hang(10).hang(10)
    with pytest.raises(ModelTimeout, match=r"no first token within 0\.3 s after 2 attempts"):
        await collect(make_model(server, first_token_timeout=0.3, num_retries=1).stream(request()))
    assert len(server.requests) == 2  # each attempt timed out; neither waited for the hang


@pytest.mark.parametrize("first_token_timeout", [2.0, 0.3])
async def test_a_hang_mid_stream_hits_the_timeout(
    server: FakeOpenAI, first_token_timeout: float
) -> None:
    # 0.3: both limits equal, so the HTTP client's own read timeout is the
    # one that fires after the first token (we add no deadline of ours).
    server.stream("<thought>still thinking", chunk_size=5, hang_after=2, hang_seconds=10)
    model = make_model(server, timeout=0.3, first_token_timeout=first_token_timeout)
    completion = model.stream(request())
    # The limit between chunks fired (the message names it), not the first-token one.
    with pytest.raises(ModelTimeout, match=r"sent nothing for 0\.3 s.*discarded"):
        await collect(completion)
    assert len(server.requests) == 1
    # And not the hang's end: the server saw the client leave while it hung,
    # before its third chunk.
    record = server.wait_done(timeout=15)
    assert record.disconnected and record.chunks_sent == 2


async def test_connection_refused_is_mapped(server: FakeOpenAI) -> None:
    model = LiteLLMModel(
        "openai/x",
        api_base="http://127.0.0.1:9/v1",
        api_key=API_KEY,
        timeout=2,
        num_retries=1,
        backoff=0.01,
    )
    with pytest.raises(ConnectionFailed, match="api_base"):
        await collect(model.stream(request()))


async def test_closing_at_a_sync_action_closes_the_connection(server: FakeOpenAI) -> None:
    head = '<action type="tool" mode="sync" id="s">{"name": "t", "parameters": {}}</action>'
    server.stream(head + "x" * 2000, chunk_size=4, delay=0.005)  # ~540 chunks, ~2.7 s
    completion = make_model(server).stream(request())
    seen = ""
    async for chunk in completion:
        seen += chunk
        if "</action>" in seen:
            await completion.aclose()
            break
    record = server.wait_done()
    assert record.disconnected
    assert not record.completed
    assert record.chunks_sent < 500  # the provider stopped before the end
    await completion.aclose()  # twice is fine
    assert completion.usage.turns == 1
    assert completion.usage.completion_tokens > 0  # estimated: no usage chunk came


async def test_cancelling_the_reader_closes_the_connection(server: FakeOpenAI) -> None:
    server.stream("y" * 200, chunk_size=1, delay=0.01)
    completion = make_model(server).stream(request())

    async def read() -> None:
        async with completion:
            async for _ in completion:
                pass

    with anyio.move_on_after(0.2):
        await read()
    record = server.wait_done()
    assert record.disconnected and not record.completed


async def test_usage_and_cost_are_recorded_for_a_known_model(server: FakeOpenAI) -> None:
    server.stream("<response>hi</response>", usage=(1000, 500))
    completion = make_model(server, name="openai/gpt-4o-mini").stream(request())
    await collect(completion)
    usage = completion.usage
    assert (usage.turns, usage.prompt_tokens, usage.completion_tokens) == (1, 1000, 500)
    assert usage.cost is not None and usage.cost > 0
    assert usage.seconds > 0


async def test_an_unknown_model_has_no_cost_but_no_error(server: FakeOpenAI) -> None:
    server.stream("<response>hi</response>", usage=(10, 5))
    completion = make_model(server, name="openai/no-such-model-xyz").stream(request())
    await collect(completion)
    assert completion.usage.prompt_tokens == 10
    assert completion.usage.cost is None


async def test_usage_is_estimated_without_a_usage_chunk(server: FakeOpenAI) -> None:
    server.stream("<response>a few words here</response>", usage=None)
    completion = make_model(server, name="openai/gpt-4o-mini").stream(request())
    await collect(completion)
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.completion_tokens > 0


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError):
        LiteLLMModel("")
    with pytest.raises(ConfigError):
        LiteLLMModel("openai/x", protocol="json")
    with pytest.raises(ConfigError):
        LiteLLMModel("openai/x", timeout=0)


def test_repr_has_no_key() -> None:
    model = LiteLLMModel("openai/x", api_key=API_KEY, api_base="http://h/v1")
    assert API_KEY not in repr(model)
    assert "openai/x" in repr(model)


def test_a_tools_model_sends_tools_even_for_a_default_request() -> None:
    schema = {"name": "f", "parameters": {"type": "object"}}
    model = LiteLLMModel("openai/x", protocol="tools")
    kwargs = model.request_kwargs(request(tools=[schema]))
    assert kwargs["tools"][0]["function"]["name"] == "f"
    assert kwargs["num_retries"] == 0 and kwargs["max_retries"] == 0
    assert kwargs["stream"] is True
    assert "tools" not in LiteLLMModel("openai/x").request_kwargs(request(tools=[schema]))


def test_waiting_defaults_for_a_hosted_provider_and_a_server_on_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    hosted = LiteLLMModel("openai/gpt-4o-mini")
    assert (hosted.first_token_timeout, hosted.timeout, hosted.num_retries) == (30, 30, 2)
    assert hosted.request_kwargs(request())["timeout"] == 30
    # A CPU model on this machine may read a long prompt for minutes; a
    # retry would queue behind the request it gave up on.
    for local in (
        LiteLLMModel("openai/local", api_base="http://127.0.0.1:8377/v1"),
        LiteLLMModel("ollama/llama3"),
    ):
        assert (local.first_token_timeout, local.timeout, local.num_retries) == (600, 30, 0)
        assert local.request_kwargs(request())["timeout"] == 600  # httpx must not cut it short
    monkeypatch.setenv("OPENAI_API_BASE", "http://localhost:8000/v1")
    assert LiteLLMModel("openai/local").num_retries == 0
    # Explicit options win.
    chosen = LiteLLMModel(
        "openai/local", api_base="http://127.0.0.1:1/v1", first_token_timeout=5, num_retries=3
    )
    assert (chosen.first_token_timeout, chosen.num_retries) == (5, 3)
    with pytest.raises(ConfigError):
        LiteLLMModel("openai/x", first_token_timeout=0)


def _sse(*events: dict[str, Any], done: bool = True) -> str:
    """An SSE body of chat completion chunks (``choices`` given per event)."""
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "x"}
    body = "".join(f"data: {json.dumps({**base, **event})}\n\n" for event in events)
    return body + ("data: [DONE]\n\n" if done else "")


def _delta(content: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


@pytest.mark.parametrize("handler", ["unset", "true", "false"])
async def test_both_transports_give_the_same_text_usage_and_tool_calls(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, handler: str
) -> None:
    # Unset or "false": litellm's default, the OpenAI SDK; "true": litellm's
    # own HTTP handler. Either way the response is read by SSEEvents, and the
    # variable is the user's alone (never set for them).
    if handler == "unset":
        monkeypatch.delenv("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", raising=False)
    else:
        monkeypatch.setenv("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", handler)
    load_litellm()  # its import sets TIKTOKEN_CACHE_DIR (litellm's own: test_litellm_environment)
    before = dict(os.environ)
    server.stream(PROTOCOL_TEXT, chunk_size=5, usage=(17, 42))
    completion = make_model(server, name="openai/gpt-4o-mini").stream(request())
    chunks = await collect(completion)
    assert completion._events is not None  # read here, not through litellm's chunk objects
    assert dict(os.environ) == before
    assert "".join(chunks) == PROTOCOL_TEXT
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (17, 42)
    assert completion.usage.cost is not None and completion.usage.cost > 0
    assert completion.finish_reason == "stop"

    server.tool_calls([("call_1", "get_weather", '{"city": "Paris"}')])
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    completion = make_model(server, protocol="tools").stream(request(tools=tools))
    await collect(completion)
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("call_1", "get_weather", '{"city": "Paris"}')
    ]


async def test_a_data_line_that_is_not_json_mid_stream_is_a_protocol_error(
    server: FakeOpenAI,
) -> None:
    # litellm's own iterator skips such a line silently: text would be lost.
    server.raw(_sse(_delta("<thought>so far"), done=False) + "data: {'oops\n\n" + _sse(_delta(".")))
    received: list[str] = []
    completion = make_model(server).stream(request())
    with pytest.raises(ProviderProtocolError, match="not JSON") as caught:
        async with completion:
            async for chunk in completion:
                received.append(chunk)
    assert "".join(received) == "<thought>so far"
    assert "discarded" in str(caught.value) and "not retried" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("code", "error"), [(500, ProviderDown), (429, RateLimitError), (400, BadRequestError)]
)
async def test_an_error_event_in_a_200_stream_is_mapped_by_its_code(
    server: FakeOpenAI, code: int, error: type[Exception]
) -> None:
    # vLLM and sglang answer 200 and put the failure in the stream.
    server.raw(_sse({"error": {"message": "engine overloaded", "code": code}}))
    with pytest.raises(error, match="engine overloaded"):
        await collect(make_model(server, num_retries=0).stream(request()))


async def test_comments_and_event_lines_are_skipped_and_a_body_without_a_last_newline_ends(
    server: FakeOpenAI,
) -> None:
    # Keep-alive comments (OpenRouter), `event:` names, \r\n line ends; the
    # last event without its blank line is still taken when it is whole JSON.
    body = ": PROCESSING\n\nevent: message\r\n" + _sse(
        _delta("<response>o"), _delta("k</response>", "stop"), done=False
    ).replace("\n", "\r\n")
    server.raw(body.rstrip("\r\n"))
    completion = make_model(server).stream(request())
    assert "".join(await collect(completion)) == "<response>ok</response>"
    assert completion.finish_reason == "stop"

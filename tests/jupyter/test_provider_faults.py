"""A provider that never answers, stalls or sends garbage, through the real kernel.

The model is a real litellm client talking HTTP to a loopback fake provider
the test starts: the waiting rules (``--first-token-timeout``, ``--timeout``,
``--retries``) are set on ``%model``, ``%%agent`` and a manifest, and a
broken answer is a clear error that is not retried.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.fake_openai import FakeOpenAI, Reply

from .conftest import CellResult, Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]

CHUNK = (
    '{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "x", '
    '"choices": [{"index": 0, "delta": {"content": "<response>par"}, "finish_reason": null}]}'
)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def cortex(cortex_kernelspec: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = keyless_env()
    env["CORTEX_TRANSCRIPT_DIR"] = str(tmp_path_factory.mktemp("transcripts"))
    kernel = Kernel(cortex_kernelspec, env)
    # One real request first: the first litellm call of a process sets up its
    # clients, which must not eat the sub-second deadlines tested below.
    with FakeOpenAI() as warm:
        kernel.python(f"%model openai/x --api-base {warm.api_base}")
        still_works(kernel, warm)
    yield kernel
    kernel.shutdown()


def failure(result: CellResult) -> str:
    assert result.status == "error", dump(result)
    return f"{result.reply['content']['ename']}: {result.reply['content']['evalue']}"


def still_works(cortex: Kernel, server: FakeOpenAI) -> None:
    server.stream("<response>back</response>")
    result = cortex.run("again")
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/markdown"] == "back"


def test_a_provider_that_never_answers_fails_after_the_first_token_timeout(
    cortex: Kernel, server: FakeOpenAI
) -> None:
    shown = cortex.python(
        f"%model openai/x --api-base {server.api_base} --first-token-timeout 0.5 --retries 1"
    )
    assert "waits: first token within 0.5 s, then 30 s between chunks, 1 retries" in shown
    server.hang(30).hang(30)  # accepts each request and never answers
    message = failure(cortex.run("hello?"))
    assert "sent no first token within 0.5 s after 2 attempts" in message
    assert "--first-token-timeout" in message
    assert len(server.requests) == 2  # timeout x (retries + 1), not 4 x 60 s
    assert all(record.disconnected for record in server.requests)
    still_works(cortex, server)


def test_headers_then_silence_is_a_first_token_timeout_too(
    cortex: Kernel, server: FakeOpenAI
) -> None:
    cortex.python(f"%model openai/x --api-base {server.api_base}")
    # 200 and the event-stream headers, then nothing before the first token.
    server.add(Reply(kind="stream", chunks=[{"content": "late"}], hang_after=0, hang_seconds=30))
    result = cortex.run(
        "%%agent --first-token-timeout 0.5 --retries 0\nhello?"  # this cell only
    )
    message = failure(result)
    assert "sent no first token within 0.5 s" in message
    assert "attempts" not in message and len(server.requests) == 1
    still_works(cortex, server)


def test_a_stall_after_the_first_token_hits_the_timeout(cortex: Kernel, server: FakeOpenAI) -> None:
    cortex.python(f"%model openai/x --api-base {server.api_base} --timeout 0.5 --retries 2")
    server.stream("<response>half an ans", chunk_size=4, hang_after=2, hang_seconds=30)
    message = failure(cortex.run("hello?"))
    assert "sent nothing for 0.5 s" in message and "--timeout" in message
    assert "the partial turn was discarded" in message
    assert len(server.requests) == 1  # tokens had come: never silently re-run


@pytest.mark.parametrize(
    ("body", "content_type", "detail"),
    [
        # litellm's handlers differ: the OpenAI SDK's raises JSONDecodeError,
        # its own skips the line (then no chunk came at all).
        ("data: this is not json\n\n", "text/event-stream", ""),
        (
            "<html><body><h1>502 Bad Gateway</h1></body></html>",
            "text/html",
            "its content-type is text/html, not text/event-stream",
        ),
        (f"data: {CHUNK}\n\n", "text/event-stream", "without a finish reason after 13 characters"),
        (f"data: {CHUNK[:60]}", "text/event-stream", "without a finish reason, with no chunk"),
    ],
    ids=["not-json", "html-200", "truncated", "cut-mid-json"],
)
def test_garbage_from_the_provider_is_a_protocol_error_never_retried(
    cortex: Kernel, server: FakeOpenAI, body: str, content_type: str, detail: str
) -> None:
    cortex.python(f"%model openai/x --api-base {server.api_base} --retries 3")
    server.raw(body, content_type=content_type)
    message = failure(cortex.run("hello?"))
    assert "ProviderProtocolError" in message
    assert "sent an answer that is not a stream of chat completion chunks" in message
    assert detail in message and "it was not retried" in message
    assert "Cannot reach" not in message
    assert len(server.requests) == 1  # a garbled answer is not a network failure
    still_works(cortex, server)

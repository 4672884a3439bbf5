"""The error mapping, unit by unit (the HTTP cases are in test_litellm_model)."""

from __future__ import annotations

import httpx
import pytest

from cortex_kernel.exceptions import (
    AuthenticationError,
    ConnectionFailed,
    ModelError,
    ModelTimeout,
    ProviderDown,
    RateLimitError,
)
from cortex_kernel.llm.errors import (
    is_retryable,
    key_env_for,
    map_error,
    provider_of,
    redact,
    retry_after_seconds,
)


class StatusError(Exception):
    def __init__(self, status: int, message: str = "boom", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status_code = status
        self.message = message
        self.litellm_response_headers = httpx.Headers(headers or {})


def test_provider_and_key_variable() -> None:
    assert provider_of("anthropic/claude-3-5-sonnet") == "anthropic"
    assert key_env_for("openai/gpt-4o") == "OPENAI_API_KEY"
    assert key_env_for("gemini/gemini-2.0-flash") == "GEMINI_API_KEY"
    assert key_env_for("nobody/knows") is None


def test_retryable_kinds() -> None:
    assert is_retryable(StatusError(429))
    assert is_retryable(StatusError(503))
    assert is_retryable(TimeoutError())
    assert is_retryable(httpx.ConnectError("refused"))
    assert not is_retryable(StatusError(401))
    assert not is_retryable(StatusError(400))


def test_a_missing_module_is_not_retried() -> None:
    try:
        try:
            raise ModuleNotFoundError("No module named 'mcp'")
        except ImportError as inner:
            raise StatusError(500, "Connection error") from inner
    except StatusError as outer:
        assert not is_retryable(outer)
        error = map_error(outer, model="openai/x")
    assert type(error) is ModelError
    assert "installation" in str(error)


def test_a_timeout_caused_by_a_bug_is_neither_retried_nor_a_timeout() -> None:
    # The two policies used to disagree: not retried, yet reported as ModelTimeout.
    try:
        try:
            raise TypeError("acompletion() got an unexpected keyword argument 'x'")
        except TypeError as inner:
            raise TimeoutError("gave up") from inner
    except TimeoutError as outer:
        assert not is_retryable(outer)
        error = map_error(outer, model="openai/x", timeout=1.5)
    assert type(error) is ModelError
    assert "installation" in str(error)


@pytest.mark.parametrize(
    "exc",
    [
        StatusError(429),
        StatusError(503),
        StatusError(401),
        StatusError(400),
        StatusError(500, "Connection error."),
        TimeoutError(),
        ConnectionRefusedError(),
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        ValueError("odd"),
    ],
)
def test_retried_exactly_when_the_mapped_error_is_transient(exc: Exception) -> None:
    transient = (ModelTimeout, RateLimitError, ConnectionFailed, ProviderDown)
    assert is_retryable(exc) == isinstance(map_error(exc, model="m"), transient)


def test_retry_after_headers() -> None:
    assert retry_after_seconds(StatusError(429, headers={"retry-after": "2"})) == 2.0
    assert retry_after_seconds(StatusError(429, headers={"retry-after-ms": "150"})) == 0.15
    assert retry_after_seconds(StatusError(429, headers={"retry-after": "Wed, 21 Oct"})) is None
    assert retry_after_seconds(StatusError(429)) is None


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (StatusError(429), RateLimitError),
        (StatusError(500), ProviderDown),
        (TimeoutError(), ModelTimeout),
        (httpx.ReadTimeout("slow"), ModelTimeout),
        (httpx.RemoteProtocolError("cut"), ConnectionFailed),
        (ValueError("odd"), ModelError),
    ],
)
def test_kinds(exc: Exception, kind: type[ModelError]) -> None:
    error = map_error(exc, model="openai/x", timeout=1.5)
    assert type(error) is kind
    assert "openai/x" in str(error)


def test_a_model_error_passes_through() -> None:
    original = RateLimitError("already ours")
    assert map_error(original, model="m") is original


def test_streamed_characters_are_reported() -> None:
    error = map_error(httpx.RemoteProtocolError("cut"), model="m", streamed_chars=12)
    assert "12 characters" in str(error) and "discarded" in str(error)


def test_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdefgh")
    monkeypatch.setenv("DEBUG", "true")
    text = "tok-abcdefgh and sk-explicit-1234 and true"
    assert redact(text, ["sk-explicit-1234"]) == "*** and *** and true"


def test_error_messages_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret-99999")
    error = map_error(StatusError(401, "bad key sk-env-secret-99999"), model="openai/x")
    assert "sk-env-secret-99999" not in str(error)
    assert "OPENAI_API_KEY" in str(error)


def test_a_missing_key_is_an_authentication_error_not_an_outage() -> None:
    # What the OpenAI SDK raises with no key, as litellm wraps it (a 500).
    exc = StatusError(
        500,
        "OpenAIException - Missing credentials. Please pass an `api_key`, or set the "
        "`OPENAI_API_KEY` environment variable.",
    )
    assert not is_retryable(exc)
    error = map_error(exc, model="openai/gpt-4o-mini")
    assert isinstance(error, AuthenticationError)
    assert "Set OPENAI_API_KEY" in str(error)
    assert ".." not in str(error)


def test_every_kind_has_its_error_and_message() -> None:
    import typing

    from cortex_kernel.exceptions import ModelError
    from cortex_kernel.llm.errors import MESSAGES, ErrorKind

    assert set(MESSAGES) == set(typing.get_args(ErrorKind))
    for kind, (error_class, _) in MESSAGES.items():
        assert issubclass(error_class, ModelError), kind

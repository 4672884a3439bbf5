"""The one place where litellm's (and its HTTP stack's) errors become ours.

Callers never catch another library's types: :func:`map_error` turns any
exception that comes out of a litellm call into a :class:`ModelError`
subclass whose message says what the user can do (which environment
variable, which option). :func:`is_retryable` and :func:`retry_after_seconds`
give the retry policy its inputs.

::

    litellm / openai / httpx exception
    ├── context window exceeded          -> ContextWindowError
    ├── timeout (litellm.Timeout, httpx) -> ModelTimeout
    ├── connection (refused, reset, cut) -> ConnectionFailed
    ├── 401 / 403                        -> AuthenticationError
    ├── 429                              -> RateLimitError
    ├── 5xx                              -> ProviderDown
    ├── 400 / 404 / 413 / 422            -> BadRequestError
    └── anything else                    -> ModelError

Provider messages are quoted in ours, so every message is passed through
:func:`redact`: the value of any API key or token in the environment (and
the key given explicitly) never reaches an error message.

litellm is imported only inside functions, and only when it is already
loaded — mapping an error never pays for the import.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any

from ..exceptions import (
    AuthenticationError,
    BadRequestError,
    ConnectionFailed,
    ContextWindowError,
    ModelError,
    ModelTimeout,
    ProviderDown,
    RateLimitError,
)
from ..redaction import PROVIDER_KEY_ENV, SECRET_ENV_PATTERN, redact, secret_values

__all__ = [
    "PROVIDER_KEY_ENV",
    "SECRET_ENV_PATTERN",
    "is_retryable",
    "key_env_for",
    "map_error",
    "provider_of",
    "redact",
    "retry_after_seconds",
    "secret_values",
]

# litellm stacks class names in front of the provider's words:
# "litellm.RateLimitError: RateLimitError: OpenAIException - slow down".
_PREFIX = re.compile(r"^(?:litellm\.\w+:\s*|\w+(?:Error|Exception)\s*[:\-]\s*)+")


def provider_of(model: str) -> str:
    """The provider prefix of a litellm model string (``openai/gpt-4o`` → ``openai``).

    A bare name (``gpt-4o``) is resolved by litellm when it is already
    loaded, else taken as ``openai`` (litellm's own default for such names).
    """
    if "/" in model:
        return model.split("/", 1)[0].lower()
    litellm = sys.modules.get("litellm")
    if litellm is not None:
        try:
            return str(litellm.get_llm_provider(model)[1])
        except Exception:  # an unknown bare name: fall through to the default
            pass
    return "openai"


def key_env_for(model: str) -> str | None:
    """The environment variable holding the API key for ``model``, if known."""
    return PROVIDER_KEY_ENV.get(provider_of(model))


def _unwrap(exc: BaseException) -> BaseException:
    # litellm wraps a failure after the first chunk in MidStreamFallbackError;
    # the original says what really happened (a cut, a read timeout…).
    seen = 0
    while seen < 5:
        inner = getattr(exc, "original_exception", None)
        if not isinstance(inner, BaseException) or inner is exc:
            break
        exc = inner
        seen += 1
    return exc


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"Timeout", "APITimeoutError", "TimeoutException", "ServerTimeoutError"})


_CONNECTION_TYPES = {
    "APIConnectionError",
    "TransportError",  # httpx: ConnectError, ReadError, RemoteProtocolError…
    "ClientConnectionError",  # aiohttp
    "ClientPayloadError",
}


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: causes, contexts and litellm's ``original_exception``."""
    found: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(found) < 12:
        current = todo.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        for inner in (
            getattr(current, "original_exception", None),
            current.__cause__,
            current.__context__,
        ):
            if isinstance(inner, BaseException):
                todo.append(inner)
    return found


def _is_connection(exc: BaseException) -> bool:
    # litellm reports a refused connection as InternalServerError (500) whose
    # context is the SDK's "Connection error.": look through the chain.
    for current in _chain(exc):
        if isinstance(current, ConnectionError):
            return True
        if {cls.__name__ for cls in type(current).__mro__} & _CONNECTION_TYPES:
            return True
        if str(current).strip() == "Connection error.":
            return True
    return False


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


_NO_KEY_MARKERS = (
    "missing credentials",
    "api_key client option must be set",
    "no api key",
    "api key not found",
    "missing api key",
)


def _is_missing_key(exc: BaseException) -> bool:
    # The OpenAI SDK raises "Missing credentials…" before any request, and
    # litellm wraps it as a 500; it is a configuration problem, not an outage.
    text = " ".join(str(current) for current in _chain(exc)).lower()
    return any(marker in text for marker in _NO_KEY_MARKERS)


def is_retryable(exc: BaseException) -> bool:
    """Whether a failure before the first token is worth another attempt.

    429, 5xx, timeouts and connection failures are; a bad key, a bad request
    or a too-long prompt are not (a retry would fail the same way).
    """
    if _is_programming_error(exc):
        return False
    if _is_missing_key(exc):
        return False
    exc = _unwrap(exc)
    if _is_context_window(exc):
        return False
    if _is_timeout(exc) or _is_connection(exc):
        return True
    status = _status(exc)
    return status is not None and (status == 429 or status >= 500)


def _is_programming_error(exc: BaseException) -> bool:
    # litellm wraps anything, even a missing optional module, in
    # APIConnectionError; the cause chain tells a bug from a network failure.
    return any(
        isinstance(current, ImportError | TypeError | AttributeError | NameError)
        for current in _chain(exc)
    )


def retry_after_seconds(exc: BaseException) -> float | None:
    """The provider's ``retry-after`` (or ``retry-after-ms``) in seconds, if it sent one."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000.0)
        value = headers.get("retry-after")
        if value is not None:
            return max(0.0, float(value))
    except (TypeError, ValueError):  # an HTTP date or garbage: use our own backoff
        return None
    return None


def _is_context_window(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "ContextWindowExceededError" in names:
        return True
    text = str(exc).lower()
    return "context length" in text or "context window" in text or "maximum context" in text


def _detail(exc: BaseException, secrets: Iterable[str | None]) -> str:
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    text = _PREFIX.sub("", text.strip())
    # litellm appends debugging hints and the original traceback; keep the first line.
    text = text.splitlines()[0] if text else type(exc).__name__
    text = redact(text, secrets).rstrip(". ")
    return text[:300] + ("…" if len(text) > 300 else "")


def map_error(
    exc: BaseException,
    *,
    model: str,
    attempts: int = 1,
    timeout: float | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    streamed_chars: int = 0,
) -> ModelError:
    """Turn an exception from a litellm call into our :class:`ModelError` tree.

    Parameters
    ----------
    exc
        What litellm, the OpenAI SDK, httpx or anyio raised.
    model
        The model string, named in the message.
    attempts
        How many requests were made (retries included).
    timeout
        The timeout in force, quoted when the error is a timeout.
    api_base, api_key
        The endpoint (quoted on connection errors) and the explicit key
        (redacted like the environment's keys).
    streamed_chars
        Characters already streamed when the failure came: a non-zero value
        adds that the partial turn was discarded.

    Returns
    -------
    ModelError
        A subclass chosen by kind; its message is free of secrets.
    """
    if isinstance(exc, ModelError):
        return exc
    inner = _unwrap(exc)
    secrets = (api_key,)
    detail = _detail(inner, secrets)
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    tail = ""
    if streamed_chars:
        tail = (
            f" The stream broke after {streamed_chars} characters; the partial turn was"
            " discarded, run the cell again to retry."
        )
    status = _status(inner)
    env = key_env_for(model)
    where = f" at {api_base}" if api_base else ""

    error: ModelError
    if _is_context_window(inner):
        error = ContextWindowError(
            f"The prompt is too long for model {model!r}: {detail}. Shorten the history "
            "(start a new session), remove or shrink context feeds (their max_tokens), "
            "or choose a model with a larger context window (--model / %model)."
        )
    elif _is_timeout(inner):
        limit = f" within {timeout:g} s" if timeout is not None else " in time"
        error = ModelTimeout(
            f"Model {model!r} did not answer{limit}{tries}. Raise the model's `timeout` "
            "option, check the provider's status, or choose another model (--model)."
        )
    elif status in (401, 403) or _is_missing_key(exc):
        hint = f"Set {env} in the kernel's environment" if env else "Set the provider's API key"
        error = AuthenticationError(
            f"The provider rejected the credentials for model {model!r}"
            f"{f' ({status})' if status in (401, 403) else ''}: {detail}. "
            f"{hint} (or pass the model's `api_key` option), then restart the kernel "
            "or choose another model (--model / %model)."
        )
    elif status == 429:
        error = RateLimitError(
            f"Model {model!r} is rate limited (429){tries}: {detail}. Wait a minute and run "
            "the cell again, raise the model's `num_retries` option, or choose another "
            "model (--model / %model)."
        )
    elif _is_programming_error(exc):
        error = ModelError(
            f"Model {model!r} could not be called: {detail}. This is a problem with the "
            "installation, not the provider: reinstall cortex-kernel (and litellm), or "
            "choose another model (--model / %model)."
        )
    elif _is_connection(inner) and (status is None or status >= 500):
        error = ConnectionFailed(
            f"Cannot reach the provider of model {model!r}{where}{tries}: {detail}. Check the "
            "network, the model's `api_base` option and any proxy settings (HTTPS_PROXY)."
        )
    elif status is not None and status >= 500:
        error = ProviderDown(
            f"The provider of model {model!r} is failing ({status}){tries}: {detail}. Try "
            "again later, raise the model's `num_retries` option, or choose another model "
            "(--model / %model)."
        )
    elif status in (400, 404, 413, 422) or "BadRequestError" in {
        cls.__name__ for cls in type(inner).__mro__
    }:
        error = BadRequestError(
            f"The provider rejected the request for model {model!r} ({status}): {detail}. "
            "Check the model name (--model / %model; any litellm model string, e.g. "
            "'openai/gpt-4o-mini') and the model options."
        )
    else:
        error = ModelError(
            f"Model {model!r} failed{tries}: {type(inner).__name__}: {detail}."
            " Run the cell again; if it persists, choose another model (--model / %model)."
        )
    if tail:
        error = type(error)(str(error) + tail)
    return error

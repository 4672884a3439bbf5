"""The one place where litellm's (and its HTTP stack's) errors become ours.

Callers never catch another library's types. One classifier,
:func:`classify`, names the kind of any exception that comes out of a
litellm call; :func:`map_error` turns it into the :class:`ModelError`
subclass of that kind, with a message that says what the user can do (which
environment variable, which option), and :func:`is_retryable` retries
exactly the transient kinds, so the two can never disagree.
:func:`retry_after_seconds` gives the retry policy its delay. In the order
they are checked::

    litellm / openai / httpx / aiohttp exception
    ├── the response body is not a completion stream
    │   (not JSON, wrong shape, no finish reason)  -> ProviderProtocolError, not retried
    ├── a bug or a broken install in the chain -> ModelError ("installation"), not retried
    ├── no API key, 401 / 403                  -> AuthenticationError
    ├── context window exceeded                -> ContextWindowError
    ├── timeout                                -> ModelTimeout        (retried)
    ├── 429                                    -> RateLimitError      (retried)
    ├── connection (refused, reset, cut)       -> ConnectionFailed    (retried)
    ├── 5xx, or an error event in the stream   -> ProviderDown        (retried)
    ├── 400 / 404 / 413 / 422                  -> BadRequestError
    └── anything else                          -> ModelError

A failure has a *phase*: ``request`` (opening the call, or our own code
between reads) or ``stream`` (reading the provider's body). Only in the
stream phase does a ``ValueError`` (bad JSON, bad UTF-8) or an
``AttributeError``/``TypeError``/``KeyError`` from litellm's chunk parser
mean the provider sent garbage; in the request phase such an error is a bug
or a broken installation.

The third-party exception types behind "timeout", "connection", "context
window" and "bad request" come from a map loaded lazily from the libraries
already imported (httpx's ``_load_httpcore_exceptions`` habit).

Provider messages are quoted in ours, so every message is passed through
:func:`redact`: the value of any API key or token in the environment (and
the key given explicitly) never reaches an error message.

No library is imported here: an exception of a library's type can only
exist once that library is loaded, so the map reads ``sys.modules`` — mapping
an error never pays for an import.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..exceptions import (
    AuthenticationError,
    BadRequestError,
    ConnectionFailed,
    ContextWindowError,
    ModelError,
    ModelTimeout,
    ProviderDown,
    ProviderProtocolError,
    RateLimitError,
)
from ..redaction import PROVIDER_KEY_ENV, redact

__all__: list[str] = []  # used inside the llm package only

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


class MalformedStream(Exception):
    """Raised by the model layer when a provider's stream is not a whole answer.

    Internal: :func:`map_error` turns it into a
    :class:`~cortex_kernel.exceptions.ProviderProtocolError`.
    """


class StreamErrorEvent(Exception):
    """The provider's ``error`` object inside a 200 stream (vLLM, sglang, proxies do this).

    Raised by :class:`~cortex_kernel.llm.sse.SSEEvents`; classified by its
    ``status_code`` (the error's ``code`` when it is an HTTP status, else 500,
    as litellm's own iterator does).
    """

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    @classmethod
    def of(cls, error: object) -> StreamErrorEvent:
        """The exception for an event's ``error`` value."""
        if not isinstance(error, dict):
            return cls(str(error), 500)
        message, code = error.get("message"), error.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else 500
        return cls(message if isinstance(message, str) else str(error), status)


#: Where a failure happened: opening the call, or reading the provider's body.
Phase = Literal["request", "stream"]

ErrorKind = Literal[
    "protocol",
    "installation",
    "auth",
    "context_window",
    "timeout",
    "rate_limit",
    "connection",
    "provider_down",
    "bad_request",
    "other",
]

#: The kinds worth another attempt before the first token.
RETRYABLE: frozenset[ErrorKind] = frozenset(
    {"timeout", "rate_limit", "connection", "provider_down"}
)

#: (module, exception type, kind): what the libraries' own types mean.
_THIRD_PARTY: tuple[tuple[str, str, str], ...] = (
    ("litellm", "ContextWindowExceededError", "context_window"),
    ("openai", "APITimeoutError", "timeout"),  # litellm.Timeout derives from it
    ("httpx", "TimeoutException", "timeout"),
    ("aiohttp", "ServerTimeoutError", "timeout"),
    ("openai", "APIConnectionError", "connection"),
    ("httpx", "TransportError", "connection"),  # ConnectError, ReadError, RemoteProtocolError…
    ("aiohttp", "ClientConnectionError", "connection"),
    ("aiohttp", "ClientPayloadError", "connection"),
    ("openai", "BadRequestError", "bad_request"),
)
_BUILTIN: dict[str, tuple[type[BaseException], ...]] = {
    "timeout": (TimeoutError,),
    "connection": (ConnectionError,),
}
#: What a parser raises on bytes that are not what it expected.
_DECODE_ERRORS = (ValueError, AttributeError, TypeError, KeyError, IndexError)
#: Real transport failures and status answers (not litellm's wrappers, which wrap garbage too).
_TRANSPORT: tuple[tuple[str, str], ...] = (
    ("httpx", "TransportError"),
    ("httpx", "HTTPStatusError"),
    ("openai", "APIStatusError"),
    ("aiohttp", "ClientConnectionError"),
    ("aiohttp", "ClientPayloadError"),
)


def _exception_types() -> dict[str, tuple[type[BaseException], ...]]:
    """Kind -> exception types, from the libraries loaded so far."""
    return _load_exception_types(
        tuple(m for m in ("litellm", "openai", "httpx", "aiohttp") if m in sys.modules)
    )


@functools.cache
def _load_exception_types(loaded: tuple[str, ...]) -> dict[str, tuple[type[BaseException], ...]]:
    found: dict[str, list[type[BaseException]]] = {k: list(v) for k, v in _BUILTIN.items()}
    for module_name, attribute, kind in _THIRD_PARTY:
        if module_name not in loaded:
            continue
        exc_type = getattr(sys.modules[module_name], attribute, None)
        if isinstance(exc_type, type) and issubclass(exc_type, BaseException):
            found.setdefault(kind, []).append(exc_type)
    return {kind: tuple(types) for kind, types in found.items()}


def _is_kind(exc: BaseException, kind: str) -> bool:
    return isinstance(exc, _exception_types().get(kind, ()))


def _is_timeout(exc: BaseException) -> bool:
    return _is_kind(exc, "timeout")


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
    return any(
        _is_kind(current, "connection") or str(current).strip() == "Connection error."
        for current in _chain(exc)
    )


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


def _is_malformed(exc: BaseException, phase: Phase) -> bool:
    """The provider's body could not be read as completion chunks."""
    chain = _chain(exc)
    if any(isinstance(current, MalformedStream) for current in chain):
        return True
    if phase != "stream":
        return False
    # litellm's wrappers carry a made-up 500: only a real status answer or a
    # real transport failure rules garbage out.
    real = tuple(
        t
        for module, name in _TRANSPORT
        if module in sys.modules and isinstance(t := getattr(sys.modules[module], name, None), type)
    )
    if any(
        isinstance(current, (TimeoutError, ConnectionError, *real))
        and not type(current).__module__.startswith("litellm")
        for current in chain
    ):
        return False
    return any(
        isinstance(current, _DECODE_ERRORS) and not isinstance(current, ImportError)
        for current in chain
    )


def _is_stream_error_event(exc: BaseException) -> bool:
    # The OpenAI SDK raises its base APIError (no status) for an SSE `error`
    # event: the provider was reached and reported a failure mid-answer.
    openai = sys.modules.get("openai")
    base = getattr(openai, "APIError", None) if openai is not None else None
    return isinstance(base, type) and any(type(current) is base for current in _chain(exc))


def classify(exc: BaseException, *, phase: Phase = "request") -> ErrorKind:
    """The kind of a failure of a litellm call (see the module's tree, checked in order).

    Parameters
    ----------
    exc
        What the call raised.
    phase
        ``stream`` when it was raised while reading the provider's body.
    """
    inner = _unwrap(exc)
    status = _status(inner)
    rules: tuple[tuple[Callable[[], bool], ErrorKind], ...] = (
        (lambda: _is_malformed(exc, phase), "protocol"),
        (lambda: _is_programming_error(exc), "installation"),
        (lambda: _is_missing_key(exc) or status in (401, 403), "auth"),
        (lambda: _is_context_window(inner), "context_window"),
        (lambda: _is_timeout(inner), "timeout"),
        (lambda: status == 429, "rate_limit"),
        (lambda: phase == "stream" and _is_stream_error_event(exc), "provider_down"),
        (lambda: _is_connection(inner) and (status is None or status >= 500), "connection"),
        (lambda: status is not None and status >= 500, "provider_down"),
        (
            lambda: status in (400, 404, 413, 422) or _is_kind(inner, "bad_request"),
            "bad_request",
        ),
    )
    return next((kind for applies, kind in rules if applies()), "other")


def is_retryable(exc: BaseException, *, phase: Phase = "request") -> bool:
    """Whether a failure before the first token is worth another attempt.

    Timeouts, 429, connection failures and 5xx are; a bad key, a bad request,
    a too-long prompt, a garbled answer or a bug are not (a retry would fail
    the same way).
    """
    return classify(exc, phase=phase) in RETRYABLE


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
    if _is_kind(exc, "context_window"):
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


def _garbage_detail(exc: BaseException, secrets: Iterable[str | None]) -> str | None:
    """What was wrong with the provider's bytes: ``JSONDecodeError: Expecting value…``."""
    for current in _chain(exc):
        if isinstance(current, MalformedStream):
            return _detail(current, secrets)
        if isinstance(current, _DECODE_ERRORS):
            return f"{type(current).__name__}: {_detail(current, secrets)}"
    return None


@dataclass(frozen=True)
class _Failure:
    """What a message may quote about one failure (see :func:`map_error`)."""

    exc: BaseException
    model: str
    where: str  # " at API_BASE", or ""
    detail: str  # the provider's words, redacted
    tries: str  # " after N attempts", or ""
    status: int | None
    timeout: float | None
    timeout_option: str
    phase: Phase
    secrets: tuple[str | None, ...]


def _protocol_message(f: _Failure) -> str:
    detail = _garbage_detail(f.exc, f.secrets) or f.detail
    return (
        f"The provider of model {f.model!r}{f.where} sent an answer that is not a stream of "
        f"chat completion chunks ({detail}); it was not retried. Check that the model's "
        "`api_base` option points at an OpenAI-compatible /v1 endpoint (not a web page or "
        "a proxy's error page), and the provider's status."
    )


def _installation_message(f: _Failure) -> str:
    return (
        f"Model {f.model!r} could not be called: {f.detail}. This is a problem with the "
        "installation, not the provider: reinstall cortex-kernel (and litellm), or "
        "choose another model (--model / %model)."
    )


def _auth_message(f: _Failure) -> str:
    env = key_env_for(f.model)
    hint = f"Set {env} in the kernel's environment" if env else "Set the provider's API key"
    return (
        f"The provider rejected the credentials for model {f.model!r}"
        f"{f' ({f.status})' if f.status in (401, 403) else ''}: {f.detail}. "
        f"{hint} (or pass the model's `api_key` option), then restart the kernel "
        "or choose another model (--model / %model)."
    )


def _context_window_message(f: _Failure) -> str:
    return (
        f"The prompt is too long for model {f.model!r}: {f.detail}. Shorten the history "
        "(start a new session), remove or shrink context feeds (their max_tokens), "
        "or choose a model with a larger context window (--model / %model)."
    )


def _timeout_message(f: _Failure) -> str:
    limit = f" {f.timeout:g} s" if f.timeout is not None else " the time allowed"
    flag = "--" + f.timeout_option.replace("_", "-")
    what = (
        f"sent no first token within{limit}{f.tries}"
        if f.timeout_option == "first_token_timeout"
        else f"sent nothing for{limit}{f.tries}"
    )
    return (
        f"Model {f.model!r}{f.where} {what}. Raise {flag} (on %model, %%agent or "
        f"cortex-kernel run; {f.timeout_option} in a manifest's model table), check the "
        "provider's status, or choose another model (--model)."
    )


def _rate_limit_message(f: _Failure) -> str:
    return (
        f"Model {f.model!r} is rate limited (429){f.tries}: {f.detail}. Wait a minute and run "
        "the cell again, raise the model's --retries option, or choose another "
        "model (--model / %model)."
    )


def _connection_message(f: _Failure) -> str:
    return (
        f"Cannot reach the provider of model {f.model!r}{f.where}{f.tries}: {f.detail}. Check "
        "the network, the model's `api_base` option and any proxy settings (HTTPS_PROXY)."
    )


def _provider_down_message(f: _Failure) -> str:
    code = " (an error event in its stream)" if f.phase == "stream" else f" ({f.status})"
    return (
        f"The provider of model {f.model!r} is failing{code}{f.tries}: {f.detail}. Try "
        "again later, raise the model's --retries option, or choose another model "
        "(--model / %model)."
    )


def _bad_request_message(f: _Failure) -> str:
    return (
        f"The provider rejected the request for model {f.model!r} ({f.status}): {f.detail}. "
        "Check the model name (--model / %model; any litellm model string, e.g. "
        "'openai/gpt-4o-mini') and the model options."
    )


def _other_message(f: _Failure) -> str:
    return (
        f"Model {f.model!r} failed{f.tries}: {type(_unwrap(f.exc)).__name__}: {f.detail}."
        " Run the cell again; if it persists, choose another model (--model / %model)."
    )


#: Each kind of failure (:func:`classify`): the error raised, and what its message says.
MESSAGES: dict[ErrorKind, tuple[type[ModelError], Callable[[_Failure], str]]] = {
    "protocol": (ProviderProtocolError, _protocol_message),
    "installation": (ModelError, _installation_message),
    "auth": (AuthenticationError, _auth_message),
    "context_window": (ContextWindowError, _context_window_message),
    "timeout": (ModelTimeout, _timeout_message),
    "rate_limit": (RateLimitError, _rate_limit_message),
    "connection": (ConnectionFailed, _connection_message),
    "provider_down": (ProviderDown, _provider_down_message),
    "bad_request": (BadRequestError, _bad_request_message),
    "other": (ModelError, _other_message),
}


def map_error(
    exc: BaseException,
    *,
    model: str,
    attempts: int = 1,
    timeout: float | None = None,
    timeout_option: str = "timeout",
    api_base: str | None = None,
    api_key: str | None = None,
    streamed_chars: int = 0,
    phase: Phase = "request",
) -> ModelError:
    """Turn an exception from a litellm call into our :class:`ModelError` tree.

    The kind (:func:`classify`) picks the class and the message from
    :data:`MESSAGES`.

    Parameters
    ----------
    exc
        What litellm, the OpenAI SDK, httpx or anyio raised.
    model
        The model string, named in the message.
    attempts
        How many requests were made (retries included).
    timeout, timeout_option
        The timeout in force and the option that sets it
        (``first_token_timeout`` or ``timeout``), quoted on a timeout.
    api_base, api_key
        The endpoint (quoted on connection errors) and the explicit key
        (redacted like the environment's keys).
    streamed_chars
        Characters already streamed when the failure came: a non-zero value
        adds that the partial turn was discarded.
    phase
        ``stream`` when the failure came while reading the provider's body.

    Returns
    -------
    ModelError
        A subclass chosen by kind; its message is free of secrets.
    """
    if isinstance(exc, ModelError):
        return exc
    inner = _unwrap(exc)
    secrets = (api_key,)
    failure = _Failure(
        exc=exc,
        model=model,
        where=f" at {api_base}" if api_base else "",
        detail=_detail(inner, secrets),
        tries=f" after {attempts} attempts" if attempts > 1 else "",
        status=_status(inner),
        timeout=timeout,
        timeout_option=timeout_option,
        phase=phase,
        secrets=secrets,
    )
    error_class, message = MESSAGES[classify(exc, phase=phase)]
    text = message(failure)
    if streamed_chars:
        text += (
            f" The stream broke after {streamed_chars} characters; the partial turn was"
            " discarded, run the cell again to retry."
        )
    return error_class(text)

"""The events of an OpenAI-style SSE body, read straight from litellm's HTTP response.

Why
---
litellm turns every streamed chunk into pydantic objects twice (its
provider iterator's ``ModelResponseStream``, then ``CustomStreamWrapper``'s
copy with logging, usage and rule checks): many times the CPU a chunk of
reading the same bytes here (``cortex-kernel bench llm``; the measured
figures are in docs/benchmarks.md). For ``openai/…`` models and the
OpenAI-compatible servers behind ``api_base`` — whether litellm sent the
request through the OpenAI SDK (its default) or its own HTTP handler
(``EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER=true``) — litellm still sends
the request (parameters, keys, headers, status errors mapped to its
exceptions) and :class:`SSEEvents` reads the response it opened, doing
exactly what their iterators do with a ``data:`` line (``json.loads``; an
``error`` object is a failure) but with plain dicts.

Two differences, both deliberate:

- a ``data:`` line that is not JSON is an error (:class:`MalformedStream`,
  a :class:`~cortex_kernel.exceptions.ProviderProtocolError` for the user);
  litellm's iterator skips it silently, which would drop text;
- the events are returned one network read at a time, so a caller pays its
  deadline and its per-chunk work once per read, not once per event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from .errors import MalformedStream, StreamErrorEvent

__all__: list[str] = []  # used inside the llm package only

_DONE = b"[DONE]"


def sse_response(stream: Any) -> Any:
    """The HTTP response under litellm's stream wrapper, when it can be read here.

    Two shapes qualify, both the OpenAI wire format and not yet read:
    litellm's own OpenAI chat-completions iterator (the exact class, not a
    provider's subclass that transforms chunks), and the OpenAI SDK's
    ``AsyncStream`` of an ``openai`` provider call (litellm's default path).
    ``None`` for anything else (other providers, a moved internal).
    """
    inner = getattr(stream, "completion_stream", None)
    kind = type(inner).__name__
    if kind == "OpenAIChatCompletionStreamingHandler":
        if getattr(inner, "async_response_iterator", None) is not None:
            return None  # litellm already reads it
        response = getattr(inner, "http_response", None)
    elif (
        kind == "AsyncStream"
        and type(inner).__module__.startswith("openai")
        and getattr(stream, "custom_llm_provider", None) == "openai"
    ):
        response = getattr(inner, "response", None)
        if getattr(response, "num_bytes_downloaded", 1) != 0:
            return None  # the SDK began reading it
    else:
        return None
    if response is None or not hasattr(response, "aiter_bytes"):
        return None
    return response


class SSEEvents:
    """The JSON objects of the ``data:`` lines of an SSE body.

    Parameters
    ----------
    response
        An httpx response opened with ``stream=True`` (not read yet).
    """

    def __init__(self, response: Any) -> None:
        self.response = response
        self._reads: AsyncIterator[bytes] = response.aiter_bytes()
        self._tail = b""
        self.done = False  # ``data: [DONE]`` came
        self._error: Exception | None = None  # raised after the events before it

    @property
    def content_type(self) -> str:
        """The response's content type (``""`` when it has none)."""
        return str(self.response.headers.get("content-type", ""))

    async def next_events(self) -> list[dict[str, Any]] | None:
        """The events of the next network read that completes a line; ``None`` at the end.

        Raises
        ------
        MalformedStream
            A ``data:`` line that is not a JSON object.
        StreamErrorEvent
            An event carrying the provider's ``error`` object.
        """
        if self._error is not None:
            error, self._error = self._error, None
            self.done = True
            raise error
        while not self.done:
            try:
                data = await self._reads.__anext__()
            except StopAsyncIteration:
                return self._last_line()
            lines = (self._tail + data).split(b"\n")
            self._tail = lines.pop()
            events = self._decode(lines)
            if events or self.done:
                return events
        return None

    def _last_line(self) -> list[dict[str, Any]] | None:
        # A body that ends without a newline: its last line is taken when it
        # is whole JSON; a line cut mid-JSON is no event (SSE drops an
        # unterminated event), so the stream ends without a finish reason.
        tail, self._tail = self._tail, b""
        self.done = True
        try:
            events = self._decode([tail])
        except MalformedStream:
            return None
        return events or None

    def _decode(self, lines: list[bytes]) -> list[dict[str, Any]]:
        """The events of ``lines``; a bad line is raised after the events before it."""
        events: list[dict[str, Any]] = []
        try:
            self._decode_into(events, lines)
        except (MalformedStream, StreamErrorEvent) as exc:
            if not events:
                raise
            self._error = exc
        return events

    def _decode_into(self, events: list[dict[str, Any]], lines: list[bytes]) -> None:
        for line in lines:
            # Blank lines end events; `:` comments, `event:` and `id:` carry nothing we use.
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if not payload:
                continue
            if payload == _DONE:
                self.done = True
                break
            try:
                event = json.loads(payload)
            except ValueError:
                text = payload[:80].decode("utf-8", "replace")
                raise MalformedStream(f"a data: line that is not JSON: {text!r}") from None
            if not isinstance(event, dict):
                raise MalformedStream(
                    f"a data: line that is not a JSON object: {type(event).__name__}"
                )
            error = event.get("error")
            if error:
                raise StreamErrorEvent.of(error)
            events.append(event)

"""A scriptable OpenAI-compatible streaming server on 127.0.0.1, for tests.

Tests talk to it through litellm's real HTTP client
(``model="openai/x", api_base=server.api_base, api_key="…"``), so the whole
path — request, SSE framing, chunked transfer, connection close — is the one
a real provider exercises. Nothing of litellm is patched.

Usage::

    with FakeOpenAI() as server:
        server.error(429, times=2, retry_after=0)
        server.stream("<thought>hi</thought>", chunk_size=3, delay=0.001)
        ...  # call the model with api_base=server.api_base
        assert len(server.requests) == 3
        assert server.requests[-1].body["messages"][0]["role"] == "system"

Each request takes the next scripted reply in order; when the script is
empty the server answers 500 with a message saying so (a test that asks for
more than it scripted fails loudly instead of hanging). Every request is
recorded (:class:`RecordedRequest`): its JSON body, its headers, how many
chunks were sent and whether the client disconnected before the reply was
complete.

The server is HTTP/1.1 with chunked transfer encoding, so a cut connection
is a protocol error for the client (an incomplete chunked body), not a
silent end of stream — as with a real provider.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "FakeOpenAI",
    "FakeOpenAIProcess",
    "RecordedRequest",
    "Reply",
    "sse_tool_calls",
    "text_reply",
]


@dataclass
class Reply:
    """One scripted reply.

    Attributes
    ----------
    kind
        ``stream`` (SSE chunks), ``error`` (an HTTP error status), ``hang``
        (headers never come) or ``raw`` (``body`` as it is, status 200).
    chunks
        For ``stream``: the ``delta`` objects to send, one SSE event each.
    delay
        Seconds to sleep before each chunk (pacing, e.g. 0.001 for 1,000/s).
    first_delay
        Seconds to sleep before the response headers.
    cut_after
        For ``stream``: drop the connection after this many chunks.
    hang_after
        For ``stream``: stop sending (without closing) after this many chunks.
    usage
        ``(prompt_tokens, completion_tokens)`` sent as a final usage chunk
        when the request asked for ``stream_options.include_usage``.
    status, retry_after, message
        For ``error``.
    hang_seconds
        How long a hang lasts at most (the server thread must end).
    body, content_type
        For ``raw``: the bytes to send (as text) and their content type.
    compute
        Made at request time: called with the request's JSON body, it
        returns the reply to send (a server whose answer depends on what
        it was asked, e.g. on a ``grammar``).
    gates
        For ``stream``: event number (in the order sent: the deltas, the
        finish chunk, the usage chunk) → a :class:`threading.Event` the
        server waits for before sending that event, so a test can hold the
        rest of a stream until the client has done something. A gate not
        set within ``gate_timeout`` seconds is noted in
        :attr:`RecordedRequest.gates_missed` and the stream goes on.
        In-process servers only.
    """

    kind: str = "stream"
    chunks: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0
    first_delay: float = 0.0
    cut_after: int | None = None
    hang_after: int | None = None
    usage: tuple[int, int] | None = (11, 7)
    status: int = 500
    retry_after: float | None = None
    message: str = ""
    hang_seconds: float = 30.0
    finish_reason: str = "stop"
    body: str = ""
    content_type: str = "text/event-stream"
    compute: Callable[[dict[str, Any]], Reply] | None = None
    gates: dict[int, threading.Event] = field(default_factory=dict)
    gate_timeout: float = 10.0


@dataclass
class RecordedRequest:
    """What the server saw of one request."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    chunks_sent: int = 0
    completed: bool = False
    disconnected: bool = False
    first_byte_at: float | None = None  # time.perf_counter() of the first body byte
    chunk_sent_at: list[float] = field(default_factory=list)
    gates_missed: list[int] = field(default_factory=list)  # gates not set in time
    done: threading.Event = field(default_factory=threading.Event)


def sse_tool_calls(calls: list[tuple[str, str, str]], pieces: int = 3) -> list[dict[str, Any]]:
    """Delta objects that stream ``calls`` (``(id, name, arguments_json)``) as
    OpenAI does: the id and name first, then the arguments in ``pieces`` parts."""
    deltas: list[dict[str, Any]] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        step = max(1, -(-len(arguments) // pieces))
        for start in range(0, len(arguments), step):
            part = arguments[start : start + step]
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    return deltas


def text_reply(
    text: str,
    *,
    chunk_size: int = 8,
    delay: float = 0.0,
    chunks: list[str] | None = None,
    **options: Any,
) -> Reply:
    """A ``stream`` reply of ``text`` in ``chunk_size`` pieces (or the given ``chunks``)."""
    if chunks is None:
        chunks = [text[i : i + chunk_size] for i in range(0, len(text), chunk_size)]
    deltas: list[dict[str, Any]] = [{"content": piece} for piece in chunks]
    return Reply(kind="stream", chunks=deltas, delay=delay, **options)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_GET(self) -> None:
        fake = self.server.fake
        with fake._lock:
            fake.gets.append(self.path)
        status, payload = fake.get_routes.get(self.path, (404, {"error": {"message": "not found"}}))
        self._send_json(status, payload)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        record = RecordedRequest(
            path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=body
        )
        fake = self.server.fake
        reply = fake._next_reply()
        if reply is not None and reply.compute is not None:
            reply = reply.compute(body)
        with fake._lock:
            fake.requests.append(record)
        try:
            self._answer(record, reply)
        except (BrokenPipeError, ConnectionResetError, OSError):
            record.disconnected = True
            self.close_connection = True
        finally:
            record.done.set()

    # -- replies ---------------------------------------------------------

    def _answer(self, record: RecordedRequest, reply: Reply | None) -> None:
        if reply is None:
            self._send_json(500, {"error": {"message": "FakeOpenAI: no scripted reply left"}})
            record.completed = True
            return
        if reply.first_delay and self._sleep_or_disconnect(reply.first_delay):
            record.disconnected = True
            self.close_connection = True
            return
        if reply.kind == "error":
            headers = {}
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            message = reply.message or f"scripted error {reply.status}"
            self._send_json(
                reply.status,
                {"error": {"message": message, "type": "fake_error", "code": reply.status}},
                headers,
            )
            record.completed = True
            return
        if reply.kind == "raw":
            data = reply.body.encode("utf-8", "surrogateescape")
            self.send_response(200)
            self.send_header("content-type", reply.content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            record.completed = True
            return
        if reply.kind == "hang":
            if self._sleep_or_disconnect(reply.hang_seconds):
                record.disconnected = True
            self.close_connection = True
            return
        self._stream(record, reply, record.body)

    def _stream(self, record: RecordedRequest, reply: Reply, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        self.wfile.flush()
        model = str(body.get("model", "x"))
        created = int(time.time())
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created}
        base["model"] = model
        events: list[dict[str, Any]] = []
        for i, delta in enumerate(reply.chunks):
            d = dict(delta)
            if i == 0:
                d.setdefault("role", "assistant")
            events.append({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
        finish = (
            "tool_calls" if any("tool_calls" in c for c in reply.chunks) else reply.finish_reason
        )
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if wants_usage and reply.usage is not None:
            prompt, completion = reply.usage
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            events.append({**base, "choices": [], "usage": usage})
        paced_from = time.monotonic()
        for i, event in enumerate(events):
            if reply.cut_after is not None and i >= reply.cut_after:
                # Drop the connection without the terminating chunk.
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            gate = reply.gates.get(i)
            if gate is not None and not gate.wait(reply.gate_timeout):
                record.gates_missed.append(i)
            if reply.hang_after is not None and i >= reply.hang_after:
                if self._sleep_or_disconnect(reply.hang_seconds):
                    record.disconnected = True
                self.close_connection = True
                return
            # Paced on an absolute schedule, so sleep overshoot does not drift the rate.
            if reply.delay and self._sleep_until(paced_from + (i + 1) * reply.delay):
                record.disconnected = True
                self.close_connection = True
                return
            if self._client_gone():
                record.disconnected = True
                self.close_connection = True
                return
            data = f"data: {json.dumps(event)}\n\n".encode()
            now = time.perf_counter()  # stamped before the write: the client can't be earlier
            self._write_chunk(data)
            if record.first_byte_at is None:
                record.first_byte_at = now
            record.chunk_sent_at.append(now)
            record.chunks_sent += 1
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        record.completed = True
        # Linger briefly: a client that closes right after the last byte is
        # not a disconnect, but one that closed before is.

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    # -- disconnect detection --------------------------------------------

    def _client_gone(self) -> bool:
        """Whether the client closed its end (EOF or reset on the socket)."""
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            peeked: bytes = sock.recv(1, socket.MSG_PEEK)
            return peeked == b""
        except (ConnectionResetError, OSError):
            return True

    def _sleep_or_disconnect(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; return ``True`` early if the client left."""
        return self._sleep_until(time.monotonic() + seconds)

    def _sleep_until(self, deadline: float) -> bool:
        """Sleep until ``deadline`` (monotonic); return ``True`` early if the client left."""
        while True:
            if self._client_gone():
                return True
            if self.server.fake._closing.is_set():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, 0.005))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up between requests is normal here (closed
        # streams are the point of several tests); anything else is shown.
        import sys

        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class FakeOpenAI:
    """An OpenAI-compatible ``/v1/chat/completions`` SSE server in a thread.

    Use as a context manager; :attr:`api_base` is the ``api_base`` to give
    litellm. Script replies with :meth:`stream`, :meth:`tool_calls`,
    :meth:`error`, :meth:`hang` (each appends to the queue and returns the
    server, so calls chain), or :meth:`raw` for a broken answer; read
    :attr:`requests` afterwards.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        #: GET path -> (status, JSON payload); anything else is a 404.
        self.get_routes: dict[str, tuple[int, Any]] = {}
        #: The paths of the GET requests received, in order.
        self.gets: list[str] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> FakeOpenAI:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        assert self._server is not None, "use FakeOpenAI as a context manager"
        return int(self._server.server_address[1])

    @property
    def api_base(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script ------------------------------------------------------------

    def add(self, reply: Reply, times: int = 1) -> FakeOpenAI:
        """Queue ``reply`` ``times`` times."""
        with self._lock:
            for _ in range(times):
                self._replies.append(reply)
        return self

    def stream(
        self,
        text: str,
        *,
        chunk_size: int = 8,
        delay: float = 0.0,
        chunks: list[str] | None = None,
        **options: Any,
    ) -> FakeOpenAI:
        """Stream ``text`` as content deltas of ``chunk_size`` characters (or
        the given ``chunks``); other :class:`Reply` fields as keywords."""
        reply = text_reply(text, chunk_size=chunk_size, delay=delay, chunks=chunks, **options)
        return self.add(reply)

    def tool_calls(
        self, calls: list[tuple[str, str, str]], *, content: str = "", **options: Any
    ) -> FakeOpenAI:
        """Stream native tool calls ``(id, name, arguments_json)``, after
        optional ``content`` text."""
        deltas: list[dict[str, Any]] = [{"content": content}] if content else []
        deltas += sse_tool_calls(calls)
        return self.add(Reply(kind="stream", chunks=deltas, **options))

    def error(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after: float | None = None,
        message: str = "",
    ) -> FakeOpenAI:
        """Answer ``status`` to the next ``times`` requests."""
        reply = Reply(kind="error", status=status, retry_after=retry_after, message=message)
        return self.add(reply, times)

    def hang(self, seconds: float = 30.0) -> FakeOpenAI:
        """Accept the next request and never answer (until ``seconds`` pass)."""
        return self.add(Reply(kind="hang", hang_seconds=seconds))

    def raw(self, body: str, *, content_type: str = "text/event-stream") -> FakeOpenAI:
        """Answer 200 with ``body`` as it is: garbage, an HTML page, a cut-off stream."""
        return self.add(Reply(kind="raw", body=body, content_type=content_type))

    def _next_reply(self) -> Reply | None:
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def wait_done(self, index: int = -1, timeout: float = 5.0) -> RecordedRequest:
        """Wait until the server has finished answering request ``index``."""
        deadline = time.monotonic() + timeout
        while not self.requests and time.monotonic() < deadline:
            time.sleep(0.005)
        record = self.requests[index]
        record.done.wait(max(0.0, deadline - time.monotonic()))
        return record


def _child_main() -> None:
    """``python -m tests.llm.fake_openai``: the server side of :class:`FakeOpenAIProcess`.

    Reads the script as one JSON line on stdin, prints the port, serves until
    a second line arrives, then prints the records as one JSON line.
    """
    import sys

    script = json.loads(sys.stdin.readline())
    with FakeOpenAI() as server:
        for fields in script:
            if fields.get("usage") is not None:
                fields["usage"] = tuple(fields["usage"])
            server.add(Reply(**fields))
        print(server.port, flush=True)
        sys.stdin.readline()
        for record in server.requests:
            record.done.wait(5)
        keep = ("path", "body", "chunks_sent", "completed", "disconnected")
        records = [
            {
                **{key: getattr(record, key) for key in keep},
                "first_byte_at": record.first_byte_at,
                "chunk_sent_at": record.chunk_sent_at,
            }
            for record in server.requests
        ]
        print(json.dumps(records), flush=True)


class FakeOpenAIProcess:
    """:class:`FakeOpenAI` in a child process, for measurements.

    The server then does not share the GIL with the client, so timings show
    the client's cost rather than thread switching. The whole script is
    given up front; :meth:`stop` returns each request's record as a dict
    (``first_byte_at`` and ``chunk_sent_at`` are ``time.perf_counter``
    values: on Linux the system-wide monotonic clock, the parent's too).
    A plain subprocess rather than multiprocessing, so nothing depends on
    how the parent's main module was started.
    """

    def __init__(self, replies: list[Reply]) -> None:
        from dataclasses import asdict

        self._script = json.dumps([asdict(reply) for reply in replies])
        self._process: Any = None
        self.port = 0
        self.records: list[dict[str, Any]] = []

    @property
    def api_base(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FakeOpenAIProcess:
        import os
        import subprocess
        import sys
        from pathlib import Path

        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.llm.fake_openai"],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._process.stdin.write(self._script + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line.strip():
            self._process.kill()
            raise RuntimeError("the fake provider process did not start")
        self.port = int(line)
        return self

    def stop(self) -> list[dict[str, Any]]:
        """Stop the server and return its records (once)."""
        process = self._process
        if process is None:
            return self.records
        self._process = None
        try:
            process.stdin.write("stop\n")
            process.stdin.flush()
            line = process.stdout.readline()
            self.records = list(json.loads(line)) if line.strip() else []
        finally:
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except Exception:
                process.kill()
                process.wait()
            process.stdout.close()
        return self.records

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":
    _child_main()

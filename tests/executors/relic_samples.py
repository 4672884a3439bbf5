"""A Python relic and an HTTP server relic used by the relic tests (and notebook 06)."""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cortex_kernel.exceptions import RelicCrashed

__all__ = ["Counter"]


class Counter:
    """A counter that remembers its value between calls."""

    made = 0  # objects made in this process (a restart makes another)

    def __init__(self, start: int = 0) -> None:
        Counter.made += 1
        self.value = start
        self.closed = False

    def incr(self, by: int = 1) -> int:
        """Add ``by``; return the new value."""
        self.value += by
        return self.value

    def get(self) -> int:
        """The current value."""
        return self.value

    def fail(self, why: str = "nope") -> None:
        """Raise an ordinary error (the call fails, the object stays)."""
        raise ValueError(why)

    def break_down(self) -> None:
        """Raise RelicCrashed (the object is dropped; the next use makes a new one)."""
        raise RelicCrashed("the counter broke")

    def nap(self, seconds: float) -> float:
        """Sleep on the relic's thread."""
        time.sleep(seconds)
        return seconds

    async def anap(self, seconds: float) -> float:
        """Sleep on the event loop."""
        import anyio

        await anyio.sleep(seconds)
        return seconds

    def close(self) -> None:
        self.closed = True


class _Handler(BaseHTTPRequestHandler):
    count = 0

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(200 if self.path == "/health" else 404, {"ok": self.path == "/health"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        params = json.loads(self.rfile.read(length) or b"{}")
        op = self.path.strip("/")
        if op == "incr":
            _Handler.count += int(params.get("by", 1))
            self._answer(200, _Handler.count)
        elif op == "get":
            self._answer(200, _Handler.count)
        elif op == "pid":
            self._answer(200, os.getpid())
        elif op == "env":
            self._answer(200, dict(os.environ))
        elif op == "nap":
            time.sleep(float(params.get("seconds", 1)))
            self._answer(200, "rested")
        elif op == "fail":
            self._answer(500, {"error": "the server says no"})
        else:
            self._answer(404, {"error": f"no operation {op}"})


def serve(port: int) -> None:
    """Serve the counter on 127.0.0.1:``port`` until killed."""
    ThreadingHTTPServer(("127.0.0.1", port), _Handler).serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]))

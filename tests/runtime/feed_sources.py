"""Python callables used as context-feed sources by the tests (``module:function``)."""

from __future__ import annotations

import anyio

CALLS: list[str] = []


def prices(symbol: str = "ACME") -> dict[str, object]:
    """A price quote; counts its calls so tests can see the cache work."""
    CALLS.append(symbol)
    return {"symbol": symbol, "price": 100 + len(CALLS)}


def broken() -> str:
    """A source that always fails."""
    raise ConnectionError("quote service down")


def long_text() -> str:
    """More text than a small feed may hold."""
    return "word " * 2000


class Ticker:
    """An async source counting its calls; the tests wait on the count, never on a clock."""

    def __init__(self) -> None:
        self.count = 0
        self.fail_from: int | None = None
        self.hang = False
        self.cancelled = 0
        self._waiters: list[tuple[int, anyio.Event]] = []

    def reset(self, fail_from: int | None = None, hang: bool = False) -> None:
        self.__init__()  # type: ignore[misc]
        self.fail_from, self.hang = fail_from, hang

    async def __call__(self) -> str:
        self.count += 1
        for calls, event in self._waiters:
            if self.count >= calls:
                event.set()
        if self.hang and self.count > 1:
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled += 1
        if self.fail_from is not None and self.count >= self.fail_from:
            raise ConnectionError(f"ticker down at call {self.count}")
        return f"tick {self.count}"

    async def wait_for(self, calls: int) -> int:
        if self.count < calls:
            event = anyio.Event()
            self._waiters.append((calls, event))
            await event.wait()
        return self.count


TICKER = Ticker()


async def tick() -> str:
    """The periodic source of the tests."""
    return await TICKER()


async def wait_ticks(n: int) -> int:
    """A tool that returns once the ticker was called ``n`` times."""
    return await TICKER.wait_for(n)

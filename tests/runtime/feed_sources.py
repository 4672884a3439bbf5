"""Python callables used as context-feed sources by the tests (``module:function``)."""

from __future__ import annotations

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

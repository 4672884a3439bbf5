"""Tools for the workflow tests (manifest ``callable`` tools)."""

from __future__ import annotations


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def explode(message: str = "disk full") -> int:
    """Always fails."""
    raise RuntimeError(message)

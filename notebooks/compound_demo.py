"""Tools for notebook 06 (sub-agents, workflows, relics): plain functions."""

from __future__ import annotations


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


def divisors(n: int) -> list[int]:
    """The divisors of n between 2 and n - 1."""
    return [d for d in range(2, n) if n % d == 0]

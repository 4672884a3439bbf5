"""Tools of the eval's test suite."""

from __future__ import annotations

from cortex_kernel.runtime.tools import tool


@tool
def population(city: str) -> int:
    """Population of a French city."""
    return {"Lyon": 520_774, "Nice": 348_085}[city]


def untagged(x: int) -> int:
    """Not a tool unless named."""
    return x

"""Memory sizes in Docker's notation (``512m``): the pattern they are checked against, and a parser.

A manifest writes every size this way (a container's ``memory``, a
sandbox's address-space limit, the Dask results kept on the cluster); the
Docker engine takes the text as it is, the rest read it with
:func:`memory_bytes`.
"""

from __future__ import annotations

__all__ = ["MEMORY_PATTERN", "memory_bytes"]

#: A size: digits and an optional unit, ``b``, ``k``, ``m`` or ``g`` (either case).
MEMORY_PATTERN = r"^[0-9]+[bkmgBKMG]?$"

_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def memory_bytes(text: str) -> int:
    """``"512m"`` as bytes (a bare number is bytes)."""
    unit = text[-1].lower()
    if unit in _UNITS:
        return int(text[:-1]) * _UNITS[unit]
    return int(text)

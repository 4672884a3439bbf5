"""Tools the Dask tests run on a real LocalCluster (importable by its worker processes)."""

from __future__ import annotations

import os
import time
from typing import Any

from cortex_kernel import tool


def square(x: int) -> int:
    """The square of x."""
    return x * x


def pid() -> int:
    """The process this call ran in."""
    return os.getpid()


def boom(message: str) -> None:
    """Always fails."""
    raise ValueError(message)


def spin(seconds: float) -> dict[str, Any]:
    """Pure-Python work for ``seconds`` (no sleeping: a thread that only a raise can stop)."""
    start = time.perf_counter()
    count = 0
    while time.perf_counter() - start < seconds:
        count += 1
    return {"pid": os.getpid(), "spent": time.perf_counter() - start}


def raises_interrupted(token: str = "") -> None:
    """Raises InterruptedError by itself (no interrupt asked for it)."""
    raise InterruptedError("the tool's own")


def blob(n: int) -> bytes:
    """n bytes of data."""
    return bytes(range(256)) * (n // 256)


def size(data: Any) -> int:
    """How many bytes data has (bytes, or a future of them when they stayed on the cluster)."""
    return len(data)


@tool(executor="dask")
def cube(x: int) -> int:
    """x to the third, on the cluster."""
    return x**3

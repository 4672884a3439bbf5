"""Python callables used as manifest tools by the tests (``module:function``)."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel


def scale(values: list[float], factor: float = 2.0) -> list[float]:
    """Multiply every value.

    Parameters
    ----------
    values : list of float
        The numbers to scale.
    factor : float
        What to multiply by.
    """
    return [v * factor for v in values]


async def greet(name: str) -> str:
    """Say hello.

    Args:
        name (str): Who to greet,
            by first name.
    """
    await anyio.lowlevel.checkpoint()
    return f"hello {name}"


def thread_name() -> str:
    """The name of the thread the tool ran in."""
    return threading.current_thread().name


async def slow() -> str:
    """Sleep for a minute."""
    await anyio.sleep(60)
    return "done"

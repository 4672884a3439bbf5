"""Sources and a tool for notebook 07: a job queue the agent watches through a periodic feed.

``queue_length`` is the source of the ``queue`` feed (refreshed in the
background every 0.1 s while a run is active); ``process_batch`` is a tool
that takes jobs off the queue, so the next turn's prompt shows fewer.
"""

from __future__ import annotations

import anyio

QUEUE = {"waiting": 12}


async def queue_length() -> str:
    """How many jobs wait (the ``queue`` feed's source)."""
    return f"{QUEUE['waiting']} jobs waiting"


async def process_batch(size: int) -> str:
    """Process up to ``size`` jobs from the queue.

    Parameters
    ----------
    size
        How many jobs to take.
    """
    done = min(size, QUEUE["waiting"])
    QUEUE["waiting"] -= done
    await anyio.sleep(0.5)  # the work; the queue feed refreshes meanwhile
    return f"processed {done} jobs"


def backlog() -> dict[str, object]:
    """The age of the oldest job (a source the agent adds itself)."""
    return {"oldest_job_minutes": 42, "owner": "ops"}

"""The Docker engine for tests: skip visibly without one, but fail when ``CI`` is set."""

from __future__ import annotations

import os
from typing import Any

import pytest

from cortex_kernel.exceptions import ToolError


def engine_or_skip() -> Any:
    """A client of the engine, or skip (fail under CI) naming why there is none."""
    from cortex_kernel.executors.docker import docker_client

    try:
        return docker_client()
    except ToolError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and no Docker engine answers: {exc}")
        pytest.skip(f"no Docker engine: {exc}")


def sandbox_image() -> str:
    """The locally built sandbox image (built once, cached by tag)."""
    from cortex_kernel.executors.images import ensure_sandbox_image

    return ensure_sandbox_image(engine_or_skip())


def our_containers() -> list[Any]:
    """Every container carrying our label (running or not)."""
    from cortex_kernel.executors.docker import LABEL

    client = engine_or_skip()
    return list(client.containers.list(all=True, filters={"label": LABEL}))

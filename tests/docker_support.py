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


def our_containers(token: str) -> list[Any]:
    """Containers carrying our label and the test's ``cortex-kernel.test=<token>`` label.

    The token keeps one test from seeing another's containers (test runs may
    share the engine).
    """
    from cortex_kernel.executors.docker import LABEL

    client = engine_or_skip()
    labels = [LABEL, f"{TEST_LABEL}={token}"]
    return list(client.containers.list(all=True, filters={"label": labels}))


#: The label tests put on their containers (``labels`` in a manifest's docker entry).
TEST_LABEL = "cortex-kernel.test"


def new_token() -> str:
    """A fresh value for :data:`TEST_LABEL`."""
    import uuid

    return uuid.uuid4().hex[:12]

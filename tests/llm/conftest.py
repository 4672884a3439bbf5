"""Fixtures of the litellm boundary tests: the anyio backend and a fake provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A fresh scriptable OpenAI-compatible server on 127.0.0.1."""
    with FakeOpenAI() as fake:
        yield fake


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # litellm 1.106 reads pydantic's deprecated instance attributes on every
    # chunk; the warning is theirs, not ours, and drowns the report.
    here = str(Path(__file__).parent)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.filterwarnings("ignore:Accessing the 'model_"))

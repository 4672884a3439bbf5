"""Shared test settings: an ``on_event`` callback that raises fails the test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def _event_handler_errors_fail(request: pytest.FixtureRequest) -> Iterator[None]:
    """An ``on_event`` callback that raises fails the test.

    A run logs such an error and goes on (a view's bug must not stop the
    agent), so in a test it would pass unseen: notebook 06's critic
    sub-agent hit one that only nbval's stderr comparison caught.
    """
    if request.node.get_closest_marker("event_handler_errors") is not None:
        yield
        return
    handler = _Records()
    logger = logging.getLogger("cortex_kernel.runtime.loop")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    raised = [r for r in handler.records if r.getMessage().startswith("on_event raised")]
    if raised:
        formatter = logging.Formatter()
        details = "\n".join(formatter.format(r) for r in raised)
        pytest.fail(f"an on_event callback raised during the test:\n{details}")

"""Shared test settings: transcripts go to a temp folder; a raising ``on_event`` fails a test."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _transcripts_in_a_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs of the whole session write their transcripts to a temp folder.

    Set in ``os.environ`` so that kernels and processes the tests start
    inherit it; the user's own state folder is never written. A test that
    sets ``CORTEX_TRANSCRIPT_DIR`` itself (or removes it) still wins.
    """
    before = os.environ.get("CORTEX_TRANSCRIPT_DIR")
    os.environ["CORTEX_TRANSCRIPT_DIR"] = str(tmp_path_factory.mktemp("transcripts"))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CORTEX_TRANSCRIPT_DIR", None)
        else:
            os.environ["CORTEX_TRANSCRIPT_DIR"] = before


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

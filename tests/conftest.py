"""``CORTEX_COMPILED_DIR``: run the tests on the compiled parser built there.

``make test`` runs ``tests/protocol`` a second time this way, on the copy of
the package that ``python hatch_build.py --out DIR`` compiled with mypyc, so
the pure-Python and the compiled parser both pass the same tests. The path
goes first on ``sys.path`` before any test imports ``cortex_kernel``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_COMPILED = os.environ.get("CORTEX_COMPILED_DIR", "")

if _COMPILED:
    if "cortex_kernel" in sys.modules:  # pragma: no cover - a plugin imported it first
        raise pytest.UsageError("CORTEX_COMPILED_DIR: cortex_kernel was imported before conftest")
    sys.path.insert(0, str(Path(_COMPILED).resolve()))
    import cortex_kernel.protocol.parser as _parser

    if _parser.__file__ is None or _parser.__file__.endswith(".py"):
        raise pytest.UsageError(
            f"CORTEX_COMPILED_DIR={_COMPILED}: the parser there is not compiled "
            f"({_parser.__file__}); build it with `python hatch_build.py --out {_COMPILED}`"
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On the compiled build, skip the tests that patch or read the parser's Python code."""
    if not _COMPILED:
        return
    skip = pytest.mark.skip(reason="patches or introspects Python code; the parser is compiled")
    for item in items:
        if item.get_closest_marker("pure_python") is not None:
            item.add_marker(skip)


def pytest_report_header() -> str:
    """Say which parser the run tests."""
    import cortex_kernel.protocol.parser as parser

    return f"cortex_kernel parser: {parser.__file__}"


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

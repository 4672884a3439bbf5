"""``CORTEX_COMPILED_DIR``: run the tests on the compiled parser built there.

``make test`` runs ``tests/protocol`` a second time this way, on the copy of
the package that ``python hatch_build.py --out DIR`` compiled with mypyc, so
the pure-Python and the compiled parser both pass the same tests. The path
goes first on ``sys.path`` before any test imports ``cortex_kernel``.
"""

from __future__ import annotations

import os
import sys
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

"""The layering: protocol <- runtime <- executors/llm <- agent <- front ends, no cycle.

The manifest is read at the edge: the runtime and the executors never import it.

Checked on the import graph of every module (lazy imports included) by
``scripts/import_graph.py``, which also prints it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "import_graph.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


def test_no_upward_import_no_cycle_no_foreign_private_module() -> None:
    graph = _script()
    edges = graph.graph()
    assert len(edges) > 40  # the walk found the package
    assert graph.violations(edges) == []


def test_every_module_has_a_layer() -> None:
    graph = _script()
    unplaced = {graph.layer_key(name) for name in graph.all_modules()} - set(graph.LAYERS)
    assert not unplaced, f"give {sorted(unplaced)} a layer in scripts/import_graph.py LAYERS"


def test_the_check_sees_an_upward_import() -> None:
    graph = _script()
    edges = graph.graph()
    edges["cortex_kernel.runtime.loop"] = {"cortex_kernel.llm.replay"}
    edges["cortex_kernel.llm.replay"] = {"cortex_kernel.runtime.loop"}
    problems = graph.violations(edges)
    assert any(p.startswith("upward import: cortex_kernel.runtime.loop") for p in problems)
    assert any(p.startswith("import cycle:") for p in problems)


def test_the_runtime_and_the_executors_never_import_the_manifest() -> None:
    graph = _script()
    edges = graph.graph()
    readers = {
        source
        for source, targets in edges.items()
        if any(
            t == "cortex_kernel.manifest" or t.startswith("cortex_kernel.manifest.")
            for t in targets
        )
    }
    assert readers, "the walk found the manifest's readers"
    assert not {graph.layer_key(source) for source in readers} & {"runtime", "executors", "llm"}
    # And the check says so when one does (at whatever layer the manifest sits).
    edges["cortex_kernel.executors.relic"] = {"cortex_kernel.manifest.agents"}
    problems = graph.violations(edges)
    assert "the manifest is read at the edge only: cortex_kernel.executors.relic imports " in (
        "".join(problems)
    )

"""The import graph of cortex_kernel, and the layering rules it must keep.

Run ``python scripts/import_graph.py`` to print the graph between layers
(every ``import`` counts, lazy ones inside functions and ``TYPE_CHECKING``
blocks included) and any rule it breaks; ``tests/test_layers.py`` asserts
there is none. The layers, lowest first (a module may import its own layer's
package or a lower layer, never a higher one)::

    base        exceptions, safejson, redaction, lazy_exports, model_options, names
    protocol    sans-IO parser (imports only base)
    runtime     scheduler, loop, session, ports
    executors   llm           (adapters behind runtime's ports; never each other)
    composition agent (the composition root), toolset (manifest tools -> registry),
                manifest (the file format, parsed into runtime and executor types)
    front ends  jupyter, evaluation, cli, headless, demo, bench

The manifest is read at the edge: only the composition and the front ends
import it (:data:`MANIFEST_READERS`), never the runtime or the executors.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = "cortex_kernel"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

LAYERS: dict[str, int] = {
    "exceptions": 0,
    "safejson": 0,
    "redaction": 0,
    "model_options": 0,
    "lazy_exports": 0,
    "names": 0,
    "protocol": 1,
    "runtime": 2,
    "executors": 3,
    "llm": 3,
    "agent": 4,
    "toolset": 4,
    "manifest": 4,
    "jupyter": 5,
    "evaluation": 5,
    "cli": 5,
    "headless": 5,
    "demo": 5,
    "bench": 5,
    "__init__": 5,
    "__main__": 5,
}


#: Layers whose packages must not import each other (the adapters behind the ports).
PEERS_APART = frozenset({1, 2, 3})

#: The only packages that may import the manifest (the composition root and the front ends).
MANIFEST_READERS = frozenset(
    {"agent", "toolset", "manifest", *(name for name, layer in LAYERS.items() if layer == 5)}
)


def module_name(path: Path) -> str:
    """``cortex_kernel/runtime/loop.py`` -> ``cortex_kernel.runtime.loop``."""
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every ``cortex_kernel`` module ``path`` imports, lazily or not."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # ``from . import x`` / ``from .pkg import mod``: the names may be modules.
            for alias in node.names:
                found.add(f"{target}.{alias.name}")
    modules = all_modules()
    return {m for m in found if m in modules and m != name}


def all_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def layer_key(module: str) -> str:
    """The layer a module belongs to: its subpackage, or the top-level module's name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    return {name: imports_of(path) for name, path in all_modules().items()}


def layer_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Layer -> the other layers it imports."""
    out: dict[str, set[str]] = defaultdict(set)
    for source, targets in edges.items():
        for target in targets:
            if layer_key(source) != layer_key(target):
                out[layer_key(source)].add(layer_key(target))
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def violations(edges: dict[str, set[str]]) -> list[str]:
    """Every import that breaks a rule, as a sentence."""
    problems: list[str] = []
    for source, targets in sorted(edges.items()):
        src = layer_key(source)
        for target in sorted(targets):
            dst = layer_key(target)
            if src == dst:
                continue
            if dst == "manifest" and src not in MANIFEST_READERS:
                problems.append(f"the manifest is read at the edge only: {source} imports {target}")
            if LAYERS[dst] > LAYERS[src]:
                problems.append(f"upward import: {source} ({src}) imports {target} ({dst})")
            elif LAYERS[dst] == LAYERS[src] and LAYERS[src] in PEERS_APART:
                problems.append(f"sideways import: {source} ({src}) imports {target} ({dst})")
            if any(
                part.startswith("_") and not part.startswith("__") for part in target.split(".")
            ):
                problems.append(f"private module of another package: {source} imports {target}")
    for component in cycles(edges):
        problems.append("import cycle: " + " -> ".join(component))
    return problems


def main() -> int:
    edges = graph()
    layers = layer_graph(edges)
    for layer in sorted(LAYERS, key=lambda name: (LAYERS[name], name)):
        if layer in layers or any(layer in targets for targets in layers.values()):
            targets = sorted(layers.get(layer, ()), key=lambda name: (-LAYERS.get(name, 9), name))
            print(f"{layer:>13} [{LAYERS[layer]}] -> {', '.join(targets) or '-'}")
    problems = violations(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports;", end=" ")
    print(f"{len(problems)} problem(s)")
    for problem in problems:
        print("  " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

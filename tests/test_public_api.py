"""Every package re-exports its public names from ``__init__`` with an exact ``__all__``."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

import cortex_kernel

PACKAGES = sorted(
    ["cortex_kernel"]
    + [m.name for m in pkgutil.iter_modules(cortex_kernel.__path__, "cortex_kernel.") if m.ispkg]
)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_exact(name: str) -> None:
    package = importlib.import_module(name)
    exported = list(package.__all__)
    assert len(exported) == len(set(exported)), "no duplicates"
    for public in exported:
        value = getattr(package, public)  # resolves (lazy packages load it now)
        assert not isinstance(value, ModuleType), f"{public} is a module, not a name"
        origin = getattr(value, "__module__", None)
        if origin and origin.startswith(name + "."):
            # Re-exported from a submodule: that module lists it as public too.
            defining = importlib.import_module(origin)
            assert public in getattr(defining, "__all__", ()), f"{origin} hides {public}"
    # Nothing public that the package itself defines is missing from __all__.
    ours = {
        key
        for key, value in vars(package).items()
        if not key.startswith("_")
        and not isinstance(value, ModuleType)
        and str(getattr(value, "__module__", "")).startswith(name)
    }
    assert ours - set(exported) == set()


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_has_an_all(name: str) -> None:
    assert importlib.import_module(name).__all__


def _type_checking_exports(package: ModuleType) -> dict[str, str]:
    """The ``X as X`` imports of the package's ``if TYPE_CHECKING:`` block: name -> module."""
    tree = ast.parse(inspect.getsource(package))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    module = "." * statement.level + (statement.module or "")
                    for alias in statement.names:
                        if alias.asname == alias.name:
                            found[alias.name] = module
    return found


LAZY = [name for name in PACKAGES if hasattr(importlib.import_module(name), "_EXPORTS")] + [
    name for name in PACKAGES if hasattr(importlib.import_module(name), "_LAZY")
]


@pytest.mark.parametrize("name", LAZY)
def test_lazy_names_are_the_ones_type_checkers_see(name: str) -> None:
    # A lazy package lists each name once for run time (its mapping) and once
    # for type checkers; a name in one and not the other is typed wrong or missing.
    package = importlib.import_module(name)
    mapping = getattr(package, "_EXPORTS", None) or package._LAZY
    assert _type_checking_exports(package) == mapping
    assert set(mapping) <= set(package.__all__)


# -- a module's __all__ is what other packages use -----------------------------

ROOT = Path(cortex_kernel.__file__).parent.parent
#: Packages whose modules keep to the rule: every one, so a new package does too.
#: (The root's own modules, agent, cli, redaction…, are one package to this
#: test, which would count none of their uses of each other: not held to it yet.)
SWEPT = [name for name in PACKAGES if name != "cortex_kernel"]
#: Public for users, though no other package of the project imports them.
DOCUMENTED = {
    "cortex_kernel.executors.dask_backend": {"ClusterValue"},  # a Dask tool's result
    "cortex_kernel.executors.mcp": {"McpError"},  # docs/manifest.md: a server that fails
    "cortex_kernel.protocol.parser_events": {"ADAPTER", "validate"},  # docs/protocol.md
    "cortex_kernel.runtime.code_writes": {"code_names", "risky_writes"},  # via changes
    "cortex_kernel.runtime.grounding": {"Evidence", "GroundingReport", "check", "figures", "mark"},
    "cortex_kernel.runtime.limits": {"Budget"},  # ExecutionContext.budget
    "cortex_kernel.runtime.ports": {"ToolSource"},  # Session(tool_sources=…)
    "cortex_kernel.runtime.run_events": {"RuntimeEventBase"},  # every event's base
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _outside(user: str, module: str) -> bool:
    """Whether ``user`` is another package than ``module``'s, or that package's ``__init__``."""
    package = module.rpartition(".")[0]
    return user == package or not user.startswith(package + ".")


def _imported_names() -> dict[str, set[str]]:
    """Module -> its names that modules of other packages import or read."""
    sources = [
        path
        for top in ("cortex_kernel", "benchmarks", "scripts")
        for path in (ROOT / top).rglob("*.py")
    ]
    known = {_module_name(path) for path in sources}
    used: dict[str, set[str]] = {}
    for path in sources:
        user = _module_name(path)
        here = user.split(".") if path.name == "__init__.py" else user.split(".")[:-1]
        tree = ast.parse(path.read_text())
        modules: dict[str, str] = {}  # local name -> a module imported under it
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                source = ".".join([*base, node.module] if node.module else base)
                for alias in node.names:
                    if f"{source}.{alias.name}" in known:
                        modules[alias.asname or alias.name] = f"{source}.{alias.name}"
                    elif _outside(user, source):
                        used.setdefault(source, set()).add(alias.name)
            elif isinstance(node, ast.Import):
                modules.update({a.asname: a.name for a in node.names if a.asname})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = modules.get(node.value.id)
                if module is not None and _outside(user, module):
                    used.setdefault(module, set()).add(node.attr)
    return used


def _entry_points() -> dict[str, set[str]]:
    """Module -> its names that ``pyproject.toml`` gives other programs (papermill, pygments)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = [project.get("scripts", {}), *project.get("entry-points", {}).values()]
    used: dict[str, set[str]] = {}
    for group in groups:
        for target in group.values():
            module, _, name = target.partition(":")
            used.setdefault(module, set()).add(name)
    return used


def _module_all(path: Path) -> list[str] | None:
    """A module's literal ``__all__``, read without importing it (``__main__`` runs on import)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
                return list(ast.literal_eval(node.value))
    return None


def test_module_all_names_only_what_other_packages_use() -> None:
    used = _imported_names()
    for module, names in _entry_points().items():
        used.setdefault(module, set()).update(names)
    extra: dict[str, list[str]] = {}
    for package in SWEPT:
        for path in sorted((ROOT / package.replace(".", "/")).rglob("*.py")):
            if path.name in ("__init__.py", "__main__.py"):  # packages: test_all_is_exact
                continue
            exported = _module_all(path)
            if exported is None:
                continue
            name = _module_name(path)
            allowed = used.get(name, set()) | DOCUMENTED.get(name, set())
            unused = sorted(set(exported) - allowed)
            if unused:
                extra[name] = unused
    assert extra == {}, "used only inside their package: leave them out of __all__"

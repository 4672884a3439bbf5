"""Every package re-exports its public names from ``__init__`` with an exact ``__all__``."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
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

"""Re-exporting a package's public names, each imported on first use (PEP 562).

A package whose import must stay cheap (the kernel imports the Jupyter layer
at start; ``cortex_kernel.llm`` must not import litellm; ``@tool`` must not
load the whole runtime) maps each public name to the module that defines
it, once, and gets ``__all__``, its module ``__getattr__`` and ``__dir__``
from that mapping. Type checkers read an ``if TYPE_CHECKING:`` block of the
same names, imported as ``X as X`` (an explicit re-export, since ``__all__``
is computed); ``tests/test_public_api.py`` checks that the two agree::

    if TYPE_CHECKING:
        from .session import Session as Session

    _EXPORTS = {"Session": ".session"}
    __all__ = sorted(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str], public: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    Parameters
    ----------
    package
        The package's ``__name__``.
    names
        Public name -> the (relative) module that defines it.
    public
        The package's ``__all__``.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        vars(sys.modules[package])[name] = value  # once loaded, a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__

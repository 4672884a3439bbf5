"""The Jupyter layer: the kernel, the ``%%agent`` magic, the live view, the kernelspec.

Public names are re-exported here, loaded on first use (the kernel must start
without importing the runtime).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .kernel import CortexKernel
    from .magics import load_ipython_extension, unload_ipython_extension
    from .runner import AgentRunner, run_cell
    from .view import RunView

__all__ = [
    "AgentRunner",
    "CortexKernel",
    "RunView",
    "load_ipython_extension",
    "run_cell",
    "unload_ipython_extension",
]

_LAZY: dict[str, str] = {
    "CortexKernel": ".kernel",
    "load_ipython_extension": ".magics",
    "unload_ipython_extension": ".magics",
    "RunView": ".view",
    "AgentRunner": ".runner",
    "run_cell": ".runner",
}


# PEP 562: each name is imported from its module on first use, so importing
# the package (the kernel does at start) costs nothing.
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)

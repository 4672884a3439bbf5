"""The Jupyter layer: the kernel, the ``%%agent`` magic, the live view, the kernelspec.

Public names are re-exported here, loaded on first use (the kernel must start
without importing the runtime).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:  # what type checkers see ("X as X": re-exported)
    from .kernel import CortexKernel as CortexKernel
    from .magics import load_ipython_extension as load_ipython_extension
    from .magics import unload_ipython_extension as unload_ipython_extension
    from .runner import AgentRunner as AgentRunner
    from .runner import run_cell as run_cell
    from .view import RunView as RunView

# At run time: each public name -> its module, imported on first use (PEP 562),
# so importing the package (the kernel does at start) costs nothing.
# tests/test_public_api.py checks that this and the block above name the same.
_EXPORTS = {
    "CortexKernel": ".kernel",
    "load_ipython_extension": ".magics",
    "unload_ipython_extension": ".magics",
    "AgentRunner": ".runner",
    "run_cell": ".runner",
    "RunView": ".view",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

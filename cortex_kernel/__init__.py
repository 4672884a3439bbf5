"""cortex-kernel: a Jupyter kernel for an LLM agent that acts while it thinks.

``%load_ext cortex_kernel`` in any IPython kernel enables ``%%agent`` cells;
the extension hooks import the Jupyter layer only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:  # what type checkers see ("X as X": re-exported)
    from .runtime.tools import tool as tool

# `from cortex_kernel import tool` without importing the runtime at `import cortex_kernel`.
_EXPORTS = {"tool": ".runtime.tools"}

__all__ = [
    "__version__",
    "load_ipython_extension",
    "relics",
    "unload_ipython_extension",
    *_EXPORTS,
]

__version__ = "0.11.0"

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, __all__)


def relics() -> Any:
    """The relics (persistent services) of this kernel: a ``RelicRegistry``.

    ``relics().status()`` lists them (name, kind, state, uptime, calls),
    ``relics().stop(NAME)`` stops one (its next use starts it again),
    ``relics().stop_all()`` stops them all; ``await relics().call(NAME, OP,
    {...})`` calls an operation as a ``relic`` action would. Only inside an
    IPython kernel (headless: ``session.relics``).

    Raises
    ------
    RuntimeError
        Outside IPython.
    """
    from IPython import get_ipython

    from .jupyter.runner import runner_for

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("cortex_kernel.relics() works in a notebook; headless: session.relics")
    return runner_for(shell).relics


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext cortex_kernel``: enable ``%%agent`` and the Cortex line magics."""
    from .jupyter.magics import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    """``%unload_ext cortex_kernel``."""
    from .jupyter.magics import unload_ipython_extension as unload

    unload(shell)

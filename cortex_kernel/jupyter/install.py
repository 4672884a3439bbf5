"""``cortex-kernel install``: register the ``cortex`` kernelspec with Jupyter.

Writes ``kernel.json`` (pointing at this interpreter, ``sys.executable``, so
the kernel runs in the environment that has the package) and the logos to a
temporary directory and hands it to ``KernelSpecManager.install_kernel_spec``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["install"]

KERNEL_NAME = "cortex"
DISPLAY_NAME = "Cortex Agent"


def kernel_json() -> dict[str, Any]:
    """The kernelspec's ``kernel.json`` for this interpreter."""
    return {
        "argv": [sys.executable, "-m", "cortex_kernel.jupyter", "-f", "{connection_file}"],
        "display_name": DISPLAY_NAME,
        "language": "markdown",
        "interrupt_mode": "signal",
        "env": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        # An ipykernel: it takes the CurveZMQ keys a client provisions
        # (jupyter_client's transport_encryption), as ipykernel's own spec says.
        "metadata": {"debugger": False, "supported_encryption": ["curve"]},
    }


def install(*, user: bool = False, sys_prefix: bool = False, prefix: str | None = None) -> int:
    """Install the kernelspec; return a process exit code.

    Parameters
    ----------
    user
        Into the user's Jupyter data directory.
    sys_prefix
        Into ``sys.prefix`` (the current virtualenv or conda env).
    prefix
        Into this prefix (``PREFIX/share/jupyter/kernels``).

    With none of them, installs system-wide (as ``jupyter kernelspec install``).
    """
    from jupyter_client.kernelspec import KernelSpecManager

    if sys_prefix:
        prefix = sys.prefix
    logos = resources.files("cortex_kernel.jupyter") / "resources"
    with tempfile.TemporaryDirectory() as tmp:
        spec_dir = Path(tmp) / KERNEL_NAME
        spec_dir.mkdir()
        (spec_dir / "kernel.json").write_text(json.dumps(kernel_json(), indent=1) + "\n")
        for name in ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg"):
            with resources.as_file(logos / name) as source:
                shutil.copy(source, spec_dir / name)
        try:
            dest = KernelSpecManager().install_kernel_spec(
                str(spec_dir), KERNEL_NAME, user=user, prefix=prefix
            )
        except PermissionError as exc:
            print(
                f"cannot install the kernelspec: {exc}. Try --user or --sys-prefix.",
                file=sys.stderr,
            )
            return 1
    print(f"Installed kernelspec {KERNEL_NAME!r} ({DISPLAY_NAME}) in {dest}")
    return 0

"""Importing any module of the package pays for no optional heavy dependency;
the kernel module pays for nothing a kernel_info reply does not need.

docker and PyYAML are imported where they are used (a Docker tool, a
manifest or suite being read), litellm when a model streams; importing the
kernel, the runtime or the CLI never loads them.
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import importlib, pkgutil, sys
import cortex_kernel
for module in pkgutil.walk_packages(cortex_kernel.__path__, "cortex_kernel."):
    # papermill's plug-in is imported by papermill itself (which loads yaml).
    if not module.name.endswith(("__main__", ".papermill")):
        importlib.import_module(module.name)
print(" ".join(sorted(name for name in ("docker", "yaml", "litellm") if name in sys.modules)))
"""


def test_no_module_imports_docker_yaml_or_litellm_at_import_time() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == ""


# What the kernel must not import before it answers kernel_info (issue 14):
# together ~0.45 s of the start under `python -X importtime` (the runtime's
# pydantic models, the manifest, the model options), imported on first use
# or by the background warm-up (cortex_kernel.jupyter.warmup) instead.
HEAVY_AT_KERNEL_START = (
    "pydantic",
    "pydantic_core",
    "anyio",
    "httpx",
    "openai",
    "litellm",
    "yaml",
    "anywidget",
    "ipywidgets",
    "cortex_kernel.agent",
    "cortex_kernel.executors",
    "cortex_kernel.jupyter.view",
    "cortex_kernel.jupyter.viewstate",
    "cortex_kernel.llm",
    "cortex_kernel.manifest",
    "cortex_kernel.model_options",
    "cortex_kernel.protocol",
    "cortex_kernel.runtime",
    "cortex_kernel.safejson",
)

KERNEL_START = """
import sys
from ipykernel.kernelapp import IPKernelApp
from ipykernel.ipkernel import IPythonKernel
stock = set(sys.modules)
import cortex_kernel.jupyter.kernel
heavy = {heavy!r}
print(" ".join(sorted(
    name for name in set(sys.modules) - stock
    if any(name == prefix or name.startswith(prefix + ".") for prefix in heavy)
)))
"""


def test_the_kernel_module_imports_nothing_heavy_beyond_ipykernel() -> None:
    # What ipykernel imports itself does not count (a future ipykernel may use anyio).
    check = KERNEL_START.format(heavy=HEAVY_AT_KERNEL_START)
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == ""

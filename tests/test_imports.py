"""Importing any module of the package pays for no optional heavy dependency.

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

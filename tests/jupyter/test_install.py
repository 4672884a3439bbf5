"""``cortex-kernel install``: the kernelspec, its interpreter and its logos."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cortex_kernel.jupyter.install import install


def test_install_into_a_prefix(tmp_path: Path) -> None:
    assert install(prefix=str(tmp_path)) == 0
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "cortex"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["argv"][:3] == [sys.executable, "-m", "cortex_kernel.jupyter"]
    assert spec["display_name"] == "Cortex Agent"
    for logo in ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg"):
        assert (spec_dir / logo).stat().st_size > 100
    assert (spec_dir / "logo-64x64.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_install_and_kernelspec_list(cortex_kernelspec: str) -> None:
    bindir = Path(sys.executable).parent
    subprocess.run(
        [str(bindir / "cortex-kernel"), "install", "--sys-prefix"], check=True, capture_output=True
    )
    listed = subprocess.run(
        [sys.executable, "-m", "jupyter", "kernelspec", "list"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert any(line.split()[:1] == ["cortex"] for line in listed.splitlines())

"""A notebook with agent cells, saved by a front end, passes nbval with our sanitizer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.kernel

SANITIZE = Path(__file__).resolve().parents[2] / "cortex_kernel" / "jupyter" / "nbval-sanitize.cfg"


def test_saved_agent_notebook_passes_nbval(
    tmp_path: Path, cortex_kernelspec: str, replay_dir: Path
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "cortex", "display_name": "Cortex Agent"}
    nb.cells = [
        nbformat.v4.new_code_cell(f"%model replay:{replay_dir}/answer.jsonl"),
        nbformat.v4.new_code_cell("What is x?"),
        nbformat.v4.new_code_cell("%%python\nprint(x, summary)"),
    ]
    # Executed and saved as a front end would: display updates applied.
    NotebookClient(nb, timeout=60, kernel_name="cortex").execute()
    view = nb.cells[1].outputs[0]["data"]
    assert view["text/plain"].startswith("Cortex run [ok]")
    assert nb.cells[1].outputs[-1]["data"]["text/markdown"] == "The answer is 42"
    path = tmp_path / "agent.ipynb"
    nbformat.write(nb, path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval",
            "--nbval-sanitize-with",
            str(SANITIZE),
            str(path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:]

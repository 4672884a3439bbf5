"""Record notebooks/04_local_model.ipynb's session against the live local model.

Needs ``make local-model`` up. Executes the notebook with its model line
switched to the live server (:data:`LIVE_MODEL`), exports every
run's transcript to ``notebooks/data/local_model.jsonl`` (what the replay
model plays back), and leaves the notebook itself untouched; ``make
notebooks`` then stores its outputs from the replay. Usage::

    .venv/bin/python scripts/record_local_model.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

#: The one line that switches notebook 04 from its recording to the live model.
LIVE_MODEL = "%model openai/local --api-base http://127.0.0.1:8377/v1 --temperature 0 --seed 1234"

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK = NOTEBOOKS / "04_local_model.ipynb"
TRANSCRIPT = NOTEBOOKS / "data" / "local_model.jsonl"


def main() -> int:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    switched = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("%model replay:"):
            cell.source = LIVE_MODEL
            switched += 1
    if switched != 1:
        print("record: expected exactly one %model replay: line", file=sys.stderr)
        return 1
    nb.cells.append(new_code_cell(f"%transcript export {TRANSCRIPT}"))
    NotebookClient(
        nb, timeout=900, kernel_name="cortex", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    print(nb.cells[-1].outputs[0].get("text", "").strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

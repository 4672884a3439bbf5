"""Record notebooks/04_local_model.ipynb's session against the live local model.

Needs ``make local-model`` up. Executes the notebook with its model line
switched to the live server (:data:`LIVE_MODEL`), exports every
run's transcript to ``notebooks/data/local_model.jsonl`` (what the replay
model plays back), and leaves the notebook itself untouched; ``make
notebooks`` then stores its outputs from the replay. Usage::

    .venv/bin/python scripts/record_local_model.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

#: The one line that switches notebook 04 from its recording to the live model.
LIVE_MODEL = (
    "%model openai/local --api-base http://127.0.0.1:8377/v1 --temperature 0 --seed 1234 "
    "--constrain grammar"
)

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK = NOTEBOOKS / "04_local_model.ipynb"
TRANSCRIPT = NOTEBOOKS / "data" / "local_model.jsonl"


def main() -> int:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # The drift section replays its own recording (function calling): not recorded here.
    drift = [i for i, c in enumerate(nb.cells) if c.source.startswith("## A drift")]
    nb.cells = nb.cells[: drift[0]] if drift else nb.cells
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
    add_llm_answers(TRANSCRIPT)
    return 0


def add_llm_answers(path: Path) -> None:
    """Put each ``llm`` action's answer into the transcript as a model turn.

    A transcript records the main turns only; on replay an ``llm`` action
    asks the replay model too, so its answer must come next in the file.
    """
    out: list[str] = []
    llm_ids: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        out.append(line)
        if event["type"] == "action_parsed" and event["action"]["type"] == "llm":
            llm_ids.add(event["action"]["id"])
        elif event["type"] == "action_succeeded" and event["id"] in llm_ids:
            turn = {"type": "model_turn", "turn": 0, "llm_call": event["id"]}
            out.append(json.dumps({**turn, "t": event["t"], "content": event["preview"]}))
        elif event["type"] == "run_finished" and event.get("parent") is None:
            llm_ids = set()
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())

"""A saved notebook's static view holds the run's timeline, readable without a kernel.

The view demo's replay model writes ``a1`` (a slow lookup) early in its
thought and goes on writing; the notebook is executed and saved as a front
end would (display updates applied), then read back from disk: its view
output's HTML holds the timeline's SVG, whose tooltips show ``a1``
dispatched before the model's turn ended and ``a3`` drawn after ``a1``, and
its markdown says where the time went.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.kernel


def test_a_saved_notebooks_static_view_has_the_timeline(
    tmp_path: Path, cortex_kernelspec: str, replay_dir: Path
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "cortex", "display_name": "Cortex Agent"}
    model = f"replay:{replay_dir}/view_demo.jsonl?tps=60"
    nb.cells = [nbformat.v4.new_code_cell(f"%%agent --model {model}\nCapital of France?")]
    NotebookClient(nb, timeout=120, kernel_name="cortex").execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)

    saved = nbformat.read(path, as_version=4)
    (view,) = [o for o in saved.cells[0].outputs if o.get("output_type") == "display_data"]
    data = view["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data  # static: no kernel needed
    html = data["text/html"]
    assert '<div class="cortex-timeline"' in html and "<svg" in html, html[-2000:]
    titles = re.findall(r"<title>([^<]*)</title>", html)
    # The model's turn as drawn: its segments' spans, from the start to the end of the turn.
    segments = [re.match(r"(\w+) ([\d.]+)–([\d.]+)s$", t) for t in titles]
    turn_end = max(float(m.group(3)) for m in segments if m)
    # a1 was dispatched while the model was still writing.
    # (Its label and each part of its bar carry the same tooltip.)
    (a1,) = {t for t in titles if t.startswith("a1 llm") and "dispatched" in t}
    dispatched = re.search(r"dispatched ([\d.]+)s", a1)
    assert dispatched is not None and float(dispatched.group(1)) < turn_end, (a1, turn_end)
    assert any(t.startswith("a3 ") and "after a1" in t for t in titles)
    assert "a3 after a1" in titles  # the dependency's line
    assert "*timeline* · model" in data["text/markdown"]

"""The data workflow in JupyterLab, in Chromium: a plot from the agent, then its code as a cell.

A Cortex notebook holds a DataFrame; an agent cell (a replay model) runs
Python in the notebook's namespace that sums a column per group, prints the
sums and draws a bar chart. The live view must show that code while the run
is live (a MutationObserver, installed before JupyterLab loads, records the
code each live view draws), and the chart must appear in the cell as an
image the browser decoded. Then ``%agent_code`` puts the code in the next
cell: a real new cell of the notebook holding ``%%python`` and the code;
run, it prints the same sums and draws the chart again, with no error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.replays import write_turns

from .browser_support import OBSERVER, Browser

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

REGIONS = ["North", "South", "East", "West", "North", "South"]
UNITS = [30, 10, 25, 20, 25, 40]
FRAME = {"region": REGIONS, "units": UNITS}
DATA_CELL = f"%%python\nimport pandas as pd\ndf = pd.DataFrame({FRAME!r})"
CODE = (
    "import matplotlib.pyplot as plt\n"
    "totals = df.groupby('region')['units'].sum()\n"
    "print(totals.to_dict())\n"
    "totals.plot.bar(title='units by region')\n"
    "plt.tight_layout()"
)

# The images of a cell's image/png outputs the browser decoded: [width, height, src
# prefix]. (The static view that replaces the live one keeps a collapsed copy, not counted.)
IMAGES = """(cell) => {
  const node = window.jupyterapp.shell.currentWidget.content.widgets[cell].node;
  return [...node.querySelectorAll(".jp-OutputArea-output[data-mime-type='image/png'] img")]
    .filter(img => img.complete && img.naturalWidth > 0)
    .map(img => [img.naturalWidth, img.naturalHeight, img.src.slice(0, 22)]);
}"""


def plot_turns(directory: Path) -> Path:
    """A replay: one ``python`` action running :data:`CODE`, then an answer."""
    call = json.dumps({"name": "python", "parameters": {"code": CODE}})
    turns = [
        f'<thought>Sum the units per region and plot them.</thought><action type="tool" id="p1">'
        f"{call}</action>",
        "<response>The chart of units by region is above.</response>",
    ]
    path = directory / "plot.jsonl"
    write_turns(path, *turns)
    return path


def test_agent_plot_in_the_cell_and_its_code_as_a_new_cell(
    browser: Browser, tmp_path: Path
) -> None:
    sums: dict[str, int] = {}
    for region, units in zip(REGIONS, UNITS, strict=True):
        sums[region] = sums.get(region, 0) + units
    expected = str(dict(sorted(sums.items())))  # groupby's order: sorted labels
    replay = plot_turns(tmp_path)
    cells = [
        ("data-cell", DATA_CELL),
        ("approvals-cell", "%approvals bypass"),
        ("agent-cell", f"%%agent --model replay:{replay}?tps=200\nPlot the units per region."),
        ("code-cell", "%agent_code"),
    ]
    notebook = browser(cells, init_script=OBSERVER)
    page = notebook.page
    notebook.run_all_cells()
    agent = page.locator(".jp-Cell").nth(2)
    agent.locator(".jp-OutputArea-output >> text=The chart of units").wait_for(timeout=90_000)
    # %agent_code's set_next_input: JupyterLab adds a cell under it.
    page.wait_for_function(
        """() => {
            const cells = window.jupyterapp.shell.currentWidget.content.widgets;
            return cells.length === 5
                && cells[4].model.sharedModel.getSource().startsWith("%%python");
        }""",
        timeout=90_000,
    )
    notebook.wait_idle()
    live_code: list[str] = page.evaluate("window.__cortexLog.code")
    agent_images = page.evaluate(IMAGES, 2)
    agent_errors = agent.locator(".jp-OutputArea-output[data-mime-type*=error]").count()
    new_source: str = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets[4]"
        ".model.sharedModel.getSource()"
    )
    page.evaluate(
        """() => {
            const panel = window.jupyterapp.shell.currentWidget;
            panel.content.activeCellIndex = 4;
            window.jupyterapp.commands.execute('notebook:run-cell');
        }"""
    )
    rerun = page.locator(".jp-Cell").nth(4)
    png = ".jp-OutputArea-output[data-mime-type='image/png'] img"
    rerun.locator(png).first.wait_for(timeout=90_000)
    notebook.wait_idle()
    rerun_images = page.evaluate(IMAGES, 4)
    rerun_text = rerun.locator(".jp-OutputArea").inner_text()
    rerun_errors = rerun.locator(".jp-OutputArea-output[data-mime-type*=error]").count()

    # The live view showed the agent's code under its action.
    assert any(CODE in text for text in live_code), live_code
    # The chart is a PNG in the agent cell, decoded by the browser.
    assert len(agent_images) == 1, agent_images
    width, height, src = agent_images[0]
    assert width > 100 and height > 100 and src == "data:image/png;base64,"
    assert agent_errors == 0
    # %agent_code: a new cell of the notebook, the code marked Python; run, it works.
    assert new_source == f"%%python\n{CODE}"
    assert expected in rerun_text, rerun_text
    assert len(rerun_images) == 1 and rerun_images[0][0] > 100, rerun_images
    assert rerun_errors == 0, rerun_text

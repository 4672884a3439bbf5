"""The live view in a real browser: JupyterLab on 127.0.0.1, Debian's Chromium via Playwright.

An agent cell runs on a slow replay model. A MutationObserver, installed
before JupyterLab loads, records every state each action node shows and
when partial and final responses first appear — proof that the view was
updated live (running, then succeeded; a partial response before the final
one), not only drawn at the end. A screenshot of the view is saved (set
``CORTEX_UPDATE_SCREENSHOT=1`` to refresh ``docs/view.png``).

A second cell answers with prices ("$5 or $6"): nothing is typeset as math.
A third, ``%%python`` cell is edited as Python (the shipped labextension),
while message cells stay markdown; in the stock Python kernel the extension
edits a ``%%agent`` cell as markdown. The status bar says Busy until a
run ends, whatever other request (a subshell for the view's comm) ends meanwhile.
Then the notebook is saved, its kernel and session are deleted, and the
page is loaded again with a new kernel: the finished run reads the same,
from the static view stored in the file (no "Error displaying widget").
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .browser_support import OBSERVER, ROOT, Browser

pytestmark = [pytest.mark.browser, pytest.mark.kernel]


def test_live_view_in_jupyterlab(browser: Browser, tmp_path: Path) -> None:
    notebook = browser(init_script=OBSERVER)
    page = notebook.page
    page.wait_for_function(
        """() => window.jupyterapp.shell.currentWidget.content.widgets
            .map(c => c.model.mimeType).join() ===
            "text/x-markdown,text/x-markdown,text/x-ipython" """,
        timeout=30_000,
    )
    python_cell = page.locator(".jp-Cell").nth(2)
    python_cell.locator(".cm-content span", has_text="def").first.wait_for(timeout=30_000)
    message_count = page.locator(".jp-Cell").first.locator(".cm-content span").count()
    notebook.run_all_cells()
    page.wait_for_function(
        "() => (window.__cortexLog.states.a1 || []).includes('running')",
        timeout=60_000,
    )
    status = page.evaluate("document.querySelector('.cortex-view').dataset.status")
    assert status == "running"  # seen mid-run, not drawn at the end
    # A clip, not an element screenshot: that waits for the element to
    # stop moving, i.e. for the end of the run.
    box = page.locator(".jp-Cell").first.bounding_box()
    assert box is not None
    running_shot = tmp_path / "view-running.png"
    page.screenshot(path=str(running_shot), clip=box)
    # When the run is over its display becomes the static view.
    first = page.locator(".jp-Cell").first
    first.locator(".cortex-run-static").wait_for(timeout=90_000)
    page.wait_for_selector(".jp-OutputArea-output >> text=The capital is", timeout=30_000)
    log = page.evaluate("window.__cortexLog")
    shot = tmp_path / "view.png"
    first.screenshot(path=str(shot))
    prices = page.locator(".jp-Cell").nth(1)
    prices.locator(".jp-OutputArea-output >> text=It costs $5 or $6").wait_for(timeout=60_000)
    assert prices.locator("mjx-container, .MathJax").count() == 0  # no math typeset
    notebook.wait_idle()
    # Reopen: a new kernel, no widget models; the saved view must still read.
    notebook.save_and_reopen()
    reopened = page.locator(".jp-Cell").first
    reopened.locator(".cortex-run-static").wait_for(timeout=30_000)
    static_html = reopened.locator(".cortex-run-static").inner_html()
    reopened_text = page.locator(".jp-Notebook").inner_text()

    assert message_count == 0  # prose is not styled as code (no "[x]" links, no keywords)
    assert "<details" in static_html and "<summary" in static_html  # thoughts, collapsible
    assert "a1" in static_html and "a3" in static_html  # the action tree
    assert "The capital is" in reopened_text  # the answer
    assert "Error displaying widget" not in reopened_text
    saved = json.loads(notebook.server.notebook.read_text(encoding="utf-8"))
    for output in saved["cells"][0]["outputs"]:
        assert "application/vnd.jupyter.widget-view+json" not in output.get("data", {})

    states: dict[str, list[str]] = log["states"]
    for action in ("a1", "a3"):
        seen = states.get(action, [])
        assert "running" in seen and "succeeded" in seen, states
        assert seen.index("running") < seen.index("succeeded"), states
    assert log["partialAt"] is not None and log["finalAt"] is not None, log
    assert log["partialAt"] < log["finalAt"], log
    assert shot.stat().st_size > 5000
    print(f"screenshot: {shot}")
    if os.environ.get("CORTEX_UPDATE_SCREENSHOT"):
        shutil.copy(shot, ROOT / "docs" / "view.png")
        shutil.copy(running_shot, ROOT / "docs" / "view-running.png")


def test_python_cells_highlighted_in_notebook7(browser: Browser) -> None:
    """Notebook 7 loads the same prebuilt extension: %%python cells are Python."""
    pytest.importorskip("notebook", minversion="7")
    page = browser(app="notebook").page
    python_cell = page.locator(".jp-Cell").nth(2)
    python_cell.locator(".cm-content span", has_text="def").first.wait_for(timeout=30_000)
    assert page.locator(".jp-Cell").first.locator(".cm-content span").count() == 0


def test_agent_cells_markdown_in_python_kernel(browser: Browser) -> None:
    """In the stock kernel a %%agent cell is edited as markdown, not Python (the labextension)."""
    cells = [
        ("agent-cell", "%%agent\nFind cats and dogs at https://example.com//a and not here"),
        ("python-cell", "x = 1 and 2  # a comment"),
    ]
    python3 = {"name": "python3", "display_name": "Python 3", "language": "python"}
    page = browser(cells, kernelspec=python3).page
    # The Python cell is highlighted: "and" is a token of its own.
    keyword = page.locator(".jp-Cell").nth(1).locator(".cm-content span", has_text="and")
    keyword.first.wait_for(timeout=30_000)
    python_class = keyword.first.get_attribute("class")
    # The message is prose: no token spans ("and" a keyword, "//" an operator
    # or a comment, as Python mode made them).
    page.wait_for_function(
        """() => {
            const cells = window.jupyterapp.shell.currentWidget.content.widgets;
            return cells[0].model.mimeType === "text/x-markdown"
                && cells[0].node.querySelectorAll(".cm-content span").length === 0;
        }""",
        timeout=30_000,
    )
    agent_html = page.locator(".jp-Cell").first.locator(".cm-content").inner_html()
    mimes = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.map(c => c.model.mimeType)"
    )
    # Without its %%agent line the cell is the kernel's language again.
    page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.widgets[0]
            .model.sharedModel.setSource("y = 3 and 4")"""
    )
    page.locator(".jp-Cell").first.locator(".cm-content span", has_text="and").wait_for(
        timeout=30_000
    )
    restored = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets[0].model.mimeType"
    )
    assert python_class  # a styled keyword in the Python cell
    assert "<span" not in agent_html, agent_html
    assert mimes == ["text/x-markdown", "text/x-ipython"]
    assert restored == "text/x-ipython"


def test_status_bar_busy_for_the_whole_run(browser: Browser) -> None:
    """JupyterLab's status bar says Busy until the cell ends, not Idle once the view opens.

    The view's comm makes JupyterLab ask for a subshell on the control channel
    mid-run; that request's "idle" set the one status JupyterLab shows.
    """
    message = "What is the capital of France? Add one fact about it."
    notebook = browser([("agent-cell", message)])
    page = notebook.page
    # Every IOPub message in the order JupyterLab handles it, with the
    # status it shows once that message is handled.
    page.evaluate(
        """() => {
            const context = window.jupyterapp.shell.currentWidget.sessionContext;
            window.__iopub = [];
            context.session.kernel.iopubMessage.connect((_, m) => window.__iopub.push({
                type: m.header.msg_type,
                state: m.content.execution_state || "",
                parentType: m.parent_header.msg_type || "",
                parentId: m.parent_header.msg_id || "",
                shown: context.kernelDisplayStatus,
            }));
        }"""
    )
    notebook.run_all_cells()
    page.wait_for_function(
        """() => window.__iopub.some(m => m.type === "status" && m.state === "idle"
            && m.parentType === "execute_request")""",
        timeout=90_000,
    )
    log: list[dict[str, str]] = page.evaluate("window.__iopub")
    execute_id = next(m["parentId"] for m in log if m["parentType"] == "execute_request")
    run = [m["type"] != "status" or m["parentId"] != execute_id for m in log].index(False)
    end = next(
        i
        for i, m in enumerate(log)
        if m["type"] == "status" and m["state"] == "idle" and m["parentId"] == execute_id
    )
    # Another request (the subshell JupyterLab asks for) ended mid-run, before
    # the run's last output.
    others = [
        i
        for i in range(run, end)
        if log[i]["type"] == "status"
        and log[i]["state"] == "idle"
        and log[i]["parentId"] != execute_id
    ]
    outputs = [i for i in range(run, end) if log[i]["type"] != "status"]
    assert others and outputs and others[0] < outputs[-1], log
    assert log[outputs[-1]]["shown"] == "busy", log[others[0] :]
    assert log[end]["shown"] == "idle"

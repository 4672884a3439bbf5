"""The timeline in a real browser: JupyterLab on 127.0.0.1, Debian's Chromium via Playwright.

The view demo's replay model writes ``a1`` (a lookup on a slow model)
early in its thought and goes on writing. The live view's "Timeline"
section is opened mid-run: it shows ``a1``'s bar while the run is still
running, starting before the model's row ends (the lookup ran while the
model wrote), with the line from ``a1`` to ``a3`` that waited for it. When
the run is over the static view draws the same as SVG, and it is still
there after the notebook is saved and opened again with a new kernel.
``CORTEX_UPDATE_SCREENSHOT=1`` refreshes ``docs/timeline.png``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .browser_support import ROOT, Browser

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

# What the live view's open timeline shows, recorded on every change of the
# page while the run is live: a1's bar, the model's row (where it ends), the
# dependency lines. Read after the run (the live view is gone by then).
RECORDER = """
(() => {
  const seen = { firstBar: null, withDeps: null };
  window.__timeline = seen;
  const look = () => {
    const view = document.querySelector(".cortex-view");
    const svg = view && view.querySelector(".cortex-timeline[open] svg");
    const bar = svg && svg.querySelector('rect.cortex-tl-bar[data-id="a1"]');
    if (!bar || view.dataset.status !== "running") return;
    const model = [...svg.querySelectorAll("rect[class^='cortex-tl-']:not(.cortex-tl-bar)")];
    const right = (r) => Number(r.getAttribute("x")) + Number(r.getAttribute("width"));
    const state = {
      a1: Number(bar.getAttribute("x")),
      modelEnd: Math.max(...model.map(right)),
      thoughts: svg.querySelectorAll("rect.cortex-tl-thought").length,
      deps: [...svg.querySelectorAll("path.cortex-tl-dep title")].map((t) => t.textContent),
    };
    if (seen.firstBar === null) seen.firstBar = state;
    if (state.deps.length && seen.withDeps === null) seen.withDeps = state;
  };
  new MutationObserver(look).observe(document, { subtree: true, childList: true });
})();
"""


# The view's saved text/html as JupyterLab draws an untrusted output (a notebook
# from elsewhere): through its sanitizer, which drops SVG. What reads then.
RENDER_UNTRUSTED = """async () => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  const outputs = notebook.widgets[0].model.outputs;
  for (let i = 0; i < outputs.length; i++) {
    const html = outputs.get(i).data["text/html"];
    if (!html || !html.includes("cortex-run-static")) continue;
    const renderer = notebook.rendermime.createRenderer("text/html");
    document.body.appendChild(renderer.node);
    await renderer.renderModel({
      data: { "text/html": html }, metadata: {}, trusted: false, setData() {},
    });
    return { text: renderer.node.innerText, svg: renderer.node.querySelectorAll("svg").length };
  }
  return null;
}"""


def _static_timeline(page: Any) -> dict[str, Any]:
    cell = page.locator(".jp-Cell").first
    # In the DOM (folded until its summary is clicked).
    cell.locator(".cortex-run-static .cortex-timeline svg").wait_for(
        state="attached", timeout=90_000
    )
    timeline = cell.locator(".cortex-run-static .cortex-timeline")
    result: dict[str, Any] = timeline.evaluate(
        """(e) => ({
            rects: e.querySelectorAll("svg rect").length,
            titles: [...e.querySelectorAll("svg title")].map((t) => t.textContent),
            text: e.innerText,
        })"""
    )
    return result


def test_timeline_in_jupyterlab(browser: Browser, tmp_path: Path) -> None:
    cells = [("agent-cell", "What is the capital of France? Add one fact about it.")]
    notebook = browser(cells, init_script=RECORDER)
    page = notebook.page
    notebook.run_all_cells()
    summary = page.locator(".cortex-view .cortex-timeline summary")
    summary.wait_for(timeout=60_000)
    summary.click()
    # Drawn live: a1's bar while the run is still going.
    page.wait_for_function("() => window.__timeline.firstBar !== null", timeout=60_000)
    executed = _static_timeline(page)
    seen = page.evaluate("window.__timeline")  # before the page is loaded again
    notebook.wait_idle()
    # The finished run's timeline, as the saved notebook shows it.
    shot = tmp_path / "timeline.png"
    timeline = page.locator(".jp-Cell").first.locator(".cortex-timeline")
    timeline.locator("summary").click()
    timeline.locator("svg").wait_for()
    timeline.screenshot(path=str(shot))
    notebook.save_and_reopen()
    reopened = _static_timeline(page)
    untrusted = page.evaluate(RENDER_UNTRUSTED)

    live, later = seen["firstBar"], seen["withDeps"]
    assert live is not None and live["thoughts"] >= 1, seen
    # a3 waited for a1: its line was drawn while the run was live.
    assert later is not None and "a3 after a1" in later["deps"], seen
    # By then the model's row reaches past where a1's bar starts: the lookup
    # ran while the model wrote.
    assert later["a1"] < later["modelEnd"], later
    for drawn in (executed, reopened):
        assert drawn["rects"] > 3, drawn
        assert any(t.startswith("a1 llm") and "dispatched" in t for t in drawn["titles"]), drawn
        assert "a3 after a1" in drawn["titles"], drawn
        assert "while the model wrote" in drawn["text"], drawn
    # Untrusted, the drawing is gone but its summary reads, and the text of
    # its elements stays folded away.
    assert untrusted is not None and untrusted["svg"] == 0, untrusted
    assert "timeline · model" in untrusted["text"] and "first token" not in untrusted["text"]
    assert shot.stat().st_size > 3000
    if os.environ.get("CORTEX_UPDATE_SCREENSHOT"):
        shutil.copy(shot, ROOT / "docs" / "timeline.png")

"""Hostile model and tool text in JupyterLab, in Chromium: no script runs, nothing is fetched.

The notebook of :mod:`tests.jupyter.test_inert_outputs` (a hostile thought,
partial response, failing tool, tool result and answer) runs in JupyterLab,
which trusts the outputs of cells it executed. Every request the page (and
any frame or worker of it) makes is recorded, and so are dialogs and console
messages; the payloads would set ``window.__pwned`` and fetch from an
attacker's address on 127.0.0.1. The live widget must have drawn the
hostile responses, the answer and the static view must show their
formatting, and JupyterLab's own markdown renderer, fed the answer's and
the view's ``text/markdown`` as trusted, must make nothing live either.
Then the notebook is saved and opened again (its outputs trusted, as
JupyterLab signed them): the same checks hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .browser_support import OBSERVER, Browser, BrowserNotebook, free_port
from .test_inert_outputs import hostile_turn, tools_cell

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

# Renders a cell output's text/markdown with JupyterLab's own renderer, as
# trusted (as JupyterLab renders the outputs of a cell it executed).
RENDER_TRUSTED_MARKDOWN = """async ([cell, mime]) => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  const outputs = notebook.widgets[cell].model.outputs;
  let rendered = 0;
  for (let i = 0; i < outputs.length; i++) {
    const data = outputs.get(i).data;
    if (!data[mime]) continue;
    const renderer = notebook.rendermime.createRenderer(mime);
    renderer.node.classList.add("cortex-test-trusted");
    document.body.appendChild(renderer.node);
    await renderer.renderModel({
      data: { [mime]: data[mime] }, metadata: {}, trusted: true, setData() {},
    });
    rendered += 1;
  }
  return rendered;
}"""

# What of the page would be live: elements a payload would add, javascript: links.
LIVE = """() => {
  const scope = ".jp-OutputArea-output, .cortex-test-trusted";
  const found = [];
  for (const area of document.querySelectorAll(scope)) {
    // The view's own timeline is SVG the kernel drew; any other SVG is a payload's.
    const svg = "svg:not(.cortex-timeline > details > svg, .cortex-timeline-svg)";
    for (const e of area.querySelectorAll(`img, iframe, ${svg}, script, object, embed, style`)) {
      found.push(e.outerHTML.slice(0, 200));
    }
    for (const e of area.querySelectorAll("*")) {
      for (const attribute of e.getAttributeNames()) {
        if (attribute.startsWith("on")) found.push(e.outerHTML.slice(0, 200));
      }
    }
    for (const a of area.querySelectorAll("a[href]")) {
      if (!/^(https?|mailto):/.test(a.href)) found.push(a.outerHTML.slice(0, 200));
    }
  }
  return found;
}"""


TAGS = "e => [...e.querySelectorAll('*')].map(e => e.tagName.toLowerCase())"


def _inspect(notebook: BrowserNotebook) -> dict[str, Any]:
    """What the agent cell shows, and what of the page is live, once its outputs are drawn."""
    page = notebook.page
    agent = page.locator(".jp-Cell").nth(1)
    answer = agent.locator(".jp-OutputArea-output", has_text="The page said")
    answer.wait_for(timeout=90_000)
    agent.locator(".cortex-run-static").wait_for(timeout=30_000)
    notebook.wait_idle()
    rendered = page.evaluate(RENDER_TRUSTED_MARKDOWN, [1, "text/markdown"])
    return {
        "widget": page.evaluate("window.__cortexLog"),
        "answer_tags": set(answer.evaluate(TAGS)),
        "docs_links": answer.locator('a[href="https://example.com/docs"]').count(),
        "answer_text": answer.inner_text(),
        "rendered": rendered,
        "trusted_tags": set(
            page.locator("body").evaluate(
                "b => [...b.querySelectorAll('.cortex-test-trusted *')].map(e => e.localName)"
            )
        ),
        "trusted": page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.widgets[1].model.trusted"
        ),
        "live": page.evaluate(LIVE),
        "pwned": page.evaluate("() => window.__pwned ?? null"),
    }


def test_hostile_outputs_are_inert_in_jupyterlab(browser: Browser, tmp_path: Path) -> None:
    attacker = free_port()
    replay = tmp_path / "hostile.jsonl"
    replay.write_text(json.dumps({"content": hostile_turn(attacker)}) + "\n", encoding="utf-8")
    cells = [("tools-cell", tools_cell(attacker)), ("agent-cell", "summarise the page")]
    requests: list[str] = []
    dialogs: list[str] = []
    console: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    # Slow enough that the live widget draws the responses before the run ends.
    # The context's requests: the page's, its frames' and its workers'.
    notebook = browser(
        cells,
        f"replay:{replay}?tps=400",
        init_script=OBSERVER,
        listen={
            "request": lambda request: requests.append(request.url),
            "console": lambda message: console.append(message.text),
            "dialog": on_dialog,
        },
    )
    origin = notebook.server.api.removesuffix("/api")
    notebook.run_all_cells()
    executed = _inspect(notebook)
    # Opened again: the saved outputs, trusted (JupyterLab signed them).
    notebook.save_and_reopen()
    reopened = _inspect(notebook)

    for seen in (executed, reopened):
        assert seen["pwned"] is None, (seen["pwned"], console[-20:])
        assert not seen["live"], seen["live"]
        assert seen["trusted"] is True  # as JupyterLab renders without sanitizing
        # The answer keeps its formatting; its hostile markup reads as text.
        assert {"strong", "em", "ul", "li", "code", "table", "td", "a", "s"} <= seen["answer_tags"]
        assert seen["docs_links"] == 1
        assert "<img src=x onerror=" in seen["answer_text"] and "<script>" in seen["answer_text"]
        # JupyterLab's own renderer of trusted markdown, given the answer's and the
        # view's text/markdown, made formatting of them (and nothing live).
        assert seen["rendered"] == 2, seen["rendered"]
        assert {"strong", "em", "li", "table", "code"} <= seen["trusted_tags"]
    assert not dialogs, dialogs
    leaks = [url for url in requests if f"127.0.0.1:{attacker}" in url]
    assert not leaks, leaks
    # Nothing left the page at all: every request went to the Jupyter server.
    elsewhere = [url for url in requests if not url.startswith((origin, "data:", "blob:"))]
    assert not elsewhere, elsewhere
    # The live widget drew the hostile partial and final responses (as text).
    widget = executed["widget"]
    assert widget["partialAt"] is not None and widget["finalAt"] is not None, widget

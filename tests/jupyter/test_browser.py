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

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "cortex-browser-test"
PYTHON_CELL = "%%python\ndef square(x):\n    return x * x\n\nsquare(3)"

OBSERVER = """
(() => {
  const log = { states: {}, partialAt: null, finalAt: null, events: 0 };
  window.__cortexLog = log;
  const record = (el) => {
    if (!(el instanceof Element)) return;
    const found = el.matches(".cortex-node, .cortex-response") ? [el] : [];
    found.push(...el.querySelectorAll(".cortex-node, .cortex-response"));
    for (const node of found) {
      if (node.classList.contains("cortex-node")) {
        const seq = (log.states[node.dataset.id] ||= []);
        if (seq[seq.length - 1] !== node.dataset.state) seq.push(node.dataset.state);
      } else if (node.dataset.final === "false" && log.partialAt === null) {
        log.partialAt = performance.now();
      } else if (node.dataset.final === "true" && log.finalAt === null) {
        log.finalAt = performance.now();
      }
    }
  };
  new MutationObserver((mutations) => {
    for (const m of mutations) {
      log.events += 1;
      m.addedNodes.forEach(record);
      if (m.type === "attributes") record(m.target);
    }
  }).observe(document, { subtree: true, childList: true, attributes: true,
                         attributeFilter: ["data-state", "data-final"] });
})();
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ensure_chromium() -> None:
    if not CHROMIUM.exists():
        subprocess.run([str(ROOT / "scripts" / "ensure-chromium.sh")], check=True, timeout=900)


@pytest.fixture
def lab(tmp_path: Path, cortex_kernelspec: str, replay_dir: Path) -> Iterator[dict[str, Any]]:
    """A JupyterLab server on 127.0.0.1 with one agent notebook, in a temp root."""
    with _serve(tmp_path, replay_dir, "jupyterlab") as server:
        yield server


@pytest.fixture
def notebook7(tmp_path: Path, cortex_kernelspec: str, replay_dir: Path) -> Iterator[dict[str, Any]]:
    """A Notebook 7 server with the same notebook (skipped when it is not installed)."""
    pytest.importorskip("notebook", minversion="7")
    with _serve(tmp_path, replay_dir, "notebook") as server:
        yield server


@contextlib.contextmanager
def _serve(
    tmp_path: Path,
    replay_dir: Path,
    app: str,
    cells: list[tuple[str, str]] | None = None,
    model: str | None = None,
    kernelspec: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """A server of ``app`` with one notebook of ``cells`` (id, source); ``model``
    is the kernels' ``CORTEX_MODEL`` (default: the view demo's replay), ``kernelspec``
    the notebook's (default: Cortex's)."""
    root = tmp_path / "root"
    root.mkdir()
    # A plain message cell of the Cortex kernel; the model comes from the
    # environment the server passes to its kernels.
    cell = "What is the capital of France? Add one fact about it."
    # The figures are in the message, so the answer's are grounded (no unverified mark).
    prices = f"%%agent --model replay:{replay_dir}/prices.jsonl\nWhat does it cost, 5 or 6?"
    if cells is None:
        cells = [("agent-cell", cell), ("prices-cell", prices), ("python-cell", PYTHON_CELL)]
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": cell_id,
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for cell_id, source in cells
        ],
        "metadata": {
            "kernelspec": kernelspec
            or {"name": "cortex", "display_name": "Cortex Agent", "language": "markdown"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (root / "view.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "CORTEX_MODEL": model or f"replay:{replay_dir}/view_demo.jsonl?tps=30",
    }
    port = _free_port()
    app_class = "LabApp" if app == "jupyterlab" else "JupyterNotebookApp"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            app,
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}",
            f"--{app_class}.expose_app_in_browser=True",
            f"--{app_class}.user_settings_dir={tmp_path / 'settings'}",
            f"--{app_class}.workspaces_dir={tmp_path / 'workspaces'}",
            "--FileContentsManager.delete_to_trash=False",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "server.log", "wb"),  # noqa: SIM115 - closed with the process
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    log = (tmp_path / "server.log").read_text(errors="replace")
                    raise RuntimeError(f"{app} did not start:\n{log[-3000:]}") from None
                time.sleep(0.2)
        path = "lab/tree" if app == "jupyterlab" else "notebooks"
        yield {
            "url": f"http://127.0.0.1:{port}/{path}/view.ipynb?token={TOKEN}",
            "api": f"http://127.0.0.1:{port}/api",
            "tmp": tmp_path,
            "notebook": root / "view.ipynb",
        }
    finally:
        # Server and kernels share the session: stop them together.
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _launch(p: Any, tmp: Path) -> Any:
    """Debian's Chromium, headless, quiet on a closed network, its files under ``tmp``."""
    return p.chromium.launch_persistent_context(
        str(tmp / "chromium-profile"),
        executable_path=str(CHROMIUM),
        headless=True,
        viewport={"width": 1100, "height": 800},
        env={
            **os.environ,
            "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
            "XDG_CACHE_HOME": str(tmp / "xdg-cache"),
        },
        args=[
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    )


def _wait_idle(page: Any) -> None:
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return k && k.status === "idle";
        }""",
        timeout=90_000,
    )


def _delete_kernels_and_sessions(api: str) -> None:
    import httpx

    headers = {"Authorization": f"token {TOKEN}"}
    with httpx.Client(headers=headers, timeout=30) as client:
        for session in client.get(f"{api}/sessions").json():
            client.delete(f"{api}/sessions/{session['id']}").raise_for_status()
        for kernel in client.get(f"{api}/kernels").json():
            client.delete(f"{api}/kernels/{kernel['id']}").raise_for_status()


def _save_and_reopen(page: Any, server: dict[str, Any]) -> None:
    """Save the notebook, shut its kernel down and open it again, idle: only what was saved."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
        timeout=30_000,
    )
    _delete_kernels_and_sessions(server["api"])
    page.goto(server["url"])
    _wait_idle(page)


def test_live_view_in_jupyterlab(lab: dict[str, Any]) -> None:
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    tmp: Path = lab["tmp"]
    with sync_playwright() as p:
        context = _launch(p, tmp)
        try:
            context.add_init_script(OBSERVER)
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(lab["url"])
            _wait_idle(page)
            page.wait_for_function(
                """() => window.jupyterapp.shell.currentWidget.content.widgets
                    .map(c => c.model.mimeType).join() ===
                    "text/x-markdown,text/x-markdown,text/x-ipython" """,
                timeout=30_000,
            )
            python_cell = page.locator(".jp-Cell").nth(2)
            python_cell.locator(".cm-content span", has_text="def").first.wait_for(timeout=30_000)
            message_spans = page.locator(".jp-Cell").first.locator(".cm-content span")
            message_count = message_spans.count()
            # Not awaited: the command's promise settles only when the cell is done.
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
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
            running_shot = tmp / "view-running.png"
            page.screenshot(path=str(running_shot), clip=box)
            # When the run is over its display becomes the static view.
            first = page.locator(".jp-Cell").first
            first.locator(".cortex-run-static").wait_for(timeout=90_000)
            page.wait_for_selector(".jp-OutputArea-output >> text=The capital is", timeout=30_000)
            log = page.evaluate("window.__cortexLog")
            shot = tmp / "view.png"
            first.screenshot(path=str(shot))
            prices = page.locator(".jp-Cell").nth(1)
            prices.locator(".jp-OutputArea-output >> text=It costs $5 or $6").wait_for(
                timeout=60_000
            )
            assert prices.locator("mjx-container, .MathJax").count() == 0  # no math typeset
            _wait_idle(page)
            # Reopen: a new kernel, no widget models; the saved view must still read.
            _save_and_reopen(page, lab)
            reopened = page.locator(".jp-Cell").first
            reopened.locator(".cortex-run-static").wait_for(timeout=30_000)
            static_html = reopened.locator(".cortex-run-static").inner_html()
            reopened_text = page.locator(".jp-Notebook").inner_text()
        finally:
            context.close()

    assert message_count == 0  # prose is not styled as code (no "[x]" links, no keywords)
    assert "<details" in static_html and "<summary" in static_html  # thoughts, collapsible
    assert "a1" in static_html and "a3" in static_html  # the action tree
    assert "The capital is" in reopened_text  # the answer
    assert "Error displaying widget" not in reopened_text
    saved = json.loads(lab["notebook"].read_text(encoding="utf-8"))
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


def test_python_cells_highlighted_in_notebook7(notebook7: dict[str, Any]) -> None:
    """Notebook 7 loads the same prebuilt extension: %%python cells are Python."""
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    tmp: Path = notebook7["tmp"]
    with sync_playwright() as p:
        context = _launch(p, tmp)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(notebook7["url"])
            _wait_idle(page)
            python_cell = page.locator(".jp-Cell").nth(2)
            python_cell.locator(".cm-content span", has_text="def").first.wait_for(timeout=30_000)
            message_spans = page.locator(".jp-Cell").first.locator(".cm-content span").count()
        finally:
            context.close()
    assert message_spans == 0


def test_agent_cells_markdown_in_python_kernel(
    tmp_path: Path, cortex_kernelspec: str, replay_dir: Path
) -> None:
    """In the stock kernel a %%agent cell is edited as markdown, not Python (the labextension)."""
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    cells = [
        ("agent-cell", "%%agent\nFind cats and dogs at https://example.com//a and not here"),
        ("python-cell", "x = 1 and 2  # a comment"),
    ]
    python3 = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with (
        _serve(tmp_path, replay_dir, "jupyterlab", cells=cells, kernelspec=python3) as server,
        sync_playwright() as p,
    ):
        context = _launch(p, tmp_path)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(server["url"])
            _wait_idle(page)
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
                "() => window.jupyterapp.shell.currentWidget.content.widgets"
                ".map(c => c.model.mimeType)"
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
        finally:
            context.close()
    assert python_class  # a styled keyword in the Python cell
    assert "<span" not in agent_html, agent_html
    assert mimes == ["text/x-markdown", "text/x-ipython"]
    assert restored == "text/x-ipython"


def test_status_bar_busy_for_the_whole_run(
    tmp_path: Path, cortex_kernelspec: str, replay_dir: Path
) -> None:
    """JupyterLab's status bar says Busy until the cell ends, not Idle once the view opens.

    The view's comm makes JupyterLab ask for a subshell on the control channel
    mid-run; that request's "idle" set the one status JupyterLab shows.
    """
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    message = "What is the capital of France? Add one fact about it."
    with (
        _serve(tmp_path, replay_dir, "jupyterlab", cells=[("agent-cell", message)]) as server,
        sync_playwright() as p,
    ):
        context = _launch(p, tmp_path)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(server["url"])
            _wait_idle(page)
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
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.wait_for_function(
                """() => window.__iopub.some(m => m.type === "status" && m.state === "idle"
                    && m.parentType === "execute_request")""",
                timeout=90_000,
            )
            log: list[dict[str, str]] = page.evaluate("window.__iopub")
        finally:
            context.close()
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

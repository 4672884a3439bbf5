"""A notebook served by JupyterLab (or Notebook 7) and open in Debian's Chromium.

Every real-browser test opens its notebook through :func:`open_notebook`
(the ``browser`` fixture of ``conftest.py``): a server on 127.0.0.1 in a
temp root, Chromium headless with its files under the same temp folder, the
page loaded and its kernel idle. Playwright's own browser download does not
work offline, so the tests launch ``/usr/bin/chromium``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .conftest import notebook_json

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "cortex-browser-test"
PYTHON_CELL = "%%python\ndef square(x):\n    return x * x\n\nsquare(3)"

#: Installed before JupyterLab loads, it records in ``window.__cortexLog`` every
#: state each action node shows, when partial and final responses first appear,
#: and the code each live view (not the static view that replaces it) draws.
OBSERVER = """
(() => {
  const log = { states: {}, partialAt: null, finalAt: null, events: 0, code: [] };
  window.__cortexLog = log;
  const record = (el) => {
    if (!(el instanceof Element)) return;
    const selector = ".cortex-node, .cortex-response, .cortex-code";
    const found = el.matches(selector) ? [el] : [];
    found.push(...el.querySelectorAll(selector));
    for (const node of found) {
      if (node.classList.contains("cortex-code")) {
        if (node.closest(".cortex-view")) log.code.push(node.textContent);
      } else if (node.classList.contains("cortex-node")) {
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


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def ensure_chromium() -> None:
    """Install Debian's Chromium when it is missing."""
    if not CHROMIUM.exists():
        subprocess.run([str(ROOT / "scripts" / "ensure-chromium.sh")], check=True, timeout=900)


@dataclass
class Server:
    """A Jupyter server with one notebook, ``view.ipynb``."""

    url: str  # the notebook's page, token included
    api: str
    notebook: Path


@dataclass
class BrowserNotebook:
    """The notebook's page in Chromium, and the server it came from."""

    server: Server
    page: Any

    def run_all_cells(self) -> None:
        """Run every cell; not awaited (the command settles only when the cells are done)."""
        self.page.evaluate(
            "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
        )

    def wait_idle(self) -> None:
        """Wait until the notebook's kernel is idle."""
        self.page.wait_for_function(
            """() => {
                const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                const k = w && w.sessionContext && w.sessionContext.session
                    && w.sessionContext.session.kernel;
                return k && k.status === "idle";
            }""",
            timeout=90_000,
        )

    def save_and_reopen(self) -> None:
        """Save the notebook, shut its kernel down and open it again, idle: only what was saved."""
        import httpx

        self.page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        self.page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
            timeout=30_000,
        )
        api = self.server.api
        with httpx.Client(headers={"Authorization": f"token {TOKEN}"}, timeout=30) as client:
            for session in client.get(f"{api}/sessions").json():
                client.delete(f"{api}/sessions/{session['id']}").raise_for_status()
            for kernel in client.get(f"{api}/kernels").json():
                client.delete(f"{api}/kernels/{kernel['id']}").raise_for_status()
        self.page.goto(self.server.url)
        self.wait_idle()


#: The ``browser`` fixture: opens a notebook, given :func:`open_notebook`'s
#: arguments after ``tmp_path`` and ``replay_dir``.
Browser = Callable[..., BrowserNotebook]


@contextlib.contextmanager
def _serve(
    tmp_path: Path,
    replay_dir: Path,
    app: str,
    cells: list[tuple[str, str]] | None,
    model: str | None,
    kernelspec: dict[str, str] | None,
) -> Iterator[Server]:
    root = tmp_path / "root"
    root.mkdir()
    if cells is None:
        # A plain message cell of the Cortex kernel (its model comes from the
        # environment the server passes to its kernels); prices whose figures
        # are in the message, so the answer's are grounded; a Python cell.
        message = "What is the capital of France? Add one fact about it."
        prices = f"%%agent --model replay:{replay_dir}/prices.jsonl\nWhat does it cost, 5 or 6?"
        cells = [("agent-cell", message), ("prices-cell", prices), ("python-cell", PYTHON_CELL)]
    ids, sources = zip(*cells, strict=True)
    notebook = notebook_json(*sources, ids=ids, kernelspec=kernelspec)
    (root / "view.ipynb").write_text(notebook, encoding="utf-8")
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
    port = free_port()
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
                time.sleep(0.2)  # polling the port: the server says nothing when it listens
        path = "lab/tree" if app == "jupyterlab" else "notebooks"
        base = f"http://127.0.0.1:{port}"
        yield Server(f"{base}/{path}/view.ipynb?token={TOKEN}", f"{base}/api", root / "view.ipynb")
    finally:
        # Server and kernels share the session: stop them together.
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@contextlib.contextmanager
def open_notebook(
    tmp_path: Path,
    replay_dir: Path,
    cells: list[tuple[str, str]] | None = None,
    model: str | None = None,
    *,
    app: str = "jupyterlab",
    kernelspec: dict[str, str] | None = None,
    init_script: str | None = None,
    listen: dict[str, Callable[[Any], None]] | None = None,
) -> Iterator[BrowserNotebook]:
    """A notebook of ``cells`` served by ``app`` and open in Chromium, its kernel idle.

    Parameters
    ----------
    tmp_path
        The test's folder: the server's root, settings and log, Chromium's profile.
    replay_dir
        The replay files of ``data/`` (the default cells' and model's).
    cells
        The notebook's code cells, (id, source); by default an agent message,
        a ``%%agent`` cell answering with prices and a ``%%python`` cell.
    model
        The kernels' ``CORTEX_MODEL`` (default: the view demo's replay, slow).
    app
        ``"jupyterlab"`` or ``"notebook"`` (Notebook 7).
    kernelspec
        The notebook's kernelspec (default: Cortex's).
    init_script
        JavaScript run in the page before JupyterLab loads.
    listen
        Handlers of the browser context's events (``"request"``,
        ``"console"``, ``"dialog"``…), attached before the page loads.
    """
    ensure_chromium()
    from playwright.sync_api import sync_playwright

    with (
        _serve(tmp_path, replay_dir, app, cells, model, kernelspec) as server,
        sync_playwright() as p,
    ):
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            viewport={"width": 1100, "height": 800},
            env={
                **os.environ,
                "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
                "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
            },
            # Quiet on a closed network.
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
        try:
            if init_script is not None:
                context.add_init_script(init_script)
            for event, handler in (listen or {}).items():
                context.on(event, handler)  # type: ignore[call-overload]  # named at run time
            page = context.pages[0] if context.pages else context.new_page()
            notebook = BrowserNotebook(server, page)
            page.goto(server.url)
            notebook.wait_idle()
            yield notebook
        finally:
            context.close()

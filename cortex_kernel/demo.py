"""``cortex-kernel demo`` (``make demo``): the main job.

Executes every example notebook under ``notebooks/`` headless, each in the
kernel its metadata names, on the offline replay model (the notebooks select
``replay:`` models themselves, so no network or key is needed), and writes
the executed notebooks plus one HTML page per notebook and an index page to
``notebooks/_build/``.
"""

from __future__ import annotations

import copy
import html
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["notebooks_dir", "run_demo", "static_copy"]


def notebooks_dir() -> Path:
    """The example notebooks of a source checkout (or of the current directory)."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        candidate = base / "notebooks"
        if any(candidate.glob("*.ipynb")):
            return candidate
    return Path.cwd() / "notebooks"


_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def static_copy(nb: Any) -> Any:
    """A copy of ``nb`` whose live views show their static HTML.

    A standalone HTML page has no kernel and no widget manager, so the view's
    own ``text/html`` representation (saved beside the widget) is what a
    reader should see.
    """
    static = copy.deepcopy(nb)
    for cell in static.cells:
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(_WIDGET_MIME, None)
    static.metadata.pop("widgets", None)
    return static


def run_demo(timeout: float = 300.0) -> int:
    """Execute the example notebooks; return 0 when every one ran without error."""
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    source = notebooks_dir()
    notebooks = sorted(source.glob("*.ipynb"))
    if not notebooks:
        print(f"no notebooks under {source}", file=sys.stderr)
        return 1
    out_dir = source / "_build"
    out_dir.mkdir(exist_ok=True)
    exporter = HTMLExporter()  # type: ignore[no-untyped-call]
    rows: list[str] = []
    failures = 0
    # jupyter_client < 8.10 has no such option (and would warn about it).
    config = Config()
    if KernelManager.class_traits().get("transport_encryption") is not None:
        config = Config({"KernelManager": {"transport_encryption": "auto"}})
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
        kernel = nb.metadata.get("kernelspec", {}).get("name", "python3")
        started = time.monotonic()
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name=kernel,
            resources={"metadata": {"path": str(source)}},
            # CurveZMQ keys for kernels whose spec takes them (ours and
            # ipykernel's): encrypted sockets, and no ipykernel warning per
            # notebook that plain TCP is readable by anyone on the machine.
            config=config,
        )
        status = "ok"
        try:
            client.execute()
        except CellExecutionError as exc:
            status = "failed"
            failures += 1
            print(f"{path.name}: a cell failed:\n{exc}", file=sys.stderr)
        elapsed = time.monotonic() - started
        nbformat.write(nb, out_dir / path.name)  # type: ignore[no-untyped-call]
        body, _ = exporter.from_notebook_node(static_copy(nb))
        html_name = path.with_suffix(".html").name
        (out_dir / html_name).write_text(body, encoding="utf-8")
        print(f"{path.name:36s} {kernel:8s} {status:6s} {elapsed:6.1f}s -> {out_dir / html_name}")
        rows.append(
            f'<li><a href="{html.escape(html_name)}">{html.escape(path.stem)}</a>'
            f" — {status}, {elapsed:.1f} s, kernel <code>{html.escape(kernel)}</code></li>"
        )
    index = out_dir / "index.html"
    index.write_text(
        "<!doctype html><meta charset=utf-8><title>cortex-kernel examples</title>"
        "<h1>cortex-kernel example notebooks</h1><ul>" + "".join(rows) + "</ul>\n",
        encoding="utf-8",
    )
    print(f"index: {index}")
    return 1 if failures else 0

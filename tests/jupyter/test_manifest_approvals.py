"""The manifest's ``approvals:`` mode: the kernel's first mode, papermill's grant, headless.

A manifest that sets ``approvals: auto`` (or ``bypass``) decides requests
for approval from the start, as ``%approvals auto`` would; ``%approvals``
still overrides it; under papermill (nobody to click) it counts as the
grant that lets a confirmed call run; ``cortex-kernel run`` follows it
without ``--yes``. Driven through jupyter_client, papermill in a
subprocess, and the headless entry point.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.headless import run_headless

from .conftest import Kernel, dump, notebook_json

pytestmark = pytest.mark.kernel

COUNT = [sys.executable, "-c", "import json,sys; print(len(json.load(sys.stdin)['text']))"]
CALL = (
    '<action type="tool" mode="sync" id="a1" output_key="n">'
    '{"name": "count", "parameters": {"text": "abc"}}</action>'
)
DECISIONS = (
    "%%python\nimport json\nprint(json.dumps([[e.approved, e.by] for e in _run.events "
    "if e.type == 'approval_decided']))"
)


def _manifest(tmp_path: Path, name: str, approvals: str | None) -> Path:
    turns = tmp_path / f"{name}.jsonl"
    turns.write_text(
        json.dumps({"content": CALL}) + "\n" + json.dumps({"content": "<response>$n</response>"}),
        encoding="utf-8",
    )
    manifest: dict[str, Any] = {
        "name": name,
        "model": f"replay:{turns}",
        "tools": [{"name": "count", "command": COUNT, "confirm": True}],
    }
    if approvals is not None:
        manifest["approvals"] = approvals
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CORTEX_MODEL", "CORTEX_UNATTENDED")}
    return {**env, **extra}


@pytest.fixture
def unattended(cortex_kernelspec: str) -> Iterator[Kernel]:
    # As papermill runs it: nobody can click Approve.
    kernel = Kernel(cortex_kernelspec, _env(CORTEX_UNATTENDED="1"))
    yield kernel
    kernel.shutdown()


def test_the_manifest_sets_the_first_mode_and_approvals_overrides_it(
    unattended: Kernel, tmp_path: Path
) -> None:
    auto = _manifest(tmp_path, "auto_agent", "auto")
    asks = _manifest(tmp_path, "asking_agent", None)
    assert unattended.run(f"%manifest {auto}").status == "ok"
    assert unattended.python("%approvals").strip() == "approvals: auto (the manifest's)"
    granted = unattended.run("count it", cell_id="cell-auto")
    assert granted.status == "ok", dump(granted)
    assert granted.result_data()["text/plain"] == "3"
    assert json.loads(unattended.python(DECISIONS)) == [[True, "manifest approvals: auto"]]

    # A manifest without the field: back to asking (refused here: nobody to ask).
    assert unattended.run(f"%manifest {asks}").status == "ok"
    assert unattended.python("%approvals").strip() == "approvals: ask"
    refused = unattended.run("count it", cell_id="cell-ask")
    ops = json.dumps(refused.widget_ops())
    assert "nobody can approve" in ops, dump(refused)
    assert "approvals: auto in the manifest" in ops  # the way a papermill run can say yes

    # The user's %approvals stands over the next manifest's.
    assert unattended.python("%approvals deny").strip() == "approvals: deny"
    assert unattended.run(f"%manifest {auto}").status == "ok"
    assert unattended.python("%approvals").strip() == "approvals: deny"
    denied = unattended.run("count it", cell_id="cell-deny")
    assert denied.status == "ok", dump(denied)
    assert json.loads(unattended.python(DECISIONS)) == [[False, "%approvals deny"]]


def test_papermill_runs_a_confirmed_call_the_manifest_grants(
    cortex_kernelspec: str, tmp_path: Path
) -> None:
    pytest.importorskip("papermill")
    granted = _manifest(tmp_path, "granted", "bypass")
    notebook = notebook_json(f"%manifest {granted}", "count it", DECISIONS)
    source = tmp_path / "granted.ipynb"
    source.write_text(notebook, encoding="utf-8")
    out = tmp_path / "out.ipynb"
    command = [sys.executable, "-m", "papermill", str(source), str(out)]
    run = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    cells = json.loads(out.read_text(encoding="utf-8"))["cells"]
    answer = [o for o in cells[1]["outputs"] if o["output_type"] == "execute_result"]
    assert answer and "".join(answer[0]["data"]["text/plain"]) == "3"
    printed = "".join("".join(o.get("text", "")) for o in cells[2]["outputs"])
    assert json.loads(printed) == [[True, "manifest approvals: bypass"]]


@pytest.mark.parametrize(
    ("approvals", "yes", "status", "decision"),
    [
        ("bypass", False, 0, [True, "manifest approvals: bypass"]),
        ("auto", False, 0, [True, "manifest approvals: auto"]),
        ("deny", False, 1, [False, "manifest approvals: deny"]),
        ("deny", True, 0, [True, "--yes"]),
        (None, False, 1, None),
    ],
)
def test_headless_follows_the_manifest_unless_yes(
    tmp_path: Path, approvals: str | None, yes: bool, status: int, decision: list[Any] | None
) -> None:
    path = _manifest(tmp_path, "headless", approvals)
    out = io.StringIO()
    code = run_headless("count it", manifest=str(path), yes=yes, out=out, drain_timeout=1.0)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    decided = [[e["approved"], e["by"]] for e in events if e["type"] == "approval_decided"]
    finished = next(e for e in events if e["type"] == "run_finished")
    assert decided == ([decision] if decision else []), events[-3:]
    if status == 0:
        assert code == 0 and finished["answer"] == "3", finished
    else:
        assert finished["answer"] != "3", finished

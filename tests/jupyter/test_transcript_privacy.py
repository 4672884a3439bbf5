"""Transcripts hold what the model saw: a private per-user folder, and %transcript says where."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Kernel, dump

pytestmark = pytest.mark.kernel


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def user_env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("CORTEX_TRANSCRIPT_DIR", "XDG_STATE_HOME")
    }
    env["HOME"] = str(home)
    return env


@pytest.mark.skipif(sys.platform != "linux", reason="the folder checked is Linux's XDG state dir")
def test_kernel_transcripts_are_private(cortex_kernelspec: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / ".local" / "state" / "cortex-kernel" / "transcripts"
    folder.mkdir(parents=True)
    folder.chmod(0o755)  # left loose by an older version: tightened
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"content": "<response>hi</response>"}) + "\n")
    kernel = Kernel(cortex_kernelspec, user_env(home))
    try:
        result = kernel.run(f"%%agent --model replay:{turns}\nhello")
        assert result.status == "ok", dump(result)
        shown = kernel.python("%transcript")
        path = Path(kernel.python("%transcript path").strip())
        export = tmp_path / "export.jsonl"
        kernel.python(f"%transcript export {export}")
    finally:
        kernel.shutdown()
    assert f"transcripts: {folder} (private: folder 0700, files 0600)" in shown
    assert f"last run: {path}" in shown
    assert path.parent == folder and path.is_file()
    assert mode(folder) == 0o700 and mode(folder.parent) == 0o700
    assert mode(path) == 0o600 and mode(export) == 0o600


@pytest.mark.skipif(sys.platform != "linux", reason="the folder checked is Linux's XDG state dir")
def test_headless_transcripts_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"content": "<response>hi</response>"}) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "cortex_kernel", "run", "hi", "--model", f"replay:{turns}"],
        env=user_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    folder = home / ".local" / "state" / "cortex-kernel" / "transcripts"
    files = list(folder.glob("*.transcript.jsonl"))
    assert len(files) == 1
    assert mode(folder) == 0o700 and mode(files[0]) == 0o600
    assert not any(mode(p) & 0o077 for p in (folder.parent, folder.parent.parent))

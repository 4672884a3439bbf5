"""Exported notebooks: nbconvert's HTML highlights cells as the editor does.

The kernel's ``language_info`` names Pygments' ``cortex`` lexer (an entry
point of this package): a ``%%python`` cell comes out as Python, a message
as markdown (no Python keywords in prose).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import notebook_json

pytestmark = pytest.mark.kernel


def _inputs(html: str) -> list[str]:
    """The highlighted source of each code cell, in order."""
    return re.findall(r'<div class="highlight hl-[^"]*"><pre>(.*?)</pre>', html, re.S)


def test_nbconvert_html_highlights_python_cells_as_python(
    cortex_kernelspec: str, replay_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "ask.ipynb"
    python = "%%python\ndef double(x):\n    return x * 2 if x and x > 0 else None"
    message = "What is x and y? See https://example.com//x for it."
    path.write_text(notebook_json(python, message), encoding="utf-8")
    env = {**os.environ, "CORTEX_MODEL": f"replay:{replay_dir}/answer.jsonl"}
    nbconvert = [sys.executable, "-m", "jupyter", "nbconvert"]
    # Run first, as a front end would before saving: the file then holds the
    # kernel's language_info (HTML export with --execute reads it before running).
    for options in (["--to", "notebook", "--execute", "--inplace"], ["--to", "html"]):
        run = subprocess.run([*nbconvert, *options, str(path)], env=env, capture_output=True)
        assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    language_info = json.loads(path.read_text(encoding="utf-8"))["metadata"]["language_info"]
    assert language_info["name"] == "markdown"
    html = (tmp_path / "ask.html").read_text(encoding="utf-8")
    python_html, message_html = _inputs(html)
    # Python token classes: keyword, function name, operator word.
    assert '<span class="k">def</span>' in python_html
    assert '<span class="nf">double</span>' in python_html
    assert '<span class="ow">and</span>' in python_html
    # The message is prose: "and" is not a keyword, "//" not an operator.
    assert "and" in message_html and '<span class="ow">' not in message_html
    assert '<span class="o">//</span>' not in message_html
    assert '<span class="k' not in message_html

"""Other clients: ``jupyter console`` under a pty, papermill.

The console: Enter runs a message unless it is inside a fence or an open
tag, ``%%python`` cells continue until a blank line, the run's
plain-text view updates as it streams and ends with the final state, and
``exit`` leaves as in IPython. papermill: parameters become a ``%%python``
cell, and a relative replay path resolves next to the notebook wherever
papermill runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import notebook_json

pytestmark = pytest.mark.kernel

# prompt_toolkit colours the prompts: "In [" ESC… "3" ESC… "]: ".
PROMPT = r"In \[\S*?\d+\S*?\]: "
MORE = r"\.\.\.: "


def _console(replay_dir: Path, tmp_path: Path) -> Any:
    pexpect = pytest.importorskip("pexpect")
    env = {
        **os.environ,
        "CORTEX_MODEL": f"replay:{replay_dir}/answer.jsonl",
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "TERM": "xterm",
    }
    # The full prompt_toolkit interface (--simple-prompt has no multi-line input).
    command = [sys.executable, "-m", "jupyter_console", "--kernel", "cortex"]
    child = pexpect.spawn(
        command[0], command[1:], env=env, encoding="utf-8", timeout=60, dimensions=(50, 200)
    )
    child.expect(PROMPT)
    return child


def test_console_runs_messages_python_cells_and_exits(
    cortex_kernelspec: str, replay_dir: Path, tmp_path: Path
) -> None:
    child = _console(replay_dir, tmp_path)
    try:
        # A message is complete at Enter; the live view prints, then the final state.
        child.sendline("What is x?")
        child.expect(r"Cortex run \[running\]")
        child.expect(r"✓ a1 internal set_variable")  # a line of the live view
        child.expect(r"Cortex run \[ok\]")
        child.expect("The answer is 42")
        child.expect(PROMPT)
        # %%python continues until a blank line (and no kernel crash).
        child.sendline("%%python")
        child.expect(MORE)
        child.sendline("for i in range(2):")
        child.expect(MORE)
        child.sendline("print('row', i * 21)")  # the console indents it
        child.expect(MORE)
        child.sendline("")
        child.expect("row 21")
        child.expect(PROMPT)
        # Inside a fence, Enter continues the message.
        child.sendline("Explain this:")
        child.expect(r"Cortex run \[ok\]")
        child.expect(PROMPT)
        child.sendline("```python")
        child.expect(MORE)
        child.sendline("print(1)")
        child.expect(MORE)
        child.sendline("```")
        child.expect(r"Cortex run \[ok\]")
        child.expect(PROMPT)
        # exit leaves, as in IPython (not a message to the agent).
        child.sendline("exit")
        child.expect(pexpect_eof())
    finally:
        child.close(force=True)


def test_console_python_cell_continues_until_blank_line(
    cortex_kernelspec: str, replay_dir: Path, tmp_path: Path
) -> None:
    child = _console(replay_dir, tmp_path)
    try:
        # Complete statements do not end the cell (they did: "y = …" went to the agent).
        child.sendline("%%python")
        child.expect(MORE)
        for line in ("x = 1", "y = 20", "print('sum', x + y)"):
            child.sendline(line)
            child.expect(MORE)
        child.sendline("")
        child.expect("sum 21")
        child.expect(PROMPT)
        # A function's body stays in the cell; the console indents it.
        child.sendline("%%python")
        child.expect(MORE)
        child.sendline("def f():")
        child.expect(MORE)
        child.sendline("z = x + y")
        child.expect(MORE)
        child.sendline("return z * 2")
        child.expect(MORE)
        child.sendline("")
        child.expect(PROMPT)
        child.sendline("%%python")
        child.expect(MORE)
        child.sendline("print('twice', f())")
        child.expect(MORE)
        child.sendline("")
        child.expect("twice 42")
        child.expect(PROMPT)
    finally:
        child.close(force=True)


def pexpect_eof() -> Any:
    import pexpect

    return pexpect.EOF


def test_is_complete_for_message_and_python_cells(
    kernel_factory: Any, cortex_kernelspec: str
) -> None:
    kernel = kernel_factory(cortex_kernelspec)
    cases = {
        "What is x?": "complete",
        "```python\nprint(1)": "incomplete",
        "```python\nprint(1)\n```": "complete",
        "Look at <action type='tool'": "incomplete",
        "<thought>still open": "incomplete",
        "a < b and c > d": "complete",
        "%%python": "incomplete",
        "%%python\nfor i in range(3):": "incomplete",
        # A %%python cell continues until a blank line, as IPython's cell magics.
        "%%python\nx = 1": "incomplete",
        "%%python\nx = 1\ny = 2": "incomplete",
        "%%python\nx = 1\ny = 2\n": "complete",
        "%%python\ndef f():\n    return 1\n    ": "complete",
        "%%python\nx = (": "incomplete",
        "%model": "complete",
        "": "complete",
    }
    for code, expected in cases.items():
        msg_id = kernel.kc.is_complete(code)
        reply = kernel.kc.get_shell_msg(timeout=10)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kernel.kc.get_shell_msg(timeout=10)
        assert reply["content"]["status"] == expected, (code, reply["content"])
    assert kernel.python("%%python\nprint('alive')").strip() == "alive"


def test_papermill_parameters_and_relative_replay_path(
    cortex_kernelspec: str, replay_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("papermill")
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    for name in ("answer.jsonl", "sub.jsonl"):
        shutil.copy(replay_dir / name, folder / "data" / name)

    notebook = notebook_json(
        "%%python\nanimal = 'cat'",
        "%model replay:data/answer.jsonl",
        "Tell me about {animal}.",
        "%%python\nprint(_run.events[0].message)",
        tags={0: ["parameters"]},
    )
    source = folder / "ask.ipynb"
    source.write_text(notebook, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = elsewhere / "out.ipynb"
    env = {k: v for k, v in os.environ.items() if k != "CORTEX_MODEL"}
    command = [sys.executable, "-m", "papermill", str(source), str(out), "-p", "animal", "owl"]
    run = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    cells = json.loads(out.read_text(encoding="utf-8"))["cells"]
    injected = next(c for c in cells if "injected-parameters" in c["metadata"].get("tags", []))
    assert "".join(injected["source"]).startswith("%%python\n")
    assert 'animal = "owl"' in "".join(injected["source"])
    answer = [o for o in cells[3]["outputs"] if o["output_type"] == "execute_result"]
    assert answer and "The answer is 42" in "".join(answer[0]["data"]["text/plain"])
    printed = "".join("".join(o.get("text", "")) for o in cells[4]["outputs"])
    assert printed.strip() == "Tell me about owl."

"""Bad input to the command line: one clear line on stderr and the documented exit code.

``cortex-kernel`` exits 2 for a usage or input error (see ``cortex_kernel.cli``),
never with a Python traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BINARY = bytes(range(256)) * 4


def cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "cortex_kernel", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def one_clear_line(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    path = tmp_path / "blob.bin"
    path.write_bytes(BINARY)
    return path


def test_parse_a_binary_file(binary: Path) -> None:
    one_clear_line(cli("parse", str(binary)), "not UTF-8 text", str(binary))


def test_parse_binary_stdin() -> None:
    one_clear_line(cli("parse", stdin=BINARY), "stdin is not UTF-8 text")


def test_parse_a_missing_file(tmp_path: Path) -> None:
    one_clear_line(cli("parse", str(tmp_path / "nope.txt")), "No such file")


def test_parse_a_directory(tmp_path: Path) -> None:
    one_clear_line(cli("parse", str(tmp_path)), "is a directory")


def test_parse_a_deeply_nested_body() -> None:
    nested = "[" * 5000 + "]" * 5000
    text = f'<action type="tool" id="a">{{"name": "t", "parameters": {{"x": {nested}}}}}</action>'
    result = cli("parse", stdin=text.encode())
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events] == ["action_open", "action_error"]
    assert "nested more than 100 levels deep" in events[1]["message"]


def test_run_with_a_binary_replay_file(binary: Path) -> None:
    one_clear_line(cli("run", "hi", "--model", f"replay:{binary}"), "not UTF-8 text")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("", ("is empty",)),
        ("\n\n", ("is empty",)),
        ("[1, 2]\n", (":1:", "JSON object", "not a list")),
        ('{"content": "<response>hi</response>"}\n"text"\n', (":2:", "not a str")),
        ('{"content": 5}\n', ('"content" must be a string',)),
        ("{not json\n", (":1:", "not a JSON line")),
    ],
)
def test_run_with_an_invalid_replay_file(
    tmp_path: Path, content: str, words: tuple[str, ...]
) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text(content, encoding="utf-8")
    one_clear_line(cli("run", "hi", "--model", f"replay:{path}"), *words)


def test_run_with_an_unwritable_transcript(tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"content": "<response>hi</response>"}) + "\n")
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "run.jsonl"  # a path under a regular file
    result = cli("run", "hi", "--model", f"replay:{turns}", "--transcript", str(target))
    one_clear_line(result, "cannot write the transcript", str(target))
    assert result.stdout == ""  # refused before the run, nothing lost


@pytest.mark.parametrize("message", ["", "   ", "\n"])
def test_run_refuses_an_empty_message(message: str) -> None:
    result = cli("run", message, "--model", "replay:whatever.jsonl")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "the message is empty" in result.stderr

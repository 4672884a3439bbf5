"""Values and model output that used to crash a run, through the real kernel.

A tool returning a non-UTF-8 file name (a lone surrogate), an object whose
``repr`` raises, an action body nested hundreds deep, model text holding a
lone surrogate: each must give a finished run (``_run`` set), an
``action_error`` or a marked value where it cannot be shown — never a bare
``ExceptionGroup`` and never a broken kernel.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.replays import write_turns

from .conftest import Kernel, dump

pytestmark = pytest.mark.kernel

TOOLS = """%%python
import os
from cortex_kernel import tool

class Unprintable:
    def __repr__(self):
        raise ValueError("no repr for you")
    __str__ = __repr__

@tool
def file_name() -> str:
    \"\"\"A file name from a non-UTF-8 file system.\"\"\"
    return os.fsdecode(b"report-\\xff.csv")

@tool
def weird() -> object:
    \"\"\"An object that cannot be shown.\"\"\"
    return Unprintable()
"""


def replay(folder: Path, name: str, *turns: str) -> str:
    return f"replay:{write_turns(folder / f'{name}.jsonl', *turns)}"


@pytest.fixture(scope="module")
def kernel(cortex_kernelspec: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = {**os.environ, "CORTEX_TRANSCRIPT_DIR": str(tmp_path_factory.mktemp("transcripts"))}
    kernel = Kernel(cortex_kernelspec, env)
    kernel.python(TOOLS)
    yield kernel
    kernel.shutdown()


def status(kernel: Kernel) -> str:
    return kernel.python("%%python\nprint(_run.status, '|', _run.message)").strip()


def transcript_is_readable(kernel: Kernel) -> None:
    out = kernel.python(
        "%%python\nfrom cortex_kernel.runtime.run_events import parse_event\n"
        "import json\n"
        "lines = [l for l in open(_run.transcript, encoding='utf-8').read().splitlines()]\n"
        "print(sum(1 for l in lines if json.loads(l)['type'] != 'model_turn'"
        " and parse_event(l).type), len(lines))"
    )
    events, lines = out.split()
    assert int(events) > 0 and int(lines) >= int(events)


def test_non_utf8_file_name_result(kernel: Kernel, tmp_path: Path) -> None:
    model = replay(
        tmp_path,
        "fname",
        '<action type="tool" id="f" output_key="fname">{"name": "file_name"}</action>',
        "<response>The file is $fname</response>",
    )
    result = kernel.run(f"%%agent --model {model}\nwhich file?")
    assert result.status == "ok", dump(result)
    assert status(kernel) == "ok |"
    # The notebook keeps the exact value; what is shown escapes the bad byte.
    assert kernel.python("%%python\nprint(fname == os.fsdecode(b'report-\\xff.csv'))").strip() == (
        "True"
    )
    assert result.result_data()["text/plain"] == "The file is report-\\udcff.csv"
    transcript_is_readable(kernel)


def test_unprintable_result(kernel: Kernel, tmp_path: Path) -> None:
    model = replay(
        tmp_path,
        "weird",
        '<action type="tool" id="w" output_key="thing">{"name": "weird"}</action>',
        "<response>done</response>",
    )
    result = kernel.run(f"%%agent --model {model}\nshow it")
    assert result.status == "ok", dump(result)
    assert status(kernel) == "ok |"
    preview = kernel.python(
        "%%python\nprint([e.preview for e in _run.events if e.type == 'action_succeeded'])"
    )
    assert "<unprintable Unprintable: ValueError>" in preview
    # The model was told what it got, with the marker (turn 2 opens with it).
    sent = kernel.python(
        "%%python\nfrom cortex_kernel.jupyter.runner import runner_for\n"
        "print(runner_for(get_ipython()).session.history()[-2]['content'])"
    )
    assert "unprintable Unprintable" in sent
    transcript_is_readable(kernel)


@pytest.mark.parametrize("depth", [300, 999, 5000])
def test_deeply_nested_body_is_an_action_error(kernel: Kernel, tmp_path: Path, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    model = replay(
        tmp_path,
        "deep",
        f'<action type="tool" id="d">{{"name": "file_name", "parameters": {{"x": {nested}}}}}'
        "</action>",
        "<response>recovered</response>",
    )
    result = kernel.run(f"%%agent --model {model}\ngo deep")
    assert result.status == "ok", dump(result)
    assert status(kernel) == "ok |"
    errors = kernel.python(
        "%%python\nprint([e.message for e in _run.events if e.type == 'action_error'])"
    )
    assert "nested" in errors and "levels deep" in errors
    assert result.result_data()["text/plain"] == "recovered"
    transcript_is_readable(kernel)


def test_lone_surrogate_in_model_text(kernel: Kernel, tmp_path: Path) -> None:
    model = replay(tmp_path, "sur", "<thought>\ud800 odd</thought><response>fine \udcff</response>")
    result = kernel.run(f"%%agent --model {model}\nhello")
    assert result.status == "ok", dump(result)
    assert status(kernel) == "ok |"
    assert result.result_data()["text/plain"] == "fine \\udcff"
    transcript_is_readable(kernel)

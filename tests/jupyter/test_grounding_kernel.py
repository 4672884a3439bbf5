"""Grounded answers in a notebook: through jupyter_client, as a front end receives them.

A replay model answers "North: 80 units" without running anything: the
published answer marks the figure ``*(unverified)*`` and says under it that
no data was looked at, in every representation; the live view's ops carry
the marked answer and the note; ``_run.grounding`` holds the report. The
cell still succeeds: the answer is marked, not failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Kernel, dump

pytestmark = pytest.mark.kernel

NOTE = "⚠ 1 figure not found in any result (no data was looked at): 80"


def test_an_answer_given_without_data_is_marked_with_a_note(
    cortex: Kernel, replay_dir: Path
) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/regions.jsonl\nSales by region?")
    assert result.status == "ok", dump(result)
    answer = result.result_data()
    assert answer["text/plain"] == f"North: 80 *(unverified)* units\n\n{NOTE}"
    assert "*(unverified)*" in answer["text/markdown"] and NOTE in answer["text/markdown"]
    assert "<em>(unverified)</em>" in answer["text/html"] and NOTE in answer["text/html"]
    # The live view gets the marked answer and the note (widgets/view.js shows both).
    run = {k: v for op in result.widget_ops() if op[0] == "run" for k, v in op[1].items()}
    assert run["answer"] == "North: 80 *(unverified)* units"
    assert run["grounding"] == NOTE.removeprefix("⚠ ")
    out = cortex.python(
        "%%python\ng = _run.grounding\n"
        "print(_run.status, len(g.unverified), g.no_data_looked_at, '|', _response)"
    )
    assert out.strip() == "ok 1 True | North: 80 units"  # _response is the answer itself


def test_an_answer_its_data_backs_has_no_mark(cortex: Kernel, replay_dir: Path) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/regions.jsonl\nIs North at 80 units?")
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/plain"] == "North: 80 units"  # the user's own figure
    out = cortex.python(
        "%%python\nprint(len(_run.grounding.unverified), len(_run.grounding.figures))"
    )
    assert out.strip() == "0 1"

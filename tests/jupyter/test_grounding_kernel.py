"""Grounded answers in a notebook: through jupyter_client, as a front end receives them.

A replay model answers "North: 80 units" without running anything: the
published answer marks the figure ``*(unverified)*`` and says under it that
no data was looked at, in every representation; the live view's ops carry
the marked answer and the note; ``_run.grounding`` holds the report. The
cell still succeeds: the answer is marked, not failed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.replays import write_turns

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


SALES = (
    "%%python\nimport pandas as pd\n"
    "df = pd.DataFrame({'region': ['North', 'South', 'East', 'West', 'North', 'South'],"
    " 'units': [30, 10, 25, 20, 25, 40]})"
)
# The agent looks at the rows, then sums them per region: 3 is a row number
# it saw, 4 the regions the grouped sums list.
LOOK = "print(df)\nprint(df.groupby('region')['units'].sum())"


def looked_then_answered(tmp_path: Path, answer: str) -> Path:
    """A replay: one ``python`` action running :data:`LOOK`, then ``answer``.

    The answer comes twice: asked to check a figure no result gives (the
    runtime's one check turn), the model writes it again.
    """
    call = json.dumps({"name": "python", "parameters": {"code": LOOK}})
    response = f"<response>{answer}</response>"
    turns = [f'<action type="tool" id="p1">{call}</action>', response, response]
    path = tmp_path / "looked.jsonl"
    write_turns(path, *turns)
    return path


@pytest.mark.parametrize(
    ("answer", "shown", "how"),
    [
        (
            "There are 3 regions; North sold 55 units.",
            "There are 3 *(unverified)* regions; North sold 55 units.",
            "",  # a count of regions: not the row number 3 it saw
        ),
        (
            "There are 4 regions; North sold 55 units and South 50, 105 together.",
            "There are 4 regions; North sold 55 units and South 50, 105 together.",
            "count of region",
        ),
    ],
)
def test_a_count_of_regions_is_checked_against_the_groups_the_agent_printed(
    kernel_factory: Any, cortex_kernelspec: str, tmp_path: Path, answer: str, shown: str, how: str
) -> None:
    kernel = kernel_factory(cortex_kernelspec, dict(os.environ))
    kernel.python(SALES)
    kernel.python("%approvals bypass")
    replay = looked_then_answered(tmp_path, answer)
    result = kernel.run(f"%%agent --model replay:{replay}\nHow many regions, and North's units?")
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/plain"].split("\n\n")[0] == shown
    out = kernel.python("%%python\nprint(_run.grounding.figures[0].how)")
    assert out.strip() == how
    # An unverified figure was questioned once before the answer stood.
    out = kernel.python(
        "%%python\nprint(sum('asked to check' in getattr(e, 'message', '') for e in _run.events))"
    )
    assert out.strip() == ("1" if how == "" else "0")

"""Grounded answers in a run: the loop checks the final answer against what the run saw.

Through the runtime alone, with a scripted model and an executor that looks
up populations: the report lands on :attr:`RunResult.grounding` and in the
``run_finished`` event (so in the transcript), and the status stays ``ok``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.protocol.models import Action, ActionType
from cortex_kernel.runtime import answer as answer_module
from cortex_kernel.runtime.ports import ExecutionContext, Executor, SessionConfig
from cortex_kernel.runtime.session import Session

from .fakes import ScriptedModel

pytestmark = pytest.mark.anyio

# Four looked-up populations; they sum to 3,209,695.
POPULATIONS = {"Aston": 1_234_567, "Brill": 987_654, "Corfe": 654_321, "Dunster": 333_153}
QUESTION = "What is the total population of Aston, Brill, Corfe and Dunster?"


class Census(Executor):
    """``tool`` actions: ``population`` returns a city's record."""

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        return None

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        city = body["parameters"]["city"]
        return {"city": city, "population": POPULATIONS[city]}


def lookups() -> str:
    """One turn that looks up the four cities in parallel."""
    actions = [
        f'<action type="tool" mode="async" id="p{i}">'
        + json.dumps({"name": "population", "parameters": {"city": city}})
        + "</action>"
        for i, city in enumerate(POPULATIONS, 1)
    ]
    return "".join(actions) + "<progress>looking them up</progress>"


def session(model: ScriptedModel, tmp_path: Path) -> Session:
    config = SessionConfig(
        model=model,
        prompt=_Prompt(),
        executors={ActionType.TOOL: Census()},
        transcript_dir=tmp_path,
    )
    return Session(config)


class _Prompt:
    def system_prompt(self, context: Any) -> str:
        return "You are a test."

    def feeds_message(self, context: Any) -> str:
        return ""


def finished(result: Any) -> Any:
    return next(e for e in result.events if e.type == "run_finished")


async def test_an_invented_total_is_reported_unverified_and_the_run_stays_ok(
    tmp_path: Path,
) -> None:
    invented = "<response>The four cities have 7,174,195 inhabitants in all.</response>"
    # Asked once to check the figure (rule 8), the model writes it again.
    model = ScriptedModel([lookups(), invented, invented])
    s = session(model, tmp_path)
    result = await s.run(QUESTION)
    assert result.status == "ok"  # honest status: the answer is marked, not failed
    assert result.grounding is not None
    assert [f.text for f in result.grounding.unverified] == ["7,174,195"]
    assert not result.grounding.no_data_looked_at  # the run did read data
    event = finished(result).grounding
    assert event["unverified"] == 1 and event["unverified_figures"][0]["text"] == "7,174,195"
    assert result.transcript is not None
    lines = [json.loads(line) for line in result.transcript.read_text().splitlines()]
    written = next(line for line in lines if line["type"] == "run_finished")
    assert written["grounding"]["unverified"] == 1
    await s.aclose()


async def test_the_true_total_and_a_filled_reference_are_grounded(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            lookups(),
            "<response>Aston has $p1.population people; all four have 3,209,695.</response>",
        ]
    )
    s = session(model, tmp_path)
    result = await s.run(QUESTION)
    assert result.answer == "Aston has 1234567 people; all four have 3,209,695."
    assert result.grounding is not None
    assert result.grounding.unverified == () and len(result.grounding.figures) == 2
    assert finished(result).grounding["unverified"] == 0
    await s.aclose()


async def test_an_earlier_runs_result_grounds_a_later_answer(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            lookups(),
            "<response>Looked them up.</response>",
            "<response>Corfe has 654,321 people.</response>",
        ]
    )
    s = session(model, tmp_path)
    await s.run(QUESTION)
    later = await s.run("And Corfe?")  # no action in this run: the figure is the earlier result's
    assert later.grounding is not None and later.grounding.unverified == ()
    await s.aclose()


async def test_figures_stated_without_looking_at_any_data_say_so(tmp_path: Path) -> None:
    model = ScriptedModel(["<response>North: 80 units, South: 30.</response>"])
    s = session(model, tmp_path)
    result = await s.run("Sales by region?")
    assert result.status == "ok"
    assert result.grounding is not None and result.grounding.no_data_looked_at
    assert result.grounding.summary() == (
        "2 figures not found in any result (no data was looked at): 80; 30"
    )
    await s.aclose()


async def test_after_a_failed_lookup_the_users_own_figure_is_not_flagged(
    tmp_path: Path,
) -> None:
    # The only lookup failed; the answer repeats the user's figure, which is
    # theirs to state (a figure that only a feed holds is flagged: test_grounding).
    failing = (
        '<action type="tool" mode="sync" id="p1">'
        '{"name": "population", "parameters": {"city": "Atlantis"}}</action>'
    )
    model = ScriptedModel([failing, "<response>No record; you read 5,000.</response>"])
    s = session(model, tmp_path)
    result = await s.run("How many people live in Atlantis? I read 5,000 somewhere.")
    assert result.status == "ok"
    assert result.grounding is not None and result.grounding.unverified == ()
    assert not result.grounding.no_data_looked_at and result.grounding.summary() == ""
    await s.aclose()


async def test_a_failing_check_is_skipped_and_never_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(answer: str, evidence: Any, **_: Any) -> Any:
        raise RuntimeError("checker bug")

    monkeypatch.setattr(answer_module, "check", broken)
    model = ScriptedModel(["<response>North: 80 units.</response>"])
    s = session(model, tmp_path)
    result = await s.run("Sales?")
    assert (result.status, result.answer, result.grounding) == ("ok", "North: 80 units.", None)
    assert finished(result).grounding is None
    await s.aclose()

"""What real models write, replayed: the runtime absorbs the drift (issue 9 §3).

Each test replays a transcript of a drift seen from Qwen2.5-Coder-1.5B (see
docs/protocol-drift.md) through the same composition as the kernel
(``agent.build_session`` with a replay model) and checks what the user and
the model are told.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.runtime.drift import schema_as_parameters_message, tool_signature
from cortex_kernel.runtime.run_result import RunResult
from cortex_kernel.runtime.tools import closest_names, unknown_tool_message
from tests.replays import write_turns

pytestmark = pytest.mark.anyio

POPULATIONS = {"Lyon": 520_774, "Nice": 348_085}


def population(city: str) -> int:
    """Population of a French city."""
    return POPULATIONS[city]


def weather(city: str) -> dict[str, Any]:
    """Weather of a city."""
    raise ConnectionError("weather service down")


def action(name: str, mode: str = "sync", attrs: str = "", **parameters: Any) -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    return f'<action type="tool" mode="{mode}" {attrs}>{body}</action>'


async def replay(
    tmp_path: Path, turns: list[str], message: str = "go", tools: tuple[Any, ...] = ()
) -> tuple[RunResult, Any]:
    path = tmp_path / "turns.jsonl"
    write_turns(path, *turns)
    namespace: dict[str, Any] = {}
    session = build_session(model=f"replay:{path}", namespace=namespace, transcript_dir=tmp_path)
    for function in (population, weather, *tools):
        session.tools.register(function)
    try:
        result = await session.run(message)
    finally:
        await session.aclose()
    return result, session


def told(session: Any) -> str:
    """Everything the model was sent after its first turn, as one string."""
    return "\n".join(str(m.get("content")) for m in session.history() if m["role"] != "assistant")


# -- rule 4b: an unknown tool's error names the closest known tools -----------


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("populations", ["population"]),
        ("Population", ["population"]),
        ("get_population", ["population"]),
        ("population_of_city", ["population"]),
        ("get_weather_info", ["weather"]),
        ("log_request", []),
    ],
)
def test_closest_names(written: str, meant: list[str]) -> None:
    assert closest_names(written, ["population", "weather", "add"]) == meant


def test_unknown_tool_message() -> None:
    assert unknown_tool_message("populaton", ["weather", "population"]) == (
        "unknown tool 'populaton'; did you mean 'population'? available tools: population, weather"
    )
    assert unknown_tool_message("x", []) == "unknown tool 'x'; available tools: none"


async def test_a_misspelt_tool_is_corrected_from_the_error(tmp_path: Path) -> None:
    result, session = await replay(
        tmp_path,
        [
            action("get_population", attrs='id="p"', city="Lyon"),
            action("population", attrs='id="p2" output_key="lyon"', city="Lyon"),
            "<response>Lyon: $lyon</response>",
        ],
    )
    errors = [e for e in result.events if e.type == "action_error"]
    assert [e.message.split(";")[:2] for e in errors] == [
        [
            "unknown tool 'get_population'",
            " did you mean 'population'? available tools: population, weather",
        ]
    ]
    assert "did you mean 'population'?" in told(session)
    assert (result.status, result.answer) == ("ok", "Lyon: 520774")


# -- rule 4c: the tool's JSON Schema sent as its parameters --------------------

CITY_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize(
    "sent",
    [
        CITY_SCHEMA,  # seen from the 1.5B model with prompt v1
        {"properties": {"city": {"type": "string", "description": "the city"}}},
        {"city": {"type": "string"}},  # one property's schema as its value
    ],
)
def test_schema_as_parameters_is_recognised(sent: dict[str, Any]) -> None:
    assert schema_as_parameters_message("population", sent, CITY_SCHEMA) == (
        "you sent the JSON schema of tool 'population' as its parameters, not values. "
        "It takes population(city: string): send the values themselves, like "
        '{"name": "population", "parameters": {"city": "..."}}'
    )


@pytest.mark.parametrize(
    ("sent", "schema"),
    [
        ({"city": "Lyon"}, CITY_SCHEMA),
        ({}, CITY_SCHEMA),
        ("Lyon", CITY_SCHEMA),
        # A tool that takes an object, or a parameter named like a schema key.
        (
            {"spec": {"type": "string"}},
            {"type": "object", "properties": {"spec": {"type": "object"}}},
        ),
        (
            {"type": "object", "properties": {}},
            {"type": "object", "properties": {"type": {}, "properties": {}}},
        ),
    ],
)
def test_values_are_not_mistaken_for_a_schema(sent: Any, schema: dict[str, Any]) -> None:
    assert schema_as_parameters_message("t", sent, schema) is None


def test_tool_signature_shows_types_defaults_and_example_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "default": 1},
            "unit": {"enum": ["C", "F"], "type": "string"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["city", "unit"],
    }
    assert tool_signature("forecast", schema) == (
        "forecast(city: string, days: integer = 1, unit: string, note: string (optional))",
        {"city": "...", "unit": "C"},
    )


async def test_a_schema_sent_as_parameters_is_corrected_from_the_error(tmp_path: Path) -> None:
    schema_call = json.dumps({"name": "population", "parameters": CITY_SCHEMA})
    result, session = await replay(
        tmp_path,
        [
            f'<action type="tool" mode="sync" id="p">{schema_call}</action>',
            action("population", attrs='id="p" output_key="lyon"', city="Lyon"),
            "<response>Lyon: $lyon</response>",
        ],
    )
    [error] = of_type(result, "action_error")
    assert error.message.startswith("you sent the JSON schema of tool 'population'")
    assert '{"name": "population", "parameters": {"city": "..."}}' in told(session)
    assert (result.status, result.answer) == ("ok", "Lyon: 520774")


def of_type(result: RunResult, kind: str) -> list[Any]:
    return [e for e in result.events if e.type == kind]


# -- rule 5: reusing an id ----------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        action("population", attrs='id="p"', city="Atlantis"),  # fails: unknown city
        action("populaton", attrs='id="p"', city="Lyon"),  # rejected: unknown tool
        '<action type="tool" mode="async" id="q">{"name": "population", "parameters": '
        '{"city": "Atlantis"}}</action>'
        '<action type="tool" mode="sync" id="p" depends_on="q">{"name": "population", '
        '"parameters": {"city": "Lyon"}}</action>',  # p skipped: its dependency failed
    ],
    ids=["failed", "rejected", "skipped"],
)
async def test_an_id_may_be_reused_after_an_unsuccessful_action(tmp_path: Path, first: str) -> None:
    result, session = await replay(
        tmp_path,
        [
            first,
            action("population", attrs='id="p" output_key="lyon"', city="Lyon"),
            "<response>Lyon: $lyon</response>",
        ],
    )
    assert (result.status, result.answer) == ("ok", "Lyon: 520774")
    warnings = [w.message for w in of_type(result, "warning") if w.id == "p"]
    assert len(warnings) == 1 and "new attempt under the same id" in warnings[0]
    assert not [e for e in of_type(result, "action_error") if "duplicate" in e.message]
    assert session.variables["lyon"] == 520774


async def test_another_action_under_the_id_of_a_succeeded_one_runs_under_a_free_id(
    tmp_path: Path,
) -> None:
    # Qwen2.5-Coder-1.5B copied its last call's id and output_key onto its
    # next, other call, and wrote it so again when told the id was taken.
    result, session = await replay(
        tmp_path,
        [
            action("population", attrs='id="p" output_key="lyon"', city="Lyon"),
            action("population", attrs='id="p" output_key="lyon"', city="Nice"),
            "<response>Lyon: $lyon, Nice: $p_2</response>",
        ],
    )
    assert not of_type(result, "action_error")
    said = [w.message for w in of_type(result, "warning") if w.id == "p_2"]
    assert said == [
        "action id 'p' belongs to an action that succeeded; this other action runs as 'p_2' "
        "(its result in $p_2, not in $lyon)"
    ]
    # The earlier result keeps its variable: nothing of the run is overwritten.
    assert (result.status, result.answer) == ("ok", "Lyon: 520774, Nice: 348085")
    assert session.variables["lyon"] == 520774


async def test_a_succeeded_action_written_again_as_it_was_is_that_action(
    tmp_path: Path,
) -> None:
    # Qwen2.5-Coder-1.5B with the grammar, after its plot was drawn: the same
    # action, same id, and a progress note, turn after turn, until `stuck`.
    again = action("population", "async", 'id="p" output_key="lyon"', city="Lyon")
    progress = '<response final="false">Lyon has $lyon people.</response>'
    result, _ = await replay(tmp_path, [again, again + progress])
    assert (result.status, result.answer) == ("ok", "Lyon has 520774 people.")
    assert of_type(result, "action_error") == []
    assert len(of_type(result, "action_started")) == 1  # not run again
    [warning] = [e.message for e in of_type(result, "warning")]
    assert "written again as it was: it already succeeded" in warning and "$lyon" in warning


async def test_a_note_that_does_not_use_the_repeated_result_gets_that_result_again(
    tmp_path: Path,
) -> None:
    # Qwen2.5-Coder-1.5B, asked to check a figure: the look-up it had done
    # again, and a note written as if its result had not come. That note was
    # the run's answer, status ok.
    again = action("population", "async", 'id="p" output_key="lyon"', city="Lyon")
    waiting = '<response final="false">Still waiting for the population of Lyon.</response>'
    answer = '<response final="true">Lyon has 520,774 people.</response>'
    result, session = await replay(tmp_path, [again, again + waiting, answer])
    assert (result.status, result.answer) == ("ok", "Lyon has 520,774 people.")
    assert len(of_type(result, "action_started")) == 1  # reported again, not run again
    assert told(session).count('<action_result id="p" status="ok">520774</action_result>') == 2


async def test_a_result_is_reported_again_once(tmp_path: Path) -> None:
    again = action("population", "async", 'id="p" output_key="lyon"', city="Lyon")
    waiting = '<response final="false">Still waiting.</response>'
    result, _ = await replay(tmp_path, [again, again + waiting, again + waiting])
    # The second time, nothing new to say: the note stands as the answer, as before.
    assert (result.status, result.answer) == ("ok", "Still waiting.")
    assert [e.turn for e in of_type(result, "turn_ended")] == [1, 2, 3]


# -- rule 6: no run ends "ok" with an empty answer -------------------------------


async def test_a_run_without_a_final_response_gets_one_repair_turn(tmp_path: Path) -> None:
    result, session = await replay(
        tmp_path,
        [
            # Seen from the 1.5B model: a thought closed by </response>, no response.
            "<thought>Lyon has 520,774 inhabitants.</response>",
            "<response>Lyon has 520,774 inhabitants.</response>",
        ],
    )
    assert (result.status, result.answer) == ("ok", "Lyon has 520,774 inhabitants.")
    assert [e.repair for e in of_type(result, "turn_started")] == [False, True]
    assert "Write it now, inside <response>...</response>" in told(session)


@pytest.mark.parametrize(
    "silent", ["<thought>Still thinking about it.</thought>", "<response></response>"]
)
async def test_no_answer_after_the_repair_turn(tmp_path: Path, silent: str) -> None:
    result, _ = await replay(
        tmp_path,
        ["<thought>Lyon is a big city, maybe 500,000 people.</thought>", silent],
    )
    assert result.status == "no_answer"
    assert result.message == "the model gave no final response, even when asked once more"
    last = (
        "Still thinking about it."
        if "thought" in silent
        else "Lyon is a big city, maybe 500,000 people."
    )
    assert result.answer == (
        "**Provisional answer** (the model gave no final response; this is its last "
        f"thought):\n\n{last}"
    )
    assert len(of_type(result, "turn_started")) == 2  # asked once, not in a loop


# -- rule 7: the same failing action three times ends the run -------------------


@pytest.mark.parametrize(
    "turns",
    [
        [action("population", attrs=f'id="a{i}"', city="Atlantis") for i in range(4)],
        [action("population", attrs='id="p"', city="Atlantis")] * 4,  # same id: retries
        [action("populaton", attrs=f'id="a{i}"', city="Lyon") for i in range(4)],
        ['<action type="tool" id="x">{"name": "population", "parameters": {city: Lyon</action>']
        * 4,
    ],
    ids=["failing", "same-id", "rejected", "malformed"],
)
async def test_the_same_failing_action_again_after_the_last_chance_is_stuck(
    tmp_path: Path, turns: list[str]
) -> None:
    result, session = await replay(tmp_path, turns)  # a fifth turn would exhaust the replay
    assert result.status == "stuck", result.message
    assert result.message.startswith("the same failing ")  # the status says "stuck"
    assert "written 4 times in this run" in result.message
    assert "last error: " in result.message
    assert len(of_type(result, "turn_started")) == 4
    # After the third, the model was told to stop and answer, once.
    assert told(session).count("written 3 times in this run") == 1
    assert told(session).count("It is not run again. Answer the user now") == 1
    assert told(session).count("with what you know and what failed.") == 1
    if "{city: Lyon" not in turns[0]:  # an unreadable action never runs
        # As the model was told: the fourth is refused, not run.
        last = [e for e in result.events if e.type in ("action_error", "action_failed")][-1]
        assert last.type == "action_error"
        assert last.message.endswith("written as it is now: it is not run again")
        assert "it is not run again" in result.message


async def test_after_the_third_failure_the_model_may_still_answer(tmp_path: Path) -> None:
    # Qwen2.5-Coder-1.5B, told to use the population tool for Atlantis: the
    # same call three times, and the run ended with no answer at all.
    failing = action("population", attrs='id="p"', city="Atlantis")
    answer = "<response>I could not find the population of Atlantis: no data.</response>"
    result, _ = await replay(tmp_path, [failing, failing, failing, answer])
    assert (result.status, result.answer) == (
        "ok",
        "I could not find the population of Atlantis: no data.",
    )
    [warning] = [e.message for e in of_type(result, "warning") if "asked to answer" in e.message]
    assert warning.startswith("the same failing tool action was written 3 times")


async def test_the_same_result_three_times_asks_for_the_answer(tmp_path: Path) -> None:
    # Qwen2.5-Coder-1.5B on a data question wrote the same code under a new
    # id turn after turn, each run giving the result it had, to the turn limit.
    again = [
        action("population", attrs=f'id="a{i}" output_key="n{i}"', city="Nice") for i in range(4)
    ]
    result, session = await replay(tmp_path, [*again, "<response>Nice: $n0</response>"])
    assert (result.status, result.answer) == ("ok", "Nice: 348085")
    assert (
        told(session).count(
            "Stop: the same tool action was written 3 times in this run and gave the same result "
            'each time ({"name": "population", "parameters": {"city": "Nice"}}). It is not run '
            "again. Answer the user now, inside <response>...</response>, with what you know and "
            "its result."
        )
        == 1
    )
    # The fourth is refused, not run.
    [refused] = of_type(result, "action_error")
    assert refused.id == "a3" and refused.message.endswith("answer with that result")
    assert [e.id for e in of_type(result, "action_succeeded")] == ["a0", "a1", "a2"]


async def test_a_call_whose_result_changes_is_not_a_repeat(tmp_path: Path) -> None:
    states = iter(["queued", "running", "running", "done"])

    def job_status() -> str:
        """Status of the job."""
        return next(states)

    polls = [action("job_status", attrs=f'id="s{i}"') for i in range(4)]
    result, _ = await replay(
        tmp_path, [*polls, "<response>The job is done.</response>"], tools=(job_status,)
    )
    assert (result.status, result.answer) == ("ok", "The job is done.")
    assert not of_type(result, "action_error")


async def test_different_failures_are_not_stuck(tmp_path: Path) -> None:
    result, _ = await replay(
        tmp_path,
        [
            action("population", attrs='id="a1"', city="Atlantis"),
            action("population", attrs='id="a2"', city="Mu"),
            action("population", attrs='id="a3"', city="Atlantis"),
            action("population", attrs='id="a4" output_key="n"', city="Nice"),
            "<response>$n</response>",
        ],
    )
    assert (result.status, result.answer) == ("ok", "348085")


# -- after a turn where nothing worked, the user's message again -------------------


async def test_after_a_turn_where_nothing_worked_the_question_comes_again(
    tmp_path: Path,
) -> None:
    # Qwen2.5-Coder-1.5B, asked which Python expression reverses a list: a
    # stock price look-up it made up, then an answer about the failed look-up.
    asked = "Which Python expression returns the list `items` reversed?"
    failing = action("population", city="Atlantis")
    answer = "The expression is `items[::-1]`."  # code: no figure to check
    result, session = await replay(
        tmp_path, [failing, f"<response>{answer}</response>"], message=asked
    )
    assert (result.status, result.answer) == ("ok", answer)
    opening = told(session)
    assert 'status="error">KeyError' in opening
    restated = f"The user's message, which you are answering: {asked}"
    assert opening.endswith(f"</action_result>\n\n{restated}")


async def test_a_turn_where_something_worked_gets_its_results_alone(tmp_path: Path) -> None:
    both = action("population", "async", 'id="a"', city="Atlantis") + action(
        "population", "async", 'id="b"', city="Lyon"
    )
    result, session = await replay(tmp_path, [both, "<response>Lyon: 520774</response>"])
    assert result.status == "ok"
    assert 'id="a" status="error"' in told(session) and 'id="b" status="ok"' in told(session)
    assert "which you are answering" not in told(session)


async def test_an_answer_with_a_path_its_variable_lacks_is_incomplete(tmp_path: Path) -> None:
    # Qwen2.5-Coder-1.5B wrote `$to_fahrenheit_result.fahrenheit` for a
    # number: the reference stayed in the answer as written, status ok.
    lookup = action("population", attrs='id="p" output_key="lyon"', city="Lyon")
    result, _ = await replay(tmp_path, [lookup, "<response>Lyon: $lyon.total people</response>"])
    assert result.status == "incomplete"
    assert result.answer == "Lyon: $lyon.total people"
    assert result.message.startswith("answer incomplete: $lyon.total does not exist: $lyon is")


async def test_a_figure_after_the_last_chance_leaves_the_run_stuck(tmp_path: Path) -> None:
    # Qwen2.5-Coder-1.5B on a data question: its code failed three times,
    # then, told to answer without it, a region and a revenue of its own.
    failing = action("population", attrs='id="p"', city="Atlantis")
    guess = "<response>Atlantis has 1,000,000 people.</response>"
    result, _ = await replay(tmp_path, [failing, failing, failing, guess, guess])
    assert result.status == "stuck"
    assert result.message.endswith("; the answer after it states figures no result gives")
    assert result.answer == "Atlantis has 1,000,000 people."  # kept, and marked
    assert result.grounding is not None
    assert [f.text for f in result.grounding.unverified] == ["1,000,000"]

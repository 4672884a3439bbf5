"""One check turn for an answer that cannot stand as written (docs/runtime.md#how-a-run-ends).

A small model adds up what it looked up in its head and gets it wrong. Through
the kernel's composition (``agent.build_session`` with a replay model): the
real parser, scheduler, tool executor and grounding check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.runtime.limits import Limits
from cortex_kernel.runtime.run_result import RunResult
from tests.replays import replay_run

pytestmark = pytest.mark.anyio

POPULATIONS = {"Nice": 348_085, "Lille": 236_710}


def population(city: str) -> int:
    """Population of a city."""
    return POPULATIONS[city]


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def call(id_: str, name: str, parameters: str, mode: str = "async") -> str:
    return (
        f'<action type="tool" mode="{mode}" id="{id_}" output_key="{id_}">'
        f'{{"name": "{name}", "parameters": {parameters}}}</action>'
    )


LOOKUPS = call("nice", "population", '{"city": "Nice"}') + call(
    "lille", "population", '{"city": "Lille"}'
)


async def run(
    tmp_path: Path, *turns: str, limits: Limits | None = None
) -> tuple[RunResult, list[dict[str, Any]]]:
    message = "What is the total population of Nice and Lille?"
    return await replay_run(tmp_path, turns, message, [population, add], limits)


def asked(history: list[dict[str, Any]]) -> list[str]:
    """The check turns' messages the model was sent."""
    return [
        str(m["content"])
        for m in history
        if m["role"] == "user" and str(m["content"]).startswith("Your answer")
    ]


def checks(result: RunResult) -> list[str]:
    return [e.message for e in result.events if e.type == "warning" and "asked to" in e.message]


@pytest.mark.parametrize(
    ("first", "told", "warned"),
    [
        pytest.param(
            "Together they have 584,895 people.",
            "Your answer states 584,895, which no result of this run gives.",
            "the answer states 584,895, which no result gives: asked to check",
            id="a sum worked out wrong",
        ),
        pytest.param(
            # Nothing runs in an answer's text: it would be shown as written.
            "Together they have $add($nice, $lille) people.",
            "Your answer calls add in its text, where nothing runs.",
            "the answer calls add in its text: asked to call it first",
            id="a tool called in the text",
        ),
    ],
)
async def test_the_answer_is_checked_once_and_the_figure_computed(
    tmp_path: Path, first: str, told: str, warned: str
) -> None:
    result, history = await run(
        tmp_path,
        LOOKUPS,
        f"<response>{first}</response>",
        call("total", "add", '{"a": "$nice", "b": "$lille"}', mode="sync"),
        "<response>Together they have $total people.</response>",
    )
    assert result.status == "ok"
    assert result.answer == "Together they have 584795 people."
    assert result.grounding is not None and not result.grounding.unverified
    (message,) = asked(history)
    assert message.startswith(told) and "tool action" in message
    assert checks(result) == [warned]


async def test_a_grounded_answer_ends_the_run(tmp_path: Path) -> None:
    result, history = await run(
        tmp_path, LOOKUPS, "<response>Together they have 584,795 people.</response>"
    )
    assert result.status == "ok" and result.answer == "Together they have 584,795 people."
    assert not asked(history) and not checks(result)


async def test_the_answer_after_the_check_stands_even_when_still_unverified(
    tmp_path: Path,
) -> None:
    result, history = await run(
        tmp_path,
        LOOKUPS,
        "<response>Together they have 584,895 people.</response>",
        "<response>I checked: together they have 584,895 people.</response>",
    )
    assert result.status == "ok"
    assert result.answer == "I checked: together they have 584,895 people."
    assert len(asked(history)) == 1
    # Still marked for the user: the check does not vouch for the figure.
    assert result.grounding is not None
    assert [f.text for f in result.grounding.unverified] == ["584,895"]


async def test_no_check_when_nothing_was_looked_up(tmp_path: Path) -> None:
    result, history = await run(tmp_path, "<response>Nice has about 340,000 people.</response>")
    assert result.status == "ok" and result.answer == "Nice has about 340,000 people."
    assert not asked(history) and not checks(result)


async def test_no_check_on_the_last_turn(tmp_path: Path) -> None:
    result, history = await run(
        tmp_path,
        LOOKUPS,
        "<response>Together they have 584,895 people.</response>",
        limits=Limits(max_turns=2),
    )
    assert result.status == "ok" and "584,895" in result.answer
    assert not asked(history)


async def test_a_figure_given_after_a_failed_look_up_is_checked(tmp_path: Path) -> None:
    # Qwen2.5-Coder-1.5B in the kernel: the population tool had no Bordeaux,
    # and the answer gave a figure of its own, status ok (marked unverified).
    result, history = await run(
        tmp_path,
        call("b", "population", '{"city": "Bordeaux"}', mode="sync"),
        "<response>The population of Bordeaux is 312,740.</response>",
        "<response>I could not find the population of Bordeaux: no data.</response>",
    )
    assert result.status == "ok"
    assert result.answer == "I could not find the population of Bordeaux: no data."
    (message,) = asked(history)
    assert message.startswith(
        "Your answer states 312,740, but no look-up of this run succeeded, so no result gives it."
    )
    assert checks(result) == ["the answer states 312,740, which no result gives: asked to check"]


@pytest.mark.parametrize(
    ("answer", "called"),
    [
        ("It is $to_fahrenheit($t) °F.", ["to_fahrenheit"]),
        ("It is ${ to_fahrenheit ($t)} °F.", ["to_fahrenheit"]),
        # A snippet for the user instead of the calls (function calling).
        ('```python\nnice = population(city="Nice")\ntotal = add(a=nice, b=1)\n```', None),
        ("```python\ndf.population(3)\n```", []),  # a method, not the tool
        # Prose quoting a result as its tool message gives it is no call.
        ('The North region has population(city="North") returned: 4 orders.', []),
        ("Nice has the larger population (348,085).", []),  # prose
        ("subpopulation(x) is another thing", []),
    ],
)
def test_a_call_in_the_answer_text_is_found(answer: str, called: list[str] | None) -> None:
    from cortex_kernel.runtime.drift import tools_called_in

    found = tools_called_in(answer, ["population", "add", "to_fahrenheit"])
    assert found == (called if called is not None else ["population", "add"])


def test_the_tools_that_compute_are_those_taking_only_numbers() -> None:
    from cortex_kernel.runtime.drift import computing_tools
    from cortex_kernel.runtime.tools import ToolRegistry

    def to_fahrenheit(celsius: float) -> float:
        """Celsius to Fahrenheit."""
        return celsius * 9 / 5 + 32

    def weather(city: str) -> str:
        """Weather of a city."""
        return "sunny"

    def nothing() -> int:
        """No parameter: nothing to compute from."""
        return 1

    tools = ToolRegistry()
    for function in (population, to_fahrenheit, weather, add, nothing):
        tools.register(function)
    assert computing_tools(tools.specs()) == ["to_fahrenheit", "add"]


def test_an_id_joined_to_its_output_key_is_read_as_the_output_key() -> None:
    from cortex_kernel.runtime.answer import read_id_paths

    values: dict[str, Any] = {"conv": 77.0, "fahrenheit": 77.0, "w": {"temp_c": 25}, "t": 25}

    def lookup(name: str) -> Any:
        return values[name]

    keys = {"conv": "fahrenheit", "w": "t", "gone": "x"}
    text, read = read_id_paths(
        "It is $conv.fahrenheit °F ($w.temp_c °C, $w.t, $gone.x).", keys, lookup
    )
    # Only where the value has no such field: $w.temp_c is a real path and
    # stays; $gone has no value, and stays for the answer to say so.
    assert text == "It is $fahrenheit °F ($w.temp_c °C, $t, $gone.x)."
    assert read == [("$conv.fahrenheit", "$fahrenheit"), ("$w.t", "$t")]


async def test_the_answer_reads_an_action_id_joined_to_its_output_key(tmp_path: Path) -> None:
    # Qwen2.5-Coder-1.5B: id "to_fahrenheit_result", output_key "fahrenheit",
    # and in the answer $to_fahrenheit_result.fahrenheit for the number.
    result, _ = await run(
        tmp_path,
        call("nice", "population", '{"city": "Nice"}', mode="sync").replace(
            'id="nice" output_key="nice"', 'id="lookup_nice" output_key="nice"'
        ),
        "<response>Nice has $lookup_nice.nice people.</response>",
    )
    assert (result.status, result.answer) == ("ok", "Nice has 348085 people.")
    warned = [e.message for e in result.events if e.type == "warning"]
    assert warned == ["the answer's $lookup_nice.nice was read as $nice (its action's output_key)"]


@pytest.mark.parametrize(
    ("message", "asked"),
    [
        ("What is the temperature in Nice right now, in Fahrenheit?", ["to_fahrenheit"]),
        ("Convert 30 degrees Celsius.", ["celsiusToKelvin"]),
        ("How much is 250 euros in US dollars?", []),
        ("Add 2 and 3.", []),  # words under four letters name nothing
    ],
)
def test_the_tool_a_message_asks_for_by_name(message: str, asked: list[str]) -> None:
    from cortex_kernel.runtime.drift import tools_asked_for

    assert tools_asked_for(message, ["to_fahrenheit", "celsiusToKelvin", "add"]) == asked

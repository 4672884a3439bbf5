"""Which questions name the notebook's data, and which tool then looks at it."""

from __future__ import annotations

from typing import Any

from cortex_kernel.runtime.data_questions import data_names, tool_to_look
from cortex_kernel.runtime.tools import Tool


class Frame:
    """Stands in for a DataFrame: what is read of it is its ``shape``."""

    shape = (240, 5)


class Raises:
    @property
    def shape(self) -> Any:
        raise RuntimeError("no shape today")


def tool(name: str, *, reads_notebook: bool) -> Tool:
    return Tool(name, "", lambda: None, {"type": "object"}, reads_notebook=reads_notebook)


NAMESPACE: dict[str, Any] = {
    "sales": Frame(),
    "customers": Frame(),
    "limit": 5,
    "_hidden": Frame(),
    "Frame": Frame,
    "odd": Raises(),
}


def test_names_of_data_are_found_in_and_out_of_backquotes() -> None:
    assert data_names("How many orders in `sales` are from the North?", NAMESPACE) == ["sales"]
    assert data_names("Show sales.head() and sales.shape", NAMESPACE) == ["sales"]
    assert data_names("join customers to sales, then sales again", NAMESPACE) == [
        "customers",
        "sales",
    ]


def test_what_is_not_data_or_not_a_variable_is_not_named() -> None:
    for message in (
        "Is limit above 3?",  # a number, not data
        "What is _hidden?",  # private names are not read
        "Describe Frame",  # a class has a shape attribute, not data
        "What is odd?",  # a shape that raises
        "What were the salesman's sales_total?",  # longer words
        "What is a p-value?",
    ):
        assert data_names(message, NAMESPACE) == [], message
    assert data_names("sales", None) == []


TOOLS = [tool("search", reads_notebook=False), tool("python", reads_notebook=True)]
RAN = [
    {"role": "user", "content": "Total units in sales?"},
    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "python"}}]},
    {"role": "tool", "content": "3,455"},
    {"role": "assistant", "content": "3,455 units."},
]


def look(message: str, answer: str, tools: list[Tool] = TOOLS, prior: Any = ()) -> str | None:
    return tool_to_look(message, answer, tools, NAMESPACE, prior)


def test_an_answer_about_named_data_given_without_code_does_not_stand() -> None:
    assert look("Mean units in sales?", "About 30.") == "python"
    assert look("Mean units in sales?", "Run `sales.units.mean()`.") == "python"
    # No tool runs code on the notebook: the answer stands.
    assert look("Mean units in sales?", "About 30.", TOOLS[:1]) is None
    assert look("What is a p-value?", "A probability, like 0.05.") is None


def test_a_follow_up_on_data_must_compute_the_figures_it_states() -> None:
    follow_up = "What share of all units is that?"
    assert look(follow_up, "About 40%.", prior=RAN) == "python"
    assert look(follow_up, "```python\nsales.units.sum()\n```", prior=RAN) == "python"
    # Words only ("thanks"), or no earlier code run on the data: it stands.
    assert look("Thanks!", "You are welcome.", prior=RAN) is None
    assert look(follow_up, "About 40%.", prior=RAN[:1] + RAN[2:]) is None

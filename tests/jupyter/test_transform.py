"""The input transformers that turn agent cells into an awaited run."""

from __future__ import annotations

import ast

from cortex_kernel.jupyter.magics import transform_agent_cell, transform_kernel_cell


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _call_args(lines: list[str]) -> tuple[str, str]:
    source = "".join(lines)
    tree = ast.parse(source)
    expr = tree.body[0]
    assert isinstance(expr, ast.Expr)
    assert isinstance(expr.value, ast.Await)
    call = expr.value.value
    assert isinstance(call, ast.Call)
    message, options = (ast.literal_eval(arg) for arg in call.args)
    return message, options


def test_agent_cell_becomes_an_await() -> None:
    out = transform_agent_cell(_lines("%%agent --model replay:x.jsonl\nWhat is {x}?\n'''\"\n"))
    assert _call_args(out) == ("What is {x}?\n'''\"\n", "--model replay:x.jsonl")


def test_other_cells_pass_through() -> None:
    for text in ("x = 1\n", "%%time\nx = 1\n", "%%agentx\n", ""):
        assert transform_agent_cell(_lines(text)) == _lines(text)


def test_kernel_cells_are_messages() -> None:
    assert _call_args(transform_kernel_cell(_lines("Summarise {df}\nplease"))) == (
        "Summarise {df}\nplease",
        "",
    )


def test_kernel_python_cells_are_python() -> None:
    assert transform_kernel_cell(_lines("%%python\nx = 1\nprint(x)\n")) == ["x = 1\n", "print(x)\n"]


def test_kernel_line_magics_and_agent_cells() -> None:
    assert transform_kernel_cell(_lines("%model\n%history show\n")) == _lines(
        "%model\n%history show\n"
    )
    assert _call_args(transform_kernel_cell(_lines("%%agent --model m\nhi"))) == ("hi", "--model m")
    # A message that merely mentions a magic is still a message.
    assert _call_args(transform_kernel_cell(_lines("%model\nwhat model is this?")))[0] == (
        "%model\nwhat model is this?"
    )

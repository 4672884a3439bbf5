"""A fix of failed code: the line asked about, and what of the reply is kept."""

from __future__ import annotations

import pandas as pd

from cortex_kernel.runtime.code_fixes import (
    describe_names,
    failing_line,
    failing_line_note,
    fix_messages,
    fixed_code,
    with_fix,
)

CODE = "import pandas as pd\nfor city in ['a']:\n    n = len(df[churned])\nprint(n)"


def test_the_line_a_failure_names_is_read_back() -> None:
    error = "NameError: name 'churned' is not defined" + failing_line_note(3, "    n = df[x[0]]")
    assert failing_line(error + "\n[notebook changes: none]") == "n = df[x[0]]"
    assert failing_line("NameError: name 'churned' is not defined") is None


def test_the_fixed_line_replaces_the_failing_one_indented_as_it_was() -> None:
    reply = "The corrected line:\n```python\nn = len(df[df['churned']])\n```\nIt filters rows."
    fixed = fixed_code(reply, CODE, "n = len(df[churned])")
    assert (
        fixed == "import pandas as pd\nfor city in ['a']:\n    n = len(df[df['churned']])\nprint(n)"
    )


def test_a_bare_reply_that_parses_is_the_line() -> None:
    assert fixed_code("print(n + 1)", CODE, "print(n)") == CODE.replace("print(n)", "print(n + 1)")


def test_no_fix_when_the_reply_repeats_the_line_or_breaks_the_code() -> None:
    line = "n = len(df[churned])"
    assert fixed_code(f"```python\n{line}\n```", CODE, line) is None
    assert fixed_code("I cannot fix this line (", CODE, line) is None
    assert fixed_code("```python\n```", CODE, line) is None
    assert fixed_code("x = 1", CODE, "not in the code") is None
    assert fixed_code("x = 1", "a = 1\na = 1", "a = 1") is None  # which one?


def test_the_request_names_the_frames_the_line_uses_with_their_columns() -> None:
    namespace = {
        "sales": pd.DataFrame(
            {"date": pd.to_datetime(["2024-03-01"]).astype("datetime64[ns]"), "units": [3]}
        ),
        "other": pd.DataFrame({"x": [1]}),
        "n": 3,
    }
    line = "sales.resample('M', on='date')['units'].sum() + n"
    described = describe_names(line, namespace)
    assert described == "sales: DataFrame, columns 'date' (datetime64[ns]), 'units' (int64)"
    system, user = fix_messages(line, "ValueError: Invalid frequency: M", namespace)
    assert system == {"role": "system", "content": "You fix one line of Python."}
    assert user["content"] == (
        f"{described}\n\nThis line:\n{line}\nraised:\nValueError: Invalid frequency: M\n\n"
        "Write the corrected line only."
    )


def test_an_object_whose_attributes_raise_is_not_described() -> None:
    class Odd:
        @property
        def dtypes(self) -> object:
            raise RuntimeError("no")

    assert describe_names("odd.x", {"odd": Odd()}) == ""
    assert describe_names("odd.x", None) == ""


def test_the_failure_carries_the_fix_when_there_is_one() -> None:
    error = "NameError: name 'b' is not defined"
    assert with_fix(error, None) == error
    shown = with_fix(error, "df['b'].sum()")
    assert shown.startswith(error + "\n")
    assert shown.endswith("```python\ndf['b'].sum()\n```")

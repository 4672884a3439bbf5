"""What the model reads back from a code run in the notebook's namespace.

A small model answered with a guess when a run showed it nothing, or when
``pd.read_csv("sales.csv")`` failed for a DataFrame ``sales`` that was in
memory all along; the result now says what to do instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex_kernel.exceptions import ToolError
from cortex_kernel.executors.notebook_python import NOTHING_SHOWN, NotebookPython
from cortex_kernel.runtime.results import Shown

pytestmark = pytest.mark.anyio


class _Read:
    """The tool, returning the text the model reads of each run."""

    def __init__(self, namespace: dict[str, object]) -> None:
        self.tool = NotebookPython(namespace)

    async def __call__(self, code: str) -> str:
        result = await self.tool(code)
        return result.text if isinstance(result, Shown) else result


async def test_a_run_that_shows_nothing_says_how_to_see_a_value() -> None:
    namespace: dict[str, object] = {"sales": [3, 4]}
    run = _Read(namespace)
    text = await run("low, high = min(sales), max(sales)")
    assert text.splitlines()[0] == NOTHING_SHOWN
    assert "added: low, high" in text and namespace["high"] == 4
    # A value or printed text is the result itself, with no advice.
    assert (await run("low + high")).splitlines()[0] == "7"
    assert NOTHING_SHOWN not in await run("print(low)")


async def test_code_ending_in_an_assignment_shows_the_value_it_bound() -> None:
    namespace: dict[str, object] = {"sales": [3, 4]}
    run = _Read(namespace)
    text = await run("total = sum(sales)")
    assert text.splitlines()[0] == "total = 7"
    assert "added: total" in text and namespace["total"] == 7
    assert (await run("total += 1")).splitlines()[0] == "total = 8"
    assert (await run("print('done')\nshare: float = total / 10")).splitlines() == [
        "done",
        "share = 0.8",
        "[notebook changes: added: share]",
    ]
    # Only a plain name: an item or an attribute stays the code's own business.
    assert (await run("items = {}\nitems['a'] = 1")).splitlines()[0] == NOTHING_SHOWN


async def test_the_value_is_the_result_an_output_key_binds() -> None:
    pandas = pytest.importorskip("pandas")
    sales = pandas.DataFrame({"region": ["N", "S", "N"], "units": [1, 2, 3]})
    namespace: dict[str, object] = {"sales": sales}
    tool = NotebookPython(namespace)
    result = await tool("by_region = sales.groupby('region')['units'].sum()")
    assert isinstance(result, Shown)
    assert result.value.to_dict() == {"N": 4, "S": 2}
    assert result.text.startswith("by_region = region")
    result = await tool("len(sales)")
    assert isinstance(result, Shown) and result.value == 3
    # A frame's text says its shape: its repr shows only some of its rows.
    result = await tool("north = sales[sales['region'] == 'N']")
    assert isinstance(result, Shown) and result.value is namespace["north"]
    assert result.text.splitlines()[:2] == [
        "(DataFrame of shape (2, 2))",
        "north =   region  units",
    ]
    # Nothing to bind but the text.
    assert isinstance(await tool("print(len(sales))"), str)


async def test_reading_from_disk_what_the_notebook_holds_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = _Read({"sales": [1, 2]})
    with pytest.raises(ToolError) as caught:
        await run("import pathlib\ndata = pathlib.Path('sales.csv').read_text()")
    assert "FileNotFoundError" in str(caught.value)
    assert "`sales` is already a variable in the notebook's memory" in str(caught.value)
    # A missing file that names no variable is the plain error.
    with pytest.raises(ToolError) as other:
        await run("open('orders.csv').read()")
    assert "already a variable" not in str(other.value)


async def test_a_missing_column_names_the_frames_that_have_it() -> None:
    pandas = pytest.importorskip("pandas")
    namespace = {
        "sales": pandas.DataFrame({"units": [1]}),
        "customers": pandas.DataFrame({"churned": [True]}),
    }
    run = _Read(namespace)
    with pytest.raises(ToolError) as caught:
        await run("sales['churned'].sum()")
    assert str(caught.value).startswith(
        "KeyError: 'churned' (the column 'churned' is in `customers`: write customers['churned'])"
    )
    with pytest.raises(ToolError) as other:
        await run("sales['nowhere']")
    assert "the column" not in str(other.value)


async def test_a_column_written_as_a_bare_name_says_how_to_write_it() -> None:
    pandas = pytest.importorskip("pandas")
    namespace = {"customers": pandas.DataFrame({"churned": [True, False]})}
    run = _Read(namespace)
    with pytest.raises(ToolError) as caught:
        await run("customers[churned].shape[0]")
    assert str(caught.value).startswith(
        "NameError: name 'churned' is not defined (`churned` is not a variable but a column "
        "of `customers`: write customers['churned'])"
    )
    # The hinted form runs.
    assert (await run("int(customers['churned'].sum())")).splitlines()[0] == "1"
    # A name that is no column is the plain error.
    with pytest.raises(ToolError) as other:
        await run("nowhere + 1")
    assert str(other.value).startswith("NameError: name 'nowhere' is not defined\n")


async def test_loading_a_notebook_frame_from_a_missing_file_is_left_out_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pandas = pytest.importorskip("pandas")
    monkeypatch.chdir(tmp_path)
    sales = pandas.DataFrame({"units": [3, 4]})
    namespace: dict[str, object] = {"sales": sales, "pd": pandas}
    run = _Read(namespace)
    code = (
        "import pandas as pd\n"
        "# Load the data\n"
        "sales = pd.read_csv(\n    'sales.csv'\n)\n"
        "int(sales['units'].sum())"
    )
    text = await run(code)
    assert text.splitlines()[:2] == [
        "[not run: `sales = pd.read_csv( 'sales.csv' )` (no such file; `sales` is the "
        "DataFrame already in the notebook's memory, used as it is)]",
        "7",
    ]
    assert namespace["sales"] is sales
    # The code kept for %agent_code and the view is the code that ran.
    [kept] = run.tool.ledger.last
    assert kept.code == "import pandas as pd\n# Load the data\nint(sales['units'].sum())"
    # A file that is there is read as written; so is a name that is no frame.
    (tmp_path / "sales.csv").write_text("units\n10\n", encoding="utf-8")
    assert (await run(code)).splitlines()[0] == "10"
    with pytest.raises(ToolError) as caught:
        await run("import pandas as pd\ntotal = pd.read_csv('total.csv')")
    assert "FileNotFoundError" in str(caught.value) and "not run" not in str(caught.value)


async def test_an_error_names_the_line_of_the_code_it_happened_on() -> None:
    run = _Read({})
    with pytest.raises(ToolError) as caught:
        await run("x = 1\ndef f():\n    return nowhere + x\n\ny = f()")
    # The innermost line of the agent's code, not the call that led there.
    assert "\n[failed at line 3: return nowhere + x]\n" in str(caught.value)
    with pytest.raises(SyntaxError) as bad:
        await run("x = 1\ny = (2\n")
    assert "[failed at line 2: y = (2]" in str(bad.value)

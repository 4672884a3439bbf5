"""What a code run changed in the namespace, and undoing it (cortex_kernel.runtime.changes).

Real pandas and numpy objects, real code run with ``exec`` in a namespace
dict as a notebook's ``user_ns``: each change is reported, then undone.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
import types
import weakref
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cortex_kernel.runtime.changes import (
    MB,
    Budget,
    ChangeReport,
    code_names,
    diff,
    risky_writes,
    snapshot,
    undo,
)


def sales() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "region": ["north", "south", "east", "west", "north", "south"],
            "units": [10, 20, 30, 40, 50, 60],
            "price": [1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
        }
    )


def run(namespace: dict[str, Any], code: str, budget: Budget | None = None) -> ChangeReport:
    """What the code executor will do: snapshot, run, diff."""
    before = snapshot(namespace, code_names(code), budget=budget)
    exec(code, namespace)
    return diff(before, namespace)


def test_a_column_added_is_reported_and_undone() -> None:
    df = sales()
    ns: dict[str, Any] = {"df": df}
    report = run(ns, "df['total_units'] = df.units * 2")
    assert report.summary() == (
        "changed in place: df (column 'total_units' added; shape (6, 3) → (6, 4))"
    )
    [change] = report.changed
    assert change.data["columns_added"] == ["total_units"]
    assert change.undo and report.changed_in_place
    result = undo(report, ns)
    assert result.restored == ["df (in place)"]
    assert ns["df"] is df  # the user's object itself, not a copy
    pd.testing.assert_frame_equal(df, sales())


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # pandas 3.1: deprecated
def test_rows_dropped_in_place_are_reported_by_label_and_undone() -> None:
    df = sales()
    ns: dict[str, Any] = {"df": df}
    report = run(ns, "df.drop(index=[1, 4], inplace=True)")
    [change] = report.changed
    assert change.changes == ["2 rows removed (labels 1, 4)", "shape (6, 3) → (4, 3)"]
    assert change.data["rows_removed"] == 2
    undo(report, ns)
    pd.testing.assert_frame_equal(df, sales())


def test_one_cell_changed_names_its_column_and_row() -> None:
    df = sales()
    ns: dict[str, Any] = {"df": df}
    report = run(ns, "df.loc[3, 'price'] = 99.0")
    [change] = report.changed
    assert change.changes == ["column 'price' changed", "1 row changed (label 3)"]
    assert change.data["columns_changed"] == ["price"] and change.data["rows_changed"] == 1
    undo(report, ns)
    assert df.loc[3, "price"] == 3.0
    pd.testing.assert_frame_equal(df, sales())


def test_rows_changed_beside_an_added_column_are_counted_over_the_old_columns() -> None:
    ns: dict[str, Any] = {"df": sales()}
    report = run(ns, "df['flag'] = True\ndf.loc[0, 'units'] = 0")
    assert report.changed[0].changes == [
        "column 'flag' added",
        "column 'units' changed",
        "1 row changed (label 0)",
        "shape (6, 3) → (6, 4)",
    ]


def test_a_list_appended_to_and_a_dict_updated_are_reported_and_undone() -> None:
    items, config = [1, 2, 3], {"lr": 0.1, "epochs": 3}
    ns: dict[str, Any] = {"items": items, "config": config}
    report = run(ns, "items.append(4)\nconfig.update(lr=0.01, seed=7)")
    assert report.summary() == (
        "changed in place: items (1 item appended; length 3 → 4); "
        "config (key 'seed' added; key 'lr' changed; length 2 → 3)"
    )
    undo(report, ns)
    assert ns["items"] is items and items == [1, 2, 3]
    assert ns["config"] is config and config == {"lr": 0.1, "epochs": 3}


def test_a_nested_list_changed_one_level_down_is_seen_and_undone() -> None:
    matrix = [[1, 2], [3, 4]]
    row = matrix[0]
    ns: dict[str, Any] = {"matrix": matrix}
    report = run(ns, "matrix[0].append(9)")
    assert report.changed[0].changes == ["1 item changed (at 0)"]
    undo(report, ns)
    assert matrix == [[1, 2], [3, 4]] and row == [1, 2, 9]  # the inner list is a restored copy


def test_a_set_series_and_array_changed_in_place() -> None:
    tags, prices, grid = {"a", "b"}, pd.Series([1.0, 2.0, 3.0]), np.zeros(8)
    ns: dict[str, Any] = {"tags": tags, "prices": prices, "grid": grid}
    report = run(ns, "tags.discard('a')\nprices.iloc[1] = 5.0\ngrid[2:4] = 1.0")
    changes = {change.label: change.changes for change in report.changed}
    assert changes == {
        "tags": ["1 member removed ('a')", "length 2 → 1"],
        "prices": ["1 value changed (label 1)"],
        "grid": ["2 of 8 elements changed"],
    }
    undo(report, ns)
    assert tags == {"a", "b"} and prices.tolist() == [1.0, 2.0, 3.0] and not grid.any()


def test_names_rebound_deleted_and_added_are_reported_and_undone() -> None:
    df, old = sales(), "kept"
    ns: dict[str, Any] = {"df": df, "old": old, "n": 1}
    report = run(ns, "df = df[df.units > 20]\ndel old\nresult = len(df)")
    assert (report.rebound, report.deleted, report.added) == (["df"], ["old"], ["result"])
    assert report.changed == []  # df[...] made a new frame: the user's is untouched
    assert report.summary() == "rebound: df; added: result; deleted: old"
    result = undo(report, ns)
    assert ns["df"] is df and ns["old"] == "kept" and "result" not in ns
    assert (result.restored, result.removed) == (["df", "old"], ["result"])


def test_an_alias_is_one_object_restored_in_place_for_every_name() -> None:
    df = sales()
    frames = [df]
    ns: dict[str, Any] = {"df": df, "view": df, "frames": frames}
    report = run(ns, "view['units'] = 0\nframes.append(view.copy())")
    labels = [change.label for change in report.changed]
    assert labels == ["df = view", "frames"]
    undo(report, ns)
    # The names still share one object, and the list still holds the user's frame.
    assert ns["df"] is ns["view"] is df and frames[0] is df and len(frames) == 1
    pd.testing.assert_frame_equal(df, sales())


def test_a_user_object_the_code_names_is_fingerprinted_by_its_attributes() -> None:
    class Model:
        def __init__(self) -> None:
            self.alpha = 1.0

        def fit(self, values: list[float]) -> None:
            self.coef_ = sum(values)

    model = Model()
    ns: dict[str, Any] = {"model": model, "other": Model()}
    before = snapshot(ns, code_names("model.fit([1.0, 2.0])"))
    assert list(before.objects.values()) == [model]  # only the one the code names
    exec("model.fit([1.0, 2.0]); other.fit([3.0])", ns)
    report = diff(before, ns)
    assert report.changed[0].changes == ["attribute 'coef_' added"]
    undo(report, ns)
    assert vars(model) == {"alpha": 1.0}


def test_nothing_changed_is_said_so() -> None:
    ns: dict[str, Any] = {"df": sales(), "total": 0}
    report = run(ns, "print(df.units.sum())")
    assert report.empty and not report.changed_in_place
    assert report.summary() == "no change to the notebook's variables seen"
    assert undo(report, ns).summary() == "nothing to undo"


class Broken(list[int]):
    """A list whose iteration fails: neither fingerprinted nor copied."""

    def __iter__(self) -> Any:
        raise RuntimeError("cannot iterate")


def test_an_object_that_cannot_be_fingerprinted_never_fails_the_run() -> None:
    ns: dict[str, Any] = {"broken": Broken([1])}
    before = snapshot(ns, ["broken"])
    assert before.no_undo[id(ns["broken"])] == (
        "undo not available: its size is unknown (RuntimeError: cannot iterate)"
    )
    exec("added = 1", ns)
    report = diff(before, ns)
    assert report.added == ["added"]
    assert report.not_checked == [
        "broken: content not checked: fingerprinting failed (RuntimeError: cannot iterate)"
    ]


def test_ipython_and_private_names_are_not_watched() -> None:
    ns: dict[str, Any] = {"In": [""], "Out": {}, "_": None, "_run": object(), "x": 1}
    report = run(ns, "In.append('x = 2'); Out[1] = 2; _ = 3; _run = 4")
    assert report.empty


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # pandas 3.1: deprecated
def test_the_report_is_json_for_run_and_events() -> None:
    ns: dict[str, Any] = {"df": sales(), "big": np.arange(10_000.0)}
    report = run(ns, "df.sort_values('units', ascending=False, inplace=True)\nbig[0] = -1")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["changed"][0]["names"] == ["df"]
    assert data["changed"][0]["rows_reordered"] is True
    assert data["changed"][1]["elements_changed"] == 1
    assert data["summary"] == report.summary()


def test_a_large_dataframe_is_reported_without_undo_and_without_a_copy() -> None:
    rng = np.random.default_rng(0)
    big = pd.DataFrame(rng.random((200_000, 20)), columns=[f"c{i}" for i in range(20)])
    size = int(big.memory_usage().sum())  # about 30 MB
    budget = Budget(undo_bytes=1 * MB)
    ns: dict[str, Any] = {"big": big}
    tracemalloc.start()
    try:
        before = snapshot(ns, ["big"], budget=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size / 2, "no copy of the frame: only its hashes (16 bytes a row)"
    assert before.copies == {}
    assert _pandas_objects_reachable(before, stop=big) == []
    exec("big['c0'] = 0.0", ns)
    report = diff(before, ns)
    [change] = report.changed
    assert change.changes == [
        "column 'c0' changed",
        "200,000 rows changed (labels 0, 1, 2, 3, 4, …)",
    ]
    assert not change.undo
    assert report.undo_unavailable == [
        "big: undo not available: no copy was kept "
        "(it takes about 31 MB, past the undo limit of 1.0 MB)"
    ]
    assert "undo not available" in report.summary()
    result = undo(report, ns)
    assert result.restored == [] and "big" in result.not_restored
    assert (big["c0"] == 0.0).all()


def _pandas_objects_reachable(root: Any, stop: Any) -> list[Any]:
    """pandas objects and float arrays reachable from ``root``, not through ``stop``."""
    seen, found, todo = {id(stop)}, [], [root]
    skip = (type, types.ModuleType, types.FunctionType)
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, skip):
            continue
        seen.add(id(item))
        if isinstance(item, pd.DataFrame | pd.Series) or (
            isinstance(item, np.ndarray) and item.dtype == np.float64
        ):
            found.append(item)
            continue
        todo.extend(gc.get_referents(item))
    return found


def test_undo_copies_go_to_the_named_objects_first_up_to_the_limit() -> None:
    first, second = np.zeros(100_000), np.zeros(100_000)  # 0.8 MB each
    ns: dict[str, Any] = {"first": first, "second": second}
    before = snapshot(ns, code_names("second[0] = 1"), budget=Budget(undo_bytes=1 * MB))
    assert id(second) in before.copies and id(first) not in before.copies
    assert "more than the undo limit's" in before.no_undo[id(first)]


def test_past_the_content_limit_the_content_is_sampled_and_said_so() -> None:
    values = np.arange(100_000, dtype=np.int64)  # 0.8 MB
    ns: dict[str, Any] = {"values": values}
    budget = Budget(content_bytes=100_000, sample=1_000)
    report = run(ns, "values[0] = -1\nvalues[1] = -1", budget)
    assert report.not_checked == [
        "values: content sampled: 1,000 of 100,000 elements hashed "
        "(0.8 MB > the 0.1 MB limit); a change elsewhere is not seen"
    ]
    # The first element is in the sample (every 100th): that change is seen.
    assert report.changed[0].changes == ["2 of 100,000 elements changed"]


def test_a_spent_time_budget_checks_shapes_only_and_says_so() -> None:
    ns: dict[str, Any] = {"df": sales()}
    report = run(ns, "df.loc[0, 'units'] = 0\ndf['x'] = 1", Budget(seconds=-1))
    assert report.changed[0].changes == ["column 'x' added", "shape (6, 3) → (6, 4)"]
    assert report.not_checked == ["df: content not checked: the snapshot's -1 s were spent"]


def test_removed_columns_leave_rows_changed_unknown() -> None:
    ns: dict[str, Any] = {"df": sales()}
    report = run(ns, "del df['region']")
    [change] = report.changed
    assert change.changes == ["column 'region' removed", "shape (6, 3) → (6, 2)"]
    assert change.data["rows_changed"] is None


def test_an_array_resized_in_place_is_undone_by_rebinding_and_said_so() -> None:
    grid = np.zeros(5)
    ns: dict[str, Any] = {"grid": grid}
    report = run(ns, "grid.resize(8, refcheck=False)")
    assert report.changed[0].changes == ["shape (5,) → (8,)"]
    result = undo(report, ns)
    assert ns["grid"] is not grid and ns["grid"].shape == (5,)
    assert "rebound to the copy" in result.restored[0]


def test_undo_leaves_what_changed_again_since_the_run_unless_forced() -> None:
    items: list[int] = []
    ns: dict[str, Any] = {"items": items}
    report = run(ns, "items.append(1)\nnew = 1")
    items.append(2)  # the user, after the run
    ns["new"] = "mine"
    result = undo(report, ns)
    assert items == [1, 2] and ns["new"] == "mine"
    assert set(result.not_restored) == {"items", "new"}
    assert not report.undone
    undo(report, ns, force=True)
    assert items == [] and ns["new"] == "mine"


def test_a_report_is_undone_once() -> None:
    ns: dict[str, Any] = {"items": [1]}
    report = run(ns, "items.append(2)")
    undo(report, ns)
    ns["items"].append(3)
    assert undo(report, ns).not_restored == {"run": "already undone"}
    assert ns["items"] == [1, 3]


def test_a_snapshot_without_pandas_never_imports_it() -> None:
    code = (
        "import sys\n"
        "from cortex_kernel.runtime.changes import code_names, diff, snapshot\n"
        "ns = {'items': [1], 'n': 1}\n"
        "before = snapshot(ns, code_names('items.append(2)'))\n"
        "ns['items'].append(2)\n"
        "print(diff(before, ns).summary())\n"
        "assert 'pandas' not in sys.modules and 'numpy' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "changed in place: items (1 item appended; length 1 → 2)"


def test_the_report_keeps_a_deleted_value_until_it_is_dropped() -> None:
    ns: dict[str, Any] = {"df": sales()}
    alive = weakref.ref(ns["df"])
    report = run(ns, "del df")
    gc.collect()
    assert alive() is not None  # undo can still put it back
    del report
    gc.collect()
    assert alive() is None


# -- static reading of the code --------------------------------------------------


def test_code_names_include_attribute_and_subscript_bases() -> None:
    assert code_names("df.loc[df.a > 0, 'b'] = x\nprint(y.z)") == {"df", "x", "print", "y"}
    assert code_names("%timeit f(a)\nb = 1") == {"b"}  # the magic line is skipped
    assert code_names("def (") == frozenset()


NAMESPACE: dict[str, Any] = {
    "df": pd.DataFrame({"a": [1]}),
    "items": [1],
    "config": {"a": 1},
    "tags": {"a"},
    "grid": np.zeros(3),
    "n": 1,
    "np": np,
    "_private": [1],
}

RISKY = [
    ("df['b'] = 1", [("df", "item assignment")]),
    ("df.loc[0, 'a'] = 2", [("df", "item assignment")]),
    ("df.iloc[0, 0] = 2", [("df", "item assignment")]),
    ("df.loc[0, 'a'] += 1", [("df", "augmented assignment")]),
    ("df.attrs = {}", [("df", "attribute assignment")]),
    ("df.drop(columns='a', inplace=True)", [("df", "in-place method")]),
    ("df.sort_values('a', inplace=True)", [("df", "in-place method")]),
    ("df.insert(0, 'z', 1)", [("df", "in-place method")]),
    ("df.pop('a')", [("df", "in-place method")]),
    ("del df['a']", [("df", "item deletion")]),
    ("del df", [("df", "name deletion")]),
    ("items.append(2)", [("items", "in-place method")]),
    ("items += [2]", [("items", "augmented assignment")]),
    ("config.update(b=2)", [("config", "in-place method")]),
    ("config.setdefault('c', 3)", [("config", "in-place method")]),
    ("tags.add('b')", [("tags", "in-place method")]),
    ("grid.fill(1)", [("grid", "in-place method")]),
    ("np.add(grid, 1, out=grid)", [("grid", "output argument")]),
    ("setattr(df, 'flags', None)", [("df", "attribute assignment")]),
    ("alias = df\nalias['c'] = 1", [("df", "item assignment")]),
    ("for key in config:\n    config[key] = 0", [("config", "item assignment")]),
    ("def f():\n    items.clear()", [("items", "in-place method")]),
    ("%timeit df.sum()\ndf['c'] = 1", [("df", "item assignment")]),
    # The user's name given another value: their object stays, the name no longer holds it.
    ("df = df.drop(columns='a')", [("df", "name rebinding")]),
    ("items = []\nitems.append(1)", [("items", "name rebinding")]),
    ("n += 1", [("n", "name rebinding")]),
    ("for n in range(3):\n    pass", [("n", "name rebinding")]),
    ("df2 = df\ndf2 = 5", []),  # the code's own name, rebound
    # Not writes into an existing object:
    ("df.fillna(0)", []),
    ("df.sort_values('a')", []),
    ("copy = df.copy()\ncopy['b'] = 1", []),
    ("new = [1]\nnew.append(2)", []),
    ("unknown[0] = 1", []),
    ("_private.append(1)", []),
    ("np.random.seed(0)", []),
    ("print(df.head())", []),
    ("[x.append(1) for x in ([],)]\ndf.head()", []),
    ("def (", []),
]


@pytest.mark.parametrize(("code", "expected"), RISKY)
def test_risky_writes(code: str, expected: list[tuple[str, str]]) -> None:
    assert [(w.name, w.kind) for w in risky_writes(code, NAMESPACE)] == expected


def test_a_risky_write_says_where_and_through_which_alias() -> None:
    [write] = risky_writes("alias = df\n\nalias['c'] = 1", NAMESPACE)
    assert (
        write.describe()
        == "line 3: alias['c'] = 1 (item assignment into df, through its alias alias)"
    )
    [rebound] = risky_writes("df = df.dropna()", NAMESPACE)
    assert rebound.describe() == "line 1: df = df.dropna() (replaces df)"
    [loop] = risky_writes("for row in rows:\n    row.append(1)", {"rows": [[1]]})
    assert (loop.name, loop.via, loop.line) == ("rows", "row", 2)


def test_without_a_namespace_every_name_the_code_did_not_bind_counts() -> None:
    writes = risky_writes("x[0] = 1\ny = []\ny.append(1)\nz.update(a=1)")
    assert [(w.name, w.kind) for w in writes] == [
        ("x", "item assignment"),
        ("z", "in-place method"),
    ]

"""Tests of ``$var`` references: finding and substituting (docs/protocol.md#actions)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex_kernel.exceptions import VariableReferenceError
from cortex_kernel.runtime.references import (
    find_references,
    interpolate_text,
    resolve_path,
    substitute,
)

VARS: dict[str, Any] = {
    "rows": [{"name": "x", "n": 1}, {"name": "y", "n": 2}],
    "count": 3,
    "a1": "result one",
    "obj": {"field": [10, 20]},
}


def lookup(name: str) -> Any:
    return VARS[name]


def test_find_simple_braced_and_paths() -> None:
    body = {
        "name": "t",
        "parameters": {"a": "$rows", "b": "see ${count} and $obj.field[1]", "c": ["$a1", 5]},
    }
    refs = find_references(body)
    assert [(r.name, r.path) for r in refs] == [
        ("rows", ()),
        ("count", ()),
        ("obj", ("field", 1)),
        ("a1", ()),
    ]
    assert refs[2].text == "$obj.field[1]"


def test_keys_numbers_prices_and_escapes_are_not_references() -> None:
    assert find_references({"$rows": 1, "n": 5, "s": "costs $5 or $$rows"}) == []


def test_trailing_dot_is_not_part_of_path() -> None:
    (ref,) = find_references("the end is $count.")
    assert ref.name == "count" and ref.path == () and ref.text == "$count"


def test_whole_string_keeps_type() -> None:
    assert substitute("$rows", lookup) is VARS["rows"]
    assert substitute("${count}", lookup) == 3
    assert substitute("$rows[1].name", lookup) == "y"
    assert substitute({"k": ["$count"]}, lookup) == {"k": [3]}


def test_embedded_reference_is_text() -> None:
    assert substitute("n=$count!", lookup) == "n=3!"
    assert substitute("obj: $obj", lookup) == 'obj: {"field": [10, 20]}'
    assert substitute("$$count is $count", lookup) == "$count is 3"


def test_missing_name_raises_reference_error() -> None:
    with pytest.raises(VariableReferenceError, match="nope"):
        substitute({"x": "$nope"}, lookup)
    with pytest.raises(VariableReferenceError, match="does not exist"):
        substitute("$rows[7]", lookup)
    with pytest.raises(VariableReferenceError):
        substitute("x $obj.missing y", lookup)


def test_resolve_path_attributes() -> None:
    class Box:
        def __init__(self) -> None:
            self.inner = {"v": 4}

    assert resolve_path(Box(), ("inner", "v")) == 4


def test_interpolate_text_is_lenient() -> None:
    assert interpolate_text("got $count rows, $unknown stays, $$ sign", lookup) == (
        "got 3 rows, $unknown stays, $ sign"
    )


def test_input_not_mutated() -> None:
    body = {"a": ["$count"]}
    substitute(body, lookup)
    assert body == {"a": ["$count"]}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="ab $.{}[]01_", max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_find_and_substitute_never_crash_unexpectedly(value: Any) -> None:
    refs = find_references(value)
    names = {r.name for r in refs}
    env = {name: f"<{name}>" for name in names}
    try:
        substitute(value, env.__getitem__)
    except VariableReferenceError:
        # only a path into a string value can fail here
        assert any(r.path for r in refs)


@given(st.text(alphabet="abc_$. ", max_size=30))
def test_no_reference_text_is_unchanged(text: str) -> None:
    if not find_references(text) and "$$" not in text:
        assert substitute(text, lookup) == text


@given(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), st.integers())
def test_whole_reference_roundtrip(name: str, value: int) -> None:
    assert substitute(f"${name}", {name: value}.__getitem__) == value
    assert substitute(f"${{{name}}}", {name: value}.__getitem__) == value
    assert substitute(f"x ${name} y", {name: value}.__getitem__) == f"x {value} y"

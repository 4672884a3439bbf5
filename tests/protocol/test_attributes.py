"""Reading tag attributes and id lists."""

from __future__ import annotations

import pytest

from cortex_kernel.protocol._attributes import parse_attributes, split_ids


def test_quoting_styles_and_case() -> None:
    attrs, self_closing, junk = parse_attributes(
        """ TYPE="tool" Mode='async' id=a1 Depends-On=[a, b]"""
    )
    assert attrs == {"type": "tool", "mode": "async", "id": "a1", "depends_on": "[a, b]"}
    assert not self_closing and not junk


def test_value_may_hold_spaces_and_equals_when_quoted() -> None:
    assert parse_attributes(' note="a = b c"').attrs == {"note": "a = b c"}


def test_unterminated_values_end_with_the_tag() -> None:
    assert parse_attributes(' depends_on=["a","b"').attrs == {"depends_on": '["a","b"'}
    assert parse_attributes(' id="abc').attrs == {"id": "abc"}


def test_first_duplicate_wins_and_bare_names_are_empty() -> None:
    assert parse_attributes(" id=a id=b flag").attrs == {"id": "a", "flag": ""}


def test_self_closing_and_junk() -> None:
    result = parse_attributes(' type=tool "x" /')
    assert result.self_closing
    assert result.junk == '""'


def test_cached_results_are_not_shared() -> None:
    first = parse_attributes(' final="true"')
    first.attrs["final"] = "changed"
    assert parse_attributes(' final="true"').attrs == {"final": "true"}


@pytest.mark.parametrize(
    "written", ["a,b", "a b", '["a","b"]', "[a, b]", '["a","b"', " a , b ", "a,,b", "a, b, a"]
)
def test_split_ids(written: str) -> None:
    assert split_ids(written) == ("a", "b")


def test_split_ids_empty() -> None:
    assert split_ids("") == ()
    assert split_ids("[]") == ()

"""Reading tag attributes and id lists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol._attributes import parse_attributes, read_lenient, split_ids

# Pieces of tags, the common case's and its near misses: pairs, duplicates,
# bare and single-quoted values, junk, Unicode whitespace, a closing `/`.
_TAG_PIECES = st.sampled_from(
    [' id="a1"', ' type="tool"', ' mode="async"', ' id="a2"', ' note="x = y"', ' e=""',
     ' Mode="sync"', ' output-key="r"', " id='a3'", " id=a4", ' depends_on=["a1"',
     " ", "\t", "\n", "\u00a0", "\x1c", "a", "_", "Z", "1", "=", '"', "'", "/", "[", "]",
     "-", "é", "id", "type", ' a1="x"', ' x_2=""', '="v"', ' é="v"', '\u00a0k="v"']
)  # fmt: skip


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


@settings(max_examples=500, deadline=None)
@given(st.lists(_TAG_PIECES, max_size=12).map("".join))
def test_fast_path_reads_as_the_lenient_reader(text: str) -> None:
    # parse_attributes reads the common case in one go; every tag must
    # come out exactly as the one general reader gives it.
    assert parse_attributes(text) == read_lenient(text)


@pytest.mark.parametrize(
    "written", ["a,b", "a b", '["a","b"]', "[a, b]", '["a","b"', " a , b ", "a,,b", "a, b, a"]
)
def test_split_ids(written: str) -> None:
    assert split_ids(written) == ("a", "b")


def test_split_ids_empty() -> None:
    assert split_ids("") == ()
    assert split_ids("[]") == ()

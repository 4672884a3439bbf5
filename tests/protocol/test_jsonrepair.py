"""The lenient JSON reader of action bodies."""

from __future__ import annotations

import pytest

from cortex_kernel.protocol._jsonrepair import loads_lenient


def test_strict_json_needs_no_repair() -> None:
    assert loads_lenient('{"a": [1, 2]}') == (True, {"a": [1, 2]}, (), "")


@pytest.mark.parametrize(
    ("text", "value", "repairs"),
    [
        ('```json\n{"a": 1}\n```', {"a": 1}, ("code fences",)),
        ("```\n{'a': 1}\n```", {"a": 1}, ("code fences", "single quotes")),
        ('{"a": [1, 2,],}', {"a": [1, 2]}, ("trailing commas",)),
        ("{'a': 'it\\'s \"x\"'}", {"a": 'it\'s "x"'}, ("single quotes",)),
        ('{"a": None, "b": True}', {"a": None, "b": True}, ("Python literals",)),
        ('{"a": "it\'s, }"}', None, None),  # strict JSON: untouched
    ],
)
def test_repairs(text: str, value: object, repairs: tuple[str, ...] | None) -> None:
    result = loads_lenient(text)
    assert result.ok
    if value is not None:
        assert result.value == value
        assert result.repairs == repairs


def test_repair_does_not_touch_double_quoted_strings() -> None:
    result = loads_lenient("{'a': \"None, ]\",}")
    assert result.value == {"a": "None, ]"}


def test_failure_reports_the_original_position() -> None:
    result = loads_lenient('{\n  "a": 1\n  "b": 2\n}')
    assert not result.ok
    assert "line 3 column 3" in result.error


@pytest.mark.parametrize("text", ["", "{", "'", "```", "[" * 5000, "{'a': 'b", "\\"])
def test_never_raises(text: str) -> None:
    loads_lenient(text)


def test_escaped_lone_surrogates_are_replaced() -> None:
    result = loads_lenient('{"a": "\\ud800x", "\\udc00": ["\\ud83d\\ude00"]}')
    assert result.value == {"a": "\ufffdx", "\ufffd": ["\U0001f600"]}
    assert result.repairs == ("lone surrogates",)


def test_escaped_surrogate_pairs_need_no_repair() -> None:
    assert loads_lenient('{"a": "\\ud83d\\ude00"}') == (True, {"a": "\U0001f600"}, (), "")


def test_python_triple_quoted_strings_become_json_strings_as_written() -> None:
    # Qwen2.5-Coder-1.5B wraps code in Python's triple quotes; `\n` in the
    # code is the code's own escape and must reach it unchanged.
    text = '{"code": """\nx = df[df[\'a\'] == "N"]\nprint("a\\nb")\n""", "n": \'\'\'1\'\'\'}'
    result = loads_lenient(text)
    assert result.ok, result.error
    assert result.value == {"code": '\nx = df[df[\'a\'] == "N"]\nprint("a\\nb")\n', "n": "1"}
    assert "triple-quoted strings" in result.repairs


def test_triple_quotes_inside_a_json_string_are_left_alone() -> None:
    assert loads_lenient('{"doc": "say \\"\\"\\"hi\\"\\"\\""}').value == {"doc": 'say """hi"""'}

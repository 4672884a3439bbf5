"""``{name}`` interpolation: simple references only, everything else as written."""

from __future__ import annotations

import pytest

from cortex_kernel.jupyter.interpolate import interpolate, unbound_references

NS = {"x": 42, "name": "Ada", "items": [1, 2]}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("x is {x}", "x is 42"),
        ("hello {name!r}", "hello 'Ada'"),
        ("{name!s} and {items}", "Ada and [1, 2]"),
        ("no braces", "no braces"),
        ("{undefined} stays", "{undefined} stays"),
        ("dict {'a': 1} and {x: 1}", "dict {'a': 1} and {x: 1}"),
        ("expr {x + 1} stays", "expr {x + 1} stays"),
        ("doubled {{x}} is a literal", "doubled {x} is a literal"),
        ("{{{x}}}", "{{x}}"),
        ("const {x} = obj", "const 42 = obj"),
        ("ts: function f({a, b}: Props) {}", "ts: function f({a, b}: Props) {}"),
        ('json {"k": {x}}', 'json {"k": 42}'),
    ],
)
def test_interpolate(message: str, expected: str) -> None:
    assert interpolate(message, NS) == expected


def test_fenced_code_is_left_alone() -> None:
    message = "use {x}\n```python\nd = {x}\nf'{name}'\n```\nthen {name}"
    assert interpolate(message, NS) == "use 42\n```python\nd = {x}\nf'{name}'\n```\nthen Ada"


def test_unclosed_fence_protects_the_rest() -> None:
    assert interpolate("a {x}\n```\n{x}", NS) == "a 42\n```\n{x}"


def test_unbound_references_are_named_once_in_order() -> None:
    message = "{nope} and {x} and {{lit}} and {also_nope!r} and {nope}\n```\n{in_code}\n```"
    assert unbound_references(message, NS) == ["nope", "also_nope"]
    assert unbound_references("{x: 1} {x + 1} {'k': 1}", NS) == []

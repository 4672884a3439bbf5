"""The GBNF check (llama.cpp's parser, transcribed) and the tests' recognizer built on it."""

from __future__ import annotations

import random

import pytest

from cortex_kernel.llm.gbnf import (
    ALT,
    CHAR,
    CHAR_ALT,
    CHAR_NOT,
    CHAR_RNG_UPPER,
    END,
    RULE_REF,
    GrammarError,
    check,
    parse,
)
from tests.llm.gbnf import Matcher, accepts, constrained_text, random_text


def test_flat_rules_are_llama_cpps() -> None:
    # The tables of llama.cpp's tests/test-grammar-parser.cpp for these grammars.
    grammar = parse('root  ::= "a" | [bdx-z] | [^1-3]')
    assert grammar.rules == (
        (
            (CHAR, ord("a")),
            (ALT, 0),
            (CHAR, ord("b")),
            (CHAR_ALT, ord("d")),
            (CHAR_ALT, ord("x")),
            (CHAR_RNG_UPPER, ord("z")),
            (ALT, 0),
            (CHAR_NOT, ord("1")),
            (CHAR_RNG_UPPER, ord("3")),
            (END, 0),
        ),
    )
    repeated = parse('root ::= "a"{0,3}')
    assert repeated.symbols == {"root": 0, "root_1": 1, "root_2": 2, "root_3": 3}
    assert repeated.rules == (
        ((RULE_REF, 3), (END, 0)),
        ((CHAR, ord("a")), (ALT, 0), (END, 0)),
        ((CHAR, ord("a")), (RULE_REF, 1), (ALT, 0), (END, 0)),
        ((CHAR, ord("a")), (RULE_REF, 2), (ALT, 0), (END, 0)),
    )
    plus = parse('root ::= a+\na ::= "a"')
    assert plus.symbols == {"root": 0, "a": 1, "root_2": 2}
    assert plus.rules[0] == ((RULE_REF, 1), (RULE_REF, 2), (END, 0))
    assert plus.rules[2] == ((RULE_REF, 1), (RULE_REF, 2), (ALT, 0), (END, 0))


@pytest.mark.parametrize(
    "text",
    [
        'root ::= "a" # a comment\n\n# another\nb ::= [^\\x00-\\x1F] "\\u00e9\\U0001F600"',
        'root ::= (\n  "a"\n  | "b"\n) "c"{2} "d"{1,} "e"{0,2} "f"? .',
        'root ::= "a" |\n  "b"',  # a newline after `|` goes on with the rule
        "root ::= [a-] [\\]\\[\\\\]",
        'root ::= "a" | ',  # an empty alternative
    ],
)
def test_what_llama_cpp_loads_passes(text: str) -> None:
    assert check(text) is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("root ::= foo", "undefined rule identifier 'foo'"),
        ('a ::= "x"', "no root"),
        ('root ::= root "a"', "left recursion"),
        ('root ::= a "x"\na ::= "" | root', "left recursion"),
        # llama.cpp loads this one and its sampler never returns: refused here.
        ('root ::= x*\nx ::= "a"?', "left recursion"),
        ('root ::= "\\q"', "unknown escape"),
        ('root ::= "abc', "unexpected end"),
        ('root = "a"', "expecting ::="),
        ('root ::= ""*', "expecting preceding item"),
        ('root ::= "a"{,10}', "expecting an int"),
        ('root ::= "a"{5000}', "repetition bound"),
        ("root ::= char{1,2000}\nchar ::= [a]", "repetition of 1 rule(s) 2000 times"),
        ("root ::= (((([^x]*){0,99}){0,99}){0,99}){0,99}", "times"),
        ('root ::= "a"\nroot ::= "b"', "defined twice"),
        ('root ::= "a" "b"\n  "c"', "expecting name"),  # a newline ends a rule outside ( )
        ('root ::= ("a"', "expecting ')'"),
        ('root ::= "a" )', "expecting newline or end"),
    ],
)
def test_what_llama_cpp_refuses_is_refused(text: str, why: str) -> None:
    problem = check(text)
    assert problem is not None and why in problem
    with pytest.raises(GrammarError):
        parse(text)


def test_the_recognizer_accepts_the_language_and_nothing_else() -> None:
    matcher = Matcher(
        'root ::= "a" ("b" | "cd")* digit{0,2} [^<]* ws\ndigit ::= [0-9]\nws ::= [ \\n]?'
    )
    for text in ("a", "abcd", "acdb12", "ab123x y", "ab\n"):
        assert accepts(matcher, text), text
    for text in ("", "b", "ac<", "a<", "ab<x"):
        assert not accepts(matcher, text), text
    fed = matcher.copy()
    assert fed.feed("ab") and not fed.feed("<") and fed.feed("c")  # a refused feed changes nothing
    assert matcher.stack_count >= 1 and not matcher.complete


def test_generated_text_is_in_the_language() -> None:
    grammar = 'root ::= "{" item ("," item){0,3} "}"\nitem ::= [a-c]+ ":" ("1" | "22")'
    matcher = Matcher(grammar)
    rng = random.Random(7)
    for _ in range(20):
        assert accepts(matcher, random_text(matcher, rng, explore=30))
    # Followed while the grammar allows it, then finished the shortest way.
    assert constrained_text(matcher, "{ab:22,c:3}") == "{ab:22,c:1}"
    assert constrained_text(matcher, "{ab:22,c:1}") == "{ab:22,c:1}"

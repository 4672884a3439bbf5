"""Property tests that know the answer (issue 8): documents generated with their content.

The invariants of ``test_properties`` (chunk invariance, conservation…) hold
for a parser that reads everything as text. These do not: each generated
document comes with the actions, feeds, thoughts, responses and text it
contains, and the parser, fed the document in any chunks, must report
exactly those: every action dispatched once, with its attributes and body,
and every character of prose in the right place.

The last tests check the checker: parsers broken on purpose (everything as
text, an attribute dropped, an action dispatched twice, a thought's text
moved outside) pass the self-consistency properties but fail here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol import ActionParsed, ParserEvent, Text

from .answer_strategies import Answer, answered_documents, observed
from .parse_helpers import assert_conserved, feed_chunks, merged, split_at

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ParseFn = Callable[[Sequence[str]], list[ParserEvent]]


def check(text: str, answer: Answer, chunks: Sequence[str], parse: ParseFn = feed_chunks) -> None:
    """``parse(chunks)`` reports exactly ``answer``."""
    got = observed(parse(chunks))
    assert got.tokens == answer.tokens
    assert got.actions == answer.actions
    assert got.feeds == answer.feeds
    assert got.warnings == answer.warnings


@SETTINGS
@given(answered_documents(), st.data())
def test_every_action_and_every_text_at_any_chunking(
    document: tuple[str, Answer], data: st.DataObject
) -> None:
    text, answer = document
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=20))
    check(text, answer, [text])
    check(text, answer, split_at(text, cuts))


@SETTINGS
@given(answered_documents())
def test_every_action_and_every_text_one_character_at_a_time(
    document: tuple[str, Answer],
) -> None:
    text, answer = document
    check(text, answer, list(text))


@SETTINGS
@given(answered_documents(), st.sampled_from([2, 3, 4, 7, 16, 64]))
def test_every_action_at_fixed_chunk_sizes(document: tuple[str, Answer], size: int) -> None:
    text, answer = document
    check(text, answer, [text[i : i + size] for i in range(0, len(text), size)])


# -- the checker catches broken parsers ------------------------------------------------

DOCUMENT = (
    'Hi <thought>plan: a < b <action type="tool" id="q1" mode="async" output_key="rows">'
    '{"name": "ls", "parameters": {"path": "</action>"}}</action> then'
    "<action type=llm depends_on=q1>{'prompt': 'sum $rows'}</action></thought>"
    '<response final="false">working</response><response>done</response> bye'
)


def _answer() -> Answer:
    answer = observed(feed_chunks([DOCUMENT]))
    assert set(answer.actions) == {"q1", "a1"}
    return answer


def _everything_as_text(chunks: Sequence[str]) -> list[ParserEvent]:
    events = feed_chunks(chunks)
    end = events[-1].span[1]
    return [Text(span=(0, end), text="".join(chunks))]


def _drops_an_attribute(chunks: Sequence[str]) -> list[ParserEvent]:
    out: list[ParserEvent] = []
    for event in feed_chunks(chunks):
        if isinstance(event, ActionParsed):
            action = dataclasses.replace(event.action, output_key=None)
            event = dataclasses.replace(event, action=action)
        out.append(event)
    return out


def _dispatches_twice(chunks: Sequence[str]) -> list[ParserEvent]:
    out: list[ParserEvent] = []
    for event in feed_chunks(chunks):
        out.append(event)
        if isinstance(event, ActionParsed):
            out.append(dataclasses.replace(event, span=(event.span[1], event.span[1])))
    return out


def _thought_text_outside(chunks: Sequence[str]) -> list[ParserEvent]:
    return [
        Text(span=e.span, text=e.text) if e.type == "thought_delta" else e
        for e in feed_chunks(chunks)
    ]


@pytest.mark.parametrize(
    "broken", [_everything_as_text, _drops_an_attribute, _dispatches_twice, _thought_text_outside]
)
def test_a_broken_parser_fails_the_check(broken: ParseFn) -> None:
    answer = _answer()
    check(DOCUMENT, answer, [DOCUMENT])
    for chunks in ([DOCUMENT], list(DOCUMENT)):
        # The self-consistency properties cannot tell...
        assert_conserved(DOCUMENT, broken(chunks))
        assert merged(broken(chunks)) == merged(broken([DOCUMENT]))
        # ...the answer can.
        with pytest.raises(AssertionError):
            check(DOCUMENT, answer, chunks, parse=broken)


def test_a_real_parser_with_a_broken_attribute_reader_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break the parser itself (not its output): ``mode`` is no longer read."""
    from cortex_kernel.protocol import _attributes

    real = _attributes.read_attributes

    def without_mode(text: str) -> tuple[dict[str, str], bool, str]:
        attrs, self_closing, junk = real(text)
        attrs.pop("mode", None)
        return attrs, self_closing, junk

    answer = _answer()
    monkeypatch.setattr("cortex_kernel.protocol.parser.read_attributes", without_mode)
    with pytest.raises(AssertionError):
        check(DOCUMENT, answer, [DOCUMENT])

"""Where a body ends, found without the scanner, is where the scanner finds it.

:meth:`OpenBody.end` takes the first ``</`` as the closing tag when the body
before it is strict JSON (an action's, decoded there once) or plain JSON
and whole strings; anything else goes to :class:`BodyScanner`. On every body
the two must agree, or the events would depend on how the stream was cut.

:meth:`Parser.feed` keeps a chunk of a body unscanned when it cannot end
it: no ``>``, or no ``</`` possible yet (a ``>`` in code, no ``<``); the
action must still come in the feed that delivers its closing ``>``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol import Parser, ParserEvent
from cortex_kernel.protocol._body import UNSCANNED_BODY_MAX, OpenBody
from cortex_kernel.protocol._scanner import BodyScanner
from cortex_kernel.protocol.parser import ACTION, FEED, OUTSIDE

from .doc_strategies import json_body
from .parse_helpers import feed_chunks, merged

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# What can hide a closing tag or end a string early: quotes, escapes, an
# apostrophe outside strings, a `<`.
junk = st.sampled_from(['"', "\\", '\\"', "'", "<", " ", "a", "\\\\"])


@st.composite
def bodies(draw: st.DrawFn) -> str:
    body = draw(json_body())
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(junk) + body[at:]
    return body


@SETTINGS
@given(bodies(), st.sampled_from(["", " tail", "</b>"]))
def test_the_quick_end_is_the_scanners(body: str, after: str) -> None:
    for state in (ACTION, FEED):
        buf = f"{body}{state.close_tag}{after}"
        opened = OpenBody(OUTSIDE)
        opened.open(OUTSIDE, (0, 0), {}, "a1")
        quick = opened.end(state, buf, 0, False)
        found, index = BodyScanner(state.close_name).scan(buf, 0, False)
        scanned = (index, index, None) if found is None else (index, found.end, buf[:index])
        assert quick == scanned


# -- chunks of a body that are kept unscanned ------------------------------------

_OPEN = '<action type="tool" id="a1">'


def _types(events: list[ParserEvent]) -> list[str]:
    return [event.type for event in events]


@pytest.mark.parametrize(
    "chunks",
    [
        # A `>` in code, then the closing tag's `<` ending one chunk and its
        # `/` starting the next (kept: no `>`), then the `>` alone.
        [_OPEN + '{"name": "t", "parameters": {"code": "x > 1"}}<', "/action", ">"],
        # The same with a chunk that holds a `>` and no `<` in between.
        [_OPEN + '{"name": "t", "parameters": {"code": "x', ' > 1"}}<', "/action", ">"],
        [_OPEN + '{"name": "t", "parameters": {"code": "x', ' > 1"}}', "<", "/act", "ion", ">"],
        [_OPEN, '{"name": "t", ', '"parameters": {"code": "a > b"}}', "</action>"],
    ],
)
def test_an_action_is_parsed_by_the_feed_that_delivers_its_end(chunks: list[str]) -> None:
    parser = Parser()
    for chunk in chunks[:-1]:
        assert "action_parsed" not in _types(parser.feed(chunk)), chunk
    last = parser.feed(chunks[-1])
    assert _types(last) == ["action_parsed"]
    action = last[0].action  # type: ignore[union-attr]
    assert action.parameters["code"] in ("x > 1", "a > b")
    assert parser.close() == []


@pytest.mark.parametrize("size", [1, 7, 64, 1000])
def test_a_long_body_with_many_gt_signs_reads_the_same_in_any_chunks(size: int) -> None:
    # Longer than what is kept unscanned (the scanner takes over): the same
    # events as the whole text, the action in the feed that brings its end.
    code = "\\n".join(f"if x{i} > {i}: y = x{i} >> 1  # é ✅" for i in range(400))
    text = f'{_OPEN}{{"name": "t", "parameters": {{"code": "{code}"}}}}</action> after'
    assert len(text) > 3 * UNSCANNED_BODY_MAX
    whole = merged(feed_chunks([text]))
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    parser = Parser()
    delivered_at = [
        n for n, chunk in enumerate(chunks) if "action_parsed" in _types(parser.feed(chunk))
    ]
    end = text.index("</action>") + len("</action>") - 1
    assert delivered_at == [end // size]
    assert merged(feed_chunks(chunks)) == whole
    assert [e["type"] for e in whole] == ["action_open", "action_parsed", "text"]

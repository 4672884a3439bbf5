"""Where a body ends, found without the scanner, is where the scanner finds it.

:meth:`OpenBody.end` takes the first ``</`` as the closing tag when the body
before it is strict JSON (an action's, decoded there once) or plain JSON
and whole strings; anything else goes to :class:`BodyScanner`. On every body
the two must agree, or the events would depend on how the stream was cut.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol._body import OpenBody
from cortex_kernel.protocol._scanner import BodyScanner
from cortex_kernel.protocol.parser import ACTION, FEED, OUTSIDE

from .doc_strategies import json_body

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

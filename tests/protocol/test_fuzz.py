"""Fuzz target for the parser: the SPEC §2.2 properties with a large budget.

The normal suite runs a few examples so it stays fast. For a long run, set
the example budget in ``CORTEX_FUZZ_EXAMPLES``; ``make fuzz`` sets 200000::

    CORTEX_FUZZ_EXAMPLES=200000 .venv/bin/python -m pytest tests/protocol/test_fuzz.py -p no:timeout

Each example draws a valid, mutated or arbitrary document and random chunk
boundaries, then checks that the parser does not raise, that the events
conserve the input, that chunking changes nothing once deltas are merged,
that every event serialises to one JSON line and reads back equal, and that
no action is dispatched for a stream cut before its ``</action>``.
Hypothesis keeps failing examples in its database (``.hypothesis/``) and
replays them first on the next run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol import ActionParsed, parse_parser_event

from .doc_strategies import documents, mutated_documents
from .parse_helpers import assert_conserved, feed_chunks, merged, split_at

EXAMPLES = int(os.environ.get("CORTEX_FUZZ_EXAMPLES", "60"))

inputs = st.one_of(documents, mutated_documents(), st.text(), st.text(st.sampled_from("<>/'\"{}a")))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(inputs, st.data())
def test_fuzz_parser(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=20), label="cuts")
    whole = feed_chunks([text])
    chunked = feed_chunks(split_at(text, cuts))
    assert_conserved(text, whole)
    assert_conserved(text, chunked)
    assert merged(chunked) == merged(whole)
    for event in chunked:
        line = event.to_json()
        assert "\n" not in line
        assert parse_parser_event(line) == event
        if isinstance(event, ActionParsed):
            assert text[event.span[1] - 1] == ">"

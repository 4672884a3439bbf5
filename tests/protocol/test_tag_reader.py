"""The plain-case tag readers agree with each state's tag regex.

The parser reads the common tag at a ``<`` without the regex: a tag with
no attribute whole, by one lookup in ``state.bare_tags``, any other by
:func:`~cortex_kernel.protocol.parser._tag_at` (two finds, a split, a
lookup), and defers everything else to ``state.tag_re``; whenever either
answers, the regex must match at the same ``<`` with the same end, handler
and text.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cortex_kernel.protocol import parser as parser_module
from cortex_kernel.protocol._scanner import MAX_ATTRS

STATES = (parser_module.OUTSIDE, parser_module.THOUGHT, parser_module.RESPONSE)

# Tags of every state, in their spellings and near misses.
_PIECES = st.sampled_from(
    ["<thought>", "</thought>", "<THOUGHT >", "</Thought  >", "<thought/>", "</thought/>",
     '<action type="tool" id="a1">', "<action>", "<action/>", "<Action\tid=x>", "<actions>",
     "<action-x>", '<response final="false">', "</response>", "</ response>", "<response",
     "<context_feed id=f>", "</context_feed>", "< thought>", "<>", "</>", "<thoughtx>",
     "<act>", "<respons>", "<action\x1c>",
     "<reſponse>", "</reſponse>", "<thought\x1c>", "</thought\u00a0>", "<action\u00a0x>",
     "<", ">", "/", " ", "\n", "a", "é", "<action " + "x" * (MAX_ATTRS + 2) + ">"]
)  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(st.lists(_PIECES, max_size=10).map("".join))
def test_the_plain_case_reads_as_the_regex(buf: str) -> None:
    for state in STATES:
        lt = buf.find("<")
        while lt >= 0:
            gt = buf.find(">", lt)
            if gt < 0:
                break
            for tag in (
                state.bare_tags.get(buf[lt : gt + 1]),
                parser_module._tag_at(state, buf, lt, gt),
            ):
                if tag is None:
                    continue
                match = state.tag_re.match(buf, lt)
                assert match is not None, (state, buf[lt:])
                assert match.end() == gt + 1
                last = match.lastindex
                assert last is not None
                assert state.dispatch[last] is tag[0]
                assert match[last] == tag[1]
            lt = buf.find("<", lt + 1)


def test_the_plain_case_answers_for_the_common_tags() -> None:
    outside, thought = parser_module.OUTSIDE, parser_module.THOUGHT
    buf = '<action type="tool">'
    assert parser_module._tag_at(outside, buf, 0, len(buf) - 1) is not None
    buf = "</Thought >"
    assert parser_module._tag_at(thought, buf, 0, len(buf) - 1) == (
        thought.close_handlers["thought"],
        "",
    )
    buf = "<reſponse>"  # folded by re.IGNORECASE only: left to the regex
    assert parser_module._tag_at(outside, buf, 0, len(buf) - 1) is None
    assert outside.bare_tags.get(buf) is None
    assert thought.bare_tags["</thought>"] == (thought.close_handlers["thought"], "")
    assert outside.bare_tags["<thought>"] == (outside.open_handlers["thought"], "")
    assert "</Thought>" not in thought.bare_tags  # another case: _tag_at reads it

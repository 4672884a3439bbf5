"""Hypothesis strategies for protocol documents, valid and broken.

Used by the property tests and the fuzz target. Documents mix every
element of docs/protocol.md#contract with the hazards the parser must survive: ``<`` and
``>`` in text, tag prefixes, case changes, every quoting style,
``</action>`` inside JSON strings, apostrophes, repairs.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from .fuzz_docs import ALPHABET, HAZARDS  # one vocabulary for both generators

small_text = st.text(st.sampled_from(ALPHABET), max_size=12)
prose = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
hazard = st.sampled_from(HAZARDS)
text_piece = st.one_of(small_text, prose, hazard)
plain_text = st.lists(text_piece, max_size=5).map("".join)

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.text(max_size=10),
    st.sampled_from(["</action>", "if a < b: print('</action>')", "it's", 'say "hi"', "\\"]),
)
json_value = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)


def _quote(value: str, style: int) -> str:
    if style == 0:
        return f'"{value}"'
    if style == 1:
        return f"'{value}'"
    return value


@st.composite
def attribute(draw: st.DrawFn, name: str, value: str) -> str:
    style = draw(st.integers(0, 2))
    written = draw(st.sampled_from([name, name.upper(), name.capitalize()]))
    return f"{written}={_quote(value, style)}"


@st.composite
def json_body(draw: st.DrawFn) -> str:
    body: dict[str, Any] = draw(st.dictionaries(st.text(max_size=6), json_value, max_size=3))
    body.setdefault("name", draw(st.sampled_from(["ls", "search", "x"])))
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    kind = draw(st.integers(0, 5))
    if kind == 0:
        text = f"```json\n{text}\n```"
    elif kind == 1:
        text = text[:-1] + ",}"
    elif kind == 2:
        text = "{'name': 'n', 'code': 'x = \"</action>\"'}"
    return text


@st.composite
def action_element(draw: st.DrawFn) -> str:
    parts = [draw(st.sampled_from(["action", "ACTION", "Action"]))]
    type_value = draw(st.sampled_from(["tool", "llm", "agent", "relic", "workflow", "internal"]))
    parts.append(draw(attribute("type", type_value)))
    if draw(st.booleans()):
        parts.append(
            draw(attribute("mode", draw(st.sampled_from(["sync", "async", "fire_and_forget"]))))
        )
    if draw(st.booleans()):
        parts.append(draw(attribute("id", draw(st.sampled_from(["x", "y", "a1", "a2", "z9"])))))
    if draw(st.booleans()):
        deps = draw(st.sampled_from(["a,b", '["a","b"]', "[a, b]", "a1"]))
        parts.append(
            f"depends_on={deps}" if "," not in deps or "[" in deps else f'depends_on="{deps}"'
        )
    if draw(st.booleans()):
        parts.append(draw(attribute("output_key", "out")))
    close = draw(st.sampled_from(["</action>", "</ACTION>", "</action >"]))
    return "<" + " ".join(parts) + ">" + draw(json_body()) + close


@st.composite
def feed_element(draw: st.DrawFn) -> str:
    feed_type = draw(st.sampled_from(["on_demand", "periodic", "internal", "bogus"]))
    return f'<context_feed id="f" type="{feed_type}">{draw(json_body())}</context_feed>'


@st.composite
def thought_element(draw: st.DrawFn) -> str:
    inner = draw(st.lists(st.one_of(plain_text, action_element(), feed_element()), max_size=4))
    return "<thought>" + "".join(inner) + draw(st.sampled_from(["</thought>", "</THOUGHT>"]))


@st.composite
def response_element(draw: st.DrawFn) -> str:
    attrs = draw(st.sampled_from(["", ' final="true"', " final=false", " FINAL='False'"]))
    return f"<response{attrs}>" + draw(plain_text) + "</response>"


documents = st.lists(
    st.one_of(plain_text, thought_element(), action_element(), response_element(), feed_element()),
    max_size=6,
).map("".join)


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    """A valid document with characters deleted, inserted, or the stream cut."""
    text = draw(documents)
    for _ in range(draw(st.integers(0, 4))):
        if not text:
            break
        position = draw(st.integers(0, len(text)))
        op = draw(st.integers(0, 2))
        if op == 0:
            text = text[:position] + text[position + 1 :]
        elif op == 1:
            text = text[:position] + draw(st.one_of(hazard, st.characters())) + text[position:]
        else:
            text = text[:position]
    return text


@st.composite
def cut_points(draw: st.DrawFn, text: str) -> list[int]:
    if not text:
        return []
    return draw(st.lists(st.integers(0, len(text)), max_size=12))

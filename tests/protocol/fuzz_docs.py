"""A cheap document generator for the parser fuzz target.

It draws the same kinds of documents as :mod:`.doc_strategies` (valid,
mutated, arbitrary text, tag soup) from one seeded :class:`random.Random`
instead of dozens of hypothesis draws per document. Profiling 2,000 fuzz
examples showed ~80 % of the time in hypothesis drawing the nested
composite strategies and ~15 % in the parser and the checks; one seed per
example moves the budget to the checks. Hypothesis still owns the seed, so
a failure is reported (and replayed with ``--hypothesis-seed``) like any
other, and the document itself is printed through ``note``.

The property tests keep the hypothesis strategies (they shrink well); this
module mirrors them, and adds what ``st.text()`` leaves out: lone
surrogates, which a model's stream can carry after a bad decode.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

ALPHABET = list("ab <>/'\"=[]{},:\\\n\tactionthoughtresponse_é中")
TAG_SOUP = list("<>/'\"{}a")
HAZARDS = [
    "<",
    ">",
    "</",
    "<thou",
    "<thought",
    "</thought",
    "<action",
    "</action",
    "</action>",
    "<response",
    "<b>",
    "a < b",
    "'",
    '"',
    "\\",
    "<context_feed",
]
# A high surrogate right before a low one: JSON cannot tell the pair from
# the astral character it encodes, and no decoded stream holds one.
_PAIR = re.compile("([\ud800-\udbff])(?=[\udc00-\udfff])")
JSON_STRINGS = ["</action>", "if a < b: print('</action>')", "it's", 'say "hi"', "\\"]


class DocumentGenerator:
    """Draw fuzz inputs from one seeded random generator.

    Parameters
    ----------
    rng:
        The source of randomness; the same seed gives the same documents.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- sizes and characters -------------------------------------------
    def size(self, max_size: int) -> int:
        """A length in ``[0, max_size]`` biased to short (as hypothesis is)."""
        rng = self.rng
        if rng.random() < 0.15:
            return 0
        return min(max_size, int(rng.expovariate(1 / max(1.0, max_size / 3))))

    def character(self) -> str:
        """Any code point, weighted like ``st.characters()``, plus surrogates."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            return chr(rng.randint(0x20, 0x7E))
        if roll < 0.55:
            return chr(rng.choice((rng.randint(0, 0x1F), 0x7F, rng.randint(0x80, 0x9F))))
        if roll < 0.75:
            return chr(rng.randint(0xA0, 0x7FF))
        if roll < 0.90:
            code = rng.randint(0x800, 0xFFFD)
            return chr(code if not 0xD800 <= code <= 0xDFFF else code - 0x800)
        if roll < 0.97:
            return chr(rng.randint(0x10000, 0x10FFFF))
        return chr(rng.randint(0xD800, 0xDFFF))

    def any_text(self, max_size: int = 40) -> str:
        """``st.text()``: arbitrary characters."""
        return "".join(self.character() for _ in range(self.size(max_size)))

    def text_of(self, alphabet: list[str], max_size: int) -> str:
        """``st.text(st.sampled_from(alphabet))``."""
        return "".join(self.rng.choices(alphabet, k=self.size(max_size)))

    # -- documents --------------------------------------------------------
    def plain_text(self) -> str:
        """Up to five pieces of alphabet text, prose or tag hazards."""
        pieces = []
        for _ in range(self.size(5)):
            kind = self.rng.randrange(3)
            if kind == 0:
                pieces.append(self.text_of(ALPHABET, 12))
            elif kind == 1:
                pieces.append(self.any_text(20))
            else:
                pieces.append(self.rng.choice(HAZARDS))
        return "".join(pieces)

    def json_leaf(self) -> Any:
        """A JSON scalar, some holding ``</action>`` or quotes."""
        rng = self.rng
        kind = rng.randrange(5)
        if kind == 0:
            return None
        if kind == 1:
            return rng.random() < 0.5
        if kind == 2:
            return rng.randint(-1000, 1000)
        if kind == 3:
            return self.any_text(10)
        return rng.choice(JSON_STRINGS)

    def json_value(self, leaves: int = 6) -> Any:
        """A JSON value of at most ``leaves`` leaves, nested lists and objects."""
        rng = self.rng
        if leaves <= 1 or rng.random() < 0.5:
            return self.json_leaf()
        share = max(1, leaves // 3)
        if rng.random() < 0.5:
            return [self.json_value(share) for _ in range(self.size(3))]
        return {self.any_text(5): self.json_value(share) for _ in range(self.size(3))}

    def attribute(self, name: str, value: str) -> str:
        """``name=value`` in any case and quoting style."""
        rng = self.rng
        written = rng.choice((name, name.upper(), name.capitalize()))
        style = rng.randrange(3)
        if style == 0:
            return f'{written}="{value}"'
        if style == 1:
            return f"{written}='{value}'"
        return f"{written}={value}"

    def json_body(self) -> str:
        """An action body: JSON, fenced, with a trailing comma, or Python-quoted."""
        rng = self.rng
        body: dict[str, Any] = {self.any_text(6): self.json_value() for _ in range(self.size(3))}
        body.setdefault("name", rng.choice(("ls", "search", "x")))
        text = json.dumps(body, ensure_ascii=rng.random() < 0.5)
        kind = rng.randrange(6)
        if kind == 0:
            text = f"```json\n{text}\n```"
        elif kind == 1:
            text = text[:-1] + ",}"
        elif kind == 2:
            text = "{'name': 'n', 'code': 'x = \"</action>\"'}"
        return text

    def action_element(self) -> str:
        """An ``<action>`` with random attributes, body and closing tag."""
        rng = self.rng
        parts = [rng.choice(("action", "ACTION", "Action"))]
        parts.append(
            self.attribute(
                "type", rng.choice(("tool", "llm", "agent", "relic", "workflow", "internal"))
            )
        )
        if rng.random() < 0.5:
            parts.append(self.attribute("mode", rng.choice(("sync", "async", "fire_and_forget"))))
        if rng.random() < 0.5:
            parts.append(self.attribute("id", rng.choice(("x", "y", "a1", "a2", "z9"))))
        if rng.random() < 0.5:
            deps = rng.choice(("a,b", '["a","b"]', "[a, b]", "a1"))
            parts.append(
                f"depends_on={deps}" if "," not in deps or "[" in deps else f'depends_on="{deps}"'
            )
        if rng.random() < 0.5:
            parts.append(self.attribute("output_key", "out"))
        close = rng.choice(("</action>", "</ACTION>", "</action >"))
        return "<" + " ".join(parts) + ">" + self.json_body() + close

    def feed_element(self) -> str:
        """A ``<context_feed>`` element."""
        feed_type = self.rng.choice(("on_demand", "periodic", "internal", "bogus"))
        return f'<context_feed id="f" type="{feed_type}">{self.json_body()}</context_feed>'

    def thought_element(self) -> str:
        """A ``<thought>`` holding text, actions and feeds."""
        inner = []
        for _ in range(self.size(4)):
            kind = self.rng.randrange(3)
            if kind == 0:
                inner.append(self.plain_text())
            elif kind == 1:
                inner.append(self.action_element())
            else:
                inner.append(self.feed_element())
        return "<thought>" + "".join(inner) + self.rng.choice(("</thought>", "</THOUGHT>"))

    def response_element(self) -> str:
        """A ``<response>`` with a ``final`` attribute in any spelling."""
        attrs = self.rng.choice(("", ' final="true"', " final=false", " FINAL='False'"))
        return f"<response{attrs}>" + self.plain_text() + "</response>"

    def document(self) -> str:
        """A valid document: up to six top-level elements."""
        makers = (
            self.plain_text,
            self.thought_element,
            self.action_element,
            self.response_element,
            self.feed_element,
        )
        return "".join(self.rng.choice(makers)() for _ in range(self.size(6)))

    def mutated_document(self) -> str:
        """A valid document with characters deleted, inserted, or the stream cut."""
        rng = self.rng
        text = self.document()
        for _ in range(rng.randint(0, 4)):
            if not text:
                break
            position = rng.randint(0, len(text))
            op = rng.randrange(3)
            if op == 0:
                text = text[:position] + text[position + 1 :]
            elif op == 1:
                insert = rng.choice(HAZARDS) if rng.random() < 0.5 else self.character()
                text = text[:position] + insert + text[position:]
            else:
                text = text[:position]
        return text

    def fuzz_input(self) -> str:
        """One input, as ``test_fuzz`` draws it: each of four kinds equally often."""
        kind = self.rng.randrange(4)
        if kind == 0:
            return unpaired(self.document())
        if kind == 1:
            return unpaired(self.mutated_document())
        if kind == 2:
            return unpaired(self.any_text())
        return self.text_of(TAG_SOUP, 40)

    def cuts(self, text: str) -> list[int]:
        """Up to 20 chunk boundaries in ``text``."""
        top = max(len(text), 1)
        return [self.rng.randint(0, top) for _ in range(self.rng.randint(0, 20))]


def unpaired(text: str) -> str:
    """``text`` with a space between a high and a low surrogate that met by chance."""
    return _PAIR.sub("\\1 ", text)

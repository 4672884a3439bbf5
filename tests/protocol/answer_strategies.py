"""Documents generated together with the answer a correct parser must give.

:func:`answered_documents` draws a protocol document *and* what it contains:
the tokens a reader sees in order (outside text, thought text, response
text with its ``final``, each action and feed where it closes), every
action's fields, and the warnings its repairs must raise. The document is
written the many ways docs/protocol.md#contract allows (tag and attribute case, every quoting
style, ``depends_on`` in every form, control fields in the body, code fences
and trailing commas, ``</action>`` inside JSON strings), so a parser that
ignores a spelling gets the answer wrong.

:func:`observed` reads the same shape back from a parser's events, so a test
compares the two with ``==``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from cortex_kernel.protocol import ParserEvent

from .doc_strategies import json_value

# What could be read as a known tag in some state; text must hold none, also
# where two pieces of text meet.
_KNOWN_TAG_RE = re.compile(
    r"</?(?:thought|action|response|context_feed)(?=[\s/>])",
    re.IGNORECASE,
)
_TEXT_ALPHABET = st.sampled_from(list("ab xyz<>/='\"[]{},:;\\\n\t&é中😀"))
_TEXT_HAZARDS = st.sampled_from(
    ["a < b", "x > y", "<b>bold</b>", "<thoughts>", "<actionable>", "</ thought>", "<", "</", "<>"]
)
safe_text = (
    st.lists(st.one_of(st.text(_TEXT_ALPHABET, max_size=10), _TEXT_HAZARDS), max_size=4)
    .map("".join)
    .filter(lambda text: _KNOWN_TAG_RE.search(text) is None)
)

_CONTROL = frozenset(("id", "mode", "output_key", "depends_on", "timeout", "retries"))
_KEYS = st.text(st.sampled_from(list("abcdefxyz_é中 ")), min_size=1, max_size=6).filter(
    lambda key: key not in _CONTROL and key not in ("name", "parameters", "prompt")
)
_STRING_HAZARDS = st.sampled_from(
    ["</action>", "if a < b: print('</action>')", "it's", 'say "hi"', "\\", "</thought>"]
)
_VALUES = st.one_of(json_value, _STRING_HAZARDS)
_MODES = {
    "sync": ["sync", "SYNC"],
    "async": ["async", "Async"],
    "fire_and_forget": ["fire_and_forget", "fire-and-forget", "FIRE_AND_FORGET"],
}


@dataclass
class Answer:
    """What a correct parser reports for a document.

    Attributes
    ----------
    tokens
        In order: ``("text", s)``, ``("thought", s)`` (thought text),
        ``("response", final, s)``, ``("thought_start",)``,
        ``("thought_end",)``, ``("response_start", final)``,
        ``("response_end", final)``, ``("action", id)``, ``("feed", id)``;
        adjacent text of one kind merged, empty text left out.
    actions
        Action id to its fields as an event's ``model_dump(mode="json")`` gives them.
    feeds
        Feed id to ``(type, source)``.
    warnings
        Per action id, how many warnings its repairs must raise.
    """

    tokens: list[tuple[Any, ...]] = field(default_factory=list)
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)
    feeds: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    warnings: dict[str, int] = field(default_factory=dict)


def add_token(tokens: list[tuple[Any, ...]], token: tuple[Any, ...]) -> None:
    """Append ``token``, merging it into the last one when both are text of one kind."""
    kind = token[0]
    if kind in ("text", "thought", "response"):
        if token[-1] == "":
            return
        if tokens and tokens[-1][:-1] == token[:-1]:
            tokens[-1] = (*token[:-1], tokens[-1][-1] + token[-1])
            return
    tokens.append(token)


def observed(events: Sequence[ParserEvent]) -> Answer:
    """What ``events`` report, in the shape of :class:`Answer`.

    Raises ``AssertionError`` when an element ends truncated or an event
    type appears that a clean document never produces.
    """
    answer = Answer()
    final = True
    for event in events:
        data = event.model_dump(mode="json")
        kind = data["type"]
        if kind == "text":
            add_token(answer.tokens, ("text", data["text"]))
        elif kind == "thought_delta":
            add_token(answer.tokens, ("thought", data["text"]))
        elif kind == "response_delta":
            add_token(answer.tokens, ("response", final, data["text"]))
        elif kind == "thought_start":
            add_token(answer.tokens, ("thought_start",))
        elif kind == "response_start":
            final = data["final"]
            add_token(answer.tokens, ("response_start", final))
        elif kind in ("thought_end", "response_end"):
            assert not data["truncated"], data
            add_token(answer.tokens, (kind, data["final"]) if "final" in data else (kind,))
        elif kind == "action_parsed":
            action = data["action"]
            assert action["id"] not in answer.actions, f"dispatched twice: {action['id']}"
            answer.actions[action["id"]] = action
            add_token(answer.tokens, ("action", action["id"]))
        elif kind == "context_feed":
            feed = data["feed"]
            answer.feeds[feed["id"]] = (feed["type"], feed["source"])
            add_token(answer.tokens, ("feed", feed["id"]))
        elif kind == "warning":
            key = data.get("id") or ""
            answer.warnings[key] = answer.warnings.get(key, 0) + 1
        else:
            assert kind == "action_open", data
    return answer


@dataclass
class _Draft:
    """One action being written: its tag attributes, its body, what must be read."""

    attrs: list[str]
    body: dict[str, Any]  # as written
    read: dict[str, Any]  # as the parser must read it
    warnings: int
    expected: dict[str, Any]

    def place(self, draw: st.DrawFn, name: str, value: Any, attribute: str) -> None:
        """Write a control field as the attribute ``attribute`` or as a body field."""
        if draw(st.booleans()):
            self.attrs.append(attribute)
        else:
            self.body[name] = self.read[name] = value


class _Writer:
    """Builds a document and its answer side by side."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.parts: list[str] = []
        self.answer = Answer()
        self.generated = 0  # ids handed out by the parser's IdAllocator
        self.ids: list[str] = []
        self.feeds = 0

    def text(self, kind: str, final: bool = True) -> None:
        text = self.draw(safe_text)
        self.parts.append(text)
        add_token(self.answer.tokens, (kind, final, text) if kind == "response" else (kind, text))

    def attribute(self, name: str, value: str) -> str:
        draw = self.draw
        written = draw(st.sampled_from([name, name.upper(), name.capitalize()]))
        quotes = ['"', "'"]
        if re.fullmatch(r"[^\s\"'\[\]<>/=]+", value):
            quotes.append("")
        quote = draw(st.sampled_from(quotes))
        space = draw(st.sampled_from(["", " "]))
        return f"{written}{space}={space}{quote}{value}{quote}"

    def depends_on(self, ids: list[str]) -> str:
        forms = [",".join(ids), " ".join(ids), ", ".join(ids)]
        form = self.draw(st.integers(0, 4))
        if form < 3:
            return self.attribute("depends_on", forms[form])
        if form == 3:
            listed = "[" + ",".join(f'"{i}"' for i in ids) + "]"
            return "depends_on=" + self.draw(st.sampled_from([f"'{listed}'", listed]))
        return f"depends_on=[{', '.join(ids)}]"

    def body(self, action_type: str) -> tuple[dict[str, Any], dict[str, Any], int]:
        """The body as written, as the parser must read it, and its warnings."""
        draw = self.draw
        extra = draw(st.dictionaries(_KEYS, _VALUES, max_size=3))
        if action_type == "tool":
            name = draw(st.sampled_from(["ls", "search", "read_csv"]))
            read = {"name": name, "parameters": extra}
            # Where real models put a tool's parameters (docs/protocol.md#actions).
            where = draw(st.sampled_from(["parameters", "arguments", "args", "input", "flat"]))
            if where == "parameters":
                return read, read, 0
            if where == "flat":
                written = {"name": name, **extra}
                return (written, read, 1) if extra else (written, dict(written), 0)
            if where == "arguments" and draw(st.booleans()):
                return {"name": name, where: json.dumps(extra)}, read, 1  # OpenAI's string
            return {"name": name, where: extra}, read, 1
        if action_type == "llm":
            body = {"prompt": draw(st.one_of(st.text(max_size=8), _STRING_HAZARDS)), **extra}
        else:
            body = {"name": draw(st.sampled_from(["helper", "cache", "plan"])), **extra}
        return body, body, 0

    def action(self, in_thought: bool) -> None:
        draw = self.draw
        index = len(self.ids) + 1
        action_type = draw(st.sampled_from(["tool", "llm", "agent", "relic", "workflow"]))
        body, read, warnings = self.body(action_type)
        draft = _Draft(
            attrs=[
                self.attribute("type", draw(st.sampled_from([action_type, action_type.upper()])))
            ],
            body=body,
            read=read,
            warnings=warnings,
            expected={
                "type": action_type,
                "mode": "sync",
                "depends_on": [],
                "output_key": None,
                "timeout": None,
                "retries": 0,
                "in_thought": in_thought,
            },
        )
        action_id = self.place_id(draft, index)
        self.place_mode(draft)
        self.place_depends_on(draft)
        if draw(st.booleans()):
            key = f"out_{index}"
            draft.expected["output_key"] = key
            draft.place(draw, "output_key", key, self.attribute("output_key", key))
        draw(st.randoms()).shuffle(draft.attrs)
        raw_body, repaired = self.render_json(draft.body)
        tag = draw(st.sampled_from(["action", "ACTION", "Action"]))
        close = draw(st.sampled_from(["</action>", "</ACTION>", "</action >"]))
        self.parts.append(f"<{tag} {' '.join(draft.attrs)}>{raw_body}{close}")
        draft.expected.update(id=action_id, body=draft.read, raw_body=raw_body)
        self.answer.actions[action_id] = draft.expected
        if draft.warnings + repaired:
            self.answer.warnings[action_id] = draft.warnings + repaired
        self.ids.append(action_id)
        add_token(self.answer.tokens, ("action", action_id))

    def place_id(self, draft: _Draft, index: int) -> str:
        """Write an id (attribute, body field) or none; return the action's id."""
        where = self.draw(st.sampled_from(["", "attr", "body"]))
        if where != "attr":
            self.generated += 1  # the parser generates one for action_open
        if not where:
            return f"a{self.generated}"
        action_id = self.draw(st.sampled_from(["x", "step_", "q", "r-"])) + str(index)
        if where == "attr":
            draft.attrs.append(self.attribute("id", action_id))
        else:
            draft.body["id"] = draft.read["id"] = action_id
            draft.warnings += 1  # the action_open announced a generated id
        return action_id

    def place_mode(self, draft: _Draft) -> None:
        draw = self.draw
        if draw(st.booleans()):
            mode = draw(st.sampled_from(sorted(_MODES)))
            draft.expected["mode"] = mode
            written = self.attribute("mode", draw(st.sampled_from(_MODES[mode])))
            draft.place(draw, "mode", mode, written)

    def place_depends_on(self, draft: _Draft) -> None:
        draw = self.draw
        if self.ids and draw(st.booleans()):
            deps = draw(st.lists(st.sampled_from(self.ids), min_size=1, max_size=3, unique=True))
            draft.expected["depends_on"] = deps
            draft.place(draw, "depends_on", deps, self.depends_on(deps))
        elif draw(st.integers(0, 3)) == 0:
            # "No dependency", the ways real models write it (docs/protocol.md#actions).
            nothing = draw(st.sampled_from(["none", "None", "null", "empty", "-", "[]", "", '""']))
            draft.warnings += nothing.lower() in ("none", "null", "empty")
            quoted = nothing if nothing == '""' else f'"{nothing}"'
            draft.place(draw, "depends_on", nothing, f"depends_on={quoted}")

    def render_json(self, body: dict[str, Any]) -> tuple[str, int]:
        """The body as JSON, perhaps with a repair that costs one warning."""
        draw = self.draw
        text = json.dumps(
            body,
            ensure_ascii=draw(st.booleans()),
            indent=draw(st.sampled_from([None, 2])),
        )
        text = draw(st.sampled_from(["", " ", "\n"])) + text + draw(st.sampled_from(["", "\n"]))
        repair = draw(st.integers(0, 5))
        if repair == 0:
            return f"```json\n{text.strip()}\n```", 1
        if repair == 1 and text.rstrip().endswith("}") and body:
            stripped = text.rstrip()
            return stripped[:-1] + ",}", 1
        return text, 0

    def feed(self) -> None:
        self.feeds += 1
        feed_id = f"feed{self.feeds}"
        feed_type = self.draw(st.sampled_from(["on_demand", "periodic", "internal"]))
        source = self.draw(st.dictionaries(_KEYS, _VALUES, max_size=2))
        self.parts.append(
            f'<context_feed id="{feed_id}" type="{feed_type}">{json.dumps(source)}</context_feed>'
        )
        self.answer.feeds[feed_id] = (feed_type, source)
        add_token(self.answer.tokens, ("feed", feed_id))

    def thought(self) -> None:
        draw = self.draw
        self.parts.append(draw(st.sampled_from(["<thought>", "<THOUGHT>", "<Thought >"])))
        add_token(self.answer.tokens, ("thought_start",))
        self.text("thought")
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.integers(0, 4)):
                self.action(in_thought=True)
            else:
                self.feed()
            self.text("thought")
        close = draw(st.sampled_from(["</thought>", "</THOUGHT>", "</thought >", "</response>"]))
        if close == "</response>":  # the other element's tag closes it, with a warning
            self.answer.warnings[""] = self.answer.warnings.get("", 0) + 1
        self.parts.append(close)
        add_token(self.answer.tokens, ("thought_end",))

    def response(self) -> None:
        draw = self.draw
        final = draw(st.booleans())
        written = ["true", "True", "yes"] if final else ["false", "False", "no", "0"]
        attr = self.attribute("final", draw(st.sampled_from(written)))
        if final and draw(st.booleans()):
            attr = ""  # no final attribute means true
        self.parts.append(f"<response {attr}>" if attr else "<response>")
        add_token(self.answer.tokens, ("response_start", final))
        self.text("response", final)
        close = draw(st.sampled_from(["</response>", "</RESPONSE>", "</thought>"]))
        if close == "</thought>":  # the other element's tag closes it, with a warning
            self.answer.warnings[""] = self.answer.warnings.get("", 0) + 1
        self.parts.append(close)
        add_token(self.answer.tokens, ("response_end", final))


@st.composite
def answered_documents(draw: st.DrawFn) -> tuple[str, Answer]:
    """A clean protocol document and the :class:`Answer` it must give."""
    writer = _Writer(draw)
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 4))
        if kind == 0:
            writer.text("text")
        elif kind == 1:
            writer.thought()
        elif kind == 2:
            writer.action(in_thought=False)
        elif kind == 3:
            writer.response()
        else:
            writer.feed()
    writer.text("text")
    text_kinds = ("text", "thought", "response")
    merged = [token[-1] for token in writer.answer.tokens if token[0] in text_kinds]
    assume(all(_KNOWN_TAG_RE.search(text) is None for text in merged))
    return "".join(writer.parts), writer.answer

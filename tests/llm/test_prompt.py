"""The protocol prompt: what it teaches must be what the parser accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortex_kernel.llm import DEMO_TRANSCRIPT
from cortex_kernel.llm.prompt import (
    EXAMPLES,
    PROMPT_VERSION,
    PROTOCOL_LESSON,
    ProtocolPrompt,
    signature,
)
from cortex_kernel.protocol.parser import Parser
from cortex_kernel.protocol.parser_events import ActionParsed
from cortex_kernel.runtime.ports import FeedSlot, PromptContext
from tests.llm.support import parse_chunks

BAD_EVENTS = {"action_error", "warning"}


def events_of(text: str) -> list[tuple[str, str]]:
    return [(kind, payload) for kind, payload, *_ in parse_chunks([text])]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_of_the_lesson_parses_cleanly(example: str) -> None:
    assert example in PROTOCOL_LESSON
    kinds = [kind for kind, _ in events_of(example)]
    assert not BAD_EVENTS & set(kinds), kinds
    assert parse_chunks(list(example)) == parse_chunks([example])


def test_the_examples_teach_each_action_shape() -> None:
    parser = Parser()
    events = parser.feed("".join(EXAMPLES)) + parser.close()
    actions = [e.action for e in events if isinstance(e, ActionParsed)]
    assert [(a.type.value, a.mode.value, a.id) for a in actions] == [
        ("tool", "sync", "a1"),
        ("llm", "sync", "a2"),
        ("internal", "sync", "a3"),
    ]
    assert actions[0].output_key == "r1" and "$r1" in PROTOCOL_LESSON
    assert actions[0].body == {"name": "TOOL", "parameters": {"ARG": "VALUE"}}


def test_the_lesson_has_no_story_to_copy() -> None:
    # Version 1's worked example (Paris, log_request, a "plan") was copied
    # verbatim into unrelated tasks by a 1.5B model.
    for copied in ("Paris", "log_request", "plan", "weather", "Suggest"):
        assert copied not in PROTOCOL_LESSON


def test_tools_are_listed_as_signatures_sorted_by_name() -> None:
    tools = [
        {"name": "zeta", "description": "Last.\nMore detail.", "parameters": {}},
        {
            "name": "alpha",
            "description": "First.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"enum": ["C", "F"], "default": "C"},
                    "values": {"type": "array", "items": {"type": "number"}},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                },
                "required": ["city", "values"],
            },
        },
    ]
    text = ProtocolPrompt().system_prompt(PromptContext(tools=tools))
    listing = text.split("# Available tools\n\n", 1)[1].split("\n\n", 1)[0]
    assert listing.splitlines() == [
        '- alpha(city: string, unit: "C" | "F" = "C", values: list[number], '
        "note: string | null = null): First.",
        "- zeta(): Last.",
    ]
    assert signature({"name": "n"}) == "n()"


@pytest.mark.parametrize("line", DEMO_TRANSCRIPT.read_text(encoding="utf-8").splitlines())
def test_the_demo_transcript_parses_cleanly(line: str) -> None:
    content = json.loads(line)["content"]
    kinds = [kind for kind, _ in events_of(content)]
    assert not BAD_EVENTS & set(kinds), kinds
    assert parse_chunks(list(content)) == parse_chunks([content])


def context(**fields: object) -> PromptContext:
    base: dict[str, object] = {
        "agent_name": "helper",
        "instructions": "Be brief.",
        "tools": [
            {
                "name": "search",
                "description": "Search the web.",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
        ],
        "internal_actions": ["set_variable", "add_context_feed"],
        "feeds": [
            FeedSlot(id="system_clock", text="2026-11-23 10:00 UTC"),
            FeedSlot(id="broken", text="", error="source failed"),
        ],
    }
    base.update(fields)
    return PromptContext.model_validate(base)


def test_the_prompt_has_every_section() -> None:
    text = ProtocolPrompt().system_prompt(context())
    assert f"cortex protocol v{PROMPT_VERSION}" in text
    assert "helper" in text and "Be brief." in text
    for element in ("<thought>", "<action", "<response", "output_key", "$r1", 'mode="async"'):
        assert element in text
    # The volatile part (feeds) comes last, after everything that is stable.
    assert text.index("# Context feeds") > text.index("# Available tools")
    assert "<action_result" in text
    assert PROTOCOL_LESSON in text
    assert "- search(q: string = null): Search the web." in text
    assert "Internal actions allowed: add_context_feed, set_variable." in text
    assert "## system_clock\n\n2026-11-23 10:00 UTC" in text
    assert "unavailable: source failed" in text


def test_the_prompt_without_tools_or_internal_actions_says_so() -> None:
    text = ProtocolPrompt().system_prompt(context(tools=[], internal_actions=[], feeds=[]))
    assert "None: do not write tool actions." in text
    assert "No internal actions are allowed" in text
    assert "Context feeds" not in text


def test_the_tools_protocol_prompt_skips_the_xml_lesson() -> None:
    text = ProtocolPrompt().system_prompt(context(protocol="tools"))
    assert "<thought>" not in text
    assert "`search`" in text
    assert "tool messages" in " ".join(text.split())


def test_the_prompt_never_carries_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-live-very-secret-value-123"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    leaky = context(
        instructions=f"key is {secret}", feeds=[FeedSlot(id="env", text=f"OPENAI_API_KEY={secret}")]
    )
    assert secret not in ProtocolPrompt().system_prompt(leaky)


def test_prompt_builder_protocol() -> None:
    from cortex_kernel.runtime.ports import PromptBuilder

    builder: PromptBuilder = ProtocolPrompt()
    assert builder.system_prompt(PromptContext()).startswith("You are cortex")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_system_prompt_is_byte_identical_across_turns_and_cells(
    anyio_backend: str, tmp_path: Path
) -> None:
    from cortex_kernel.agent import build_session
    from tests.runtime.fakes import ScriptedModel

    def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    call = (
        '<action type="tool" mode="sync" id="{id}">'
        '{{"name": "lookup", "parameters": {{"key": "k"}}}}</action>'
    )
    model = ScriptedModel(
        [
            call.format(id="a1"),
            "<response>one</response>",
            call.format(id="b1"),
            "<response>two</response>",
        ]
    )
    session = build_session(model=model, transcript_dir=tmp_path)
    session.tools.register(lookup)
    assert (await session.run("first cell")).status == "ok"
    assert (await session.run("second cell")).status == "ok"
    systems = {request.messages[0]["content"] for request in model.requests}
    assert len(model.requests) == 4 and len(systems) == 1
    # A new tool changes it (and only then).
    session.tools.register(lookup, name="lookup2")
    model.turns.append("<response>three</response>")
    await session.run("third cell")
    assert model.requests[-1].messages[0]["content"] not in systems

"""A byte-stable prompt prefix across cells, on the real litellm HTTP path.

llama.cpp (and a provider's prompt cache) reuses the longest prefix a request
shares with the last one. The context feeds change between cells (the
``notebook_variables`` feed whenever the user defines a variable), so they are
sent after the conversation: a changed feed must leave everything before it —
the system prompt and the conversation so far — byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.runtime.feeds import FeedRegistry, FeedSpec
from tests.llm.fake_openai import FakeOpenAI
from tests.llm.support import adder, make_model
from tests.prompt_parts import conversation, feeds_message

pytestmark = pytest.mark.anyio

#: What the ``weather`` feed reads: the test changes it between two cells.
WEATHER = {"now": "rain"}


def weather() -> str:
    """The ``weather`` feed's source (``tests.llm.test_prompt_prefix:weather``)."""
    return f"Oslo: {WEATHER['now']}"


def model_turns(folder: Path) -> list[dict[str, Any]]:
    """The ``model_turn`` records of the transcripts in ``folder``."""
    return [
        record
        for path in sorted(folder.glob("*.jsonl"))
        for record in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if record.get("type") == "model_turn"
    ]


def script(server: FakeOpenAI, protocol: str) -> None:
    """Cell 1: a call to ``add``, then the answer. Cell 2: an answer."""
    if protocol == "tools":
        server.tool_calls([("call_1", "add", '{"a": 2, "b": 3}')])
        server.stream("It is 5.")
    else:
        server.stream(
            '<action type="tool" mode="sync" id="a1">'
            '{"name": "add", "parameters": {"a": 2, "b": 3}}</action>'
        )
        server.stream('<response final="true">It is 5.</response>')
    server.stream('<response final="true">Snow now.</response>' if protocol == "xml" else "Snow.")


@pytest.mark.parametrize("protocol", ["xml", "tools"])
async def test_a_changed_feed_leaves_the_prompt_prefix_byte_identical(
    server: FakeOpenAI, tmp_path: Path, protocol: str
) -> None:
    WEATHER["now"] = "rain"
    script(server, protocol)
    feeds = FeedRegistry(
        [FeedSpec(id="weather", source={"callable": "tests.llm.test_prompt_prefix:weather"})]
    )
    session = build_session(
        make_model(server, timeout=30, first_token_timeout=30),
        tools=adder(),
        feeds=feeds,
        transcript_dir=tmp_path,
        protocol=protocol,
    )
    async with session:
        first = await session.run("Add 2 and 3.")
        assert first.status == "ok", first.message
        WEATHER["now"] = "snow"  # the user changed something between the cells
        second = await session.run("And the weather?")
        assert second.status == "ok", second.message
    sent = [request.body["messages"] for request in server.requests]
    assert len(sent) == 3  # cell 1: the call, the answer; cell 2: the answer

    # Cell 2's request starts with cell 1's last request, its feeds message
    # left out: the system prompt and the conversation are a byte-identical prefix.
    stable = sent[1][:-1]
    assert sent[2][: len(stable)] == stable
    assert json.dumps(sent[2][: len(stable)]) == json.dumps(stable)
    assert sent[0][0] == sent[1][0] == sent[2][0]
    assert sent[2][0]["role"] == "system" and "<feed" not in sent[2][0]["content"]

    # Every request ends with the feeds message, current as of its turn.
    assert [('<feed id="weather">' in feeds_message(m)) for m in sent] == [True] * 3
    assert "Oslo: rain" in feeds_message(sent[1]) and "Oslo: snow" in feeds_message(sent[2])
    assert conversation(sent[0])[-1] == {"role": "user", "content": "Add 2 and 3."}

    # Only the latest turn carries the feeds: cell 1's are not in the history.
    assert "Oslo: rain" not in json.dumps(sent[2])
    assert sum("<feed" in str(m.get("content")) for m in sent[2]) == 1

    # The transcript records what each turn answered, never the feeds message.
    openings = [record["opening"] for record in model_turns(tmp_path)]
    assert len(openings) == 3
    assert "<feed" not in json.dumps(openings)

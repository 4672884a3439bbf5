"""Each turn says how long a prompt the model reads before its first token.

The views show "waiting for the model's first token — N prompt tokens"
(docs/view.md); N comes from ``turn_started.prompt_tokens``, counted by the
model adapter before the request goes out through litellm's HTTP path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.runtime.run_events import AnyEvent, TurnStarted
from tests.llm.fake_openai import FakeOpenAI
from tests.llm.support import make_model

pytestmark = pytest.mark.anyio


async def test_every_turn_started_carries_the_prompt_size(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.stream("<response>Hello.</response>")
    model = make_model(server)
    session = build_session(model, transcript_dir=tmp_path)
    events: list[AnyEvent] = []
    result = await session.run("say hello", on_event=events.append)

    assert result.status == "ok", result.message
    [started] = [e for e in events if isinstance(e, TurnStarted)]
    expected = model.count_tokens(messages=server.requests[0].body["messages"])
    assert started.prompt_tokens == expected
    assert expected > 100  # the system prompt alone is this long

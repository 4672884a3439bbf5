"""A manifest's ``llm_models`` with their own options, through litellm's HTTP path.

An ``llm`` action that names a listed model goes to that entry's endpoint
with that entry's options, not the agent model's (which may be another
provider's endpoint and key).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ConfigError
from tests.llm.fake_openai import FakeOpenAI

pytestmark = pytest.mark.anyio


def llm(action_id: str, model: str) -> str:
    body = json.dumps({"prompt": "Rate the plan.", "model": model})
    return f'<action type="llm" mode="sync" id="{action_id}">{body}</action>'


async def test_a_listed_model_gets_its_own_endpoint_and_options(tmp_path: Path) -> None:
    with FakeOpenAI() as agent_server, FakeOpenAI() as critic_server:
        agent_server.stream(llm("r", "openai/critic"))
        agent_server.stream("<response>the critic says: $r</response>")
        critic_server.stream("four stars")
        manifest = tmp_path / "agent.yaml"
        manifest.write_text(
            f"model: {{name: openai/local, api_base: '{agent_server.api_base}', "
            "temperature: 0.7}\n"
            "llm_models:\n"
            f"  - {{name: openai/critic, api_base: '{critic_server.api_base}', "
            "temperature: 0, max_tokens: 40}\n"
            "  - openai/gpt-4o-mini\n",
            encoding="utf-8",
        )
        session = build_session(manifest=manifest, transcript_dir=tmp_path)
        result = await session.run("Plan the week.")
        await session.aclose()
    assert result.status == "ok", result.message
    assert result.answer == "the critic says: four stars"
    assert session.config.llm_models == {"openai/critic", "openai/gpt-4o-mini"}
    (sent,) = (request.body for request in critic_server.requests)
    assert sent["model"] == "critic" and sent["messages"][-1]["content"] == "Rate the plan."
    assert sent["temperature"] == 0 and sent["max_tokens"] == 40
    assert [request.body["temperature"] for request in agent_server.requests] == [0.7, 0.7]


def test_a_model_listed_twice_is_a_clear_error(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(
        "llm_models: [openai/critic, {name: openai/critic, temperature: 0}]\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"agent.yaml.*'openai/critic' is listed twice"):
        build_session(manifest=manifest, transcript_dir=tmp_path)

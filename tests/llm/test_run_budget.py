"""A run's limits count everything it starts, through litellm's HTTP path.

The tokens of ``llm`` actions count against the run's ``max_tokens``, and a
sub-agent's actions against its caller's ``max_actions``: the run ends with
status ``limit`` instead of spending past them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortex_kernel.agent import build_session
from tests.llm.fake_openai import FakeOpenAI

pytestmark = pytest.mark.anyio


def llm(action_id: str) -> str:
    body = json.dumps({"prompt": "Critique the plan at length.", "model": "openai/critic"})
    return f'<action type="llm" mode="async" id="{action_id}">{body}</action>'


async def test_llm_actions_spend_the_runs_max_tokens(tmp_path: Path) -> None:
    with FakeOpenAI() as agent_server, FakeOpenAI() as critic_server:
        # One turn starts 30 llm actions; each answer reports 3,000 tokens.
        agent_server.stream("".join(llm(f"c{i}") for i in range(30)))
        agent_server.stream("<response>all critiques in</response>")  # never reached
        for _ in range(30):
            critic_server.stream("a long critique", usage=(1000, 2000))
        manifest = tmp_path / "agent.yaml"
        manifest.write_text(
            f"model: {{name: openai/local, api_base: '{agent_server.api_base}'}}\n"
            f"llm_models: [{{name: openai/critic, api_base: '{critic_server.api_base}'}}]\n"
            "limits: {max_tokens: 4000}\n",
            encoding="utf-8",
        )
        session = build_session(manifest=manifest, transcript_dir=tmp_path)
        result = await session.run("Critique the plan thirty times.")
        await session.aclose()
    assert result.status == "limit", result.message
    assert "token limit reached" in result.message and "max_tokens=4000" in result.message
    # Held before they started: no more calls than the budget had room for,
    # each asked for no more than was left of it.
    asked = [request.body.get("max_tokens") for request in critic_server.requests]
    assert 1 <= len(asked) <= 2, asked
    assert all(isinstance(cap, int) and cap < 4000 for cap in asked), asked
    assert result.usage.tokens <= 4000 + 3000 + 18  # at most one answer past the limit
    assert len(agent_server.requests) == 1  # the run ended instead of taking another turn
    failed = [str(getattr(e, "error", "")) for e in result.events if e.type == "action_failed"]
    assert failed and all("token limit" in error for error in failed)


def sub_agents_manifest(tmp_path: Path, lead: FakeOpenAI, critic: FakeOpenAI) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(
        f"""default: lead
agents:
  - name: lead
    model: {{name: openai/lead, api_base: '{lead.api_base}'}}
    sub_agents: [{{name: critic, description: checks a claim}}]
    limits: {{max_actions: 3}}
  - name: critic
    model: {{name: openai/critic, api_base: '{critic.api_base}'}}
""",
        encoding="utf-8",
    )
    return path


def set_variable(index: int) -> str:
    body = {"name": "set_variable", "parameters": {"name": f"v{index}", "value": index}}
    return f'<action type="internal" mode="async" id="s{index}">{json.dumps(body)}</action>'


async def test_a_sub_agent_spends_its_callers_max_actions(tmp_path: Path) -> None:
    ask = '<action type="agent" mode="sync" id="c">{"name": "critic", "message": "check"}</action>'
    with FakeOpenAI() as lead, FakeOpenAI() as critic:
        lead.stream(ask)
        lead.stream("<response>The critic: $c</response>")  # never reached
        critic.stream("".join(set_variable(i) for i in range(20)) + "<response>ok</response>")
        session = build_session(
            manifest=sub_agents_manifest(tmp_path, lead, critic), transcript_dir=tmp_path
        )
        result = await session.run("check it")
        await session.aclose()
    assert result.status == "limit", result.message
    assert "action limit reached: 3 actions in this run" in result.message
    assert "sub-agents' included" in result.message
    succeeded = [e for e in result.events if e.type == "action_succeeded"]
    assert len(succeeded) <= 3
    queued = [e for e in result.events if e.type == "action_queued"]
    assert len(queued) == 3  # the agent action and two of the sub-agent's
    nested_end = [e for e in result.events if e.type == "run_finished" and e.parent == "c"]
    assert [e.status for e in nested_end] == ["limit"]  # type: ignore[union-attr]
    assert len(lead.requests) == 1  # the lead stopped at its limit, no second turn


async def test_a_workflows_steps_count_as_actions(tmp_path: Path) -> None:
    run_sum = (
        '<action type="workflow" mode="sync" id="w">{"name": "sum3", "parameters": {}}</action>'
    )
    with FakeOpenAI() as server:
        server.stream(run_sum)
        server.stream("<response>total: $w</response>")  # never reached
        manifest = tmp_path / "agent.yaml"
        manifest.write_text(
            f"model: {{name: openai/local, api_base: '{server.api_base}'}}\n"
            "tools: [{name: add, callable: 'tests.runtime.workflow_tools:add'}]\n"
            "limits: {max_actions: 2}\n"
            "workflows:\n"
            "  - name: sum3\n"
            "    steps:\n"
            "      - {id: first, type: tool, body: {name: add, parameters: {a: 1, b: 2}}}\n"
            "      - {id: total, type: tool, body: {name: add, parameters: {a: $first, b: 3}}}\n",
            encoding="utf-8",
        )
        session = build_session(manifest=manifest, transcript_dir=tmp_path)
        result = await session.run("add them")
        await session.aclose()
    assert result.status == "limit", result.message
    assert "action limit reached: 2 actions in this run" in result.message
    started = [e for e in result.events if e.type == "action_started"]
    assert [getattr(e, "parent", None) for e in started] == [None]  # the workflow's own
    assert len(server.requests) == 1

"""``agent`` actions end to end through replay models: a nested run drawn as a subtree,
a failing sub-agent, the depth limit, and an interrupt while the sub-agent runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.jupyter.viewstate import RunState
from cortex_kernel.llm.replay import ReplayModel
from cortex_kernel.runtime.run_events import parse_event
from tests.replays import write_turns

pytestmark = pytest.mark.anyio


def parent(event: Any) -> str | None:
    # Hot-path parser events are built without their defaults: read it softly.
    return getattr(event, "parent", None)


def manifest(
    tmp_path: Path, critic_model: str, *, max_depth: int = 3, recurse: bool = False
) -> Path:
    critic_subs = "\n    sub_agents: [{name: critic}]" if recurse else ""
    path = tmp_path / "agents.yaml"
    path.write_text(
        f"""default: lead
agents:
  - name: lead
    instructions: Delegate checking to the critic.
    sub_agents: [{{name: critic, description: checks a claim}}]
    limits: {{max_depth: {max_depth}}}
  - name: critic
    model: '{critic_model}'
    instructions: You check claims.{critic_subs}
""",
        encoding="utf-8",
    )
    return path


ASK = '<action type="agent" mode="sync" id="c">{"name": "critic", "message": "is 2+2=4?"}</action>'
CRITIC_OK = (
    '<action type="internal" mode="sync" id="s">'
    '{"name": "set_variable", "parameters": {"name": "verdict", "value": "yes"}}</action>',
    "<response>Yes: 2+2=4 ($verdict)</response>",
)


async def test_a_sub_agent_runs_nested_and_answers(tmp_path: Path) -> None:
    critic = write_turns(tmp_path / "critic.jsonl", *CRITIC_OK)
    lead = ReplayModel(
        write_turns(tmp_path / "lead.jsonl", ASK, "<response>The critic: $c</response>")
    )
    s = build_session(
        lead, manifest=manifest(tmp_path, f"replay:{critic}"), transcript_dir=tmp_path
    )
    result = await s.run("check 2+2")
    assert result.status == "ok", result.message
    assert result.answer == "The critic: Yes: 2+2=4 (yes)"
    # The lead's prompt lists the critic; the critic's own prompt is its own.
    nested = [e for e in result.events if parent(e) is not None]
    kinds = [e.type for e in nested]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert all(parent(e) == "c" for e in nested)
    assert {"turn_started", "action_queued", "action_succeeded"} <= set(kinds)
    queued = [e for e in nested if e.type == "action_queued"]
    assert [e.id for e in queued] == ["c/s"]  # type: ignore[union-attr]
    # The transcript holds the whole tree and reads back.
    assert result.transcript is not None
    lines = result.transcript.read_text(encoding="utf-8").splitlines()
    events = [parse_event(line) for line in lines if '"model_turn"' not in line]
    assert sum(1 for e in events if e.type == "run_started") == 2
    assert any(e.type == "action_succeeded" and e.id == "c/s" for e in events)  # type: ignore[union-attr]
    # The view draws the nested run as a subtree of the action.
    state = RunState()
    for event in events:
        state.apply(event)
    nodes = state.doc["nodes"]
    assert nodes["c"].get("subrun") and nodes["c/s"]["parent"] == "c"
    # Replaying the lead's transcript gives the same answer (the critic replays its own).
    again = build_session(
        f"replay:{result.transcript}",
        manifest=manifest(tmp_path, f"replay:{critic}"),
        transcript_dir=tmp_path / "again",
    )
    assert (await again.run("check 2+2")).answer == result.answer
    await s.aclose()
    await again.aclose()


async def test_a_sub_agent_beside_the_lead_leaves_the_lead_its_own_run(tmp_path: Path) -> None:
    # An async sub-agent runs while the lead goes on writing: its events are
    # nested (marked with their parent), its run_finished is not the lead's,
    # and the view keeps the lead's thought that streamed meanwhile.
    critic = write_turns(tmp_path / "critic.jsonl", *CRITIC_OK)
    ask = ASK.replace('mode="sync"', 'mode="async"')
    lead = ReplayModel(
        write_turns(
            tmp_path / "lead.jsonl",
            f"<thought>asking {ask} and meanwhile I think on</thought>",
            "<response>The critic: $c</response>",
        )
    )
    s = build_session(
        lead, manifest=manifest(tmp_path, f"replay:{critic}"), transcript_dir=tmp_path
    )
    async with s:
        result = await s.run("check 2+2")
    assert result.status == "ok", result.message
    finished = [(parent(e), e.status) for e in result.events if e.type == "run_finished"]  # type: ignore[union-attr]
    assert finished == [("c", "ok"), (None, "ok")]
    assert result.events[-1].type == "run_finished" and parent(result.events[-1]) is None
    started = [i for i, e in enumerate(result.events) if e.type == "run_started"]
    nested_start, nested_end = (
        started[1],
        next(i for i, e in enumerate(result.events) if e.type == "run_finished"),
    )
    inside = result.events[nested_start : nested_end + 1]
    assert all(parent(e) == "c" for e in inside if e.type in ("run_started", "turn_started"))
    state = RunState()
    for event in result.events:
        state.apply(event)
        if event.type == "run_finished" and parent(event) == "c":
            assert not state.finished  # the sub-agent ended, not the lead
    assert state.doc["thoughts"][0]["text"] == "asking  and meanwhile I think on"
    assert state.doc["status"] == "ok"
    assert state.doc["nodes"]["c"].get("subrun")


async def test_a_failing_sub_agent_fails_the_action(tmp_path: Path) -> None:
    critic = write_turns(
        tmp_path / "critic.jsonl", CRITIC_OK[0]
    )  # runs out of turns: a model error
    lead = ReplayModel(write_turns(tmp_path / "lead.jsonl", ASK, "<response>no luck</response>"))
    s = build_session(
        lead, manifest=manifest(tmp_path, f"replay:{critic}"), transcript_dir=tmp_path
    )
    result = await s.run("check")
    assert result.status == "ok"
    failed = [e for e in result.events if e.type == "action_failed" and parent(e) is None]
    assert failed and failed[0].id == "c"  # type: ignore[union-attr]
    assert "sub-agent 'critic' ended with status error" in failed[0].error  # type: ignore[union-attr]
    nested_end = [e for e in result.events if e.type == "run_finished" and parent(e) == "c"]
    assert nested_end[0].status == "error"  # type: ignore[union-attr]
    await s.aclose()


async def test_depth_limit_and_unknown_agent(tmp_path: Path) -> None:
    critic = write_turns(tmp_path / "critic.jsonl", ASK, "<response>done</response>")
    lead = ReplayModel(
        write_turns(
            tmp_path / "lead.jsonl",
            ASK.replace('"critic"', '"nobody"').replace('id="c"', 'id="n"') + "",
            ASK,
            "<response>$c</response>",
        )
    )
    path = manifest(tmp_path, f"replay:{critic}", max_depth=1, recurse=True)
    s = build_session(lead, manifest=path, transcript_dir=tmp_path)
    result = await s.run("check")
    errors = [e.message for e in result.events if e.type == "action_error"]  # type: ignore[union-attr]
    assert any("unknown agent 'nobody'; this agent may call: critic" in m for m in errors)
    # The critic (depth 1) may not start another critic (depth 2 > max_depth 1).
    assert any(
        "nesting depth limit 1 reached" in m and parent(e) == "c"
        for e in result.events
        if e.type == "action_error"
        for m in [e.message]  # type: ignore[union-attr]
    )
    assert result.answer == "done"
    await s.aclose()


async def test_interrupt_during_a_sub_agent_cancels_it(tmp_path: Path) -> None:
    slow = write_turns(tmp_path / "critic.jsonl", "thinking " * 400 + "<response>late</response>")
    lead = ReplayModel(write_turns(tmp_path / "lead.jsonl", ASK, "<response>$c</response>"))
    path = manifest(tmp_path, f"replay:{slow}?tps=50")
    s = build_session(lead, manifest=path, transcript_dir=tmp_path)
    seen: list[Any] = []

    async with anyio.create_task_group() as tg:

        def on_event(event: Any) -> None:
            seen.append(event)
            if event.type == "turn_started" and parent(event) == "c":
                tg.cancel_scope.cancel()  # the user interrupts while the critic streams

        tg.start_soon(lambda: s.run("check", on_event=on_event))
    finished = [(parent(e), e.status) for e in seen if e.type == "run_finished"]
    assert finished == [("c", "cancelled"), (None, "cancelled")]
    assert [e.id for e in seen if e.type == "action_cancelled"] == ["c"]  # type: ignore[union-attr]
    await s.aclose()

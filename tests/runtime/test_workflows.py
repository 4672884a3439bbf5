"""``workflow`` actions end to end through a replay model: a parameterised DAG from the
manifest run as a subtree, its named outputs, a failing step, recursion, bad parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ConfigError
from cortex_kernel.jupyter.viewstate import RunState
from cortex_kernel.manifest import load_manifest

pytestmark = pytest.mark.anyio

MANIFEST = """\
name: lead
tools:
  - {name: add, callable: "tests.runtime.workflow_tools:add"}
  - {name: explode, callable: "tests.runtime.workflow_tools:explode"}
workflows:
  - name: sum3
    description: x + y, then + 10
    parameters: {x: null, y: 2}
    outputs: [total]
    steps:
      - {id: first, type: tool, body: {name: add, parameters: {a: $x, b: $y}}}
      - {id: total, type: tool, body: {name: add, parameters: {a: $first, b: 10}}}
  - name: broken
    steps:
      - {id: ok, type: tool, body: {name: add, parameters: {a: 1, b: 1}}}
      - {id: bad, type: tool, body: {name: explode, parameters: {}}, depends_on: [ok]}
      - {id: after, type: tool, body: {name: add, parameters: {a: $bad, b: 1}}}
  - name: loop
    steps:
      - {id: again, type: workflow, body: {name: loop}}
"""


def workflow(action_id: str, name: str, **parameters: Any) -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    return f'<action type="workflow" mode="async" id="{action_id}">{body}</action>'


def parent(event: Any) -> str | None:
    return getattr(event, "parent", None)


async def test_workflows_run_as_subtrees(tmp_path: Path) -> None:
    turns = tmp_path / "lead.jsonl"
    first = (
        workflow("w", "sum3", x=1)
        + workflow("b", "broken")
        + workflow("l", "loop")
        + workflow("m", "sum3")
        + workflow("u", "sum3", x=1, z=3)
    )
    turns.write_text(
        json.dumps({"content": first})
        + "\n"
        + json.dumps({"content": "<response>$w</response>"})
        + "\n",
        encoding="utf-8",
    )
    path = tmp_path / "agent.yaml"
    path.write_text(MANIFEST + f"model: 'replay:{turns}'\n", encoding="utf-8")
    s = build_session(manifest=path, transcript_dir=tmp_path)
    result = await s.run("go")
    assert s.variables["w"] == {"total": 13}
    failed = {
        e.id: e.error for e in result.events if e.type == "action_failed" and parent(e) is None
    }  # type: ignore[union-attr]
    assert failed["b"].startswith("workflow 'broken' failed at step 'bad': RuntimeError: disk full")
    assert "workflow 'loop' calls itself (loop -> loop)" in failed["l"]
    assert "workflow 'sum3' needs the parameter(s) x" in failed["m"]
    errors = [e.message for e in result.events if e.type == "action_error"]  # type: ignore[union-attr]
    assert any("workflow 'sum3' has no parameter z" in m for m in errors)
    # The steps ran through the scheduler, recorded under their workflow action.
    steps = [(e.id, parent(e)) for e in result.events if e.type == "action_succeeded" and parent(e)]  # type: ignore[union-attr]
    assert ("w/first", "w") in steps and ("w/total", "w") in steps and ("b/ok", "b") in steps
    skipped = [e.id for e in result.events if e.type == "action_skipped"]  # type: ignore[union-attr]
    assert "b/after" in skipped
    state = RunState()
    for event in result.events:
        state.apply(event)
    assert state.doc["nodes"]["w/total"]["parent"] == "w"
    await s.aclose()


def test_a_step_naming_an_unknown_step_is_a_manifest_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "workflows:\n  - name: w\n    outputs: [nope]\n    steps:\n"
        "      - {id: a, type: tool, body: {name: add}, depends_on: [ghost]}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="ghost") as info:
        load_manifest(path)
    assert "nope" in str(info.value)

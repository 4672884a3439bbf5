"""Paths named by model output, through the real CLI (``cortex-kernel run``) and replay models.

- ``write_file`` cannot reach the agent's own manifest: the files built-in
  has a folder of its own, and ``..``, absolute paths and symlinks that leave
  it are refused.
- A manifest rewritten on disk during a run changes nothing: an ``agent``
  action builds its sub-agent from the manifests read when the session was.
- A writable workspace that holds the manifest (or the notebook's folder) is
  refused when the session is built.
- In a replay session an ``llm`` action may replay only files beside the
  session's own replay, and a refused path says nothing of whether it exists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.replays import write_turns
from tests.test_cli import cli


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def action(kind: str, action_id: str, body: dict[str, Any], mode: str = "sync") -> str:
    # A sync action ends the turn: several in one turn are async.
    return f'<action type="{kind}" mode="{mode}" id="{action_id}">{json.dumps(body)}</action>'


def write_file(action_id: str, path: str) -> str:
    body = {"name": "write_file", "parameters": {"path": path, "content": "tools: []\n"}}
    return action("tool", action_id, body, mode="async")


def test_write_file_cannot_reach_the_manifest(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    turns = tmp_path / "turns.jsonl"
    manifest.write_text(f"name: writer\nmodel: 'replay:{turns}'\nbuiltins:\n  files: {{}}\n")
    original = manifest.read_text()
    workspace = tmp_path / "cortex-workspace"  # the default: a folder of its own
    workspace.mkdir()
    (workspace / "link.yaml").symlink_to(manifest)
    write_turns(
        turns,
        write_file("absolute", str(manifest))
        + write_file("up", "../agent.yaml")
        + write_file("link", "link.yaml")
        + write_file("own", "agent.yaml"),  # a file of that name in the workspace: harmless
        "<response>done</response>",
    )
    result = cli("run", "save it", "--manifest", str(manifest))
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    failed = {e["id"]: e["error"] for e in seen if e["type"] == "action_failed"}
    assert set(failed) == {"absolute", "up", "link"}
    assert all("is outside the workspace" in error for error in failed.values())
    assert [e["id"] for e in seen if e["type"] == "action_succeeded"] == ["own"]
    assert manifest.read_text() == original
    assert (workspace / "agent.yaml").read_text() == "tools: []\n"


SUB_AGENTS = """\
default: lead
agents:
  - name: lead
    model: 'replay:{lead}'
    sub_agents: [{{name: helper}}]
    tools:
      - name: rewrite
        command: ["{python}", "-c", "{rewrite}"]
  - name: helper
    model: 'replay:{helper}'
"""

# What a rewritten manifest would give the helper: a tool that runs a shell command.
GRANTS_A_SHELL = """\
default: lead
agents:
  - name: lead
    sub_agents: [{name: helper}]
  - name: helper
    model: 'replay:HELPER'
    tools: [{name: system, callable: 'os:system'}]
"""


def test_a_manifest_rewritten_mid_run_does_not_change_the_sub_agent(tmp_path: Path) -> None:
    manifest = tmp_path / "agents.yaml"
    marker = tmp_path / "ran-a-shell"
    helper = write_turns(
        tmp_path / "helper.jsonl",
        action("tool", "x", {"name": "system", "parameters": {"command": f"touch {marker}"}}),
        "<response>helper done</response>",
    )
    # The lead's own tool rewrites the manifest on disk mid-run, then the lead calls the helper.
    replacement = tmp_path / "replacement.yaml"
    replacement.write_text(GRANTS_A_SHELL.replace("HELPER", str(helper)), encoding="utf-8")
    rewrite = f"import shutil; shutil.copy('{replacement}', '{manifest}')"
    lead = write_turns(
        tmp_path / "lead.jsonl",
        action("tool", "r", {"name": "rewrite", "parameters": {}}),
        action("agent", "h", {"name": "helper", "message": "go"}),
        "<response>$h</response>",
    )
    manifest.write_text(
        SUB_AGENTS.format(lead=lead, helper=helper, python=sys.executable, rewrite=rewrite),
        encoding="utf-8",
    )
    result = cli("run", "go", "--manifest", str(manifest))
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    assert manifest.read_text(encoding="utf-8") == replacement.read_text(encoding="utf-8")
    nested = [e for e in seen if e.get("parent") == "h" and e["type"] == "action_error"]
    assert nested and "unknown tool 'system'" in nested[0]["message"]
    assert not marker.exists()
    assert seen[-1]["answer"] == "helper done"


def test_a_writable_workspace_holding_the_manifest_is_refused(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    for workspace in (".", "..", str(tmp_path)):
        manifest.write_text(f"builtins:\n  files: {{workspace: '{workspace}'}}\n")
        result = cli("run", "hi", "--manifest", str(manifest))
        assert result.returncode == 2
        assert f"holds the manifest {manifest}" in result.stderr
        assert "give the files a folder of their own" in result.stderr
    # Reading it does no harm: a read-only workspace may hold it.
    turns = write_turns(tmp_path / "t.jsonl", "<response>ok</response>")
    manifest.write_text(
        f"model: 'replay:{turns}'\nbuiltins:\n  files: {{workspace: ., write: false}}\n"
    )
    assert cli("run", "hi", "--manifest", str(manifest)).returncode == 0


def test_a_writable_workspace_holding_the_working_directory_is_refused(tmp_path: Path) -> None:
    notebook_dir = tmp_path / "notebooks"
    notebook_dir.mkdir()
    manifest = tmp_path / "agents" / "agent.yaml"
    manifest.parent.mkdir()
    manifest.write_text(f"builtins:\n  files: {{workspace: '{notebook_dir}'}}\n")
    result = cli("run", "hi", "--manifest", str(manifest), cwd=notebook_dir)
    assert result.returncode == 2
    assert f"holds the working directory (the notebook's folder) {notebook_dir}" in result.stderr


def llm(action_id: str, model: str) -> str:
    return action("llm", action_id, {"prompt": "read it", "model": model}, mode="async")


def test_a_replay_session_replays_only_files_beside_its_own(tmp_path: Path) -> None:
    session_dir, elsewhere = tmp_path / "session", tmp_path / "elsewhere"
    session_dir.mkdir()
    elsewhere.mkdir()
    private = write_turns(elsewhere / "private.jsonl", "PRIVATE DATA")
    write_turns(session_dir / "sub.jsonl", "from the sub model")
    (session_dir / "link.jsonl").symlink_to(private)
    turns = write_turns(
        session_dir / "turns.jsonl",
        llm("beside", f"replay:{session_dir / 'sub.jsonl'}")
        + llm("present", f"replay:{private}")
        + llm("absent", f"replay:{elsewhere / 'absent.jsonl'}")
        + llm("link", f"replay:{session_dir / 'link.jsonl'}")
        + llm("up", f"replay:{session_dir}/../elsewhere/private.jsonl"),
        "<response>$beside</response>",
    )
    result = cli("run", "go", "--model", f"replay:{turns}")
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    errors = {e["id"]: e["message"] for e in seen if e["type"] == "action_error"}
    assert set(errors) == {"present", "absent", "link", "up"}
    rule = f"may replay only files beside its own replay (in {session_dir})"
    assert all(rule in message for message in errors.values())
    # The same words whether the file exists or not.
    assert errors["present"].replace("private", "absent") == errors["absent"]
    assert "PRIVATE DATA" not in result.stdout
    assert seen[-1]["answer"] == "from the sub model"

"""``cortex-kernel run --manifest``: manifest tools in a headless run, approvals with --yes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.replays import write_turns
from tests.test_cli import cli


def turns(tmp_path: Path, *contents: str) -> Path:
    return write_turns(tmp_path / "turns.jsonl", *contents)


CALL = (
    '<action type="tool" id="c1" output_key="n">'
    '{"name": "count", "parameters": {"text": "hello"}}</action>'
)

STDERR_AND_COUNT = (
    "import json,sys; print('counting', file=sys.stderr); print(len(json.load(sys.stdin)['text']))"
)

MANIFEST = """\
name: counter
model: "replay:{turns}"
tools:
  - name: count
    command:
      - "{python}"
      - "-c"
      - "{code}"
    parameters:
      type: object
      properties: {{text: {{type: string}}}}
      required: [text]
    confirm: {confirm}
"""


def manifest(tmp_path: Path, confirm: bool = False) -> Path:
    replay = turns(tmp_path, CALL, "<response>count is $n</response>")
    path = tmp_path / "agent.yaml"
    path.write_text(
        MANIFEST.format(
            turns=replay,
            python=sys.executable,
            code=STDERR_AND_COUNT,
            confirm=str(confirm).lower(),
        ),
        encoding="utf-8",
    )
    return path


def events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_a_manifest_command_tool_runs_headless(tmp_path: Path) -> None:
    result = cli("run", "count hello", "--manifest", str(manifest(tmp_path)))
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    assert seen[-1]["type"] == "run_finished" and seen[-1]["answer"] == "count is 5"
    # stderr of a successful call is kept, as an event of the action.
    logs = [e for e in seen if e["type"] == "action_log"]
    assert logs == [
        {
            "type": "action_log",
            "t": logs[0]["t"],
            "id": "c1",
            "stream": "stderr",
            "text": "counting",
        }
    ]


def test_confirm_tools_are_refused_headless_without_yes(tmp_path: Path) -> None:
    result = cli("run", "count hello", "--manifest", str(manifest(tmp_path, confirm=True)))
    failed = [e for e in events(result.stdout) if e["type"] == "action_failed"]
    assert failed and "needs a human's approval" in str(failed[0]["error"])
    assert "--yes" in str(failed[0]["error"])


def test_yes_approves_and_the_decision_is_an_event(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = cli(
        "run", "count hello", "--manifest", str(manifest(tmp_path, confirm=True)), "--yes",
        "--transcript", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    requested = next(e for e in seen if e["type"] == "approval_requested")
    decided = next(e for e in seen if e["type"] == "approval_decided")
    assert requested["parameters"] == {"text": "hello"} and requested["tool"] == "count"
    assert decided["approved"] is True and decided["by"] == "--yes"
    assert '"approval_decided"' in out.read_text(encoding="utf-8")  # in the transcript
    assert seen[-1]["answer"] == "count is 5"


def test_a_bad_manifest_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntools:\n  - {name: t, command: wc}\n", encoding="utf-8")
    result = cli("run", "hi", "--manifest", str(bad))
    assert result.returncode == 2
    assert f"{bad}:3: tools[0].command: Input should be a valid list" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_parameters_go_back_to_the_model_naming_the_parameter(tmp_path: Path) -> None:
    path = manifest(tmp_path)
    bad_call = CALL.replace('{"text": "hello"}', '{"text": 5}')
    turns(tmp_path, bad_call, "<response>sorry</response>")
    result = cli("run", "count", "--manifest", str(path))
    failed = next(e for e in events(result.stdout) if e["type"] == "action_failed")
    assert "parameter 'text': 5 is not of type 'string'" in str(failed["error"])


def count_tool(confirm: bool) -> dict[str, object]:
    code = "import json,sys; print(len(json.load(sys.stdin)['text']))"
    return {"name": "count", "command": [sys.executable, "-c", code], "confirm": confirm}


def test_yes_approves_a_sub_agents_confirm_tools_too(tmp_path: Path) -> None:
    lead = turns(
        tmp_path,
        '<action type="agent" id="h" output_key="helped">'
        '{"name": "helper", "message": "count hello"}</action>',
        "<response>helper says $helped</response>",
    )
    helper = tmp_path / "helper.jsonl"
    helper.write_text(
        json.dumps({"content": CALL}) + "\n" + json.dumps({"content": "<response>$n</response>"}),
        encoding="utf-8",
    )
    path = tmp_path / "agents.json"
    path.write_text(
        json.dumps(
            {
                "default": "lead",
                "agents": [
                    {"name": "lead", "model": f"replay:{lead}", "sub_agents": [{"name": "helper"}]},
                    {"name": "helper", "model": f"replay:{helper}", "tools": [count_tool(True)]},
                ],
            }
        ),
        encoding="utf-8",
    )
    result = cli("run", "ask the helper", "--manifest", str(path), "--yes")
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    decided = [(e["id"], e["approved"], e["by"]) for e in seen if e["type"] == "approval_decided"]
    assert decided == [("h/c1", True, "--yes")]
    assert seen[-1]["answer"] == "helper says 5"


def relic_call(action_id: str, name: str, operation: str, **parameters: object) -> str:
    body = json.dumps({"name": name, "operation": operation, "parameters": parameters})
    return f'<action type="relic" id="{action_id}" output_key="{action_id}">{body}</action>'


def relic_manifest(tmp_path: Path, relic: dict[str, object], call: str, **extra: object) -> Path:
    replay = turns(tmp_path, call, "<response>got $r1</response>")
    path = tmp_path / "relic.json"
    manifest = {"model": f"replay:{replay}", "relics": [relic], **extra}
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return path


def test_a_relic_with_confirm_asks_like_a_tool(tmp_path: Path) -> None:
    store = {"name": "store", "kind": "sqlite", "confirm": True}
    call = relic_call("r1", "store", "set", key="k", value="v")
    path = relic_manifest(tmp_path, store, call, executors={"workspace": str(tmp_path)})
    refused = events(cli("run", "store it", "--manifest", str(path)).stdout)
    failed = next(e for e in refused if e["type"] == "action_failed")
    assert "relic operation 'store.set' needs a human's approval" in str(failed["error"])
    assert not (tmp_path / "store.sqlite").exists()  # refused before the relic started
    result = cli("run", "store it", "--manifest", str(path), "--yes")
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    asked = next(e for e in seen if e["type"] == "approval_requested")
    assert (asked["id"], asked["kind"], asked["tool"]) == ("r1", "relic", "store.set")
    assert asked["parameters"] == {"key": "k", "value": "v"}
    assert seen[-1]["answer"] == "got true"


def test_a_docker_relic_with_a_network_needs_the_network_confirmation(tmp_path: Path) -> None:
    from tests.docker_support import TEST_LABEL, engine_or_skip, new_token

    engine_or_skip()
    box = {
        "name": "box",
        "kind": "docker",
        "network": True,
        "docker": {"command": ["sleep", "infinity"], "labels": {TEST_LABEL: new_token()}},
        "operations": {"nets": {"command": ["ls", "/sys/class/net"]}},
    }
    path = relic_manifest(tmp_path, box, relic_call("r1", "box", "nets"), confirm={"network": True})
    refused = events(cli("run", "look", "--manifest", str(path)).stdout)
    failed = next(e for e in refused if e["type"] == "action_failed")
    assert "relic operation 'box.nets' needs a human's approval" in str(failed["error"])
    result = cli("run", "look", "--manifest", str(path), "--yes")
    assert result.returncode == 0, result.stderr
    seen = events(result.stdout)
    decided = [(e["id"], e["tool"], e["by"]) for e in seen if e["type"] == "approval_decided"]
    assert decided == [("r1", "box.nets", "--yes")]
    assert "eth0" in str(seen[-1]["answer"])  # approved, it ran with its network

"""Helpers of the MCP tests: manifests with the test server, tool actions, server marks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.replays import write_turns

SERVER = Path(__file__).with_name("server.py")


def read_marks(marks: Path, name: str) -> list[str]:
    """The lines the server wrote to marker ``name``."""
    path = marks / name
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def stdio_entry(marks: Path, name: str = "t", **extra: object) -> dict[str, object]:
    """A manifest ``mcp_servers`` entry for the stdio test server."""
    return {
        "name": name,
        "command": [sys.executable, str(SERVER), "stdio"],
        "env": {"MCP_TEST_DIR": str(marks)},
        **extra,
    }


def write_manifest(
    tmp_path: Path, servers: list[dict[str, object]], *turns: str, **fields: object
) -> Path:
    """A JSON manifest whose replay model plays ``turns``."""
    replay = tmp_path / "turns.jsonl"
    write_turns(replay, *turns)
    path = tmp_path / "agent.json"
    body = {"name": "mcp-test", "model": f"replay:{replay}", "mcp_servers": servers, **fields}
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def call(action_id: str, tool: str, parameters: dict[str, object], mode: str = "async") -> str:
    """Protocol text for one tool action whose result is bound to ``action_id``."""
    body = json.dumps({"name": tool, "parameters": parameters})
    return (
        f'<action type="tool" mode="{mode}" id="{action_id}" output_key="{action_id}">'
        f"{body}</action>"
    )

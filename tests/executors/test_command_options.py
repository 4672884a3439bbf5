"""A model's value in a templated argument cannot become an option of the command.

``sort`` given ``--output=/victim`` as its "file" would empty the victim: a
value that starts an argument with ``-`` is refused, before anything runs,
unless the manifest allows it or a ``--`` ends the options first.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ToolError
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.toolset import build_tools

from .test_relics import events, turns_file

pytestmark = pytest.mark.anyio

ARGV = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
PATH_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def tool_action(action_id: str, name: str, **parameters: Any) -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    return f'<action type="tool" id="{action_id}" output_key="{action_id}">{body}</action>'


async def test_an_option_given_as_sorts_file_is_an_action_error_and_the_victim_is_kept(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n", encoding="utf-8")
    manifest = tmp_path / "agent.json"
    manifest.write_text(
        json.dumps(
            {
                "tools": [
                    {
                        "name": "sort",
                        "command": ["sort"],
                        "args": ["{path}"],
                        "parameters": PATH_SCHEMA,
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    s = build_session(
        "replay:"
        + str(
            turns_file(
                tmp_path,
                "turns",
                tool_action("s", "sort", path=f"--output={victim}"),
                "<response>done</response>",
            )
        ),
        manifest=manifest,
        transcript_dir=tmp_path,
    )
    try:
        result = await s.run("sort it")
    finally:
        await s.aclose()
    assert victim.read_text(encoding="utf-8") == "precious\n"
    error = events(result, "action_failed")["s"]
    assert "parameter 'path'" in error and "starts with '-'" in error


async def test_a_dash_inside_an_option_template_or_after_a_double_dash_is_fine() -> None:
    tools = build_tools(
        AgentManifest.model_validate(
            {
                "tools": [
                    {"name": "named", "command": ARGV, "args": ["--name={v}", "-n", "{n}"]},
                    {"name": "operands", "command": ARGV, "args": ["--", "{v}"]},
                    {"name": "in_command", "command": [*ARGV, "--"], "args": ["{v}"]},
                ]
            }
        )
    )
    # The option is the manifest's: its value may start with '-'.
    assert await tools.get("named").call({"v": "-x", "n": 3}) == ["--name=-x", "-n", "3"]
    assert await tools.get("operands").call({"v": "-rf"}) == ["--", "-rf"]
    assert await tools.get("in_command").call({"v": "-rf"}) == ["--", "-rf"]
    with pytest.raises(ToolError, match="parameter 'n': '-3' starts with '-'"):
        await tools.get("named").call({"v": "a", "n": -3})  # numbers too


async def test_allow_options_lets_the_parameters_it_names_through() -> None:
    tools = build_tools(
        AgentManifest.model_validate(
            {
                "tools": [
                    {"name": "all", "command": ARGV, "args": ["{a}", "{b}"], "allow_options": True},
                    {
                        "name": "some",
                        "command": ARGV,
                        "args": ["{a}", "{b}"],
                        "allow_options": ["a"],
                    },
                ]
            }
        )
    )
    assert await tools.get("all").call({"a": "-1", "b": "--two"}) == ["-1", "--two"]
    assert await tools.get("some").call({"a": "-1", "b": "two"}) == ["-1", "two"]
    with pytest.raises(ToolError, match="parameter 'b': '--two' starts with '-'"):
        await tools.get("some").call({"a": "-1", "b": "--two"})

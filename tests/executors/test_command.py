"""Command tools: a real subprocess per call, its whole process group killed at the end."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import pytest

from cortex_kernel.exceptions import ConfigError, ToolError
from cortex_kernel.executors.command import decode_output, render_args, run_command
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.toolset import build_tools

pytestmark = pytest.mark.anyio

ECHO_JSON = [sys.executable, "-c", "import json,sys; d=json.load(sys.stdin); print(json.dumps(d))"]


def tools_for(**manifest: object) -> object:
    return build_tools(AgentManifest.model_validate(manifest))


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs, after giving a sent SIGKILL time to land."""
    for _ in range(100):
        if not _running(pid):
            return False
        time.sleep(0.05)
    return True


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


async def test_parameters_go_as_json_on_stdin_and_json_stdout_is_parsed() -> None:
    tools = tools_for(
        tools=[
            {
                "name": "echo",
                "command": ECHO_JSON,
                "parameters": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                },
            }
        ]
    )
    assert await tools.get("echo").call({"n": 3}) == {"n": 3}  # type: ignore[attr-defined]


async def test_argument_templates_pass_values_as_single_arguments() -> None:
    tools = tools_for(
        tools=[
            {
                "name": "argv",
                "command": [
                    sys.executable,
                    "-c",
                    "import sys, json; print(json.dumps(sys.argv[1:]))",
                ],
                "args": ["--name", "{name}", "{count}"],
            }
        ]
    )
    result = await tools.get("argv").call({"name": "a b; rm -rf /", "count": 2})  # type: ignore[attr-defined]
    assert result == ["--name", "a b; rm -rf /", "2"]
    with pytest.raises(ToolError, match="names parameter 'missing'"):
        render_args(["{missing}"], {})


async def test_text_output_stays_text() -> None:
    assert decode_output(b"hello\n") == "hello"
    assert decode_output(b"[1, 2]") == [1, 2]
    assert decode_output(b"{not json") == "{not json"


async def test_non_zero_exit_is_an_error_with_the_tail_of_stderr() -> None:
    tools = tools_for(
        tools=[{"name": "fail", "command": ["sh", "-c", "echo line1 >&2; echo boom >&2; exit 3"]}]
    )
    with pytest.raises(ToolError) as info:
        await tools.get("fail").call({})  # type: ignore[attr-defined]
    assert "tool 'fail' exited with status 3" in str(info.value)
    assert str(info.value).endswith("line1\nboom")


async def test_bad_parameters_are_refused_before_the_command_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tools = tools_for(
        tools=[
            {
                "name": "touch",
                "command": ["touch", str(marker)],
                "parameters": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                },
            }
        ]
    )
    with pytest.raises(ToolError, match="parameter 'n': 'x' is not of type 'integer'"):
        await tools.get("touch").call({"n": "x"})  # type: ignore[attr-defined]
    with pytest.raises(ToolError, match="parameter 'n': 'n' is a required property"):
        await tools.get("touch").call({})  # type: ignore[attr-defined]
    assert not marker.exists()


async def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $! > {pids}; echo $$ >> {pids}; wait"
    with pytest.raises(ToolError, match="timed out after 1 s; its process group was killed"):
        await run_command(["sh", "-c", script], time_limit=1)
    child, shell = (int(line) for line in pids.read_text().split())
    assert not alive(child) and not alive(shell)


async def test_cancelling_the_call_kills_the_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $! > {pids}; wait"
    with anyio.move_on_after(1):
        await run_command(["sh", "-c", script])
    assert not alive(int(pids.read_text()))


async def test_a_missing_program_is_a_clear_error() -> None:
    with pytest.raises(ToolError, match="cannot start 'no-such-program-x'"):
        await run_command(["no-such-program-x"])


async def test_fifty_concurrent_commands_all_answer() -> None:
    results: list[object] = []

    async def one(i: int) -> None:
        result = await run_command(ECHO_JSON, stdin=json.dumps({"i": i}).encode())
        results.append(decode_output(result.stdout))

    async with anyio.create_task_group() as group:
        for i in range(50):
            group.start_soon(one, i)
    assert sorted(r["i"] for r in results) == list(range(50))  # type: ignore[index]


def test_a_notebook_tool_with_a_manifest_tools_name_is_an_error_naming_both() -> None:
    from cortex_kernel import tool

    tools = tools_for(tools=[{"name": "count", "command": ["wc", "-c"]}])

    @tool
    def count(text: str) -> int:
        return len(text)

    with pytest.raises(ConfigError) as info:
        tools.collect({"count": count})  # type: ignore[attr-defined]
    assert "notebook function 'count' (@tool)" in str(info.value)
    assert "command tool 'count' from the manifest tools[0]" in str(info.value)

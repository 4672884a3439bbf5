"""Docker tool containers on the real engine: their owner label (a SIGKILLed kernel's
container is swept by the next call), a capped log, output read within a memory bound."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import docker.errors
import pytest

from cortex_kernel.executors.docker import LOG_LIMIT, OWNER_LABEL, owner
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.runtime.tools import ToolRegistry
from cortex_kernel.toolset import build_tools
from tests.docker_support import TEST_LABEL, new_token, our_containers, sandbox_image

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def image() -> str:
    return sandbox_image()


def tool_entry(image: str, name: str, command: list[str], token: str) -> dict[str, Any]:
    return {
        "name": name,
        "docker": {"image": image, "command": command, "labels": {TEST_LABEL: token}},
        "timeout": 600,
    }


def tools(image: str, token: str, **commands: list[str]) -> ToolRegistry:
    entries = [tool_entry(image, name, command, token) for name, command in commands.items()]
    return build_tools(AgentManifest.model_validate({"tools": entries}))


async def created(token: str, running: bool = False) -> Any:
    """The one container of ``token``, once the engine has it (and it runs, if asked)."""
    with anyio.fail_after(60):
        # The container is made by another task or process: the engine is polled.
        while True:
            try:
                found = our_containers(token)
            except docker.errors.NotFound:
                # Listed, then gone before docker-py inspected it (a container
                # the engine or a sweep removed meanwhile): list again.
                found = []
            if found and (not running or found[0].status == "running"):
                return found[0]
            await anyio.sleep(0.05)


async def test_a_tool_container_carries_its_owner_and_a_capped_log(image: str) -> None:
    token = new_token()
    nap = tools(image, token, nap=["sleep", "600"]).get("nap")
    async with anyio.create_task_group() as group:
        group.start_soon(nap.call, {})
        container = await created(token)
        assert container.labels[OWNER_LABEL] == owner()
        assert container.labels["cortex-kernel"] == "tool"
        log = container.attrs["HostConfig"]["LogConfig"]
        assert log == {"Type": "json-file", "Config": LOG_LIMIT}
        group.cancel_scope.cancel()
    assert our_containers(token) == []


async def test_a_sigkilled_kernels_tool_container_is_swept_by_the_next_call(
    image: str, tmp_path: Path
) -> None:
    token = new_token()
    turns = tmp_path / "turns.jsonl"
    nap = json.dumps({"name": "nap", "parameters": {}})
    turns.write_text(
        json.dumps({"content": f'<action type="tool" id="n">{nap}</action>'})
        + "\n"
        + json.dumps({"content": "<response>done</response>"})
        + "\n",
        encoding="utf-8",
    )
    manifest = tmp_path / "agent.json"
    manifest.write_text(
        json.dumps({"tools": [tool_entry(image, "nap", ["sleep", "600"], token)]}),
        encoding="utf-8",
    )
    kernel = await anyio.open_process(
        [
            *(sys.executable, "-m", "cortex_kernel", "run", "go", "--model", f"replay:{turns}"),
            *("--manifest", str(manifest)),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        container = await created(token, running=True)
    finally:
        kernel.send_signal(signal.SIGKILL)  # no shutdown, no finally, no atexit
        await kernel.wait()
    try:
        # The tool's container outlives its kernel, labelled with the dead process.
        assert [c.id for c in our_containers(token)] == [container.id]
        assert container.labels[OWNER_LABEL] == f"{socket.gethostname()}:{kernel.pid}"
        # The next Docker tool call, any kernel's, removes it.
        quick = tools(image, new_token(), quick=["python3", "-c", "print(1)"]).get("quick")
        assert await quick.call({}) == 1
        assert our_containers(token) == []
    finally:
        for left in our_containers(token):
            left.remove(force=True)


async def test_a_docker_tool_keeps_the_manifests_max_output_bytes(image: str) -> None:
    token = new_token()
    entry = tool_entry(image, "loud", ["python3", "-c", "print('z' * 5000)"], token)
    registry = build_tools(
        AgentManifest.model_validate({"tools": [entry], "executors": {"max_output_bytes": 1000}})
    )
    assert await registry.get("loud").call({}) == "z" * 1000


#: 50 MB on stdout, in 1 kB lines.
LOUD = "import sys\nfor _ in range(50 * 1024): sys.stdout.buffer.write(b'x' * 1023 + b'\\n')"

# Runs in a fresh process. The peak RSS (VmHWM) is reset after a warm-up call
# (Linux: "5" to /proc/self/clear_refs), so the peak over the loud call minus
# the RSS before it is what that call needed at most: a transient 50 MB buffer,
# freed before the call returns, shows there and not in the RSS after.
MEASURE = """
import asyncio, json, re, sys
from cortex_kernel.executors.docker import ContainerSpec, run_container

image, token, loud = sys.argv[1:4]
labels = {"cortex-kernel.test": token}


def status(field: str) -> int:
    with open("/proc/self/status") as text:
        return int(re.search(field + r":\\s+(\\d+) kB", text.read()).group(1)) * 1024


async def main() -> None:
    # Warm up: the client, the threads, the imports of the first call.
    await run_container(ContainerSpec(image, ["python3", "-c", "print(1)"], labels=labels))
    with open("/proc/self/clear_refs", "w") as reset:
        reset.write("5")
    before = status("VmRSS")
    spec = ContainerSpec(image, ["python3", "-c", loud], labels=labels)
    run = await run_container(spec, max_output=1_000_000)
    print(json.dumps({
        "growth": status("VmHWM") - before,
        "kept": len(run.result.stdout),
        "truncated": run.result.truncated,
        "code": run.result.returncode,
    }))


asyncio.run(main())
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux: resets peak RSS")
def test_fifty_megabytes_of_output_are_cut_without_growing_the_kernel_by_them(image: str) -> None:
    token = new_token()
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, image, token, LOUD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert measured.returncode == 0, measured.stderr
    report = json.loads(measured.stdout)
    assert report["code"] == 0 and report["truncated"] is True
    assert report["kept"] == 1_000_000
    # 50 MB went through; what is kept (1 MB) and the reading buffers may stay.
    assert report["growth"] < 10 * 1024**2, report
    assert our_containers(token) == []

"""Docker tools against the real engine: every hardened default checked for real."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from cortex_kernel.exceptions import ToolError
from cortex_kernel.executors.docker import ContainerSpec, run_container
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.runtime.tools import ToolRegistry
from cortex_kernel.toolset import build_tools
from tests.docker_support import TEST_LABEL, new_token, our_containers, sandbox_image

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def image() -> str:
    return sandbox_image()


TOKEN = new_token()  # this module's containers carry cortex-kernel.test=TOKEN


def python_tool(image: str, code: str, **entry: Any) -> ToolRegistry:
    docker = {
        "image": image,
        "command": ["python3", "-c", code],
        "labels": {TEST_LABEL: TOKEN},
        **entry.pop("docker", {}),
    }
    manifest = {"tools": [{"name": "py", "docker": docker, **entry}]}
    return build_tools(AgentManifest.model_validate(manifest))


async def py(image: str, code: str, parameters: dict[str, Any] | None = None, **entry: Any) -> Any:
    return await python_tool(image, code, **entry).get("py").call(parameters or {})


PROBE = """
import json, os, socket, sys
params = json.load(sys.stdin)
out = {"params": params, "uid": os.getuid(), "nets": sorted(os.listdir("/sys/class/net"))}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    out["connect"] = "ok"
except OSError as exc:
    out["connect"] = type(exc).__name__ + ": " + str(exc)
for path in ("/probe", "/tmp/probe"):
    try:
        open(path, "w").write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = exc.strerror
print(json.dumps(out))
"""


async def test_defaults_no_network_read_only_root_non_root_user(image: str) -> None:
    result = await py(image, PROBE, {"x": [1, 2]})
    assert result["params"] == {"x": [1, 2]}  # JSON in on stdin, JSON out on stdout
    assert result["uid"] != 0
    assert result["nets"] == ["lo"] and result["connect"] != "ok"
    assert result["/probe"] == "Read-only file system"
    assert result["/tmp/probe"] == "written"  # the small tmpfs
    assert our_containers(TOKEN) == []  # removed afterwards


async def test_network_only_when_the_entry_asks(image: str) -> None:
    result = await py(image, PROBE, network=True)
    assert "eth0" in result["nets"]


async def test_capabilities_dropped_and_no_new_privileges(image: str) -> None:
    code = (
        "import json\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
        "print(json.dumps({k: status[k].strip() for k in ('CapEff', 'CapBnd', 'NoNewPrivs')}))"
    )
    result = await py(image, code)
    assert result == {"CapEff": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1"}


async def test_a_fork_bomb_stops_at_the_pids_limit(image: str) -> None:
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while n < 500:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print(n, exc.strerror, flush=True)\n"
        "os._exit(0)\n"
    )
    result = await py(image, code, docker={"pids": 32}, timeout=60)
    forked, reason = result.split(" ", 1)
    assert int(forked) < 32 and reason == "Resource temporarily unavailable"
    assert our_containers(TOKEN) == []


async def test_memory_over_the_limit_is_a_clear_error(image: str) -> None:
    code = "x = bytearray(400 * 1024 * 1024)\nfor i in range(0, len(x), 4096): x[i] = 1"
    with pytest.raises(ToolError, match=r"tool 'py' ran out of memory \(limit 64m\)"):
        await py(image, code, docker={"memory": "64m"})
    assert our_containers(TOKEN) == []


async def test_a_timeout_kills_and_removes_the_container(image: str) -> None:
    with pytest.raises(ToolError, match="timed out after 2 s; its container was killed"):
        await py(image, "import time; time.sleep(60)", timeout=2)
    assert our_containers(TOKEN) == []


async def test_a_cancelled_call_leaves_no_container(image: str) -> None:
    tools = python_tool(image, "import time; time.sleep(60)")
    with anyio.move_on_after(2):
        await tools.get("py").call({})
    assert our_containers(TOKEN) == []


async def test_non_zero_exit_shows_stderr(image: str) -> None:
    with pytest.raises(ToolError, match=r"exited with status 1[\s\S]*ZeroDivisionError"):
        await py(image, "1 / 0")


async def test_a_writable_workspace_only_when_the_entry_says(image: str, tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o777)  # the container's user (65534) writes there
    code = "open('/workspace/out.txt', 'w').write('from the container'); print('ok')"
    with pytest.raises(ToolError):  # no mount by default: /workspace is read-only or absent
        await (
            build_tools(
                AgentManifest.model_validate(
                    {
                        "executors": {"workspace": str(tmp_path)},
                        "tools": [
                            {
                                "name": "w",
                                "docker": {"image": image, "command": ["python3", "-c", code]},
                            }
                        ],
                    }
                )
            )
            .get("w")
            .call({})
        )
    tools = build_tools(
        AgentManifest.model_validate(
            {
                "executors": {"workspace": str(tmp_path)},
                "tools": [
                    {
                        "name": "w",
                        "docker": {"image": image, "command": ["python3", "-c", code]},
                        "workspace": "rw",
                    }
                ],
            }
        )
    )
    assert await tools.get("w").call({}) == "ok"
    assert (tmp_path / "out.txt").read_text() == "from the container"


async def test_no_engine_is_a_clear_error_naming_docker_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(ToolError) as info:
        await run_container(ContainerSpec("x", ["true"]))
    text = str(info.value)
    assert f"no Docker engine answers at unix://{tmp_path}/no.sock" in text
    assert "DOCKER_HOST" in text and "systemctl start docker" in text


async def test_shell_builtin_in_a_container(image: str) -> None:
    manifest = {"builtins": {"shell": {"enabled": True, "sandbox": "docker", "image": image}}}
    tools = build_tools(AgentManifest.model_validate(manifest))
    assert await tools.get("shell").call({"command": "id -u; echo hi | cat"}) == "65534\nhi"


def test_the_image_is_cached_by_tag(image: str) -> None:
    assert sandbox_image() == image
    assert json.dumps(image).startswith('"cortex-kernel-sandbox:')

"""Docker tools on a second engine endpoint: whatever ``DOCKER_HOST`` names, TLS included.

The endpoint is the local engine's socket exposed on 127.0.0.1:PORT by a
forwarder the test starts (:mod:`tests.engine_forward`) — plain TCP, then
TLS with a CA the test generates. A tool run there works and is seen by the
forwarder; the right CA works, a wrong one fails with a clear message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.exceptions import ToolError
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.toolset import build_tools
from tests.docker_support import TEST_LABEL, new_token, our_containers, sandbox_image
from tests.engine_forward import Forwarder, make_tls_files, server_context

pytestmark = pytest.mark.anyio

TOKEN = new_token()
ECHO = "import json, sys; print(json.dumps({'got': json.load(sys.stdin)}))"


@pytest.fixture(scope="module")
def image() -> str:
    return sandbox_image()  # built (or found) on the local engine, which the forwarder exposes


def echo_tool(image: str, docker: dict[str, Any] | None = None, base: Path | None = None) -> Any:
    entry = {
        "name": "echo",
        "docker": {
            "image": image,
            "command": ["python3", "-c", ECHO],
            "labels": {TEST_LABEL: TOKEN},
        },
    }
    manifest = AgentManifest.model_validate(
        {"tools": [entry], "executors": {"docker": docker or {}}}
    )
    return build_tools(manifest, base=base).get("echo")


async def test_docker_host_names_the_engine(image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Forwarder() as engine:
        monkeypatch.setenv("DOCKER_HOST", engine.address)
        assert await echo_tool(image).call({"x": 1}) == {"got": {"x": 1}}
        assert engine.connections > 0  # the call went through the second endpoint
    assert our_containers(TOKEN) == []  # removed through it too


async def test_the_manifests_host_wins(image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing listens there
    with Forwarder() as engine:
        tool = echo_tool(image, {"host": engine.address})
        assert await tool.call({"y": 2}) == {"got": {"y": 2}}
        assert engine.connections > 0


async def test_tls_settings_pass_through_from_the_environment(
    image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = make_tls_files(tmp_path / "good")
    wrong = make_tls_files(tmp_path / "wrong")  # another CA: the engine's certificate fails it
    with Forwarder(tls=server_context(files)) as engine:
        monkeypatch.setenv("DOCKER_HOST", engine.address)
        monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
        monkeypatch.setenv("DOCKER_CERT_PATH", str(files["ca.pem"].parent))
        assert await echo_tool(image).call({"tls": True}) == {"got": {"tls": True}}
        monkeypatch.setenv("DOCKER_CERT_PATH", str(wrong["ca.pem"].parent))
        with pytest.raises(ToolError) as failed:
            await echo_tool(image).call({"tls": True})
    message = str(failed.value)
    assert f"no Docker engine answers at {engine.address}" in message
    assert "TLS with the engine failed (certificate verify failed)" in message
    assert "DOCKER_CERT_PATH" in message


async def test_tls_settings_from_the_manifest(
    image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
    make_tls_files(tmp_path / "certs")
    files = make_tls_files(tmp_path / "certs")  # the newest CA and certificates win
    with Forwarder(tls=server_context(files)) as engine:
        docker = {"host": engine.address, "tls_verify": True, "cert_path": "certs"}
        tool = echo_tool(image, docker, base=tmp_path)  # relative to the manifest's folder
        assert await tool.call({"m": 1}) == {"got": {"m": 1}}
        # Plain HTTP to a TLS endpoint (no TLS settings) is refused, clearly.
        other = Forwarder(tls=server_context(files))
        with other, pytest.raises(ToolError, match=f"no Docker engine answers at {other.address}"):
            await echo_tool(image, {"host": other.address}).call({})


async def test_two_manifests_for_one_host_keep_their_own_tls_settings(
    image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each manifest's engine travels with its tools: building the second
    # (same host, another CA) must not change what the first one uses.
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
    files = make_tls_files(tmp_path / "right")
    make_tls_files(tmp_path / "wrong")  # another CA: the engine's certificate fails it
    before = dict(os.environ)
    with Forwarder(tls=server_context(files)) as engine:
        settings = {"host": engine.address, "tls_verify": True}
        right = echo_tool(image, {**settings, "cert_path": "right"}, base=tmp_path)
        wrong = echo_tool(image, {**settings, "cert_path": "wrong"}, base=tmp_path)
        assert await right.call({"n": 1}) == {"got": {"n": 1}}
        with pytest.raises(ToolError, match=r"TLS with the engine failed"):
            await wrong.call({"n": 2})
        right_again = echo_tool(image, {**settings, "cert_path": "right"}, base=tmp_path)
        assert await right_again.call({"n": 3}) == {"got": {"n": 3}}
        with pytest.raises(ToolError, match=r"TLS with the engine failed"):
            await wrong.call({"n": 4})  # still its own CA, after the right one was built again
    assert dict(os.environ) == before  # nothing was registered through the environment

"""What a child process sees of the kernel's environment: PATH, HOME, LANG… and the
names the manifest passes, never a provider key or a secret-looking name.

Each kind of child is a real process: a command tool, the ``python`` sandbox
through the real CLI, a server relic, a stdio MCP server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.toolset import build_tools
from tests.mcp.support import call, stdio_entry, write_manifest

from .test_relics import ROOT, events, relic, run, turns_file

pytestmark = pytest.mark.anyio

#: The kernel's secrets, set in the test process (children must not see them).
SECRETS = {
    "OPENAI_API_KEY": "sk-test-0123456789abcdef",
    "SOME_TOKEN": "tok-0123456789",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-0123456789",
    "MYAPP_TOKEN": "myapp-token-0123456789",
}
#: Plain variables: only the ones a manifest passes get through.
PLAIN = {"DATABASE_URL": "postgres://db/main", "MYAPP_HOST": "app.example", "UNRELATED": "x"}

PRINT_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


@pytest.fixture
def kernel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, **PLAIN}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")


def assert_minimal(seen: dict[str, Any], passed: frozenset[str] | set[str] = frozenset()) -> None:
    """``seen`` has PATH and HOME as ours, the ``passed`` names, and nothing secret."""
    assert seen["PATH"] == os.environ["PATH"] and seen["HOME"] == os.environ["HOME"]
    for name in {*SECRETS, *PLAIN}:
        if name in passed:
            assert seen[name] == os.environ[name], name
        else:
            assert name not in seen, name
    text = json.dumps(seen)
    for name, value in SECRETS.items():
        if name not in passed:
            assert value not in text and value[::-1] not in text


@pytest.mark.usefixtures("kernel_env")
async def test_a_command_tool_gets_path_home_and_the_locale_never_a_secret() -> None:
    tools = build_tools(
        AgentManifest.model_validate({"tools": [{"name": "env", "command": PRINT_ENV}]})
    )
    seen = await tools.get("env").call({})
    assert_minimal(seen)
    assert seen["LC_ALL"] == "C.UTF-8"


@pytest.mark.usefixtures("kernel_env")
async def test_pass_env_passes_names_and_a_secret_one_only_named_in_full(tmp_path: Path) -> None:
    tools = build_tools(
        AgentManifest.model_validate(
            {
                "tools": [
                    # A prefix never passes a secret-looking name (MYAPP_TOKEN)…
                    {
                        "name": "passes",
                        "command": PRINT_ENV,
                        "pass_env": ["DATABASE_URL", "MYAPP_*"],
                    },
                    # …naming it in full does, and env sets values on top.
                    {
                        "name": "named",
                        "command": PRINT_ENV,
                        "pass_env": ["SOME_TOKEN"],
                        "env": {"MODE": "test"},
                    },
                ]
            }
        )
    )
    assert_minimal(await tools.get("passes").call({}), {"DATABASE_URL", "MYAPP_HOST"})
    named = await tools.get("named").call({})
    assert_minimal(named, {"SOME_TOKEN"})
    assert named["MODE"] == "test"
    relic_seen = await relic_env(tmp_path, "    pass_env: [DATABASE_URL, SOME_TOKEN]\n")
    assert_minimal(relic_seen, {"DATABASE_URL", "SOME_TOKEN"})


async def relic_env(tmp_path: Path, extra: str = "") -> Any:
    """The environment a server relic's process sees (its ``env`` operation)."""
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(
        "relics:\n"
        "  - name: web\n"
        "    kind: server\n"
        f'    command: ["{sys.executable}", "-m", "tests.executors.relic_samples", "{{port}}"]\n'
        f'    cwd: "{ROOT}"\n'
        "    env: {MODE: relic}\n"
        "    operations: {env: {}}\n" + extra,
        encoding="utf-8",
    )
    s = build_session(
        "replay:" + str(turns_file(tmp_path, "none", "<response/>")),
        manifest=manifest,
        transcript_dir=tmp_path,
    )
    try:
        result = await run(s, tmp_path, "go", relic("e", "web", "env"), "<response>done</response>")
        assert result.status == "ok", (result.message, events(result, "action_failed"))
        return s.variables["e"]
    finally:
        await s.aclose()


def test_the_python_sandbox_cannot_put_a_reversed_key_in_the_answer(tmp_path: Path) -> None:
    # The exploit as reported: redaction matches the exact value, not its reverse.
    code = "import os; print(os.environ.get('OPENAI_API_KEY', 'yek on')[::-1])"
    body = json.dumps({"name": "python", "parameters": {"code": code}})
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        json.dumps({"content": f'<action type="tool" id="k" output_key="k">{body}</action>'})
        + "\n"
        + json.dumps({"content": "<response>$k</response>"})
        + "\n",
        encoding="utf-8",
    )
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("builtins:\n  python: {enabled: true}\n", encoding="utf-8")
    transcript = tmp_path / "run.jsonl"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "cortex_kernel", "run", "go", "--model", f"replay:{turns}"),
            *("--manifest", str(manifest), "--transcript", str(transcript)),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, **SECRETS},
    )
    assert result.returncode == 0, result.stderr
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["answer"] == "no key"
    seen = result.stdout + result.stderr + transcript.read_text(encoding="utf-8")
    for value in SECRETS.values():
        assert value[::-1] not in seen


@pytest.mark.usefixtures("kernel_env")
async def test_a_server_relic_gets_the_minimal_environment(tmp_path: Path) -> None:
    seen = await relic_env(tmp_path)
    assert_minimal(seen)
    assert seen["MODE"] == "relic" and seen["PORT"].isdigit()


@pytest.mark.usefixtures("kernel_env")
async def test_a_stdio_mcp_server_gets_the_names_passed(tmp_path: Path) -> None:
    names = ["PATH", "HOME", *SECRETS, *PLAIN]
    manifest = write_manifest(
        tmp_path,
        [stdio_entry(tmp_path, pass_env=["MYAPP_*", "AWS_SECRET_ACCESS_KEY"])],
        call("e", "t__environ", {"names": names}),
        "<response>done</response>",
    )
    session = build_session(manifest=manifest, transcript_dir=tmp_path)
    async with session:
        result = await session.run("go")
        assert result.status == "ok", result.message
        seen = {k: v for k, v in session.variables["e"].items() if v is not None}
    assert_minimal(seen, {"MYAPP_HOST", "AWS_SECRET_ACCESS_KEY"})

"""An ``llm`` action may use the agent's model or the manifest's models, never any file or provider.

Through the real kernel and litellm's HTTP path to the loopback provider:
model output that names ``replay:<a transcript>`` or another provider gets an
``action_error`` and reads nothing, spends nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI

from .conftest import Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]


def llm(action_id: str, model: str) -> str:
    body = json.dumps({"prompt": "read it", "model": model})
    return f'<action type="llm" mode="async" id="{action_id}">{body}</action>'


def test_llm_action_cannot_pick_a_file_or_a_provider(
    keyless_kernel: Kernel, tmp_path: Path
) -> None:
    private = tmp_path / "other-run.transcript.jsonl"
    private.write_text(json.dumps({"content": "PRIVATE DATA"}) + "\n", encoding="utf-8")
    with FakeOpenAI() as server:
        keyless_kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream(
            llm("r", f"replay:{private}")
            + llm("p", "anthropic/claude-3-5-sonnet-latest")
            + llm("own", "openai/local")
        )
        server.stream("fine")  # the `own` sub-call, on the agent's model
        server.stream("<response>done</response>")
        result = keyless_kernel.run("go")
        assert result.status == "ok", dump(result)
        assert len(server.requests) == 3
    errors = json.loads(
        keyless_kernel.python(
            "%%python\nimport json\n"
            "print(json.dumps({e.id: e.message for e in _run.events if e.type == 'action_error'}))"
        )
    )
    assert set(errors) == {"r", "p"}
    assert errors["r"].startswith("an llm action cannot use 'replay:")
    assert "allowed only when the agent's own model is a replay" in errors["r"]
    assert errors["p"].startswith(
        "an llm action cannot use model 'anthropic/claude-3-5-sonnet-latest'"
    )
    assert "PRIVATE DATA" not in dump(result)


def test_a_replay_session_may_use_replay_sub_models(keyless_kernel: Kernel, tmp_path: Path) -> None:
    sub = tmp_path / "sub.jsonl"
    sub.write_text(json.dumps({"content": "from the sub model"}) + "\n", encoding="utf-8")
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        json.dumps({"content": llm("s", f"replay:{sub}").replace('mode="async"', 'mode="sync"')})
        + "\n"
        + json.dumps({"content": "<response>$s</response>"})
        + "\n",
        encoding="utf-8",
    )
    result = keyless_kernel.run(f"%%agent --model replay:{turns}\ngo")
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/plain"] == "from the sub model"


def test_a_manifest_lists_the_models_llm_actions_may_use(tmp_path: Path) -> None:
    import subprocess
    import sys

    manifest = tmp_path / "agent.yaml"
    manifest.write_text("model: openai/main\nllm_models: [openai/helper]\n", encoding="utf-8")
    with FakeOpenAI() as server:
        server.stream(llm("h", "openai/helper").replace('mode="async"', 'mode="sync"'))
        server.stream("from the helper")
        server.stream("<response>$h</response>")
        env = keyless_env()
        env.update(OPENAI_API_BASE=server.api_base, OPENAI_API_KEY="sk-local-test-key")
        done = subprocess.run(
            [sys.executable, "-m", "cortex_kernel", "run", "go", "--manifest", str(manifest)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        models = [r.body["model"] for r in server.requests]
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["answer"] == "from the helper"
    assert models == ["main", "helper", "main"]

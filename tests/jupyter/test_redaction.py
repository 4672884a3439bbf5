"""Secrets from the environment never leave the kernel, through the real kernel and provider path.

A notebook tool that (legitimately) reads secret-looking environment
variables returns them; the model asks for the result in its answer. The
values must not appear in the next request to the provider (the action
results it opens with), in any iopub message (view updates, the answer),
in the transcript or in ``_run``'s events and answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI

from .conftest import Kernel, dump

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]

SECRETS = {
    "OPENAI_API_KEY": "sk-test-abcdef0123456789abcdef",
    "MY_SERVICE_TOKEN": "tok-9f8e7d6c5b4a39281706",
    "WAREHOUSE_SECRET": "whs-0a1b2c3d4e5f6a7b8c9d",
    "DB_PASSWORD_MAIN": "correct-horse-battery-staple",
    "STRIPE_KEY": "rk_live_51HxYzAbCdEfGhIjKl",
}

TOOL = (
    "%%python\nimport os\nfrom cortex_kernel import tool\n\n@tool\n"
    "def credentials() -> dict:\n"
    '    """Everything a careless tool might return."""\n'
    f"    return {{name: os.environ[name] for name in {sorted(SECRETS)!r}}}\n"
)


@pytest.fixture
def kernel(cortex_kernelspec: str, tmp_path: Path) -> Iterator[Kernel]:
    env = {**os.environ, **SECRETS, "CORTEX_TRANSCRIPT_DIR": str(tmp_path / "transcripts")}
    kernel = Kernel(cortex_kernelspec, env)
    assert kernel.run(TOOL).status == "ok"
    yield kernel
    kernel.shutdown()


def leaked(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


def test_secrets_never_leave_the_kernel(kernel: Kernel) -> None:
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream(
            '<thought>Fetch them.<action type="tool" id="c" output_key="creds">'
            '{"name": "credentials"}</action></thought>'
        )
        server.stream(
            "<thought>Got them.</thought>"
            '<action type="llm" mode="sync" id="s">{"prompt": "Summarise $creds"}</action>'
        )
        server.stream("summary")
        server.stream("<response>The token is $creds.MY_SERVICE_TOKEN; all: $creds</response>")
        result = kernel.run("What are my credentials?")
        assert result.status == "ok", dump(result)
        requests = [json.dumps(r.body["messages"]) for r in server.requests]
    assert len(requests) == 4
    # The provider never sees them: results, the llm sub-call's prompt, the history.
    assert "credentials" in requests[1] and "***" in requests[1]
    assert "***" in requests[2]  # the llm action's prompt interpolated $creds
    for sent in requests:
        assert leaked(sent) == [], sent
    # Nor does the front end: view deltas, displays, the answer.
    traffic = json.dumps([m["content"] for m in result.iopub], default=str)
    assert leaked(traffic) == []
    assert result.result_data()["text/plain"].startswith("The token is ***; all: ")
    # Nor the transcript, nor _run.
    transcript = Path(kernel.python("%transcript path").strip()).read_text(encoding="utf-8")
    assert "credentials" in transcript and leaked(transcript) == []
    events = kernel.python("%%python\nprint(''.join(e.to_json() for e in _run.events))")
    assert leaked(events + kernel.python("%%python\nprint(_response)")) == []
    # The user's own variable keeps the real values: redaction is for what leaves.
    assert kernel.python("%%python\nprint(len(creds))").strip() == str(len(SECRETS))


def test_secrets_in_model_text_are_scrubbed_from_events(kernel: Kernel, tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    text = f"<thought>I guess {SECRETS['STRIPE_KEY']}</thought><response>no</response>"
    turns.write_text(json.dumps({"content": text}) + "\n", encoding="utf-8")
    result = kernel.run(f"%%agent --model replay:{turns}\nguess")
    assert result.status == "ok", dump(result)
    assert leaked(json.dumps([m["content"] for m in result.iopub], default=str)) == []

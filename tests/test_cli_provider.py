"""``cortex-kernel run`` against a provider that never answers, stalls or sends garbage.

The CLI runs as a user runs it (a subprocess); the provider is a loopback
OpenAI-compatible server the test starts. The waiting rules come from the
flags or a manifest's ``model:`` table, and every failure is one clear line
on stderr with exit status 1 (a bad value: exit 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("OPENAI_API_BASE", None)
    return subprocess.run(
        [sys.executable, "-m", "cortex_kernel", "run", "hello?", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
    )


def failed_with(done: subprocess.CompletedProcess[str], status: int) -> str:
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_a_provider_that_never_answers_fails_after_timeout_times_attempts() -> None:
    with FakeOpenAI() as server:
        server.hang(60).hang(60)  # accepts each request and never answers
        done = run(
            "--model", "openai/x", "--api-base", server.api_base,
            "--first-token-timeout", "1", "--retries", "1",
        )  # fmt: skip
        requests = len(server.requests)
    line = failed_with(done, 1)
    assert "ModelTimeout" in line and "sent no first token within 1 s after 2 attempts" in line
    assert "Raise --first-token-timeout" in line
    assert requests == 2


def test_a_manifest_sets_the_first_token_timeout_and_retries(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        manifest = tmp_path / "agent.yaml"
        manifest.write_text(
            f"model: {{name: openai/x, api_base: '{server.api_base}', "
            "first_token_timeout: 1, retries: 0}\n",
            encoding="utf-8",
        )
        # The headers come, then nothing before the first token.
        server.add(Reply(kind="stream", chunks=[{"content": "x"}], hang_after=0, hang_seconds=60))
        done = run("--manifest", str(manifest))
        requests = len(server.requests)
    line = failed_with(done, 1)
    assert "sent no first token within 1 s." in line
    assert requests == 1


def test_garbage_sse_is_a_protocol_error_from_the_provider_not_retried() -> None:
    with FakeOpenAI() as server:
        server.raw("data: <html>oops</html>\n\n")
        done = run("--model", "openai/x", "--api-base", server.api_base, "--retries", "3")
        requests = len(server.requests)
    line = failed_with(done, 1)
    assert "ProviderProtocolError" in line
    assert "not a stream of chat completion chunks" in line and "not retried" in line
    assert "Cannot reach" not in done.stderr
    assert requests == 1


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--first-token-timeout", "0"), "--first-token-timeout '0'"),
        (("--timeout", "soon"), "--timeout 'soon'"),
        (("--retries", "-1"), "--retries '-1'"),
        (("--retries", "99"), "--retries '99'"),
    ],
)
def test_bad_waiting_rules_are_one_clear_line(args: tuple[str, str], named: str) -> None:
    done = run("--model", "openai/x", *args)
    line = failed_with(done, 2)
    assert len(done.stderr.strip().splitlines()) == 1
    assert named in line

"""A tool's own TimeoutError is its error, not the tool's time limit.

``ModelTimeout`` is a ``TimeoutError``: a Python tool whose model call timed
out (or whose socket did) must be reported with its own message, not as
"timed out after N s" of the manifest's ``timeout``. Through a session, a
scripted model and a manifest callable tool.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
import yaml

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ModelTimeout
from tests.runtime.fakes import ScriptedModel

pytestmark = pytest.mark.anyio


def provider_gave_up() -> str:
    """Call a model that does not answer."""
    raise ModelTimeout("the provider did not answer within 30 s")


def socket_timed_out() -> str:
    """Read from a socket that stays silent."""
    raise TimeoutError("the socket read timed out")


async def sleeps() -> str:
    """Wait longer than the tool's time limit."""
    await anyio.sleep_forever()
    return "never"


def _call(name: str) -> str:
    body = json.dumps({"name": name, "parameters": {}})
    return f'<action type="tool" mode="sync">{body}</action>'


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("provider_gave_up", "ModelTimeout: the provider did not answer within 30 s"),
        ("socket_timed_out", "TimeoutError: the socket read timed out"),
        ("sleeps", "tool 'sleeps' timed out after 0.2 s"),
    ],
)
async def test_the_time_limit_names_only_its_own_expiry(
    tmp_path: Path, name: str, error: str
) -> None:
    entry = {"name": name, "callable": f"{__name__}:{name}", "timeout": 0.2}
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(yaml.safe_dump({"tools": [entry]}), encoding="utf-8")
    model = ScriptedModel([_call(name), "<response>done</response>"])
    session = build_session(model, manifest, transcript_dir=tmp_path)
    with anyio.fail_after(30):
        result = await session.run("go")
    failed = [e for e in result.events if e.type == "action_failed"]
    assert [e.error for e in failed] == [error]
    await session.aclose()

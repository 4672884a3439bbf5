"""An ``mcp_resource`` context feed: a real SDK server's resource read into the feeds message."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex_kernel.agent import build_session, mcp_hub
from cortex_kernel.exceptions import ToolError
from cortex_kernel.runtime.feeds import FeedSpec
from tests.runtime.test_internal_actions import Recording, feeds_of

from .support import stdio_entry, write_manifest

pytestmark = pytest.mark.anyio


def feed(feed_id: str, uri: str) -> dict[str, object]:
    return {
        "id": feed_id,
        "type": "on_demand",
        "ttl": 60,
        "source": {"mcp_resource": {"server": "t", "uri": uri}},
    }


async def test_a_resource_feeds_the_prompt_and_a_failing_one_shows_its_error(
    tmp_path: Path, marks: Path
) -> None:
    manifest = write_manifest(
        tmp_path,
        [stdio_entry(marks)],
        "<response>done</response>",
        context_feeds=[feed("note", "notes://today"), feed("bad", "notes://broken")],
    )
    session = build_session(manifest=manifest, transcript_dir=tmp_path)
    model = Recording(tmp_path / "turns.jsonl")
    session.config = session.config.replace(model=model)
    async with session:
        result = await session.run("go")
        assert result.status == "ok", result.message
        prompt = feeds_of(model, 0)
        assert '<feed id="note">' in prompt and "note of the day: ship it" in prompt
        bad = prompt[prompt.index('<feed id="bad">') :]
        assert "(unavailable: " in bad and "Error reading resource notes://broken" in bad


async def test_a_read_that_crashes_the_server_names_the_resource(
    tmp_path: Path, marks: Path
) -> None:
    manifest = write_manifest(tmp_path, [stdio_entry(marks)], "<response>done</response>")
    session = build_session(manifest=manifest, transcript_dir=tmp_path)
    async with session:
        assert (await session.run("go")).status == "ok"  # the run's start starts the server
        with pytest.raises(ToolError) as caught:
            await mcp_hub(session).read_resource("t", "notes://crash")
    message = str(caught.value)
    assert "MCP server 't' crashed during the read of resource 'notes://crash'" in message
    assert "crashing on a read" in message  # the server's stderr
    assert "''" not in message


def test_the_source_needs_a_server_and_a_uri() -> None:
    with pytest.raises(ValueError, match="mcp_resource needs"):
        FeedSpec(id="x", source={"mcp_resource": {"server": "t"}})

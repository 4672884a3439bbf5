"""Model output chooses feed sources by name and never writes one, in the real kernel.

A scripted model (litellm's HTTP path to a loopback server that records
every request) writes feeds whose source is code, a command, a tool call or
an MCP resource, through ``<context_feed>``, ``add_context_feed`` and
``update_context_feed``, in a session whose manifest grants both actions.
Each is an ``action_error``; nothing is imported or called (the module
named would leave a file behind on import, the calls would create files),
and the environment's key, reversed so no redaction would catch it, reaches
the provider nowhere. A source the manifest or the user declared, chosen by
name, works.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI
from tests.prompt_parts import feeds_message

from .conftest import Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]

CANARY = "sk-canary-7d41c0e9b2a65f38"

# Imported, it leaves a file: the proof that a refused callable was never imported.
CANARY_MODULE = """\
import pathlib
pathlib.Path(__file__).with_name("imported.txt").write_text("imported")


def run(**parameters):
    pathlib.Path(__file__).with_name("called.txt").write_text("called")
    return "ran"
"""

NOTEBOOK = """%%python
import pathlib, sys
sys.path.insert(0, {folder!r})
from cortex_kernel import tool

def quote(symbol):
    return {{"symbol": symbol, "price": 7}}

def stamp():
    return "stamp from the user's function"

@tool
def make_marker(path: str) -> str:
    \"\"\"Create a file (a tool the agent may call as an action, never as a feed source).\"\"\"
    pathlib.Path(path).write_text("made")
    return "made"
"""


@pytest.fixture(scope="module")
def kernel(cortex_kernelspec: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = keyless_env()
    env["CORTEX_TRANSCRIPT_DIR"] = str(tmp_path_factory.mktemp("transcripts"))
    env["CANARY_API_KEY"] = CANARY
    kernel = Kernel(cortex_kernelspec, env)
    yield kernel
    kernel.shutdown()


def internal(action_id: str, action: str, /, sync: bool = False, **parameters: object) -> str:
    body = json.dumps({"name": action, "parameters": parameters})
    mode = "sync" if sync else "async"
    return f'<action type="internal" mode="{mode}" id="{action_id}">{body}</action>'


def context_feed(feed_id: str, body: object) -> str:
    return f'<context_feed id="{feed_id}" type="on_demand">{json.dumps(body)}</context_feed>'


def manifest(tmp_path: Path, api_base: str, extra: str = "") -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "name: watcher\n"
        f"model: {{name: openai/local, api_base: '{api_base}'}}\n"
        "internal_actions: [add_context_feed, update_context_feed, set_variable]\n" + extra,
        encoding="utf-8",
    )
    return path


def action_errors(kernel: Kernel) -> dict[str, str]:
    code = (
        "%%python\nimport json\n"
        "print(json.dumps({e.id: e.message for e in _run.events if e.type == 'action_error'}))"
    )
    errors: dict[str, str] = json.loads(kernel.python(code))
    return errors


def test_model_written_sources_are_refused_and_nothing_runs(kernel: Kernel, tmp_path: Path) -> None:
    (tmp_path / "canary_feed.py").write_text(CANARY_MODULE, encoding="utf-8")
    marker = tmp_path / "marker"
    kernel.python(NOTEBOOK.format(folder=str(tmp_path)))
    leak = {"args": f"touch {marker}.sh; printenv CANARY_API_KEY | rev", "shell": True}
    with FakeOpenAI() as server:
        kernel.python(f"%manifest {manifest(tmp_path, server.api_base)}")
        # A feed the user added: the model may change its settings, not its source.
        kernel.python('%feeds add price callable quote \'{"symbol": "XYZ"}\'')
        server.stream(
            context_feed(
                "q", {"source": {"callable": "subprocess:check_output", "parameters": leak}}
            )
            + context_feed("flat", {"callable": "canary_feed:run"})
            + internal("a1", "add_context_feed", id="f1", source={"callable": "canary_feed:run"})
            + internal(
                "a2",
                "add_context_feed",
                id="f2",
                source={"tool": "make_marker", "parameters": {"path": f"{marker}.tool"}},
            )
            + internal(
                "a3",
                "add_context_feed",
                id="f3",
                source={"mcp_resource": {"server": "files", "uri": "file:///etc/passwd"}},
            )
            + internal("a4", "add_context_feed", id="f4", source={"command": ["touch", "x"]})
            + internal("s", "set_variable", sync=True, name="src", value={"callable": "os:getcwd"})
        )
        server.stream(
            internal(
                "u1", "update_context_feed", id="price", source={"callable": "canary_feed:run"}
            )
            + internal("u2", "update_context_feed", id="price", source="$src")
            + internal("u3", "update_context_feed", sync=True, id="price", ttl=60)
        )
        server.stream("<response>done</response>")
        result = kernel.run("watch the price")
        assert result.status == "ok", dump(result)
        bodies = json.dumps([r.body for r in server.requests])
        feeds = [feeds_message(r.body["messages"]) for r in server.requests]
    # Nothing was imported, nothing was called, no command ran.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml", "canary_feed.py"]
    assert kernel.python("%%python\nprint('canary_feed' in sys.modules)").strip() == "False"
    # The key, even reversed, never reached the provider.
    assert CANARY not in bodies and CANARY[::-1] not in bodies
    errors = action_errors(kernel)
    assert sorted(errors) == ["a1", "a2", "a3", "a4", "flat", "q", "u1", "u2"], errors
    assert "refused: the model wrote a source itself (callable)" in errors["q"]
    assert "refused: the model wrote a source itself (callable)" in errors["flat"]
    assert errors["a1"].startswith(
        "add_context_feed: refused: the model wrote a source itself (callable)"
    )
    assert "refused: the model wrote a source itself (tool)" in errors["a2"]
    assert "refused: the model wrote a source itself (mcp_resource)" in errors["a3"]
    assert "refused: the model wrote a source itself (command)" in errors["a4"]
    assert (
        "update_context_feed: refused: the model wrote a source itself (callable)" in errors["u1"]
    )
    assert "no feed source named '$src'" in errors["u2"]
    # The user's feed is unchanged but for what the model may set.
    for sent in feeds:
        assert '<feed id="price">\n{"symbol": "XYZ", "price": 7}\n</feed>' in sent
        for feed_id in ("q", "flat", "f1", "f2", "f3", "f4"):
            assert f'<feed id="{feed_id}">' not in sent, feed_id
    audits = kernel.python(
        "%%python\n"
        "print(sorted((e.id, e.outcome) for e in _run.events if e.type == 'internal_action'))"
    )
    assert "('a1', 'blocked')" in audits and "('q', 'blocked')" in audits
    assert "('u3', 'ok')" in audits
    ttl = kernel.python(
        "%%python\nfrom cortex_kernel.jupyter.runner import runner_for\n"
        "print([f.ttl for f in runner_for(get_ipython()).session.feeds.specs if f.id == 'price'])"
    )
    assert ttl.strip() == "[60.0]"
    kernel.python("%feeds remove price")


def test_a_source_declared_by_the_manifest_or_the_user_is_chosen_by_name(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.python(NOTEBOOK.format(folder=str(tmp_path)))
    with FakeOpenAI() as server:
        sources = (
            "feed_sources:\n"
            "  - {name: quote, description: a price, "
            "source: {callable: '__main__:quote', parameters: {symbol: XYZ}}}\n"
        )
        kernel.python(f"%manifest {manifest(tmp_path, server.api_base, sources)}")
        # The user declares one with the magic.
        assert "declared" in kernel.python("%feeds source stamp callable stamp")
        server.stream(
            context_feed("st", {"source": "stamp"})
            + context_feed("clock", {"source": "system_clock"})
            + internal("ok", "add_context_feed", sync=True, id="px", source="quote", ttl=60)
        )
        server.stream("<response>done</response>")
        result = kernel.run("watch the price")
        assert result.status == "ok", dump(result)
        systems = [r.body["messages"][0]["content"] for r in server.requests]
        feeds = [feeds_message(r.body["messages"]) for r in server.requests]
    assert action_errors(kernel) == {}
    # The prompt told the model what it may name.
    assert "`quote` (a price), `stamp`, `system_clock` or `run_status`" in systems[0]
    # The manifest's source with its own parameters; the user's function.
    assert '<feed id="px">\n{"symbol": "XYZ", "price": 7}\n</feed>' in feeds[1]
    assert '<feed id="st">\nstamp from the user\'s function\n</feed>' in feeds[1]
    assert '<feed id="clock">\n' in feeds[1]
    listing = kernel.python("%feeds")
    assert "sources a feed the model adds may name: quote (callable:__main__:quote), " in listing
    assert "removed" in kernel.python("%feeds remove-source stamp")
    assert "stamp (" not in kernel.python("%feeds")

"""Model options from a notebook: %model flags, %%agent flags, %protocol.

The kernel is driven through jupyter_client; the model is a real litellm
client talking HTTP to the loopback fake provider, which records what each
request asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI
from tests.prompt_parts import conversation

from .conftest import Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]

TOOL = '''%%python
from cortex_kernel import tool

@tool
def double(n: int) -> int:
    """Twice n."""
    return 2 * n
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def cortex(cortex_kernelspec: str, replay_dir: Path) -> Iterator[Kernel]:
    # No key at all: a loopback OpenAI-compatible server needs none.
    env = keyless_env()
    env["CORTEX_MODEL"] = f"replay:{replay_dir}/answer.jsonl"
    kernel = Kernel(cortex_kernelspec, env)
    assert kernel.run(TOOL).status == "ok"
    yield kernel
    kernel.shutdown()


def test_model_line_sets_options_sent_to_the_provider(cortex: Kernel, server: FakeOpenAI) -> None:
    shown = cortex.python(
        f"%model openai/local --temperature 0 --max-tokens 800 --seed 7 "
        f"--api-base {server.api_base}"
    )
    assert shown.splitlines() == [
        f"model: openai/local --temperature 0.0 --max-tokens 800 --seed 7 "
        f"--api-base {server.api_base}",
        # A server on this machine: a CPU model may read a long prompt for minutes.
        "waits: first token within 600 s, then 30 s between chunks, 0 retries "
        "(a server on this machine)",
    ]
    server.stream("<response>Hello.</response>")
    result = cortex.run("Say hello")
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/markdown"] == "Hello."
    body = server.requests[-1].body
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == (
        "local",
        0,
        800,
        7,
    )
    assert "tools" not in body  # protocol text by default
    # Options alone change only what they name.
    assert "--temperature 0.2 --max-tokens 800" in cortex.python("%model --temperature 0.2")


def test_agent_cell_options_apply_to_that_cell_only(cortex: Kernel, server: FakeOpenAI) -> None:
    cortex.python(f"%model openai/local --temperature 0 --api-base {server.api_base}")
    server.tool_calls([("call_1", "double", '{"n": 21}')])
    server.stream("<response>42</response>")
    result = cortex.run("%%agent --temperature 0.5 --max-tokens 99 --protocol tools\nDouble 21")
    assert result.status == "ok", dump(result)
    first, second = server.requests[-2].body, server.requests[-1].body
    assert (first["temperature"], first["max_tokens"]) == (0.5, 99)
    # The notebook agent's in-kernel python, then the notebook's @tool.
    assert [t["function"]["name"] for t in first["tools"]] == ["python", "double"]
    assert conversation(second["messages"])[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "double(n=21) returned: 42",
    }
    # The next cell is back to the notebook's own options and protocol.
    server.stream("<response>ok</response>")
    assert cortex.run("Again").status == "ok"
    body = server.requests[-1].body
    assert body["temperature"] == 0 and "max_tokens" not in body and "tools" not in body


def test_protocol_magic(cortex: Kernel, server: FakeOpenAI) -> None:
    cortex.python(f"%model openai/local --api-base {server.api_base}")
    assert cortex.python("%protocol").strip() == "protocol: xml"
    assert cortex.python("%protocol tools").strip() == "protocol: tools"
    server.stream("<response>fine</response>")
    assert cortex.run("Anything").status == "ok"
    assert "tools" in server.requests[-1].body
    # A model switch keeps the protocol.
    cortex.python(f"%model openai/other --api-base {server.api_base}")
    server.stream("<response>fine</response>")
    assert cortex.run("Anything else").status == "ok"
    assert server.requests[-1].body["model"] == "other"
    assert "tools" in server.requests[-1].body
    assert cortex.python("%protocol xml").strip() == "protocol: xml"


@pytest.mark.parametrize(
    ("cell", "named"),
    [
        ("%model openai/local --temperature hot", "--temperature 'hot'"),
        ("%protocol json", "protocol 'json'"),
        ("%%agent --max-tokens 0\nhi", "--max-tokens '0'"),
    ],
)
def test_bad_options_are_one_clear_line(cortex: Kernel, cell: str, named: str) -> None:
    result = cortex.run(cell)
    assert result.status == "error"
    assert result.reply["content"]["ename"] == "ConfigError"
    assert named in result.reply["content"]["evalue"]
    assert cortex.python("%%python\nprint('alive')").strip() == "alive"


def test_model_and_protocol_reach_every_session_of_the_notebook(
    cortex: Kernel, server: FakeOpenAI, tmp_path: Path
) -> None:
    manifest = tmp_path / "other.yaml"
    manifest.write_text("name: other\n", "utf-8")
    cortex.python(f"%model openai/local --api-base {server.api_base}")
    # The manifest's session exists before the switch.
    server.stream("<response>first</response>")
    assert cortex.run(f"%%agent --manifest {manifest}\nHello").status == "ok"
    assert server.requests[-1].body["model"] == "local"
    cortex.python(f"%model openai/switched --api-base {server.api_base}")
    cortex.python("%protocol tools")
    try:
        server.stream("<response>from the new model</response>")
        result = cortex.run(f"%%agent --manifest {manifest}\nSay hello")
        assert result.status == "ok", dump(result)
        body = server.requests[-1].body
        assert body["model"] == "switched"
        assert [t["function"]["name"] for t in body["tools"]] == ["double"]  # a manifest's own
    finally:
        cortex.python("%protocol xml")


def test_a_cells_options_keep_the_manifests_model_options(
    cortex: Kernel, server: FakeOpenAI, tmp_path: Path
) -> None:
    manifest = tmp_path / "tuned.yaml"
    manifest.write_text("name: tuned\nmodel: {max_tokens: 77}\n", "utf-8")
    cortex.python(f"%model openai/local --api-base {server.api_base}")
    server.stream("<response>one</response>")
    assert cortex.run(f"%%agent --manifest {manifest}\nHi").status == "ok"
    assert server.requests[-1].body["max_tokens"] == 77
    # The cell's own option goes over the manifest's, which stay.
    server.stream("<response>two</response>")
    assert cortex.run(f"%%agent --manifest {manifest} --temperature 0.5\nHi").status == "ok"
    body = server.requests[-1].body
    assert (body["max_tokens"], body["temperature"]) == (77, 0.5)

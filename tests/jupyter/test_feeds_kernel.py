"""Context feeds in the real kernel, through jupyter_client: the ``notebook_variables``
feed as the provider receives it (litellm's HTTP path to a loopback server),
``%feeds`` / ``%feeds add`` / ``%feeds remove``, and an interrupt while a
``periodic`` feed refreshes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI
from tests.prompt_parts import feeds_message

from .conftest import Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]

SECRET = "sk-feeds-test-5f2c9a71e3"

USER_CELL = """%%python
import os, json

class Frame:
    \"\"\"A DataFrame-like object: shape, columns, a multi-line repr.\"\"\"
    shape = (3, 2)
    columns = ["city", "temp"]
    def __repr__(self):
        return "   city  temp\\n0  Oslo     3\\n1  Rome    14\\n2  Lima    19"

sales = Frame()
readings = [12, 15, 11, 19]
note = "key copied: " + os.environ["DEMO_API_KEY"]
github_token = "ghp-not-from-the-environment-1234"
_private = 42

def helper():
    return 1
"""


@pytest.fixture(scope="module")
def kernel(cortex_kernelspec: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = keyless_env()
    env["CORTEX_TRANSCRIPT_DIR"] = str(tmp_path_factory.mktemp("transcripts"))
    env["DEMO_API_KEY"] = SECRET
    kernel = Kernel(cortex_kernelspec, env)
    yield kernel
    kernel.shutdown()


def feed(feeds: str, feed_id: str) -> str:
    """The body of one feed's block in a feeds message."""
    body = feeds.split(f'<feed id="{feed_id}">\n', 1)[1]
    return body.split("\n</feed>", 1)[0]


def test_the_model_sees_the_users_variables_and_never_a_secret(kernel: Kernel) -> None:
    kernel.python(USER_CELL)
    set_variable = json.dumps({"name": "set_variable", "parameters": {"name": "made", "value": 7}})
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream(f'<action type="internal" mode="sync" id="s">{set_variable}</action>')
        server.stream("<response>done</response>")
        result = kernel.run("what data do I have?")
        assert result.status == "ok", dump(result)
        bodies = [r.body for r in server.requests]
    first = feed(feeds_message(bodies[0]["messages"]), "notebook_variables")
    lines = first.splitlines()
    # Names, types and shapes; no value unless the user opts in.
    assert "sales: Frame (shape (3, 2), columns ['city'], ['temp'])" in lines
    assert "readings: list (len 4)" in lines
    assert "github_token: str (len 33)" in lines
    assert "note: str (len 36)" in lines
    # Not data, or not the user's: private names, functions, classes, modules, IPython's own.
    for name in ("_private", "helper", "Frame", "os", "json", "In", "Out", "get_ipython"):
        assert not any(line.startswith(f"{name}:") for line in lines), name
    # The agent's own binding is not the user's variable.
    second = feed(feeds_message(bodies[1]["messages"]), "notebook_variables")
    assert "made:" not in second and "readings:" in second
    # The secret reached the provider nowhere, nor the transcript.
    assert SECRET not in json.dumps(bodies) and "ghp-not-from" not in json.dumps(bodies)
    path = kernel.python("%%python\nprint(_run.transcript)").strip()
    assert SECRET not in Path(path).read_text(encoding="utf-8")


def test_an_echo_of_the_feeds_message_is_not_the_answer(kernel: Kernel) -> None:
    """Seen from a small model after a tool result: it wrote the feeds message out again."""
    kernel.python(USER_CELL)
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream("# Context feeds\n\nFrom the runtime, not the user: readings, 12, 15")
        server.stream("<response>You have `sales` and `readings`.</response>")
        result = kernel.run("what data do I have?")
        bodies = [r.body for r in server.requests]
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/plain"].strip() == "You have `sales` and `readings`."
    # The second request is the repair turn's: it asks for the answer.
    assert "You have not given a final answer yet" in json.dumps(bodies[1]["messages"])
    assert "repeated the context feeds message" in json.dumps(result.iopub, default=str)


CREDENTIALS_CELL = """%%python
creds = {"user": "admin", "pw": "Tr0ub4dor-horse-91"}
db_url = "postgresql://admin:Pg-s3cret-pass@db.internal:5432/prod"
request_headers = {"Authorization": "Bearer ghp_R4nd0mT0kenV4lueF0rTest1ngAbcdef1234"}
auth_line = "Authorization: Bearer ghp_R4nd0mT0kenV4lueF0rTest1ngAbcdef1234"
aws_keys = ("AKIAZ7Q2EXAMPLE4TEST", "q8Vd2LmP4xR7tY1uN6sK9wE3zA5cB0fH2jG8kL4m")
city = "Oslo"
"""
# Every credential above, and pieces of them a cut repr could leave.
CREDENTIAL_PARTS = (
    "Tr0ub4dor",
    "Pg-s3cret-pass",
    "ghp_R4nd0m",
    "R4nd0mT0ken",
    "AKIAZ7Q2EXAMPLE4TEST",
    "q8Vd2LmP4xR7",
    "EXAMPLE4TEST",
)


def test_notebook_credentials_never_reach_the_provider(kernel: Kernel) -> None:
    kernel.python(CREDENTIALS_CELL)
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream("<response>seen</response>")
        assert kernel.run("what do I have?").status == "ok"
        assert "values on" in kernel.python("%feeds values on")
        server.stream("<response>seen</response>")
        assert kernel.run("and now?").status == "ok"
        kernel.python("%feeds values off")
        server.stream("<response>seen</response>")
        assert kernel.run("and now?").status == "ok"
        bodies = [r.body for r in server.requests]
    default = feed(feeds_message(bodies[0]["messages"]), "notebook_variables").splitlines()
    for line in (
        "creds: dict (len 2)",
        "db_url: str (len 55)",
        "request_headers: dict (len 1)",
        "auth_line: str (len 62)",
        "aws_keys: tuple (len 2)",
        "city: str (len 4)",
        "readings: list (len 4)",
    ):
        assert line in default, line
    # Opted in: ordinary values show, credentials do not.
    values = feed(feeds_message(bodies[1]["messages"]), "notebook_variables").splitlines()
    assert "city: str (len 4) = 'Oslo'" in values
    assert "readings: list (len 4) = [12, 15, 11, 19]" in values
    assert "creds: dict (len 2) = (hidden: the name looks secret)" in values
    assert "db_url: str (len 55) = 'postgresql://admin:***@db.internal:5432/prod'" in values
    assert "request_headers: dict (len 1) = {'Authorization': ***}" in values
    assert "auth_line: str (len 62) = 'Authorization: Bearer ***'" in values
    assert "aws_keys: tuple (len 2) = ('***', '***')" in values
    # Off again: no values.
    assert "city: str (len 4)" in feed(feeds_message(bodies[2]["messages"]), "notebook_variables")
    sent = json.dumps(bodies)
    for part in CREDENTIAL_PARTS:
        assert part not in sent, part
    assert "'Oslo'" not in feeds_message(bodies[2]["messages"])
    kernel.python("%%python\ndel creds, db_url, request_headers, auth_line, aws_keys, city")


def test_feeds_magic_adds_shows_and_removes(kernel: Kernel) -> None:
    kernel.python("%%python\ndef quote(symbol):\n    return {'symbol': symbol, 'price': 7}\n")
    listing = kernel.python("%feeds")
    assert listing.splitlines()[0].split() == ["feed", "type", "source", "age", "size", "value"]
    assert "notebook_variables" in listing
    added = kernel.python('%feeds add quote --ttl 60 callable quote \'{"symbol": "XYZ"}\'')
    assert "context feed 'quote' added (on_demand)" in added
    assert "(not fetched yet" in kernel.python("%feeds")
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream("<response>seen</response>")
        result = kernel.run("price?")
        assert result.status == "ok", dump(result)
        messages = server.requests[0].body["messages"]
    feeds = feeds_message(messages)
    assert feed(feeds, "quote").strip() == '{"symbol": "XYZ", "price": 7}'
    # Feeds in id order, after the conversation; the system prompt has none.
    assert feeds.index('<feed id="notebook_variables">') < feeds.index('<feed id="quote">')
    assert "<feed" not in messages[0]["content"]
    row = next(line for line in kernel.python("%feeds").splitlines() if line.startswith("quote"))
    cells = row.split()
    assert cells[1:3] == ["on_demand", "callable:__main__:quote"]
    assert cells[4:6] == ["s", "29"] and cells[6] == "B"  # age in seconds, size in bytes
    assert row.endswith('{"symbol": "XYZ", "price": 7}')
    assert kernel.python("%feeds show quote").strip() == '{"symbol": "XYZ", "price": 7}'
    assert "removed" in kernel.python("%feeds remove quote")
    assert "quote" not in kernel.python("%feeds")
    # Bad input: one clear error, the kernel stays.
    for line, message in (
        ("%feeds remove quote", "no context feed 'quote'"),
        ("%feeds add x nonsense", "cannot read the source 'nonsense'"),
        ("%feeds add x callable missing_function", "no function 'missing_function'"),
        ("%feeds add x tool t '[1]'", "parameters must be a JSON object"),
        ("%feeds add x --interval -1 internal system_clock", "interval"),
    ):
        bad = kernel.run(line)
        assert bad.status == "error", line
        assert message in bad.reply["content"]["evalue"], bad.reply["content"]["evalue"]
    # notebook_variables can be switched off, and on again.
    kernel.python("%feeds remove notebook_variables")
    assert "notebook_variables" not in kernel.python("%feeds")
    kernel.python("%feeds add notebook_variables internal notebook_variables")
    assert "notebook_variables  internal" in kernel.python("%feeds")


TICKER_CELL = """%%python
import anyio
from cortex_kernel.jupyter.runner import runner_for

state = {"calls": 0, "cancelled": 0}

async def ticker():
    state["calls"] += 1
    if state["calls"] > 1:
        print("refresh hangs", flush=True)  # the test interrupts once it reads this
        try:
            await anyio.sleep_forever()  # this refresh hangs until cancelled
        finally:
            state["cancelled"] += 1
    return f"tick {state['calls']}"

async def nap() -> str:
    \"\"\"Wait a long time.\"\"\"
    await anyio.sleep(60)
    return "rested"

runner_for(get_ipython()).session.tools.register(nap)
"""


def test_interrupt_while_a_periodic_feed_refreshes(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python(TICKER_CELL)
    kernel.python("%feeds add ticks --interval 0.02 callable ticker")
    turns = tmp_path / "nap.jsonl"
    action = '<action type="tool" mode="sync" id="t1">{"name": "nap", "parameters": {}}</action>'
    turns.write_text(json.dumps({"content": action}) + "\n", encoding="utf-8")
    msg_id = kernel.send(f"%%agent --model replay:{turns}\nwait")
    kernel.wait_for_op(msg_id, "n", "t1", "running", timeout=20)
    kernel.wait_for_stream(msg_id, "refresh hangs", timeout=20)  # the second refresh is on
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
    # The kernel is alive; the hanging refresh was cancelled, and no refresher is
    # left to call the source again (the run's task group ended with the cell).
    check = (
        "%%python\nimport asyncio\n"
        "left = [t for t in asyncio.all_tasks() if 'run_periodic' in repr(t.get_coro())]\n"
        "print(state['calls'] >= 2, state['cancelled'], len(left))"
    )
    assert kernel.python(check).split() == ["True", "1", "0"]
    kernel.python("%feeds remove ticks")

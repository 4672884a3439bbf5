"""Issue 28's case in the real kernel: a variable defined between two agent cells.

The kernel's ``notebook_variables`` feed changes with it; the follow-up cell's
request must still start with the first cell's, byte for byte, so a local
server's prefix cache keeps the system prompt and the conversation. Through
jupyter_client and litellm's HTTP path to a loopback server.
"""

from __future__ import annotations

import json

import pytest

from tests.llm.fake_openai import FakeOpenAI
from tests.prompt_parts import feeds_message

from .conftest import Kernel, dump

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]


def test_a_variable_defined_between_cells_keeps_the_prompt_prefix(keyless_kernel: Kernel) -> None:
    keyless_kernel.python("%%python\nreadings = [12, 15, 11]")
    with FakeOpenAI() as server:
        keyless_kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream("<response>Three readings.</response>")
        first = keyless_kernel.run("What data do I have?")
        assert first.status == "ok", dump(first)
        keyless_kernel.python("%%python\ncities = {'Oslo': 3, 'Rome': 14}")
        server.stream("<response>And two cities.</response>")
        second = keyless_kernel.run("And now?")
        assert second.status == "ok", dump(second)
        sent = [request.body["messages"] for request in server.requests]
    assert len(sent) == 2
    stable = sent[0][:-1]  # the system prompt and the first cell's message
    assert json.dumps(sent[1][: len(stable)]) == json.dumps(stable)
    assert "cities:" not in feeds_message(sent[0]) and "readings:" in feeds_message(sent[0])
    assert "cities: dict (len 2)" in feeds_message(sent[1])
    assert sum('<feed id="notebook_variables">' in str(m["content"]) for m in sent[1]) == 1

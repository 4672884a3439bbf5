"""A first run that does not mislead: the offline demo stays out of a real conversation.

The kernel starts with no model and no provider key, so the built-in demo
transcript answers; then ``%model`` (or a cell's ``--model``) points at a
real litellm client talking HTTP to the loopback fake provider, which
records what each request carried.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.llm.fake_openai import FakeOpenAI

from .conftest import Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]


def _no_model_env() -> dict[str, str]:
    env = keyless_env()
    env.pop("CORTEX_MODEL", None)
    return env


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def demo_kernel(cortex_kernelspec: str) -> Iterator[Kernel]:
    kernel = Kernel(cortex_kernelspec, _no_model_env())
    yield kernel
    kernel.shutdown()


def _names(kernel: Kernel, *names: str) -> dict[str, bool]:
    code = f"import json\nprint(json.dumps({{n: n in globals() for n in {list(names)!r}}}))"
    out = kernel.python(f"%%python\n{code}")
    return dict(json.loads(out))


def _sent(server: FakeOpenAI) -> str:
    return json.dumps(server.requests[-1].body["messages"])


def _on_a_real_model(
    kernel: Kernel, server: FakeOpenAI, message: str, answer: str, cell_id: str
) -> str:
    """``message`` in a cell of its own real model (the fake provider, answering ``answer``).

    Returns what the request carried.
    """
    server.stream(f"<response>{answer}</response>")
    model = f"openai/local --api-base {server.api_base}"
    result = kernel.run(f"%%agent --model {model}\n{message}", cell_id=cell_id)
    assert result.status == "ok", dump(result)
    return _sent(server)


def test_a_real_model_never_sees_the_demo(demo_kernel: Kernel, server: FakeOpenAI) -> None:
    demo = demo_kernel.run("Hello?", cell_id="cell-demo")
    assert demo.status == "ok", dump(demo)
    assert "Hello from Cortex" in demo.result_data()["text/plain"]
    assert _names(demo_kernel, "greeting", "tip", "_run") == {
        "greeting": True,
        "tip": True,
        "_run": True,
    }
    demo_kernel.python("%%python\nmine = 'kept'\ntip = 'my own tip'")

    demo_kernel.python(f"%model openai/local --api-base {server.api_base}")
    assert _names(demo_kernel, "greeting", "tip", "mine", "_run", "_response") == {
        "greeting": False,  # the demo's variable is gone
        "tip": True,  # the user reassigned it: theirs now
        "mine": True,
        "_run": False,
        "_response": False,
    }
    server.stream("<response>Hi.</response>")
    real = demo_kernel.run("What did we talk about?", cell_id="cell-real")
    assert real.status == "ok", dump(real)
    sent = _sent(server)
    assert "What did we talk about?" in sent
    assert "Hello?" not in sent and "Hello from Cortex" not in sent and "demo" not in sent
    assert "greeting" not in sent
    assert demo_kernel.python("%%python\nprint(tip, _response)").strip() == "my own tip Hi."


def test_a_cells_own_real_model_does_not_see_the_demo(
    demo_kernel: Kernel, server: FakeOpenAI
) -> None:
    assert demo_kernel.run("Hello?", cell_id="cell-demo").status == "ok"
    sent = _on_a_real_model(demo_kernel, server, "And now?", "Hi.", cell_id="cell-real")
    assert "And now?" in sent and "Hello from Cortex" not in sent and "Hello?" not in sent


def test_leaving_the_demo_keeps_a_real_models_turns(
    demo_kernel: Kernel, server: FakeOpenAI
) -> None:
    # A cell's own real model talks while the notebook is still on the demo;
    # when a real model takes over, only the demo's turns are forgotten.
    assert demo_kernel.run("Hello?", cell_id="cell-demo").status == "ok"
    _on_a_real_model(demo_kernel, server, "Remember 42.", "Noted: 42.", cell_id="cell-told")
    assert demo_kernel.run("Hello again?", cell_id="cell-demo-2").status == "ok"

    demo_kernel.python(f"%model openai/local --api-base {server.api_base}")
    server.stream("<response>42.</response>")
    real = demo_kernel.run("Which number?", cell_id="cell-real")
    assert real.status == "ok", dump(real)
    sent = _sent(server)
    assert "Remember 42." in sent and "Noted: 42." in sent
    assert "Hello again?" not in sent and "Hello?" not in sent
    assert "Hello from Cortex" not in sent

"""The kernel warms the model layer in the background once it is up.

Through jupyter_client against the installed kernel: the warm-up starts only
after the first ``kernel_info`` reply, imports litellm and makes its first
(in-memory) call, ``%%python`` cells run while it works, and the first
message then goes through litellm's real HTTP path to a loopback provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex_kernel.jupyter.warmup import WarmUp, warm_up_steps
from tests.llm.fake_openai import FakeOpenAI
from tests.test_imports import HEAVY_AT_KERNEL_START

from .conftest import Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]

# One cell while the warm-up runs: real work, an import the warm-up also
# makes (so the two meet on Python's import lock), and what it saw.
DURING = """%%python
import json, sys, time
import openai
_k = get_ipython().kernel
_total = sum(range(1000))
time.sleep(0.05)
print(json.dumps({"step": _k.warm_up.current, "done": _k.warm_up.done.is_set(), "total": _total}))
"""

STATE = """%%python
import json, sys
_k = get_ipython().kernel
_k.warm_up.done.wait(600)
print(json.dumps({
    "info_at": _k.kernel_info_at,
    "started_at": _k.warm_up.started_at,
    "ran": _k.warm_up.ran,
    "litellm": "litellm" in sys.modules,
}))
"""

HEAVY = """%%python
import sys
_heavy = {heavy!r}
print(" ".join(sorted(
    name for name in sys.modules
    if any(name == prefix or name.startswith(prefix + ".") for prefix in _heavy)
)))
"""


@pytest.fixture
def kernel(cortex_kernelspec: str, tmp_path: Path) -> Iterator[Kernel]:
    env = keyless_env()
    env.pop("CORTEX_MODEL", None)
    env.pop("CORTEX_WARM_UP", None)
    env["CORTEX_TRANSCRIPT_DIR"] = str(tmp_path / "transcripts")
    kernel = Kernel(cortex_kernelspec, env)
    yield kernel
    kernel.shutdown()


def test_warm_up_runs_after_kernel_info_and_cells_run_during_it(kernel: Kernel) -> None:
    seen: list[dict[str, object]] = []
    for _ in range(2000):  # bounded: each cell takes >= 50 ms
        seen.append(json.loads(kernel.python(DURING)))
        if seen[-1]["done"]:
            break
    assert all(cell["total"] == 499500 for cell in seen)
    # At least one cell ran while a step was under way (an import cannot pause).
    assert any(cell["step"] for cell in seen), seen

    state = json.loads(kernel.python(STATE))
    assert state["info_at"] is not None and state["started_at"] is not None
    assert state["started_at"] >= state["info_at"]  # kernel_info was not kept waiting
    names = [name for name, _, _ in state["ran"]]
    assert names[-1] == "_warm_litellm"
    assert all(ok for _, _, ok in state["ran"]), state["ran"]
    assert state["litellm"] is True

    # The first message after the warm-up: litellm's real HTTP path, unaffected.
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream("<response>Warm hello.</response>", chunk_size=4)
        result = kernel.run("Say hello")
        assert result.status == "ok", dump(result)
        assert result.result_data()["text/plain"] == "Warm hello."
        assert len(server.requests) == 1


def test_warm_up_can_be_switched_off_and_skips_litellm_for_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CORTEX_WARM_UP", "0")
    assert WarmUp().start() is False
    replay = [step.__name__ for step in warm_up_steps({"CORTEX_MODEL": "replay:x.jsonl"})]
    assert replay == ["import cortex_kernel.agent", "import cortex_kernel.jupyter.view"]
    assert "_warm_litellm" in [step.__name__ for step in warm_up_steps({})]


def test_kernel_info_and_python_cells_import_nothing_heavy(cortex_kernelspec: str) -> None:
    # Without the warm-up, only the start, kernel_info and the cell itself ran:
    # the runtime, pydantic and litellm wait for the first agent cell or magic.
    env = keyless_env()
    env.pop("CORTEX_MODEL", None)
    env["CORTEX_WARM_UP"] = "0"
    kernel = Kernel(cortex_kernelspec, env)
    try:
        assert kernel.python(HEAVY.format(heavy=HEAVY_AT_KERNEL_START)).strip() == ""
        assert kernel.python("%%python\nprint(6 * 7)").strip() == "42"
        assert kernel.python(HEAVY.format(heavy=HEAVY_AT_KERNEL_START)).strip() == ""
    finally:
        kernel.shutdown()

"""The kernel leaves the process as the user has it: environment and garbage collector.

Through jupyter_client against the installed kernel: a ``%%python`` cell
reads ``os.environ`` and ``gc.get_freeze_count()`` before and after an agent
cell whose model goes through litellm's real HTTP path to a loopback
server, and after the background warm-up (which imports litellm and makes
its first in-memory call).

One variable may change, and not by us: litellm's own import sets
``TIKTOKEN_CACHE_DIR`` to its bundled tokenizers (tiktoken reads it at every
encoding load, so litellm's token estimates would go to the network without
it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.fake_openai import FakeOpenAI

from .conftest import Kernel, dump, keyless_env

pytestmark = [pytest.mark.kernel, pytest.mark.filterwarnings("ignore:Accessing the 'model_")]

#: Set by litellm's import itself (see the module's docstring).
LITELLM_OWN = {"TIKTOKEN_CACHE_DIR"}

SNAPSHOT = """%%python
import gc as _gc, os as _os
_environ_before = dict(_os.environ)
print(_gc.get_freeze_count())
"""

CHANGED = """%%python
import gc as _gc, json as _json, os as _os
print(_json.dumps({
    "frozen": _gc.get_freeze_count(),
    "changed": sorted(
        key for key in {*_environ_before, *_os.environ}
        if _environ_before.get(key) != _os.environ.get(key)
    ),
}))
"""

# The environment the process started with (/proc/self/environ is not
# rewritten by os.environ), against the one it has now.
SINCE_START = """%%python
import gc as _gc, json as _json, os as _os
_k = get_ipython().kernel
with open("/proc/self/environ", "rb") as _f:
    _start = dict(
        _line.decode().split("=", 1) for _line in _f.read().split(b"\\0") if b"=" in _line
    )
print(_json.dumps({
    "ran": [name for name, _, ok in _k.warm_up.ran if ok],
    "frozen": _gc.get_freeze_count(),
    "changed": sorted(
        key for key in {*_start, *_os.environ} if _start.get(key) != _os.environ.get(key)
    ),
}))
"""


WARMED = "%%python\nprint(get_ipython().kernel.warm_up.done.is_set())"


def _env(tmp_path: Path, warm_up: bool) -> dict[str, str]:
    env = keyless_env()
    for name in ("CORTEX_MODEL", "CORTEX_WARM_UP", "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"):
        env.pop(name, None)
    if not warm_up:
        env["CORTEX_WARM_UP"] = "0"
    env["CORTEX_TRANSCRIPT_DIR"] = str(tmp_path / "transcripts")
    return env


@pytest.fixture
def cold(cortex_kernelspec: str, tmp_path: Path) -> Iterator[Kernel]:
    """A kernel without the warm-up: litellm is first imported by the agent cell."""
    kernel = Kernel(cortex_kernelspec, _env(tmp_path, warm_up=False))
    yield kernel
    kernel.shutdown()


def _agent_cell(kernel: Kernel) -> None:
    with FakeOpenAI() as server:
        kernel.python(f"%model openai/local --api-base {server.api_base}")
        server.stream("<response>Hello.</response>", chunk_size=4)
        result = kernel.run("Say hello")
        assert result.status == "ok", dump(result)
        assert result.result_data()["text/plain"] == "Hello."
        assert len(server.requests) == 1


def test_an_agent_cell_changes_no_environment_and_freezes_nothing(cold: Kernel) -> None:
    assert kernel_says(cold, SNAPSHOT) == 0
    _agent_cell(cold)
    after = json.loads(cold.python(CHANGED))
    assert after["frozen"] == 0  # no object hidden from the cycle collector
    assert set(after["changed"]) <= LITELLM_OWN, after["changed"]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/self/environ")
def test_the_warm_up_changes_no_environment_and_freezes_nothing(
    cortex_kernelspec: str, cold: Kernel, tmp_path: Path
) -> None:
    # What the kernel itself (ipykernel: TERM, PAGER, MPLBACKEND…) changes at
    # start, without any warm-up: the baseline.
    baseline = set(json.loads(cold.python(SINCE_START))["changed"])
    warm = Kernel(cortex_kernelspec, _env(tmp_path, warm_up=True))
    try:
        deadline = time.monotonic() + 600
        while warm.python(WARMED).strip() != "True":
            assert time.monotonic() < deadline, "the warm-up never finished"
            # Not a synchronisation: a warm-up step starts only while no cell runs.
            time.sleep(0.2)
        state = json.loads(warm.python(SINCE_START))
        assert state["ran"][-1] == "_warm_litellm", state
        assert state["frozen"] == 0
        assert set(state["changed"]) <= baseline | LITELLM_OWN, state["changed"]
        _agent_cell(warm)
        after = json.loads(warm.python(SINCE_START))
        assert after["frozen"] == 0
        assert set(after["changed"]) <= baseline | LITELLM_OWN, after["changed"]
    finally:
        warm.shutdown()


def kernel_says(kernel: Kernel, code: str) -> int:
    """The integer a ``%%python`` cell prints."""
    return int(kernel.python(code).strip())

"""Dask tools in the real Cortex kernel (jupyter_client): the notebook's own Client is
found, the view says where each call runs, and an interrupt leaves nothing running
on the cluster while the kernel stays ready."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Kernel, dump

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.kernel

SPIN_TOOL = """%%python
import time
from distributed import Client
from cortex_kernel import tool

client = Client("{address}")

@tool(executor="dask")
def spin(seconds: float) -> float:
    \"\"\"Pure-Python work for some seconds.\"\"\"
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        pass
    return seconds
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as made:
        yield made


def spins(path: Path, *seconds: float) -> Path:
    actions = "".join(
        f'<action type="tool" mode="async" id="s{i}">'
        + json.dumps({"name": "spin", "parameters": {"seconds": s}})
        + "</action>"
        for i, s in enumerate(seconds)
    )
    path.write_text(
        json.dumps({"content": actions})
        + "\n"
        + json.dumps({"content": "<response>$s0</response>"})
        + "\n",
        encoding="utf-8",
    )
    return path


def test_dask_tools_from_a_notebook_client_and_an_interrupt_that_leaves_nothing(
    cortex: Kernel, cluster: Any, tmp_path: Path
) -> None:
    cortex.python(SPIN_TOOL.format(address=cluster.scheduler_address))
    with distributed.Client(cluster, set_as_default=False) as eyes:
        workers = set(eyes.scheduler_info()["workers"])
        # A run that finishes: the answer, and where each call ran.
        done = cortex.run(f"%%agent --model replay:{spins(tmp_path / 'quick.jsonl', 0.2, 0.3)}\ngo")
        assert done.status == "ok", dump(done)
        final = done.of_type("update_display_data")[-1]["content"]["data"]["text/plain"]
        placed = [line for line in final.splitlines() if " tool spin " in line]
        assert len(placed) == 2 and all(" on tcp://" in line for line in placed), final
        assert {line.split(" on ")[1].split()[0] for line in placed} <= workers
        # A run interrupted while both workers spin (a third call queued behind
        # them; different arguments, as identical calls of a turn run once).
        # The calls would spin for 10 minutes: a reply within the wait below
        # means the interrupt did not wait for them.
        msg_id = cortex.send(
            f"%%agent --model replay:{spins(tmp_path / 'slow.jsonl', 600, 601, 602)}\ngo"
        )
        cortex.wait_for_op(msg_id, "n", "s1", "running", timeout=60)
        deadline = time.monotonic() + 60
        while len(eyes.call_stack()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(eyes.call_stack()) == 2, "both workers should be busy"
        cortex.km.interrupt_kernel()
        result = cortex.collect(msg_id, timeout=60)
        assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
        # Nothing processing on the scheduler, no worker thread still spinning:
        # not the queued call either, which a worker could start after the
        # interrupt had reached it (dask_task remembers the interrupted keys).
        deadline = time.monotonic() + 60
        while (
            eyes.call_stack() or any(eyes.processing().values())
        ) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert eyes.call_stack() == {}
        assert not any(eyes.processing().values())
    # The kernel is ready and its own Client still works.
    assert cortex.python("%%python\nprint(client.submit(sum, [1, 2]).result())").strip() == "3"
    cortex.python("%%python\nclient.close()")

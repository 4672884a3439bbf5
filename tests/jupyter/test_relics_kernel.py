"""Relics in the real kernel (jupyter_client): one of each kind kept across cells,
%relics and the Python API, an interrupt during a relic call, and a shutdown that
leaves no process or container behind."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.docker_support import TEST_LABEL, engine_or_skip, new_token, our_containers
from tests.executors.test_relics import INCR_DOCKER, relic
from tests.replays import write_turns

from .conftest import Kernel, alive, dump

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]


def replay(tmp_path: Path, name: str, *turns: str) -> Path:
    return write_turns(tmp_path / f"{name}.jsonl", *turns)


def manifest(tmp_path: Path, token: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "relics:\n"
        "  - {name: counter, kind: python, class: 'tests.executors.relic_samples:Counter'}\n"
        "  - {name: store, kind: sqlite}\n"
        "  - name: web\n"
        "    kind: server\n"
        f"    command: ['{sys.executable}', -m, tests.executors.relic_samples, '{{port}}']\n"
        f"    cwd: '{ROOT}'\n"
        "    operations: {pid: {}, nap: {}, incr: {}}\n"
        "  - name: box\n"
        "    kind: docker\n"
        f"    docker: {{command: [sleep, infinity], labels: {{{TEST_LABEL}: '{token}'}}}}\n"
        f"    operations: {{incr: {{command: [sh, -c, {json.dumps(INCR_DOCKER)}]}}}}\n"
        f"executors: {{workspace: '{tmp_path / 'ws'}'}}\n",
        encoding="utf-8",
    )
    return path


def wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_relics_live_across_cells_and_die_with_the_kernel(
    cortex_kernelspec: str, tmp_path: Path
) -> None:
    engine_or_skip()
    token = new_token()
    agent = manifest(tmp_path, token)
    kernel = Kernel(cortex_kernelspec, dict(os.environ))
    pid = 0
    try:
        first = replay(
            tmp_path,
            "first",
            relic("c", "counter", "incr", by=3)
            + relic("s", "store", "set", key="seen", value="Lyon")
            + relic("p", "web", "pid")
            + relic("b", "box", "incr"),
            "<response>$c $p $b</response>",
        )
        result = kernel.run(f"%%agent --model replay:{first} --manifest {agent}\ngo")
        assert result.status == "ok", dump(result)
        # The tree names the relic and the operation asked of it.
        assert "c relic counter.incr" in json.dumps([m["content"] for m in result.iopub])
        counter, pid_text, box = kernel.python("%%python\nprint(_response)").split()
        pid = int(pid_text)
        assert (counter, box) == ("3", "1") and alive(pid)
        listing = kernel.python("%relics")
        for line in (
            "counter  python  running",
            "store  sqlite  running",
            "web  server  running",
            "box  docker  running",
        ):
            assert line in listing, listing
        assert f"pid {pid}" in listing and "calls 1" in listing
        # A later cell: the same relics, their state kept.
        second = replay(
            tmp_path,
            "second",
            relic("c", "counter", "incr")
            + relic("g", "store", "get", key="seen")
            + relic("b", "box", "incr"),
            "<response>$c $g $b</response>",
        )
        result = kernel.run(f"%%agent --model replay:{second} --manifest {agent}\nagain")
        assert result.status == "ok", dump(result)
        assert kernel.python("%%python\nprint(_response)").strip() == "4 Lyon 2"
        # An interrupt during a relic call cancels the run; the relic lives on.
        nap = replay(
            tmp_path, "nap", relic("n", "web", "nap", mode="sync", seconds=60), "<response/>"
        )
        msg_id = kernel.send(f"%%agent --model replay:{nap} --manifest {agent}\nnap")
        kernel.wait_for_op(msg_id, "n", "n", "running", timeout=30)  # the relic call is on
        kernel.km.interrupt_kernel()
        result = kernel.collect(msg_id, timeout=30)
        assert result.reply["content"]["ename"] == "RunInterrupted", dump(result)
        # The call was cut, not waited for: cancelled, never succeeded.
        states = [op["state"] for op in kernel.ops_of(result, "n") if "state" in op]
        assert states[-1] == "cancelled" and "succeeded" not in states, states
        assert alive(pid) and "web  server  running" in kernel.python("%relics")
        # Stop one by magic, read them through the Python API.
        assert kernel.python("%relics stop counter").strip() == "stopped counter"
        states = kernel.python(
            "%%python\nimport cortex_kernel\n"
            "print({r.name: r.state for r in cortex_kernel.relics().status()})"
        )
        assert "'counter': 'stopped'" in states and "'box': 'running'" in states
        assert "unknown relic 'nope'" in kernel.python("%relics stop nope")
        assert len(our_containers(token)) == 1
        # Everything the kernel started (other test runs may share this machine).
        children = psutil.Process(kernel.pid).children(recursive=True)
    finally:
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=False)  # a shutdown_request, as a front end sends
    assert wait_gone(pid), "the server relic outlived the kernel"
    assert our_containers(token) == [], "the docker relic outlived the kernel"
    assert [c.pid for c in children if wait_gone(c.pid, 5) is False] == []


def test_relics_of_agent_cells_in_the_stock_kernel_die_with_it(tmp_path: Path) -> None:
    engine_or_skip()
    token = new_token()
    agent = manifest(tmp_path, token)
    kernel = Kernel("python3", dict(os.environ))
    pid = 0
    try:
        kernel.python("%load_ext cortex_kernel")
        turns = replay(
            tmp_path,
            "t",
            relic("p", "web", "pid") + relic("b", "box", "incr"),
            "<response>$p</response>",
        )
        result = kernel.run(f"%%agent --model replay:{turns} --manifest {agent}\ngo")
        assert result.status == "ok", dump(result)
        pid = int(kernel.python("print(_response)"))
        assert alive(pid) and len(our_containers(token)) == 1
        assert "box  docker  running" in kernel.python("%relics")
    finally:
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=False)
    # ipykernel's own shutdown: the registry's atexit hook stops them.
    assert wait_gone(pid), "the server relic outlived the kernel"
    assert our_containers(token) == [], "the docker relic outlived the kernel"

"""Python tools on a real Dask cluster, end to end through a replay model.

A ``LocalCluster`` of two worker processes (one thread each) is started by the
module; the dead-scheduler test runs its own scheduler and worker processes so
it can kill them. Results, failures, where each call ran, interrupts (nothing
left running on the cluster), a killed worker (the call still succeeds, the
retry shows), a dead scheduler (a clear error, the run goes on), large results
kept on the cluster, and a Client found in the notebook's namespace.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.replays import write_turns

distributed = pytest.importorskip("distributed")

from cortex_kernel.agent import build_session  # noqa: E402
from cortex_kernel.executors import dask_task  # noqa: E402
from cortex_kernel.executors.dask_backend import ClusterValue  # noqa: E402
from cortex_kernel.jupyter.viewstate import RunState, render_html, render_text  # noqa: E402

from .dask_tools import cube, raises_interrupted, spin  # noqa: E402

pytestmark = pytest.mark.anyio

TOOLS = "tests.executors.dask_tools"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as made:
        yield made


@pytest.fixture(scope="module")
def client(cluster: Any) -> Iterator[Any]:
    # The test's own eyes on the cluster (the session makes its own client).
    with distributed.Client(cluster, set_as_default=False) as made:
        yield made


def action(action_id: str, name: str, mode: str = "async", **parameters: Any) -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    attributes = f'type="tool" mode="{mode}" id="{action_id}" output_key="{action_id}"'
    return f"<action {attributes}>{body}</action>"


def manifest(tmp_path: Path, turns: list[str], executor: str, tools: str = "") -> Path:
    replay = tmp_path / "turns.jsonl"
    write_turns(replay, *turns)
    path = tmp_path / "agent.yaml"
    path.write_text(
        f"model: 'replay:{replay}'\nexecutor: {executor}\n"
        "limits: {action_timeout: 60}\n"
        "tools:\n"
        f"  - {{name: square, callable: '{TOOLS}:square'}}\n"
        f"  - {{name: pid, callable: '{TOOLS}:pid'}}\n"
        f"  - {{name: here, callable: '{TOOLS}:pid', executor: local}}\n"
        f"  - {{name: boom, callable: '{TOOLS}:boom'}}\n"
        f"  - {{name: spin, callable: '{TOOLS}:spin'}}\n"
        f"  - {{name: blob, callable: '{TOOLS}:blob'}}\n"
        f"  - {{name: size, callable: '{TOOLS}:size'}}\n" + tools,
        encoding="utf-8",
    )
    return path


def events_of(result: Any, kind: str) -> list[Any]:
    return [e for e in result.events if e.type == kind]


def workers_of(client: Any) -> set[str]:
    return set(client.scheduler_info()["workers"])


async def idle(client: Any, seconds: float = 10.0) -> dict[str, Any]:
    """Wait until no task is processing and no worker thread runs one; return the last stacks."""
    stacks: dict[str, Any] = {}
    with anyio.move_on_after(seconds):
        while True:
            processing = await anyio.to_thread.run_sync(client.processing)
            stacks = await anyio.to_thread.run_sync(client.call_stack)
            if not any(processing.values()) and not stacks:
                return {}
            await anyio.sleep(0.1)
    return stacks or {"processing": processing}


async def running(client: Any, key: str, seconds: float = 60.0) -> None:
    """Wait until a worker thread is running the task ``key``."""
    with anyio.fail_after(seconds):
        while True:
            stacks = await anyio.to_thread.run_sync(client.call_stack)
            if any(key in keys for keys in stacks.values()):
                return
            await anyio.sleep(0.05)


async def test_calls_run_on_the_workers_and_come_back_as_values(
    tmp_path: Path, cluster: Any, client: Any
) -> None:
    plan = "".join(action(f"s{i}", "square", x=i) for i in range(8))
    plan += action("remote", "pid") + action("local", "here") + action("bad", "boom", message="no!")
    path = manifest(
        tmp_path,
        [plan, "<response>$s7 from $remote</response>"],
        f"{{kind: dask, address: '{cluster.scheduler_address}'}}",
    )
    session = build_session(manifest=path, transcript_dir=tmp_path)
    try:
        result = await session.run("go")
    finally:
        await session.aclose()
    assert result.status == "ok", result.message
    assert [session.variables[f"s{i}"] for i in range(8)] == [i * i for i in range(8)]
    # Dask tools ran in a worker process, the local one in this process.
    assert session.variables["remote"] != os.getpid()
    assert session.variables["local"] == os.getpid()
    failed = {e.id: e for e in events_of(result, "action_failed")}
    assert failed["bad"].error == "ValueError: no!"
    assert "raise ValueError(message)" in (failed["bad"].traceback or "")
    placed = {e.id: e for e in events_of(result, "action_placed")}
    assert set(placed) == {f"s{i}" for i in range(8)} | {"remote", "bad"}
    assert {e.where for e in placed.values()} <= workers_of(client)
    assert all(e.backend == "dask" and e.moved_from is None for e in placed.values())
    # The view shows where each action ran.
    state = RunState()
    for event in result.events:
        state.apply(event)
    assert state.doc["nodes"]["s3"]["where"] == placed["s3"].where
    assert "local" not in {n for n, node in state.doc["nodes"].items() if node.get("where")}
    assert f"on {placed['s3'].where}" in render_text(state.doc)
    # The scheduler serves a dashboard: every placement links to it, and so does the view.
    assert placed["s3"].dashboard == client.dashboard_link
    assert state.doc["dashboard"] == client.dashboard_link
    assert f'href="{client.dashboard_link}"' in render_html(state.doc)
    assert await idle(client) == {}


async def test_an_interrupt_leaves_nothing_running_on_the_cluster(
    tmp_path: Path, cluster: Any, client: Any
) -> None:
    # Different arguments: identical calls of one turn would run once (docs/runtime.md).
    plan = action("a", "spin", seconds=30) + action("b", "spin", seconds=31)
    plan += action("c", "spin", seconds=32)  # queued behind the two: cancelled before it starts
    path = manifest(
        tmp_path,
        [plan, "<response>$a</response>"],
        f"{{kind: dask, address: '{cluster.scheduler_address}'}}",
    )
    session = build_session(manifest=path, transcript_dir=tmp_path)
    placed: list[str] = []
    seen: list[Any] = []
    both_placed = anyio.Event()

    def on_event(event: Any) -> None:
        seen.append(event)
        if event.type == "action_placed":
            placed.append(event.id)
            if len(placed) == 2:
                both_placed.set()

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: session.run("go", on_event=on_event))
            await both_placed.wait()
            busy = await anyio.to_thread.run_sync(client.call_stack)
            assert len(busy) == 2  # both workers are running a spin
            scope.cancel()  # what the kernel's interrupt does
    await session.aclose()
    cancelled = {e.id for e in seen if e.type == "action_cancelled"}
    assert cancelled == {"a", "b", "c"}
    assert await idle(client) == {}  # no task processing, no worker thread still spinning


async def test_a_call_interrupted_before_it_starts_stops_as_it_starts(client: Any) -> None:
    # The race an interrupt lost under load: a queued call is cancelled, the
    # interrupt (Client.run, its own connection) reaches the worker before the
    # scheduler's "free this key", and the worker starts the call as its thread
    # frees up. Here the interrupt simply comes first.
    key = f"cortex-spin-{uuid.uuid4().hex[:16]}"

    def interrupt_then_submit() -> Any:
        client.run(dask_task.interrupt, [key])
        return client.submit(
            dask_task.run_tool, spin, {"seconds": 600}, key, "cortex-test", key=key, pure=False
        )

    future = await anyio.to_thread.run_sync(interrupt_then_submit)
    try:
        stopped = await anyio.to_thread.run_sync(lambda: future.result(timeout=60))
    finally:
        await anyio.to_thread.run_sync(lambda: client.cancel([future], force=True))
        await anyio.to_thread.run_sync(lambda: client.run(dask_task.interrupt, [key]))
    # Returned, not raised: its caller cancelled it (see the next test).
    assert isinstance(stopped, InterruptedError), stopped
    assert "interrupted before it started" in str(stopped)
    assert await idle(client) == {}


def _logged_about(client: Any, key: str) -> list[str]:
    """The workers' recent log lines that name ``key``."""
    logs = client.get_worker_logs(n=200)
    return [line for lines in logs.values() for _level, line in lines if key in line]


async def test_a_stopped_call_is_not_logged_as_a_failure_and_a_failing_call_hides_its_arguments(
    client: Any,
) -> None:
    # make demo's notebook 08 printed a worker's "Compute Failed" traceback
    # for the survey its timeout stopped: the interrupt came while the worker
    # still had the task as executing. Here it comes before any cancel.
    key = f"cortex-spin-{uuid.uuid4().hex[:16]}"
    future = await anyio.to_thread.run_sync(
        lambda: client.submit(
            dask_task.run_tool, spin, {"seconds": 600}, key, "cortex-test", key=key, pure=False
        )
    )
    try:
        await running(client, key)
        hits = await anyio.to_thread.run_sync(lambda: client.run(dask_task.interrupt, [key]))
        assert [hit for keys in hits.values() for hit in keys] == [key]  # its thread was hit
        stopped = await anyio.to_thread.run_sync(lambda: future.result(timeout=60))
    finally:
        await anyio.to_thread.run_sync(lambda: client.cancel([future], force=True))
    assert isinstance(stopped, InterruptedError), stopped
    assert await idle(client) == {}
    assert await anyio.to_thread.run_sync(_logged_about, client, key) == []

    # A tool's own failure is logged, without the call's arguments (values
    # the kernel's redactor never sees).
    own = f"cortex-own-{uuid.uuid4().hex[:16]}"
    token = f"tok-{uuid.uuid4().hex}"
    failing = await anyio.to_thread.run_sync(
        lambda: client.submit(
            dask_task.run_tool,
            raises_interrupted,
            {"token": token},
            own,
            "cortex-test",
            key=own,
            pure=False,
        )
    )
    error = await anyio.to_thread.run_sync(lambda: failing.exception(timeout=60))
    assert isinstance(error, InterruptedError) and "the tool's own" in str(error)
    logged = await anyio.to_thread.run_sync(_logged_about, client, own)
    assert any("Compute Failed" in line and "InterruptedError" in line for line in logged)
    assert any("arguments are not logged" in line for line in logged)
    every_line = await anyio.to_thread.run_sync(lambda: client.get_worker_logs(n=200))
    assert token not in json.dumps(every_line)


async def test_a_killed_worker_is_retried_and_the_retry_shows(
    tmp_path: Path, cluster: Any, client: Any
) -> None:
    path = manifest(
        tmp_path,
        [action("job", "spin", mode="sync", seconds=3), "<response>done on $job</response>"],
        f"{{kind: dask, address: '{cluster.scheduler_address}'}}",
    )
    pids = await anyio.to_thread.run_sync(lambda: client.run(os.getpid))
    session = build_session(manifest=path, transcript_dir=tmp_path)
    killed: list[str] = []

    def on_event(event: Any) -> None:
        if event.type == "action_placed" and not killed:
            killed.append(event.where)
            psutil.Process(pids[event.where]).kill()  # mid-task, like a crashed machine

    try:
        result = await session.run("go", on_event=on_event)
    finally:
        await session.aclose()
    assert result.status == "ok", result.message
    placed = events_of(result, "action_placed")
    assert [e.placement for e in placed] == [1, 2]
    assert placed[1].moved_from == killed[0] and placed[1].where != killed[0]
    assert session.variables["job"]["pid"] != pids[killed[0]]
    state = RunState()
    for event in result.events:
        state.apply(event)
    node = state.doc["nodes"]["job"]
    assert node["state"] == "succeeded" and node["moved_from"] == killed[0]
    assert "retried after worker" in render_text(state.doc)
    await anyio.to_thread.run_sync(lambda: client.wait_for_workers(2, timeout=30))


async def test_large_results_stay_on_the_cluster_as_a_future(
    tmp_path: Path, cluster: Any, client: Any
) -> None:
    plan = action("big", "blob", mode="sync", n=3_000_000)
    path = manifest(
        tmp_path,
        [plan, action("n", "size", mode="sync", data="$big"), "<response>$n</response>"],
        f"{{kind: dask, address: '{cluster.scheduler_address}', keep_on_cluster: 1m}}",
    )
    session = build_session(manifest=path, transcript_dir=tmp_path)
    try:
        result = await session.run("go")
        big = session.variables["big"]
        assert isinstance(big, ClusterValue)
        assert big.type_name == "bytes" and big.length == 2_999_808 and big.nbytes > 2_000_000
        assert "kept on the Dask cluster" in repr(big) and "\\x00\\x01\\x02" in repr(big)
        # The next Dask tool got the future: the data never came to the kernel.
        assert session.variables["n"] == 2_999_808
        assert await big.fetch() == bytes(range(256)) * (3_000_000 // 256)
        assert result.status == "ok"
    finally:
        await session.aclose()


async def test_a_client_made_in_the_notebook_is_found(
    tmp_path: Path, cluster: Any, client: Any
) -> None:
    turns = [action("c", "cube", mode="sync", x=3), "<response>$c</response>"]
    path = manifest(tmp_path, turns, "local")
    namespace: dict[str, Any] = {"cube": cube, "c": client}
    session = build_session(manifest=path, transcript_dir=tmp_path, namespace=namespace)
    session.tools.collect(namespace)
    try:
        result = await session.run("go")
    finally:
        await session.aclose()
    assert result.status == "ok", result.message
    assert namespace["c"] is client  # the user's client is not replaced (and stays open)
    assert result.answer == "27"
    (placed,) = events_of(result, "action_placed")
    assert placed.where in workers_of(client)
    assert client.status == "running"


async def test_no_cluster_named_is_a_clear_action_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CORTEX_DASK_ADDRESS", raising=False)
    path = manifest(tmp_path, [action("p", "pid", mode="sync"), "<response>$p</response>"], "dask")
    session = build_session(manifest=path, transcript_dir=tmp_path)
    try:
        result = await session.run("go")
    finally:
        await session.aclose()
    (failed,) = events_of(result, "action_failed")
    assert "runs on Dask, but no cluster is named" in failed.error
    assert "CORTEX_DASK_ADDRESS" in failed.error


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def own_scheduler() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--no-dashboard"],
        **quiet,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
         "--no-dashboard", "--no-nanny"],
        **quiet,
    )  # fmt: skip
    try:
        with distributed.Client(address, timeout=30, set_as_default=False) as probe:
            probe.wait_for_workers(1, timeout=30)
        yield address, scheduler
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait(10)


async def test_a_dead_scheduler_fails_its_actions_clearly_and_the_run_goes_on(
    tmp_path: Path, own_scheduler: tuple[str, subprocess.Popen[bytes]]
) -> None:
    address, scheduler = own_scheduler
    plan = action("far", "spin", seconds=20) + action("near", "here")
    turns = [plan, action("again", "square", mode="sync", x=2), "<response>$near</response>"]
    path = manifest(tmp_path, turns, f"{{kind: dask, address: '{address}', connect_timeout: 3}}")
    session = build_session(manifest=path, transcript_dir=tmp_path)

    def on_event(event: Any) -> None:
        if event.type == "action_placed":
            scheduler.kill()

    try:
        with anyio.fail_after(40):
            result = await session.run("go", on_event=on_event)
    finally:
        await session.aclose()
    failed = {e.id: e.error for e in events_of(result, "action_failed")}
    assert f"the Dask scheduler at {address}" in failed["far"]
    assert "stopped answering" in failed["far"]
    # A later call fails at once with the same clear reason; the local tool and the run went on.
    assert f"the Dask scheduler at {address}" in failed["again"]
    assert session.variables["near"] == os.getpid()
    assert result.status == "ok" and result.answer == str(os.getpid())


async def test_the_address_can_come_from_the_environment(
    tmp_path: Path, cluster: Any, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_DASK_ADDRESS", cluster.scheduler_address)
    path = manifest(tmp_path, [action("p", "pid", mode="sync"), "<response>$p</response>"], "dask")
    session = build_session(manifest=path, transcript_dir=tmp_path)
    try:
        result = await session.run("go")
    finally:
        await session.aclose()
    assert result.status == "ok", result.message
    (placed,) = events_of(result, "action_placed")
    assert placed.where in workers_of(client)
    assert (
        session.variables["p"] in (await anyio.to_thread.run_sync(client.run, os.getpid)).values()
    )

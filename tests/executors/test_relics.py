"""``relic`` actions end to end through a replay model: a Python object, the SQLite
store and an HTTP server relic kept across runs, failing and unknown operations,
a crash and its restart, stop, a shared registry, an interrupt, the session's cleanup."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psutil
import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ConfigError
from cortex_kernel.executors.relic import RelicRegistry
from cortex_kernel.manifest import load_manifest
from cortex_kernel.runtime.session import Session
from tests.replays import write_turns

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

RELICS = f"""\
relics:
  - name: counter
    kind: python
    class: "tests.executors.relic_samples:Counter"
    options: {{start: 10}}
  - {{name: store, kind: sqlite, path: data/kv.sqlite}}
  - name: web
    kind: server
    command: ["{sys.executable}", "-m", "tests.executors.relic_samples", "{{port}}"]
    cwd: "{ROOT}"
    operations: {{incr: {{description: add by}}, get: {{}}, pid: {{}}, nap: {{}}, fail: {{}}}}
  - name: hasty
    kind: server
    command: ["{sys.executable}", "-m", "tests.executors.relic_samples", "{{port}}"]
    cwd: "{ROOT}"
    timeout: 0.5
executors: {{workspace: ws}}
"""


#: A docker relic's counter: its state is a file in the container's /tmp.
INCR_DOCKER = "n=$(cat /tmp/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /tmp/n; echo $n"


def relic(action_id: str, name: str, operation: str, mode: str = "async", **params: Any) -> str:
    body = json.dumps({"name": name, "operation": operation, "parameters": params})
    return (
        f'<action type="relic" mode="{mode}" id="{action_id}" output_key="{action_id}">'
        f"{body}</action>"
    )


def turns_file(folder: Path, name: str, *turns: str) -> Path:
    return write_turns(folder / f"{name}.jsonl", *turns)


def session(tmp_path: Path, registry: RelicRegistry | None = None) -> Session:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(RELICS, encoding="utf-8")
    return build_session(
        "replay:" + str(turns_file(tmp_path, "none", "<response>-</response>")),
        manifest=manifest,
        transcript_dir=tmp_path,
        relics=registry,
    )


async def run(s: Session, tmp_path: Path, name: str, *turns: str) -> Any:
    model = build_session("replay:" + str(turns_file(tmp_path, name, *turns))).config.model
    s.config = s.config.replace(model=model)
    return await s.run(name)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_dead(pid: int) -> None:
    while alive(pid):
        time.sleep(0.02)


def events(result: Any, kind: str) -> dict[str, str]:
    return {
        e.id: (getattr(e, "error", None) or getattr(e, "message", None) or "")
        for e in result.events
        if e.type == kind
    }


async def test_each_kind_keeps_its_state_across_runs(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        first = await run(
            s,
            tmp_path,
            "first",
            relic("a", "counter", "incr", by=2)
            + relic("b", "store", "set", key="city", value={"name": "Lyon", "pop": 522250})
            + relic("c", "web", "incr", by=5),
            "<response>$a $c</response>",
        )
        assert first.status == "ok" and first.answer == "12 5"
        assert (tmp_path / "ws" / "data" / "kv.sqlite").exists()  # in the workspace
        # A later cell: the same objects, the same process, the same file.
        second = await run(
            s,
            tmp_path,
            "second",
            relic("d", "counter", "incr")
            + relic("e", "store", "get", key="city")
            + relic("f", "web", "get")
            + relic("g", "store", "keys"),
            "<response>$d $e.name $f $g</response>",
        )
        assert second.answer == '13 Lyon 5 ["city"]', second.message
        rows = {row.name: row for row in s.relics.status()}
        assert {name: row.state for name, row in rows.items()} == {
            **dict.fromkeys(("counter", "store", "web"), "running"),
            "hasty": "not started",  # started on first use only
        }
        assert rows["counter"].calls == 2 and rows["web"].calls == 2 and rows["store"].calls == 3
        assert "web  server  running" in s.relics.describe()
    finally:
        await s.aclose()


async def test_failing_and_unknown_operations_reach_the_model(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        result = await run(
            s,
            tmp_path,
            "bad",
            relic("x", "counter", "fail", why="disk full")
            + relic("y", "web", "fail")
            + relic("z", "counter", "incrr")
            + relic("w", "countr", "incr")
            + relic("v", "counter", "incr", by="lots"),
            "<response>done</response>",
        )
        failed = events(result, "action_failed")
        assert "ValueError: disk full" in failed["x"]
        assert "relic 'web': 'fail' answered HTTP 500" in failed["y"]
        assert "parameter 'by'" in failed["v"]
        errors = events(result, "action_error")
        assert "relic 'counter' has no operation 'incrr'; did you mean 'incr'?" in errors["z"]
        assert "unknown relic 'countr'; did you mean 'counter'?" in errors["w"]
        # The model's next turn opened with every error.
        seen = json.dumps(s.history())
        for text in ("disk full", "HTTP 500", "no operation", "unknown relic"):
            assert text in seen
        # A failing operation leaves the relic running.
        assert {r.name: r.state for r in s.relics.status()}["counter"] == "running"
    finally:
        await s.aclose()


async def test_a_crashed_relic_restarts_on_next_use_with_a_warning(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        first = await run(
            s,
            tmp_path,
            "first",
            relic("a", "counter", "incr", by=5) + relic("p", "web", "pid"),
            relic("b", "counter", "break_down", mode="sync"),
            "<response>$a $p</response>",
        )
        assert "crashed during 'break_down'" in events(first, "action_failed")["b"]
        pid = int(first.answer.split()[1])
        os.kill(pid, signal.SIGKILL)  # the server dies between cells
        # Dead (a zombie until reaped): the relic finds out on its next use.
        await anyio.to_thread.run_sync(wait_dead, pid)
        second = await run(
            s,
            tmp_path,
            "second",
            relic("c", "counter", "get") + relic("q", "web", "pid"),
            "<response>$c $q</response>",
        )
        parts = second.answer.split()
        assert len(parts) == 2, (second.status, second.answer, second.message)  # a failure says why
        value, new_pid = parts
        assert value == "10"  # a fresh object, from the manifest's options
        assert int(new_pid) != pid and psutil.pid_exists(int(new_pid))
        warnings = events(second, "warning")
        assert "relic 'counter' had crashed (the counter broke); restarted it" in warnings["c"]
        assert "relic 'web' had crashed (its process exited with code -9" in warnings["q"]
        rows = {row.name: row for row in s.relics.status()}
        assert rows["counter"].restarts == 1 and rows["web"].restarts == 1
    finally:
        await s.aclose()


async def test_stop_and_a_registry_shared_by_sessions(tmp_path: Path) -> None:
    registry = RelicRegistry()
    one, two = session(tmp_path, registry), session(tmp_path, registry)
    try:
        await run(one, tmp_path, "a", relic("a", "counter", "incr"), "<response>$a</response>")
        shared = await run(
            two, tmp_path, "b", relic("b", "counter", "incr"), "<response>$b</response>"
        )
        assert shared.answer == "12"  # the second session's call reached the same object
        assert registry.stop("counter") is True
        assert {r.name: r.state for r in registry.status()}["counter"] == "stopped"
        again = await run(
            one, tmp_path, "c", relic("c", "counter", "get"), "<response>$c</response>"
        )
        assert again.answer == "10" and not events(again, "warning")  # a stop is no crash
        await one.aclose()  # the owner's registry outlives its sessions
        assert {r.name: r.state for r in registry.status()}["counter"] == "running"
    finally:
        await registry.aclose()
    assert all(r.state in ("stopped", "not started") for r in registry.status())


async def test_an_interrupted_relic_call_leaves_the_relic_usable(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        await run(s, tmp_path, "warm", relic("p", "web", "pid"), "<response>$p</response>")
        pid = int(s.variables["p"])
        with anyio.move_on_after(1.0) as scope:
            await run(
                s,
                tmp_path,
                "nap",
                relic("n", "web", "nap", mode="sync", seconds=30)
                + relic("m", "counter", "nap", mode="async", seconds=30),
                "<response>never</response>",
            )
        assert scope.cancelled_caught
        assert s.last_result is not None and s.last_result.status == "cancelled"
        after = await run(
            s,
            tmp_path,
            "after",
            relic("q", "web", "pid") + relic("h", "hasty", "nap", seconds=5),
            "<response>$q</response>",
        )
        assert after.answer == str(pid)  # the same server, still serving
        failed = events(after, "action_failed")["h"]
        assert (
            "relic 'hasty': operation 'nap' timed out after 0.5 s (the relic keeps running)"
            in failed
        )
    finally:
        await s.aclose()


async def test_a_session_without_an_owner_stops_its_relics(tmp_path: Path) -> None:
    s = session(tmp_path)
    await run(s, tmp_path, "pid", relic("p", "web", "pid"), "<response>$p</response>")
    pid = int(s.variables["p"])
    assert psutil.pid_exists(pid)
    await s.aclose()
    assert not alive(pid)


async def test_a_server_that_cannot_start_fails_the_call_with_its_output(tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(
        "relics:\n"
        "  - name: bad\n"
        "    kind: server\n"
        f"    command: ['{sys.executable}', '-c', '{FAILS}']\n"
        "    startup_timeout: 20\n",
        encoding="utf-8",
    )
    turns = turns_file(
        tmp_path,
        "t",
        relic("q", "bad", "x?y=1") + relic("a", "bad", "x", mode="sync"),
        "<response>-</response>",
    )
    s = build_session(f"replay:{turns}", manifest=manifest, transcript_dir=tmp_path)
    try:
        result = await s.run("go")
        error = events(result, "action_failed")["a"]
        assert "relic 'bad' exited with code 3 before it was ready" in error
        assert "no port for me" in error
        assert "bad  server  failed" in s.relics.describe()
        assert "bad operation name 'x?y=1'" in events(result, "action_error")["q"]
    finally:
        await s.aclose()


FAILS = 'import sys; print("no port for me"); sys.exit(3)'


def test_manifest_relic_errors_name_the_field(tmp_path: Path) -> None:
    cases = {
        "relics: [{name: r, kind: python}]": "a python relic needs 'class'",
        "relics: [{name: r, kind: sqlite, command: [x]}]": "command: not a field of sqlite relics",
        "relics: [{name: r, kind: docker, docker: {command: [sleep, '9']}}]": "needs operations",
        "relics: [{name: r, kind: python, klass: 'a:B'}]": "unknown field; allowed here: class,",
        "relics: [{name: r, kind: sqlite}, {name: r, kind: sqlite}]": "relic names must be unique",
    }
    for text, message in cases.items():
        path = tmp_path / "m.yaml"
        path.write_text(text + "\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
            load_manifest(path)
    path.write_text("relics: [{name: r, kind: python, class: 'nowhere.at.all:Thing'}]\n")
    with pytest.raises(ConfigError, match=r"cannot load class 'nowhere\.at\.all:Thing'"):
        build_session("replay:" + str(turns_file(tmp_path, "x", "<response/>")), manifest=path)


COUNTER = "tests.executors.relic_samples:Counter"


async def test_a_sub_agent_uses_the_owners_registry(tmp_path: Path) -> None:
    critic = turns_file(
        tmp_path, "critic", relic("i", "tally", "incr", mode="sync"), "<response>$i</response>"
    )
    path = tmp_path / "agents.yaml"
    path.write_text(
        "default: lead\n"
        "agents:\n"
        "  - {name: lead, sub_agents: [{name: critic}]}\n"
        f"  - name: critic\n    model: 'replay:{critic}'\n"
        "    relics: [{name: tally, kind: python, class: '" + COUNTER + "'}]\n",
        encoding="utf-8",
    )
    ask = (
        '<action type="agent" mode="sync" id="c" output_key="c">'
        '{"name": "critic", "message": "count"}</action>'
    )
    registry = RelicRegistry()
    s = build_session(
        "replay:" + str(turns_file(tmp_path, "x", "<response/>")), manifest=path, relics=registry
    )
    try:
        for expected in ("1", "2"):  # each call is a fresh sub-session; the relic stays
            result = await run(s, tmp_path, f"lead{expected}", ask, "<response>$c</response>")
            assert result.answer == expected, result.message
        assert [(r.name, r.calls) for r in registry.status()] == [("tally", 2)]
    finally:
        await registry.aclose()


async def test_a_feed_reads_a_relic_and_the_prompt_lists_its_operations(tmp_path: Path) -> None:
    from tests.prompt_parts import feeds_message
    from tests.runtime.test_internal_actions import replay as recording

    path = tmp_path / "agent.yaml"
    path.write_text(
        "relics: [{name: store, kind: sqlite, description: the user's notes}]\n"
        "context_feeds:\n"
        "  - {id: memo, source: {relic: store, operation: get, parameters: {key: memo}}}\n",
        encoding="utf-8",
    )
    model = recording(
        tmp_path,
        relic("s", "store", "set", mode="sync", key="memo", value="buy milk"),
        "<response>ok</response>",
    )
    s = build_session(model, manifest=path, transcript_dir=tmp_path)
    try:
        result = await s.run("remember")
        assert result.status == "ok", result.message
        first, second = (str(r.messages[0]["content"]) for r in model.requests)
        assert "# Relics (type=relic)" in first and "- `store`: the user's notes" in first
        assert '"set": {"description": "Store ``value``' in first  # operations with schemas
        # The feeds come after the conversation, current as of each turn.
        before, after = (feeds_message(r.messages) for r in model.requests)
        assert '<feed id="memo">' in after and "buy milk" in after and "buy milk" not in before
        assert first == second  # the system prompt stays the same
    finally:
        await s.aclose()

"""Docker relics on the real engine: a long-lived hardened container whose state
lasts across calls and runs, a failing operation, a crash and restart, stop, cleanup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from tests.docker_support import TEST_LABEL, engine_or_skip, new_token, our_containers

from .test_relics import INCR_DOCKER, events, relic, run, turns_file

pytestmark = pytest.mark.anyio

INCR = "n=$(cat /tmp/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /tmp/n; echo $n"


def manifest(tmp_path: Path, token: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "relics:\n"
        "  - name: box\n"
        "    kind: docker\n"
        "    description: a counter in a container\n"
        f"    docker: {{command: [sleep, infinity], labels: {{{TEST_LABEL}: '{token}'}}}}\n"
        "    operations:\n"
        f"      incr: {{command: [sh, -c, {json.dumps(INCR_DOCKER)}], description: one more}}\n"
        "      whoami: {command: [id, -u]}\n"
        "      echo: {command: [sh, -c, 'echo \"$CORTEX_PARAMETERS\"'],"
        " parameters: {type: object, properties: {text: {type: string}}, required: [text]}}\n"
        "      fail: {command: [sh, -c, 'echo oops >&2; exit 4']}\n",
        encoding="utf-8",
    )
    return path


def container_of(token: str) -> Any:
    found = our_containers(token)
    assert len(found) == 1, found
    return found[0]


async def test_a_docker_relic_keeps_its_container_across_runs(tmp_path: Path) -> None:
    engine_or_skip()
    token = new_token()
    s = build_session(
        "replay:" + str(turns_file(tmp_path, "none", "<response/>")),
        manifest=manifest(tmp_path, token),
        transcript_dir=tmp_path,
    )
    try:
        first = await run(
            s,
            tmp_path,
            "first",
            relic("a", "box", "incr", mode="sync"),
            relic("b", "box", "incr")
            + relic("u", "box", "whoami")
            + relic("e", "box", "echo", text="hi")
            + relic("f", "box", "fail"),
            "<response>$b $u $e.text</response>",
        )
        assert first.answer == "2 65534 hi", first.message
        assert "relic 'box': 'fail' exited with code 4: oops" in events(first, "action_failed")["f"]
        container = container_of(token)
        config = container.attrs["HostConfig"]
        # The Docker tools' hardening, reused.
        assert config["ReadonlyRootfs"] is True and config["CapDrop"] == ["ALL"]
        assert config["NetworkMode"] == "none" and "no-new-privileges" in config["SecurityOpt"]
        assert config["Memory"] == 256 * 1024**2 and config["PidsLimit"] == 64
        assert container.attrs["Config"]["User"] == "65534:65534"
        assert container.labels["cortex-kernel"] == "relic"
        assert container.labels["cortex-kernel.relic"] == "box"
        # The container dies between cells: the next use starts a new one and says so.
        container.kill()
        second = await run(
            s, tmp_path, "second", relic("c", "box", "incr"), "<response>$c</response>"
        )
        assert second.answer == "1"
        assert "relic 'box' had crashed (its container exited" in events(second, "warning")["c"]
        assert container_of(token).id != container.id
        assert s.relics.stop("box") is True
        assert our_containers(token) == []
        third = await run(
            s, tmp_path, "third", relic("d", "box", "incr"), "<response>$d</response>"
        )
        assert third.answer == "1" and len(our_containers(token)) == 1
    finally:
        await s.aclose()
    assert our_containers(token) == []


async def test_containers_of_a_dead_kernel_are_swept_by_the_next_docker_relic(
    tmp_path: Path,
) -> None:
    import socket

    from cortex_kernel.executors.docker import LABEL, ContainerSpec
    from cortex_kernel.executors.relic_docker import OWNER_LABEL, owner
    from tests.docker_support import sandbox_image

    client = engine_or_skip()
    token = new_token()
    made = []
    for who in (f"{socket.gethostname()}:99999999", owner()):  # a pid that cannot exist; ours
        labels = {LABEL: "relic", OWNER_LABEL: who, TEST_LABEL: token}
        spec = ContainerSpec(sandbox_image(), ["sleep", "infinity"], labels=labels)
        made.append(client.api.create_container(**spec.create_options(client.api))["Id"])
    s = build_session(
        "replay:" + str(turns_file(tmp_path, "none", "<response/>")),
        manifest=manifest(tmp_path, token),
        transcript_dir=tmp_path,
    )
    try:
        result = await run(s, tmp_path, "go", relic("a", "box", "incr"), "<response>$a</response>")
        assert result.answer == "1"
        left = {c.id for c in our_containers(token)}
        assert made[0] not in left  # the dead kernel's: removed
        assert made[1] in left  # a live process's: kept
    finally:
        await s.aclose()
        client.api.remove_container(made[1], force=True)
    assert our_containers(token) == []

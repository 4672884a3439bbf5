"""The widget: coalesced sends, the final state, the static representations."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cortex_kernel import __version__
from cortex_kernel.jupyter.view import FLUSH_INTERVAL, RunView, widgets_dir
from cortex_kernel.protocol.parser_events import ThoughtDelta, ThoughtStart
from cortex_kernel.runtime.run_events import RunFinished, RunStarted, TurnEnded, TurnStarted

from .test_viewstate import run_events

ROOT = Path(__file__).resolve().parents[2]


class RecordingView(RunView):
    """A RunView that keeps what it would send over the comm."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[dict[str, Any]] = []

    def send(self, content: Any, buffers: Any = None) -> None:
        self.sent.append(content)


def test_front_end_files_resolve() -> None:
    assert (widgets_dir() / "view.js").is_file()
    assert (widgets_dir() / "view.css").is_file()


def test_front_end_renders_from_an_installed_wheel(tmp_path: Path) -> None:
    """A real wheel (pure Python, any platform) ships widgets/ as
    cortex_kernel/_widgets and the view loads it."""
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*build, "-w", str(tmp_path / "dist"), str(ROOT)], check=True, capture_output=True
    )
    (wheel,) = (tmp_path / "dist").glob("cortex_kernel-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for shipped in (
        "cortex_kernel/_widgets/view.js",
        "cortex_kernel/_widgets/view.css",
        "cortex_kernel/jupyter/nbval-sanitize.cfg",
        "cortex_kernel/jupyter/resources/logo-64x64.png",
        "cortex_kernel/llm/demo_transcript.jsonl",
        f"cortex_kernel-{__version__}.data/data/share/jupyter/labextensions/cortex-kernel/package.json",
        f"cortex_kernel-{__version__}.data/data/share/jupyter/labextensions/cortex-kernel/static/remoteEntry.js",
    ):
        assert shipped in names
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)  # what `pip install --target` lays down
    code = (
        "import cortex_kernel.jupyter.view as v; "
        "print(v.widgets_dir()); print(len(v.RunView()._esm) > 1000)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [str(site / "cortex_kernel" / "_widgets"), "True"]


def stream_thought(
    each: Callable[[RecordingView, int, float], None] | None = None,
) -> tuple[RecordingView, float]:
    """A one-turn run's thought streamed into a view at 2,000 tokens a second for 0.5 s.

    That is 100 ticks of ten deltas (longer on a loaded machine); ``each(view,
    tick, t)`` is called after each tick's deltas. Returns the view, once it
    has flushed what the run ended with, and how long the stream took.
    """

    async def stream() -> tuple[RecordingView, float]:
        loop = asyncio.get_running_loop()
        view = RecordingView()
        started = loop.time()
        view.push(RunStarted(t=0.0, run_id="r", message="m", model="x"))
        view.push(TurnStarted(t=0.0, turn=1))
        view.push(ThoughtStart(span=(0, 0), t=0.0, turn=1))
        for tick in range(100):
            t = round(loop.time() - started, 3)
            for _ in range(10):
                view.push(ThoughtDelta(span=(0, 0), text="tok ", t=t, turn=1))
            if each is not None:
                each(view, tick, t)
            await asyncio.sleep(0.005)
        t = round(loop.time() - started, 3)
        view.push(TurnEnded(t=t, turn=1, reason="stream_end"))
        view.push(RunFinished(t=t, status="ok", answer="done"))
        streamed = loop.time() - started
        await asyncio.sleep(2 * FLUSH_INTERVAL)
        return view, streamed

    return asyncio.run(stream())


def test_token_stream_is_coalesced() -> None:
    view, streamed = stream_thought()
    # At most one message per flush interval of the time the stream really
    # took, whatever the token rate (1,000 deltas here).
    assert len(view.sent) <= streamed / FLUSH_INTERVAL + 3
    assert view.messages_sent == len(view.sent)
    text = "".join(op[2] for msg in view.sent for op in msg["ops"] if op[0] == "th")
    assert text == "tok " * 1000
    # The final state is in the last message and in the stored snapshot.
    assert ["run", {"status": "ok", "status_message": "", "answer": "done"}] in view.sent[-1]["ops"]
    view.finish()
    assert view.snapshot["doc"]["status"] == "ok"
    assert [m["seq"] for m in view.sent] == list(range(1, len(view.sent) + 1))


def test_sync_request_sends_pending_ops_then_the_document() -> None:
    view = RecordingView()
    view.state.apply(RunStarted(t=0.0, run_id="r", message="m", model="x"))
    view._on_front_end_msg(view, {"type": "sync"}, [])
    assert "ops" in view.sent[0] and view.sent[1]["snapshot"]["run_id"] == "r"
    assert view.sent[1]["seq"] == view.sent[0]["seq"]


def test_mimebundle_reads_without_the_widget() -> None:
    view = RecordingView()
    for event in run_events():
        view.state.apply(event)
    data, _ = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"].startswith("Cortex run [ok]")
    assert "set_variable" in data["text/markdown"]
    assert "set_variable" in data["text/html"]


def test_approve_for_this_cell_grants_the_same_tool_until_the_view_finishes() -> None:
    """The cell's grant: the answered request's tool, never code with notes, over at finish()."""
    import anyio
    import anyio.lowlevel

    from cortex_kernel.executors.approval import approval_digest
    from cortex_kernel.jupyter.approvals import ViewApprover
    from cortex_kernel.runtime.ports import ApprovalRequest

    approver = ViewApprover()
    view = RecordingView(on_approval=approver.decide)

    def request(tool: str, *notes: str) -> ApprovalRequest:
        return ApprovalRequest(
            "a1", tool, "python", {}, text="t", digest=approval_digest("t"), notes=notes
        )

    async def asks(item: ApprovalRequest) -> bool:
        """Whether ``item`` waits for an answer (it is left unanswered)."""
        decided: list[bool] = []

        async def call() -> None:
            decided.append(await approver(item))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            while not approver.waiting and not decided:
                await anyio.lowlevel.checkpoint()
            waits = bool(approver.waiting)
            group.cancel_scope.cancel()
        return waits

    async def main() -> None:
        first = request("python")
        async with anyio.create_task_group() as group:
            group.start_soon(approver, first)
            while not approver.waiting:
                await anyio.lowlevel.checkpoint()
            answer = {"type": "approval", "token": first.token, "digest": first.digest}
            view._on_front_end_msg(view, {**answer, "approved": True, "scope": "cell"}, [])
        assert approver.by_of(first) == "user, for this cell"
        later = request("python")
        assert await approver(later) is True
        assert approver.by_of(later) == "for this cell"
        # Another tool, and code that writes into the user's objects, still ask.
        assert await asks(request("shell"))
        assert await asks(request("python", "df: item assignment"))
        view.finish()  # the cell's run is over: so is its grant
        assert await asks(request("python"))

    anyio.run(main)

"""Fixtures for the Jupyter tests: the kernelspec, replay files, a kernel driver, a browser."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import KernelManager

if TYPE_CHECKING:
    from .browser_support import Browser, BrowserNotebook

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def cortex_kernelspec() -> str:
    """The ``cortex`` kernelspec, installed into sys.prefix if missing or stale."""
    from cortex_kernel.jupyter.install import install, kernel_json

    wanted = kernel_json()
    try:
        spec = KernelSpecManager().get_kernel_spec("cortex")
        current = spec.argv == wanted["argv"] and spec.metadata == wanted["metadata"]
    except NoSuchKernel:
        current = False
    if not current:
        assert install(sys_prefix=True) == 0
    return "cortex"


@pytest.fixture(scope="session")
def replay_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replay files of ``data/`` with ``@DATA@`` made absolute (nested models)."""
    out = tmp_path_factory.mktemp("replay")
    for source in DATA.glob("*.jsonl"):
        text = source.read_text(encoding="utf-8").replace("@DATA@", str(out))
        (out / source.name).write_text(text, encoding="utf-8")
    return out


@dataclass
class CellResult:
    """What one execute_request produced."""

    reply: dict[str, Any]
    iopub: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def status(self) -> str:
        return str(self.reply["content"]["status"])

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [m for m in self.iopub if m["msg_type"] in types]

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"] for m in self.of_type("stream") if m["content"]["name"] == "stdout"
        )

    def result_data(self) -> dict[str, Any]:
        results = self.of_type("execute_result")
        assert results, f"no execute_result in {[m['msg_type'] for m in self.iopub]}"
        data: dict[str, Any] = results[-1]["content"]["data"]
        return data

    def images(self) -> list[str]:
        """The PNGs the cell displayed (``display_data``), base64."""
        return [
            m["content"]["data"]["image/png"]
            for m in self.of_type("display_data")
            if "image/png" in m["content"]["data"]
        ]

    def widget_ops(self) -> list[list[Any]]:
        ops: list[list[Any]] = []
        for m in self.of_type("comm_msg"):
            data = m["content"]["data"]
            if data.get("method") == "custom":
                ops.extend(data["content"].get("ops", []))
        return ops


class Kernel:
    """A running kernel driven through jupyter_client, as a front end would."""

    def __init__(self, name: str, env: dict[str, str] | None = None, **manager: Any) -> None:
        self.km = KernelManager(kernel_name=name, **manager)
        self.km.start_kernel(env=env if env is not None else dict(os.environ))
        self.kc: BlockingKernelClient = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self._buffered: list[dict[str, Any]] = []

    def _iopub(self, timeout: float) -> Iterator[dict[str, Any]]:
        """The messages already read (kept for :meth:`collect`), then new ones until ``timeout``.

        A wait sees what an earlier wait read past: two things may arrive in
        either order (a stream printed before the widget delta waited for first).
        """
        yield from list(self._buffered)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            self._buffered.append(msg)
            yield msg

    def wait_for_op(self, msg_id: str, kind: str, target: str, state: str, timeout: float) -> None:
        """Read iopub until a widget delta sets ``target``'s state (messages are kept)."""
        for msg in self._iopub(timeout):
            if msg["parent_header"].get("msg_id") != msg_id or msg["msg_type"] != "comm_msg":
                continue
            data = msg["content"]["data"]
            for op in (
                data.get("content", {}).get("ops", []) if data.get("method") == "custom" else []
            ):
                if op[0] == kind and op[1] == target and op[2].get("state") == state:
                    return
        raise AssertionError(f"{target} never reached {state}")

    def wait_for_stream(self, msg_id: str, text: str, timeout: float) -> None:
        """Read iopub until ``msg_id``'s output contains ``text`` (messages are kept)."""
        seen = ""
        for msg in self._iopub(timeout):
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                seen += msg["content"]["text"]
                if text in seen:
                    return
        raise AssertionError(f"{text!r} never appeared in the cell's output")

    def ops_of(self, result: CellResult, target: str) -> list[dict[str, Any]]:
        """The widget deltas of node ``target`` in ``result``, in the order they came."""
        return [op[2] for op in result.widget_ops() if op[0] == "n" and op[1] == target]

    @property
    def pid(self) -> int:
        provisioner = self.km.provisioner
        assert provisioner is not None
        pid: int = provisioner.process.pid  # type: ignore[attr-defined]
        return pid

    def send(self, code: str, cell_id: str | None = None) -> str:
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": False,
        }
        msg = self.kc.session.msg("execute_request", content)
        if cell_id is not None:
            msg["metadata"]["cellId"] = cell_id
        self.kc.shell_channel.send(msg)
        msg_id: str = msg["header"]["msg_id"]
        return msg_id

    def collect(
        self, msg_id: str, timeout: float = 60.0, started: float | None = None
    ) -> CellResult:
        started = time.monotonic() if started is None else started
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        seconds = time.monotonic() - started
        result = CellResult(reply=reply, seconds=seconds)
        for msg in self._buffered:
            if msg["parent_header"].get("msg_id") == msg_id:
                result.iopub.append(msg)
        self._buffered.clear()
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            result.iopub.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        return result

    def run(self, code: str, cell_id: str | None = None, timeout: float = 60.0) -> CellResult:
        started = time.monotonic()
        return self.collect(self.send(code, cell_id), timeout, started)

    def python(self, code: str) -> str:
        """Run Python and return its stdout (the cell must succeed)."""
        result = self.run(code)
        assert result.status == "ok", result.reply["content"]
        return result.stdout

    def shutdown(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


SLEEPER_TOOL = """%%python
import anyio
from cortex_kernel.jupyter.runner import runner_for

async def sleeper(seconds: int) -> str:
    \"\"\"Sleep in a subprocess.\"\"\"
    await anyio.run_process(["sleep", str(seconds)])
    return "slept"

runner_for(get_ipython()).session.tools.register(sleeper)
"""


def sleeps(pid: int) -> list[psutil.Process]:
    """The ``sleep`` processes under ``pid``."""
    return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "sleep"]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def dump(result: CellResult) -> str:
    """Readable iopub traffic for assertion messages."""
    return json.dumps([(m["msg_type"], m["content"]) for m in result.iopub], default=str)[:4000]


def keyless_env() -> dict[str, str]:
    """This process's environment without provider API keys (no test may reach a provider)."""
    return {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}


@pytest.fixture
def keyless_kernel(cortex_kernelspec: str) -> Iterator[Kernel]:
    """A Cortex kernel of the test's own, with no provider API keys in its environment."""
    kernel = Kernel(cortex_kernelspec, keyless_env())
    yield kernel
    kernel.shutdown()


@pytest.fixture(scope="module")
def cortex(cortex_kernelspec: str, replay_dir: Path) -> Iterator[Kernel]:
    """One Cortex kernel per test module, on the ``answer.jsonl`` replay model."""
    env = {**os.environ, "CORTEX_MODEL": f"replay:{replay_dir}/answer.jsonl"}
    kernel = Kernel(cortex_kernelspec, env)
    yield kernel
    kernel.shutdown()


def notebook_json(
    *sources: str,
    tags: dict[int, list[str]] | None = None,
    ids: Sequence[str] | None = None,
    kernelspec: dict[str, str] | None = None,
) -> str:
    """A notebook (nbformat 4.5) with one code cell per source.

    Cell ``i`` has the id ``ids[i]`` (default ``cell-<i>``) and ``tags[i]``;
    the kernelspec is Cortex's unless ``kernelspec`` is given.
    """
    cells: list[dict[str, Any]] = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": ids[index] if ids is not None else f"cell-{index}",
            "metadata": {"tags": (tags or {}).get(index, [])},
            "outputs": [],
            "source": source,
        }
        for index, source in enumerate(sources)
    ]
    spec = kernelspec or {"name": "cortex", "display_name": "Cortex Agent", "language": "markdown"}
    notebook = {"cells": cells, "metadata": {"kernelspec": spec}, "nbformat": 4}
    return json.dumps({**notebook, "nbformat_minor": 5})


@pytest.fixture
def kernel_factory() -> Iterator[Any]:
    kernels: list[Kernel] = []

    def start(name: str, env: dict[str, str] | None = None) -> Kernel:
        kernel = Kernel(name, env)
        kernels.append(kernel)
        return kernel

    yield start
    for kernel in kernels:
        kernel.shutdown()


@pytest.fixture
def browser(tmp_path: Path, cortex_kernelspec: str, replay_dir: Path) -> Iterator[Browser]:
    """Opens a notebook in JupyterLab (or Notebook 7) in Chromium, once a test.

    Takes :func:`~tests.jupyter.browser_support.open_notebook`'s arguments
    after ``tmp_path`` and ``replay_dir``; browser and server are closed after the test.
    """
    from .browser_support import open_notebook  # not for the tests without a browser

    with contextlib.ExitStack() as stack:

        def open_(*args: Any, **kwargs: Any) -> BrowserNotebook:
            return stack.enter_context(open_notebook(tmp_path, replay_dir, *args, **kwargs))

        yield open_

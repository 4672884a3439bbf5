"""Python tools on a Dask cluster (``dask.distributed``), awaited on the kernel's own loop.

A :class:`DaskBackend` owns one ``distributed.Client(asynchronous=True)``
opened on the running event loop the first time a tool runs there, so a
call is a future awaited like any coroutine: the kernel keeps answering
while hundreds of calls run on the cluster. Which cluster: the manifest's
``executor.address``, else ``$CORTEX_DASK_ADDRESS``, else a running
``distributed.Client`` in the notebook's namespace, else distributed's
default client; the client the user made is never used or closed by us,
only its scheduler's address.

Each call is one task (:func:`.dask_task.run_tool`) whose key names the
tool. As it starts, the worker logs an event on a topic this client
subscribed to: the view shows the worker, and a second start of the same
key means the worker died and the scheduler ran the task again (Dask
reschedules a lost worker's tasks, up to ``distributed.scheduler.allowed-failures``
times) — shown as a retry. Cancelling the caller (interrupt, timeout, run
end) cancels the future and interrupts the worker thread still running it,
so nothing is left running on the cluster. A result larger than
``keep_on_cluster`` bytes is not brought back: the variable holds a
:class:`ClusterValue` (the future, with a preview) and passing it to
another Dask tool hands over the future, so the data never leaves the cluster.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from ..exceptions import ToolError
from ..runtime.ports import PlacementReport
from ..runtime.tools import Tool
from . import dask_task

__all__ = ["ClusterValue", "DaskBackend"]

#: The environment variable naming a scheduler when the manifest names none.
ADDRESS_VARIABLE = "CORTEX_DASK_ADDRESS"

_INSTALL = "install the extra: pip install 'cortex-kernel[dask]' (or pip install distributed)"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ToolError(f"Dask tools need dask.distributed: {_INSTALL}") from None
    return distributed


def _size(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{nbytes} B"  # pragma: no cover


class ClusterValue:
    """A tool's result left on the Dask cluster because it is large.

    The notebook variable holds this instead of the value: the data stays
    on the worker that computed it for as long as this object lives.

    Attributes
    ----------
    future
        The ``distributed.Future`` holding the value (of the kernel's own client).
    key, type_name, nbytes, length, preview, where
        What it is, how large (Dask's estimate), where, and a short repr.
    """

    def __init__(self, future: Any, info: Mapping[str, Any], where: str | None) -> None:
        self.future = future
        self.key = str(future.key)
        self.type_name = str(info.get("type", "?"))
        self.nbytes = int(info.get("nbytes", 0))
        self.length: int | None = info.get("length")
        self.preview = str(info.get("repr", ""))
        self.where = where

    async def fetch(self) -> Any:
        """Bring the value into the kernel (``await value.fetch()`` in a ``%%python`` cell)."""
        return await self.future

    def __repr__(self) -> str:
        items = f", {self.length:,} items" if self.length is not None else ""
        where = f" on {self.where}" if self.where else ""
        return (
            f"<{self.type_name}{items}, {_size(self.nbytes)}, kept on the Dask cluster{where} "
            f"(await .fetch() to bring it here): {self.preview}>"
        )

    __str__ = __repr__


class DaskBackend:
    """Runs Python tool calls as Dask futures (see the module docstring).

    Parameters
    ----------
    address
        The scheduler (``tcp://host:8786``); ``None``: ``$CORTEX_DASK_ADDRESS``,
        a Client in ``namespace``, or distributed's default client.
    keep_on_cluster
        Results larger than this many bytes stay on the cluster as a
        :class:`ClusterValue` (``None``: always brought back).
    connect_timeout
        Seconds to wait for the scheduler when connecting.
    namespace
        The notebook's namespace, searched for a ``distributed.Client``.
    """

    name = "dask"

    def __init__(
        self,
        address: str | None = None,
        *,
        keep_on_cluster: int | None = 16_000_000,
        connect_timeout: float = 10.0,
        namespace: Mapping[str, Any] | None = None,
    ) -> None:
        self.address = address
        self.keep_on_cluster = keep_on_cluster
        self.connect_timeout = connect_timeout
        self.namespace = namespace
        self.topic = f"cortex-kernel-{uuid.uuid4().hex[:12]}"
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: anyio.Lock | None = None
        self._where = ""  # the scheduler's address and how it was found
        self._dashboard: str | None = None
        self._watch: dict[str, Callable[[str], None]] = {}

    # -- a session's service: closed with the session ---------------------------

    async def aclose(self) -> None:
        """Close the kernel's client (the cluster, and any client the user made, keep running)."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            with anyio.move_on_after(5, shield=True):
                await client.close()

    # -- ToolBackend -----------------------------------------------------------

    def dashboard(self) -> str | None:
        """The cluster's dashboard, when its scheduler serves one."""
        return self._dashboard

    @property
    def client(self) -> Any:
        """The kernel's ``distributed.Client`` (``None`` before the first call)."""
        return self._client

    async def call(self, tool: Tool, arguments: dict[str, Any], report: PlacementReport) -> Any:
        """Run ``tool`` on the cluster; see :class:`~cortex_kernel.runtime.ports.ToolBackend`."""
        client = await self._connected(tool.name)
        key = f"{dask_task.KEY_PREFIX}{tool.name}-{uuid.uuid4().hex[:16]}"
        kwargs = {
            name: value.future if isinstance(value, ClusterValue) else value
            for name, value in arguments.items()
        }
        workers: list[str] = []

        def started(worker: str) -> None:
            report(worker, workers[-1] if workers else None)
            workers.append(worker)

        self._watch[key] = started
        future: Any = None
        try:
            future = client.submit(
                dask_task.run_tool, tool.function, kwargs, key, self.topic, key=key, pure=False
            )
            return await self._outcome(tool.name, client, future, workers)
        finally:
            self._watch.pop(key, None)
            if future is not None and not future.done():
                with anyio.CancelScope(shield=True):
                    await self._cancel(client, future)

    # -- internals --------------------------------------------------------------

    async def _outcome(self, name: str, client: Any, future: Any, workers: list[str]) -> Any:
        distributed = _distributed()
        try:
            error = await future.exception()  # waits without bringing the result here
            if error is None and not future.cancelled():
                where = workers[-1] if workers else None
                if self.keep_on_cluster is not None:
                    sizes = await client.nbytes(keys=[future.key], summary=False)
                    if int(sizes.get(future.key, 0)) > self.keep_on_cluster:
                        info = await client.submit(dask_task.describe, future, pure=False)
                        return ClusterValue(future, info, where)
            return await future
        except distributed.client.FutureCancelledError as exc:
            raise self._lost(name, client, exc) from None
        except distributed.KilledWorker as exc:
            raise ToolError(
                f"tool '{name}': the Dask workers running it died too often ({exc}); "
                "see the workers' logs (memory? a crash in native code?)"
            ) from None
        except (OSError, distributed.comm.CommClosedError) as exc:
            raise self._lost(name, client, exc) from None

    def _lost(self, name: str, client: Any, exc: BaseException) -> ToolError:
        if client.status != "running":
            return ToolError(
                f"tool '{name}': the Dask scheduler at {self._where} stopped answering during "
                f"the call ({type(exc).__name__}: {exc}); start it again or point the "
                "executor at a running one"
            )
        return ToolError(f"tool '{name}': the cluster dropped the call ({exc})")

    async def _cancel(self, client: Any, future: Any) -> None:
        # Bounded: a dead scheduler must not hold up an interrupt.
        with anyio.move_on_after(5):
            if client.status == "running":
                await client.cancel([future], force=True)
                await client.run(dask_task.interrupt, [future.key], on_error="ignore")

    async def _connected(self, name: str) -> Any:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop, self._client = anyio.Lock(), loop, None
        async with self._lock:
            client = self._client
            if client is not None:
                if client.status == "running":
                    return client
                if client.status in ("connecting", "newly-created"):
                    raise ToolError(
                        f"tool '{name}': the Dask scheduler at {self._where} does not answer "
                        "(the client is trying to reconnect); start it again or point the "
                        "executor at a running one"
                    )
                self._client = None  # closed or failed: connect afresh
            self._client = await self._connect(name)
            return self._client

    async def _connect(self, name: str) -> Any:
        distributed = _distributed()
        address, source, user_client = self._find_address(name, distributed)
        self._where = f"{address} ({source})"
        import cloudpickle

        # The worker-side functions travel by value: workers need no cortex-kernel.
        if dask_task.__name__ not in cloudpickle.list_registry_pickle_by_value():
            cloudpickle.register_pickle_by_value(dask_task)
        try:
            client = await distributed.Client(
                address, asynchronous=True, set_as_default=False, timeout=self.connect_timeout
            )
        except (OSError, TimeoutError, ValueError) as exc:
            raise ToolError(
                f"tool '{name}': no Dask scheduler answers at {address} ({source}): {exc}; "
                "start the cluster, or fix the address"
            ) from None
        client.subscribe_topic(self.topic, self._on_event)
        self._dashboard = _dashboard_link(user_client if user_client is not None else client)
        return client

    def _find_address(self, name: str, distributed: Any) -> tuple[str, str, Any]:
        if self.address:
            return self.address, "the manifest's executor.address", None
        if os.environ.get(ADDRESS_VARIABLE):
            return os.environ[ADDRESS_VARIABLE], f"${ADDRESS_VARIABLE}", None
        for variable, value in list((self.namespace or {}).items()):
            if isinstance(value, distributed.Client) and value.status == "running":
                return str(value.scheduler.address), f"the notebook's Client '{variable}'", value
        try:
            default = distributed.default_client()
        except ValueError:
            default = None
        if default is not None and default.status == "running":
            return str(default.scheduler.address), "distributed's default client", default
        raise ToolError(
            f"tool '{name}' runs on Dask, but no cluster is named: create a "
            "distributed.Client in the notebook, set the manifest's executor.address or "
            f"${ADDRESS_VARIABLE} (tcp://host:8786); or run it here with executor: local"
        )

    def _on_event(self, event: Any) -> None:
        # (timestamp, {"key", "worker"}) from dask_task.run_tool, on the client's loop.
        message = event[1] if isinstance(event, tuple | list) and len(event) == 2 else event
        if isinstance(message, dict):
            started = self._watch.get(str(message.get("key")))
            if started is not None:
                started(str(message.get("worker", "?")))


def _dashboard_link(client: Any) -> str | None:
    try:
        services = client.scheduler_info().get("services", {})
        if "dashboard" not in services:
            return None
        link = client.dashboard_link
    except Exception:  # no identity yet, an odd config template: no link, no failure
        return None
    return str(link) if link else None

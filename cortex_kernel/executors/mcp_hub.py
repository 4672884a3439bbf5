"""The MCP servers of one session: started before a run, their tools in its registry.

:class:`McpHub` is the session's :class:`~cortex_kernel.runtime.ports.ToolSource`
for MCP (see :mod:`.mcp` for one server's life). ``%mcp`` and the manifest's
``mcp_servers`` declare servers here; each run's start brings every one up (in
parallel) and registers its tools as ``server__tool``.
"""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from ..runtime.tools import ToolRegistry
from .mcp import McpError, McpServer, McpServerConfig, tool_name

__all__ = ["McpHub"]


class McpHub:
    """The MCP servers of one session, and their tools in its registry.

    Parameters
    ----------
    base
        Folder relative ``cwd`` entries are taken from.
    """

    def __init__(self, base: Path | None = None) -> None:
        self.base = base if base is not None else Path.cwd()
        self.servers: dict[str, McpServer] = {}

    def add(self, config: McpServerConfig) -> McpServer:
        """Declare a server (started at the next run).

        Raises
        ------
        McpError
            The name is taken.
        """
        if config.name in self.servers:
            raise McpError(
                f"an MCP server named '{config.name}' is already declared "
                f"({self.servers[config.name].config.target}); `%mcp remove {config.name}` first"
            )
        server = McpServer(config, self.base)
        self.servers[config.name] = server
        return server

    def remove(self, name: str, tools: ToolRegistry) -> None:
        """Forget server ``name`` and its tools; its process stops in the background."""
        server = self._get(name)
        del self.servers[name]
        _unregister(tools, server)
        server.stop()

    def restart(self, name: str, tools: ToolRegistry) -> None:
        """Stop server ``name`` (in the background); the next run starts it afresh."""
        server = self._get(name)
        _unregister(tools, server)
        server.stop()
        self.servers[name] = McpServer(server.config, self.base)

    def _get(self, name: str) -> McpServer:
        server = self.servers.get(name)
        if server is None:
            raise McpError(f"no MCP server named '{name}'; declared: {self._names()}")
        return server

    def _names(self) -> str:
        return ", ".join(sorted(self.servers)) or "none"

    async def prepare(self, tools: ToolRegistry, group: TaskGroup | None) -> list[str]:
        """Start every server not running yet (in parallel), register their tools.

        Returns
        -------
        list[str]
            Warnings for the user (a crash and restart since the last run).

        Raises
        ------
        McpError
            A server failed to start or lists no tools (the first such, by name).
        """
        if not self.servers:
            return []
        if group is None:
            raise McpError(
                "MCP servers need an open session (`async with session:`), which "
                "Jupyter and `cortex-kernel run` hold"
            )
        servers = list(self.servers.values())
        async with anyio.create_task_group() as starting:
            # Calls validate their parameters with jsonschema, slow to import: meanwhile.
            starting.start_soon(_import_in_thread, "jsonschema")
            for server in servers:
                starting.start_soon(_start_quietly, server, group)
        errors = [s.error for s in servers if s.state not in ("running", "restarting")]
        for server in servers:
            _unregister(tools, server)
            if server.state in ("running", "restarting"):
                for made in server.registry_tools():
                    tools.add(made)  # a name taken by another tool is an error naming both
        if errors:
            raise McpError("; ".join(e or "an MCP server failed" for e in errors))
        warnings: list[str] = []
        for server in servers:
            warnings.extend(server.warnings)
            server.warnings.clear()
        return warnings

    async def read_resource(self, server: str, uri: str) -> str:
        """Read resource ``uri`` from ``server`` (started by :meth:`prepare` at the run's start).

        Raises
        ------
        McpError
            No such server.
        ToolError
            The read failed or the server is not running.
        """
        return await self._get(server).read(uri)

    async def aclose(self) -> None:
        """Stop every server."""
        async with anyio.create_task_group() as group:
            for server in self.servers.values():
                group.start_soon(server.aclose)

    def describe(self) -> str:
        """What ``%mcp`` prints: each server, its state and its tools."""
        if not self.servers:
            return "no MCP servers (`%mcp add NAME -- COMMAND…` or `%mcp add NAME URL`)"
        lines = []
        for server in self.servers.values():
            state: str = server.state
            if server.restarts:
                state += f", restarted {server.restarts}×"
            lines.append(f"{server.name}: {state} — {server.config.target}")
            if server.error and server.state in ("failed", "crashed"):
                lines.append(f"  error: {server.error}")
            if server.tools:
                for listed in server.tools:
                    summary = (listed.description or "").strip().splitlines()
                    text = f" — {summary[0]}" if summary else ""
                    lines.append(f"  {tool_name(server.name, str(listed.name))}{text}")
            elif server.state == "not started":
                lines.append("  tools: listed when the next run starts it")
        return "\n".join(lines)


async def _import_in_thread(module: str) -> None:
    await anyio.to_thread.run_sync(importlib.import_module, module)


async def _start_quietly(server: McpServer, group: TaskGroup) -> None:
    # Its state and error say what failed; prepare() reports every failure at once.
    with contextlib.suppress(McpError):
        await server.ensure_started(group)


def _unregister(tools: ToolRegistry, server: McpServer) -> None:
    for name in [t.name for t in tools if t.labels.get("mcp_server") == server.name]:
        tools.unregister(name)

"""``%mcp``: the MCP servers of the notebook's session (see docs/manifest.md).

``%mcp add NAME [--timeout S] [--confirm[=TOOL,…]] -- COMMAND…`` declares a
stdio server, ``%mcp add NAME URL`` a streamable HTTP one; both start with the
next agent cell. ``%mcp`` lists servers, states and tools; ``%mcp remove NAME``
and ``%mcp restart NAME`` stop one (its process ends in the background).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ..exceptions import ConfigError
from .runner import runner_for

__all__: list[str] = []  # used inside the jupyter package only

_MCP_USAGE = (
    "usage: %mcp | %mcp add NAME [--timeout S] [--confirm[=TOOL,…]] -- COMMAND [ARG…] | "
    "%mcp add NAME URL | %mcp remove NAME | %mcp restart NAME"
)


def mcp_magic(line: str) -> None:
    """%mcp [add NAME -- COMMAND… | add NAME URL | remove NAME | restart NAME] — MCP servers."""
    from IPython import get_ipython

    from ..agent import mcp_hub
    from ..executors.mcp import McpServerConfig

    runner = runner_for(get_ipython())
    session = runner.session
    hub = mcp_hub(session)
    head, dashes, command = line.partition(" -- ")
    if not dashes and line.strip().endswith(" --"):
        head, dashes = line.strip()[:-3], " -- "
    words = shlex.split(head)
    if not words:
        print(hub.describe())
        return
    verb, rest = words[0], words[1:]
    if verb in ("remove", "restart") and len(rest) == 1:
        getattr(hub, verb)(rest[0], session.tools)
        done = "removed" if verb == "remove" else "restarts with the next agent cell"
        print(f"MCP server '{rest[0]}' {done}")
        return
    if verb != "add" or not rest:
        print(_MCP_USAGE)
        return
    name, options = rest[0], rest[1:]
    settings: dict[str, Any] = {}
    while options and options[0].startswith("--"):
        flag = options.pop(0)
        if flag == "--timeout" and options:
            settings["timeout"] = float(options.pop(0))
        elif flag == "--confirm":
            settings["confirm"] = True
        elif flag.startswith("--confirm="):
            settings["confirm"] = [t for t in flag.removeprefix("--confirm=").split(",") if t]
        else:
            print(_MCP_USAGE)
            return
    if dashes:
        argv = shlex.split(command)
        if options or not argv:
            print(_MCP_USAGE)
            return
        config = McpServerConfig(name, command=argv, **settings)
    elif len(options) == 1 and options[0].startswith(("http://", "https://")):
        config = McpServerConfig(name, url=options[0], **settings)
    else:
        print(_MCP_USAGE)
        return
    _check_server_name(name)
    hub.add(config)
    print(f"MCP server '{name}' added ({config.target}); it starts with the next agent cell")


def _check_server_name(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise ConfigError(
            f"bad MCP server name {name!r}: letters, digits, _ and -, starting with a letter"
        )

"""The ``python`` and ``shell`` built-ins: code in a subprocess or a container.

In a subprocess the code runs under a small launcher that sets an address
space limit (``RLIMIT_AS``) and then ``exec``s the interpreter, so a memory
hog fails inside its own process; the process group is killed at the
timeout (see :mod:`.command`). In a container the hardened defaults of
:mod:`.docker` apply, with the sandbox image built locally. Either way the
code never touches the kernel's namespace (``in_kernel: true`` is handled by
the caller, on purpose, and only when the manifest asks for it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, Literal

from ..exceptions import ToolError
from .command import command_output, run_command
from .docker import ContainerSpec, DockerEngine, run_container
from .images import sandbox_image
from .memory import memory_bytes

__all__ = ["run_code"]

_LAUNCHER = (
    "import os, resource, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _argv(language: Literal["python", "shell"], code: str, python: str) -> list[str]:
    if language == "python":
        return [python, "-c", code]
    return ["sh", "-c", code]


async def run_code(
    language: Literal["python", "shell"],
    code: str,
    *,
    sandbox: Literal["subprocess", "docker"] = "subprocess",
    time_limit: float = 30.0,
    memory: str = "512m",
    image: str | None = None,
    network: bool = False,
    engine: DockerEngine | None = None,
    cwd: str | None = None,
    pass_env: Iterable[str] = (),
) -> Any:
    """Run ``code``; return its stdout (JSON when it is JSON).

    A subprocess gets PATH, HOME, LANG… and the ``pass_env`` names of our
    environment only (:func:`~.child_env.child_environment`); a container
    gets none of it.

    Raises
    ------
    ToolError
        A non-zero exit (with the tail of stderr), the timeout, memory
        exhausted in a container, or no Docker engine.
    """
    name = language
    if sandbox == "subprocess":
        launcher = [sys.executable, "-c", _LAUNCHER, str(memory_bytes(memory))]
        result = await run_command(
            [*launcher, *_argv(language, code, sys.executable)],
            time_limit=time_limit,
            cwd=cwd,
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            pass_env=pass_env,
            name=name,
        )
    else:
        if image is None:
            image = await sandbox_image(engine)
        run = await run_container(
            ContainerSpec(image, _argv(language, code, "python3"), memory=memory, network=network),
            time_limit=time_limit,
            engine=engine,
            name=name,
        )
        if run.oom_killed:
            raise ToolError(f"tool '{name}' ran out of memory (limit {memory}) and was killed")
        result = run.result
    return command_output(name, result)

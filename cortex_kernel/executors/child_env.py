"""The environment of every child process we start: minimal, never the kernel's secrets.

Command tools, the ``python``/``shell`` subprocess sandbox, server relics
and stdio MCP servers all get :func:`child_environment`: the variables a
program needs to run (:data:`BASE_NAMES`, ``LC_*``), the names the
manifest passes with ``pass_env``, then the manifest's own ``env`` values.
Nothing else of the kernel's environment goes through: a provider key in
a child's environment is one ``print`` away from the model, and redaction
only catches the exact value (not a reversed or encoded one).

A ``pass_env`` entry is a name (``DATABASE_URL``) or a prefix ending in
``*`` (``MYAPP_*``). A name that looks secret (see
:func:`~cortex_kernel.redaction.is_secret_name`: ``*_KEY``, ``*_TOKEN``,
``*PASSWORD*``, the providers' keys…) goes through only when the manifest
names it in full, never through a prefix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ..redaction import is_secret_name

__all__: list[str] = []

#: Variables every child gets from the kernel's environment when they are set.
BASE_NAMES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    # A Python child finds the kernel's packages as the kernel does.
    "VIRTUAL_ENV",
    "PYTHONPATH",
    # Windows cannot start a process without these.
    "SYSTEMROOT",
    "PATHEXT",
    "COMSPEC",
)

#: Prefixes of variables every child gets (never a secret-looking name).
BASE_PREFIXES = ("LC_",)


def _passed(name: str, wanted: Iterable[str]) -> bool:
    """Whether ``pass_env`` entries ``wanted`` pass ``name`` (a prefix never passes a secret)."""
    for entry in wanted:
        if entry == name:
            return True
        if entry.endswith("*") and name.startswith(entry[:-1]) and not is_secret_name(name):
            return True
    return False


def child_environment(
    pass_env: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a child process.

    Parameters
    ----------
    pass_env
        Names (or ``PREFIX*``) of the kernel's variables to pass on, from
        the manifest; a secret-looking name only when given in full.
    env
        Values set by the manifest (on top of everything else).
    environ
        The kernel's environment (default: ``os.environ``).

    Returns
    -------
    dict
        :data:`BASE_NAMES` and ``LC_*`` that are set, the passed names, ``env``.

    Examples
    --------
    >>> kernel = {"PATH": "/bin", "OPENAI_API_KEY": "sk-1", "APP_HOST": "h", "APP_TOKEN": "t"}
    >>> child_environment(["APP_*"], {"MODE": "x"}, environ=kernel)
    {'PATH': '/bin', 'APP_HOST': 'h', 'MODE': 'x'}
    >>> child_environment(["APP_TOKEN"], environ=kernel)
    {'PATH': '/bin', 'APP_TOKEN': 't'}
    """
    source = os.environ if environ is None else environ
    wanted = tuple(pass_env)
    out: dict[str, str] = {}
    for name, value in source.items():
        if (
            name in BASE_NAMES
            or (name.startswith(BASE_PREFIXES) and not is_secret_name(name))
            or _passed(name, wanted)
        ):
            out[name] = value
    out.update(env or {})
    return out

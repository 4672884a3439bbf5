"""How configuration names things: its entries, environment variables and Python code.

The patterns are checked wherever a name is declared (a manifest, ``%feeds``,
a feed model output adds). Python code is named ``module:attr`` (``attr``
may be dotted, ``pkg.mod:Class.method``): a manifest's callable tools and
Python relics, a context feed's ``callable`` source. :func:`import_target`
is the one way it is imported; each caller chooses the error its context
raises (a manifest's :class:`~cortex_kernel.exceptions.ConfigError`, a
feed's :class:`~cortex_kernel.exceptions.ActionError`…), with the same message.
"""

from __future__ import annotations

import importlib
from typing import Any

from .exceptions import ConfigError

__all__ = ["ENV_NAME_PATTERN", "NAME_PATTERN", "TARGET_PATTERN", "import_target"]

#: A tool, relic, workflow, feed or agent name.
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
#: A ``pass_env`` entry: an environment variable's name, or a prefix ending in ``*``.
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*\*?$"
#: A ``module:attr`` target.
TARGET_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


def import_target(
    target: str, *, what: str = "callable", where: str = "", error: type[Exception] = ConfigError
) -> Any:
    """The object ``target`` (``module:attr``) names.

    Parameters
    ----------
    target
        ``module:attr``.
    what
        How messages name it (``callable``, ``class``).
    where
        Prefixed to messages (``team.yaml tools[0]``).
    error
        Raised when the module cannot be imported or has no such attribute.

    Raises
    ------
    Exception
        ``error``: ``cannot load callable 'm:f': cannot import module 'm': …``
        or ``… module 'm' has no 'f'``.
    """
    prefix = f"{where}: " if where else ""
    module_name, _, attribute = target.partition(":")
    start = f"{prefix}cannot load {what} {target!r}"
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise error(f"{start}: cannot import module {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise error(f"{start}: module {module_name!r} has no {attribute!r}") from None
    return value

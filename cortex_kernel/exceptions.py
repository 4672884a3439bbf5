"""The error tree of cortex-kernel.

Every error the package raises on purpose derives from :class:`CortexError`,
and each message says what went wrong and what the user can do about it.
Third-party errors are mapped onto this tree where the library is called
(litellm's in :mod:`cortex_kernel.llm.errors`; the Docker SDK's in
:mod:`~cortex_kernel.executors.docker`, :mod:`~cortex_kernel.executors.images`
and :mod:`~cortex_kernel.executors.relic_docker`), so callers never catch
another library's types. Where a builtin category fits, an error is that
too: :class:`ModelTimeout` is a :class:`TimeoutError`,
:class:`ConnectionFailed` a :class:`ConnectionError`.

::

    CortexError
    ├── ActionError              one action could not run (.action_id)
    │   ├── UnknownActionError   unknown type, tool, agent, relic or workflow
    │   ├── VariableReferenceError  a `$var` that names nothing
    │   ├── ToolError            the tool itself failed
    │   └── RelicError           a relic could not start, or its operation failed
    │       └── RelicCrashed     its process, container or object is gone (restarted on next use)
    ├── RunError                 an agent cell's run ended badly (.result: the run)
    │   ├── RunFailed            the run ended with an error
    │   ├── RunLimitReached      max_turns, max_actions, wall time, tokens or cost
    │   └── RunInterrupted       the user interrupted the run
    ├── ModelError               the model provider failed (mapped from litellm)
    │   ├── AuthenticationError  bad or missing API key
    │   ├── RateLimitError       429 after every retry
    │   ├── ContextWindowError   the prompt is too long for the model
    │   ├── ModelTimeout         no answer in time (also a TimeoutError)
    │   ├── ConnectionFailed     the provider cannot be reached (also a ConnectionError)
    │   ├── BadRequestError      the provider rejected the request
    │   ├── ProviderDown         5xx after every retry
    │   ├── ProviderProtocolError  the provider's answer is not a completion stream
    │   └── ReplayExhausted      a replay model ran out of recorded turns
    ├── ConfigError              a bad manifest, option or model string
    └── McpError                 an MCP server could not be started or used

``ReferenceError_`` is a deprecated alias of :class:`VariableReferenceError`.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = [
    "ActionError",
    "AuthenticationError",
    "BadRequestError",
    "ConfigError",
    "ConnectionFailed",
    "ContextWindowError",
    "CortexError",
    "McpError",
    "ModelError",
    "ModelTimeout",
    "ProviderDown",
    "ProviderProtocolError",
    "RateLimitError",
    "RelicCrashed",
    "RelicError",
    "ReplayExhausted",
    "RunError",
    "RunFailed",
    "RunInterrupted",
    "RunLimitReached",
    "ToolError",
    "UnknownActionError",
    "VariableReferenceError",
]


class CortexError(Exception):
    """Root of every error raised by cortex-kernel on purpose."""


class ActionError(CortexError):
    """One action could not run; the rest of the run goes on.

    Parameters
    ----------
    message
        What went wrong and what to do; the model reads it.
    action_id
        The action, when the raiser knows it.
    """

    def __init__(self, message: str = "", *, action_id: str | None = None) -> None:
        super().__init__(message)
        self.action_id = action_id


class UnknownActionError(ActionError):
    """The action names a type, tool, agent, relic or workflow that does not exist."""


class VariableReferenceError(ActionError):
    """A `$var` reference names no variable (or one the action may not read)."""


class ToolError(ActionError):
    """The tool itself raised or exited with an error."""


class RelicError(ActionError):
    """A relic (persistent service) could not start, or one of its operations failed."""


class RelicCrashed(RelicError):
    """The relic's process, container or object is gone; its next use restarts it.

    A Python relic's method may raise it to say its object is broken beyond
    repair: the call fails and the next call gets a fresh object.
    """


class RunError(CortexError):
    """An agent cell's run ended badly; the cell fails with this.

    Parameters
    ----------
    message
        Why the run ended.
    result
        The run's :class:`~cortex_kernel.runtime.run_result.RunResult` (its
        id, events, usage), when there is one.
    """

    def __init__(self, message: str = "", *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class RunFailed(RunError):
    """The agent run ended with an error; the message says why."""


class RunLimitReached(RunError):
    """The agent run hit a limit (turns, actions, time, tokens or cost)."""


class RunInterrupted(RunError):
    """The run was interrupted (the stop button); the kernel is ready for the next cell."""


class ModelError(CortexError):
    """The model provider failed; the message says what to do."""


class AuthenticationError(ModelError):
    """The provider rejected the API key, or none was set."""


class RateLimitError(ModelError):
    """The provider kept answering 429 after every retry."""


class ContextWindowError(ModelError):
    """The prompt is longer than the model accepts."""


class ModelTimeout(ModelError, TimeoutError):
    """The provider did not answer in time (``except TimeoutError`` catches it too)."""


class ConnectionFailed(ModelError, ConnectionError):
    """The provider cannot be reached (``except ConnectionError`` catches it too)."""


class BadRequestError(ModelError):
    """The provider rejected the request."""


class ProviderDown(ModelError):
    """The provider kept answering 5xx after every retry."""


class ProviderProtocolError(ModelError):
    """The provider answered with something else than a stream of completion chunks."""


class ReplayExhausted(ModelError):
    """A replay model has no recorded turn left."""


class ConfigError(CortexError):
    """A bad manifest, option or model string."""


class McpError(CortexError):
    """An MCP server could not be started or used; the message names the server.

    A failure of a running session (a server that crashed, did not start,
    lists no tools), not of its configuration.
    """


#: Old names kept importable for a while: name -> (the class, its new name).
_DEPRECATED = {"ReferenceError_": (VariableReferenceError, "VariableReferenceError")}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        value, new = _DEPRECATED[name]
        warnings.warn(
            f"cortex_kernel.exceptions.{name} is deprecated; use {new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

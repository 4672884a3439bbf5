"""The error tree of cortex-kernel.

Every error the package raises on purpose derives from :class:`CortexError`,
and each message says what went wrong and what the user can do about it.
Third-party errors (litellm, docker, jupyter) are mapped onto this tree at
the one module that talks to that library, so callers never catch another
library's types.

::

    CortexError
    ├── ProtocolError            model output that cannot be used (never raised by the parser)
    ├── ActionError              one action could not run
    │   ├── UnknownActionError   unknown type, tool, agent, relic or workflow
    │   ├── DependencyError      missing dependency, cycle, failed or cancelled dependency
    │   ├── ReferenceError_      a `$var` that names nothing
    │   ├── ActionTimeout        the action ran past its `timeout`
    │   └── ToolError            the tool itself failed
    ├── RunError                 a run ended badly
    │   ├── LimitExceeded        max_turns, max_actions, wall time, tokens or cost
    │   └── RunCancelled         the user interrupted the run
    ├── ModelError               the model provider failed (mapped from litellm)
    │   ├── AuthenticationError  bad or missing API key
    │   ├── RateLimitError       429 after every retry
    │   ├── ContextWindowError   the prompt is too long for the model
    │   ├── ModelTimeout         no answer in time
    │   ├── ConnectionFailed     the provider cannot be reached
    │   ├── BadRequestError      the provider rejected the request
    │   ├── ProviderDown         5xx after every retry
    │   └── ReplayExhausted      a replay model ran out of recorded turns
    └── ConfigError              a bad manifest, option or model string
"""

from __future__ import annotations

__all__ = [
    "ActionError",
    "ActionTimeout",
    "AuthenticationError",
    "BadRequestError",
    "ConfigError",
    "ConnectionFailed",
    "ContextWindowError",
    "CortexError",
    "DependencyError",
    "LimitExceeded",
    "ModelError",
    "ModelTimeout",
    "ProtocolError",
    "ProviderDown",
    "RateLimitError",
    "ReferenceError_",
    "ReplayExhausted",
    "RunCancelled",
    "RunError",
    "ToolError",
    "UnknownActionError",
]


class CortexError(Exception):
    """Root of every error raised by cortex-kernel on purpose."""


class ProtocolError(CortexError):
    """Model output that cannot be used as it stands."""


class ActionError(CortexError):
    """One action could not run; the rest of the run goes on."""


class UnknownActionError(ActionError):
    """The action names a type, tool, agent, relic or workflow that does not exist."""


class DependencyError(ActionError):
    """A dependency is missing, forms a cycle, failed or was cancelled."""


class ReferenceError_(ActionError):  # trailing underscore: not the builtin ReferenceError
    """A `$var` reference names no variable."""


class ActionTimeout(ActionError):
    """The action ran past its `timeout`."""


class ToolError(ActionError):
    """The tool itself raised or exited with an error."""


class RunError(CortexError):
    """A run ended badly."""


class LimitExceeded(RunError):
    """A run limit was reached: max_turns, max_actions, wall time, tokens or cost."""


class RunCancelled(RunError):
    """The user interrupted the run."""


class ModelError(CortexError):
    """The model provider failed; the message says what to do."""


class AuthenticationError(ModelError):
    """The provider rejected the API key, or none was set."""


class RateLimitError(ModelError):
    """The provider kept answering 429 after every retry."""


class ContextWindowError(ModelError):
    """The prompt is longer than the model accepts."""


class ModelTimeout(ModelError):
    """The provider did not answer in time."""


class ConnectionFailed(ModelError):
    """The provider cannot be reached."""


class BadRequestError(ModelError):
    """The provider rejected the request."""


class ProviderDown(ModelError):
    """The provider kept answering 5xx after every retry."""


class ReplayExhausted(ModelError):
    """A replay model has no recorded turn left."""


class ConfigError(CortexError):
    """A bad manifest, option or model string."""

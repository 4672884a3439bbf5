"""The composition root: the one place that wires a :class:`Session` together.

The CLI (``cortex-kernel run``), the Jupyter kernel and the ``%%agent``
magic (and the tests) build their sessions here: :func:`build_session`
resolves the model, and injects the executors, the protocol prompt and the
model resolver into the runtime through its ports
(:mod:`cortex_kernel.runtime.ports`). Nothing else constructs executors or
picks a prompt.
"""

from __future__ import annotations

from typing import Any

from .exceptions import ConfigError
from .executors import DEFAULT_INTERNAL_ACTIONS, default_executors
from .llm import resolve_model
from .llm.prompt import ProtocolPrompt
from .model_options import ModelOptions
from .runtime.ports import Model, protocol_named
from .runtime.session import Session

__all__ = ["build_session", "resolve"]


def resolve(
    model: str | Model | None, protocol: str = "xml", options: ModelOptions | None = None
) -> Model:
    """The model for ``model`` (``replay:PATH[?tps=N]``, a provider model string, or ``None``).

    ``options`` (temperature, max tokens, seed, endpoint) go to a provider
    model; a replay model ignores them. A :class:`Model` is used as it is.
    See :func:`cortex_kernel.llm.resolve_model`.
    """
    if isinstance(model, Model):
        return model
    kwargs = options.model_kwargs() if options is not None else {}
    return resolve_model(model, protocol=protocol, **kwargs)


def _resolve_named(name: str) -> Model:
    # The model an ``llm`` action names: plain, like ``%model NAME``.
    return resolve_model(name)


def build_session(
    model: str | Model | None = None,
    manifest: str | None = None,
    protocol: str | None = None,
    options: ModelOptions | None = None,
    **kw: Any,
) -> Session:
    """Compose a session.

    Parameters
    ----------
    model
        ``replay:PATH[?tps=N]``, a litellm model string, a :class:`Model`
        (shared between sessions, as the eval does), or ``None`` for the
        default (see :func:`cortex_kernel.llm.resolve_model`).
    manifest
        An agent manifest; not supported by this runtime yet (``ConfigError``).
    protocol
        ``"xml"`` (default) or ``"tools"``; ``options.protocol`` when not given.
    options
        Model options (:class:`~cortex_kernel.model_options.ModelOptions`).
    **kw
        Passed to :class:`Session` (``namespace``, ``transcript_dir``,
        ``limits``, ``tools``; ``prompt`` or ``executors`` to replace ours).

    Raises
    ------
    ConfigError
        A bad model string or protocol, or a manifest.
    """
    if manifest is not None:
        raise ConfigError(
            f"cannot load manifest {manifest!r}: manifests are not supported by this "
            "version yet; run without --manifest"
        )
    if protocol is None and options is not None:
        protocol = options.protocol
    chosen = protocol_named(protocol)
    kw.setdefault("prompt", ProtocolPrompt())
    kw.setdefault("executors", default_executors())
    kw.setdefault("allowed_internal", DEFAULT_INTERNAL_ACTIONS)
    kw.setdefault("resolve_model", _resolve_named)
    return Session(resolve(model, chosen, options), protocol=chosen, **kw)

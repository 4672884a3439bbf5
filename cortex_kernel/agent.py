"""Composition: build a :class:`Session` from a model name (and later a manifest).

Used by the CLI (``cortex-kernel run``) and the Jupyter kernel. ``replay:``
specs are resolved here without touching the model layer; anything else goes
through :func:`cortex_kernel.llm.resolve_model`, whose ``ProtocolPrompt`` is
also used as the system prompt when it is importable.
"""

from __future__ import annotations

from typing import Any, Literal

from .exceptions import ConfigError
from .model_options import ModelOptions
from .runtime.ports import Model, PromptBuilder
from .runtime.session import Session

__all__ = ["build_session", "resolve"]


def resolve(
    model: str | Model | None, protocol: str = "xml", options: ModelOptions | None = None
) -> Model:
    """The model for ``model`` (``replay:PATH[?tps=N]`` or a provider model string).

    ``options`` (temperature, max tokens, seed, endpoint) go to a provider
    model; a replay model ignores them. A :class:`Model` is used as it is.
    """
    if isinstance(model, Model):
        return model
    if model is not None and model.startswith("replay:"):
        from .llm.replay import ReplayModel

        return ReplayModel.from_spec(model)
    try:
        from .llm import resolve_model
    except ImportError:
        raise ConfigError(
            f"cannot use model {model!r}: the model layer (cortex_kernel.llm) is not "
            "available; use replay:PATH for an offline run"
        ) from None
    kwargs = options.model_kwargs() if options is not None else {}
    resolved: Model = resolve_model(model, protocol=protocol, **kwargs)
    return resolved


def _prompt() -> PromptBuilder | None:
    try:
        from .llm import ProtocolPrompt
    except (ImportError, AttributeError):
        return None
    prompt: PromptBuilder = ProtocolPrompt()
    return prompt


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
        Passed to :class:`Session` (``namespace``, ``transcript_dir``, ``limits``…).

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
    chosen: Literal["xml", "tools"]
    if protocol in (None, "xml"):
        chosen = "xml"
    elif protocol == "tools":
        chosen = "tools"
    else:
        raise ConfigError(f"unknown protocol {protocol!r}: use 'xml' or 'tools'")
    kw.setdefault("prompt", _prompt())
    return Session(resolve(model, chosen, options), protocol=chosen, **kw)

"""Models for the runtime: litellm for real providers, replay for offline runs.

This is the only package that imports litellm, and it does so lazily:
importing ``cortex_kernel.llm`` costs nothing (the kernel must start
without paying 2–4 s for litellm). :func:`resolve_model` picks a model from
a name and its options, the environment, or — with no model and no
provider key — the built-in demo transcript, with a note saying so; it is
the one place a model is made from a name. ``ProtocolPrompt``,
``PROMPT_VERSION`` and ``LiteLLMModel`` are loaded on first access.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:  # what type checkers see ("X as X": re-exported)
    from ..model_options import ModelOptions
    from ..runtime.ports import Model
    from .litellm_model import LiteLLMModel as LiteLLMModel
    from .prompt import PROMPT_VERSION as PROMPT_VERSION
    from .prompt import ProtocolPrompt as ProtocolPrompt

# At run time: the heavy parts, each name -> its module, loaded on first use
# (PEP 562). tests/test_public_api.py checks that this and the block above agree.
_LAZY = {
    "LiteLLMModel": ".litellm_model",
    "ProtocolPrompt": ".prompt",
    "PROMPT_VERSION": ".prompt",
}

__all__ = [
    "DEFAULT_MODELS",
    "DEMO_NOTE",
    "DEMO_TRANSCRIPT",
    "configured_model",
    "default_model_name",
    "is_demo",
    "preload",
    "resolve_model",
    *_LAZY,
]

#: The transcript the demo model replays (docs/runtime.md#models: no provider, still a run).
DEMO_TRANSCRIPT = Path(__file__).with_name("demo_transcript.jsonl")

#: Shown to the user when the demo model stands in for a real one.
DEMO_NOTE = (
    "No model is configured and no provider API key is set, so this run replays the "
    "built-in demo transcript (offline, no model is called). Set a key such as "
    "OPENAI_API_KEY or ANTHROPIC_API_KEY, or choose a model with --model / %model "
    "(any litellm model string, or replay:PATH)."
)

#: With no model named, the first provider key found picks its model.
DEFAULT_MODELS: dict[str, str] = {
    "OPENAI_API_KEY": "openai/gpt-4o-mini",
    "ANTHROPIC_API_KEY": "anthropic/claude-3-5-haiku-latest",
    "GEMINI_API_KEY": "gemini/gemini-2.0-flash",
    "MISTRAL_API_KEY": "mistral/mistral-small-latest",
    "GROQ_API_KEY": "groq/llama-3.3-70b-versatile",
    "DEEPSEEK_API_KEY": "deepseek/deepseek-chat",
    "XAI_API_KEY": "xai/grok-2-latest",
    "OPENROUTER_API_KEY": "openrouter/openai/gpt-4o-mini",
    "TOGETHERAI_API_KEY": "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "FIREWORKS_AI_API_KEY": "fireworks_ai/accounts/fireworks/models/llama-v3p3-70b-instruct",
    "COHERE_API_KEY": "cohere_chat/command-r",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)


def preload() -> threading.Thread:
    """Warm litellm in a background thread (:func:`~cortex_kernel.llm.warm.warm_litellm`:
    the import and one in-memory streamed call) and return the thread.

    For hosts other than the Cortex kernel (which runs its own, idle-aware
    warm-up, :mod:`cortex_kernel.jupyter.warmup`), so the first request does
    not wait seconds. Safe to call more than once.
    """
    from .warm import warm_litellm

    thread = threading.Thread(target=warm_litellm, name="cortex-litellm-preload", daemon=True)
    thread.start()
    return thread


def configured_model(environ: Mapping[str, str] | None = None) -> str | None:
    """``$CORTEX_MODEL`` (of ``environ``, default the process's), or ``None`` when unset."""
    env = os.environ if environ is None else environ
    return env.get("CORTEX_MODEL", "").strip() or None


def default_model_name() -> str | None:
    """The model to use when none is named: ``$CORTEX_MODEL``, else the
    default of the first provider whose key is set, else ``None`` (the demo)."""
    configured = configured_model()
    if configured:
        return configured
    for env, model in DEFAULT_MODELS.items():
        if os.environ.get(env, "").strip():
            return model
    return None


def is_demo(model: object) -> bool:
    """Whether ``model`` is the built-in demo (:func:`resolve_model` with no model and no key)."""
    return getattr(model, "note", None) == DEMO_NOTE


def resolve_model(name: str | None = None, options: ModelOptions | None = None) -> Model:
    """The model for a name from ``--model``, a manifest, ``%model`` or an ``llm`` action.

    Parameters
    ----------
    name
        ``replay:PATH[?tps=N]`` for a replay model; any other string is a
        litellm model (``openai/gpt-4o-mini``…). ``None`` (or empty) means
        :func:`default_model_name`; when that finds nothing, the replay model
        on :data:`DEMO_TRANSCRIPT`, whose ``note`` says so.
    options
        The model's options (:class:`~cortex_kernel.model_options.ModelOptions`:
        protocol, temperature, endpoint, timeouts…). A replay model ignores them.

    Returns
    -------
    Model
        Ready to stream; nothing is imported from litellm until it does.

    Raises
    ------
    ConfigError
        A bad option, or a provider litellm does not know (the closest are named).
    """
    chosen = (name or "").strip() or default_model_name()
    if chosen is None:
        from .replay import ReplayModel

        demo = ReplayModel.from_spec(f"replay:{DEMO_TRANSCRIPT}")
        demo.note = DEMO_NOTE
        demo.restart_each_run = True  # every question gets the demo, not ReplayExhausted
        return demo
    if chosen.startswith("replay:"):
        return _replay(chosen)
    from .litellm_model import LiteLLMModel
    from .providers import check_model_name

    check_model_name(chosen)  # a typo fails now, not at the first request

    if options is None:
        return LiteLLMModel(chosen)
    return LiteLLMModel(chosen, protocol=options.protocol or "xml", **options.model_kwargs())


def _replay(spec: str) -> Model:
    from .replay import ReplayModel  # written by the runtime; a light import

    model: Model = ReplayModel.from_spec(spec)
    return model

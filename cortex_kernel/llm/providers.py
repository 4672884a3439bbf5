"""Is a litellm model string one litellm can route? Checked when the model is set.

A typo in the provider (``opnai/gpt-4o-mini``) or a bare name litellm does
not know (``gpt4o-mini``) otherwise fails only at the first request, deep in
a run. :func:`check_model_name` fails at once instead, naming the closest
known providers (or models).

The check must not import litellm (2–4 s) for a name it accepts: the known
providers and models come from the data files litellm ships (its model cost
map and its provider table), read without executing the package. Only a name
those files do not know imports litellm, whose own provider list and routing
(``get_llm_provider``) have the last word, so a provider newer than the
files is never refused.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

from ..exceptions import ConfigError

__all__ = ["check_model_name"]

_PROVIDERS_PAGE = "https://docs.litellm.ai/docs/providers"


def _litellm_file(name: str) -> Any:
    spec = importlib.util.find_spec("litellm")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@cache
def _cost_map() -> dict[str, str]:
    """Model name -> its provider, from litellm's model cost map."""
    data = _litellm_file("model_prices_and_context_window_backup.json")
    return {
        name: str(entry["litellm_provider"])
        for name, entry in data.items()
        if isinstance(entry, dict) and isinstance(entry.get("litellm_provider"), str)
    }


@cache
def _listed_providers() -> frozenset[str]:
    """The providers of litellm's provider table (a small file: read first)."""
    table = _litellm_file("provider_endpoints_support_backup.json")
    listed = table.get("providers", {}) if isinstance(table, dict) else {}
    return frozenset(listed)


def _shipped_providers() -> frozenset[str]:
    return _listed_providers() | frozenset(_cost_map().values())


def _litellm() -> Any:
    from .litellm_model import load_litellm  # offline and quiet; only for an unknown name

    return load_litellm()


def _all_providers() -> list[str]:
    names = set(_shipped_providers())
    names.update(str(getattr(p, "value", p)) for p in getattr(_litellm(), "provider_list", []))
    return sorted(n for n in names if n and " " not in n)


def check_model_name(model: str) -> None:
    """Refuse a litellm model string whose provider litellm does not know.

    Parameters
    ----------
    model
        ``provider/name`` (``openai/gpt-4o-mini``) or a bare name litellm
        routes itself (``gpt-4o-mini``).

    Raises
    ------
    ConfigError
        An unknown provider prefix, with the closest known providers; an
        unknown bare name, with the closest known models as ``provider/name``.
    """
    prefix, slash, _ = model.partition("/")
    if slash:
        if prefix in _listed_providers() or prefix in _all_providers():
            return
        close = difflib.get_close_matches(prefix.lower(), _all_providers(), 3, 0.6)
        hint = f"; closest known providers: {', '.join(close)}" if close else ""
        raise ConfigError(
            f"unknown model provider '{prefix}' in '{model}'{hint} "
            f"(a model is provider/name, providers: {_PROVIDERS_PAGE})"
        )
    if model in _cost_map() or _litellm_routes(model):
        return
    costs = _cost_map()
    close = difflib.get_close_matches(model, list(costs), 3, 0.75)
    hint = f"; did you mean {', '.join(f'{costs[n]}/{n}' for n in close)}?" if close else "."
    raise ConfigError(
        f"litellm cannot tell which provider serves the model '{model}'{hint} Write it as "
        f"provider/name, e.g. openai/gpt-4o-mini (providers: {_PROVIDERS_PAGE})"
    )


def _litellm_routes(model: str) -> bool:
    # Its own routing has rules beyond the cost map (fine-tuned ids, name patterns).
    litellm = _litellm()
    try:
        litellm.get_llm_provider(model)
    except Exception:  # litellm raises its BadRequestError for a name it cannot route
        return False
    return True

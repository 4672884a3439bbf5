"""Whether to send the protocol grammar, and which: ``--constrain auto|grammar|off``.

- ``off``: never.
- ``grammar``: with every protocol-text turn (``protocol xml``), whatever the
  server; one that refuses it is asked again without it (below).
- ``auto``: only to a server that says it takes a GBNF
  ``grammar`` — detected once per ``api_base`` (:func:`supports_grammar`),
  never guessed from the model's name:

  - llama.cpp's ``llama-server`` answers ``GET /props`` with its
    ``default_generation_settings``;
  - llama-cpp-python's server publishes an OpenAPI document whose
    ``POST /v1/chat/completions`` body has a ``grammar`` property.

  Anything else (a hosted provider, Ollama, vLLM, no ``api_base``) gets no
  grammar.

A grammar is built from the turn's
:class:`~cortex_kernel.runtime.ports.PromptContext`
(:func:`cortex_kernel.llm.grammar.protocol_grammar`), from the same values
as the system prompt with secrets redacted the same way, and checked with
:func:`cortex_kernel.llm.gbnf.check` before it is ever sent: llama-cpp-python
0.3's server exits on a grammar it cannot parse. One that fails the check is
not sent (a warning says why). A server that answers a request carrying the
grammar with an error that names it (llama.cpp: ``400 Failed to parse
grammar``; a provider that does not know the field) is asked again without
it; :func:`grammar_refused` recognises that answer.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Final, Literal

from ..redaction import Redactor, secret_values
from ..runtime.ports import PromptContext
from .gbnf import check
from .grammar import protocol_grammar

__all__ = ["grammar_for"]

ConstrainMode = Literal["auto", "grammar", "off"]
CONSTRAIN_MODES: Final = ("auto", "grammar", "off")
#: Seconds each detection request may take.
PROBE_TIMEOUT: Final = 5.0

# api_base -> whether it takes a grammar (probed once per process).
_SUPPORT: dict[str, bool] = {}
# What a context offers (as JSON) -> (grammar, why not); the last few contexts.
_GRAMMARS: OrderedDict[str, tuple[str | None, str | None]] = OrderedDict()
_GRAMMARS_KEPT: Final = 8
_GRAMMARS_LOCK: Final = threading.Lock()  # grammar_for runs in worker threads


def constrain_mode(value: str | None) -> ConstrainMode:
    """``value`` as a :data:`ConstrainMode` (``None``: ``off``).

    Off by default: on the local Qwen2.5-Coder-1.5B with prompt version 4
    the default eval suite scores 14/22 with the grammar and 14/22 without
    it (cleaner runs, not more right answers; docs/local-models.md), so it
    is opt-in until a measurement says it helps.

    Raises
    ------
    ValueError
        Anything else.
    """
    if value is None or value == "off":
        return "off"
    if value == "auto":
        return "auto"
    if value == "grammar":
        return "grammar"
    raise ValueError(f"unknown constrain mode {value!r}: use auto, grammar or off")


def _root(api_base: str) -> str:
    root = api_base.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def _get_json(client: Any, url: str) -> Any:
    try:
        response = await client.get(url)
        if response.status_code != 200:
            return None
        return response.json()
    except Exception:  # a refused connection, a timeout, not JSON: not supported
        return None


def _openapi_takes_grammar(document: Any) -> bool:
    """Whether the chat completions body of an OpenAPI document has ``grammar``."""
    try:
        operation = document["paths"]["/v1/chat/completions"]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        reference = schema.get("$ref", "")
        if reference.startswith("#/components/schemas/"):
            schema = document["components"]["schemas"][reference.rsplit("/", 1)[-1]]
        return "grammar" in schema.get("properties", {})
    except (KeyError, TypeError, AttributeError):
        return False


async def _probe(api_base: str, seconds: float) -> bool:
    import httpx

    root = _root(api_base)
    async with httpx.AsyncClient(timeout=seconds) as client:
        props = await _get_json(client, f"{root}/props")
        if isinstance(props, dict) and isinstance(props.get("default_generation_settings"), dict):
            return True  # llama.cpp's llama-server
        return _openapi_takes_grammar(await _get_json(client, f"{root}/openapi.json"))


async def supports_grammar(api_base: str, *, seconds: float = PROBE_TIMEOUT) -> bool:
    """Whether the server at ``api_base`` takes a GBNF ``grammar`` (asked once, then cached).

    Parameters
    ----------
    api_base
        The endpoint (``http://host:port/v1``).
    seconds
        How long each detection request may take; a server that does not
        answer in time is taken not to support grammars.
    """
    known = _SUPPORT.get(api_base)
    if known is None:
        known = _SUPPORT[api_base] = await _probe(api_base, seconds)
    return known


def forget_support(api_base: str | None = None, *, refused: bool = False) -> None:
    """Drop what was detected (for ``api_base``, or all); ``refused``: remember "no"."""
    if api_base is None:
        _SUPPORT.clear()
    elif refused:
        _SUPPORT[api_base] = False
    else:
        _SUPPORT.pop(api_base, None)


def forget_grammars() -> None:
    """Drop the grammars kept for recent contexts (they are built again when asked)."""
    with _GRAMMARS_LOCK:
        _GRAMMARS.clear()


def grammar_for(
    context: PromptContext, secrets: tuple[str | None, ...] = ()
) -> tuple[str | None, str | None]:
    """The protocol grammar for ``context``, checked: ``(grammar, None)`` or ``(None, why)``.

    Secrets (the environment's keys and ``secrets``) are redacted from what
    the grammar is built of, as they are from the prompt. The last few
    grammars are kept: a session's turns offer the same things.
    """
    offered = Redactor(secret_values(secrets)).value(
        {
            "tools": context.tools,
            "agents": context.agents,
            "relics": context.relics,
            "workflows": context.workflows,
            "internal_actions": sorted(context.internal_actions),
        }
    )
    key = json.dumps(offered, sort_keys=True, default=str)
    with _GRAMMARS_LOCK:
        known = _GRAMMARS.get(key)
        if known is not None:
            _GRAMMARS.move_to_end(key)
            return known
    found: tuple[str | None, str | None]
    try:
        grammar = protocol_grammar(PromptContext(**offered))
        problem = check(grammar)
        found = (grammar, None) if problem is None else (None, problem)
    except (RecursionError, ValueError, TypeError) as exc:  # a schema we cannot read
        found = (None, f"{type(exc).__name__}: {exc}")
    with _GRAMMARS_LOCK:
        _GRAMMARS[key] = found
        if len(_GRAMMARS) > _GRAMMARS_KEPT:
            _GRAMMARS.popitem(last=False)
    return found


def grammar_refused(exc: BaseException) -> bool:
    """Whether a provider error is the server refusing the grammar it was sent.

    An HTTP error (4xx or 5xx) whose message names the grammar: llama.cpp's
    ``Failed to parse grammar``, an OpenAI-style ``Unrecognized request
    argument supplied: grammar``.
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or status < 400:
        return False
    return "grammar" in str(exc).lower()

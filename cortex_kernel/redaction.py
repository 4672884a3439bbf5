"""The one place that keeps secrets (and unencodable text) out of everything we send.

Secrets are the values of environment variables whose names look secret
(``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``, ``*APIKEY``, AWS
access keys) plus the key variables of the providers litellm knows
(:data:`PROVIDER_KEY_ENV`), and any key given explicitly. Each outbound
boundary calls this module:

- every event of a run, in :meth:`cortex_kernel.runtime.loop.Run.emit`,
  before it reaches the transcript, the live view, the CLI or ``_run``;
- every message sent to a provider (system prompt, history, action
  results, ``llm`` sub-calls), in the model adapters;
- the model text recorded per turn and the final answer.

A :class:`Redactor` is built once per run (reading the environment is not
free at the token rate); its :meth:`~Redactor.text` replaces each secret
with ``***`` and writes surrogate code points (undecodable file names) as
``\\udcff`` escapes, so every string it returns is encodable as UTF-8.

Values that *look* like credentials, wherever they come from (a URL with a
password, a bearer token, an AWS or GitHub key…), are found by
:func:`find_credentials` with the plugins of the maintained ``detect-secrets``
scanner, run in-process on the text; :func:`scrub_credentials` replaces
them. The notebook's variables go through it when their values are shown.

This module imports nothing else of ``cortex_kernel``: every layer uses it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = [
    "PROVIDER_KEY_ENV",
    "REDACTED",
    "SECRET_ENV_PATTERN",
    "Redactor",
    "StreamRedactor",
    "find_credentials",
    "is_secret_name",
    "redact",
    "scrub_credentials",
    "secret_values",
]

#: The environment variable litellm reads the key from, per provider prefix.
PROVIDER_KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "text-completion-openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "cohere": "COHERE_API_KEY",
    "cohere_chat": "COHERE_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "perplexity": "PERPLEXITYAI_API_KEY",
    "huggingface": "HUGGINGFACE_API_KEY",
    "azure": "AZURE_API_KEY",
    "bedrock": "AWS_ACCESS_KEY_ID",
    "vertex_ai": "VERTEXAI_PROJECT",
}

# Provider credentials litellm reads whose names the pattern below misses.
_PROVIDER_SECRETS = frozenset(
    {*PROVIDER_KEY_ENV.values(), "AZURE_AD_TOKEN", "AWS_SESSION_TOKEN", "HF_TOKEN"}
) - {"VERTEXAI_PROJECT"}

#: Names of environment variables whose values are treated as secrets.
SECRET_ENV_PATTERN = re.compile(
    r"(_KEY|APIKEY|_TOKEN|_SECRET|SECRET_ACCESS_KEY|ACCESS_KEY_ID)$|PASSWORD|PASSWD",
    re.IGNORECASE,
)

#: What a secret is replaced with.
REDACTED = "***"

# Values shorter than this are not redacted: "1" or "true" would mangle text.
_MIN_SECRET_LENGTH = 6

_SURROGATE = "[\ud800-\udfff]"

# Values with no text in them (exact types), skipped without a call.
_ATOMS = frozenset({type(None), bool, int, float})
_NUMBERS = (bool, int, float)
_SEQUENCES = (list, tuple)
# The model classes seen so far: a dataclass's fields by name (a parser
# event, an action), ``None`` for a pydantic model (read from ``__dict__``).
_MODEL_TYPES: dict[type, tuple[str, ...] | None] = {}


def _is_model(kind: type) -> bool:
    """Whether ``kind`` is a pydantic model or a dataclass (a parser event, an
    action); if so, remembered in :data:`_MODEL_TYPES`."""
    if issubclass(kind, BaseModel):
        _MODEL_TYPES[kind] = None
    elif dataclasses.is_dataclass(kind):
        # Only what its constructor takes: ``dataclasses.replace`` rebuilds it.
        _MODEL_TYPES[kind] = tuple(f.name for f in dataclasses.fields(kind) if f.init)
    else:
        return False
    return True


T = TypeVar("T")


def is_secret_name(name: str) -> bool:
    """Whether the environment variable ``name`` holds a secret."""
    return name in _PROVIDER_SECRETS or SECRET_ENV_PATTERN.search(name) is not None


def secret_values(
    extra: Iterable[str | None] = (), environ: Mapping[str, str] | None = None
) -> list[str]:
    """Values to keep out of every message: secret-looking env vars plus ``extra``."""
    env = os.environ if environ is None else environ
    values = {
        value
        for name, value in env.items()
        if len(value) >= _MIN_SECRET_LENGTH and is_secret_name(name)
    }
    values.update(v for v in extra if v and len(v) >= _MIN_SECRET_LENGTH)
    # Longest first, so a key that contains another is replaced whole.
    return sorted(values, key=len, reverse=True)


class Redactor:
    """Scrubs secrets and surrogates from text, JSON-like values and events.

    Parameters
    ----------
    secrets
        The values to hide (default: :func:`secret_values` now).
    """

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        values = secret_values() if secrets is None else sorted(set(secrets), key=len, reverse=True)
        self.secrets: tuple[str, ...] = tuple(values)
        alternatives = [re.escape(value) for value in self.secrets] + [_SURROGATE]
        self._pattern = re.compile("|".join(alternatives))

    def _replace(self, match: re.Match[str]) -> str:
        found = match.group(0)
        if len(found) == 1 and "\ud800" <= found <= "\udfff":
            return f"\\u{ord(found):04x}"
        return REDACTED

    def matches(self, text: str) -> list[re.Match[str]]:
        """Where secrets (and surrogates) occur in ``text``."""
        return list(self._pattern.finditer(text))

    def text(self, text: str) -> str:
        """``text`` without secrets, surrogates escaped (the same object when clean)."""
        if self._pattern.search(text) is None:
            return text
        return self._pattern.sub(self._replace, text)

    def value(self, value: T) -> T:
        """Every string inside ``value`` (dicts, lists, tuples, pydantic models, events) scrubbed.

        Returns the same object when nothing changed, so clean events cost
        a scan and no copy.
        """
        if type(value) in _MODEL_TYPES:  # an event: straight to its fields
            return self._model(value, 0)  # type: ignore[no-any-return]
        return self._walk(value, 0)  # type: ignore[no-any-return]

    def _walk(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind in _ATOMS:  # exact types; subclasses (a str enum) take the isinstance path
            return value
        if isinstance(value, str):
            return self.text(value)
        if depth > 200 or isinstance(value, _NUMBERS):
            return value
        # A class seen once is known: pydantic's isinstance check runs Python code.
        if kind in _MODEL_TYPES or _is_model(kind):
            return self._model(value, depth)
        if isinstance(value, dict):
            cleaned = {self._walk(k, depth + 1): self._walk(v, depth + 1) for k, v in value.items()}
            same = len(cleaned) == len(value) and all(
                k in value and value[k] is v for k, v in cleaned.items()
            )
            return value if same else cleaned
        if isinstance(value, _SEQUENCES):
            items = [self._walk(v, depth + 1) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return items if isinstance(value, list) else tuple(items)
        return value

    def _model(self, value: Any, depth: int) -> Any:
        """A model with its fields scrubbed (the same object when clean).

        Called once per event, so the common fields are looked at inline:
        clean strings cost one search, numbers and ``None`` nothing, a span
        nothing. A pydantic model's fields are read as ``__dict__`` holds
        them (``model_fields`` costs a deprecation check per access), a
        dataclass's by name.
        """
        updates: dict[str, Any] = {}
        search = self._pattern.search
        names = _MODEL_TYPES[type(value)]
        items = value.__dict__.items() if names is None else [(n, getattr(value, n)) for n in names]
        for name, item in items:
            kind = type(item)
            if kind is str:
                if search(item) is None:
                    continue
                clean = self.text(item)
            elif kind in _ATOMS or (
                kind is tuple and len(item) == 2 and type(item[0]) is int and type(item[1]) is int
            ):
                continue
            else:
                clean = self._walk(item, depth + 1)
            if clean is not item:
                updates[name] = clean
        if not updates:
            return value
        if names is None:
            return value.model_copy(update=updates)
        try:
            return dataclasses.replace(value, **updates)
        except (TypeError, ValueError):  # a dataclass its constructor cannot remake (InitVar…)
            return value  # kept, as any object the redactor does not know


class StreamRedactor:
    """A :class:`Redactor` for streamed text: a secret split across chunks is caught too.

    :meth:`feed` returns what is safe to pass on now; the end of a chunk that
    could be the start of a secret is held back until the next chunk says
    (or :meth:`flush` at the end of the stream). Ordinary text is held back
    not at all, so dispatch at ``</action>`` is not delayed.
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._held = ""

    def feed(self, chunk: str) -> str:
        """The scrubbed text that can go on now."""
        raw = self._held + chunk if self._held else chunk
        if self.redactor._pattern.search(raw) is None:
            # The common case, once per chunk: nothing to replace, only the
            # start of a secret at the end to hold back.
            cut = len(raw) - self._secret_start(raw)
            self._held = raw[cut:]
            return raw[:cut]
        cut = len(raw) - self._secret_start(raw)
        # Never cut through a secret that is already whole: move before it.
        moved = True
        while moved:
            moved = False
            for match in self.redactor.matches(raw):
                if match.start() < cut < match.end():
                    cut, moved = match.start(), True
        self._held = raw[cut:]
        return self.redactor.text(raw[:cut])

    def flush(self) -> str:
        """What was held back, scrubbed, at the end of the stream."""
        held, self._held = self._held, ""
        return self.redactor.text(held)

    def _secret_start(self, text: str) -> int:
        """Length of the longest end of ``text`` that begins some secret."""
        longest = 0
        end = len(text)
        for secret in self.redactor.secrets:
            # Candidates start where the secret's first character occurs in
            # the last len(secret) - 1 characters: a find, not a slice per size.
            first = secret[0]
            at = text.find(first, max(0, end - len(secret) + 1), end - longest)
            while at != -1:
                if secret.startswith(text[at:]):
                    longest = end - at
                    break
                at = text.find(first, at + 1, end - longest)
        return longest


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """Replace every secret value (see :func:`secret_values`) in ``text`` with ``***``."""
    for value in secret_values(extra):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


# -- credential-looking values (detect-secrets) --------------------------------

# Longer texts are scanned at both ends only (what a cut repr shows): the scan
# costs time per character, and a notebook variable may hold megabytes.
_SCAN_EDGE = 1024
# detect-secrets plugins that find no credential (a public IP address is none).
_NOT_CREDENTIALS = frozenset({"Public IP (ipv4)"})


@functools.cache
def _detectors() -> tuple[Any, ...]:
    """One instance of every detect-secrets plugin (imported on first use: ~0.1 s)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    # detect-secrets has no plugin for an HTTP Authorization value that is in
    # no known key format (an opaque bearer token): this one pattern fills it.
    class AuthorizationDetector(RegexBasedDetector):
        """``Bearer …``, ``Basic …`` and ``Token …`` credentials (with a digit in them)."""

        secret_type = "Authorization credentials"
        denylist = (
            re.compile(
                r"\b(?:bearer|basic|token)\s+((?=[^\s'\"]*\d)[A-Za-z0-9\-._~+/]{8,}=*)",
                re.IGNORECASE,
            ),
        )

    classes: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
    found = [cls() for kind, cls in sorted(classes.items()) if kind not in _NOT_CREDENTIALS]
    return (*found, AuthorizationDetector())


def _regex_secret(match: re.Match[str]) -> str:
    """The credential in a detector's match: the group that ends it, else the whole match.

    A regex either captures the secret after its context (``://user:(pw)@``,
    ``aws…key = '(…)'``) or captures only a prefix (``(ghp|gho)_…``): the
    whole match is the secret then.
    """
    for index in range(match.re.groups, 0, -1):
        start, end = match.span(index)
        if start >= 0 and end > start and end >= match.end() - 2:
            return match.group(index)
    return match.group(0)


def find_credentials(text: str) -> tuple[str, ...]:
    """Substrings of ``text`` that look like credentials, longest first.

    Every ``detect-secrets`` plugin (keys of known formats, URLs with a
    password, ``password = '…'``-style assignments, high-entropy quoted
    strings, private key headers…) plus one for ``Authorization`` values
    (``Bearer …``) looks at each line. Nothing is verified over the network.
    A text longer than 2 KiB is scanned at its first and last KiB only.
    Results are cached per text, so values that stay the same from turn to
    turn cost one lookup.

    Parameters
    ----------
    text
        Any text (a repr, a string value, a line of a prompt).

    Returns
    -------
    tuple of str
        The credential values found (empty when there is none).
    """
    if len(text) <= 2 * _SCAN_EDGE:
        return _find(text)
    both = set(_find(text[:_SCAN_EDGE]) + _find(text[-_SCAN_EDGE:]))
    return tuple(sorted(both, key=len, reverse=True))


# Texts of at most 2 KiB, so the cache holds at most a few MiB.
@functools.lru_cache(maxsize=4096)
def _find(text: str) -> tuple[str, ...]:
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

    found: set[str] = set()
    for line in text.splitlines() or [text]:
        for plugin in _detectors():
            if isinstance(plugin, RegexBasedDetector):
                # The regexes themselves: analyze_string yields a prefix group
                # (``ghp``) for some of them, not the secret.
                for regex in plugin.denylist:
                    found.update(_regex_secret(m) for m in regex.finditer(line))
                continue
            for value in plugin.analyze_string(line):
                if isinstance(plugin, HighEntropyStringsPlugin) and (
                    plugin.calculate_shannon_entropy(value) <= plugin.entropy_limit
                ):
                    continue  # a quoted string, but not a random-looking one
                found.add(value)
    found.discard("")
    return tuple(sorted(found, key=len, reverse=True))


def scrub_credentials(text: str) -> str:
    """``text`` with every credential-looking value (:func:`find_credentials`) as ``***``."""
    for value in find_credentials(text):
        text = text.replace(value, REDACTED)
    return text

"""Model options: the one place where they are declared, parsed and validated.

``%model M --temperature 0``, ``%%agent --max-tokens 800``, ``cortex-kernel
run --seed 7``, ``cortex-kernel eval --protocol tools`` and an agent
manifest's ``model:`` table all end up here:

- :class:`ModelOptions` is the validated value (pydantic, ``extra="forbid"``,
  frozen). A new option is one new field with its ``Field`` constraints and
  a ``description`` (the help text); the command-line flag
  (``--max-tokens`` for ``max_tokens``) follows from the field's name.
- :func:`add_model_arguments` adds every option's flag to an ``argparse``
  parser; :func:`options_from_args` validates what was given.
- :func:`parse_model_line` reads a ``%model`` line (``SPEC --flag V …``).
- :meth:`ModelOptions.from_mapping` validates a manifest's table.

Every validation error is a :class:`~cortex_kernel.exceptions.ConfigError`
naming the option as the user wrote it (``--temperature`` on a command line,
``temperature`` in a manifest).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .exceptions import ConfigError

__all__ = [
    "PROTOCOLS",
    "ModelOptions",
    "ProtocolName",
    "add_model_arguments",
    "options_from_args",
    "parse_model_line",
    "protocol_named",
]

#: How the model acts: protocol text (``xml``) or native function calling (``tools``).
ProtocolName = Literal["xml", "tools"]
#: Every :data:`ProtocolName`, the default first.
PROTOCOLS: tuple[ProtocolName, ...] = get_args(ProtocolName)
Constrain = Literal["auto", "grammar", "off"]
CodeFirst = Literal["auto", "on", "off"]
_CHOICES: dict[str, list[str]] = {
    "protocol": list(PROTOCOLS),
    "constrain": list(get_args(Constrain)),
    "code_first": list(get_args(CodeFirst)),
}


def protocol_named(value: str | None) -> ProtocolName:
    """``value`` as a :data:`ProtocolName` (``None`` means ``xml``).

    Raises
    ------
    ConfigError
        Anything but ``xml`` or ``tools``.
    """
    if value is None:
        return "xml"
    for name in PROTOCOLS:
        if value == name:
            return name
    raise ConfigError(f"Unknown protocol {value!r}: use 'xml' or 'tools' (--protocol).")


class ModelOptions(BaseModel):
    """Options of the model a session uses; ``None`` means "not set here".

    Attributes
    ----------
    temperature
        Sampling temperature (0 = deterministic as far as the provider allows).
    max_tokens
        Upper bound on the tokens of one turn.
    seed
        Sampling seed, for providers that honour one (llama.cpp, OpenAI).
    api_base
        The endpoint of an OpenAI-compatible server (``http://host:port/v1``).
    protocol
        ``xml`` (protocol text) or ``tools`` (native function calling).
    timeout
        Seconds allowed to connect and, once tokens flow, between two chunks
        of the stream (default 30).
    first_token_timeout
        Seconds from sending the request to the first token (default 30; 600
        for a server on this machine, where a CPU model may read a long
        prompt for minutes).
    retries
        Extra attempts after a timeout, 429, 5xx or lost connection that
        happens before the first token (default 2; 0 for a server on this
        machine, which is busy rather than unreachable).
    constrain
        ``auto`` (default): send the protocol's GBNF grammar with
        protocol-text turns to a server detected to take one (llama.cpp's
        server, llama-cpp-python's); ``grammar``: to any server; ``off``:
        never. A server that refuses it is asked again without it.
    code_first
        ``auto`` (default): in either protocol, a question about the
        notebook's data first asks a model on this machine (a loopback
        ``api_base``) for the code alone, in a short request of its own;
        ``on``: any model; ``off``: never (docs/runtime.md).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float | None = Field(
        default=None, ge=0, le=2, description="sampling temperature, 0 to 2"
    )
    max_tokens: int | None = Field(default=None, ge=1, description="most tokens in one turn")
    seed: int | None = Field(default=None, description="sampling seed (providers that take one)")
    api_base: str | None = Field(
        default=None, description="endpoint of an OpenAI-compatible server, http://host:port/v1"
    )
    protocol: ProtocolName | None = Field(
        default=None, description="xml (protocol text, default) or tools (function calling)"
    )
    timeout: float | None = Field(
        default=None,
        gt=0,
        description="seconds to connect, and between chunks once tokens flow (default 30)",
    )
    first_token_timeout: float | None = Field(
        default=None,
        gt=0,
        description="seconds until the first token (default 30; 600 on a loopback api_base)",
    )
    retries: int | None = Field(
        default=None,
        ge=0,
        le=10,
        description="extra attempts before the first token (default 2; 0 on a loopback api_base)",
    )
    constrain: Constrain | None = Field(
        default=None,
        description="auto (grammar-constrained decoding on servers that take a GBNF grammar), "
        "grammar (always send it) or off (the default)",
    )

    code_first: CodeFirst | None = Field(
        default=None,
        description="auto (a data question's code asked for alone first, from a model on "
        "this machine; the default), on (any model) or off",
    )

    @field_validator("api_base")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
            raise ValueError("must be an http:// or https:// URL, e.g. http://127.0.0.1:8377/v1")
        return value

    # -------------------------------------------------------------- building

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, where: str = "model options") -> ModelOptions:
        """Validate a mapping (a manifest's ``model:`` table, a suite's defaults).

        Dashes are accepted for underscores (``max-tokens``).

        Raises
        ------
        ConfigError
            An unknown option or a bad value; the message names it.
        """
        normalized = {str(key).replace("-", "_"): value for key, value in data.items()}
        return _validate(normalized, lambda name: name, where)

    def merged(self, override: ModelOptions | None) -> ModelOptions:
        """These options with every option set in ``override`` replacing ours."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_none=True))

    # ------------------------------------------------------------- using

    def model_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the model constructor (``protocol`` excluded).

        ``retries`` is the constructor's ``num_retries``.
        """
        kwargs = self.model_dump(exclude_none=True, exclude={"protocol"})
        if "retries" in kwargs:
            kwargs["num_retries"] = kwargs.pop("retries")
        return kwargs

    def describe(self) -> str:
        """``--temperature 0 --max-tokens 800`` (what is set), or ``""``."""
        return " ".join(
            f"{_flag(name)} {value}" for name, value in self.model_dump(exclude_none=True).items()
        )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _validate(data: dict[str, Any], label: Any, where: str) -> ModelOptions:
    try:
        return ModelOptions.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else "?"
            if error["type"] == "extra_forbidden":
                known = ", ".join(label(field) for field in ModelOptions.model_fields)
                problems.append(f"unknown option {label(name)} (known: {known})")
            else:
                given = data.get(name)
                problems.append(f"{label(name)} {given!r}: {error['msg'].lower()}")
        raise ConfigError(f"{where}: " + "; ".join(problems)) from None


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per option (``--temperature``, ``--max-tokens``, … ``--retries``).

    Values stay strings here; :func:`options_from_args` validates them all
    at once, so every front end reports the same errors.
    """
    for name, info in ModelOptions.model_fields.items():
        choices = _CHOICES.get(name)
        parser.add_argument(
            _flag(name), dest=name, default=None, choices=choices, help=info.description
        )


def options_from_args(args: argparse.Namespace, *, where: str = "model options") -> ModelOptions:
    """Validate the flags :func:`add_model_arguments` added.

    Raises
    ------
    ConfigError
        A bad value (``--temperature hot``); the message names the flag.
    """
    given = {
        name: getattr(args, name)
        for name in ModelOptions.model_fields
        if getattr(args, name, None) is not None
    }
    return _validate(given, _flag, where)


def parse_model_line(line: str, *, prog: str = "%model") -> tuple[str | None, ModelOptions]:
    """Read ``[SPEC] [--temperature T] [--max-tokens N] …`` (a ``%model`` line).

    Returns
    -------
    tuple
        The model spec (``None`` when only options were given) and the options.

    Raises
    ------
    ConfigError
        An unknown flag, a missing value or a bad value.
    """
    parser = argparse.ArgumentParser(prog=prog, add_help=False, exit_on_error=False)
    parser.add_argument("spec", nargs="?")
    add_model_arguments(parser)
    usage = f"usage: {prog} [MODEL] " + " ".join(
        f"[{_flag(name)} V]" for name in ModelOptions.model_fields
    )
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ConfigError(f"{prog}: {exc}. {usage}") from None
    try:
        args, extra = parser.parse_known_args(words)
    except (argparse.ArgumentError, ValueError) as exc:
        raise ConfigError(f"{prog}: {exc}. {usage}") from None
    if extra:
        raise ConfigError(f"{prog}: unknown argument(s) {' '.join(extra)}. {usage}")
    return args.spec, options_from_args(args, where=prog)

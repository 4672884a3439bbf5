"""``%feeds``: the context feeds of the notebook's session (see docs/feeds.md).

``%feeds`` lists every feed with its type, source, age, size and the start
of its value; ``%feeds show NAME`` prints one value whole. ``%feeds add NAME
[--interval S | --ttl S] [--type T] [--max-bytes N] [--max-tokens N] SOURCE``
declares a feed, ``%feeds remove NAME`` drops one. SOURCE is a kind and its
arguments, or the source as JSON::

    %feeds add clock internal system_clock
    %feeds add quote --ttl 60 callable mypkg.market:quote '{"symbol": "ACME"}'
    %feeds add queue --interval 5 tool queue_length
    %feeds add mood llm "One line on the market today"
    %feeds add totals workflow sum3 '{"x": 1}'
    %feeds add hits relic counter get '{"key": "hits"}'
    %feeds add today mcp_resource notes notes://today
    %feeds add quote '{"callable": "mypkg.market:quote"}'

A ``callable`` may also name a function defined in the notebook (``callable
latest_prices``). The value is fetched at the next agent cell's first turn.

The model never writes a source: a feed it adds names one. ``%feeds source
NAME SOURCE`` (same SOURCE syntax) declares a source it may choose by name,
``%feeds remove-source NAME`` takes it back. ``%feeds values on`` lets the
``notebook_variables`` feed show values (credentials still hidden), ``%feeds
values off`` goes back to names, types and shapes.
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from ..exceptions import ActionError, ConfigError
from .runner import runner_for

__all__: list[str] = []  # used inside the jupyter package only

_USAGE = (
    "usage: %feeds | %feeds show NAME | %feeds remove NAME | %feeds add NAME "
    "[--interval S | --ttl S] [--type on_demand|periodic|internal] [--max-bytes N] "
    "[--max-tokens N] KIND ARGS… (internal NAME [JSON] | tool NAME [JSON] | llm PROMPT | "
    "workflow NAME [JSON] | relic NAME OPERATION [JSON] | callable MODULE:FUNCTION [JSON] | "
    "mcp_resource SERVER URI) or a JSON source | %feeds source NAME KIND ARGS… | "
    "%feeds remove-source NAME | %feeds values on|off"
)


def feeds_magic(line: str) -> None:
    """%feeds [show NAME | add NAME … | remove NAME] — the context feeds of the session."""
    from IPython import get_ipython

    shell = get_ipython()
    runner = runner_for(shell)
    feeds = runner.session.feeds
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ConfigError(f"%feeds: {exc}. {_USAGE}") from None
    if not words:
        print(_table(feeds.describe(values=True)))
        if feeds.sources:
            print("\nsources a feed the model adds may name: " + _sources(feeds.sources))
        return
    verb, rest = words[0], words[1:]
    try:
        if verb == "show" and len(rest) == 1:
            row = next((r for r in feeds.describe(values=True) if r["id"] == rest[0]), None)
            if row is None:
                raise ActionError(f"no context feed '{rest[0]}' (feeds: {_ids(feeds)})")
            print(_value(row, limit=None))
        elif verb == "remove" and len(rest) == 1:
            feeds.remove(rest[0])
            if rest[0] == "notebook_variables":
                runner.notebook_variables = False  # stays off for sessions built later
            print(f"context feed '{rest[0]}' removed")
        elif verb == "add" and len(rest) >= 2:
            spec = _spec(rest, shell.user_ns)
            feeds.add(spec, replace=True)
            if spec.id == "notebook_variables":
                runner.notebook_variables = True
                runner.notebook_values = _values_on(spec.source.data())
            print(f"context feed '{spec.id}' added ({spec.type}); the next agent cell reads it")
        elif verb == "source" and len(rest) >= 2:
            source = _source(rest[1:], shell.user_ns)
            feeds.declare_source(rest[0], source)
            print(
                f"feed source '{rest[0]}' declared: a feed the model adds may name it "
                "(with add_context_feed allowed)"
            )
        elif verb == "remove-source" and len(rest) == 1:
            feeds.forget_source(rest[0])
            print(f"feed source '{rest[0]}' removed (feeds that use it keep it)")
        elif verb == "values" and rest in (["on"], ["off"]):
            _values(runner, feeds, rest[0] == "on")
        else:
            print(_USAGE)
    except ActionError as exc:
        raise ConfigError(f"%feeds: {exc}") from None


def _ids(feeds: Any) -> str:
    return ", ".join(spec.id for spec in feeds.specs) or "none"


def _values_on(source: dict[str, Any]) -> bool:
    parameters = source.get("parameters")
    return isinstance(parameters, dict) and parameters.get("values") is True


def _values(runner: Any, feeds: Any, on: bool) -> None:
    """Switch ``notebook_variables``' values on or off (declaring the feed if it is not)."""
    from .notebook_vars import notebook_variables_feed

    spec = notebook_variables_feed(on)
    if "notebook_variables" in feeds:
        feeds.update("notebook_variables", {"source": spec.source.data()})
    else:
        feeds.add(spec)
    runner.notebook_variables, runner.notebook_values = True, on
    print(
        "notebook_variables: values on (names that look secret and credential-looking "
        "values stay hidden)"
        if on
        else "notebook_variables: names, types and shapes only (no values)"
    )


def _sources(sources: Any) -> str:
    return ", ".join(
        f"{named.name} ({_where(named.source.data(), named.name)})" for named in sources
    )


def _where(source: dict[str, Any], default: str) -> str:
    kind = next(iter(source), "internal")
    where = source.get(kind, default)
    return f"{kind}:{where}" if isinstance(where, str) else kind


class _Options(argparse.Namespace):
    type: str | None
    ttl: float | None
    interval: float | None
    max_bytes: int | None
    max_tokens: int | None
    source: list[str]


def _spec(words: list[str], namespace: dict[str, Any]) -> Any:
    from ..runtime.feeds import feed_spec

    parser = argparse.ArgumentParser(prog="%feeds add", add_help=False, exit_on_error=False)
    parser.add_argument("--type", choices=("on_demand", "periodic", "internal"))
    parser.add_argument("--ttl", type=float)
    parser.add_argument("--interval", type=float)
    parser.add_argument("--max-bytes", type=int)
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("source", nargs=argparse.REMAINDER)
    name, options = words[0], _Options()
    try:
        parser.parse_args(words[1:], namespace=options)
    except (argparse.ArgumentError, ValueError) as exc:
        raise ConfigError(f"%feeds add: {exc}. {_USAGE}") from None
    source = _source(options.source, namespace)
    kind = next(iter(source), "")
    default = "internal" if kind == "internal" else "on_demand"
    data: dict[str, Any] = {
        "id": name,
        "type": options.type or ("periodic" if options.interval is not None else default),
        "source": source,
    }
    for key in ("ttl", "interval", "max_bytes", "max_tokens"):
        if getattr(options, key) is not None:
            data[key] = getattr(options, key)
    return feed_spec(data)


def _source(args: list[str], namespace: dict[str, Any]) -> dict[str, Any]:
    if not args:
        raise ConfigError(f"%feeds add: no source. {_USAGE}")
    if args[0].lstrip().startswith("{"):
        return _json(" ".join(args), "source")
    kind, rest = args[0], args[1:]
    if kind == "llm":
        return {"llm": " ".join(rest)}
    if kind == "internal" and len(rest) in (1, 2):
        return {"internal": rest[0], **_parameters(rest[1:])}
    if kind == "mcp_resource" and len(rest) == 2:
        return {"mcp_resource": {"server": rest[0], "uri": rest[1]}}
    if kind == "relic" and len(rest) in (2, 3):
        return {"relic": rest[0], "operation": rest[1], **_parameters(rest[2:])}
    if kind in ("tool", "workflow", "callable") and len(rest) in (1, 2):
        target = rest[0]
        if kind == "callable" and ":" not in target:
            target = _notebook_function(target, namespace)
        return {kind: target, **_parameters(rest[1:])}
    raise ConfigError(f"%feeds add: cannot read the source {' '.join(args)!r}. {_USAGE}")


def _parameters(args: list[str]) -> dict[str, Any]:
    return {"parameters": _json(args[0], "parameters")} if args else {}


def _json(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"%feeds add: the {what} is not JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"%feeds add: the {what} must be a JSON object, got {text!r}")
    return value


def _notebook_function(name: str, namespace: dict[str, Any]) -> str:
    """``module:function`` for a function defined in the notebook (its ``__main__``)."""
    import sys

    function = namespace.get(name)
    main = sys.modules.get("__main__")
    if not callable(function) or main is None or getattr(main, name, None) is not function:
        raise ConfigError(
            f"%feeds add: no function '{name}' in the notebook; define it first, "
            "or name one as module:function"
        )
    return f"__main__:{name}"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.0f} min"


def _value(row: dict[str, Any], limit: int | None = 60) -> str:
    if row["error"]:
        text = f"(unavailable: {row['error']})"
    elif row["age"] is None:
        text = "(not fetched yet: the next agent cell fetches it)"
    else:
        text = str(row["text"])
    if limit is None:
        return text
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no context feeds: %feeds add NAME KIND ARGS…, or a manifest's context_feeds)"
    lines = [("feed", "type", "source", "age", "size", "value")]
    for row in rows:
        source = _where(row["source"], row["id"])
        size = f"{len(str(row['text']).encode('utf-8'))} B" + (" (cut)" if row["truncated"] else "")
        lines.append((row["id"], row["type"], source[:32], _age(row["age"]), size, _value(row)))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line[:5], widths, strict=True))
        + "  "
        + line[5]
        for line in lines
    )

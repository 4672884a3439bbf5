"""A registry of Python callables usable as ``tool`` actions.

A tool is any function, sync or async. Its JSON schema is derived from the
type hints with pydantic (``validate_call`` builds a model of the
parameters), so the prompt shows the model exactly what the function takes
and the call is validated and coerced the same way. Sync tools run in a
worker thread so a slow one never blocks the event loop; cancelling the run
abandons the thread's result (Python cannot kill a thread), which is why
long-running sync tools should be async or subprocess-based.
"""

from __future__ import annotations

import difflib
import inspect
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import anyio.to_thread
from pydantic import TypeAdapter, ValidationError, create_model

from ..exceptions import ConfigError, ToolError, UnknownActionError
from .docstrings import parameter_descriptions, summary

__all__ = ["TOOL_MARK", "Tool", "ToolRegistry", "closest_names", "tool", "unknown_tool_message"]

#: Attribute set by :func:`tool` on a function: ``{"name": …, "description": …}``.
TOOL_MARK = "__cortex_tool__"


@dataclass
class Tool:
    """One registered tool.

    Attributes
    ----------
    name, description
        What the model sees.
    function
        The callable (sync or async).
    parameters
        JSON schema of the keyword arguments.
    """

    name: str
    description: str
    function: Callable[..., Any]
    parameters: dict[str, Any]
    _model: Any = None
    #: ``python`` (a callable), ``command``, ``docker`` or ``builtin``.
    kind: str = "python"
    #: Where the tool was declared (``@tool`` in the notebook, or the manifest entry).
    source: str = "@tool"
    #: A human approves every call (``confirm: true`` in the manifest).
    confirm: bool = False
    #: Seconds per call, or ``None``.
    timeout: float | None = None
    labels: dict[str, Any] = field(default_factory=dict)
    #: Where a Python tool runs: ``local`` (the kernel), ``dask`` (a cluster),
    #: or ``None`` for the agent's default (the manifest's ``executor``).
    executor: str | None = None
    #: What a human is shown before a ``confirm`` call, and notes on it:
    #: ``review(arguments) -> (text, notes)`` (``None``: the parameters as JSON).
    review: Callable[[dict[str, Any]], tuple[str, list[str]]] | None = None
    #: Every call runs, even one repeating a call of the same turn (a random
    #: draw, a counter): the scheduler does not hand it the first call's result.
    repeatable: bool = False
    #: It runs code on the notebook's own variables (in-kernel ``python``): a
    #: question naming the notebook's data is first answered by calling it
    #: (:mod:`cortex_kernel.runtime.data_questions`).
    reads_notebook: bool = False

    @property
    def is_async(self) -> bool:
        """Whether calling the function returns an awaitable."""
        return inspect.iscoroutinefunction(self.function)

    def spec(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` for the prompt."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI function-calling shape."""
        return {"type": "function", "function": self.spec()}

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check and coerce ``arguments`` against the signature."""
        if self._model is None:
            return _validate_schema(self.name, self.parameters, arguments)
        try:
            validated = self._model.model_validate(arguments)
        except ValidationError as exc:
            problems = []
            several = False
            for error in exc.errors(include_url=False):
                where = ".".join(str(p) for p in error["loc"]) or "(all)"
                problems.append(f"parameter '{where}': {error['msg']}")
                several = several or isinstance(error.get("input"), list | tuple)
            message = f"bad parameters for tool '{self.name}': " + "; ".join(problems)
            if several:
                # Seen from small models: every city in one call's `city`.
                message += (
                    f". It takes one value: for several, call '{self.name}' once per "
                    "value (calls made together run in parallel)"
                )
            raise ToolError(message) from None
        return {key: getattr(validated, key) for key in type(validated).model_fields}

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Validate ``arguments`` and run the tool."""
        return await self.invoke(self.validate(arguments))

    async def invoke(
        self, kwargs: dict[str, Any], on_abandon: Callable[[], None] | None = None
    ) -> Any:
        """Run the tool with already validated arguments.

        ``on_abandon`` is called when a sync tool's call is cancelled while
        its thread still runs (Python cannot stop it).
        """
        if self.is_async:
            return await self.function(**kwargs)
        # abandon_on_cancel: an interrupted run must not wait for a slow thread.
        result = await _run_in_thread(lambda: self.function(**kwargs), on_abandon)
        if inspect.isawaitable(result):
            return await result
        return result


class _AbandonedThreads:
    """Worker threads of sync tools that were given up on (timeout, interrupt) and still run.

    Python cannot kill a thread: a cancelled sync tool's thread runs on until
    its function returns. They are counted so timeouts can say so.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0  # abandoned and not finished yet
        self.total = 0  # abandoned since the process started


ABANDONED = _AbandonedThreads()


def abandoned_threads() -> int:
    """Worker threads of sync tools that were abandoned and are still running."""
    return ABANDONED.running


async def _run_in_thread(
    work: Callable[[], Any], on_abandon: Callable[[], None] | None = None
) -> Any:
    state = {"done": False, "abandoned": False}

    def run() -> Any:
        try:
            return work()
        finally:
            with ABANDONED.lock:
                state["done"] = True
                if state["abandoned"]:
                    ABANDONED.running -= 1

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with ABANDONED.lock:
            if not state["done"]:
                state["abandoned"] = True
                ABANDONED.running += 1
                ABANDONED.total += 1
        if state["abandoned"] and on_abandon is not None:
            on_abandon()
        raise


def _schema_for(function: Callable[..., Any], name: str) -> tuple[dict[str, Any], Any]:
    signature = inspect.signature(function)
    try:
        hints = inspect.get_annotations(function, eval_str=True)
    except Exception:  # unresolvable annotations: fall back to Any
        hints = {}
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    model = create_model(f"{name}_parameters", **fields)
    try:
        schema = model.model_json_schema()
    except Exception:  # a type pydantic cannot describe: accept any object
        schema = TypeAdapter(dict[str, Any]).json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    for param_name, text in parameter_descriptions(inspect.getdoc(function)).items():
        described = schema.get("properties", {}).get(param_name)
        if isinstance(described, dict) and "description" not in described:
            described["description"] = text
    return schema, model


def _validate_schema(
    name: str, schema: dict[str, Any], arguments: dict[str, Any]
) -> dict[str, Any]:
    """Check ``arguments`` against a JSON Schema (tools declared by a manifest)."""
    import jsonschema  # type: ignore[import-untyped]

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    if not errors:
        return dict(arguments)
    problems = []
    for error in errors[:5]:
        path = list(error.path)
        if not path and error.validator == "required":
            missing = [p for p in error.validator_value if p not in arguments]
            path = missing[:1]
        where = ".".join(str(p) for p in path) or "(all)"
        problems.append(f"parameter '{where}': {error.message}")
    raise ToolError(f"bad parameters for tool '{name}': " + "; ".join(problems))


def schema_model(function: Callable[..., Any], name: str) -> tuple[dict[str, Any], Any]:
    """The JSON schema of ``function``'s parameters and the pydantic model that checks them."""
    return _schema_for(function, name)


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def tool(function: _F) -> _F: ...


@overload
def tool(
    function: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    executor: str | None = None,
    repeatable: bool = False,
) -> Callable[[_F], _F]: ...


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    executor: str | None = None,
    repeatable: bool = False,
) -> Any:
    """Mark a notebook function as a tool the agent may call.

    Use as ``@tool`` or ``@tool(name="…", description="…")``;
    ``@tool(executor="dask")`` runs every call on a Dask cluster
    (``"local"``: in the kernel, whatever the agent's default).
    ``@tool(repeatable=True)`` runs every call, even one that repeats a call
    of the same turn (a random draw, a counter), which otherwise gets the
    first call's result (docs/runtime.md#scheduling). The function is
    returned unchanged (still callable from Python); the kernel registers
    every marked function of the notebook namespace before each run, so a
    re-defined function replaces the old tool and a deleted one disappears.
    Its JSON schema comes from the type hints, its description from the
    docstring.

    Examples
    --------
    >>> @tool
    ... def add(a: int, b: int = 1) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> add(2)
    3
    """

    if executor not in (None, "local", "dask"):
        raise ConfigError(f"@tool(executor={executor!r}): use 'local' or 'dask'")

    def mark(fn: _F) -> _F:
        setattr(
            fn,
            TOOL_MARK,
            {
                "name": name,
                "description": description,
                "executor": executor,
                "repeatable": repeatable,
            },
        )
        return fn

    if function is not None:
        return mark(function)
    return mark


# Words that say nothing about which tool is meant.
_FILLER = frozenset({"", "get", "set", "tool", "to", "of", "the", "a", "and", "for", "by"})


def closest_names(name: str, known: list[str], limit: int = 3) -> list[str]:
    """The known names most like ``name``: spelling first, then shared words.

    Small models misspell tools (``populations``), change case, or invent a
    near name (``get_population``, ``population_of``); the closest real
    names in the error let them correct the action on the next turn.
    """
    lowered = {k.lower(): k for k in known}
    found = [lowered[m] for m in difflib.get_close_matches(name.lower(), lowered, limit, 0.6)]
    words = set(re.split(r"[^a-z0-9]+", name.lower())) - _FILLER
    for key in sorted(known):
        if len(found) >= limit:
            break
        if key not in found and words & set(re.split(r"[^a-z0-9]+", key.lower())):
            found.append(key)
    return found


def unknown_tool_message(name: str, known: list[str]) -> str:
    """``unknown tool 'X'; did you mean 'Y'? available tools: …`` (docs/protocol.md#actions)."""
    close = closest_names(name, known)
    hint = ("did you mean " + " or ".join(f"'{c}'" for c in close) + "? ") if close else ""
    available = ", ".join(sorted(known)) or "none"
    return f"unknown tool '{name}'; {hint}available tools: {available}"


class ToolRegistry:
    """Named tools, registered from Python callables.

    Examples
    --------
    >>> tools = ToolRegistry()
    >>> @tools.register
    ... def add(a: int, b: int = 1) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> tools.specs()[0]["name"]
    'add'
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._collected: set[str] = set()

    def register(
        self,
        function: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        executor: str | None = None,
        repeatable: bool = False,
    ) -> Any:
        """Register ``function`` (usable as a bare decorator or with options).

        Returns the function unchanged, so it stays callable from Python.
        ``executor`` is where it runs (``local``, ``dask``; ``None``: the
        agent's default); ``repeatable``: every call runs (:func:`tool`).
        """

        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            tool_name = str(name or getattr(fn, "__name__", "tool"))
            doc = description if description is not None else summary(inspect.getdoc(fn))
            parameters, model = _schema_for(fn, tool_name)
            self._tools[tool_name] = Tool(
                tool_name,
                doc.strip(),
                fn,
                parameters,
                model,
                executor=executor,
                repeatable=repeatable,
            )
            return fn

        if function is not None:
            return add(function)
        return add

    def collect(self, namespace: Mapping[str, Any]) -> list[str]:
        """Register the functions of ``namespace`` marked with :func:`tool`.

        Tools collected earlier from a namespace but no longer there (deleted
        or un-marked) are removed; tools registered directly are kept.
        Returns the names of the collected tools.
        """
        found: dict[str, Callable[..., Any]] = {}
        for value in list(namespace.values()):
            mark = getattr(value, TOOL_MARK, None) if callable(value) else None
            if isinstance(mark, dict):
                tool_name = str(mark.get("name") or getattr(value, "__name__", "tool"))
                found[tool_name] = value
        for tool_name in found:
            current = self._tools.get(tool_name)
            if current is not None and current.source != "@tool":
                raise ConfigError(
                    f"the notebook function '{tool_name}' (@tool) has the same name as the "
                    f"{current.kind} tool '{tool_name}' from {current.source}; rename one of them"
                )
        for stale in self._collected - found.keys():
            self._tools.pop(stale, None)
        for tool_name, fn in found.items():
            current = self._tools.get(tool_name)
            options = getattr(fn, TOOL_MARK)
            if current is None or current.function is not fn:
                self.register(
                    fn,
                    name=tool_name,
                    description=options.get("description"),
                    executor=options.get("executor"),
                    repeatable=bool(options.get("repeatable")),
                )
        self._collected = set(found)
        return sorted(found)

    def add(self, new: Tool) -> None:
        """Add a declared tool (from a manifest); a second tool of that name is an error.

        Raises
        ------
        ConfigError
            Naming both declarations.
        """
        current = self._tools.get(new.name)
        if current is not None:
            raise ConfigError(
                f"two tools are called '{new.name}': the {current.kind} tool from "
                f"{current.source} and the {new.kind} tool from {new.source}; rename one of them"
            )
        self._tools[new.name] = new

    def repeatable(self, name: str) -> bool:
        """Whether every call of tool ``name`` runs (``False`` for an unknown name)."""
        found = self._tools.get(name)
        return found is not None and found.repeatable

    def unregister(self, name: str) -> None:
        """Remove a tool (no error when absent)."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool:
        """The tool called ``name``.

        Raises
        ------
        UnknownActionError
            Naming the tools that exist.
        """
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownActionError(unknown_tool_message(name, list(self._tools))) from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[dict[str, Any]]:
        """``{"name", "description", "parameters"}`` of every tool, for the prompt."""
        return [tool.spec() for tool in self._tools.values()]

    def openai_schemas(self) -> list[dict[str, Any]]:
        """Every tool in OpenAI function-calling shape (``protocol="tools"``)."""
        return [tool.openai_schema() for tool in self._tools.values()]

"""Eval suites: a YAML file of tools and tasks, validated on load.

A suite::

    name: default
    tools:                      # where the agent's tools come from
      - tools.py                # every @tool function of a Python file beside the suite
      - tools.py:population     # one function of that file
      - mypackage.tools:search  # one function of an importable module
    limits: {max_turns: 8}      # optional, per run (cortex_kernel Limits)
    tasks:
      - id: population-one
        category: one_tool
        message: What is the population of Lyon?
        check: {number: 520774}          # or {regex: "(?i)lyon"}; a list means all
        tools: [population]              # optional: tools that must be called
      - id: follow-up
        category: follow_up
        before: ["What is the population of Toulouse?"]   # earlier cells, same session
        message: Double that number.
        check: {number: 1008156, tolerance: 1}

A check passes when *every* item passes: ``regex`` (``re.search`` on the
answer), ``number`` (some number written in the answer, thousands separators
allowed, within ``tolerance``), ``uses_variables: true`` (the final response
as the model wrote it refers to a ``$variable``; protocol ``xml`` only).
``actions: [llm]`` requires actions of those types; ``protocols: [xml]``
restricts a task to some protocols (others report it as not applicable).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..exceptions import ConfigError
from ..model_options import PROTOCOLS, ProtocolName
from ..runtime.limits import Limits
from ..runtime.tools import TOOL_MARK

__all__ = ["DEFAULT_SUITE", "Check", "Suite", "Task", "load_suite"]

#: The suite ``cortex-kernel eval`` runs when none is given.
DEFAULT_SUITE = Path(__file__).with_name("suites") / "default.yaml"

# Thousands separators only between groups of three digits: "7 8" is two numbers.
_NUMBER = re.compile(r"-?\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")


class Check(BaseModel):
    """One condition on the answer (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regex: str | None = None
    number: float | None = None
    tolerance: float = Field(default=0.0, ge=0)
    uses_variables: bool = False

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    def failure(self, answer: str, written: str, protocol: str) -> str | None:
        """Why ``answer`` fails this check, or ``None`` when it passes.

        ``written`` is the final response as the model wrote it (before its
        ``$variables`` were filled in).
        """
        if self.regex is not None and not re.search(self.regex, answer):
            return f"answer does not match /{self.regex}/"
        if self.number is not None and not any(
            abs(value - self.number) <= self.tolerance for value in numbers_in(answer)
        ):
            return f"answer has no number within {self.tolerance:g} of {self.number:g}"
        if self.uses_variables and protocol == "xml" and "$" not in written:
            return "the final response does not refer to a $variable"
        return None


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text`` (``2,102,650``, ``2 102 650``, ``-3.5``)."""
    values: list[float] = []
    for match in _NUMBER.finditer(text):
        raw = re.sub(r"[,\u202f\u00a0 ]", "", match.group())
        try:
            values.append(float(raw))
        except ValueError:
            continue
    return values


class Task(BaseModel):
    """One task of a suite."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    category: str = "general"
    message: str = Field(min_length=1)
    before: list[str] = Field(default_factory=list)
    check: list[Check]
    tools: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    protocols: list[ProtocolName] = Field(default_factory=lambda: list(PROTOCOLS))

    @field_validator("check", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value


class Suite(BaseModel):
    """A validated suite, its tools loaded."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str
    path: Path
    tools: dict[str, Callable[..., Any]]
    limits: dict[str, Any] = Field(default_factory=dict)
    tasks: list[Task]

    def select(self, ids: list[str]) -> Suite:
        """Only the tasks named in ``ids`` (in suite order)."""
        unknown = sorted(set(ids) - {task.id for task in self.tasks})
        if unknown:
            raise ConfigError(f"{self.path}: no task(s) {', '.join(unknown)}")
        return self.model_copy(update={"tasks": [t for t in self.tasks if t.id in ids]})

    def with_limits(self, **overrides: Any) -> Suite:
        """The same suite with some run limits replaced (``wall_time=60``…).

        Every task runs under the suite's limits, so this overrides them for
        every task; the suite file is not changed.

        Raises
        ------
        ConfigError
            The limits that result are not valid :class:`~cortex_kernel.runtime.limits.Limits`.
        """
        limits = {**self.limits, **overrides}
        try:
            Limits.model_validate(limits)
        except ValidationError as exc:
            problems = "; ".join(
                f"limits.{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
                for error in exc.errors()
            )
            raise ConfigError(f"{self.path}: {problems}") from None
        return self.model_copy(update={"limits": limits})


class _SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    tools: list[str] = Field(default_factory=list)
    limits: dict[str, Any] = Field(default_factory=dict)
    tasks: list[Task] = Field(min_length=1)


def load_suite(path: str | Path | None = None) -> Suite:
    """Read and validate a suite file, and load its tools.

    Raises
    ------
    ConfigError
        A missing file, bad YAML, a bad field (named with its place), a tool
        that cannot be loaded, a task that requires an unknown tool, or two
        tasks with the same id.
    """
    import yaml  # only when a suite is read: importing the package stays light

    where = Path(path) if path is not None else DEFAULT_SUITE
    try:
        data = yaml.safe_load(where.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read suite {where}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None
    try:
        parsed = _SuiteFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from None
    ids = [task.id for task in parsed.tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ConfigError(f"{where}: duplicate task id(s) {', '.join(duplicates)}")
    tools: dict[str, Callable[..., Any]] = {}
    for entry in parsed.tools:
        tools.update(_load_tools(entry, where.parent))
    for task in parsed.tasks:
        missing = sorted(set(task.tools) - tools.keys())
        if missing:
            raise ConfigError(
                f"{where}: task {task.id} requires tool(s) {', '.join(missing)}, "
                "which the suite does not load"
            )
    return Suite(
        name=parsed.name or where.stem,
        path=where,
        tools=tools,
        limits=parsed.limits,
        tasks=parsed.tasks,
    )


def _load_tools(entry: str, folder: Path) -> dict[str, Callable[..., Any]]:
    source, _, attribute = entry.partition(":")
    if source.endswith(".py"):
        module = _module_from_file(folder / source)
    else:
        try:
            module = importlib.import_module(source)
        except ImportError as exc:
            raise ConfigError(f"tool {entry!r}: cannot import {source}: {exc}") from None
    if attribute:
        function = getattr(module, attribute, None)
        if not callable(function):
            raise ConfigError(f"tool {entry!r}: {source} has no function {attribute}")
        mark = getattr(function, TOOL_MARK, None)
        name = str(mark.get("name") or attribute) if isinstance(mark, dict) else attribute
        return {name: function}
    found: dict[str, Callable[..., Any]] = {
        str(getattr(value, TOOL_MARK).get("name") or name): value
        for name, value in vars(module).items()
        if inspect.isfunction(value) and isinstance(getattr(value, TOOL_MARK, None), dict)
    }
    if not found:
        raise ConfigError(f"tool {entry!r}: no @tool function in {source}")
    return found


def _module_from_file(path: Path) -> Any:
    name = f"cortex_eval_tools_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ConfigError(f"tool file {path} does not exist")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(f"tool file {path} failed to load: {type(exc).__name__}: {exc}") from exc
    return module

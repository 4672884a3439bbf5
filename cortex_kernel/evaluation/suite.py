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

A data suite (``--suite data``, :file:`suites/data.yaml`) works on values in
the session's namespace instead of tools::

    python: true                # the agent's python tool, every run approved
    namespace: data.py:namespace   # a fresh namespace per task (DataFrames)
    tasks:
      - id: missing-prices
        message: How many values are missing in the unit_price column of `sales`?
        check: {expected: missing_prices}     # a function of data.py, on fresh data
      - id: variable-monthly
        message: Create a variable `monthly_units` …
        check: {variable: monthly_units, expected: monthly_units, tolerance: 0.001}
      - id: plot-hist
        message: Draw a histogram of the customers' ages.
        check: {figure: true}

``expected`` names a function of the namespace's file; it is called with the
values of a fresh namespace named by its parameters (``def
missing_prices(sales)``), so the value is computed from the data, never taken
from the model. A number must be written in the answer (within
``tolerance``), a string as a word (any case); a list or tuple means each of
its items. With ``variable``, the namespace's value of that name after the
run is compared with it instead (:func:`~.compare.difference`).
``figure: true`` needs a matplotlib figure drawn by the code of the task's
last run. In a suite with ``python: true``, a task is also wrong when the
last run ran no code without an error (``code: false`` lifts that): an answer
that did not look at the data is wrong even when its number matches.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import numbers
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..exceptions import ConfigError
from ..model_options import PROTOCOLS, ProtocolName
from ..runtime.limits import Limits
from ..runtime.tools import TOOL_MARK

__all__ = ["DATA_SUITE", "DEFAULT_SUITE", "Check", "Suite", "Task", "load_suite"]

_SUITES = Path(__file__).with_name("suites")
#: The suite ``cortex-kernel eval`` runs when none is given.
DEFAULT_SUITE = _SUITES / "default.yaml"
#: Questions on DataFrames in the session's namespace (``--suite data``).
DATA_SUITE = _SUITES / "data.yaml"
#: The suites ``--suite NAME`` names.
BUILTIN_SUITES = {"default": DEFAULT_SUITE, "data": DATA_SUITE}

# Thousands separators only between groups of three digits: "7 8" is two numbers.
_NUMBER = re.compile(r"-?\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Outcome:
    """What a data check reads besides the answer.

    Attributes
    ----------
    namespace
        The task's namespace after its last run.
    expected
        The value of each ``expected`` function of the task, computed on a
        fresh namespace.
    figures
        The matplotlib figures the code of the task's last run drew.
    """

    namespace: Mapping[str, Any]
    expected: Mapping[str, Any]
    figures: int = 0


class Check(BaseModel):
    """One condition on the answer (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regex: str | None = None
    number: float | None = None
    tolerance: float = Field(default=0.0, ge=0)
    uses_variables: bool = False
    expected: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*$")
    variable: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*$")
    figure: bool = False

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _variable_has_a_value(self) -> Check:
        if self.variable is not None and self.expected is None:
            raise ValueError("variable needs expected: the function its value is compared with")
        return self

    def failure(
        self, answer: str, written: str, protocol: str, outcome: Outcome | None = None
    ) -> str | None:
        """Why ``answer`` fails this check, or ``None`` when it passes.

        ``written`` is the final response as the model wrote it (before its
        ``$variables`` were filled in); ``outcome`` what the data checks
        (``expected``, ``variable``, ``figure``) read.
        """
        data = self._data_failure(answer, outcome)
        if data is not None:
            return data
        if self.regex is not None and not re.search(self.regex, answer):
            return f"answer does not match /{self.regex}/"
        if self.number is not None and not any(
            abs(value - self.number) <= self.tolerance for value in numbers_in(answer)
        ):
            return f"answer has no number within {self.tolerance:g} of {self.number:g}"
        if self.uses_variables and protocol == "xml" and "$" not in written:
            return "the final response does not refer to a $variable"
        return None

    def _data_failure(self, answer: str, outcome: Outcome | None) -> str | None:
        if self.expected is None and not self.figure:
            return None
        if outcome is None:
            return "a data check needs the run's outcome (a suite with a namespace)"
        if self.figure and outcome.figures == 0:
            return "no figure: the code of the last run drew none"
        if self.expected is None:
            return None
        value = outcome.expected[self.expected]
        if self.variable is not None:
            from .compare import difference

            if self.variable not in outcome.namespace:
                return f"no variable {self.variable} after the run"
            why = difference(outcome.namespace[self.variable], value, self.tolerance)
            return None if why is None else f"{self.variable}: {why}"
        return answer_failure(answer, value, self.tolerance)


def answer_failure(answer: str, value: Any, tolerance: float = 0.0) -> str | None:
    """Why ``answer`` does not state ``value``, or ``None`` when it does.

    A number must be written in the answer within ``tolerance``; a string
    as a word, in any case; a list or tuple means each of its items.
    """
    items = list(value) if isinstance(value, list | tuple) else [value]
    for item in items:
        if isinstance(item, str):
            if not re.search(rf"(?i)(?<!\w){re.escape(item)}(?!\w)", answer):
                return f"answer does not name {item!r}"
        elif isinstance(item, numbers.Real) and not isinstance(item, bool):
            target = float(item)
            if not any(abs(n - target) <= tolerance for n in numbers_in(answer)):
                return f"answer has no number within {tolerance:g} of {target:g}"
        else:
            raise TypeError(f"an expected value is a number or a string, not {type(item).__name__}")
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
    #: The last run must run code without an error (default: the suite's ``python``).
    code: bool | None = None

    @property
    def expected(self) -> list[str]:
        """The ``expected`` functions its checks name, in order."""
        return list(dict.fromkeys(c.expected for c in self.check if c.expected is not None))

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
    #: The agent's python tool in the task's namespace, every run approved.
    python: bool = False
    #: Makes a fresh namespace for each task (``None``: the tools only).
    namespace: Callable[[], dict[str, Any]] | None = None
    #: The ``expected`` functions of the namespace's file, by name.
    functions: dict[str, Callable[..., Any]] = Field(default_factory=dict)

    def needs_code(self, task: Task) -> bool:
        """Whether ``task``'s last run must run code (its ``code``, else the suite's ``python``)."""
        return self.python if task.code is None else task.code

    def expected_values(self, task: Task) -> dict[str, Any]:
        """The value of each ``expected`` function of ``task``, on a fresh namespace.

        Each function is called with the namespace's values its parameters name.
        """
        if not task.expected:
            return {}
        assert self.namespace is not None  # load_suite checked it
        fresh = self.namespace()
        values: dict[str, Any] = {}
        for name in task.expected:
            function = self.functions[name]
            arguments = {p: fresh[p] for p in inspect.signature(function).parameters}
            values[name] = function(**arguments)
        return values

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
    python: bool = False
    namespace: str | None = None
    tasks: list[Task] = Field(min_length=1)


def suite_path(name: str | Path | None) -> Path:
    """The file of ``name``: a built-in suite's (``default``, ``data``) or ``name`` as a path.

    A built-in name wins only when it is written bare (no folder, no
    suffix): ``./data`` is a path.
    """
    if name is None:
        return DEFAULT_SUITE
    if isinstance(name, str) and name in BUILTIN_SUITES:
        return BUILTIN_SUITES[name]
    return Path(name)


def load_suite(path: str | Path | None = None) -> Suite:
    """Read and validate a suite file, and load its tools and namespace.

    ``path`` may also name a built-in suite (:data:`BUILTIN_SUITES`).

    Raises
    ------
    ConfigError
        A missing file, bad YAML, a bad field (named with its place), a tool
        or namespace that cannot be loaded (the data suite without pandas), a
        task that requires an unknown tool or ``expected`` function, or two
        tasks with the same id.
    """
    import yaml  # only when a suite is read: importing the package stays light

    where = suite_path(path)
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
    factory, functions = _namespace(parsed, where)
    return Suite(
        name=parsed.name or where.stem,
        path=where,
        tools=tools,
        limits=parsed.limits,
        tasks=parsed.tasks,
        python=parsed.python,
        namespace=factory,
        functions=functions,
    )


def _namespace(
    parsed: _SuiteFile, where: Path
) -> tuple[Callable[[], dict[str, Any]] | None, dict[str, Callable[..., Any]]]:
    """The suite's namespace factory and the ``expected`` functions its tasks name."""
    wanted = {name: task.id for task in parsed.tasks for name in task.expected}
    if parsed.namespace is None:
        if wanted:
            name, task = next(iter(wanted.items()))
            raise ConfigError(
                f"{where}: task {task} checks expected {name}, and the suite has no namespace"
            )
        return None, {}
    source, _, attribute = parsed.namespace.partition(":")
    module = _import(source, where.parent, f"namespace {parsed.namespace!r}")
    factory = getattr(module, attribute or "namespace", None)
    if not callable(factory):
        raise ConfigError(f"namespace {parsed.namespace!r}: {source} has no function to call")
    functions: dict[str, Callable[..., Any]] = {}
    for name, task in wanted.items():
        function = getattr(module, name, None)
        if not callable(function):
            raise ConfigError(f"{where}: task {task} checks expected {name}, not in {source}")
        functions[name] = function
    return factory, functions


def _load_tools(entry: str, folder: Path) -> dict[str, Callable[..., Any]]:
    source, _, attribute = entry.partition(":")
    module = _import(source, folder, f"tool {entry!r}")
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


def _import(source: str, folder: Path, what: str) -> Any:
    """The module ``source`` names: a ``.py`` file in ``folder``, else an importable module.

    ``what`` (the suite entry naming it) starts the error when it cannot be imported.
    """
    if source.endswith(".py"):
        return _module_from_file(folder / source)
    try:
        return importlib.import_module(source)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import {source}: {exc}") from None


def _module_from_file(path: Path) -> Any:
    name = f"cortex_eval_tools_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ConfigError(f"suite file {path} does not exist")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(f"suite file {path} failed to load: {type(exc).__name__}: {exc}") from exc
    return module

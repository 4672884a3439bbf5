"""BFCL's AST categories, run through the kernel's own session.

The Berkeley Function Calling Leaderboard publishes its questions, possible
answers and AST checker in the ``bfcl-eval`` package. Installing that package
pulls every provider's SDK and torch-sized dependencies, so the eval does
not: :func:`fetch_wheel` downloads the pinned wheel once with
``pip download --no-deps`` into a cache folder, checks its SHA-256, and
:class:`BfclData` reads it as a zip. BFCL's own code is used where it decides
the figures, loaded from that wheel alone:

* the checker module ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` with
  the small modules it imports (enums, type tables, the Java and JavaScript
  value converters); its one heavy import, the model table
  ``bfcl_eval.constants.model_config``, is replaced by a one-entry stand-in
  for the model name :data:`CHECKER_MODEL`, whose ``underscore_to_dot`` is set
  as it is for OpenAI's function-calling models;
* the function-doc conversion of BFCL's OpenAI function-calling handler
  (``convert_to_tool`` with ``GORILLA_TO_OPENAPI``: ``dict`` becomes
  ``object``, ``float`` becomes ``number``, ``tuple`` becomes ``array``,
  ``any`` becomes ``string``, and a dotted name such as ``math.factorial`` is
  offered as ``math_factorial``) and the language hint BFCL adds to each
  description, taken out of ``model_handler/utils.py`` and ``utils.py``
  function by function (those modules import the SDKs too);
* the output checks ``is_function_calling_format_output`` and
  ``is_empty_output``.

How one case runs (:func:`run_case`): its functions are the session's only
tools (no notebook tools), its question is the user message, and the run
has one turn (``limits.max_turns = 1``): BFCL scores one response, so the
tools are never run for the score. A stub answers a call that starts during
the turn, and a run whose model called a tool ends at the turn limit (its
status is ``limit``, by design). The first turn's tool actions, as parsed,
become BFCL's model output ``[{name: parameters}, …]`` in the order written,
scored by BFCL's ``ast_checker``. The names stay as the model wrote them: the
checker writes the expected function's dots as ``_`` before comparing, as
for OpenAI's models. An ``irrelevance`` case is correct when the first turn
calls no tool. In protocol ``xml`` a ``sync`` action ends the turn (the
protocol's rule), so calls meant together must be written ``async``, as the
protocol prompt teaches.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import types
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..exceptions import ConfigError
from ..model_options import ModelOptions
from ..runtime.limits import Limits
from ..runtime.run_result import RunResult
from ..runtime.tools import Tool, ToolRegistry
from .runner import Progress, TaskResult, absorb, eval_model, run_samples

__all__ = [
    "BFCL_VERSION",
    "WALL_TIME",
    "BfclData",
    "fetch_wheel",
    "is_bfcl_suite",
    "parse_bfcl_suite",
    "run_bfcl",
    "sample_cases",
]

#: The ``bfcl-eval`` release whose data and checker the eval uses.
BFCL_VERSION = "2026.3.23"
#: SHA-256 of its wheel: a wheel that differs is neither cached nor loaded.
BFCL_SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"

#: BFCL's single-turn AST categories the eval runs (``--suite bfcl:NAME,NAME``).
BFCL_CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)
#: The categories of ``--suite bfcl``.
DEFAULT_CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)

#: The model name the checker is given: its stand-in model table maps it to
#: ``underscore_to_dot=True`` (no ``_`` in it: the checker reads ``_`` as ``/``).
CHECKER_MODEL = "cortex-kernel"

#: Seconds one case may take unless ``--wall-time`` says otherwise (one turn).
WALL_TIME = 180.0

#: What a tool call returns during a case (it is never read: the run has one turn).
NOT_RUN = "(not run: the BFCL eval scores the call, not its result)"

_PREFIX = "bfcl_eval/"
_CHECKER = "bfcl_eval/eval_checker/ast_eval/ast_checker.py"
# The checker's imports, in the order they are executed ("" for a package).
_CHECKER_MODULES: tuple[tuple[str, str], ...] = (
    ("bfcl_eval", ""),
    ("bfcl_eval.constants", ""),
    ("bfcl_eval.constants.enums", "bfcl_eval/constants/enums.py"),
    ("bfcl_eval.constants.type_mappings", "bfcl_eval/constants/type_mappings.py"),
    ("bfcl_eval.eval_checker", ""),
    ("bfcl_eval.eval_checker.ast_eval", ""),
    ("bfcl_eval.eval_checker.ast_eval.type_convertor", ""),
    (
        "bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter",
        "bfcl_eval/eval_checker/ast_eval/type_convertor/java_type_converter.py",
    ),
    (
        "bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter",
        "bfcl_eval/eval_checker/ast_eval/type_convertor/js_type_converter.py",
    ),
)
# Functions taken out of modules that cannot be imported alone.
_HANDLER_FUNCTIONS = ("_cast_to_openai_type", "convert_to_tool")
_UTIL_FUNCTIONS = (
    "is_java",
    "is_js",
    "_get_language_specific_hint",
    "_func_doc_language_specific_pre_processing",
    "is_function_calling_format_output",
    "is_empty_output",
)
_LOAD_LOCK = threading.Lock()

Downloader = Callable[[str, Path], None]


# ------------------------------------------------------------------ the wheel


def wheel_name(version: str = BFCL_VERSION) -> str:
    """The file name of the ``bfcl-eval`` wheel of ``version``."""
    return f"bfcl_eval-{version}-py3-none-any.whl"


def default_cache_dir() -> Path:
    """Where the wheel is kept: ``$CORTEX_BFCL_CACHE``, else the user's cache folder.

    The user's cache folder is platformdirs' ``user_cache_dir("cortex-kernel")``
    followed by ``bfcl`` (``~/.cache/cortex-kernel/bfcl`` on Linux).
    """
    env = os.environ.get("CORTEX_BFCL_CACHE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("cortex-kernel")) / "bfcl"


def pip_download(requirement: str, folder: Path, *, retries: int = 3) -> None:
    """``pip download --no-deps`` one wheel into ``folder`` (nothing is installed).

    Pip's index settings (``PIP_INDEX_URL``, ``pip.conf``) apply as usual.

    Raises
    ------
    ConfigError
        Pip failed (no network, no such release); the message has pip's last lines.
    """
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--ignore-requires-python",  # read as data and one module, never installed
        "--disable-pip-version-check",
        "--no-input",
        "--retries",
        str(retries),
        "--dest",
        str(folder),
        requirement,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"cannot run pip to download {requirement}: {exc}") from None
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ConfigError(f"pip could not download {requirement}: {tail}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel(
    cache_dir: Path | None = None,
    *,
    version: str = BFCL_VERSION,
    sha256: str = BFCL_SHA256,
    download: Downloader = pip_download,
) -> Path:
    """The pinned ``bfcl-eval`` wheel in ``cache_dir``, downloaded on first use.

    Parameters
    ----------
    cache_dir
        The cache folder (default :func:`default_cache_dir`).
    version, sha256
        The release and the SHA-256 its wheel must have.
    download
        ``download(requirement, folder)`` puts the wheel in ``folder``
        (default :func:`pip_download`). Not called when the cache holds a
        wheel with the right digest.

    Returns
    -------
    Path
        The cached wheel.

    Raises
    ------
    ConfigError
        The download failed or gave a wheel with another digest (then nothing
        is cached).
    """
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    target = folder / wheel_name(version)
    if target.is_file() and _sha256(target) == sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as scratch:
        download(f"bfcl-eval=={version}", Path(scratch))
        got = Path(scratch) / wheel_name(version)
        if not got.is_file():
            raise ConfigError(f"downloading bfcl-eval=={version} gave no {wheel_name(version)}")
        digest = _sha256(got)
        if digest != sha256:
            raise ConfigError(
                f"the downloaded {wheel_name(version)} has SHA-256 {digest}, not the pinned "
                f"{sha256}: not used"
            )
        os.replace(got, target)  # atomic: a concurrent run sees the old file or the new
    return target


# ------------------------------------------------------------------ the data


@dataclass(frozen=True)
class BfclCase:
    """One BFCL test case.

    Attributes
    ----------
    id, category
        As BFCL names them (``simple_python_0``, ``simple_python``).
    question
        The first turn's messages (one user message in these categories).
    functions
        The function docs as BFCL wrote them (what the checker reads).
    ground_truth
        The possible answers (``None`` for ``irrelevance``: no call is right).
    """

    id: str
    category: str
    question: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]] | None

    @property
    def message(self) -> str:
        """The user message: the first turn's one user message.

        Raises
        ------
        ConfigError
            The first turn is not one user message (not in these categories).
        """
        roles = [m.get("role") for m in self.question]
        if roles != ["user"]:
            raise ConfigError(
                f"BFCL case {self.id}: the first turn is {roles}, not one user message"
            )
        return str(self.question[0]["content"])


class BfclData:
    """The opened wheel: cases, the tools to offer, and BFCL's checker.

    Parameters
    ----------
    wheel
        A ``bfcl-eval`` wheel (:func:`fetch_wheel`). Only a wheel whose digest
        was checked should be given: :meth:`score` and :meth:`tools` run code
        from it.
    """

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        try:
            with zipfile.ZipFile(wheel) as archive:
                self._names = set(archive.namelist())
        except (OSError, zipfile.BadZipFile) as exc:
            raise ConfigError(f"cannot open {wheel}: {exc}") from None

    def _text(self, member: str) -> str:
        if member not in self._names:
            raise ConfigError(f"{self.wheel} has no {member}")
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.read(member).decode("utf-8")

    def _data_file(self, category: str, *, answers: bool = False) -> str:
        folder = "bfcl_eval/data/possible_answer/" if answers else "bfcl_eval/data/"
        pattern = re.compile(re.escape(folder) + r"BFCL_v\d+_" + re.escape(category) + r"\.json")
        found = sorted(name for name in self._names if pattern.fullmatch(name))
        if not found:
            what = "possible answers" if answers else "cases"
            raise ConfigError(f"{self.wheel} has no {what} for category {category}")
        return found[-1]

    def cases(self, category: str) -> list[BfclCase]:
        """Every case of ``category``, in BFCL's order, with its possible answers.

        Raises
        ------
        ConfigError
            An unknown category, or data the wheel lacks.
        """
        if category not in BFCL_CATEGORIES:
            raise ConfigError(
                f"no BFCL category {category!r}; the eval runs {', '.join(BFCL_CATEGORIES)}"
            )
        rows = _json_lines(self._text(self._data_file(category)))
        answers: dict[str, Any] = {}
        if category != "irrelevance":
            for row in _json_lines(self._text(self._data_file(category, answers=True))):
                answers[str(row["id"])] = row["ground_truth"]
        cases = []
        for row in rows:
            key = str(row["id"])
            if category != "irrelevance" and key not in answers:
                raise ConfigError(f"{self.wheel}: case {key} has no possible answer")
            cases.append(
                BfclCase(
                    id=key,
                    category=category,
                    question=list(row["question"][0]),
                    functions=list(row["function"]),
                    ground_truth=answers.get(key),
                )
            )
        return cases

    @cached_property
    def _bfcl(self) -> _Loaded:
        with _LOAD_LOCK:
            return _load(self)

    def tools(self, case: BfclCase) -> list[dict[str, Any]]:
        """The case's functions as OpenAI tools, converted as BFCL's FC handler does.

        The language hint is added to each description, the types are mapped
        with ``GORILLA_TO_OPENAPI`` and a dotted name is written with ``_``
        (``{"type": "function", "function": {"name", "description", "parameters"}}``).
        """
        bfcl = self._bfcl
        functions = bfcl.hint(copy.deepcopy(case.functions), case.category)
        tools: list[dict[str, Any]] = bfcl.convert_to_tool(
            functions, bfcl.to_openapi, bfcl.openai_style
        )
        return tools

    def score(self, case: BfclCase, calls: list[dict[str, Any]]) -> str | None:
        """Why ``calls`` (BFCL's model output) fail ``case``, or ``None`` when correct.

        ``irrelevance``: correct when there is no call. Otherwise the calls
        must be in BFCL's format and pass its ``ast_checker``; the failure is
        its ``error_type`` and first error.
        """
        bfcl = self._bfcl
        if case.category == "irrelevance":
            if bfcl.is_empty_output(calls):
                return None
            return "irrelevance_error:decoder_success: the model called " + ", ".join(
                str(name) for call in calls for name in call
            )
        if not calls:
            return "ast_decoder:decoder_failed: no tool call in the first turn"
        if not bfcl.is_function_calling_format_output(calls):
            return "ast_decoder:decoder_wrong_output_format: a call's parameters are not an object"
        if bfcl.is_java(case.category):
            language = bfcl.language.JAVA
        elif bfcl.is_js(case.category):
            language = bfcl.language.JAVASCRIPT
        else:
            language = bfcl.language.PYTHON
        result = bfcl.ast_checker(
            case.functions, calls, case.ground_truth, language, case.category, CHECKER_MODEL
        )
        if result["valid"]:
            return None
        errors = result.get("error") or ["(no message)"]
        first = errors[0] if isinstance(errors[0], str) else json.dumps(errors[0], default=str)
        if len(first) > 400:
            first = first[:399] + "…"
        return f"{result.get('error_type', 'invalid')}: {first}"


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class _Loaded:
    """What :func:`_load` takes from the wheel."""

    ast_checker: Callable[..., dict[str, Any]]
    language: Any  # bfcl_eval.constants.enums.Language
    convert_to_tool: Callable[..., list[dict[str, Any]]]
    to_openapi: dict[str, str]
    openai_style: Any  # ModelStyle.OPENAI_COMPLETIONS
    hint: Callable[[list[dict[str, Any]], str], list[dict[str, Any]]]
    is_java: Callable[[str], bool]
    is_js: Callable[[str], bool]
    is_function_calling_format_output: Callable[[Any], bool]
    is_empty_output: Callable[[Any], bool]


def _module(name: str, source: str | None, filename: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = filename
    if source is None:
        module.__path__ = []  # a package: its submodules are the ones loaded here
        module.__package__ = name
        return module
    module.__package__ = name.rpartition(".")[0]
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _functions(data: BfclData, member: str, names: Sequence[str], scope: dict[str, Any]) -> None:
    """Define the functions ``names`` of ``member`` in ``scope`` (and nothing else of it)."""
    where = f"{data.wheel}/{member}"
    tree = ast.parse(data._text(member), where)
    chosen = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = sorted(set(names) - {n.name for n in chosen})
    if missing:
        raise ConfigError(f"{where} has no function(s) {', '.join(missing)}")
    exec(compile(ast.Module(body=list(chosen), type_ignores=[]), where, "exec"), scope)


def _load(data: BfclData) -> _Loaded:
    """Load BFCL's checker and conversions from the wheel, touching no installed package.

    The checker imports its modules by their absolute names, so they are put
    in ``sys.modules`` while it loads and taken out afterwards (an installed
    ``bfcl_eval``, if any, is put back as it was).
    """
    names = [name for name, _ in _CHECKER_MODULES]
    names += ["bfcl_eval.constants.model_config", _CHECKER[:-3].replace("/", ".")]
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    loaded: dict[str, types.ModuleType] = {}
    try:
        for name, member in _CHECKER_MODULES:
            where = f"{data.wheel}/{member or name.replace('.', '/') + '/__init__.py'}"
            module = _module(name, data._text(member) if member else None, where)
            sys.modules[name] = loaded[name] = module
        config = types.ModuleType("bfcl_eval.constants.model_config")
        config.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
            CHECKER_MODEL: types.SimpleNamespace(underscore_to_dot=True)
        }
        sys.modules[config.__name__] = config
        checker = _module(_CHECKER[:-3].replace("/", "."), data._text(_CHECKER), _CHECKER)
    except (SyntaxError, ImportError) as exc:  # a release that imports more than this loads
        raise ConfigError(f"{data.wheel}: cannot load BFCL's checker: {exc}") from None
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    enums = loaded["bfcl_eval.constants.enums"]
    mappings = loaded["bfcl_eval.constants.type_mappings"]
    handler: dict[str, Any] = {
        "copy": copy,
        "json": json,
        "re": re,
        "ModelStyle": enums.ModelStyle,
        "GORILLA_TO_OPENAPI": mappings.GORILLA_TO_OPENAPI,
    }
    _functions(data, "bfcl_eval/model_handler/utils.py", _HANDLER_FUNCTIONS, handler)
    utils: dict[str, Any] = {"json": json}
    _functions(data, "bfcl_eval/utils.py", _UTIL_FUNCTIONS, utils)
    return _Loaded(
        ast_checker=checker.ast_checker,
        language=enums.Language,
        convert_to_tool=handler["convert_to_tool"],
        to_openapi=mappings.GORILLA_TO_OPENAPI,
        openai_style=enums.ModelStyle.OPENAI_COMPLETIONS,
        hint=utils["_func_doc_language_specific_pre_processing"],
        is_java=utils["is_java"],
        is_js=utils["is_js"],
        is_function_calling_format_output=utils["is_function_calling_format_output"],
        is_empty_output=utils["is_empty_output"],
    )


# ------------------------------------------------------------------ the suite


def is_bfcl_suite(suite: str | None) -> bool:
    """Whether ``--suite`` names BFCL (``bfcl`` or ``bfcl:CATEGORIES``)."""
    return suite is not None and (suite == "bfcl" or suite.startswith("bfcl:"))


def parse_bfcl_suite(suite: str) -> list[str]:
    """The categories of ``bfcl`` (the default ones) or ``bfcl:NAME,NAME``.

    Raises
    ------
    ConfigError
        An unknown or repeated category, or none.
    """
    _, _, listed = suite.partition(":")
    if not listed.strip():
        if ":" in suite:
            raise ConfigError("--suite bfcl: no category after ':'")
        return list(DEFAULT_CATEGORIES)
    chosen = [name.strip() for name in listed.split(",")]
    unknown = [name for name in chosen if name not in BFCL_CATEGORIES]
    if unknown:
        raise ConfigError(
            f"--suite bfcl: no category {', '.join(repr(n) for n in unknown)} "
            f"(the categories: {', '.join(BFCL_CATEGORIES)})"
        )
    repeated = sorted({name for name in chosen if chosen.count(name) > 1})
    if repeated:
        raise ConfigError(f"--suite bfcl: category {', '.join(repeated)} given twice")
    return chosen


def sample_cases(cases: list[BfclCase], n: int | None, seed: int) -> list[BfclCase]:
    """``n`` cases of one category drawn with ``seed``, in BFCL's order (all for ``None``).

    The draw depends only on ``seed``, the category and the cases, so the
    same command runs the same cases on every machine.
    """
    if n is None or n >= len(cases):
        return list(cases)
    category = cases[0].category if cases else ""
    chosen = random.Random(f"bfcl/{category}/{seed}").sample(range(len(cases)), n)
    return [cases[i] for i in sorted(chosen)]


def first_turn_calls(run: RunResult) -> list[dict[str, Any]]:
    """The tool actions of the run's first turn as BFCL's model output.

    ``[{name: parameters}, …]`` in the order parsed; ``parameters`` is the
    action body's as written (a missing one is ``{}``). Sub-agents' actions
    and other action types are left out.
    """
    calls: list[dict[str, Any]] = []
    turn = 0
    for event in run.events:
        if getattr(event, "parent", None) is not None:
            continue
        kind = getattr(event, "type", "")
        if kind == "turn_started":
            turn = int(getattr(event, "turn", 0))
        elif kind == "action_parsed" and turn == 1:
            action = event.action  # type: ignore[union-attr]
            if action.type.value == "tool":
                calls.append({str(action.body.get("name")): action.body.get("parameters", {})})
    return calls


def _first_turn_end(run: RunResult) -> str | None:
    for event in run.events:
        if getattr(event, "type", "") == "turn_ended" and getattr(event, "parent", None) is None:
            return str(getattr(event, "reason", ""))
    return None


async def _not_run(**_: Any) -> str:
    return NOT_RUN


async def run_case(
    case: BfclCase,
    data: BfclData,
    *,
    model: Any,
    protocol: str,
    options: ModelOptions,
    limits: Limits,
    sample: int = 0,
    transcript_dir: Path | None = None,
) -> TaskResult:
    """Run one case in a fresh session and score its first turn's calls.

    ``limits`` are used with ``max_turns=1`` (one response, as BFCL scores).
    A first turn that did not end normally (a model error, the wall time)
    fails the case, ``irrelevance`` included.
    """
    from ..agent import build_session

    result = TaskResult(id=case.id, category=case.category, sample=sample)
    tools = ToolRegistry()
    for offered in data.tools(case):
        function = offered["function"]
        tools.add(
            Tool(
                name=function["name"],
                description=function.get("description", ""),
                function=_not_run,
                parameters=function["parameters"],
                source=f"BFCL case {case.id}",
            )
        )
    session = build_session(
        model=model,
        protocol=protocol,
        options=options,
        namespace={},
        limits=limits.model_copy(update={"max_turns": 1}),
        tools=tools,
        transcript_dir=transcript_dir,
    )
    started = time.perf_counter()
    async with session:
        run = await session.run(case.message)
    result.seconds = time.perf_counter() - started
    absorb(result, run)
    result.status = run.status
    result.answer = run.answer
    result.calls = first_turn_calls(run)
    ended = _first_turn_end(run)
    if ended not in ("stream_end", "sync_action"):
        result.failure = f"the first turn did not end normally (run status {run.status}" + (
            f": {run.message})" if run.message else ")"
        )
    else:
        result.failure = data.score(case, result.calls)
        distinct = distinct_calls(result.calls)
        result.distinct_correct = (
            result.failure is None
            if distinct == result.calls
            else data.score(case, distinct) is None
        )
    result.correct = result.failure is None
    return result


def distinct_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``calls`` with each repeat of an earlier call left out (order kept).

    The runtime runs a call repeated in the same turn once and gives the
    repeat its result; the report's second score counts calls that way.
    """
    seen: set[str] = set()
    kept: list[dict[str, Any]] = []
    for call in calls:
        key = json.dumps(call, sort_keys=True, ensure_ascii=False, default=str)
        if key not in seen:
            seen.add(key)
            kept.append(call)
    return kept


async def run_bfcl(
    data: BfclData,
    cases: list[BfclCase],
    *,
    model: str | None,
    protocol: str,
    options: ModelOptions,
    limits: Limits | None = None,
    samples: int = 1,
    progress: Progress | None = None,
    transcript_dir: Path | None = None,
) -> list[TaskResult]:
    """Run every case ``samples`` times; report each as it ends through ``progress``."""
    shared, folder = eval_model(model, protocol, options, transcript_dir)
    chosen = limits or Limits()

    async def run_one(case: BfclCase, sample: int) -> TaskResult:
        return await run_case(
            case,
            data,
            model=shared,
            protocol=protocol,
            options=options,
            limits=chosen,
            sample=sample,
            transcript_dir=folder,
        )

    return await run_samples(cases, samples, progress, run_one)

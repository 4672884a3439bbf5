"""The error tree: drawn where it is defined, every class in use, data on the errors."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import cortex_kernel
import cortex_kernel.exceptions as exceptions

PACKAGE = Path(cortex_kernel.__file__).parent


def _classes() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(exceptions).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }


def test_the_drawn_tree_is_the_class_tree() -> None:
    doc = exceptions.__doc__ or ""
    drawn: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        match = re.match(r"^(\s*)(?:[│ ]*[├└]── )?([A-Z]\w+)\b", line)
        if match is None or match.group(2) not in _classes():
            continue
        depth = len(line) - len(line.lstrip(" │├└─"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        drawn[match.group(2)] = stack[-1][1] if stack else "Exception"
        stack.append((depth, match.group(2)))
    actual = {name: cls.__bases__[0].__name__ for name, cls in _classes().items()}
    assert drawn == actual
    assert set(exceptions.__all__) == set(actual)


def test_every_leaf_is_raised_somewhere() -> None:
    source = "\n".join(
        path.read_text(encoding="utf-8")
        for path in PACKAGE.rglob("*.py")
        if path.name != "exceptions.py"
    )
    classes = _classes()
    bases = {base for cls in classes.values() for base in cls.__bases__}
    for name, cls in classes.items():
        if cls in bases:
            continue  # a base is caught, not raised
        # Called, or made from a table of (class, message) pairs (llm.errors.MESSAGES).
        made = rf"\b{re.escape(name)}\(|\({re.escape(name)}, _\w+\)"
        assert re.search(made, source), f"nothing raises {name}"


def test_errors_carry_what_the_caller_needs() -> None:
    error = exceptions.UnknownActionError("unknown tool 'x'", action_id="a1")
    assert (str(error), error.action_id) == ("unknown tool 'x'", "a1")
    result = object()
    failed = exceptions.RunFailed("model error", result=result)
    assert failed.result is result and isinstance(failed, exceptions.RunError)


def test_names_say_what_the_errors_are() -> None:
    # A timeout is a TimeoutError, a connection failure a ConnectionError:
    # code that handles the builtin categories handles ours too.
    assert issubclass(exceptions.ModelTimeout, TimeoutError)
    assert issubclass(exceptions.ConnectionFailed, ConnectionError)
    # An MCP server failing in a running session is not a configuration error.
    assert not issubclass(exceptions.McpError, exceptions.ConfigError)
    # No name shadows a builtin, or needs a trailing underscore to avoid one.
    import builtins

    assert not set(exceptions.__all__) & set(dir(builtins))
    assert not [name for name in exceptions.__all__ if name.endswith("_")]


def test_the_old_reference_error_name_is_a_deprecated_alias() -> None:
    import pytest

    with pytest.warns(DeprecationWarning, match="use VariableReferenceError"):
        from cortex_kernel.exceptions import ReferenceError_  # type: ignore[attr-defined]
    assert ReferenceError_ is exceptions.VariableReferenceError

"""Is a variable the agent made the value a data task expects?

:func:`difference` compares what the agent bound in the namespace with the
value computed from fresh data, loosely where a user would not care (a
one-column DataFrame for a Series, the index's name, an ``int`` for a
``float``) and strictly where they would (the labels, the rows, the values).
pandas is not imported here: the objects are read through their own
methods, so the eval runs where pandas is not installed.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__: list[str] = []  # used inside the evaluation package only


def _kind(value: Any) -> str:
    module = type(value).__module__.split(".", 1)[0]
    if module == "pandas":
        name = type(value).__name__
        if name in ("Series", "DataFrame"):
            return name
    return "other"


def _close(a: Any, b: Any, tolerance: float) -> bool:
    numeric = isinstance(a, numbers.Real) and isinstance(b, numbers.Real)
    if numeric and not isinstance(a, bool) and not isinstance(b, bool):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return abs(x - y) <= tolerance
    if _missing(a) and _missing(b):
        return True
    try:
        return bool(a == b)
    except Exception:  # an ambiguous comparison (arrays): not equal
        return False


def _missing(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (type(value).__name__ in ("NaTType", "NAType"))
    )


def _label(value: Any) -> str:
    # Integral floats and numpy integers name the same label as ints (3.0 is 3).
    if isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    return str(value)


def _series(actual: Any, expected: Any, tolerance: float) -> str | None:
    if _kind(actual) == "DataFrame" and actual.shape[1] == 1:
        actual = actual.iloc[:, 0]  # a one-column table of the same values
    elif isinstance(actual, dict):
        labels = list(actual)
        values = list(actual.values())
        return _pairs(labels, values, expected, tolerance)
    if _kind(actual) != "Series":
        return f"a Series of {len(expected)} values was expected, not a {type(actual).__name__}"
    return _pairs(list(actual.index), list(actual.tolist()), expected, tolerance)


def _pairs(labels: list[Any], values: list[Any], expected: Any, tolerance: float) -> str | None:
    want = dict(zip((_label(k) for k in expected.index), expected.tolist(), strict=True))
    have = dict(zip((_label(k) for k in labels), values, strict=True))
    if set(have) != set(want):
        extra = sorted(set(have) - set(want))[:5]
        lacking = sorted(set(want) - set(have))[:5]
        return f"its labels differ (not expected: {extra}, missing: {lacking})"
    wrong = [k for k, v in want.items() if not _close(have[k], v, tolerance)]
    if wrong:
        k = wrong[0]
        return f"{len(wrong)} value(s) differ ({k}: {have[k]!r}, expected {want[k]!r})"
    return None


def _frame(actual: Any, expected: Any, tolerance: float) -> str | None:
    if _kind(actual) != "DataFrame":
        return f"a DataFrame was expected, not a {type(actual).__name__}"
    if len(actual) != len(expected):
        return f"{len(actual)} rows, expected {len(expected)}"
    lacking = [c for c in expected.columns if c not in actual.columns]
    if lacking:
        return f"columns missing: {', '.join(map(str, lacking))}"
    # The rows, in order, whatever the index became (a reset_index is fine).
    for column in expected.columns:
        have, want = actual[column].tolist(), expected[column].tolist()
        for row, (a, b) in enumerate(zip(have, want, strict=True)):
            if not _close(a, b, tolerance):
                return f"column {column}, row {row}: {a!r}, expected {b!r}"
    return None


def difference(actual: Any, expected: Any, tolerance: float = 0.0) -> str | None:
    """How ``actual`` differs from ``expected``, or ``None`` when it is the same value.

    Parameters
    ----------
    actual
        What the agent bound (any object).
    expected
        The value computed from the data: a pandas Series (same labels, each
        value within ``tolerance``; a dict or a one-column DataFrame of them
        is the same), a DataFrame (the same rows in the same order, the
        expected columns with the same values; other columns and the index
        are not compared), or a scalar (a number within ``tolerance``).
    tolerance
        How far a number may be from the expected one.

    Returns
    -------
    str or None
        One line saying what differs first.
    """
    kind = _kind(expected)
    if kind == "Series":
        return _series(actual, expected, tolerance)
    if kind == "DataFrame":
        return _frame(actual, expected, tolerance)
    if _close(actual, expected, tolerance):
        return None
    return f"{actual!r}, expected {expected!r}"

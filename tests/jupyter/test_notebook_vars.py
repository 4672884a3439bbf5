"""The notebook_variables text for odd values (a unit under the kernel test)."""

from __future__ import annotations

from typing import Any

from cortex_kernel.jupyter.notebook_vars import MAX_VARIABLES, describe_variables
from cortex_kernel.redaction import Redactor


class Hostile:
    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise RuntimeError("no class for you")

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_odd_values_never_break_the_feed() -> None:
    text = describe_variables(
        {"h": Hostile(), "big": list(range(1_000_000)), "ok": 1}, redactor=Redactor([])
    )
    lines = text.splitlines()
    assert lines[0].startswith("h: Hostile = ")
    assert lines[1].startswith("big: list (len 1000000) = [0, 1, 2, 3, 4, ...]")
    assert lines[2] == "ok: int = 1"


def test_the_most_recent_variables_within_the_cap() -> None:
    namespace = {f"v{i}": i for i in range(MAX_VARIABLES + 5)}
    lines = describe_variables(namespace, redactor=Redactor([])).splitlines()
    assert lines[0] == "(5 older variables not shown)"
    assert lines[1] == "v5: int = 5" and len(lines) == MAX_VARIABLES + 1


def test_secret_names_and_values() -> None:
    secret = "s3cr3t-value-123"
    text = describe_variables(
        {"db_password": "x" * 9, "keys": [1], "msg": f"use {secret}"},
        redactor=Redactor([secret]),
    )
    assert "db_password: str (len 9) = (hidden: the name looks secret)" in text
    assert "keys: list (len 1) = [1]" in text  # 'keys' is not a credential's name
    assert secret not in text and "msg: str (len 20) = 'use ***'" in text

"""The notebook_variables text for odd values (a unit under the kernel test)."""

from __future__ import annotations

from typing import Any

from cortex_kernel.jupyter.notebook_vars import (
    HEADER,
    MAX_VARIABLES,
    VariablesSource,
    describe_variables,
)
from cortex_kernel.redaction import Redactor
from cortex_kernel.runtime.feeds import with_message


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
        {"h": Hostile(), "big": list(range(1_000_000)), "ok": 1},
        redactor=Redactor([]),
        values=True,
    )
    header, *lines = text.splitlines()
    assert header == HEADER
    assert lines[0].startswith("h: Hostile = ")
    assert lines[1].startswith("big: list (len 1000000) = [0, 1, 2, 3, 4, ...]")
    assert lines[2] == "ok: int = 1"


def test_the_most_recent_variables_within_the_cap() -> None:
    namespace = {f"v{i}": i for i in range(MAX_VARIABLES + 5)}
    _, *lines = describe_variables(namespace, redactor=Redactor([]), values=True).splitlines()
    assert lines[0] == "(5 older variables not shown)"
    assert lines[1] == "v5: int = 5" and len(lines) == MAX_VARIABLES + 1


def test_the_variables_the_message_names_come_first() -> None:
    namespace = {f"v{i}": i for i in range(MAX_VARIABLES + 5)}
    namespace |= {"sales": 1, "customers": 2}
    message = "What is the mean age in `customers`? Compare with v0 and v1."
    _, *lines = describe_variables(namespace, redactor=Redactor([]), message=message).splitlines()
    # Named ones first, in the order named, even one too old to be listed otherwise.
    assert lines[:4] == [
        "(7 older variables not shown)",
        "customers: int",
        "v0: int",
        "v1: int",
    ]
    assert lines[-1] == "sales: int" and len(lines) == MAX_VARIABLES + 1
    # Through the source the kernel and the eval use, as the run calls it.
    source = VariablesSource(lambda: {"sales": 1, "customers": 2})
    [provider] = with_message({"notebook_variables": source}, "Churn in customers?").values()
    assert provider().splitlines()[1:] == ["customers: int", "sales: int"]
    plain = with_message({"clock": lambda: "10:00"}, "Churn in customers?")["clock"]
    assert plain() == "10:00"  # a provider that takes no message is called as it is


def test_secret_names_and_values() -> None:
    secret = "s3cr3t-value-123"
    text = describe_variables(
        {"db_password": "x" * 9, "keys": [1], "msg": f"use {secret}"},
        redactor=Redactor([secret]),
        values=True,
    )
    assert "db_password: str (len 9) = (hidden: the name looks secret)" in text
    assert "keys: list (len 1) = [1]" in text  # 'keys' is not a credential's name
    assert secret not in text and "msg: str (len 20) = 'use ***'" in text


CREDENTIALS = {
    "creds": {"user": "admin", "pw": "hunter2-Tr0ub4dor"},
    "login": {"user": "admin", "pw": "hunter2-Tr0ub4dor"},
    "db_url": "postgresql://admin:S3cretPw9@db.example.com:5432/prod",
    "headers": {"Authorization": "Bearer ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
    "header_line": "Authorization: Bearer 8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c",
    "aws_pair": ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    # A credential past reprlib's cut: scrubbed before the cut, not a fragment left.
    "long_note": "ghp_abcdefghijklmnopqrstuvwxyz0123456789 " + "x" * 100,
    "city": "Oslo",
    "readings": [12, 15, 11, 19],
}
SECRET_PARTS = (
    "hunter2",
    "S3cretPw9",
    "ghp_",
    "abcdefghijklmnop",
    "8f7a6b5c4d3e",
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI",
    "EXAMPLEKEY",
)


def test_by_default_names_types_and_shapes_only() -> None:
    text = describe_variables(CREDENTIALS, redactor=Redactor([]))
    assert text.splitlines() == [
        HEADER,
        "creds: dict (len 2)",
        "login: dict (len 2)",
        "db_url: str (len 53)",
        "headers: dict (len 1)",
        "header_line: str (len 54)",
        "aws_pair: tuple (len 2)",
        "long_note: str (len 141)",
        "city: str (len 4)",
        "readings: list (len 4)",
    ]


def test_values_on_hide_every_credential_and_show_the_rest() -> None:
    text = describe_variables(CREDENTIALS, redactor=Redactor([]), values=True)
    lines = text.splitlines()
    assert "creds: dict (len 2) = (hidden: the name looks secret)" in lines
    assert "login: dict (len 2) = {'pw': ***, 'user': 'admin'}" in lines
    assert "db_url: str (len 53) = 'postgresql://admin:***@db.example.com:5432/prod'" in lines
    assert "headers: dict (len 1) = {'Authorization': ***}" in lines
    assert "header_line: str (len 54) = 'Authorization: Bearer ***'" in lines
    assert "aws_pair: tuple (len 2) = ('***', '***')" in lines
    assert "city: str (len 4) = 'Oslo'" in lines
    assert "readings: list (len 4) = [12, 15, 11, 19]" in lines
    for part in SECRET_PARTS:
        assert part not in text, part


def test_a_frames_columns_as_subscripts_with_their_dtypes() -> None:
    pandas = __import__("pytest").importorskip("pandas")
    frame = pandas.DataFrame({"units": [3], "day": pandas.to_datetime(["2024-03-01"])})
    wide = pandas.DataFrame({n: [n] for n in range(12)})
    namespace = {"sales": frame, "wide": wide, "empty": {}}
    text = describe_variables(namespace, redactor=Redactor([]))
    assert text.splitlines()[0] == HEADER
    # Each column as the code that selects it: sales['units'], wide[0].
    assert "sales: DataFrame (shape (1, 2), columns ['units']: int64, ['day']: datetime64" in text
    assert "columns [0]: int64, [1]: int64," in text
    assert "[9]: int64, +2 more)" in text
    assert describe_variables({}, redactor=Redactor([])) == "(no variables yet)"

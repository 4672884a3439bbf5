"""What the manifest's models share: strictness, and the ``pass_env`` field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__: list[str] = []


class Strict(BaseModel):
    """A manifest table: unknown keys are refused, values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def pass_env_field() -> Any:
    """The ``pass_env`` field: kernel variables a child process gets besides PATH, HOME…"""
    return Field(
        default_factory=list,
        description="names (or PREFIX*) of the kernel's environment variables to pass on; "
        "a secret-looking name only when named in full (children get PATH, HOME, LANG… only)",
    )

"""MCP servers in a manifest (``mcp_servers:``): tools from outside the process.

The composition root turns each entry into an
:class:`~cortex_kernel.executors.mcp.McpServerConfig` of the session's MCP hub.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from ..names import ENV_NAME_PATTERN
from .fields import Strict, pass_env_field

__all__ = ["McpServerSpec"]


class McpServerSpec(Strict):
    """An MCP server whose tools the agent may call (as ``NAME__tool``).

    Exactly one of ``command`` (a stdio server: the program and its arguments)
    or ``url`` (a streamable HTTP endpoint).
    """

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$", description="prefix of its tools' names")
    command: list[str] | None = Field(
        default=None, min_length=1, description="stdio server: program and arguments"
    )
    url: str | None = Field(
        default=None, pattern=r"^https?://", description="streamable HTTP endpoint"
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="extra environment (stdio; PATH, HOME… are passed)"
    )
    pass_env: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] = pass_env_field()
    cwd: str | None = Field(default=None, description="working directory (stdio)")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers (url)")
    confirm: bool | list[str] = Field(
        default=False, description="true: every tool asks a human; a list: those tools do"
    )
    timeout: float | None = Field(default=60.0, gt=0, description="seconds per call")
    startup_timeout: float = Field(
        default=30.0, gt=0, description="seconds to start and list the tools"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "an MCP server needs exactly one of 'command' (a stdio server, a list of "
                "strings) or 'url' (a streamable HTTP endpoint)"
            )
        return self

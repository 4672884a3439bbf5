"""The prompt interface: how the runtime asks for a system prompt.

The runtime builds a :class:`PromptContext` at the start of every turn (the
agent's tools with their JSON schemas, the internal actions it may use, the
rendered context feeds…) and hands it to a :class:`PromptBuilder`. The real
protocol prompt lives in ``cortex_kernel.llm.prompt``; the runtime only
knows this interface, so context feeds and manifests plug in here.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

__all__ = ["FeedSlot", "PromptBuilder", "PromptContext"]


class FeedSlot(BaseModel):
    """One rendered context feed as it goes into the prompt."""

    id: str
    text: str
    error: str | None = None


class PromptContext(BaseModel):
    """Everything a system prompt may show the model for one turn."""

    agent_name: str = "cortex"
    instructions: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)  # {"name","description","parameters"}
    agents: list[dict[str, Any]] = Field(default_factory=list)
    relics: list[dict[str, Any]] = Field(default_factory=list)
    workflows: list[dict[str, Any]] = Field(default_factory=list)
    internal_actions: list[str] = Field(default_factory=list)
    feeds: list[FeedSlot] = Field(default_factory=list)
    protocol: str = "xml"  # "xml" or "tools"


class PromptBuilder(Protocol):
    """Builds the system prompt of a turn."""

    def system_prompt(self, context: PromptContext) -> str:
        """Return the system prompt text for ``context``."""
        ...

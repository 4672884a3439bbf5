"""The model interface: anything that streams protocol text.

The runtime talks to models only through :class:`Model` and
:class:`Completion`. ``cortex_kernel.llm`` plugs litellm in behind it, and
the replay model (``replay:PATH``) is another implementation. Messages are in
the OpenAI chat shape (``{"role": …, "content": …}``) because that is what
litellm takes and what transcripts record.

A function-calling provider's native tool calls are turned into protocol
text by the model adapter (``<action type="tool" id="CALL_ID" …>``), so the
parser stays the one contract; the calls themselves are also reported in
:attr:`Completion.tool_calls` so the loop can answer them with ``tool``
messages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .events import Usage

__all__ = ["Completion", "CompletionRequest", "Message", "Model", "ToolCall"]

Message = dict[str, Any]


class ToolCall(BaseModel):
    """A native tool call of a function-calling model."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str  # JSON text as the provider sent it


class CompletionRequest(BaseModel):
    """What a turn asks of the model."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None  # OpenAI function schemas, for protocol="tools"
    protocol: Literal["xml", "tools"] = "xml"
    options: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens…


class Completion(ABC):
    """One open streamed completion.

    Use as ``async with model.stream(request) as completion: async for chunk
    in completion: …``. Leaving the block (or :meth:`aclose`) stops reading
    and closes the provider connection at once: a ``sync`` action cuts the
    turn there and no more tokens are read or paid for.
    """

    usage: Usage
    tool_calls: list[ToolCall]

    def __init__(self) -> None:
        self.usage = Usage()
        self.tool_calls = []

    @abstractmethod
    def __aiter__(self) -> AsyncIterator[str]:
        """Yield protocol text chunks as they arrive."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop the stream and release the connection; safe to call twice."""

    async def __aenter__(self) -> Completion:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Model(ABC):
    """A streaming model. ``name`` is what the user selected (``replay:…``, ``openai/gpt-4o``…)."""

    name: str
    #: A line for the user about how the model was chosen (e.g. the offline
    #: demo used because no provider key is set); ``None`` when there is none.
    note: str | None = None

    @abstractmethod
    def stream(self, request: CompletionRequest) -> Completion:
        """Open a streamed completion (the request is sent on first iteration)."""

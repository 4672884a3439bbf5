"""Test doubles: a scripted streaming model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio

from cortex_kernel.runtime.ports import Completion, CompletionRequest, Model, ToolCall
from cortex_kernel.runtime.run_events import Usage


class ScriptedCompletion(Completion):
    def __init__(self, model: ScriptedModel, chunks: Sequence[str | BaseException]) -> None:
        super().__init__()
        self.model = model
        self.chunks = chunks
        self.closed = False

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[str]:
        for chunk in self.chunks:
            if self.model.delay:
                await anyio.sleep(self.model.delay)
            else:
                await anyio.lowlevel.checkpoint()
            if isinstance(chunk, BaseException):
                raise chunk
            self.model.read.append(chunk)
            yield chunk
        self.usage = Usage(prompt_tokens=10, completion_tokens=5, cost=0.01)

    async def aclose(self) -> None:
        self.closed = True


class ScriptedModel(Model):
    """Plays ``turns`` in order; each turn is text (chunked by ``chunk``) or a list of chunks."""

    def __init__(
        self,
        turns: Sequence[str | Sequence[str | BaseException]],
        *,
        chunk: int = 7,
        delay: float = 0.0,
        tool_calls: dict[int, list[ToolCall]] | None = None,
    ) -> None:
        self.name = "scripted"
        self.turns = list(turns)
        self.chunk = chunk
        self.delay = delay
        self.requests: list[CompletionRequest] = []
        self.read: list[str] = []
        self.completions: list[ScriptedCompletion] = []
        self.tool_calls = tool_calls or {}

    def stream(self, request: CompletionRequest) -> Completion:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.turns):
            raise RuntimeError("scripted model has no more turns")
        turn = self.turns[index]
        if isinstance(turn, str):
            chunks: Sequence[str | BaseException] = [
                turn[i : i + self.chunk] for i in range(0, len(turn), self.chunk)
            ]
        else:
            chunks = turn
        completion = ScriptedCompletion(self, chunks)
        completion.tool_calls = self.tool_calls.get(index, [])
        self.completions.append(completion)
        return completion

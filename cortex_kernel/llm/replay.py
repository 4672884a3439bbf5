"""``replay:PATH[?tps=N]``: a model that streams recorded turns (docs/runtime.md#models).

The file is JSONL. Either each line is one assistant turn,
``{"content": "…protocol text…"}``, optionally with ``"tool_calls"`` in the
OpenAI shape; or the file is a transcript recorded by a run, whose
``{"type": "model_turn", …}`` records are replayed and every other line is
ignored. Each :meth:`ReplayModel.stream` call plays the next turn; when the
turns run out the stream raises :class:`ReplayExhausted` saying so.

The text is cut into token-sized pieces (a word or up to four characters,
with their leading space, roughly what a BPE tokenizer yields) and sent a few
tokens per chunk, like a real provider. With ``tps`` the chunks are paced on
an absolute schedule (no drift from sleep overshoot); without it they come
as fast as the consumer reads, with a checkpoint per chunk so cancellation
is immediate.

Native tool calls are turned into protocol text by the one translator
(:mod:`cortex_kernel.runtime.tool_calls`), appended after the content.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.lowlevel

from ..exceptions import ConfigError, ReplayExhausted
from ..runtime.ports import Completion, CompletionRequest, Model, ToolCall
from ..runtime.run_events import Usage
from ..runtime.tool_calls import tool_calls_to_protocol

__all__ = ["ReplayModel", "tokenize"]

_TOKEN = re.compile(r"\s*[A-Za-z]{1,8}|\s*\d{1,3}|\s*[^\sA-Za-z\d]|\s+")
_TOKENS_PER_CHUNK = 3


def tokenize(text: str) -> list[str]:
    """Cut ``text`` into token-sized pieces that join back to ``text``."""
    pieces = _TOKEN.findall(text)
    joined = "".join(pieces)
    if joined != text:  # defensive: never lose a character
        return [text[i : i + 4] for i in range(0, len(text), 4)]
    return pieces


def _load_turns(path: Path) -> list[dict[str, Any]]:
    # Validated here, when the model is set, so a bad file never fails a run later.
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read replay file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"replay file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
            f'offset {exc.start}); a replay file is JSONL, one {{"content": "…"}} per line'
        ) from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise ConfigError(f"{path}:{number}: not a JSON line ({reason})") from None
        if not isinstance(record, dict):
            raise ConfigError(
                f"{path}:{number}: each line must be a JSON object such as "
                f'{{"content": "…"}}, not a {type(record).__name__}'
            )
        if "content" in record and not isinstance(record["content"], str | None):
            raise ConfigError(f'{path}:{number}: "content" must be a string')
        records.append(record)
    recorded = [r for r in records if r.get("type") == "model_turn"]
    if recorded:
        return recorded
    turns = [r for r in records if "type" not in r and ("content" in r or "tool_calls" in r)]
    if not records:
        raise ConfigError(
            f'{path} is empty: a replay file has one turn per line, {{"content": "…"}}'
        )
    if not turns:
        raise ConfigError(
            f'{path}: no turns found; each line should be {{"content": "…"}} '
            "or the file a transcript recorded by a run"
        )
    return turns


def _tool_calls(record: dict[str, Any]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for index, raw in enumerate(record.get("tool_calls") or []):
        if not isinstance(raw, dict):
            continue
        nested = raw.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else raw
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{index + 1}"),
                name=str(function.get("name", "")),
                arguments=arguments,
            )
        )
    return calls


class _ReplayCompletion(Completion):
    def __init__(self, model: ReplayModel, request: CompletionRequest) -> None:
        super().__init__()
        self._model = model
        self._request = request
        self._closed = False

    def __aiter__(self) -> AsyncIterator[str]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[str]:
        record = self._model._next_turn()
        calls = _tool_calls(record)
        text = str(record.get("content") or "")
        # A recorded transcript already holds the protocol text of its calls.
        if calls and record.get("type") != "model_turn":
            text += tool_calls_to_protocol(calls, self._request.tools)
        self.tool_calls = calls
        tokens = tokenize(text)
        prompt_chars = sum(len(str(m.get("content") or "")) for m in self._request.messages)
        self.usage = Usage(prompt_tokens=math.ceil(prompt_chars / 4))
        tps = self._model.tps
        start = time.monotonic()
        sent = 0
        for first in range(0, len(tokens), _TOKENS_PER_CHUNK):
            if self._closed:
                break
            batch = tokens[first : first + _TOKENS_PER_CHUNK]
            if tps:
                due = start + (first + len(batch)) / tps
                delay = due - time.monotonic()
                if delay > 0:
                    await anyio.sleep(delay)
                else:
                    await anyio.lowlevel.checkpoint()
            else:
                await anyio.lowlevel.checkpoint()
            sent += len(batch)
            self.usage = self.usage.model_copy(update={"completion_tokens": sent})
            yield "".join(batch)

    async def aclose(self) -> None:
        self._closed = True


class ReplayModel(Model):
    """Streams the turns of a JSONL file, one per :meth:`stream` call.

    Parameters
    ----------
    path
        The replay file (hand-written turns or a recorded transcript).
    tps
        Tokens per second to pace the stream at; ``None`` streams at once.
    """

    answers_aside = False  # every request takes the next recorded turn

    def __init__(self, path: Path, tps: float | None = None) -> None:
        self.path = Path(path)
        self.tps = tps if tps and tps > 0 else None
        self.turns = _load_turns(self.path)
        self.position = 0
        # The demo model replays its transcript for every new question.
        self.restart_each_run = False
        query = f"?tps={tps:g}" if self.tps else ""
        self.name = f"replay:{self.path}{query}"

    @classmethod
    def from_spec(cls, spec: str) -> ReplayModel:
        """Build from ``replay:PATH`` or ``replay:PATH?tps=50``.

        Raises
        ------
        ConfigError
            When the spec is not a replay spec or ``tps`` is not a number.
        """
        if not spec.startswith("replay:"):
            raise ConfigError(f"not a replay model spec: {spec!r} (expected replay:PATH[?tps=N])")
        rest = spec.removeprefix("replay:")
        path, _, query = rest.partition("?")
        tps: float | None = None
        if query:
            values = parse_qs(query).get("tps")
            if values:
                try:
                    tps = float(values[0])
                except ValueError:
                    raise ConfigError(f"tps must be a number in {spec!r}") from None
        if not path:
            raise ConfigError("replay: needs a file path, e.g. replay:turns.jsonl?tps=50")
        return cls(Path(path).expanduser(), tps=tps)

    def reset(self) -> None:
        """Start again from the first turn."""
        self.position = 0

    def _next_turn(self) -> dict[str, Any]:
        if self.position >= len(self.turns):
            raise ReplayExhausted(
                f"the replay model ran out of turns: {self.path} has {len(self.turns)} "
                f"turn(s) and all were played; add turns to the file or start a new session"
            )
        record = self.turns[self.position]
        self.position += 1
        return record

    def stream(self, request: CompletionRequest) -> Completion:
        """Open the next recorded turn as a streamed completion."""
        if self.restart_each_run and _opens_a_run(request):
            self.reset()
        return _ReplayCompletion(self, request)


def _opens_a_run(request: CompletionRequest) -> bool:
    # A run's first turn ends with the user's message; later turns end with
    # action results (a user message of <action_result> blocks, or tool
    # messages). The feeds message after them is not the conversation's.
    conversation = request.messages[: len(request.messages) - request.feed_messages]
    last = conversation[-1] if conversation else {}
    content = str(last.get("content") or "")
    return last.get("role") == "user" and not content.lstrip().startswith("<action_result")

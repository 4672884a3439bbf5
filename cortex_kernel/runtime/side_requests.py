"""A request the runtime sends besides a run's turns, read to its end and charged to a budget.

An ``llm`` action (:mod:`cortex_kernel.executors.llm_call`) and a fix of
failed code (:mod:`.code_fixes`) both hold their tokens in the run's
:class:`~.limits.Budget` while they stream, and are charged what they used,
also when cut short.
"""

from __future__ import annotations

from .limits import Budget
from .ports import CompletionRequest, Message, Model
from .run_events import Usage

__all__: list[str] = []  # used by the runtime and its executors only


def prompt_tokens(model: Model, messages: list[Message]) -> int:
    """The prompt's tokens: the model's own count, else about 4 characters a token."""
    count = getattr(model, "count_tokens", None)
    if callable(count):
        try:
            counted = int(count(messages=messages))
        except Exception:  # an estimate only: never fail the call over it
            counted = 0
        if counted > 0:
            return counted
    return sum(len(str(m.get("content") or "")) for m in messages) // 4 + 4 * len(messages)


async def complete_text(
    model: Model, request: CompletionRequest, budget: Budget | None, most: int | None
) -> str:
    """Stream ``request`` to its end and return its text.

    With a ``budget``, the prompt and at most ``most`` tokens (``None``: no
    cap of its own) are held in it while the request streams; the cap the
    budget grants becomes the request's ``max_tokens``.
    """
    parts: list[str] = []
    if budget is None:
        async with model.stream(request) as completion:
            async for chunk in completion:
                parts.append(chunk)
        return "".join(parts)
    grant = await budget.reserve_tokens(prompt_tokens(model, request.messages), most)
    if grant.cap is not None:
        request.options["max_tokens"] = grant.cap
    usage = Usage()
    try:
        async with model.stream(request) as completion:
            try:
                async for chunk in completion:
                    parts.append(chunk)
            finally:
                usage = completion.usage  # what was read, when cut short
        usage = completion.usage  # final figures once the stream is closed
    finally:
        # Reached a limit? The run ends there; this request's text still stands.
        grant.settle(usage)
    return "".join(parts)

"""Run limits (docs/runtime.md#limits): each ends a run with status ``limit`` and a clear message.

:class:`Limits` says what one run may consume; :class:`Budget` counts what
it did consume. Every action a run starts counts, at any depth: the tokens
of its ``llm`` actions, and the actions and tokens of the sub-agents it
calls (a sub-agent's budget charges its caller's too).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ..exceptions import ActionError
from .run_events import Usage

__all__ = ["Budget", "Limits"]


class Limits(BaseModel):
    """What one run may consume (a manifest's ``limits:`` table; any left out keeps its default).

    Attributes
    ----------
    max_turns
        Streamed completions per run.
    max_actions
        Actions submitted per run, its sub-agents' included.
    max_parallel
        Actions running at once, ``fire_and_forget`` ones included (a
        sub-agent runs at most as many as its caller may).
    wall_time
        Seconds for the whole run; ``fire_and_forget`` actions that outlive
        the run are cancelled when they run out.
    max_tokens, max_cost
        Prompt plus completion tokens, and dollars, per run (``None``: no limit):
        the run's own turns, its ``llm`` actions and its sub-agents together.
    max_depth
        Nesting of agent runs.
    result_chars
        Characters of one result shown to the model; the rest stays in its variable.
    result_tokens
        Tokens of all the results that open one turn together (``None``: a
        quarter of the model's context window, or 8,000 when it is unknown).
    action_timeout
        Seconds one attempt of an action may take when it names no ``timeout``
        (``None``: no default limit).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int = Field(default=20, ge=1)
    max_actions: int = Field(default=200, ge=0)
    max_parallel: int = Field(default=16, ge=1)
    wall_time: float = Field(default=600.0, gt=0, description="seconds per run")
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, ge=0, description="dollars per run")
    max_depth: int = Field(default=3, ge=0)
    result_chars: int = Field(default=4000, ge=1)
    result_tokens: int | None = Field(
        default=None, ge=100, description="tokens of all the results opening one turn"
    )
    action_timeout: float | None = Field(
        default=300.0, gt=0, description="seconds per action attempt when it names no timeout"
    )


#: Result budget per turn when the model's context window is unknown.
DEFAULT_RESULT_TOKENS = 8000


def result_budget_chars(limits: Limits, context_window: int | None) -> int:
    """Characters the results opening one turn may take (about 4 a token)."""
    tokens = limits.result_tokens
    if tokens is None:
        tokens = max(1000, context_window // 4) if context_window else DEFAULT_RESULT_TOKENS
    return tokens * 4


def usage_limit_message(limits: Limits, usage: Usage) -> str | None:
    """The message for a token or cost limit that ``usage`` has reached, or ``None``."""
    if limits.max_tokens is not None and usage.tokens >= limits.max_tokens:
        return (
            f"token limit reached: {usage.tokens} tokens used (llm actions and sub-agents "
            f"included), max_tokens={limits.max_tokens}; raise the limit or shorten the task"
        )
    if limits.max_cost is not None and usage.cost is not None and usage.cost >= limits.max_cost:
        return (
            f"cost limit reached: ${usage.cost:.4f} spent, max_cost=${limits.max_cost:.4f}; "
            "raise the limit or shorten the task"
        )
    return None


class TokenLimitError(ActionError):
    """An ``llm`` action cannot start: the run's token budget has no room for it."""


@dataclass(eq=False)
class _Tree:
    """What the budgets of one tree of runs share: the lock, and the wake-up of waiters."""

    lock: threading.Lock
    released: anyio.Event | None = None

    def wake(self) -> None:
        # Called with the lock held; waiters re-check under the lock.
        if self.released is not None:
            self.released.set()
            self.released = None


@dataclass(eq=False)
class TokenGrant:
    """Tokens an ``llm`` action holds while it runs (see :meth:`Budget.reserve_tokens`).

    Attributes
    ----------
    budget
        The budget the tokens are held in.
    held
        Tokens held (prompt plus ``cap``), in that budget and every one above.
    cap
        The most the completion may write (its ``max_tokens``); ``None``: no
        limit applies.
    settled
        Whether :meth:`settle` has given them back.
    """

    budget: Budget
    held: int
    cap: int | None
    settled: bool = False

    def settle(self, usage: Usage) -> str | None:
        """Give the reservation back and charge what the call used.

        Returns
        -------
        str | None
            The limit message when the charge spent a budget, else ``None``.
        """
        with self.budget._tree.lock:
            if not self.settled:
                self.settled = True
                for budget in self.budget.chain():
                    budget.reserved -= self.held
            return self.budget._charge(usage.model_copy(update={"turns": 0, "seconds": 0.0}))


class Budget:
    """What one run has consumed, charged to every run above it as well.

    Each run has a budget; a sub-agent's run has its caller's as ``parent``,
    so an action the sub-agent submits or a token it spends counts against
    the caller's limits too (the nearest limit reached stops the work). The
    counters of a whole tree of runs share one lock, so concurrent actions
    never lose a count; :meth:`reserve_tokens` waits on the run's event loop.

    Parameters
    ----------
    limits
        This run's limits.
    parent
        The budget of the run that started this one (``None``: a cell's run).
    caller
        The id of the parent's action that started this run (``agent``
        actions): prefixes the ids this budget reports upwards.

    Attributes
    ----------
    actions
        Actions submitted, nested runs' included.
    usage
        Tokens and cost of the run's turns, ``llm`` actions and nested runs
        (``turns`` counts the run's own turns only).
    reserved
        Tokens held by ``llm`` actions still running.
    exhausted
        The message of the first limit of *this* budget that was reached.
    deadline
        When the run's wall time ends (anyio's clock; ``None`` before the run starts).
    unstopped
        Work of the run that was cancelled but could not be stopped (a sync
        tool's thread), as ``"ID (what)"``.
    unstopped_actions
        The same for this run's own actions: what runs on, by action id
        (the scheduler marks their ``action_cancelled`` with it).
    """

    def __init__(
        self, limits: Limits, *, parent: Budget | None = None, caller: str | None = None
    ) -> None:
        self.limits = limits
        self.parent = parent
        self.caller = caller
        self._tree: _Tree = parent._tree if parent is not None else _Tree(threading.Lock())
        self.actions = 0
        self.usage = Usage()
        self.reserved = 0
        self.exhausted: str | None = None
        self.deadline: float | None = None
        self.unstopped: list[str] = []
        self.unstopped_actions: dict[str, str] = {}

    def chain(self) -> Iterator[Budget]:
        """This budget, then its parent's, up to the cell's run."""
        budget: Budget | None = self
        while budget is not None:
            yield budget
            budget = budget.parent

    def start(self, now: float) -> None:
        """Start the wall-time clock at ``now`` (anyio's clock); never later than the parent's."""
        deadline = now + self.limits.wall_time
        if self.parent is not None and self.parent.deadline is not None:
            deadline = min(deadline, self.parent.deadline)
        self.deadline = deadline

    def over(self) -> str | None:
        """The message of a limit reached by this run or a run above it, or ``None``."""
        for budget in self.chain():
            if budget.exhausted is not None:
                return budget.exhausted
        return None

    def take_action(self) -> str | None:
        """Count one action; the limit message instead when a ``max_actions`` is reached."""
        with self._tree.lock:
            for budget in self.chain():
                most = budget.limits.max_actions
                if budget.actions < most:
                    continue
                if budget is self:
                    message = (
                        f"action limit reached: {most} actions in this run (limits.max_actions)"
                    )
                    if budget.exhausted is None:
                        budget.exhausted = message
                    self._tree.wake()
                    return message
                # Reached in a sub-agent: the caller's run ends at its own limit too.
                if budget.exhausted is None:
                    budget.exhausted = (
                        f"action limit reached: {most} actions in this run, its sub-agents' "
                        "included (limits.max_actions)"
                    )
                self._tree.wake()
                return (
                    f"action limit reached: the calling run's {most} actions, this sub-agent's "
                    "included (its limits.max_actions)"
                )
            for budget in self.chain():
                budget.actions += 1
        return None

    def charge(self, usage: Usage) -> str | None:
        """Add ``usage`` here and to every run above; the limit message if one is reached."""
        with self._tree.lock:
            return self._charge(usage)

    def _charge(self, usage: Usage) -> str | None:
        # With the lock held.
        upward = usage.model_copy(update={"turns": 0, "seconds": 0.0})
        reached: str | None = None
        for budget in self.chain():
            budget.usage = budget.usage + (usage if budget is self else upward)
            message = usage_limit_message(budget.limits, budget.usage)
            if message is not None:
                if budget.exhausted is None:
                    budget.exhausted = message
                reached = reached or message
        self._tree.wake()
        return reached

    def note_unstopped(self, action_id: str, what: str) -> None:
        """Record that action ``action_id`` was cancelled but ``what`` runs on."""
        with self._tree.lock:
            self.unstopped_actions.setdefault(action_id, what)
            for budget in self.chain():
                budget.unstopped.append(f"{action_id} ({what})")
                if budget.caller is not None:
                    action_id = f"{budget.caller}/{action_id}"

    async def reserve_tokens(self, prompt: int, most: int | None = None) -> TokenGrant:
        """Hold tokens for one ``llm`` action before it starts.

        The action holds its prompt plus the most it may write: ``most``
        (its model's ``max_tokens``), cut to what no other running action
        holds. When that leaves nothing, it waits for those to settle.

        Parameters
        ----------
        prompt
            The prompt's tokens (an estimate).
        most
            The completion's own cap, if it has one.

        Raises
        ------
        TokenLimitError
            The budget is spent, or the prompt alone does not fit in what is left.
        """
        while True:
            with self._tree.lock:
                message = self.over()
                if message is not None:
                    raise TokenLimitError(message)
                free: int | None = None
                busy = False
                for budget in self.chain():
                    if budget.limits.max_tokens is None:
                        continue
                    left = budget.limits.max_tokens - budget.usage.tokens - budget.reserved
                    free = left if free is None else min(free, left)
                    busy = busy or budget.reserved > 0
                if free is None:
                    return TokenGrant(self, 0, None)
                if free > prompt:
                    cap = free - prompt if most is None else min(most, free - prompt)
                    for budget in self.chain():
                        budget.reserved += prompt + cap
                    return TokenGrant(self, prompt + cap, cap)
                if not busy:
                    raise TokenLimitError(
                        f"token limit: this llm action's prompt (about {prompt} tokens) does not "
                        f"fit in the {max(0, free)} tokens left of the run's max_tokens; "
                        "shorten the prompt"
                    )
                if self._tree.released is None:
                    self._tree.released = anyio.Event()
                released = self._tree.released
            await released.wait()

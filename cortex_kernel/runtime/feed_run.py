"""A run's side of the context feeds: refresh before each turn, background refresh, declarations.

:class:`RunFeeds` ties the session's :class:`~cortex_kernel.runtime.feeds.FeedRegistry`
to one run: it fetches sources through the run's executors (so a ``tool``
feed runs the same tool an action would), provides the built-in
``system_clock`` and ``run_status`` sources, refreshes ``periodic`` feeds in
the run's task group while the run is active, reports every fetch as a
``feed_updated`` event, and turns ``<context_feed>`` declarations into feeds
when the agent may add them (the permission of ``add_context_feed``). A
declaration is model output: it names its source (a declared one, or
``system_clock`` / ``run_status``) and a source written out is refused
(:meth:`~cortex_kernel.runtime.feeds.FeedRegistry.model_feed`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from anyio.abc import TaskGroup

from ..exceptions import ActionError
from ..protocol.parser_events import ActionErrorEvent, ContextFeed
from .feeds import FeedFetcher, FeedRegistry, feed_spec, source_fetcher
from .nodes import ActionNode
from .ports import ExecutorSet, FeedSlot
from .run_events import FeedUpdated, InternalAudit

__all__: list[str] = []

# Fields of a <context_feed> body that are the feed's settings, not its source.
_SETTINGS = ("ttl", "interval", "max_bytes", "max_tokens", "description")


class RunFeeds:
    """The context feeds as one run sees them (see the module docstring)."""

    def __init__(
        self,
        registry: FeedRegistry | None,
        *,
        emit: Callable[[Any], None],
        clock: Callable[[], float],
        allowed_internal: frozenset[str],
        providers: Mapping[str, Callable[[], Any]],
    ) -> None:
        self.registry = registry
        self.emit = emit
        self.clock = clock
        self.allowed_internal = allowed_internal
        self.providers = {"system_clock": _system_clock, **providers}
        self._fetch: FeedFetcher | None = None

    def start(self, tg: TaskGroup, executors: ExecutorSet) -> None:
        """Make the fetcher and start the background refresh of ``periodic`` feeds."""
        if self.registry is None:
            return
        self._fetch = source_fetcher(executors.execute, executors.check, self.providers)
        tg.start_soon(self.registry.run_periodic, self._fetch, self._report)

    def _report(self, update: FeedUpdated) -> None:
        self.emit(update.model_copy(update={"t": self.clock()}))

    async def refresh(self) -> None:
        """Fetch the feeds due for this turn (their errors stay in their slots)."""
        if self.registry is None or self._fetch is None:
            return
        for update in await self.registry.refresh(self._fetch):
            self._report(update)

    def slots(self) -> list[FeedSlot]:
        """The rendered feeds for the prompt, in a stable order."""
        if self.registry is None:
            return []
        return [FeedSlot(id=i, text=text, error=error) for i, text, error in self.registry.slots()]

    def sources(self) -> list[dict[str, str]]:
        """The named sources model output may choose, for the prompt."""
        if self.registry is None:
            return []
        return [{"name": s.name, "description": s.description} for s in self.registry.sources]

    def declare(self, event: ContextFeed) -> ActionErrorEvent | None:
        """Add (or replace) the feed a ``<context_feed>`` declares; the error event if not."""
        decl = event.feed
        body = dict(decl.source)
        body.pop("id", None)
        settings = {key: body.pop(key) for key in _SETTINGS if key in body}
        nested = body.get("source")
        # {"source": "backlog"} (a name), {"source": {…}}, or the source itself.
        source = nested if isinstance(nested, dict | str) and len(body) == 1 else body
        data = {"id": decl.id, "type": decl.type.value, "source": source, **settings}
        allowed = "add_context_feed" in self.allowed_internal
        message = ""
        refused = False
        if self.registry is None:
            message = "this session has no context feeds"
        elif not allowed:
            message = "add_context_feed is not allowed for this agent (the manifest blocks it)"
        else:
            try:
                resolved = self.registry.model_feed(data)
            except ActionError as exc:  # a source the model wrote: nothing is imported
                message, refused = str(exc), True
            else:
                try:
                    self.registry.add(feed_spec(resolved), replace=True)
                except ActionError as exc:
                    message = str(exc)
        outcome = "blocked" if not allowed or refused else ("error" if message else "ok")
        self.emit(
            InternalAudit(
                t=self.clock(),
                id=decl.id,
                name="context_feed",
                parameters=data,
                allowed=allowed and not refused,
                outcome=outcome,
                message=message,
            )
        )
        if not message:
            return None
        return ActionErrorEvent(
            span=(event.span[1], event.span[1]),
            id=decl.id,
            message=f"context feed '{decl.id}' was not created: {message}",
            raw_body=decl.raw_body,
        )


def _system_clock() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC (%A)")


def run_status(
    turn: int, elapsed: float, tokens: int, nodes: Iterable[ActionNode]
) -> dict[str, Any]:
    """The ``run_status`` source: turn, elapsed seconds, tokens, actions by state."""
    states = Counter(node.state.value for node in nodes)
    return {
        "turn": turn,
        "elapsed": round(elapsed, 1),
        "tokens": tokens,
        "actions": dict(sorted(states.items())),
    }

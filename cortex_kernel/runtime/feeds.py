"""Context feeds (docs/feeds.md): named text the model sees at every turn.

A session holds one :class:`FeedRegistry`. Each feed has a spec
(:class:`~.feed_specs.FeedSpec`: id, type, source, limits) and a slot (its last text or
error, when it was fetched). Before every turn the run refreshes the feeds
that are due — an ``on_demand`` feed whose ``ttl`` ran out, an ``internal``
feed every turn; ``periodic`` feeds are refreshed in the background every
``interval`` seconds while a run is active (:meth:`FeedRegistry.run_periodic`)
and the turn reads their cached value. The prompt gets the slots in id order,
in a message after the conversation, so the system prompt stays cacheable.

Sources (:mod:`.feed_specs`, one class per kind): a built-in source;
a ``tool``, ``llm``, ``relic`` or ``workflow`` run as an action of that
type through the session's executors; a ``callable`` (a Python function,
sync or async, called with the parameters); an ``mcp_resource``.

A failing source puts its error in its slot (the prompt says the feed is
unavailable and why) and the turn goes on.

Who may write a source: the manifest (``context_feeds``, ``feed_sources``),
``%feeds`` and Python code, i.e. the user. Model output (``add_context_feed``,
``update_context_feed``, ``<context_feed>``) only *chooses*: a source declared
by name (:meth:`FeedRegistry.declare_source`, the manifest's
``feed_sources``) or one of :data:`MODEL_BUILTINS`, which read nothing of
the user's. A source the model writes itself (a ``callable``, ``tool``,
``mcp_resource``…: code, a command, a server) is an ``ActionError`` before
anything is imported or run (:meth:`FeedRegistry.model_feed`).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from pydantic import ValidationError

from ..exceptions import ActionError
from ..names import import_target
from ..protocol.models import Action, ActionType
from .feed_specs import (
    FEED_SOURCES,
    CallableFeedSource,
    FeedSourceSpec,
    FeedSpec,
    InternalSource,
    LlmFeedSource,
    McpResourceFeedSource,
    RelicFeedSource,
    ToolFeedSource,
    WorkflowFeedSource,
    validation_message,
)
from .results import render_value
from .run_events import FeedUpdated

__all__ = ["FeedRegistry", "FeedSpec", "feed_spec", "source_fetcher"]

#: Built-in sources model output may name itself: they read nothing of the user's
#: (``notebook_variables`` does: only the user declares it).
MODEL_BUILTINS = ("system_clock", "run_status")
#: The fields of a feed model output may set besides its ``id`` and ``source`` (a name).
MODEL_SETTINGS = ("type", "ttl", "interval", "max_bytes", "max_tokens", "description")
#: The shortest ``interval`` model output may give a ``periodic`` feed, in
#: seconds: a declared source called a thousand times a second is a
#: denial of service the user never asked for (OWASP LLM10).
MODEL_MIN_INTERVAL = 1.0

#: Counts the tokens of a text (the composition root injects litellm's offline counter).
TokenCounter = Callable[[str], int]
#: Fetches a feed's value from its source.
FeedFetcher = Callable[["FeedSpec"], Awaitable[Any]]


def feed_spec(data: Mapping[str, Any]) -> FeedSpec:
    """A :class:`FeedSpec` from plain data; a bad one is an ``ActionError`` naming the field."""
    try:
        return FeedSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise ActionError(f"invalid context feed: {validation_message(exc)}") from None


def truncate(
    text: str, max_bytes: int, max_tokens: int | None = None, count: TokenCounter | None = None
) -> tuple[str, bool]:
    """``text`` cut to ``max_bytes`` (UTF-8) and ``max_tokens``, with a marker saying so."""
    cut = text
    data = cut.encode("utf-8")
    if len(data) > max_bytes:
        cut = data[: max(max_bytes - 60, 0)].decode("utf-8", errors="ignore")
    if max_tokens is not None and count is not None and count(cut) > max_tokens:
        low, high = 0, len(cut)  # the longest prefix within the budget (marker included)
        while low < high:
            middle = (low + high + 1) // 2
            if count(cut[:middle]) + 12 <= max_tokens:
                low = middle
            else:
                high = middle - 1
        cut = cut[:low]
    if cut == text:
        return text, False
    return f"{cut}\n[truncated: {len(text) - len(cut)} more characters]", True


@dataclass
class _Slot:
    spec: FeedSpec
    text: str = ""
    error: str | None = None
    fetched: float | None = None  # monotonic time of the last fetch
    truncated: bool = False
    calls: int = 0
    hits: int = 0
    # Set while a fetch is under way: the turn and the background never both
    # fetch, and a turn that needs a first value waits for the one in flight.
    pending: anyio.Event | None = None


class FeedRegistry:
    """The context feeds of one session.

    Parameters
    ----------
    specs
        Feeds declared up front (the manifest's ``context_feeds``).
    sources
        Named sources model output may choose (the manifest's ``feed_sources``).
    count_tokens
        Token counter for ``max_tokens`` (``None``: only ``max_bytes`` applies).
    clock
        Monotonic seconds (injectable for tests of ``ttl``).
    timeout
        Seconds one fetch may take; a slower source's slot says it timed out.
    """

    def __init__(
        self,
        specs: list[FeedSpec] | tuple[FeedSpec, ...] = (),
        *,
        sources: list[FeedSourceSpec] | tuple[FeedSourceSpec, ...] = (),
        count_tokens: TokenCounter | None = None,
        clock: Callable[[], float] = time.monotonic,
        timeout: float = 30.0,
    ) -> None:
        self._slots: dict[str, _Slot] = {}
        self._sources: dict[str, FeedSourceSpec] = {}
        self.count_tokens = count_tokens
        self.clock = clock
        self.timeout = timeout
        for spec in specs:
            self.add(spec)
        for named in sources:
            self._sources[named.name] = named

    # -- declaring ------------------------------------------------------------

    def __contains__(self, feed_id: object) -> bool:
        return feed_id in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def specs(self) -> list[FeedSpec]:
        """The feeds, in the order the prompt shows them (by id)."""
        return [self._slots[key].spec for key in sorted(self._slots)]

    def add(self, spec: FeedSpec, *, replace: bool = False) -> None:
        """Declare a feed; an existing id is an error unless ``replace``."""
        if spec.id in self._slots and not replace:
            raise ActionError(
                f"context feed '{spec.id}' exists already; use update_context_feed to change it"
            )
        self._slots[spec.id] = _Slot(spec)

    def update(self, feed_id: str, changes: Mapping[str, Any]) -> FeedSpec:
        """Change some fields of a feed (its value is fetched again at the next turn)."""
        slot = self._slot(feed_id)
        spec = feed_spec({**slot.spec.data(), **changes, "id": feed_id})
        self._slots[feed_id] = _Slot(spec)
        return spec

    def remove(self, feed_id: str) -> None:
        """Forget a feed."""
        self._slot(feed_id)
        del self._slots[feed_id]

    # -- what model output may choose ----------------------------------------

    @property
    def sources(self) -> list[FeedSourceSpec]:
        """The named sources model output may choose, by name."""
        return [self._sources[name] for name in sorted(self._sources)]

    def declare_source(self, name: str, source: Mapping[str, Any], description: str = "") -> None:
        """Let model output choose ``source`` by ``name`` (the user's call; replaces one).

        Raises
        ------
        ActionError
            The name or the source is not valid (the message names the field).
        """
        try:
            named = FeedSourceSpec.model_validate(
                {"name": name, "source": dict(source), "description": description}
            )
        except ValidationError as exc:
            raise ActionError(f"invalid feed source: {validation_message(exc)}") from None
        self._sources[name] = named

    def forget_source(self, name: str) -> None:
        """Take a named source away from model output (feeds using it keep it)."""
        if self._sources.pop(name, None) is None:
            known = ", ".join(sorted(self._sources)) or "none"
            raise ActionError(f"no feed source '{name}' (sources: {known})")

    def model_feed(self, data: Mapping[str, Any], *, update: bool = False) -> dict[str, Any]:
        """A feed (or, with ``update``, a change) model output wrote, its source resolved.

        ``source`` may only be the name of a declared source (its declared
        source, parameters included, is what runs), a name of
        :data:`MODEL_BUILTINS`, or ``{"internal": NAME}`` of one; an
        ``internal`` feed whose id is such a name needs none. Besides ``id``
        only :data:`MODEL_SETTINGS` may be set.

        Raises
        ------
        ActionError
            For a source written out (code, a command, a tool, an MCP
            server…), an unknown name or another field; nothing is imported.
        """
        allowed = ("source", *MODEL_SETTINGS) if update else ("id", "source", *MODEL_SETTINGS)
        extra = sorted(str(key) for key in data if key not in allowed)
        if extra:
            raise ActionError(
                f"a context feed from model output may set only {', '.join(allowed)} "
                f"(got {', '.join(extra)})"
            )
        interval = data.get("interval")
        if (
            isinstance(interval, int | float)
            and not isinstance(interval, bool)
            and interval < MODEL_MIN_INTERVAL
        ):
            raise ActionError(
                f"a periodic feed from model output refreshes at most once every "
                f"{MODEL_MIN_INTERVAL:g} s (got interval {interval:g})"
            )
        resolved = dict(data)
        source = resolved.get("source")
        if source is not None and source != {}:
            resolved["source"] = self._model_source(source)
        elif not update:
            feed_id = resolved.get("id")
            if resolved.get("type") != "internal" or feed_id not in MODEL_BUILTINS:
                raise ActionError(self._choices("the feed names no source"))
            resolved["source"] = {"internal": feed_id}
        return resolved

    def _model_source(self, source: Any) -> dict[str, Any]:
        if isinstance(source, str):
            if source in self._sources:
                return self._sources[source].source.data()
            if source in MODEL_BUILTINS:
                return {"internal": source}
            raise ActionError(self._choices(f"no feed source named {source!r}"))
        if (
            isinstance(source, Mapping)
            and list(source) == ["internal"]
            and source["internal"] in MODEL_BUILTINS
        ):
            return {"internal": source["internal"]}
        if isinstance(source, Mapping):
            keys = [str(key) for key in source]
            kind = next((k for k in FEED_SOURCES if k in keys), keys[0] if keys else "empty")
            problem = f"refused: the model wrote a source itself ({kind})"
        else:
            problem = f"a source must be a declared source's name, got {type(source).__name__}"
        raise ActionError(self._choices(problem))

    def _choices(self, problem: str) -> str:
        names = ", ".join(sorted(self._sources)) or "none declared"
        return (
            f"{problem}: model output may only choose a source by name, one the manifest's "
            f"feed_sources or the user (%feeds source) declared ({names}) or a built-in "
            f"({', '.join(MODEL_BUILTINS)}); it never writes code, a command, a tool call "
            "or an MCP server as a source"
        )

    def _slot(self, feed_id: str) -> _Slot:
        slot = self._slots.get(feed_id)
        if slot is None:
            known = ", ".join(sorted(self._slots)) or "none"
            raise ActionError(f"no context feed '{feed_id}' (feeds: {known})")
        return slot

    def describe(self, *, values: bool = False) -> list[dict[str, Any]]:
        """Each feed's spec with its age (seconds), size and error, for ``list_context_feeds``.

        ``values=True`` adds each feed's current ``text`` (what ``%feeds`` shows).
        """
        now = self.clock()
        out: list[dict[str, Any]] = []
        for spec in self.specs:
            slot = self._slots[spec.id]
            row: dict[str, Any] = {
                "id": spec.id,
                "type": spec.type,
                "source": spec.source.data(),
                "age": None if slot.fetched is None else round(now - slot.fetched, 3),
                "chars": len(slot.text),
                "truncated": slot.truncated,
                "error": slot.error,
            }
            if values:
                row["text"] = slot.text
            out.append(row)
        return out

    def stats(self) -> dict[str, dict[str, int]]:
        """Per feed: source calls made and cached reads served."""
        return {key: {"calls": s.calls, "hits": s.hits} for key, s in self._slots.items()}

    # -- fetching -------------------------------------------------------------

    def _due(self, slot: _Slot, now: float) -> bool:
        if slot.fetched is None:
            return True
        spec = slot.spec
        if spec.type == "internal":
            return True
        if spec.type == "periodic":
            return now - slot.fetched >= spec.interval
        return now - slot.fetched >= spec.ttl

    async def _fetch(self, slot: _Slot, fetch: FeedFetcher) -> FeedUpdated:
        spec = slot.spec
        slot.calls += 1
        slot.pending = pending = anyio.Event()
        try:
            with anyio.fail_after(self.timeout):
                value = await fetch(spec)
        except TimeoutError:
            slot.text, slot.truncated = "", False
            slot.error = f"the source took more than {self.timeout:g} s (timed out)"
        except Exception as exc:  # its error goes in its slot; the turn goes on
            slot.text, slot.truncated = "", False
            slot.error = (
                str(exc) if isinstance(exc, ActionError) else f"{type(exc).__name__}: {exc}"
            )
        else:
            text = value if isinstance(value, str) else render_value(value)
            slot.text, slot.truncated = truncate(
                text, spec.max_bytes, spec.max_tokens, self.count_tokens
            )
            slot.error = None
        finally:  # also when cancelled (the run ended): nobody waits forever
            slot.pending = None
            pending.set()
        slot.fetched = self.clock()
        return FeedUpdated(
            t=0.0,
            feed_id=spec.id,
            chars=len(slot.text),
            truncated=slot.truncated,
            error=slot.error,
        )

    async def refresh(self, fetch: FeedFetcher, *, periodic: bool = False) -> list[FeedUpdated]:
        """Fetch the feeds that are due; return a ``feed_updated`` event for each one fetched.

        Turns refresh ``on_demand`` and ``internal`` feeds (and a ``periodic``
        feed never fetched yet); ``periodic=True`` refreshes the due periodic ones.
        """
        now = self.clock()
        updates: list[FeedUpdated] = []
        for spec in self.specs:
            slot = self._slots.get(spec.id)
            is_periodic = spec.type == "periodic"
            if slot is None or (periodic and not is_periodic):
                continue
            if slot.pending is not None:
                if not periodic:
                    if slot.fetched is None:  # the first value is on its way: the turn needs it
                        await slot.pending.wait()
                    slot.hits += 1  # otherwise the turn reads the value it has
                continue
            if not periodic and is_periodic and slot.fetched is not None:
                slot.hits += 1  # the turn reads what the background fetched
                continue
            if self._due(slot, now):
                updates.append(await self._fetch(slot, fetch))
            else:
                slot.hits += 1
        return updates

    async def run_periodic(
        self, fetch: FeedFetcher, report: Callable[[FeedUpdated], None], tick: float = 0.05
    ) -> None:
        """Refresh due ``periodic`` feeds until cancelled (the run's task group cancels it)."""
        while True:
            for update in await self.refresh(fetch, periodic=True):
                report(update)
            await anyio.sleep(self._next_due(tick))

    def _next_due(self, tick: float) -> float:
        now = self.clock()
        waits = [
            0.0 if s.fetched is None else s.spec.interval - (now - s.fetched)
            for s in self._slots.values()
            if s.spec.type == "periodic"
        ]
        # No periodic feed yet: look again now and then (the model may add one).
        return max(tick, min(waits, default=1.0))

    def slots(self) -> list[tuple[str, str, str | None]]:
        """``(id, text, error)`` of every feed, in prompt order."""
        return [(s.id, self._slots[s.id].text, self._slots[s.id].error) for s in self.specs]


async def call_callable(target: str, parameters: Mapping[str, Any]) -> Any:
    """Import ``module:function`` and call it with ``parameters`` (awaiting a coroutine)."""
    obj = import_target(target, error=ActionError)
    if inspect.iscoroutinefunction(obj):
        return await obj(**parameters)
    # A plain function runs in a worker thread, as sync tools do: a slow
    # source never blocks the kernel's loop (a cancelled call is abandoned).
    result = await anyio.to_thread.run_sync(lambda: obj(**parameters), abandon_on_cancel=True)
    if inspect.isawaitable(result):
        result = await result
    return result


def feed_action(spec: FeedSpec) -> Action:
    """The action that fetches a ``tool``, ``llm``, ``relic`` or ``workflow`` source."""
    source = spec.source
    body: dict[str, Any]
    if isinstance(source, LlmFeedSource):
        prompt = source.llm
        body = (
            {"prompt": prompt} if isinstance(prompt, str) else prompt.model_dump(exclude_none=True)
        )
    elif isinstance(source, RelicFeedSource):
        body = {"name": source.relic, "operation": source.operation}
        body["parameters"] = source.parameters
    elif isinstance(source, ToolFeedSource):
        body = {"name": source.tool, "parameters": source.parameters}
    elif isinstance(source, WorkflowFeedSource):
        body = {"name": source.workflow, "parameters": source.parameters}
    else:
        raise ActionError(f"a {source.kind} source is not an action")
    return Action(id=f"feed.{spec.id}", type=ActionType(source.kind), body=body)


def with_message(
    providers: Mapping[str, Callable[..., Any]], message: str
) -> dict[str, Callable[..., Any]]:
    """``providers``, those that take the run's message (``takes_message``) given it.

    The ``notebook_variables`` source lists the variables the user's message
    names first; every other provider is called as it is.
    """
    return {
        name: functools.partial(provider, message=message)
        if getattr(provider, "takes_message", False)
        else provider
        for name, provider in providers.items()
    }


def source_fetcher(
    execute: Callable[[Action, dict[str, Any]], Awaitable[Any]],
    check: Callable[[Action], str | None],
    internal: Mapping[str, Callable[..., Any]],
) -> FeedFetcher:
    """A :data:`FeedFetcher` over a run's executors and its built-in sources.

    A built-in source gets the source's ``parameters`` as keyword arguments
    (``notebook_variables``' ``values``).
    """

    async def fetch(spec: FeedSpec) -> Any:
        source = spec.source
        if isinstance(source, InternalSource):
            provider = internal.get(source.internal)
            if provider is None:
                raise ActionError(
                    f"internal feed '{source.internal}' has no provider here "
                    "(notebook_variables is filled by the Jupyter kernel)"
                )
            return provider(**source.parameters)
        if isinstance(source, McpResourceFeedSource):
            reader = internal.get("mcp_resource")
            if reader is None:
                raise ActionError("this session has no MCP servers to read a resource from")
            resource = source.mcp_resource
            return await reader()(resource.server, resource.uri)
        if isinstance(source, CallableFeedSource):
            return await call_callable(source.callable, source.parameters)
        action = feed_action(spec)
        error = check(action)
        if error is not None:
            raise ActionError(error)
        return await execute(action, action.body)

    return fetch

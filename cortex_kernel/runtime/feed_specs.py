"""What a context feed is (docs/feeds.md): its source, one class per kind, and its settings.

A source is written as a mapping with exactly one kind key, the same in a
manifest, ``%feeds`` and Python code:

- ``{internal: system_clock | run_status | notebook_variables}``
  (:class:`InternalSource`; for ``type: internal`` the feed's id may name
  it instead);
- ``{tool: NAME, parameters: {...}}``, ``{llm: PROMPT}`` (or ``{llm:
  {prompt, model, system}}``), ``{relic: NAME, operation: OP, parameters:
  {...}}``, ``{workflow: NAME, parameters: {...}}``: run as an action of
  that type through the session's executors;
- ``{callable: "module:function", parameters: {...}}``: a Python function;
- ``{mcp_resource: {server: NAME, uri: URI}}``: read from a declared MCP server.

:data:`FeedSource` is their union; :meth:`FeedSourceBase.data` writes one
back as that mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from ..names import NAME_PATTERN, TARGET_PATTERN

__all__ = ["FeedSourceSpec", "FeedSpec"]

#: Feed source kinds run as an action of the same type.
ACTION_SOURCES = ("tool", "llm", "relic", "workflow")
#: Every source kind, as the key that names it.
FEED_SOURCES = ("internal", *ACTION_SOURCES, "callable", "mcp_resource")
#: The built-in sources.
INTERNAL_FEEDS = ("system_clock", "notebook_variables", "run_status")

InternalName = Literal["system_clock", "notebook_variables", "run_status"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FeedSourceBase(_Strict):
    """What every source kind has: its kind, and parameters for what it calls."""

    #: The key that names this kind.
    kind: ClassVar[str] = ""

    parameters: dict[str, Any] = Field(default_factory=dict)

    def data(self) -> dict[str, Any]:
        """The source as it is written (``{"tool": "quote", "parameters": {...}}``), kind first."""
        dumped = self.model_dump(exclude_defaults=True)
        return {self.kind: dumped.pop(self.kind), **dumped}


class InternalSource(FeedSourceBase):
    """A built-in source; ``parameters`` go to it (``notebook_variables``' ``values``)."""

    kind: ClassVar[str] = "internal"

    internal: InternalName


class ToolFeedSource(FeedSourceBase):
    """A tool called with ``parameters``."""

    kind: ClassVar[str] = "tool"

    tool: str


class LlmRequest(_Strict):
    """An ``llm`` source written out: its prompt, and optionally a model and a system prompt."""

    prompt: str
    model: str | None = None
    system: str | None = None


class LlmFeedSource(FeedSourceBase):
    """One completion: ``llm`` is its prompt, or the request written out."""

    kind: ClassVar[str] = "llm"

    llm: str | LlmRequest


class RelicFeedSource(FeedSourceBase):
    """A relic operation called with ``parameters``."""

    kind: ClassVar[str] = "relic"

    relic: str
    operation: str | None = None


class WorkflowFeedSource(FeedSourceBase):
    """A workflow run with ``parameters``."""

    kind: ClassVar[str] = "workflow"

    workflow: str


class CallableFeedSource(FeedSourceBase):
    """A Python function (sync or async), called with ``parameters``."""

    kind: ClassVar[str] = "callable"

    callable: str = Field(pattern=TARGET_PATTERN, description="module:function")


class McpResource(_Strict):
    """A resource of a declared MCP server."""

    server: str
    uri: str


class McpResourceFeedSource(FeedSourceBase):
    """A resource read from a declared MCP server."""

    kind: ClassVar[str] = "mcp_resource"

    mcp_resource: McpResource

    @field_validator("mcp_resource", mode="before")
    @classmethod
    def _server_and_uri(cls, value: Any) -> Any:
        if not (isinstance(value, Mapping) and set(value) == {"server", "uri"}):
            raise ValueError("mcp_resource needs {server: NAME, uri: URI}")
        return value


_KINDS: dict[str, type[FeedSourceBase]] = {
    cls.kind: cls
    for cls in (
        InternalSource,
        ToolFeedSource,
        LlmFeedSource,
        RelicFeedSource,
        WorkflowFeedSource,
        CallableFeedSource,
        McpResourceFeedSource,
    )
}


def _source_kind(value: Any) -> str | None:
    if isinstance(value, FeedSourceBase):
        return value.kind
    if isinstance(value, Mapping):
        kinds = [kind for kind in FEED_SOURCES if kind in value]
        return kinds[0] if len(kinds) == 1 else None
    return None


#: A feed source of any kind; the one kind key it has says which.
FeedSource = Annotated[
    Annotated[InternalSource, Tag("internal")]
    | Annotated[ToolFeedSource, Tag("tool")]
    | Annotated[LlmFeedSource, Tag("llm")]
    | Annotated[RelicFeedSource, Tag("relic")]
    | Annotated[WorkflowFeedSource, Tag("workflow")]
    | Annotated[CallableFeedSource, Tag("callable")]
    | Annotated[McpResourceFeedSource, Tag("mcp_resource")],
    Discriminator(
        _source_kind,
        custom_error_type="feed_source",
        custom_error_message=f"a source has exactly one of {', '.join(FEED_SOURCES)}",
    ),
]


class FeedSpec(_Strict):
    """A context feed: where its text comes from, how often, and how much of it.

    An ``internal`` feed whose id names a built-in source (``system_clock``,
    ``run_status``, ``notebook_variables``) needs no ``source``.
    """

    id: str = Field(pattern=NAME_PATTERN)
    type: Literal["on_demand", "periodic", "internal"] = "on_demand"
    source: FeedSource
    ttl: float = Field(default=0.0, ge=0, description="on_demand: seconds a value is reused")
    interval: float = Field(default=30.0, gt=0, description="periodic: seconds between fetches")
    max_bytes: int = Field(default=4000, ge=64)
    max_tokens: int | None = Field(default=None, ge=1)
    description: str = ""

    @model_validator(mode="before")
    @classmethod
    def _named_internal(cls, data: Any) -> Any:
        # `{id: system_clock, type: internal}`: the id is the built-in source.
        if (
            isinstance(data, Mapping)
            and not data.get("source")
            and data.get("type") == "internal"
            and data.get("id") in INTERNAL_FEEDS
        ):
            return {**data, "source": {"internal": data["id"]}}
        return data

    @property
    def kind(self) -> str:
        """The source kind (``internal``, ``tool``, ``callable``…)."""
        return self.source.kind

    def data(self) -> dict[str, Any]:
        """The feed as it is written (its source as a mapping)."""
        return {**self.model_dump(exclude={"source"}), "source": self.source.data()}


class FeedSourceSpec(_Strict):
    """A named feed source: one that model output may choose, by its name.

    A feed the model declares (``add_context_feed``, ``update_context_feed``,
    ``<context_feed>``) names one of these (or a harmless built-in,
    ``system_clock`` or ``run_status``); it can never write a source itself,
    so what runs is always what the manifest or the user declared. ``source``
    is written as a feed's (``{callable: …}``, ``{tool: …, parameters: …}``…).
    """

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    source: FeedSource


def validation_message(exc: ValidationError) -> str:
    """The first problem of ``exc``, as ``field: message``."""
    first = exc.errors(include_url=False)[0]
    where = "".join(f"{part}: " for part in first["loc"])
    return where + str(first["msg"]).removeprefix("Value error, ")

"""An agent in a manifest, and a file of several agents.

:class:`AgentManifest` is one agent: its model, instructions and tools, and
what it may do — sub-agents, relics, workflows, context feeds, internal
actions, limits. The parts the runtime and executors run are their own
types (:class:`~cortex_kernel.runtime.limits.Limits`,
:data:`~cortex_kernel.executors.relic_spec.RelicSpec`,
:class:`~cortex_kernel.executors.workflow.WorkflowSpec`,
:class:`~cortex_kernel.runtime.feed_specs.FeedSpec`…): the file is parsed
straight into them, and the composition root hands them over.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..executors.relic_spec import RelicSpec
from ..executors.workflow import WorkflowSpec
from ..model_options import ProtocolName
from ..names import NAME_PATTERN
from ..runtime.feed_specs import FeedSourceSpec, FeedSpec
from ..runtime.limits import Limits
from .fields import Strict
from .mcp import McpServerSpec
from .models import ListedModel, ModelSpec
from .tools import Approvals, Builtins, ExecutorSettings, ExecutorSpec, ToolSpec

__all__ = ["AgentManifest", "InternalAction", "ManifestFile", "SubAgent", "default_agent"]


class SubAgent(Strict):
    """Another agent this one may call with an ``agent`` action."""

    name: str = Field(pattern=NAME_PATTERN)
    manifest: str | None = Field(default=None, description="path; none: same file")
    description: str = ""


InternalAction = Literal[
    "set_variable",
    "delete_variable",
    "list_variables",
    "add_context_feed",
    "remove_context_feed",
    "update_context_feed",
    "list_context_feeds",
    "clear_context",
]


def _default_internal() -> list[InternalAction]:
    # docs/feeds.md#internal-actions: reading feeds and setting variables; the rest must be granted.
    return ["set_variable", "list_context_feeds", "list_variables"]


class AgentManifest(Strict):
    """One agent: model, instructions, tools and what it may do.

    Sub-agents, relics, workflows and context feeds are checked here and run
    by the executors the composition root installs.
    """

    name: str = Field(default="cortex", pattern=NAME_PATTERN)
    description: str = ""
    model: ModelSpec = ModelSpec()
    instructions: str = ""
    protocol: ProtocolName = "xml"
    tools: list[ToolSpec] = Field(default_factory=list)
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    builtins: Builtins = Builtins()
    confirm: Approvals = Approvals()
    approvals: Literal["ask", "auto", "bypass", "deny"] | None = Field(
        default=None,
        description="how requests for approval (confirm: true calls, the in-kernel python) are "
        "decided from the start: ask (each time), auto (approve, but ask before code that "
        "writes into the user's objects), bypass (approve all), deny (refuse all); unset: "
        "ask. %approvals in a notebook and --yes on the command line override it; auto and "
        "bypass let an unattended run (papermill) approve",
    )
    sub_agents: list[SubAgent] = Field(default_factory=list)
    relics: list[RelicSpec] = Field(default_factory=list)
    workflows: list[WorkflowSpec] = Field(default_factory=list)
    context_feeds: list[FeedSpec] = Field(default_factory=list)
    feed_sources: list[FeedSourceSpec] = Field(
        default_factory=list,
        description="named sources a feed the model declares may use (by name; model output "
        "never writes a source itself)",
    )
    internal_actions: list[InternalAction] = Field(default_factory=_default_internal)
    read_notebook: bool = Field(
        default=False,
        description="let $name in model output read the notebook's own variables (off: only "
        "values agent actions produced)",
    )
    llm_models: list[ListedModel] = Field(
        default_factory=list,
        description="models an llm action may name besides the agent's own: a model string, "
        "or a table like model's with its own options ({name, api_base, temperature, …})",
    )
    limits: Limits = Limits()
    executor: ExecutorSpec = Field(
        default=ExecutorSpec(),
        description="where Python tools run by default: local, or dask ({kind: dask, address})",
    )
    executors: ExecutorSettings = ExecutorSettings()

    @field_validator("model", mode="before")
    @classmethod
    def _model_string(cls, value: Any) -> Any:
        # `model: openai/gpt-4o` is the common case; the mapping form adds options.
        return {"name": value} if isinstance(value, str) else value

    @field_validator("llm_models", mode="before")
    @classmethod
    def _llm_model_strings(cls, value: Any) -> Any:
        # As `model:`: a string is short for a table with only its name.
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="after")
    def _unique_llm_models(self) -> AgentManifest:
        names = [listed.name for listed in self.llm_models]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise ValueError(
                    f"llm_models[{index}]: '{name}' is listed twice; each model once, "
                    "with its options"
                )
        return self

    @field_validator("executor", mode="before")
    @classmethod
    def _executor_string(cls, value: Any) -> Any:
        # `executor: dask` is short for `executor: {kind: dask}`.
        return {"kind": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _unique_tools(self) -> AgentManifest:
        seen: dict[str, int] = {}
        for index, spec in enumerate(self.tools):
            if spec.name in seen:
                raise ValueError(
                    f"tool name '{spec.name}' is used by tools[{seen[spec.name]}] and "
                    f"tools[{index}]; tool names must be unique"
                )
            seen[spec.name] = index
        servers = [server.name for server in self.mcp_servers]
        repeated = sorted({n for n in servers if servers.count(n) > 1})
        if repeated:
            raise ValueError(f"MCP server names must be unique; repeated: {', '.join(repeated)}")
        relics = [relic.name for relic in self.relics]
        repeated = sorted({n for n in relics if relics.count(n) > 1})
        if repeated:
            raise ValueError(f"relic names must be unique; repeated: {', '.join(repeated)}")
        sources = [source.name for source in self.feed_sources]
        repeated = sorted({n for n in sources if sources.count(n) > 1})
        if repeated:
            raise ValueError(f"feed source names must be unique; repeated: {', '.join(repeated)}")
        return self


class ManifestFile(Strict):
    """A file with several agents; ``default`` names the one used unless chosen."""

    agents: list[AgentManifest] = Field(min_length=1)
    default: str | None = None

    @model_validator(mode="after")
    def _names(self) -> ManifestFile:
        names = [agent.name for agent in self.agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(duplicates)}")
        if self.default is not None and self.default not in names:
            raise ValueError(
                f"default agent '{self.default}' is not defined; agents: {', '.join(names)}"
            )
        return self


def default_agent(notebook_python: bool = False) -> AgentManifest:
    """The built-in agent used when no manifest is given.

    Parameters
    ----------
    notebook_python
        Give it the ``python`` built-in in the notebook's own namespace
        (``in_kernel``), each call approved first (``confirm: true``): the
        kernel and ``%%agent`` do, so the agent works on the user's data out
        of the box. Otherwise it has no tools beyond ``@tool``.
    """
    if not notebook_python:
        return AgentManifest()
    return AgentManifest.model_validate(
        {"builtins": {"python": {"enabled": True, "in_kernel": True, "confirm": True}}}
    )

"""The runtime: eager DAG scheduler, agent loop, session, variables, transcripts.

Its ports (:mod:`.ports`: model, prompt, executor, model resolver) are every
interface it needs from outside; :func:`cortex_kernel.agent.build_session`
plugs the adapters in. Public names are re-exported here, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .limits import Limits
    from .loop import Run
    from .ports import (
        Completion,
        CompletionRequest,
        ExecutionContext,
        Executor,
        ExecutorSet,
        FeedSlot,
        Message,
        Model,
        ModelResolver,
        PromptBuilder,
        PromptContext,
        ProtocolName,
        SessionConfig,
        ToolCall,
        protocol_named,
    )
    from .run_context import RunContext
    from .run_events import AnyEvent, RunStatus, RuntimeEvent, Usage, parse_event
    from .run_result import RunResult
    from .scheduler import Scheduler
    from .session import Session
    from .tools import Tool, ToolRegistry, tool
    from .variables import VariableStore

__all__ = [
    "AnyEvent",
    "Completion",
    "CompletionRequest",
    "ExecutionContext",
    "Executor",
    "ExecutorSet",
    "FeedSlot",
    "Limits",
    "Message",
    "Model",
    "ModelResolver",
    "PromptBuilder",
    "PromptContext",
    "ProtocolName",
    "Run",
    "RunContext",
    "RunResult",
    "RunStatus",
    "RuntimeEvent",
    "Scheduler",
    "Session",
    "SessionConfig",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "Usage",
    "VariableStore",
    "parse_event",
    "protocol_named",
    "tool",
]

_LAZY: dict[str, str] = {
    "Completion": ".ports",
    "CompletionRequest": ".ports",
    "ExecutionContext": ".ports",
    "Executor": ".ports",
    "ExecutorSet": ".ports",
    "FeedSlot": ".ports",
    "Message": ".ports",
    "Model": ".ports",
    "ModelResolver": ".ports",
    "PromptBuilder": ".ports",
    "PromptContext": ".ports",
    "ProtocolName": ".ports",
    "SessionConfig": ".ports",
    "ToolCall": ".ports",
    "protocol_named": ".ports",
    "Session": ".session",
    "Run": ".loop",
    "RunContext": ".run_context",
    "RunResult": ".run_result",
    "Limits": ".limits",
    "Tool": ".tools",
    "ToolRegistry": ".tools",
    "tool": ".tools",
    "AnyEvent": ".run_events",
    "RunStatus": ".run_events",
    "RuntimeEvent": ".run_events",
    "Usage": ".run_events",
    "parse_event": ".run_events",
    "Scheduler": ".scheduler",
    "VariableStore": ".variables",
}


# PEP 562: each name is imported from its module on first use, so importing
# the package (the kernel does at start) costs nothing.
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)

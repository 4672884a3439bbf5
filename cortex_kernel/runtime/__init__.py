"""The runtime: eager DAG scheduler, agent loop, session, variables, transcripts.

Its ports (:mod:`.ports`: model, prompt, executor, model resolver) are every
interface it needs from outside; :func:`cortex_kernel.agent.build_session`
plugs the adapters in. Public names are re-exported here, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:  # what type checkers see ("X as X": re-exported)
    from .limits import Limits as Limits
    from .loop import Run as Run
    from .ports import Completion as Completion
    from .ports import CompletionRequest as CompletionRequest
    from .ports import ExecutionContext as ExecutionContext
    from .ports import Executor as Executor
    from .ports import ExecutorSet as ExecutorSet
    from .ports import FeedSlot as FeedSlot
    from .ports import Message as Message
    from .ports import Model as Model
    from .ports import ModelResolver as ModelResolver
    from .ports import PromptBuilder as PromptBuilder
    from .ports import PromptContext as PromptContext
    from .ports import ProtocolName as ProtocolName
    from .ports import SessionConfig as SessionConfig
    from .ports import ToolCall as ToolCall
    from .ports import protocol_named as protocol_named
    from .run_context import RunContext as RunContext
    from .run_events import AnyEvent as AnyEvent
    from .run_events import RunStatus as RunStatus
    from .run_events import RuntimeEvent as RuntimeEvent
    from .run_events import Usage as Usage
    from .run_events import parse_event as parse_event
    from .run_result import RunResult as RunResult
    from .scheduler import Scheduler as Scheduler
    from .session import Session as Session
    from .tools import Tool as Tool
    from .tools import ToolRegistry as ToolRegistry
    from .tools import tool as tool
    from .variables import VariableStore as VariableStore

# At run time: each public name -> its module, imported on first use (PEP 562),
# so importing the package (or a light module of it: ``@tool``) costs nothing.
# tests/test_public_api.py checks that this and the block above name the same.
_EXPORTS = {
    "Limits": ".limits",
    "Run": ".loop",
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
    "RunContext": ".run_context",
    "AnyEvent": ".run_events",
    "RunStatus": ".run_events",
    "RuntimeEvent": ".run_events",
    "Usage": ".run_events",
    "parse_event": ".run_events",
    "RunResult": ".run_result",
    "Scheduler": ".scheduler",
    "Session": ".session",
    "Tool": ".tools",
    "ToolRegistry": ".tools",
    "tool": ".tools",
    "VariableStore": ".variables",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

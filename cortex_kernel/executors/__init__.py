"""The executors: one module per action type, plugged into the runtime's ``Executor`` port.

:func:`default_executors` is what :func:`cortex_kernel.agent.build_session`
installs: ``tool``, ``llm`` and ``internal`` actions.
"""

from __future__ import annotations

from ..protocol.models import ActionType
from ..runtime.ports import Executor
from .internal import DEFAULT_INTERNAL_ACTIONS, INTERNAL_ACTIONS, InternalExecutor
from .llm_call import LLMExecutor
from .relic import RelicExecutor, RelicRegistry, RelicStatus
from .relic_base import RelicPlace
from .relic_python import SqliteStore
from .tool import ToolExecutor

__all__ = [
    "DEFAULT_INTERNAL_ACTIONS",
    "INTERNAL_ACTIONS",
    "InternalExecutor",
    "LLMExecutor",
    "RelicExecutor",
    "RelicPlace",
    "RelicRegistry",
    "RelicStatus",
    "SqliteStore",
    "ToolExecutor",
    "default_executors",
]


def default_executors() -> dict[ActionType, Executor]:
    """A fresh executor for each action type this version runs."""
    return {
        ActionType.TOOL: ToolExecutor(),
        ActionType.LLM: LLMExecutor(),
        ActionType.INTERNAL: InternalExecutor(),
    }

"""The runtime alone: a session, its loop and scheduler, with fakes at every port.

No composition root, no executor or model adapter of the package: a scripted
:class:`~cortex_kernel.runtime.ports.Model`, a :class:`PromptBuilder` that
records what it was asked to show, and an :class:`Executor` that adds
numbers. What these tests see is the runtime's own behaviour: results fed
back to the model, ``$var`` answers, errors that keep the run going, limits,
the order of events — and, in a fresh interpreter, that running needs no
module above the runtime.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.protocol.models import Action, ActionType
from cortex_kernel.runtime.limits import Limits
from cortex_kernel.runtime.ports import (
    ExecutionContext,
    Executor,
    PromptContext,
    SessionConfig,
)
from cortex_kernel.runtime.session import Session

from .fakes import ScriptedModel

pytestmark = pytest.mark.anyio


class Adder(Executor):
    """``tool`` actions: ``add`` sums its values, ``boom`` raises, any other name is refused."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def check(self, action: Action, context: ExecutionContext) -> str | None:
        name = action.body.get("name")
        return None if name in ("add", "boom") else f"unknown tool {name!r}"

    async def execute(self, action: Action, body: dict[str, Any], context: ExecutionContext) -> Any:
        self.bodies.append(body)
        if body["name"] == "boom":
            raise ValueError("exploded")
        return sum(body["parameters"]["values"])


class Prompt:
    """A prompt builder that says one line and keeps every context it was given."""

    def __init__(self) -> None:
        self.contexts: list[PromptContext] = []

    def system_prompt(self, context: PromptContext) -> str:
        self.contexts.append(context)
        return "You are a test."

    def feeds_message(self, context: PromptContext) -> str:
        return ""


def tool(action_id: str, name: str, mode: str = "sync", extra: str = "", **parameters: Any) -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    return f'<action type="tool" mode="{mode}" id="{action_id}" {extra}>{body}</action>'


def session(model: ScriptedModel, tmp_path: Path, **config: Any) -> tuple[Session, Adder, Prompt]:
    adder, prompt = Adder(), Prompt()
    settings = SessionConfig(
        model=model,
        prompt=prompt,
        executors={ActionType.TOOL: adder},
        transcript_dir=tmp_path,
        **config,
    )
    return Session(settings), adder, prompt


async def test_a_result_goes_back_to_the_model_and_fills_the_answer(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            "<thought>add them</thought>"
            + tool("s", "add", extra='output_key="total"', values=[1, 2, 3]),
            "<response>The total is $total</response>",
        ]
    )
    s, adder, prompt = session(model, tmp_path)
    result = await s.run("add 1, 2 and 3")
    assert (result.status, result.answer) == ("ok", "The total is 6")
    assert adder.bodies == [{"name": "add", "parameters": {"values": [1, 2, 3]}}]
    # The second turn opens with the first's result; the prompt came from our builder.
    second = model.requests[1].messages
    assert second[0] == {"role": "system", "content": "You are a test."}
    assert 'id="s"' in second[-1]["content"] and "6" in second[-1]["content"]
    assert len(prompt.contexts) == 2 and prompt.contexts[0].agent_name == "cortex"
    assert s.variables["total"] == 6
    # The order of what happened, as the events tell it.
    kinds = [e.type for e in result.events if e.type != "thought_delta"]
    order = [
        "run_started",
        "turn_started",
        "action_parsed",
        "action_queued",
        "turn_ended",  # a sync action ends its turn at its closing tag, then runs
        "action_started",
        "action_succeeded",
        "variable_bound",
        "turn_started",
        "response_start",
        "turn_ended",
        "run_finished",
    ]
    remaining = iter(kinds)
    assert all(kind in remaining for kind in order), " ".join(kinds)  # in order, others between
    await s.aclose()


async def test_failures_and_refusals_are_told_to_the_model_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    first = (
        tool("b", "boom", mode="async")
        + tool("n", "nope", mode="async")
        + '<action type="relic" mode="async" id="r">{"name": "db", "operation": "get"}</action>'
        + tool("w", "add", values=[1])
    )
    model = ScriptedModel([first, "<response>handled</response>"])
    s, adder, _ = session(model, tmp_path)
    result = await s.run("go")
    assert (result.status, result.answer) == ("ok", "handled")
    failed = {e.id: e.error for e in result.events if e.type == "action_failed"}  # type: ignore[union-attr]
    assert failed == {"b": "ValueError: exploded"}
    refused = {e.id: e.message for e in result.events if e.type == "action_error"}  # type: ignore[union-attr]
    assert refused["n"] == "unknown tool 'nope'"
    assert "relic actions are not available" in refused["r"]
    assert [body["name"] for body in adder.bodies] == ["boom", "add"]  # refused ones never ran
    told = model.requests[1].messages[-1]["content"]
    assert "exploded" in told and "unknown tool 'nope'" in told and "relic actions" in told
    await s.aclose()


async def test_a_limit_ends_the_run_with_status_limit(tmp_path: Path) -> None:
    model = ScriptedModel(
        [tool(f"a{i}", "add", mode="async", values=[i]) for i in range(3)]
        + ["<response>never</response>"]
    )
    s, _, _ = session(model, tmp_path, limits=Limits(max_turns=2))
    result = await s.run("loop")
    assert result.status == "limit" and "max_turns" in result.message
    assert len(model.requests) == 2 and result.answer == ""
    await s.aclose()


RUN_ALONE = """
import sys, anyio
sys.path.insert(0, {root!r})
from tests.runtime.test_runtime_alone import ScriptedModel, session, tool
from pathlib import Path

async def main():
    model = ScriptedModel([tool("s", "add", values=[2, 3]), "<response>$s</response>"])
    s, _, _ = session(model, Path({folder!r}))
    result = await s.run("go")
    await s.aclose()
    return result.answer

assert anyio.run(main) == "5"
above = sorted(
    name for name in sys.modules
    if name.startswith(("cortex_kernel.agent", "cortex_kernel.executors", "cortex_kernel.llm",
                        "cortex_kernel.toolset", "cortex_kernel.jupyter", "litellm"))
)
print(above)
"""


def test_running_needs_nothing_above_the_runtime(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[2])
    code = RUN_ALONE.format(root=root, folder=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

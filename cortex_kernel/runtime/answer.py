"""The final answer: its ``$var``s filled in, and its figures checked against what the run saw.

A reference in the answer whose action failed, was skipped or never ran
cannot be filled. Left as ``$name`` it reads like a price, or like LaTeX to
a notebook's math renderer; so it becomes ``⟨name: failed⟩`` and the run's
status says the answer is incomplete (docs/runtime.md#events, ``run_finished``).
:func:`ground_answer` gathers the evidence the grounding check
(:mod:`.grounding`) compares the answer's figures with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..exceptions import VariableReferenceError
from .grounding import Evidence, GroundingReport, check
from .nodes import ActionNode, NodeState
from .ports import FeedSlot, Message
from .references import find_references, interpolate_text, path_text, resolve_path

__all__: list[str] = []


def read_id_paths(
    text: str, output_keys: Mapping[str, str], lookup: Callable[[str], Any]
) -> tuple[str, list[tuple[str, str]]]:
    """``$a1.total`` read as ``$total``, where action ``a1`` keeps its result in ``total``.

    A model that gave an action both an id and an ``output_key`` wrote the
    two joined (``$to_fahrenheit_result.fahrenheit`` for a number): read so
    only when the action's value has no such field. Returns the text and
    each reference read so, as written and as read.
    """
    read: list[tuple[str, str]] = []
    out: list[str] = []
    at = 0
    for ref in find_references(text):
        key = output_keys.get(ref.name)
        if key is None or not ref.path or ref.path[0] != key:
            continue
        try:
            value = lookup(ref.name)
            resolve_path(value, ref.path[:1])
        except KeyError:
            continue
        except VariableReferenceError:
            rest = path_text(ref.path[1:])
            out += [text[at : ref.start], f"${key}{rest}"]
            at = ref.end
            read.append((ref.text, f"${key}{rest}"))
    return "".join(out) + text[at:], read


class Placeholder:
    """What an unresolved reference shows: ``⟨name: reason⟩``.

    A path after the name (``$rows[0].city``) leads to the same placeholder.
    """

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def __str__(self) -> str:
        return f"⟨{self.name}: {self.reason}⟩"

    def __getattr__(self, _name: str) -> Placeholder:
        return self

    def __getitem__(self, _key: Any) -> Placeholder:
        return self


def fill_answer(
    text: str, lookup: Callable[[str], Any], why: Callable[[str], str]
) -> tuple[str, list[str]]:
    """Fill the references of ``text``; return it and the unresolved ones.

    Parameters
    ----------
    text
        The final response as the model wrote it.
    lookup
        A variable's value by name; raises ``KeyError`` when nothing has it.
    why
        Why ``name`` has no value (``failed``, ``skipped``, ``never set``…).

    Returns
    -------
    tuple[str, list[str]]
        The answer, and ``"$name (reason)"`` for each reference left as a
        placeholder or as written (a path its variable does not have).
    """
    missing: list[str] = []

    def lenient(name: str) -> Any:
        try:
            return lookup(name)
        except KeyError:
            reason = why(name)
            missing.append(f"${name} ({reason})")
            return Placeholder(name, reason)

    # A path the variable does not have (``$t.fahrenheit`` of a number) is
    # left as written, and unresolved all the same.
    return interpolate_text(text, lenient, missing), missing


def ground_answer(
    answer: str,
    written: str,
    lookup: Callable[[str], Any],
    *,
    nodes: Iterable[ActionNode],
    feeds: Iterable[FeedSlot],
    prior: Iterable[Message],
    message: str,
) -> GroundingReport:
    """Check the figures of ``answer`` against what the run saw.

    Parameters
    ----------
    answer
        The final answer, its references filled in.
    written
        The answer as the model wrote it, and ``lookup``, how its ``$var``s
        were looked up: the values they came from are evidence.
    nodes
        The run's actions: the results of those that succeeded are the operands.
    feeds
        The context feeds the model was shown (values, not data it looked at).
    prior
        The conversation of earlier runs.
    message
        The user's message.
    """
    nodes = list(nodes)
    evidence = Evidence()
    for node in nodes:  # the run's own results first: they are the operands
        if node.state is NodeState.SUCCEEDED:
            evidence.add(node.result, source=node.id)
            if node.shown is not None:  # what the model read of it
                evidence.add(node.shown, source=node.id)
    evidence.add_references(written, lookup)
    for slot in feeds:
        if slot.text:
            evidence.add(slot.text, source=f"context feed {slot.id}", data=False)
    for earlier in prior:
        _add_earlier(evidence, earlier)
    evidence.add_message(message)
    failed = any(node.state in (NodeState.FAILED, NodeState.REJECTED) for node in nodes)
    return check(answer, evidence, lookups_failed=failed)


def _add_earlier(evidence: Evidence, message: Message) -> None:
    """Add an earlier run's message: its results are data, the user's words are not.

    The assistant's earlier answers are left out: a figure invented once
    must not ground itself the next time.
    """
    content = message.get("content")
    if not isinstance(content, str):
        return
    role = message.get("role")
    if role == "tool" or (role == "user" and "<action_result" in content):
        evidence.add(content, source="an earlier result")
    elif role == "user":
        evidence.add(content, source="an earlier message", data=False)

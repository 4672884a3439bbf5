"""How action results are shown: previews for events, ``<action_result>`` for the model.

Quoting
-------
Tool output is data, never protocol (docs/runtime.md#security-defaults). The body of an
``<action_result>`` is escaped like XML text — ``&`` as ``&amp;``, ``<`` as
``&lt;``, ``>`` as ``&gt;`` — so a result that contains ``</action_result>``
or ``<action …>`` can never close the block or be read as a new element,
whatever the parser or the model make of it. The escaping is the familiar
one models already read fluently, and it is reversible (:func:`unquote`).
Attribute values (the id, the status) are escaped the same way plus ``"``.

Long results are cut to ``limit`` characters *before* quoting, with a note
naming the variable that keeps the full value.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

from ..safejson import escape_surrogates, safe_dumps

__all__: list[str] = []

ResultStatus = Literal["ok", "error", "skipped", "cancelled"]


@dataclass(frozen=True, slots=True)
class Shown:
    """A result whose value is bound while the model and the views read ``text``.

    The in-kernel ``python`` tool returns one: ``output_key`` then binds
    the Series the code computed, not the text that describes it (its
    stdout, the value's repr and what the code changed).
    """

    value: Any
    text: str


def render_value(value: Any) -> str:
    """The text form of a result: strings as they are, everything else as JSON.

    Never raises: surrogates (undecodable file names) are escaped, values
    whose ``str`` raises become ``<unprintable T: Exc>`` markers.
    """
    if isinstance(value, str):
        return escape_surrogates(value)
    return safe_dumps(value)


# Frames from these places are the machinery around a tool, not the tool:
# this package (scheduler, executors, registry), anyio, asyncio's and the
# thread pool's frames.
_MACHINERY: tuple[str, ...] = (
    str(Path(__file__).resolve().parents[1]),
    str(Path(anyio.__file__).resolve().parent),
    str(Path(asyncio.__file__).resolve().parent),
    str(Path(concurrent.futures.__file__).resolve().parent),
    str(Path(threading.__file__).resolve()),
)


def own_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` with the runtime's frames trimmed ("" when none remain).

    What a user debugging a failing tool needs: the tool's own frames (a
    notebook cell, a module of theirs) and the exception line, without the
    scheduler, executors, anyio or thread-pool frames around the call.
    """
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not str(Path(frame.filename).resolve()).startswith(_MACHINERY)
    ]
    if not frames:
        return ""
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip("\n")


def preview(value: Any, limit: int = 200) -> str:
    """A short one-line text form of ``value`` for events and the live view.

    A cut preview ends with a marker saying how much was left out
    (``… [+9800 chars]``); the full value stays in the action's variable.
    """
    text = render_value(value)
    text = " ".join(text.split()) if "\n" in text or "\t" in text else text
    if len(text) <= limit:
        return text
    marker = f"… [+{len(text) - limit} chars]"
    keep = max(limit - len(marker), 0)
    return text[:keep] + f"… [+{len(text) - keep} chars]"


def quote(text: str) -> str:
    """Escape ``text`` so it cannot be read as protocol markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unquote(text: str) -> str:
    """Undo :func:`quote`."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def format_result(
    action_id: str,
    status: ResultStatus,
    content: Any,
    *,
    limit: int = 4000,
    variables: tuple[str, ...] = (),
) -> str:
    """One ``<action_result id="…" status="…">…</action_result>`` block.

    Parameters
    ----------
    action_id, status
        Which action and how it ended.
    content
        The result (ok) or the error / reason text.
    limit
        Characters of content kept; longer content is truncated with a note.
    variables
        Names that hold the full value (``$a1``, the ``output_key``), for the note.
    """
    text = render_value(content)
    if len(text) > limit:
        where = " or ".join(f"${name}" for name in variables) or "its variable"
        text = (
            text[:limit]
            + f"\n[truncated: {len(text) - limit} more characters; the full value is in {where}]"
        )
    attr_id = quote(action_id).replace('"', "&quot;")
    return f'<action_result id="{attr_id}" status="{status}">{quote(text)}</action_result>'


# Per result, less than this is not worth showing: the block says "omitted" instead.
_MIN_SHARE = 80


def _overhead(action_id: str, status: ResultStatus, names: tuple[str, ...]) -> int:
    """Characters of a block around its content, truncation note included."""
    where = " or ".join(f"${name}" for name in names) or "its variable"
    note = f"\n[truncated: 1000000 more characters; the full value is in {where}]"
    return len(format_result(action_id, status, "")) + len(note) + 1


def fit_results(
    items: Sequence[tuple[str, ResultStatus, Any, tuple[str, ...]]],
    *,
    limit: int,
    budget: int,
) -> list[str]:
    """The ``<action_result>`` blocks of one turn, about ``budget`` characters in all.

    Each result is first cut to ``limit`` characters (:func:`format_result`).
    When the whole still exceeds ``budget``, every result keeps its block
    (id and status: what the model most needs) and the room left is shared
    fairly — short results whole, long ones cut to an equal share — so a
    fan-out of 200 tools cannot make a prompt of a million characters. Results
    whose share is too small to be useful say "omitted". A last note says
    what was cut and where the full values are.

    Parameters
    ----------
    items
        ``(action_id, status, content, variables)`` per settled action.
    limit
        Characters of one result.
    budget
        Characters of all the blocks together.
    """
    return fit_turn_results((), items, limit=limit, budget=budget)[1]


#: A native tool call's result: ``(call_id, text, variables)``.
ToolResult = tuple[str, str, tuple[str, ...]]


def fit_turn_results(
    tool_results: Sequence[ToolResult],
    items: Sequence[tuple[str, ResultStatus, Any, tuple[str, ...]]],
    *,
    limit: int,
    budget: int,
) -> tuple[list[str], list[str]]:
    """All the results that open a turn, in one budget: tool messages and blocks.

    With native function calling the results of the model's calls go back
    as ``tool`` messages, the others as ``<action_result>`` blocks; both
    share ``budget`` (as :func:`fit_results` describes), so 200 parallel
    tool calls cannot flood the prompt either.

    Parameters
    ----------
    tool_results
        ``(call_id, text, variables)`` per native tool call.
    items, limit, budget
        As for :func:`fit_results`.

    Returns
    -------
    tuple
        The quoted content of each tool message (in order) and the blocks,
        the note on what was cut last.
    """
    texts = [text for _, text, _ in tool_results] + [
        render_value(content) for _, _, content, _ in items
    ]
    sizes = [min(len(text), limit) for text in texts]
    overhead = sum(_tool_overhead(call_id, names) for call_id, _, names in tool_results)
    overhead += sum(_overhead(action_id, status, names) for action_id, status, _, names in items)
    cut = sum(sizes) + overhead > budget
    shares = _fair_shares(sizes, max(0, budget - overhead)) if cut else sizes
    shortened = omitted = 0
    contents: list[str] = []
    blocks: list[str] = []
    everything = [(names, None) for _, _, names in tool_results] + [
        (names, (action_id, status)) for action_id, status, _, names in items
    ]
    for (names, block), text, share in zip(everything, texts, shares, strict=True):
        where = " or ".join(f"${name}" for name in names) or "its variable"
        if cut and share < len(text) and share < _MIN_SHARE:
            omitted += 1
            kept = f"[omitted to fit this turn's result budget; the value is in {where}]"
        else:
            if cut and share < len(text):
                shortened += 1
            kept = _cut(text, share if cut else limit, where)
        if block is None:
            contents.append(quote(kept))
        else:
            action_id, status = block
            blocks.append(format_result(action_id, status, kept, limit=len(kept)))
    if cut:
        blocks.append(
            f"[results cut to fit this turn's budget of about {budget // 4} tokens: "
            f"{shortened} shortened, {omitted} omitted; every full value stays in its $variable]"
        )
    return contents, blocks


def _cut(text: str, keep: int, where: str) -> str:
    if len(text) <= keep:
        return text
    return (
        text[:keep]
        + f"\n[truncated: {len(text) - keep} more characters; the full value is in {where}]"
    )


def _tool_overhead(call_id: str, names: tuple[str, ...]) -> int:
    """Characters of a tool message around its content, truncation note included."""
    where = " or ".join(f"${name}" for name in names) or "its variable"
    envelope = '{"role": "tool", "tool_call_id": "", "content": ""}'
    note = f"\n[truncated: 1000000 more characters; the full value is in {where}]"
    return len(envelope) + len(call_id) + len(note)


def _fair_shares(sizes: Sequence[int], room: int) -> list[int]:
    """``room`` shared out: the smallest first take what they need, the rest an equal share."""
    shares = [0] * len(sizes)
    left = len(sizes)
    for index in sorted(range(len(sizes)), key=sizes.__getitem__):
        share = room // left if left else 0
        shares[index] = min(sizes[index], share)
        room -= shares[index]
        left -= 1
    return shares

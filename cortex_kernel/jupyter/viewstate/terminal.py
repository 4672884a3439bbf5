"""The run's view for terminals (``jupyter console``): lines as actions change."""

from __future__ import annotations

from typing import Any

from ..safe_markup import terminal_safe
from .render import approval_head, render_text, text_line
from .state import RunState, event_data
from .text import waiting_text

__all__ = ["TerminalView"]


class TerminalView:
    """The run's plain-text view for terminals (``jupyter console``), as it changes.

    A terminal prints a display once (``Cortex run [running]``) and ignores
    its updates, so the changes are printed instead: one line per action
    state change (and per refresh of a feed drawn in the tree), indented as
    in :func:`render_text`, with an action's arguments under it when it
    starts; a request for approval whole, as its box shows it, and its decision; while
    the model reads the prompt, that it does (and the prompt's size); then
    the final :func:`render_text`.

    Parameters
    ----------
    state
        The :class:`RunState` the widget view folds events into (read, not written).
    """

    _SHOWN = frozenset(
        {"action_started", "action_succeeded", "action_failed", "action_skipped"}
        | {"action_cancelled", "approval_requested", "approval_decided"}
    )
    _ARGS_LINES = 20  # of an action's arguments, when it starts

    def __init__(self, state: RunState) -> None:
        self.state = state

    def push(self, event: Any) -> None:
        """Print what ``event`` changed (after the state took it)."""
        data: dict[str, Any] = event if isinstance(event, dict) else event_data(event)
        kind = data.get("type")
        if kind == "turn_started" and data.get("parent") is None:
            waiting = self.state.doc.get("waiting")
            if waiting:
                self._print(f"  turn {data.get('turn')}: {waiting_text(waiting)}")
            return
        nodes = self.state.doc["nodes"]
        node_id = f"feed.{data.get('feed_id')}" if kind == "feed_updated" else data.get("id")
        node = nodes.get(node_id)
        if node is None or (kind not in self._SHOWN and kind != "feed_updated"):
            return
        depth, parent = 1, node.get("parent")
        while parent in nodes and depth <= len(nodes):  # bounded: a parent loop ends
            depth, parent = depth + 1, nodes[parent].get("parent")
        lines = [text_line(node, depth)]
        pad = "  " * (depth + 1)
        approval = node.get("approval")
        if kind == "approval_requested" and approval:
            # Nothing to click here: the request whole, and how to answer it.
            lines.append(f"{pad}approval: {approval_head(approval)}")
            lines.extend(f"{pad}| {line}" for line in approval["parameters"].split("\n"))
            # A setting or a cell's grant may decide it at once (the next line says so).
            lines.append(
                f"{pad}a terminal has no buttons: if no decision follows, Ctrl-C stops the "
                "run, and %approvals auto (or bypass) before a cell lets such calls run"
            )
        elif kind == "action_started" and node.get("args") and not approval:
            shown = node["args"].split("\n")
            more = len(shown) - self._ARGS_LINES
            lines.extend(f"{pad}| {line}" for line in shown[: self._ARGS_LINES])
            if more > 0:
                lines.append(f"{pad}| … {more} more lines")
        self._print("\n".join(lines))

    @staticmethod
    def _print(text: str) -> None:
        print(terminal_safe(text), flush=True)

    def finish(self) -> None:
        """Print the final state."""
        print(render_text(self.state.doc), flush=True)

"""The run's view for terminals (``jupyter console``): lines as actions change."""

from __future__ import annotations

from typing import Any

from ..safe_markup import terminal_safe
from .render import render_text, text_line
from .state import RunState, event_data

__all__ = ["TerminalView"]


class TerminalView:
    """The run's plain-text view for terminals (``jupyter console``), as it changes.

    A terminal prints a display once (``Cortex run [running]``) and ignores
    its updates, so the changes are printed instead: one line per action
    state change (and per refresh of a feed drawn in the tree), indented as
    in :func:`render_text`, then the final :func:`render_text`.

    Parameters
    ----------
    state
        The :class:`RunState` the widget view folds events into (read, not written).
    """

    _SHOWN = frozenset(
        {"action_started", "action_succeeded", "action_failed", "action_skipped"}
        | {"action_cancelled"}
    )

    def __init__(self, state: RunState) -> None:
        self.state = state

    def push(self, event: Any) -> None:
        """Print the line of the action ``event`` changed (after the state took it)."""
        data: dict[str, Any] = event if isinstance(event, dict) else event_data(event)
        kind = data.get("type")
        nodes = self.state.doc["nodes"]
        node_id = f"feed.{data.get('feed_id')}" if kind == "feed_updated" else data.get("id")
        node = nodes.get(node_id)
        if node is None or (kind not in self._SHOWN and kind != "feed_updated"):
            return
        depth, parent = 1, node.get("parent")
        while parent in nodes and depth <= len(nodes):  # bounded: a parent loop ends
            depth, parent = depth + 1, nodes[parent].get("parent")
        print(terminal_safe(text_line(node, depth)), flush=True)

    def finish(self) -> None:
        """Print the final state."""
        print(render_text(self.state.doc), flush=True)

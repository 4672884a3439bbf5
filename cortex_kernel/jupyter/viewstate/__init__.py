"""The live view's state and its renderings (no Jupyter here).

- :mod:`.state`: :class:`RunState` folds a run's events into a small JSON
  document and the delta ops the widget applies (``widgets/view.js``), one
  handler per event type;
- :mod:`.render`: the same document as ``text/plain``, ``text/markdown`` and
  ``text/html`` (:func:`render_text`, :func:`render_markdown`,
  :func:`render_html`);
- :mod:`.terminal`: :class:`TerminalView`, the lines a terminal prints as a
  run changes;
- :mod:`.text`: what an approval box shows (:func:`visible_text`), ``$``
  kept from math (:func:`escape_math`).
"""

from __future__ import annotations

from .render import STATE_ICONS, render_html, render_markdown, render_text
from .state import RunState, event_data
from .terminal import TerminalView
from .text import escape_math, visible_text

__all__ = [
    "STATE_ICONS",
    "RunState",
    "TerminalView",
    "escape_math",
    "event_data",
    "render_html",
    "render_markdown",
    "render_text",
    "visible_text",
]

"""The live view of a run: an anywidget fed coalesced deltas.

Strategy
--------
Events arrive at the token rate (hundreds a second). Each one is folded into
a :class:`~cortex_kernel.jupyter.viewstate.RunState`, which merges pending
changes per target; a flush is scheduled on the kernel's event loop at most
every :data:`FLUSH_INTERVAL` seconds and sends the merged ops as one custom
comm message ``{"seq", "now", "ops"}``. So a view gets at most ~20 messages a
second whatever the token rate, each a compact delta rather than re-sent
lists (an ipywidgets List/Dict trait is re-sent whole on every change).

The ``snapshot`` trait carries the whole document only at the start and once
the run has finished (the final state always lands, and a saved notebook's
widget state shows the finished run). A front end that opens mid-run (a
reload, a second view) asks for ``{"type": "sync"}`` and gets the current
document once.

``_repr_mimebundle_`` adds ``text/plain``, ``text/markdown`` and
``text/html`` renderings next to the widget while the run is live.

When the run is over (and no ``fire_and_forget`` action of it still runs),
the display is replaced by those static renderings alone and the widget is
closed: a saved notebook then reads the same after reopening with a new
kernel (no "model not found"), in nbconvert's HTML (offline: no widget
renderer to fetch), on GitHub and in VS Code.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .approvals import CellScope
from .viewstate import RunState, render_html, render_markdown, render_text

_LIVE_STATES = frozenset({"parsing", "queued", "waiting", "running"})

__all__ = ["RunView"]

FLUSH_INTERVAL = 0.05  # seconds: ~20 messages a second per view


def widgets_dir() -> Path:
    """Where ``view.js`` and ``view.css`` live.

    A wheel ships them as ``cortex_kernel/_widgets``; a source or editable
    checkout has them in the top-level ``widgets/``.
    """
    packaged = Path(str(resources.files("cortex_kernel"))) / "_widgets"
    if (packaged / "view.js").is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "widgets"


class RunView(anywidget.AnyWidget):
    """The live view of one run (thoughts, action tree, responses, footer).

    Feed it events with :meth:`push`; call :meth:`finish` when the run is
    over. Pushing after ``finish`` is fine: fire-and-forget actions that
    outlive the cell keep their nodes up to date.
    """

    _esm = widgets_dir() / "view.js"
    _css = widgets_dir() / "view.css"

    view_id = traitlets.Unicode("").tag(sync=True)
    snapshot = traitlets.Dict().tag(sync=True)

    def __init__(
        self,
        on_approval: Callable[[str, str, bool, CellScope | None], str | None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(view_id=uuid.uuid4().hex, **kwargs)
        # Approve / Approve for this cell / Deny: {"type": "approval", "token",
        # "digest", "approved", "scope"?} from the front end; on_approval gets
        # this run's CellScope for "scope": "cell" and returns why it refused
        # an answer, if it did.
        self.on_approval = on_approval
        self.cell = CellScope()  # closed by finish(): a cell's grants end with its run
        self.state = RunState()
        self.messages_sent = 0
        self.bytes_sent = 0
        self._t0: float | None = None  # monotonic time of the run's t = 0
        self._last_flush = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._handle: Any = None  # the DisplayHandle that goes static at the end
        self.static = False  # the display shows the static rendering; the widget is closed
        self.snapshot = self._snapshot()
        self.on_msg(self._on_front_end_msg)

    # -- input --------------------------------------------------------------

    def push(self, event: Any) -> None:
        """Fold one event into the view; a flush follows within ~50 ms."""
        if self.static:
            return  # the run is over and shown statically
        t = getattr(event, "t", None)
        if self._t0 is None and isinstance(t, int | float):
            self._t0 = time.monotonic() - float(t)
        self.state.apply(event)
        if getattr(event, "type", None) == "run_finished" and self.state.finished:
            # The final state is sent now, not after a timer that might not fire.
            self.flush()
            return
        self._schedule()

    def finish(self, handle: Any = None) -> None:
        """Send whatever is pending and store the final document.

        With ``handle`` (the display's ``DisplayHandle``), the display becomes
        the static rendering as soon as nothing of the run is still running.
        What *Approve for this cell* granted ends here.
        """
        self.cell.close()
        self.flush()
        self.snapshot = self._snapshot()
        if handle is not None:
            self._handle = handle
            if not self._go_static():
                handle.update(self)  # background work left: stay live until it ends

    def static_bundle(self) -> dict[str, str]:
        """The run as ``text/plain``, ``text/markdown`` and ``text/html`` (no widget)."""
        doc = self.state.doc
        return {
            "text/plain": render_text(doc),
            "text/markdown": render_markdown(doc),
            "text/html": render_html(doc, self.state.figures),
        }

    def _go_static(self) -> bool:
        if self.static or self._handle is None or not self.state.finished:
            return self.static
        for node in self.state.doc["nodes"].values():
            if node["state"] in _LIVE_STATES and node.get("mode") == "fire_and_forget":
                return False
        self.static = True
        self._handle.update(self.static_bundle(), raw=True)
        self.close()
        return True

    # -- output -------------------------------------------------------------

    def _now(self) -> float:
        return 0.0 if self._t0 is None else round(time.monotonic() - self._t0, 3)

    def _snapshot(self) -> dict[str, Any]:
        # A copy: the trait must not alias the live document, or a change
        # would compare equal to the stored value and never be sent.
        return {"seq": self.state.seq, "now": self._now(), "doc": copy.deepcopy(self.state.doc)}

    def _schedule(self) -> None:
        if self._timer is not None or not self.state.dirty:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a plain script): send at once
            self.flush()
            return
        delay = max(0.0, self._last_flush + FLUSH_INTERVAL - time.monotonic())
        self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()

    def flush(self) -> None:
        """Send the pending ops now (one comm message), if any."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.state.dirty:
            return
        message = {"seq": self.state.seq + 1, "now": self._now(), "ops": self.state.take_ops()}
        self._send_delta(message)
        self._last_flush = time.monotonic()
        if self.state.finished:
            # After the run only rare late events (fire-and-forget) arrive:
            # keep the stored document current so a reload shows them.
            self.snapshot = self._snapshot()
            self._go_static()

    def _send_delta(self, message: dict[str, Any]) -> None:
        self.messages_sent += 1
        self.bytes_sent += len(json.dumps(message, default=str))
        self.send(message)

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "approval":
            self._on_answer(content)
            return
        if isinstance(content, dict) and content.get("type") == "sync":
            # Pending ops are already in the document: send them first so the
            # snapshot's seq covers them and nothing is applied twice.
            self.flush()
            reply = {"seq": self.state.seq, "now": self._now(), "snapshot": self.state.doc}
            self._send_delta(reply)

    def _on_answer(self, content: dict[str, Any]) -> None:
        token, digest = content.get("token"), content.get("digest")
        scope = content.get("scope", "once")
        if self.on_approval is None:
            return
        if not isinstance(token, str) or not isinstance(digest, str):
            refused: str | None = "it names no request token and digest"
        elif scope not in ("once", "cell"):
            refused = "its scope is neither once nor cell"
        else:
            cell = self.cell if scope == "cell" else None
            refused = self.on_approval(token, digest, content.get("approved") is True, cell)
        if refused is not None and not self.static:
            # Said in the view (which redraws, so its buttons work again).
            self.state.apply({"type": "warning", "message": f"approval answer refused: {refused}"})
            self._schedule()

    # -- static representations ----------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            data: dict[str, Any] = {}
            metadata: dict[str, Any] = {}
        elif isinstance(bundle, tuple):
            data, metadata = dict(bundle[0]), dict(bundle[1] or {})
        else:
            data, metadata = dict(bundle), {}
        doc = self.state.doc
        data["text/plain"] = render_text(doc)
        data["text/markdown"] = render_markdown(doc)
        data["text/html"] = render_html(doc, self.state.figures)
        return data, metadata

"""The view's timeline: when the model wrote and when each action ran (issue 29).

:class:`Timeline` folds the same events as :class:`~.state.RunState` into
``doc["timeline"]``, a compact model of where a run's time went:

``turns``
    ``[turn, t0, t1]`` per model turn of the top-level run (``t1`` ``None``
    while it streams).
``segs``
    ``[kind, t0, t1]``: the turns' streaming split by what the model was
    writing — ``wait`` (before its first token), ``thought``, ``action``
    (an action's tag and body), ``response``, ``text`` (outside any
    element), ``mixed`` (past the cap). Adjacent events of one kind extend
    one segment, and a segment that took no time takes the next kind, so
    there are about as many segments as switches of what the model writes.
``bars``
    ``[id, dispatched, started, ended, approval_asked, approval_decided]``
    per action, times ``None`` until known. The action's kind, state and
    dependencies are its node's (``doc["nodes"]``).
``more``
    How many actions got no bar (past :data:`MAX_BARS`).

Every time is seconds on the top-level run's clock (a sub-agent's run has
its own: its times are moved by when the action that runs it started).
Changes go out as ``["tl", section, index, value]`` ops, merged per item
into the same batch as the rest of the view's ops: the timeline adds no
message of its own.

:func:`timeline_html` draws it as static SVG (no script, labels escaped) for
the static view; ``widgets/view.js`` draws the same from the same data.
"""

from __future__ import annotations

import html
from typing import Any

from .text import clip

__all__: list[str] = []  # used inside the viewstate package only

#: Most segments of model streaming a run keeps (the last one then grows, ``mixed``).
MAX_SEGMENTS = 300
#: Most actions drawn as bars (the rest are counted in ``more``).
MAX_BARS = 150
#: Most action rows the static drawing shows.
_ROWS = 40

# What the model was writing, by the parser event that shows it.
_STREAM_KINDS = {
    "thought_start": "thought",
    "thought_delta": "thought",
    "thought_end": "thought",
    "action_open": "action",
    "action_parsed": "action",
    "action_error": "action",
    "context_feed": "action",
    "response_start": "response",
    "response_delta": "response",
    "response_end": "response",
    "text": "text",
}
_ENDS = frozenset(
    {"action_succeeded", "action_failed", "action_skipped", "action_cancelled"},
)


def _ms(t: float) -> float:
    return round(t, 3)


class Timeline:
    """Folds events into ``doc["timeline"]`` and queues its ops in ``pending``.

    Parameters
    ----------
    doc
        The view's document (:attr:`.RunState.doc`); ``doc["timeline"]`` is added.
    pending
        The view's pending ops, keyed by target (shared with :class:`.RunState`).
    """

    def __init__(self, doc: dict[str, Any], pending: dict[tuple[Any, ...], list[Any]]) -> None:
        self.model: dict[str, Any] = {"turns": [], "segs": [], "bars": [], "more": 0}
        doc["timeline"] = self.model
        self._pending = pending
        self._now = 0.0
        self._open = False  # a top-level turn is streaming
        self._bar: dict[str, int] = {}  # action id -> index in bars
        self._offsets: dict[str, float] = {}  # nested run (its action's id) -> clock offset

    def _op(self, section: str, index: int, value: list[Any]) -> None:
        # A copy (a batch taken now must not change with later events), made
        # once per batch: a streaming segment changes with every token.
        key = ("tl", section, index)
        op = self._pending.get(key)
        if op is None:
            self._pending[key] = ["tl", section, index, list(value)]
        else:
            op[3][:] = value

    def _time(self, t: Any, parent: str | None) -> float:
        if not isinstance(t, int | float):
            return self._now  # parser events the runtime did not stamp (tests)
        if parent is None:
            return round(t, 3)
        offset = 0.0
        while parent:
            if parent in self._offsets:
                offset = self._offsets[parent]
                break
            parent = parent.rpartition("/")[0]
        return _ms(float(t) + offset)

    def apply(self, data: dict[str, Any]) -> None:
        """Fold one event (as a dict) into the timeline."""
        kind = data.get("type", "")
        parent = data.get("parent")
        t = self._time(data.get("t"), parent)
        if t > self._now:
            self._now = t
        stream = _STREAM_KINDS.get(kind)
        if stream is not None and parent is None:
            if stream == "text" and not str(data.get("text", "")).strip():
                stream = None  # whitespace between elements: whatever was being written
            self._stream(stream, t)
            return
        if kind == "turn_started" and parent is None:
            self._turn_started(int(data.get("turn") or 0), t)
        elif kind == "turn_ended" and parent is None:
            self._turn_ended(t)
        elif kind == "action_queued":
            self._set_bar(str(data["id"]), 1, t, create=True)
        elif kind == "action_started":
            self._set_bar(str(data["id"]), 2, t, first=True)
        elif kind in _ENDS:
            self._set_bar(str(data["id"]), 3, t)
        elif kind == "approval_requested":
            self._set_bar(str(data["id"]), 4, t)
        elif kind == "approval_decided":
            self._set_bar(str(data["id"]), 5, t)
        elif kind == "run_started" and parent is not None:
            self._nested_run(parent, data.get("t"))

    # -- the model's streaming ----------------------------------------------

    def _turn_started(self, turn: int, t: float) -> None:
        turns: list[list[Any]] = self.model["turns"]
        turns.append([turn, t, None])
        self._op("turns", len(turns) - 1, turns[-1])
        self._open = True
        self._new_segment("wait", t, t)

    def _turn_ended(self, t: float) -> None:
        turns: list[list[Any]] = self.model["turns"]
        if not self._open or not turns:
            return
        self._open = False
        turns[-1][2] = t
        self._op("turns", len(turns) - 1, turns[-1])
        segs: list[list[Any]] = self.model["segs"]
        if segs and segs[-1][2] < t:
            segs[-1][2] = t
            self._op("segs", len(segs) - 1, segs[-1])

    def _new_segment(self, kind: str, t0: float, t1: float) -> None:
        segs: list[list[Any]] = self.model["segs"]
        if len(segs) >= MAX_SEGMENTS:
            # Past the cap the last segment grows: bounded whatever the run.
            segs[-1][0] = "mixed"
            segs[-1][2] = t1
        else:
            segs.append([kind, t0, t1])
        self._op("segs", len(segs) - 1, segs[-1])

    def _stream(self, kind: str | None, t: float) -> None:
        if not self._open:
            return  # the model writes only in a turn (a replayed stream without turns: none)
        segs: list[list[Any]] = self.model["segs"]
        last = segs[-1]
        if kind is None or last[0] == kind:
            if t > last[2]:
                last[2] = t
                self._op("segs", len(segs) - 1, last)
            return
        if last[0] == "wait":
            # The first token: the wait for it ends here.
            last[2] = t
            self._op("segs", len(segs) - 1, last)
            self._new_segment(kind, t, t)
        elif last[1] == last[2]:
            # A segment that took no time (one chunk held both): it is this kind's.
            last[0] = kind
            last[2] = t
            self._op("segs", len(segs) - 1, last)
        else:
            # The time since the last event went into writing this kind.
            self._new_segment(kind, last[2], t)

    # -- actions --------------------------------------------------------------

    def _set_bar(
        self, action_id: str, field: int, t: float, create: bool = False, first: bool = False
    ) -> None:
        index = self._bar.get(action_id)
        bars: list[list[Any]] = self.model["bars"]
        if index is None:
            if not create:
                return
            if len(bars) >= MAX_BARS:
                self.model["more"] += 1
                self._pending[("tl", "more", 0)] = ["tl", "more", 0, self.model["more"]]
                return
            index = self._bar[action_id] = len(bars)
            bars.append([action_id, None, None, None, None, None])
        bar = bars[index]
        if first and bar[field] is not None:
            return  # a retry: the bar starts at the first attempt
        bar[field] = t
        if field == 2 and bar[3] is not None:
            bar[3] = None  # a periodic feed's step, run again
        self._op("bars", index, bar)

    def _nested_run(self, parent: str, t: Any) -> None:
        # A sub-agent's run counts from its own start: from when its action started.
        index = self._bar.get(parent)
        if index is None or not isinstance(t, int | float):
            return
        bar = self.model["bars"][index]
        start = bar[2] if bar[2] is not None else bar[1]
        if start is not None:
            self._offsets[parent] = start - float(t)


# -- where the time went ------------------------------------------------------


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


def _overlap(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


def _end_of(doc: dict[str, Any]) -> float:
    tl = doc.get("timeline") or {}
    times = [float(doc["footer"].get("seconds") or 0.0)]
    times += [s[2] for s in tl.get("segs", [])]
    times += [t for bar in tl.get("bars", []) for t in bar[1:] if t is not None]
    return max(times)


def time_spent(doc: dict[str, Any], now: float | None = None) -> dict[str, float]:
    """Seconds of the run the model wrote, actions ran, both, and approvals waited.

    Parameters
    ----------
    doc
        The view's document.
    now
        Where open spans end (default: the latest time the document knows).

    Returns
    -------
    dict
        ``total``, ``model`` (streaming turns), ``tools`` (any action
        running), ``overlap`` (actions running while the model wrote),
        ``approval`` (a call waiting for a person) and ``other`` (none of those).
    """
    tl = doc.get("timeline") or {}
    end = _end_of(doc) if now is None else now
    model = _union([(t[1], end if t[2] is None else t[2]) for t in tl.get("turns", [])])
    tools = _union(
        [(b[2], end if b[3] is None else b[3]) for b in tl.get("bars", []) if b[2] is not None]
    )
    approval = _union(
        [(b[4], end if b[5] is None else b[5]) for b in tl.get("bars", []) if b[4] is not None]
    )
    busy = _length(_union(model + tools + approval))
    return {
        "total": end,
        "model": _length(model),
        "tools": _length(tools),
        "overlap": _overlap(model, tools),
        "approval": _length(approval),
        "other": max(0.0, end - busy),
    }


def timeline_summary(doc: dict[str, Any]) -> str:
    """One line: ``model 2.1s · actions 1.5s (1.1s while the model wrote) · other 0.2s``.

    ``""`` when the run has no turn and no action yet.
    """
    tl = doc.get("timeline") or {}
    if not tl.get("turns") and not tl.get("bars"):
        return ""
    spent = time_spent(doc)
    parts = [f"model {spent['model']:.1f}s"]
    if tl.get("bars"):
        parts.append(
            f"actions {spent['tools']:.1f}s ({spent['overlap']:.1f}s while the model wrote)"
        )
    if spent["approval"]:
        parts.append(f"approval {spent['approval']:.1f}s")
    parts.append(f"other {spent['other']:.1f}s")
    return " · ".join(parts)


# -- the drawing ----------------------------------------------------------------

#: Fill of each kind of model segment and each state of an action's run.
COLOURS = {
    "wait": "#e0e0e0",
    "thought": "#b39ddb",
    "action": "#ffb74d",
    "response": "#64b5f6",
    "text": "#cfd8dc",
    "mixed": "#bdbdbd",
    "queued": "#eeeeee",
    "approval": "#ffe082",
    "running": "#90caf9",
    "succeeded": "#81c784",
    "failed": "#e57373",
    "skipped": "#ffcc80",
    "cancelled": "#ffcc80",
}
_WIDTH, _LABEL, _ROW, _BAR, _AXIS, _LEGEND = 640, 150, 16, 10, 18, 14
#: What the colours mean, under the axis.
LEGEND = (
    ("wait", "first token"),
    ("thought", "thought"),
    ("action", "action tag"),
    ("response", "response"),
    ("queued", "queued"),
    ("approval", "approval"),
    ("running", "running"),
    ("succeeded", "succeeded"),
    ("failed", "failed"),
)


def _ticks(end: float) -> list[float]:
    step = next(
        (s for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600) if end / s <= 6),
        max(end / 6, 1.0),
    )
    count = int(end / step + 1e-9)
    return [round(i * step, 3) for i in range(count + 1)]


def _esc(text: str) -> str:
    # "$" as an entity: a literal "$" here would become render_html's
    # <span>$</span>, which in SVG would end the drawing.
    return html.escape(text, quote=True).replace("$", "&#36;")


def _seconds(t: float | None) -> str:
    return "?" if t is None else f"{t:.2f}s"


def _bar_title(node: dict[str, Any], bar: list[Any]) -> str:
    label = " ".join(p for p in (node.get("id"), node.get("type"), node.get("name")) if p)
    parts = [f"{label}: {node.get('state', '')}", f"dispatched {_seconds(bar[1])}"]
    if bar[4] is not None:
        parts.append(f"asked for approval {_seconds(bar[4])} (answered {_seconds(bar[5])})")
    if bar[2] is not None:
        ran = f"ran {_seconds(bar[2])}–{_seconds(bar[3])}"
        if bar[3] is not None:
            ran += f" ({bar[3] - bar[2]:.2f}s)"
        parts.append(ran)
    if node.get("deps"):
        parts.append("after " + ", ".join(node["deps"]))
    return clip(" · ".join(parts), 400)


def _depth(node_id: str, nodes: dict[str, Any]) -> int:
    depth, parent = 0, (nodes.get(node_id) or {}).get("parent")
    while parent in nodes and depth < 8:
        depth += 1
        parent = nodes[parent].get("parent")
    return depth


class _Drawing:
    """The SVG of one timeline: rows of ``_ROW`` pixels, the time axis from 0 to ``end``."""

    def __init__(self, end: float) -> None:
        self.end = end
        self.out: list[str] = []

    def x(self, t: float) -> float:
        span = _WIDTH - _LABEL - 8
        return round(_LABEL + span * min(max(t, 0.0), self.end) / self.end, 1)

    def rect(
        self,
        t0: float,
        t1: float,
        row: int,
        fill: str,
        title: str,
        *,
        size: int = _BAR,
        keep: bool = False,
    ) -> None:
        if t1 <= t0 and not keep:
            return  # took no time (an action's run is drawn however short: keep)
        y = row * _ROW + (_ROW - size) / 2
        width = max(self.x(t1) - self.x(t0), 1.0)
        self.out.append(
            f'<rect x="{self.x(t0)}" y="{y}" width="{width:.1f}" height="{size}" fill="{fill}">'
            f"<title>{_esc(title)}</title></rect>"
        )

    def label(self, row: int, text: str, title: str = "", fill: str = "#555") -> None:
        tip = f"<title>{_esc(title)}</title>" if title else ""
        y = row * _ROW + _ROW - 4
        self.out.append(f'<text x="2" y="{y}" fill="{fill}">{tip}{_esc(text)}</text>')

    def bar(self, row: int, bar: list[Any], node: dict[str, Any], depth: int) -> None:
        """An action: dispatched -> started (light), its approval wait, its run (its state's)."""
        title = _bar_title(node, bar)
        name = str(node.get("name") or node.get("type") or "")
        self.label(
            row, clip("  " * depth + " ".join(p for p in (str(bar[0]), name) if p), 26), title
        )
        end = self.end if bar[3] is None else bar[3]
        if bar[1] is not None:
            self.rect(bar[1], end if bar[2] is None else bar[2], row, COLOURS["queued"], title)
        if bar[4] is not None:
            approved = self.end if bar[5] is None else bar[5]
            self.rect(bar[4], approved, row, COLOURS["approval"], title)
        if bar[2] is not None:
            colour = COLOURS.get(str(node.get("state", "running")), COLOURS["running"])
            self.rect(bar[2], end, row, colour, title, keep=True)

    def dependency(
        self, dep: str, dep_at: tuple[int, list[Any]], at: tuple[int, list[Any]]
    ) -> None:
        """A line with an arrowhead from where ``dep`` ended to where the action started."""
        (dep_row, dep_bar), (row, bar) = dep_at, at
        t_from = next((t for t in (dep_bar[3], dep_bar[2], dep_bar[1]) if t is not None), 0.0)
        t_to = next((t for t in (bar[2], bar[1]) if t is not None), t_from)
        x1, y1 = self.x(t_from), dep_row * _ROW + _ROW / 2
        x2, y2 = self.x(t_to), row * _ROW + _ROW / 2 - 4
        self.out.append(
            f'<path d="M{x1} {y1} L{x2} {y2} M{x2 - 3} {y2 - 3} L{x2} {y2} L{x2 + 3} {y2 - 3}" '
            f'stroke="#555" stroke-width="1" fill="none">'
            f"<title>{_esc(f'{bar[0]} after {dep}')}</title></path>"
        )

    def axis(self, row: int) -> None:
        """The time axis under ``row`` rows, its ticks, and the legend of the colours."""
        y = row * _ROW
        self.out.append(f'<line x1="{_LABEL}" y1="{y}" x2="{_WIDTH - 8}" y2="{y}" stroke="#999"/>')
        for tick in _ticks(self.end):
            x = self.x(tick)
            self.out.append(
                f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + 3}" stroke="#999"/>'
                f'<text x="{x}" y="{y + 13}" fill="#777" text-anchor="middle">{tick:g}s</text>'
            )
        y += _AXIS
        for i, (kind, label) in enumerate(LEGEND):
            left = 2 + i * 70
            self.out.append(
                f'<rect x="{left}" y="{y + 2}" width="8" height="8" fill="{COLOURS[kind]}"/>'
                f'<text x="{left + 11}" y="{y + 10}" fill="#777">{label}</text>'
            )


def timeline_html(doc: dict[str, Any]) -> str:
    """The timeline as a static inline SVG (with ``<title>`` tooltips), or ``""``.

    It is folded in a ``<details>`` whose summary is :func:`timeline_summary`.

    Row one is the model: its turns, coloured by what it was writing; below,
    one bar per action from its dispatch (light) through an approval wait
    (amber) to the end of its run (coloured by its state), with a line from
    each dependency's end to the action it held back. Model-written labels
    (ids, names) are escaped; there is no script and no link.
    """
    tl = doc.get("timeline") or {}
    if not tl.get("turns") and not tl.get("bars"):
        return ""
    nodes: dict[str, Any] = doc["nodes"]
    drawing = _Drawing(max(_end_of(doc), 0.001))
    bars: list[list[Any]] = tl["bars"][:_ROWS]
    hidden = len(tl["bars"]) - len(bars) + int(tl.get("more") or 0)
    rows = 1 + len(bars) + (1 if hidden else 0)
    drawing.label(0, "model")
    for turn in tl["turns"]:
        t1 = drawing.end if turn[2] is None else turn[2]
        drawing.rect(turn[1], t1, 0, "#f5f5f5", f"turn {turn[0]}", size=_ROW - 2)
    for kind, t0, t1 in tl["segs"]:
        drawing.rect(t0, t1, 0, COLOURS.get(kind, "#bdbdbd"), f"{kind} {t0:.2f}–{t1:.2f}s")
    where = {bar[0]: (row, bar) for row, bar in enumerate(bars, start=1)}
    for row, bar in where.values():
        drawing.bar(row, bar, nodes.get(bar[0]) or {"id": bar[0]}, _depth(bar[0], nodes))
    for action_id, at in where.items():
        for dep in (nodes.get(action_id) or {}).get("deps") or []:
            if dep in where:
                drawing.dependency(dep, where[dep], at)
    if hidden:
        drawing.label(rows - 1, f"+{hidden} more actions", fill="#777")
    drawing.axis(rows)
    height = _ROW * rows + _AXIS + _LEGEND
    svg = (
        f'<svg width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" '
        'font-family="sans-serif" font-size="10" role="img" aria-label="timeline">'
        f"{''.join(drawing.out)}</svg>"
    )
    # Collapsed, its summary saying where the time went: a front end that
    # sanitizes the output (an untrusted notebook) drops the SVG's elements
    # and keeps their text, which stays folded away.
    summary = html.escape(timeline_summary(doc))
    return (
        '<div class="cortex-timeline" style="margin: 4px 0"><details>'
        f'<summary style="color: #777; font-size: 11px">timeline · {summary}</summary>'
        f"{svg}</details></div>"
    )

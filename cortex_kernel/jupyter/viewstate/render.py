"""The view's static renderings: ``text/plain``, ``text/markdown``, ``text/html``.

For front ends without the widget (nbconvert, GitHub, a terminal): the same
document :class:`~.state.RunState` builds, drawn once. Model and tool text is
inert in every one (:mod:`..safe_markup`).
"""

from __future__ import annotations

import base64
import html
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from ..safe_markup import (
    code_span,
    literal_markdown,
    safe_url,
    sanitize_view_html,
    terminal_safe,
)
from .text import DOLLAR_HTML, UNSTOPPED_NOTE, UNSTOPPED_STATE, clip, plural, waiting_text
from .timeline import timeline_html, timeline_summary

__all__ = ["STATE_ICONS", "render_html", "render_markdown", "render_text"]

STATE_ICONS: dict[str, str] = {
    "parsing": "…",
    "queued": "○",
    "waiting": "◔",
    "running": "⟳",  # not ▶: that reads as a disclosure triangle, and it cannot be clicked
    UNSTOPPED_STATE: "⟳",
    "succeeded": "✓",
    "failed": "✗",
    "skipped": "↷",
    "cancelled": "⊘",
    "awaiting approval": "⏸",
}


def _children(doc: dict[str, Any]) -> dict[str | None, list[dict[str, Any]]]:
    tree: dict[str | None, list[dict[str, Any]]] = {}
    nodes = doc["nodes"]
    for node_id in doc["order"]:
        node = nodes[node_id]
        parent = node.get("parent")
        tree.setdefault(parent if parent in nodes else None, []).append(node)
    return tree


def _node_label(node: dict[str, Any]) -> str:
    label = f"{node['id']} {node['type']}".strip()
    if node.get("name"):
        label += f" {node['name']}"
    if node.get("mode") and node["mode"] != "sync":
        label += f" ({node['mode']})"
    return label


def _placement(node: dict[str, Any]) -> str:
    """`` on tcp://…`` (and the lost worker it ran on before), or ``""``."""
    if not node.get("where"):
        return ""
    text = f" on {node['where']}"
    if node.get("moved_from"):
        text += f" (retried after worker {node['moved_from']} was lost)"
    return text


def _flags(node: dict[str, Any]) -> list[str]:
    """``[approved (user)]``, ``[blocked]``: what a node's line shows in brackets.

    Its approval's decision, then ``[blocked]`` when its audit blocked it;
    each rendering marks them up its own way.
    """
    decision = (node.get("approval") or {}).get("decision")
    flags = [f"[{decision}]"] if decision else []
    if node.get("audit") == "blocked":
        flags.append("[blocked]")
    return flags


def text_line(node: dict[str, Any], depth: int) -> str:
    icon = STATE_ICONS.get(node["state"], "?")
    line = f"{'  ' * depth}{icon} {_node_label(node)}: {node['state']}{_placement(node)}"
    if node["state"] == UNSTOPPED_STATE:
        line += f" — {UNSTOPPED_NOTE}"
    if node.get("deps"):
        line += f" <- {', '.join(node['deps'])}"
    return line + "".join(f" {flag}" for flag in _flags(node))


def _one_line(text: str, limit: int = 160) -> str:
    """``text`` on one line (its lines joined by `` ⏎ ``), clipped: a summary of arguments."""
    return clip(" ⏎ ".join(line.strip() for line in text.strip().split("\n")), limit)


def approval_head(approval: dict[str, Any]) -> str:
    """``tool 'count', asked by run … › workflow 'w' (w1)``: what asks, and who."""
    head = f"{approval.get('kind') or 'tool'} '{approval.get('tool', '')}'"
    return head + (f", asked by {approval['asker']}" if approval.get("asker") else "")


def unaccepted_answer(doc: dict[str, Any]) -> str:
    """The answer of a run that ended ``stuck``, ``limit`` or ``error``, if it gave one.

    The cell shows the answer of a run that ended ``ok`` or ``incomplete``
    (and a ``no_answer`` run's provisional one) as its result; any other
    run raises its status, and its answer, kept in ``_run.answer``, would
    show nowhere in a saved notebook.
    """
    if doc["status"] in ("running", "ok", "incomplete", "no_answer"):
        return ""
    finals = [r["text"] for r in doc["responses"] if r["final"] and r["text"].strip()]
    return str(doc.get("answer") or (finals[-1] if finals else "")).strip()


def render_text(doc: dict[str, Any]) -> str:
    """A stable plain-text summary: status and the action tree, no timings.

    A call that asked for approval shows its request whole, as its box did.
    """
    lines = [f"Cortex run [{doc['status']}]"]
    tree = _children(doc)

    def walk(parent: str | None, depth: int) -> None:
        for node in tree.get(parent, []):
            lines.append(text_line(node, depth))
            approval = node.get("approval")
            if node.get("args") and not approval:  # an approval shows its request whole
                lines.append(f"{'  ' * (depth + 1)}args: {_one_line(node['args'])}")
            if approval:
                pad = "  " * (depth + 1)
                lines.append(f"{pad}approval: {approval_head(approval)}")
                lines.extend(f"{pad}| {line}" for line in approval["parameters"].split("\n"))
            if node.get("changes"):
                lines.append(f"{'  ' * (depth + 1)}changes: {node['changes']}")
            walk(node["id"], depth + 1)

    walk(None, 1)
    if doc["status"] == "running" and doc.get("waiting"):
        lines.append(f"  {waiting_text(doc['waiting'])}")
    if doc.get("status_message") and doc["status"] != "ok":
        lines.append(f"  {doc['status_message']}")
    if given := unaccepted_answer(doc):
        lines.append(f"  answer given ({doc['status']}):")
        lines.extend(f"  | {line}" for line in given.split("\n"))
    # Terminals print it (jupyter console): model text must not drive them.
    return terminal_safe("\n".join(lines))


def _markdown_item(node: dict[str, Any], depth: int) -> list[str]:
    """A node's list item in :func:`render_markdown`, and the lines under it."""
    icon = STATE_ICONS.get(node["state"], "?")
    label = code_span(_node_label(node))
    item = f"{'  ' * depth}- {icon} {label} — {literal_markdown(node['state'])}"
    item += literal_markdown(_placement(node))
    item += "".join(f" {literal_markdown(flag)}" for flag in _flags(node))
    if node.get("deps"):
        item += f" {literal_markdown('(after ' + ', '.join(node['deps']) + ')')}"
    detail = node.get("preview") or node.get("error")
    if detail:
        item += ": " + literal_markdown(clip(str(detail), 120).replace("\n", " "))
    items = [item]
    pad = "  " * depth + "  "
    approval = node.get("approval")
    if node.get("args") and not approval:  # an approval shows its request whole
        items.append(f"{pad}args: {code_span(_one_line(node['args']))}")
    if approval:
        shown = approval["parameters"]
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall("`+", shown)), default=0))
        items.append(f"{pad}approval: {code_span(approval_head(approval))}")
        items.extend(f"{pad}{line}" for line in (f"{fence}text", *shown.split("\n"), fence))
    if node.get("changes"):
        items.append(f"{pad}changes: {literal_markdown(node['changes'])}")
    return items


def render_markdown(doc: dict[str, Any]) -> str:
    """Markdown: status, thoughts as quotes, the tree as a list, partial responses.

    Model and tool text in it (thoughts, labels, previews, errors, partial
    responses) reads literally: escaped by :mod:`.safe_markup`, never markup.
    """
    footer = doc["footer"]
    parts = [
        f"**Cortex run** · {doc['status']} · {len(doc['order'])} actions · "
        f"{plural(footer['turns'], 'turn')} · {footer['tokens']} tokens"
    ]
    for thought in doc["thoughts"]:
        text = thought["text"].strip()
        if text:
            # Model text reads literally: no raw HTML, link or image of it renders.
            parts.append("\n".join("> " + line for line in literal_markdown(text).splitlines()))
    tree = _children(doc)
    items: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for node in tree.get(parent, []):
            items.extend(_markdown_item(node, depth))
            walk(node["id"], depth + 1)

    walk(None, 0)
    if items:
        parts.append("\n".join(items))
    if timeline_summary(doc):
        parts.append(f"*timeline* · {timeline_summary(doc)}")
    for response in doc["responses"]:
        if not response["final"] and response["text"].strip():
            parts.append(f"*{literal_markdown(response['text'].strip())}*")
    if doc["status"] not in ("running", "ok") and doc.get("status_message"):
        parts.append(f"**{doc['status']}**: {literal_markdown(doc['status_message'])}")
    if given := unaccepted_answer(doc):
        parts.append(f"*answer given ({doc['status']}):*\n\n{literal_markdown(given)}")
    return "\n\n".join(parts)


def _details_html(node: dict[str, Any], figures: list[str]) -> str:
    """Under a node's line: its arguments, traceback, stderr and code (collapsed), its
    figures' placeholders (``figures``: see :func:`render_html`), its approval's request."""
    esc = html.escape
    out = ""
    # The code, once run, is shown as code; a request for approval is shown whole below.
    if node.get("args") and not node.get("code") and not node.get("approval"):
        out += (
            '<details><summary style="color: #777">arguments</summary>'
            f'<pre style="font-size: 11px; white-space: pre-wrap">{esc(node["args"])}</pre>'
            "</details>"
        )
    if node.get("traceback"):
        out += (
            '<details><summary style="color: #b00">traceback</summary>'
            f'<pre style="font-size: 11px">{esc(node["traceback"])}</pre></details>'
        )
    if node.get("log"):
        out += (
            '<details><summary style="color: #777">stderr</summary>'
            f'<pre style="font-size: 11px; white-space: pre-wrap">{esc(node["log"])}</pre>'
            "</details>"
        )
    if node.get("code"):
        out += (
            '<details><summary style="color: #777">code</summary>'
            f'<pre style="font-size: 11px; white-space: pre-wrap">{esc(node["code"])}</pre>'
            "</details>"
        )
    if node.get("changes"):
        out += (
            '<div class="cortex-changes" style="margin: 2px 0 4px 1.6em">'
            f"<small>changes: {esc(node['changes'])}</small></div>"
        )
    for number, placeholder in enumerate(figures, 1):
        # Collapsed: the figure is the cell's own output too, right under the view.
        label = f"figure {number}" if len(figures) > 1 else "figure"
        out += (
            f'<details><summary style="color: #777">{label}</summary>'
            f"<div>{placeholder}</div></details>"
        )
    approval = node.get("approval")
    if approval:
        # The request whole: scrollable and wrapped, nothing of it out of sight.
        out += (
            '<div class="cortex-approval-static" style="margin: 2px 0 4px 1.6em">'
            f"<small>approval: {esc(approval_head(approval))}</small>"
            '<pre style="max-height: 12em; overflow: auto; white-space: pre-wrap; '
            "overflow-wrap: anywhere; margin: 2px 0; padding: 4px 6px; "
            f'background: #f4f4f4; font-size: 12px">{esc(approval["parameters"])}</pre>'
            "</div>"
        )
    return out


def _html_line(node: dict[str, Any]) -> str:
    """A node's line in :func:`render_html` (escaped)."""
    esc = html.escape
    icon = STATE_ICONS.get(node["state"], "?")
    line = f"{icon} <code>{esc(_node_label(node))}</code> {esc(node['state'])}"
    if node.get("where"):
        line += f" <small>{esc(_placement(node).strip())}</small>"
    line += "".join(f" <b>{esc(flag)}</b>" for flag in _flags(node))
    if node.get("deps"):
        line += f" <small>after {esc(', '.join(node['deps']))}</small>"
    if node.get("t0") is not None and node.get("t1") is not None:
        line += f" <small>{node['t1'] - node['t0']:.2f}s</small>"
    detail = node.get("error") or node.get("preview")
    if detail:
        line += f' <span style="color: #555">{esc(clip(str(detail), 200))}</span>'
    return line


def _figure_img(png: bytes, alt: str) -> str:
    """An ``<img>`` of a PNG the kernel drew, inline as a ``data:`` URL."""
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}" '
        'style="max-width: 100%">'
    )


def render_html(doc: dict[str, Any], figures: Mapping[str, Sequence[bytes]] | None = None) -> str:
    """Self-contained HTML (inline styles only, which sanitizers keep).

    Every text field is escaped and the whole goes through nh3
    (:func:`.safe_markup.sanitize_view_html`): a trusted output runs no script.

    ``figures``: the PNGs the kernel drew for each node (:attr:`.RunState.figures`),
    shown as ``data:image/png`` images under their action. They are the only
    images: the sanitizer keeps none, and they are put in after it, each
    where a placeholder with a random nonce of this rendering stands, so
    nothing the model wrote can place or forge one.
    """
    nonce = secrets.token_hex(16)
    images: dict[str, str] = {}

    def placeholders(node: dict[str, Any]) -> list[str]:
        keys = []
        for png in (figures or {}).get(node["id"], ()):
            key = f"cortex-figure-{nonce}-{len(images)}"
            images[key] = _figure_img(png, f"figure drawn by {node['id']}")
            keys.append(key)
        return keys

    esc = html.escape
    footer = doc["footer"]
    # tex2jax_ignore / mathjax_ignore and every "$" in its own element:
    # MathJax (JupyterLab, Notebook 7) leaves "$5 or $6" alone.
    out = [
        '<div class="cortex-run-static tex2jax_ignore mathjax_ignore" '
        'style="font-family: sans-serif; font-size: 13px">'
    ]
    out.append(f"<div><b>Cortex run</b> · <span>{esc(doc['status'])}</span></div>")
    for thought in doc["thoughts"]:
        text = thought["text"].strip()
        if text:
            out.append(
                '<details><summary style="color: #777">thought</summary>'
                f'<div style="color: #777; white-space: pre-wrap">{esc(text)}</div></details>'
            )
    tree = _children(doc)

    def walk(parent: str | None) -> None:
        children = tree.get(parent, [])
        if not children:
            return
        out.append('<ul style="list-style: none; padding-left: 1.2em; margin: 2px 0">')
        for node in children:
            out.append(f"<li>{_html_line(node)}{_details_html(node, placeholders(node))}")
            walk(node["id"])
            out.append("</li>")
        out.append("</ul>")

    walk(None)
    out.append(timeline_html(doc))  # "" before the first turn
    for response in doc["responses"]:
        if not response["final"] and response["text"].strip():
            out.append(f'<div style="white-space: pre-wrap"><i>{esc(response["text"])}</i></div>')
    if doc["status"] not in ("running", "ok") and doc.get("status_message"):
        out.append(f'<div style="color: #b00">{esc(doc["status_message"])}</div>')
    if given := unaccepted_answer(doc):
        out.append(
            f'<div style="white-space: pre-wrap"><i>answer given ({esc(doc["status"])}):</i> '
            f"{esc(given)}</div>"
        )
    if doc.get("dashboard") and safe_url(doc["dashboard"]):
        link = esc(doc["dashboard"], quote=True)
        out.append(f'<div><a href="{link}" target="_blank">Dask dashboard</a></div>')
    if doc["status"] == "running" and doc.get("waiting"):
        out.append(f'<div style="color: #777"><i>{esc(waiting_text(doc["waiting"]))}</i></div>')
    cost = footer["cost"]
    # An unknown cost (a local or replay model) is left out, as the live view does.
    cost_text = "" if cost is None else f" · ${cost:.4f}"
    out.append(
        f'<div style="color: #777; font-size: 11px">{plural(footer["turns"], "turn")} · '
        f"{footer['tokens']} tokens{cost_text} · {footer['seconds']:.1f}s</div>"
    )
    out.append("</div>")
    # Every field above is escaped; the sanitizer is the second line of defence.
    markup = sanitize_view_html("".join(out).replace("$", DOLLAR_HTML))
    for key, image in images.items():
        markup = markup.replace(key, image, 1)
    return markup

"""The view's static renderings: ``text/plain``, ``text/markdown``, ``text/html``.

For front ends without the widget (nbconvert, GitHub, a terminal): the same
document :class:`~.state.RunState` builds, drawn once. Model and tool text is
inert in every one (:mod:`..safe_markup`).
"""

from __future__ import annotations

import html
import re
from typing import Any

from ..safe_markup import (
    code_span,
    literal_markdown,
    safe_url,
    sanitize_view_html,
    terminal_safe,
)
from .text import DOLLAR_HTML, clip, plural

__all__ = ["STATE_ICONS", "render_html", "render_markdown", "render_text", "text_line"]

STATE_ICONS: dict[str, str] = {
    "parsing": "…",
    "queued": "○",
    "waiting": "◔",
    "running": "⟳",  # not ▶: that reads as a disclosure triangle, and it cannot be clicked
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


def text_line(node: dict[str, Any], depth: int) -> str:
    icon = STATE_ICONS.get(node["state"], "?")
    line = f"{'  ' * depth}{icon} {_node_label(node)}: {node['state']}{_placement(node)}"
    if node.get("deps"):
        line += f" <- {', '.join(node['deps'])}"
    if (node.get("approval") or {}).get("decision"):
        line += f" [{node['approval']['decision']}]"
    if node.get("audit") == "blocked":
        line += " [blocked]"
    return line


def _approval_head(approval: dict[str, Any]) -> str:
    """``tool 'count', asked by run … › workflow 'w' (w1)``: what asks, and who."""
    head = f"{approval.get('kind') or 'tool'} '{approval.get('tool', '')}'"
    return head + (f", asked by {approval['asker']}" if approval.get("asker") else "")


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
            if approval:
                pad = "  " * (depth + 1)
                lines.append(f"{pad}approval: {_approval_head(approval)}")
                lines.extend(f"{pad}| {line}" for line in approval["parameters"].split("\n"))
            if node.get("changes"):
                lines.append(f"{'  ' * (depth + 1)}changes: {node['changes']}")
            walk(node["id"], depth + 1)

    walk(None, 1)
    if doc.get("status_message") and doc["status"] != "ok":
        lines.append(f"  {doc['status_message']}")
    # Terminals print it (jupyter console): model text must not drive them.
    return terminal_safe("\n".join(lines))


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
            icon = STATE_ICONS.get(node["state"], "?")
            label = code_span(_node_label(node))
            item = f"{'  ' * depth}- {icon} {label} — {literal_markdown(node['state'])}"
            item += literal_markdown(_placement(node))
            if (node.get("approval") or {}).get("decision"):
                item += f" {literal_markdown('[' + node['approval']['decision'] + ']')}"
            if node.get("audit") == "blocked":
                item += " [blocked]"
            if node.get("deps"):
                item += f" {literal_markdown('(after ' + ', '.join(node['deps']) + ')')}"
            detail = node.get("preview") or node.get("error")
            if detail:
                item += ": " + literal_markdown(clip(str(detail), 120).replace("\n", " "))
            items.append(item)
            approval = node.get("approval")
            if approval:
                pad = "  " * depth + "  "
                shown = approval["parameters"]
                fence = "`" * max(3, 1 + max((len(r) for r in re.findall("`+", shown)), default=0))
                items.append(f"{pad}approval: {code_span(_approval_head(approval))}")
                items.extend(f"{pad}{line}" for line in (f"{fence}text", *shown.split("\n"), fence))
            if node.get("changes"):
                items.append(f"{'  ' * depth}  changes: {literal_markdown(node['changes'])}")
            walk(node["id"], depth + 1)

    walk(None, 0)
    if items:
        parts.append("\n".join(items))
    for response in doc["responses"]:
        if not response["final"] and response["text"].strip():
            parts.append(f"*{literal_markdown(response['text'].strip())}*")
    if doc["status"] not in ("running", "ok") and doc.get("status_message"):
        parts.append(f"**{doc['status']}**: {literal_markdown(doc['status_message'])}")
    return "\n\n".join(parts)


def _details_html(node: dict[str, Any]) -> str:
    """Under a node's line: its traceback and stderr (collapsed), its approval's request."""
    esc = html.escape
    out = ""
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
    approval = node.get("approval")
    if approval:
        # The request whole: scrollable and wrapped, nothing of it out of sight.
        out += (
            '<div class="cortex-approval-static" style="margin: 2px 0 4px 1.6em">'
            f"<small>approval: {esc(_approval_head(approval))}</small>"
            '<pre style="max-height: 12em; overflow: auto; white-space: pre-wrap; '
            "overflow-wrap: anywhere; margin: 2px 0; padding: 4px 6px; "
            f'background: #f4f4f4; font-size: 12px">{esc(approval["parameters"])}</pre>'
            "</div>"
        )
    return out


def render_html(doc: dict[str, Any]) -> str:
    """Self-contained HTML (inline styles only, which sanitizers keep).

    Every text field is escaped and the whole goes through nh3
    (:func:`.safe_markup.sanitize_view_html`): a trusted output runs no script.
    """
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
            icon = STATE_ICONS.get(node["state"], "?")
            line = f"{icon} <code>{esc(_node_label(node))}</code> {esc(node['state'])}"
            if node.get("where"):
                line += f" <small>{esc(_placement(node).strip())}</small>"
            if (node.get("approval") or {}).get("decision"):
                line += f" <b>[{esc(node['approval']['decision'])}]</b>"
            if node.get("audit") == "blocked":
                line += " <b>[blocked]</b>"
            if node.get("deps"):
                line += f" <small>after {esc(', '.join(node['deps']))}</small>"
            if node.get("t0") is not None and node.get("t1") is not None:
                line += f" <small>{node['t1'] - node['t0']:.2f}s</small>"
            detail = node.get("error") or node.get("preview")
            if detail:
                line += f' <span style="color: #555">{esc(clip(str(detail), 200))}</span>'
            out.append(f"<li>{line}{_details_html(node)}")
            walk(node["id"])
            out.append("</li>")
        out.append("</ul>")

    walk(None)
    for response in doc["responses"]:
        if not response["final"] and response["text"].strip():
            out.append(f'<div style="white-space: pre-wrap"><i>{esc(response["text"])}</i></div>')
    if doc["status"] not in ("running", "ok") and doc.get("status_message"):
        out.append(f'<div style="color: #b00">{esc(doc["status_message"])}</div>')
    if doc.get("dashboard") and safe_url(doc["dashboard"]):
        link = esc(doc["dashboard"], quote=True)
        out.append(f'<div><a href="{link}" target="_blank">Dask dashboard</a></div>')
    cost = footer["cost"]
    # An unknown cost (a local or replay model) is left out, as the live view does.
    cost_text = "" if cost is None else f" · ${cost:.4f}"
    out.append(
        f'<div style="color: #777; font-size: 11px">{plural(footer["turns"], "turn")} · '
        f"{footer['tokens']} tokens{cost_text} · {footer['seconds']:.1f}s</div>"
    )
    out.append("</div>")
    # Every field above is escaped; the sanitizer is the second line of defence.
    return sanitize_view_html("".join(out).replace("$", DOLLAR_HTML))

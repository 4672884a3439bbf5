"""The live view's state: events in, compact deltas out (no Jupyter here).

:class:`RunState` folds a run's events (parser and runtime, docs/runtime.md#events) into a
small JSON document — thoughts, outside text, responses, the action tree,
variables, footer — and records, for each change, a *delta op*. Pending ops
are merged per target (one op per thought, response or node, however many
tokens or state changes arrived), so a flush sends at most one op per thing
that changed since the last flush: the coalescing that keeps the widget at
~20 messages a second whatever the token rate.

Op shapes (lists, to stay small on the wire; ``widgets/view.js`` applies them)::

    ["run", {field: value}]              top-level fields: status, message, answer
                                         (answer only when it differs from the final
                                         response's text, e.g. with $vars filled in)
    ["th", index, text, done]            append to thought ``index``; ``done`` flag
    ["tx", text]                         append outside text
    ["rs", index, text, final, done]     append to response ``index``
    ["n", id, {field: value}]            upsert an action (or nested-run) node
    ["w", text]                          a warning
    ["v", name, {"type", "preview"}]     a variable got a value
    ["f", {"turns", "tokens", "cost", "seconds"}]

The same state renders as ``text/plain``, ``text/markdown`` and ``text/html``
for front ends without the widget (nbconvert, GitHub): :func:`render_text`,
:func:`render_markdown`, :func:`render_html`.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from typing import Any

from .safe_markup import (
    code_span,
    literal_markdown,
    safe_url,
    sanitize_view_html,
    terminal_safe,
)

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

Op = list[Any]


def plural(count: int, noun: str) -> str:
    """``1 turn``, ``2 turns``: as the live view writes counts."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


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

_PREVIEW_CHARS = 300
_TRACEBACK_CHARS = 6000


# Fenced blocks and inline code spans: their `$` are code, not math.
_CODE = re.compile(r"(^[ \t]*(```|~~~)[\s\S]*?(^[ \t]*\2|\Z)|`[^`\n]*`)", re.MULTILINE)


# A dollar the markdown step reads as literal (``\\$``: Jupyter's math
# extraction, GitHub, VS Code) inside its own element: MathJax, which
# typesets the rendered page in JupyterLab and Notebook 7, never pairs
# delimiters across elements.
_DOLLAR_MD = "<span>\\$</span>"
_DOLLAR_HTML = "<span>$</span>"


def escape_math(markdown: str) -> str:
    """Escape ``$`` outside code so no markdown renderer typesets the text as math."""
    if "$" not in markdown:
        return markdown
    out: list[str] = []
    pos = 0
    for match in _CODE.finditer(markdown):
        out.append(markdown[pos : match.start()].replace("$", _DOLLAR_MD))
        out.append(match.group(0))
        pos = match.end()
    out.append(markdown[pos:].replace("$", _DOLLAR_MD))
    return "".join(out)


def event_data(event: Any) -> dict[str, Any]:
    """An event's fields as a dict: its ``model_dump()`` (parser and runtime events alike)."""
    data: dict[str, Any] = event.model_dump()
    return data


def _clip(text: str, limit: int = _PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- what an approval box shows ---------------------------------------------

# How an approval box names the actions a request runs under.
_ASKERS = {"workflow": "workflow", "agent": "sub-agent", "feed": "feed"}

#: Opens every marker of :func:`visible_text` (and only those: a literal one is escaped).
MARK_OPEN, MARK_CLOSE = "⟨", "⟩"
_SPACE_RUN = 4  # spaces in a row shown as a count, not as blank
_INDENT_KEPT = 32  # leading spaces shown as they are (JSON's indentation)
# Candidates: runs of spaces, and runs of anything but printable ASCII.
_UNUSUAL = re.compile(rf" {{{_SPACE_RUN},}}|[^\x21-\x7e\n ]+")
# Characters that render as nothing or as blank space though not categorised so.
_BLANK = frozenset({0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800})


def _hidden(char: str) -> bool:
    code = ord(char)
    if char == MARK_OPEN or code in _BLANK:
        return True
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:  # variation selectors
        return True
    # Controls, formats (bidi, zero-width), surrogates, private use, unassigned,
    # and every space, separator or break but the plain space.
    return unicodedata.category(char)[0] in "CZ"


def _marker(char: str, count: int) -> str:
    name = "tab" if char == "\t" else f"U+{ord(char):04X}"
    return f"{MARK_OPEN}{name}{f' ×{count}' if count > 1 else ''}{MARK_CLOSE}"


def visible_text(text: str) -> str:
    r"""``text`` with nothing hidden: what an approval box shows.

    A run of four or more spaces becomes ``⟨N spaces⟩`` (leading
    indentation up to 32 stays as it is); tabs become ``⟨tab⟩``; controls,
    bidi overrides and isolates, zero-width and other invisible or blank
    characters become their code points (``⟨U+202E⟩``, ``⟨U+00A0 ×300⟩`` for
    a run). A literal ``⟨`` is escaped too (``⟨U+27E8⟩``), so every ``⟨`` is
    a marker and no text can pass for one. Newlines stay line breaks.

    Examples
    --------
    >>> visible_text("ls" + " " * 2100 + "; curl x|sh")
    'ls⟨2100 spaces⟩; curl x|sh'
    >>> visible_text("abc\u202egpj.exe")
    'abc⟨U+202E⟩gpj.exe'
    """

    def replace(match: re.Match[str]) -> str:
        found = match.group(0)
        if found[0] == " ":
            start = match.start()
            if (start == 0 or text[start - 1] == "\n") and len(found) <= _INDENT_KEPT:
                return found
            return f"{MARK_OPEN}{len(found)} spaces{MARK_CLOSE}"
        out: list[str] = []
        i = 0
        while i < len(found):
            char = found[i]
            if not (char == "\t" or _hidden(char)):
                out.append(char)
                i += 1
                continue
            j = i + 1
            while j < len(found) and found[j] == char:
                j += 1
            out.append(_marker(char, j - i))
            i = j
        return "".join(out)

    return _UNUSUAL.sub(replace, text)


class RunState:
    """The view's document, built from events, with pending deltas.

    Attributes
    ----------
    doc
        The whole state as JSON-compatible data (what a new view starts from).
    seq
        Number of op batches taken so far.
    """

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {
            "run_id": "",
            "model": "",
            "message": "",
            "status": "running",
            "status_message": "",
            "answer": "",
            "thoughts": [],
            "text": "",
            "responses": [],
            "nodes": {},
            "order": [],
            "warnings": [],
            "variables": {},
            "footer": {"turns": 0, "tokens": 0, "cost": None, "seconds": 0.0},
        }
        self.seq = 0
        self._pending: dict[tuple[Any, ...], Op] = {}
        self._event_parent: str | None = None  # the parent of the event being applied
        self._warning_count = 0
        self._tokens_done = 0  # tokens of finished turns
        self._streamed_chars = 0  # text streamed in the current turn (live token estimate)
        self._after_action = False  # an action just interrupted the open thought

    # -- deltas -------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether ops are waiting to be sent."""
        return bool(self._pending)

    @property
    def finished(self) -> bool:
        """Whether the top-level run has ended."""
        return bool(self.doc["status"] != "running")

    def take_ops(self) -> list[Op]:
        """Return the pending ops (merged per target) and clear them."""
        footer = self._pending.get(("f",))
        if footer is not None:
            footer[1] = dict(self.doc["footer"])
        ops = list(self._pending.values())
        self._pending.clear()
        self.seq += 1
        return ops

    def _op_run(self, **fields: Any) -> None:
        self.doc.update(fields)
        op = self._pending.setdefault(("run",), ["run", {}])
        op[1].update(fields)

    def _op_append(self, key: tuple[Any, ...], op: Op, text: str) -> None:
        # Text ops carry their text at index 2 (th, rs) or 1 (tx); merge by concatenation.
        existing = self._pending.get(key)
        index = 1 if op[0] == "tx" else 2
        if existing is None:
            self._pending[key] = op
        else:
            existing[index] += text
            existing[index + 1 :] = op[index + 1 :]

    def _op_node(self, node_id: str, **fields: Any) -> None:
        nodes: dict[str, dict[str, Any]] = self.doc["nodes"]
        node = nodes.get(node_id)
        if node is None:
            node = {
                "id": node_id,
                "type": "",
                "name": "",
                "mode": "",
                "deps": [],
                "parent": self._guess_parent(node_id),
                "state": "queued",
                "t0": None,
                "t1": None,
                "preview": "",
                "error": "",
            }
            nodes[node_id] = node
            self.doc["order"].append(node_id)
            op = self._pending.setdefault(("n", node_id), ["n", node_id, {}])
            op[2].update(node)
        node.update(fields)
        op = self._pending.setdefault(("n", node_id), ["n", node_id, {}])
        op[2].update(fields)

    def _guess_parent(self, node_id: str) -> str | None:
        # Nested runs' actions are nested by an "outer/inner" id, or by the
        # parent their event names. Never by a nested run that is open: the
        # model's own a1, streamed while a sub-agent runs, is not the sub-agent's
        # (its approval box would name the wrong asker).
        if "/" in node_id:
            return node_id.rsplit("/", 1)[0]
        return self._event_parent

    def _footer(self, **fields: Any) -> None:
        self.doc["footer"].update(fields)
        self._footer_op()

    def _footer_op(self) -> None:
        # The footer changes with nearly every streamed chunk (tokens, time):
        # its op is filled with the footer as it is when the ops are taken.
        # Equal to a copy per change, since while this op waits every
        # change of the footer comes here again.
        if ("f",) not in self._pending:
            self._pending[("f",)] = ["f", None]

    # -- events -------------------------------------------------------------

    def apply(self, event: Any) -> None:
        """Fold one event (a pydantic event model, or its dict) into the state."""
        data: dict[str, Any] = event if isinstance(event, dict) else event_data(event)
        kind = data.get("type", "")
        self._event_parent = data.get("parent")
        if data.get("parent") and kind.startswith("action_"):
            self._adopt_parent(data["parent"], data)
        handler = getattr(self, f"_on_{kind}", None)
        t = data.get("t")
        if isinstance(t, int | float) and data.get("parent") is None:
            self._footer_time(float(t))
        if handler is not None:
            handler(data)

    def _adopt_parent(self, parent: str, e: dict[str, Any]) -> None:
        # Actions run for something that is no action of this run (a context
        # feed's workflow: parent ``feed.ID``) get a node for it, so they nest
        # under it as a sub-agent's actions nest under its action.
        node = self.doc["nodes"].get(parent)
        if node is None:
            outer = parent.rsplit("/", 1)[0] if "/" in parent else None
            kind = "feed" if parent.startswith("feed.") else ""
            self._op_node(parent, type=kind, mode="", parent=outer, state="running", t0=e.get("t"))
        elif node["type"] == "feed" and node["state"] != "running" and e["type"] == "action_queued":
            # A periodic feed's next refresh: the node shows the latest one.
            self._op_node(parent, state="running", t0=e.get("t"), t1=None, preview="", error="")

    def _footer_time(self, t: float) -> None:
        if t > self.doc["footer"]["seconds"]:
            # Only the footer's own op; not worth a message on its own, it
            # travels with whatever else changed.
            self.doc["footer"]["seconds"] = round(t, 3)
            if self._pending:
                self._footer_op()

    @staticmethod
    def _nested(e: dict[str, Any]) -> bool:
        # A nested run's events carry the id of the action that runs it
        # (``nest_event``); the parent's own go on streaming meanwhile.
        return e.get("parent") is not None

    def _on_run_started(self, e: dict[str, Any]) -> None:
        if not self._nested(e):
            self._op_run(run_id=e["run_id"], model=e.get("model", ""), message=e["message"])
            return
        self._op_node(e["parent"], subrun=e["run_id"])

    def _on_run_finished(self, e: dict[str, Any]) -> None:
        if self._nested(e):  # a sub-agent's run ended, not this one
            return
        usage = e.get("usage") or {}
        self._footer(
            turns=usage.get("turns", self.doc["footer"]["turns"]),
            tokens=usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
            or self.doc["footer"]["tokens"],
            cost=usage.get("cost"),
            seconds=round(float(usage.get("seconds") or e.get("t") or 0.0), 3),
        )
        self._close_thoughts()
        answer = e.get("answer", "")
        finals = [r["text"] for r in self.doc["responses"] if r["final"]]
        if finals and answer.strip() == finals[-1].strip():
            # Already on the wire as the final response: don't send it twice.
            answer = ""
        self._op_run(status=e["status"], status_message=e.get("message", ""), answer=answer)

    def _on_turn_started(self, e: dict[str, Any]) -> None:
        if not self._nested(e):
            self._footer(turns=max(self.doc["footer"]["turns"], int(e["turn"])))

    def _on_turn_ended(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        # A sync action can end the turn inside an unclosed thought: it is over.
        self._close_thoughts()
        usage = e.get("usage") or {}
        self._tokens_done += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
        self._streamed_chars = 0
        cost = usage.get("cost")
        if cost is not None:
            cost += self.doc["footer"]["cost"] or 0.0
        else:
            cost = self.doc["footer"]["cost"]
        self._footer(tokens=self._tokens_done, cost=cost)

    def _close_thoughts(self) -> None:
        for i, thought in enumerate(self.doc["thoughts"]):
            if not thought["done"]:
                thought["done"] = True
                self._op_append(("th", i), ["th", i, "", True], "")
        self._after_action = False

    def _streamed(self, text: str) -> None:
        # Usage arrives with the end of a turn; until then the footer counts
        # what streamed (~4 characters a token) so it never sits at 0.
        self._streamed_chars += len(text)
        estimate = self._tokens_done + math.ceil(self._streamed_chars / 4)
        if estimate > self.doc["footer"]["tokens"]:
            self._footer(tokens=estimate)

    def _on_thought_start(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        self.doc["thoughts"].append({"text": "", "done": False})
        i = len(self.doc["thoughts"]) - 1
        self._op_append(("th", i), ["th", i, "", False], "")

    def _on_thought_delta(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        if not self.doc["thoughts"]:
            self._on_thought_start(e)
        i = len(self.doc["thoughts"]) - 1
        text = e["text"]
        self._streamed(text)
        thought = self.doc["thoughts"][i]
        if self._after_action:
            # The line an action took in the thought leaves no blank line behind.
            if not thought["text"].strip() or thought["text"].endswith("\n"):
                text = text.lstrip(" \t\n")
            if text:
                self._after_action = False
            if not text:
                return
        thought["text"] += text
        self._op_append(("th", i), ["th", i, text, False], text)

    def _on_thought_end(self, e: dict[str, Any]) -> None:
        if self._nested(e) or not self.doc["thoughts"]:
            return
        i = len(self.doc["thoughts"]) - 1
        self.doc["thoughts"][i]["done"] = True
        self._op_append(("th", i), ["th", i, "", True], "")
        self._after_action = False

    def _on_text(self, e: dict[str, Any]) -> None:
        if self._nested(e) or not e["text"]:
            return
        self._streamed(e["text"])
        self.doc["text"] += e["text"]
        self._op_append(("tx",), ["tx", e["text"]], e["text"])

    def _on_response_start(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        final = bool(e.get("final", True))
        self.doc["responses"].append({"text": "", "final": final, "done": False})
        i = len(self.doc["responses"]) - 1
        self._op_append(("rs", i), ["rs", i, "", final, False], "")

    def _on_response_delta(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        if not self.doc["responses"]:
            self._on_response_start({"final": True})
        self._streamed(e["text"])
        i = len(self.doc["responses"]) - 1
        r = self.doc["responses"][i]
        r["text"] += e["text"]
        self._op_append(("rs", i), ["rs", i, e["text"], r["final"], False], e["text"])

    def _on_response_end(self, e: dict[str, Any]) -> None:
        if self._nested(e) or not self.doc["responses"]:
            return
        i = len(self.doc["responses"]) - 1
        r = self.doc["responses"][i]
        r["done"] = True
        r["final"] = bool(e.get("final", r["final"]))
        self._op_append(("rs", i), ["rs", i, "", r["final"], True], "")

    def _on_action_open(self, e: dict[str, Any]) -> None:
        thoughts = self.doc["thoughts"]
        if not self._nested(e) and thoughts and not thoughts[-1]["done"]:
            self._after_action = True
        attrs = e.get("attrs") or {}
        self._op_node(
            e["id"], type=attrs.get("type", ""), mode=attrs.get("mode", "sync"), state="parsing"
        )

    def _on_action_parsed(self, e: dict[str, Any]) -> None:
        action = e["action"]
        body = action.get("body") or {}
        name = body.get("name") if isinstance(body.get("name"), str) else ""
        if not name and action.get("type") == "llm":
            name = _clip(str(body.get("prompt", "")), 40)
        operation = body.get("operation")
        if action.get("type") == "relic" and isinstance(operation, str):
            name = f"{name}.{operation}"  # which service, and what was asked of it
        fields: dict[str, Any] = {
            "type": str(action.get("type", "")),
            "name": name,
            "mode": str(action.get("mode", "sync")),
            "deps": list(action.get("depends_on") or ()),
        }
        if action.get("output_key"):
            fields["key"] = action["output_key"]
        node = self.doc["nodes"].get(action["id"])
        if node is None or node["state"] == "parsing":
            fields["state"] = "queued"
        self._op_node(action["id"], **fields)

    def _on_action_error(self, e: dict[str, Any]) -> None:
        node_id = e.get("id")
        if node_id:
            self._op_node(node_id, state="failed", error=_clip(e["message"]))
        else:
            self._on_warning({"message": e["message"]})

    def _on_action_queued(self, e: dict[str, Any]) -> None:
        action = e.get("action") or {}
        self._on_action_parsed({"action": action})
        waiting = list(e.get("waiting_on") or ())
        self._op_node(
            e["id"],
            deps=list(e.get("depends_on") or action.get("depends_on") or ()),
            state="waiting" if waiting else "queued",
        )

    def _on_action_started(self, e: dict[str, Any]) -> None:
        self._op_node(e["id"], state="running", t0=e["t"], attempt=e.get("attempt", 1))

    def _on_action_succeeded(self, e: dict[str, Any]) -> None:
        self._op_node(e["id"], state="succeeded", t1=e["t"], preview=_clip(e.get("preview", "")))

    def _on_action_failed(self, e: dict[str, Any]) -> None:
        fields: dict[str, Any] = {
            "state": "failed",
            "t1": e["t"],
            "error": _clip(e.get("error", "")),
        }
        if e.get("traceback"):
            # Shown collapsed under the failed action.
            fields["traceback"] = _clip(e["traceback"], _TRACEBACK_CHARS)
        self._op_node(e["id"], **fields)

    def _on_action_skipped(self, e: dict[str, Any]) -> None:
        self._op_node(e["id"], state="skipped", t1=e["t"], error=_clip(e.get("reason", "")))

    def _on_action_cancelled(self, e: dict[str, Any]) -> None:
        self._op_node(e["id"], state="cancelled", t1=e["t"], error=e.get("reason", "cancelled"))

    def _on_action_placed(self, e: dict[str, Any]) -> None:
        # Where a cluster runs the action; a second placement is a retry after a lost worker.
        fields: dict[str, Any] = {"where": e.get("where", ""), "backend": e.get("backend", "")}
        if e.get("moved_from"):
            fields["moved_from"] = e["moved_from"]
            fields["placement"] = e.get("placement", 2)
        dashboard = e.get("dashboard")
        if dashboard:
            fields["dashboard"] = dashboard
            if self.doc.get("dashboard") != dashboard:
                self._op_run(dashboard=dashboard)
        self._op_node(e["id"], **fields)

    def _on_approval_requested(self, e: dict[str, Any]) -> None:
        # The exact parameters, as the call will get them, whole and with
        # nothing invisible: the user judges what runs. The digest is of the
        # text the box shows, computed here: an answer must name it.
        from ..executors.approval import approval_digest, approval_text

        text = e.get("text") or approval_text(e.get("parameters") or {})
        approval = {
            "tool": e.get("tool", ""),
            "kind": e.get("kind", "tool"),
            "token": e.get("token", ""),
            "digest": approval_digest(text),
            "asker": self._asker(e["id"]),
            "parameters": visible_text(text),
            "decision": "",
        }
        self._op_node(e["id"], state="awaiting approval", approval=approval)

    def _asker(self, node_id: str) -> str:
        """Who asks: ``run ID › workflow 'deploy' (w1) › sub-agent 'critic' (w1/c)``."""
        nodes: dict[str, dict[str, Any]] = self.doc["nodes"]
        chain: list[str] = []
        node = nodes.get(node_id)
        parent = node.get("parent") if node is not None else self._guess_parent(node_id)
        while parent in nodes and len(chain) <= len(nodes):  # bounded: a parent loop ends
            node = nodes[parent]
            kind = _ASKERS.get(node["type"], node["type"] or "action")
            name = f" '{node['name']}'" if node.get("name") else ""
            run = f", run {node['subrun']}" if node.get("subrun") else ""
            chain.append(f"{kind}{name} ({node['id']}{run})")
            parent = node.get("parent")
        return " › ".join([f"run {self.doc['run_id'] or '?'}", *reversed(chain)])

    def _on_approval_decided(self, e: dict[str, Any]) -> None:
        node = self.doc["nodes"].get(e["id"], {})
        approval = dict(node.get("approval") or {"tool": e.get("tool", ""), "parameters": ""})
        verdict = "approved" if e.get("approved") else "denied"
        approval["decision"] = f"{verdict} ({e.get('by', 'user')})"
        state = "running" if e.get("approved") else node.get("state", "running")
        self._op_node(e["id"], state=state, approval=approval)

    def _on_feed_updated(self, e: dict[str, Any]) -> None:
        # Only a feed whose fetch ran actions has a node (see _adopt_parent).
        node_id = f"feed.{e['feed_id']}"
        node = self.doc["nodes"].get(node_id)
        if node is None or node["type"] != "feed":
            return
        if e.get("error"):
            self._op_node(node_id, state="failed", t1=e["t"], preview="", error=_clip(e["error"]))
            return
        preview = f"{e.get('chars', 0)} characters" + (" (truncated)" if e.get("truncated") else "")
        self._op_node(node_id, state="succeeded", t1=e["t"], preview=preview, error="")

    def _on_variable_bound(self, e: dict[str, Any]) -> None:
        entry = {"type": e.get("type_name", ""), "preview": _clip(e.get("preview", ""), 120)}
        self.doc["variables"][e["name"]] = entry
        self._pending[("v", e["name"])] = ["v", e["name"], entry]

    def _on_warning(self, e: dict[str, Any]) -> None:
        self.doc["warnings"].append(e["message"])
        self._warning_count += 1
        self._pending[("w", self._warning_count)] = ["w", e["message"]]


# -- static renderings ------------------------------------------------------


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


def _text_line(node: dict[str, Any], depth: int) -> str:
    icon = STATE_ICONS.get(node["state"], "?")
    line = f"{'  ' * depth}{icon} {_node_label(node)}: {node['state']}{_placement(node)}"
    if node.get("deps"):
        line += f" <- {', '.join(node['deps'])}"
    if (node.get("approval") or {}).get("decision"):
        line += f" [{node['approval']['decision']}]"
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
            lines.append(_text_line(node, depth))
            approval = node.get("approval")
            if approval:
                pad = "  " * (depth + 1)
                lines.append(f"{pad}approval: {_approval_head(approval)}")
                lines.extend(f"{pad}| {line}" for line in approval["parameters"].split("\n"))
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
            if node.get("deps"):
                item += f" {literal_markdown('(after ' + ', '.join(node['deps']) + ')')}"
            detail = node.get("preview") or node.get("error")
            if detail:
                item += ": " + literal_markdown(_clip(str(detail), 120).replace("\n", " "))
            items.append(item)
            approval = node.get("approval")
            if approval:
                pad = "  " * depth + "  "
                shown = approval["parameters"]
                fence = "`" * max(3, 1 + max((len(r) for r in re.findall("`+", shown)), default=0))
                items.append(f"{pad}approval: {code_span(_approval_head(approval))}")
                items.extend(f"{pad}{line}" for line in (f"{fence}text", *shown.split("\n"), fence))
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
    """Under a node's line: its traceback (collapsed) and its approval's request."""
    esc = html.escape
    out = ""
    if node.get("traceback"):
        out += (
            '<details><summary style="color: #b00">traceback</summary>'
            f'<pre style="font-size: 11px">{esc(node["traceback"])}</pre></details>'
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
            if node.get("deps"):
                line += f" <small>after {esc(', '.join(node['deps']))}</small>"
            if node.get("t0") is not None and node.get("t1") is not None:
                line += f" <small>{node['t1'] - node['t0']:.2f}s</small>"
            detail = node.get("error") or node.get("preview")
            if detail:
                line += f' <span style="color: #555">{esc(_clip(str(detail), 200))}</span>'
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
    return sanitize_view_html("".join(out).replace("$", _DOLLAR_HTML))


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
        print(terminal_safe(_text_line(node, depth)), flush=True)

    def finish(self) -> None:
        """Print the final state."""
        print(render_text(self.state.doc), flush=True)

"""The live view's state: events in, compact deltas out (no Jupyter here).

:class:`RunState` folds a run's events (parser and runtime, docs/runtime.md#events) into a
small JSON document — thoughts, outside text, responses, the action tree,
variables, footer — and records, for each change, a *delta op*. Pending ops
are merged per target (one op per thought, response or node, however many
tokens or state changes arrived), so a flush sends at most one op per thing
that changed since the last flush: the coalescing that keeps the widget at
~20 messages a second whatever the token rate.

Every event type of the protocol and the runtime has a handler in
:data:`HANDLERS` (keyed by the event's ``type``, from its class) or is named
in :data:`IGNORED`: a new event type fails a test until the view decides.

Op shapes (lists, to stay small on the wire; ``widgets/view.js`` applies them)::

    ["run", {field: value}]              top-level fields: status, message, answer
                                         (answer only when it differs from the final
                                         response's text, e.g. with $vars filled in or
                                         figures marked unverified), grounding (the
                                         note under the answer, "" when none), waiting
                                         ({"turn", "since", "prompt_tokens"} from a turn's
                                         start to its first streamed text, else None)
    ["th", index, text, done]            append to thought ``index``; ``done`` flag
    ["tx", text]                         append outside text
    ["rs", index, text, final, done]     append to response ``index``
    ["n", id, {field: value}]            upsert an action (or nested-run, or feed) node
    ["w", text]                          a warning
    ["v", name, {"type", "preview"}]     a variable got a value
    ["f", {"turns", "tokens", "cost", "seconds"}]
    ["tl", section, index, value]        set doc["timeline"][section][index] (.timeline)

A node's fields: ``id type name mode deps parent state t0 t1 preview
error``, and when they apply ``key attempt subrun where backend moved_from
placement dashboard traceback approval log`` (a tool's stderr, its tail),
``args`` (what the action was given: :func:`arguments_text`), ``code`` and
``changes`` and ``figures`` (a count) of a run in the notebook's namespace,
and ``audit`` (``ok``, ``error`` or ``blocked``: how an internal action or a
context feed declaration went).

The figures themselves (PNG) are kept in :attr:`RunState.figures`, out of
the document: the static view draws them, the live widget is not sent them.
"""

from __future__ import annotations

import json
import math
import typing
from collections.abc import Callable
from typing import Any

from ...protocol import parser_events as parser
from ...runtime import run_events as runtime
from ...runtime.grounding import marked_answer
from .text import UNSTOPPED_NOTE, UNSTOPPED_STATE, clip, visible_text
from .timeline import Timeline

__all__ = ["RunState", "event_data"]

Op = list[Any]

_TRACEBACK_CHARS = 6000
_LOG_CHARS = 4000  # the tail of a tool's stderr a node keeps
_ARGS_CHARS = 4000  # the arguments a node keeps (an approval box shows its request whole)
_PNG = b"\x89PNG\r\n\x1a\n"
# Body fields that say how an action runs, not what it is given (the label shows the name).
_CONTROL_FIELDS = frozenset(
    {"name", "id", "mode", "output_key", "depends_on", "timeout", "retries", "type"}
)


def event_data(event: Any) -> dict[str, Any]:
    """An event's fields as a dict: its ``model_dump()`` (parser and runtime events alike)."""
    data: dict[str, Any] = event.model_dump()
    return data


def event_type(cls: type) -> str:
    """The ``type`` an event class's instances carry (its ``Literal`` annotation)."""
    (value,) = typing.get_args(typing.get_type_hints(cls)["type"])
    return str(value)


def arguments_text(body: dict[str, Any]) -> str:
    """What an action was given, one field a line, for the views' collapsed *arguments*.

    A tool's, workflow's or internal action's ``parameters``, a relic's
    ``operation`` and parameters, an ``llm`` action's ``prompt`` (and
    ``system``, ``model``), a sub-agent's ``message``: ``key: value``, a
    string as it is (several lines indented under its key), anything else as
    JSON. Invisible and misleading characters are made visible
    (:func:`~.text.visible_text`); long arguments are clipped.

    Examples
    --------
    >>> print(arguments_text({"name": "add", "parameters": {"a": 1, "note": "x\ny"}}))
    a: 1
    note:
      x
      y
    """
    fields = {k: v for k, v in body.items() if k not in _CONTROL_FIELDS and k != "parameters"}
    parameters = body.get("parameters")
    if isinstance(parameters, dict):
        fields.update(parameters)
    elif parameters is not None:
        fields["parameters"] = parameters
    lines: list[str] = []
    for key, value in fields.items():
        if isinstance(value, str) and "\n" in value:
            lines.append(f"{key}:")
            lines.extend(f"  {line}" for line in value.split("\n"))
        elif isinstance(value, str):
            lines.append(f"{key}: {value}")
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}")
    return clip(visible_text("\n".join(lines)), _ARGS_CHARS)


# How an approval box names the actions a request runs under.
_ASKERS = {"workflow": "workflow", "agent": "sub-agent", "feed": "feed"}


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
            "grounding": "",
            "thoughts": [],
            "text": "",
            "responses": [],
            "nodes": {},
            "order": [],
            "warnings": [],
            "variables": {},
            "footer": {"turns": 0, "tokens": 0, "cost": None, "seconds": 0.0},
            "waiting": None,
        }
        # node id -> the PNGs the kernel drew for it (never anything the model wrote).
        self.figures: dict[str, list[bytes]] = {}
        self.seq = 0
        self._pending: dict[tuple[Any, ...], Op] = {}
        # doc["timeline"]: when the model wrote and each action ran (its ops: "tl").
        self.timeline = Timeline(self.doc, self._pending)
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
        """Fold one event (an event object, or its dict) into the state.

        Its handler is :data:`HANDLERS`'s entry for its ``type``; a type the
        view does not know (one newer than this version) only moves the clock.
        """
        data: dict[str, Any] = event if isinstance(event, dict) else event_data(event)
        kind = data.get("type", "")
        if kind == "action_changes" and not isinstance(event, dict):
            # The figures travel on the in-process event only (no transcript keeps them).
            pngs = [png for png in getattr(event, "pngs", ()) if png.startswith(_PNG)]
            if pngs:
                self.figures.setdefault(data["id"], []).extend(pngs)
        self._event_parent = data.get("parent")
        if data.get("parent") and kind.startswith("action_"):
            self._adopt_parent(data["parent"], data)
        t = data.get("t")
        if isinstance(t, int | float) and data.get("parent") is None:
            self._footer_time(float(t))
        handler = HANDLERS.get(kind)
        if handler is not None:
            handler(self, data)
        self.timeline.apply(data)

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
        self._stream_began(e)
        usage = e.get("usage") or {}
        self._footer(
            turns=usage.get("turns", self.doc["footer"]["turns"]),
            tokens=usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
            or self.doc["footer"]["tokens"],
            cost=usage.get("cost"),
            seconds=round(float(usage.get("seconds") or e.get("t") or 0.0), 3),
        )
        self._close_thoughts()
        # Figures no result backs carry " *(unverified)*"; the note says how many.
        answer, note = marked_answer(e.get("answer", ""), e.get("grounding"))
        finals = [r["text"] for r in self.doc["responses"] if r["final"]]
        if finals and answer.strip() == finals[-1].strip():
            # Already on the wire as the final response: don't send it twice.
            answer = ""
        fields = {"status": e["status"], "status_message": e.get("message", ""), "answer": answer}
        self._op_run(**fields, **({"grounding": note} if note else {}))

    def _on_turn_started(self, e: dict[str, Any]) -> None:
        if not self._nested(e):
            self._footer(turns=max(self.doc["footer"]["turns"], int(e["turn"])))
            # Until the first token: the model is reading the prompt (a minute on a CPU).
            waiting = {"turn": e["turn"], "since": e.get("t") or 0.0}
            waiting["prompt_tokens"] = e.get("prompt_tokens")
            self._op_run(waiting=waiting)

    def _stream_began(self, e: dict[str, Any]) -> None:
        # The first text of a turn (thought, response, outside text, an action's tag).
        if self.doc["waiting"] is not None and not self._nested(e):
            self._op_run(waiting=None)

    def _on_turn_ended(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        self._stream_began(e)
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
        self._stream_began(e)
        self.doc["thoughts"].append({"text": "", "done": False})
        i = len(self.doc["thoughts"]) - 1
        self._op_append(("th", i), ["th", i, "", False], "")

    def _on_thought_delta(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        self._stream_began(e)
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
        self._stream_began(e)
        self._streamed(e["text"])
        self.doc["text"] += e["text"]
        self._op_append(("tx",), ["tx", e["text"]], e["text"])

    def _on_response_start(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        self._stream_began(e)
        final = bool(e.get("final", True))
        self.doc["responses"].append({"text": "", "final": final, "done": False})
        i = len(self.doc["responses"]) - 1
        self._op_append(("rs", i), ["rs", i, "", final, False], "")

    def _on_response_delta(self, e: dict[str, Any]) -> None:
        if self._nested(e):
            return
        self._stream_began(e)
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
        self._stream_began(e)
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
            name = clip(str(body.get("prompt", "")), 40)
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
        args = arguments_text(body)
        if args and (node is None or node.get("args") != args):  # queued repeats the parse
            fields["args"] = args
        if node is None or node["state"] == "parsing":
            fields["state"] = "queued"
        self._op_node(action["id"], **fields)

    def _on_action_error(self, e: dict[str, Any]) -> None:
        node_id = e.get("id")
        if not node_id:
            self._on_warning({"message": e["message"]})
            return
        nodes = self.doc["nodes"]
        outer, _, own = node_id.rpartition("/")  # a nested run's ids are prefixed
        feed = self._feed_node(own, outer or None)
        if node_id not in nodes and feed in nodes:
            node_id = feed  # a <context_feed> that was not created: no action has that id
        self._op_node(node_id, state="failed", error=clip(e["message"]))

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
        self._op_node(e["id"], state="succeeded", t1=e["t"], preview=clip(e.get("preview", "")))

    def _on_action_failed(self, e: dict[str, Any]) -> None:
        fields: dict[str, Any] = {
            "state": "failed",
            "t1": e["t"],
            "error": clip(e.get("error", "")),
        }
        if e.get("traceback"):
            # Shown collapsed under the failed action.
            fields["traceback"] = clip(e["traceback"], _TRACEBACK_CHARS)
        self._op_node(e["id"], **fields)

    def _on_action_skipped(self, e: dict[str, Any]) -> None:
        self._op_node(e["id"], state="skipped", t1=e["t"], error=clip(e.get("reason", "")))

    def _on_action_cancelled(self, e: dict[str, Any]) -> None:
        if e.get("unstopped"):
            # Its thread runs on (Python cannot stop it): "cancelled" would
            # tell the user nothing more happens.
            error = f"{UNSTOPPED_NOTE}: {e['unstopped']}"
            self._op_node(e["id"], state=UNSTOPPED_STATE, t1=e["t"], error=error)
            return
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
        from ...executors.approval import approval_digest, approval_text

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
        # Only a feed the model declared, or whose fetch ran actions, has a
        # node (see _on_context_feed, _adopt_parent).
        node_id = self._feed_node(e["feed_id"], e.get("parent"))
        node = self.doc["nodes"].get(node_id)
        if node is None or node["type"] != "feed":
            return
        if e.get("error"):
            self._op_node(node_id, state="failed", t1=e["t"], preview="", error=clip(e["error"]))
            return
        preview = f"{e.get('chars', 0)} characters" + (" (truncated)" if e.get("truncated") else "")
        self._op_node(node_id, state="succeeded", t1=e["t"], preview=preview, error="")

    def _on_variable_bound(self, e: dict[str, Any]) -> None:
        entry = {"type": e.get("type_name", ""), "preview": clip(e.get("preview", ""), 120)}
        self.doc["variables"][e["name"]] = entry
        self._pending[("v", e["name"])] = ["v", e["name"], entry]

    def _on_warning(self, e: dict[str, Any]) -> None:
        self.doc["warnings"].append(e["message"])
        self._warning_count += 1
        self._pending[("w", self._warning_count)] = ["w", e["message"]]

    def _on_action_log(self, e: dict[str, Any]) -> None:
        # A tool's stderr, kept with its node: the tail, where a failure explains itself.
        node = self.doc["nodes"].get(e["id"]) or {}
        log = str(node.get("log") or "") + e.get("text", "")
        if len(log) > _LOG_CHARS:
            log = "…" + log[-(_LOG_CHARS - 1) :]
        self._op_node(e["id"], log=log)

    def _on_action_changes(self, e: dict[str, Any]) -> None:
        # The agent's code in the notebook's namespace: the code whole (the
        # views collapse it) and what it changed, marked when in place.
        changed = ("⚠ " if e.get("in_place") else "") + str(e.get("summary", ""))
        fields: dict[str, Any] = {"code": str(e.get("code", "")), "changes": changed}
        if e.get("figures"):
            fields["figures"] = int(e["figures"])
        self._op_node(e["id"], **fields)

    @staticmethod
    def _feed_node(feed_id: str, parent: str | None) -> str:
        """The node of feed ``feed_id`` of the run ``parent`` names (the top run's: None)."""
        return f"{parent}/feed.{feed_id}" if parent else f"feed.{feed_id}"

    def _on_context_feed(self, e: dict[str, Any]) -> None:
        # The model declared a feed: a node, which its refreshes update (feed_updated).
        feed = e.get("feed") or {}
        source = feed.get("source") or {}
        name = source.get("source") if isinstance(source.get("source"), str) else ""
        node_id = self._feed_node(str(feed.get("id", "")), e.get("parent"))
        self._op_node(node_id, type="feed", name=name, mode=str(feed.get("type", "")))

    def _on_internal_action(self, e: dict[str, Any]) -> None:
        # The audit of an internal action or a <context_feed>: allowed, and how it went.
        node_id = e["id"]
        if e.get("name") == "context_feed":
            outer, _, own = node_id.rpartition("/")
            node_id = self._feed_node(own, outer or None)
        fields: dict[str, Any] = {"audit": e.get("outcome", "ok")}
        if e.get("outcome", "ok") != "ok":
            fields.update(state="failed", t1=e.get("t"), error=clip(e.get("message", "")))
        self._op_node(node_id, **fields)


#: The handler of each event type the view folds in.
HANDLERS: dict[str, Callable[[RunState, dict[str, Any]], None]] = {
    event_type(cls): handler
    for cls, handler in (
        (parser.Text, RunState._on_text),
        (parser.ThoughtStart, RunState._on_thought_start),
        (parser.ThoughtDelta, RunState._on_thought_delta),
        (parser.ThoughtEnd, RunState._on_thought_end),
        (parser.ActionOpen, RunState._on_action_open),
        (parser.ActionParsed, RunState._on_action_parsed),
        (parser.ActionErrorEvent, RunState._on_action_error),
        (parser.ResponseStart, RunState._on_response_start),
        (parser.ResponseDelta, RunState._on_response_delta),
        (parser.ResponseEnd, RunState._on_response_end),
        (parser.ContextFeed, RunState._on_context_feed),
        (parser.WarningEvent, RunState._on_warning),
        (runtime.RunStarted, RunState._on_run_started),
        (runtime.TurnStarted, RunState._on_turn_started),
        (runtime.TurnEnded, RunState._on_turn_ended),
        (runtime.ActionQueued, RunState._on_action_queued),
        (runtime.ActionStarted, RunState._on_action_started),
        (runtime.ActionSucceeded, RunState._on_action_succeeded),
        (runtime.ActionFailed, RunState._on_action_failed),
        (runtime.ActionSkipped, RunState._on_action_skipped),
        (runtime.ActionCancelled, RunState._on_action_cancelled),
        (runtime.ActionLog, RunState._on_action_log),
        (runtime.ActionChanges, RunState._on_action_changes),
        (runtime.ActionPlaced, RunState._on_action_placed),
        (runtime.ApprovalRequested, RunState._on_approval_requested),
        (runtime.ApprovalDecided, RunState._on_approval_decided),
        (runtime.VariableBound, RunState._on_variable_bound),
        (runtime.FeedUpdated, RunState._on_feed_updated),
        (runtime.InternalAudit, RunState._on_internal_action),
        (runtime.RunFinished, RunState._on_run_finished),
    )
}

#: Event types the view leaves out on purpose, with why (none today).
IGNORED: dict[str, str] = {}

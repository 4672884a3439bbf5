"""A provider's function calling: tool schemas out, streamed tool-call deltas in.

A provider streams a tool call as deltas keyed by ``index``: the first
carries the call's ``id`` and function ``name``, later ones pieces of the
``arguments`` JSON. :class:`ToolCallAccumulator` joins them and says when
a call is complete — a later call has begun, or its arguments are a whole
JSON object and the stream has moved past them — so the adapter hands each
call to the parser then, not when the stream ends, as protocol text written
by :func:`cortex_kernel.runtime.tool_calls.tool_calls_to_protocol` (the one
translator).
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..protocol import loads_lenient
from ..runtime.ports import ToolCall

__all__: list[str] = []  # used inside the llm package only


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` for dicts, ``obj.name`` for litellm's delta objects."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


class ToolCallAccumulator:
    """Joins streamed ``tool_calls`` deltas into complete calls, in index order.

    :meth:`ready` hands out each call once, as soon as it is complete; the
    calls still open when the stream ends are handed out by :meth:`rest`.
    """

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}
        self._touched: set[int] = set()  # the calls the latest chunk extended
        self._handed: set[int] = set()
        # Pieces of arguments found not to be a whole JSON object: a call is
        # parsed again only once its arguments grew.
        self._checked: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def next_chunk(self) -> None:
        """A new chunk of the stream begins (whether or not it carries a delta)."""
        if self._touched:
            self._touched = set()

    def add(self, deltas: Iterable[Any]) -> None:
        """Fold one chunk's ``delta.tool_calls`` (dicts or litellm objects) in."""
        for position, delta in enumerate(deltas):
            index = _field(delta, "index")
            if not isinstance(index, int):
                index = position
            self._touched.add(index)
            call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
            call_id = _field(delta, "id")
            if call_id:
                call["id"] = str(call_id)
            function = _field(delta, "function")
            if function is not None:
                name = _field(function, "name")
                if name:
                    call["name"] = str(name)
                arguments = _field(function, "arguments")
                if arguments:
                    call["arguments"].append(str(arguments))

    def calls(self) -> list[ToolCall]:
        """The calls (all of them, handed out or not); one without an id gets ``call_<index>``."""
        return [self._call(index) for index in sorted(self._calls)]

    def ready(self) -> list[ToolCall]:
        """The calls complete since the last look, in index order; each is handed out once.

        A call is complete when a later call has begun, or when its
        arguments parse as a JSON object and a later chunk did not extend
        them (a whole object cannot grow into a longer valid one, but the
        model may still write something after it that makes it invalid).
        A call with no arguments at all is complete once a later one begins.
        A call that is not complete holds back the calls after it.
        """
        out: list[ToolCall] = []
        indexes = sorted(self._calls)
        for position, index in enumerate(indexes):
            if index in self._handed:
                continue
            later = position + 1 < len(indexes)
            if (index in self._touched and not later) or not self._complete(index, later):
                break
            self._handed.add(index)
            out.append(self._call(index))
        return out

    def rest(self) -> list[ToolCall]:
        """At the stream's end: the calls not handed out yet, complete or not."""
        out = [self._call(i) for i in sorted(self._calls) if i not in self._handed]
        self._handed.update(self._calls)
        return out

    def _complete(self, index: int, later: bool) -> bool:
        raw = self._calls[index]
        if not raw["name"]:
            return False
        pieces: list[str] = raw["arguments"]
        if self._checked.get(index) == len(pieces):
            return False
        arguments = "".join(pieces)
        if not arguments.strip():
            return later
        try:
            complete = isinstance(json.loads(arguments), dict)
        except (ValueError, RecursionError):
            complete = False
        if not complete:
            self._checked[index] = len(pieces)
        return complete

    def _call(self, index: int) -> ToolCall:
        raw = self._calls[index]
        return ToolCall(
            id=raw["id"] or f"call_{index}",
            name=raw["name"],
            arguments="".join(raw["arguments"]),
        )


# Qwen-style text calls: a JSON object (or several), maybe fenced or in
# <tool_call> tags, with a "name" and its "arguments".
_TEXT_CALLS = itertools.count(1)
_FENCE = re.compile(r"```(?:json)?|</?tool_call>", re.IGNORECASE)


def text_tool_calls(content: str, known: Iterable[str]) -> list[ToolCall]:
    """Tool calls a model wrote as text instead of native ``tool_calls``.

    Local servers that do not parse their model's function-call format
    (llama-cpp-python with Qwen's template, for one) return the call as
    content: ``{"name": "population", "arguments": {"city": "Lyon"}}``,
    often in a code fence or ``<tool_call>`` tags. Only when the whole
    content is such calls — JSON objects naming a known tool (or an unknown
    one, with only ``name`` and ``arguments``: its error then lists the
    tools), nothing else but fences and whitespace — are they read as calls;
    any other text stays an answer.
    """
    names = set(known)
    text = _FENCE.sub("\n", content).strip()
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    position = 0
    while position < len(text):
        if text[position].isspace() or text[position] == ",":
            position += 1
            continue
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            # The rest as one value, leniently: small models wrap code in
            # Python's triple quotes (`"code": """…"""`), which JSON has not.
            lenient = loads_lenient(text[position:])
            if not lenient.ok:
                return []
            value, position = lenient.value, len(text)
        for item in value if isinstance(value, list) else [value]:
            if not _is_call(item, names):
                return []
            arguments = item.get("arguments", item.get("parameters", {}))
            if isinstance(arguments, str):
                arguments_text = arguments
            else:
                arguments_text = json.dumps(arguments, ensure_ascii=False)
            # Ids unique in the process: every turn's first call would be
            # call_text_1 otherwise, and a later turn's would clash with it.
            calls.append(
                ToolCall(
                    id=f"call_text_{next(_TEXT_CALLS)}", name=item["name"], arguments=arguments_text
                )
            )
    return calls


# Where a call written as text can begin: at a line start, a fence opening
# a JSON value, <tool_call> or a JSON object.
_DECIDED = re.compile(r"```(?:json)?\s*[{\[]|<tool_call>|\{", re.IGNORECASE)
_UNDECIDED = re.compile(r"```(?:json)?\s*", re.IGNORECASE)
_BLOCK_ENDS = {"```": "```", "<tool_call>": "</tool_call>"}
_CODE_OPENER = re.compile(r"```(?:python|py)[ \t]*\n")


def _line_starts(text: str, first: bool) -> Iterator[int]:
    """The positions in ``text`` where a line begins (0 when ``first``)."""
    if first:
        yield 0
    position = text.find("\n")
    while position >= 0:
        yield position + 1
        position = text.find("\n", position + 1)


def _could_start(head: str, names: Iterable[str] = ()) -> bool:
    """Whether a line that reads ``head`` so far may still become a call."""
    lowered = head.lower()
    if any(opener.startswith(lowered) for opener in _BLOCK_ENDS):
        return True
    if lowered.startswith("```"):
        return "json".startswith(lowered[3:]) or bool(_UNDECIDED.fullmatch(head))
    return "\n" not in head and any(f"{name}(".startswith(lowered) for name in names)


_PYTHON_CALL = re.compile(r"([A-Za-z_]\w*)\(")


def _by_lower(known: Iterable[str]) -> dict[str, str]:
    return {name.lower(): name for name in known}


def python_call(line: str, known: Iterable[str]) -> ToolCall | None:
    """``name(key=value, …)`` at the start of ``line``, naming a known tool in any case.

    Seen from Qwen2.5-Coder-1.5B once each tool message names its call
    (``to_fahrenheit(celsius=15) returned: 59.0``): it wrote its next call
    in that syntax, followed by the result it imagined —
    ``To_fahrenheit(celsius=15) returned: 59.0``. Only keyword arguments
    with literal values count; anything else is text.
    """
    names = _by_lower(known)
    match = _PYTHON_CALL.match(line)
    if match is None or match.group(1).lower() not in names:
        return None
    closing = match.end() - 1
    while (closing := line.find(")", closing + 1)) >= 0:
        try:
            node = ast.parse(line[: closing + 1], mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, ast.Call) or node.args:
            return None
        try:
            arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        except ValueError:
            return None
        if len(arguments) != len(node.keywords):
            return None  # **kwargs
        return ToolCall(
            id=f"call_text_{next(_TEXT_CALLS)}",
            name=names[match.group(1).lower()],
            arguments=json.dumps(arguments, ensure_ascii=False),
        )
    return None


def block_tool_calls(text: str, known: Iterable[str]) -> list[ToolCall]:
    """The calls in ``text`` written as blocks among other text.

    A block starts a line: a fenced JSON value, ``<tool_call>…</tool_call>``
    or a bare JSON object, holding calls as :func:`text_tool_calls` reads
    them, or a call in Python syntax (:func:`python_call`). Text between
    the blocks is ignored: after its first call a small model goes on to
    imagine the results and an answer (Qwen2.5-Coder-1.5B wrote two fenced
    calls, a sentence, then a call using their results).
    """
    names = list(known)
    whole = text_tool_calls(text, names)
    if whole:
        return whole
    calls: list[ToolCall] = []
    decoder = json.JSONDecoder()
    lowered = text.lower()
    position = 0
    while position < len(text):
        line_end = text.find("\n", position)
        line_end = len(text) if line_end < 0 else line_end
        line = text[position:line_end]
        begin = position + len(line) - len(line.lstrip(" \t"))
        opener = next((o for o in _BLOCK_ENDS if lowered.startswith(o, begin)), None)
        end: int | None = None
        if opener is not None:
            close = lowered.find(_BLOCK_ENDS[opener], begin + len(opener))
            end = len(text) if close < 0 else close + len(_BLOCK_ENDS[opener])
        elif text.startswith("{", begin):
            try:
                end = decoder.raw_decode(text, begin)[1]
            except json.JSONDecodeError:
                end = None
        if end is None:
            call = python_call(text[begin:line_end], names)
            if call is not None:
                calls.append(call)
            position = line_end + 1
            continue
        calls += text_tool_calls(text[begin:end], names)
        position = end
    return calls


#: A reply that is one fenced block of Python code, and nothing else.
_CODE_REPLY = re.compile(r"\s*```(?:python|py)[ \t]*\n(.*?)\n?```\s*", re.DOTALL | re.IGNORECASE)


def code_call(text: str, tool: str) -> ToolCall | None:
    """A call of ``tool`` with the code of ``text``, when ``text`` is one fenced Python block.

    Asked about the notebook's data, Qwen2.5-Coder-1.5B often replies with
    nothing but the code it means to run, as a fenced block; asked again
    with the call required, it wrote older, failing code instead. Read only
    when the runtime names the tool (``CompletionRequest.code_tool``), and
    only for code that parses.
    """
    match = _CODE_REPLY.fullmatch(text)
    if match is None or not match.group(1).strip():
        return None
    try:
        ast.parse(match.group(1))
    except SyntaxError:
        return None
    return ToolCall(
        id=f"call_text_{next(_TEXT_CALLS)}",
        name=tool,
        arguments=json.dumps({"code": match.group(1)}, ensure_ascii=False),
    )


#: The opening fence of a code block and its language (``python``, ``bash``, none…).
_FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[ \t]*\n", re.MULTILINE)
_PYTHON = ("", "python", "py", "python3")
#: The stop sequence of a request for code alone: a block's closing fence
#: (an opening one names its language, so it does not match).
CODE_REPLY_STOP = "\n```\n"
#: Its closing fence: ``` alone at the start of a line.
_FENCE_CLOSE = re.compile(r"^[ \t]*```", re.MULTILINE)


class CodeReply:
    """Reads a reply asked to be code: its first fenced block of Python, once it closes.

    For a turn that asks the model for the code of a data question alone
    (``CompletionRequest.code_reply``): the code is a call of that tool the
    moment its closing fence arrives, so it runs while the reply would go
    on explaining it (that explanation is never read). A block in another
    language, or whose code does not parse, is passed over for the next one.
    """

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self._text = ""
        self._from = 0  # where the next block is looked for

    def feed(self, text: str) -> ToolCall | None:
        """The call, when ``text`` (the stream's next chunk) closes a block of code."""
        self._text += text
        while True:
            opened = _FENCE_OPEN.search(self._text, self._from)
            if opened is None:
                return None
            closed = _FENCE_CLOSE.search(self._text, opened.end())
            if closed is None:
                return None
            code = self._text[opened.end() : closed.start()]
            self._from = closed.end()
            if opened.group(1).lower() not in _PYTHON:
                continue
            try:
                ast.parse(code)
            except SyntaxError:
                continue
            if code.strip():
                return self._call(code)

    def finish(self) -> ToolCall | None:
        """At the stream's end: the call of a Python block still open, if its code parses.

        The request's stop sequence (:data:`CODE_REPLY_STOP`) ends the reply
        before the block's closing fence.
        """
        opened = _FENCE_OPEN.search(self._text, self._from)
        if opened is None or opened.group(1).lower() not in _PYTHON:
            return None
        code = self._text[opened.end() :]
        try:
            ast.parse(code)
        except SyntaxError:
            return None
        return self._call(code) if code.strip() else None

    def _call(self, code: str) -> ToolCall:
        return ToolCall(
            id=f"call_text_{next(_TEXT_CALLS)}",
            name=self.tool,
            arguments=json.dumps({"code": code.rstrip()}, ensure_ascii=False),
        )


class TextCallHold:
    """Decides, as a tools-protocol answer streams, which text can be shown now.

    From the first line that may start a call written as text (see
    :func:`block_tool_calls`) to the end of the stream, text is held: when
    the stream ends it is either calls or released then. Text before it
    streams as usual; so does a code fence that turns out not to hold JSON.
    Only the text not passed on yet is kept: a chunk costs the same at the
    end of a long answer as at its start. With a ``code_tool``, a reply that
    opens with a fenced Python block is held too (see :func:`code_call`).
    """

    def __init__(self, known: Iterable[str] = (), code_tool: str | None = None) -> None:
        self._code_tool = code_tool
        self._known = tuple(name for name in known if name)
        self._names = tuple(_by_lower(self._known))
        self._pending = ""  # not passed on yet, and not held: the current line at most
        self._held: list[str] = []  # from the line that may start a call, to the end
        self._at_start = True  # nothing was passed on yet
        self._blank = True  # what was passed on is whitespace only
        self._line_start = True  # _pending begins a line

    def release(self, text: str) -> str:
        """What can be passed on now, ``text`` being the stream's next chunk."""
        if self._held:
            self._held.append(text)
            return ""
        pending = self._pending + text
        stop = len(pending)
        for start in _line_starts(pending, self._line_start):
            head = pending[start:].lstrip(" \t")
            opens_code = self._code_tool is not None and self._blank and not pending[:start].strip()
            if (
                _DECIDED.match(head)
                or (self._at_start and start == 0 and head.startswith("["))
                or self._python_call_start(head)
                or (opens_code and _CODE_OPENER.match(head.lower()) is not None)
            ):
                self._held.append(pending[start:])
                stop = start
                break
            if _could_start(head, self._names) or (
                opens_code and any(o.startswith(head.lower()) for o in ("```python", "```py\n"))
            ):
                stop = start  # may still become a call: wait for more
                break
        out = pending[:stop]
        self._pending = "" if self._held else pending[stop:]
        if out:
            self._at_start = False
            self._blank = self._blank and not out.strip()
            self._line_start = stop < len(pending) or out.endswith("\n")
        return out

    def _python_call_start(self, head: str) -> bool:
        match = _PYTHON_CALL.match(head)
        return match is not None and match.group(1).lower() in self._names

    def finish(self) -> tuple[list[ToolCall], str]:
        """At the stream's end: the calls held back, and the text still to pass on."""
        held = "".join(self._held)
        if held:
            calls = block_tool_calls(held, self._known)
            if calls:
                return calls, ""
            code = code_call(held, self._code_tool) if self._code_tool else None
            if code is not None:
                self._held = []
                return [code], ""
        rest = self._pending + held
        self._pending, self._held = "", []
        return [], rest


def _is_call(item: Any, names: set[str]) -> bool:
    """A known tool's call, or an unknown tool's in the call shape (its error names the tools)."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return False
    if item["name"] in names:
        return True
    return set(item) in ({"name", "arguments"}, {"name", "parameters"})


def tools_for_provider(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function schemas from ``{"name", "description", "parameters"}`` dicts.

    Entries already in the ``{"type": "function", "function": …}`` shape pass
    through unchanged.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool.get("type") == "function" and "function" in tool:
            out.append(tool)
            continue
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out

"""A GBNF grammar of the protocol, made from what the session offers.

llama.cpp's server and llama-cpp-python's accept a GBNF ``grammar`` with a
streamed ``/v1/chat/completions`` request and mask every token the grammar
does not allow. :func:`protocol_grammar` writes that grammar from the same
:class:`~cortex_kernel.runtime.ports.PromptContext` the system prompt is
made from (:mod:`cortex_kernel.llm.prompt`), so a small model can only
write what the parser reads as intended and the session can run: the
elements and attributes of the protocol, one body rule per tool from its
JSON schema, the agents, relics, workflows and internal actions that exist,
and free text in thoughts and responses.

What the grammar allows (a strict subset of what the parser accepts)
--------------------------------------------------------------------
- Between elements only whitespace (no text outside an element). Elements:
  ``<thought>``, ``<action>``, ``<response final="true|false">``; no
  ``<context_feed>`` (the prompt does not teach it).
- Thought text cannot contain ``<`` followed by ``/``, ``<``, ``a`` or
  ``c`` (any case): nothing in a thought can be read as a tag the thought
  knows. Response text cannot contain ``<`` followed by ``/`` or ``<``.
- An action's attributes in one order: ``type`` and ``mode`` (both
  required; ``type`` one of the kinds the session has), then optionally
  ``id``, ``depends_on`` (ids joined by ``,``), ``output_key`` (ids are
  ASCII identifiers), ``timeout`` (whole seconds) and ``retries``; values
  in double quotes.
- Bodies: strict JSON objects with their fields in the documented order
  (``{"name": …, "parameters": …}``; single spaces at most between tokens).
  Parameters follow the tool's JSON schema (see :class:`_Compiler`), and
  wherever a value that is not a string may go, a ``"$name.path[0]"``
  reference may go too (a string already admits one).
- A turn opens with an action or a response, never a thought: a small
  model's opening thought restated the request in its own words, which its
  calls then copied ("Homo sapiens" for "human"), and named tools that do
  not exist, which the tool-name slot then forced onto one that does.
- Actions are ``async`` or ``fire_and_forget``; ``sync`` cannot be written.
  A small model chose ``sync`` for the first of several calls asked for
  together, which ends the turn after one of them; ``async`` ends a turn as
  safely here, because no final response comes after an ``async`` action in
  the same turn: it would be written before that result (a small model
  guesses the figures there); the turn ends, and the next one opens with
  the result. A turn may end after any element but a thought. A progress
  note after an ``async`` action is the turn's last element: after one, a
  small model wrote the same calls again, note after note, or another call
  of anything to end its turn. At most ``max_elements``
  thoughts, actions and progress responses come before the last element
  (default :data:`DEFAULT_MAX_ELEMENTS`): an end to a model that repeats an
  action until ``max_tokens``. The grammar cannot stop a model from writing
  the same call twice; the runtime's duplicate-id and repeated-failure
  rules do.

Shapes chosen for llama.cpp's sampler, which checks every candidate token
against every live stack: bounded repetition as ``x{0,n}`` (never chains of
``x?``), names (tools, enums) as a character trie so a prefix keeps one
stack alive, not one per name, and optional object properties as a linear
chain of rules (never every order or subset). ``benchmarks/bench_grammar.py``
measures grammar size, build time and stacks per character for 4, 40 and
200 tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..runtime.ports import PromptContext

__all__ = ["protocol_grammar"]

#: Thoughts, actions and progress responses in one turn before its last element.
DEFAULT_MAX_ELEMENTS: Final = 10
#: The largest array bound written as a bound; larger ones are left open.
_MAX_BOUND: Final = 64
#: The largest string length bound written as a bound.
_MAX_LENGTH: Final = 256
_IDENTIFIER_PATTERNS: Final = frozenset(
    {"^[A-Za-z_][A-Za-z0-9_]*$", r"^[A-Za-z_]\w*$", "^[a-zA-Z_][a-zA-Z0-9_]*$"}
)
_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
)
_SCHEMA_KEYWORDS: Final = frozenset(
    {"type", "enum", "const", "properties", "items", "prefixItems", "anyOf", "oneOf", "allOf"}
    | {"$ref", "additionalProperties", "required", "minItems", "maxItems", "minLength"}
    | {"maxLength", "pattern"}
)

_OBJECT: Final = {"type": "object"}
_STRING: Final = {"type": "string"}
_FEED_FIELDS: Final = {
    "type": {"enum": ["on_demand", "periodic", "internal"]},
    "source": {"type": "object", "additionalProperties": True},
    "ttl": {"type": "number"},
    "interval": {"type": "number"},
    "max_bytes": {"type": "integer"},
    "max_tokens": {"type": "integer"},
    "description": _STRING,
}


def _params(required: Sequence[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


#: The parameters of each internal action (``cortex_kernel.executors.internal``).
INTERNAL_PARAMETERS: Final[dict[str, dict[str, Any]]] = {
    "set_variable": _params(
        ("name", "value"),
        name={"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        value={},
    ),
    "delete_variable": _params(("name",), name=_STRING),
    "list_variables": _params(()),
    "clear_context": _params(()),
    "list_context_feeds": _params(()),
    "remove_context_feed": _params(("id",), id=_STRING),
    "add_context_feed": _params(("id", "source"), id=_STRING, **_FEED_FIELDS),
    "update_context_feed": _params(("id",), id=_STRING, **_FEED_FIELDS),
}

# The building blocks, each with the blocks it uses.
_BLOCKS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "sp": ('" "?', ()),
    "json-char": (r'[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" json-code)', ("json-code",)),
    # \uXXXX, a surrogate only as a pair: a lone one is a repair (and a warning).
    "json-code": (
        r"[0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} "
        r'| [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}',
        (),
    ),
    "json-string": (r'"\"" json-char* "\""', ("json-char",)),
    "json-int": ('"-"? ("0" | [1-9] [0-9]*)', ()),
    "json-number": ('json-int ("." [0-9]+)? ([eE] [-+]? [0-9]+)?', ("json-int",)),
    "json-bool": ('"true" | "false"', ()),
    "json-null": ('"null"', ()),
    "json-value": (
        "json-object | json-array | json-string | json-number | json-bool | json-null",
        ("json-object", "json-array", "json-string", "json-number", "json-bool", "json-null"),
    ),
    "json-object": (
        '"{" sp (json-string sp ":" sp json-value '
        '(sp "," sp json-string sp ":" sp json-value)* sp)? "}"',
        ("sp", "json-string", "json-value"),
    ),
    "json-array": (
        '"[" sp (json-value (sp "," sp json-value)* sp)? "]"',
        ("sp", "json-value"),
    ),
    "ident": ("[A-Za-z_] [A-Za-z0-9_]{0,31}", ()),
    "json-ident": (r'"\"" ident "\""', ("ident",)),
    "ref": (r'"\"$" ("{" ref-path "}" | ref-path) "\""', ("ref-path",)),
    "ref-path": (
        'ref-name ("." ref-name | "[" [0-9]{1,9} "]"){0,8}',
        ("ref-name",),
    ),
    "ref-name": ("[A-Za-z_] [A-Za-z0-9_]*", ()),
    "ws": (r"[ \t\n]{0,4}", ()),
    "ttext": ("tchar*", ("tchar",)),
    "tchar": ('[^<] | "<" [^/<aAcC]', ()),
    "rtext": ("rchar*", ("rchar",)),
    "rchar": ('[^<] | "<" [^/<]', ()),
    "attrs": (
        r'(" id=\"" ident "\"")? (" depends_on=\"" ident ("," ident){0,15} "\"")? '
        r'(" output_key=\"" ident "\"")? (" timeout=\"" [1-9] [0-9]{0,4} "\"")? '
        r'(" retries=\"" [0-9] "\"")?',
        ("ident",),
    ),
    "mode-async": (r'"\" mode=\"async\"" attrs ">"', ("attrs",)),
    "mode-faf": (r'"\" mode=\"fire_and_forget\"" attrs ">"', ("attrs",)),
    "progress": (r'"<response final=\"false\">" rtext "</response>"', ("rtext",)),
    "final": (r'"<response final=\"true\">" rtext "</response>" ws', ("rtext", "ws")),
}


def literal(text: str) -> str:
    """``text`` as a GBNF string literal (quotes, backslashes and non-ASCII escaped)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02X}")
        elif code > 0x7E:
            out.append(f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _hint(text: str) -> str:
    """A rule-name fragment from any text: ``Max Tokens`` -> ``max-tokens``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:24] or "x"


class _Trie:
    """Literal texts, each with what follows it, written with shared prefixes.

    A name trie keeps one stack alive per distinct next character where a
    flat alternation of 200 names keeps 200 (llama.cpp checks each).
    """

    def __init__(self) -> None:
        self.children: dict[str, _Trie] = {}
        self.ends: list[str] = []

    def add(self, text: str, then: str) -> None:
        node = self
        for char in text:
            node = node.children.setdefault(char, _Trie())
        if then not in node.ends:
            node.ends.append(then)

    def expression(self) -> str:
        options = [end for end in self.ends if end]
        for char in sorted(self.children):
            label, node = char, self.children[char]
            while len(node.children) == 1 and not node.ends:
                ((next_char, node),) = node.children.items()
                label += next_char
            rest = node.expression()
            options.append(f"{literal(label)} {rest}".strip())
        if not options:
            return ""
        joined = options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"
        if "" in self.ends:
            return f"({' | '.join(options)})?"
        return joined


def _trie(entries: Iterable[tuple[str, str]]) -> str:
    root = _Trie()
    for text, then in entries:
        root.add(text, then)
    return root.expression()


class _Compiler:
    """Rules of one grammar: the building blocks it uses and the rules of its schemas.

    JSON schema, as tools, relics and workflows write it (pydantic's output
    included), to a value rule:

    - ``type`` (one or a list): ``string`` (``minLength``/``maxLength`` up to
      :data:`_MAX_LENGTH`; an identifier ``pattern`` is kept, other patterns and
      formats are not checked), ``integer``, ``number``, ``boolean``, ``null``,
      ``array``, ``object``; no ``type``: what the other keywords imply, else
      any JSON value;
    - ``enum`` and ``const`` (their JSON texts, as a trie);
    - ``array``: ``items``, ``prefixItems``, ``minItems``/``maxItems`` (bounds
      above :data:`_MAX_BOUND` are left open);
    - ``object``: ``properties`` in the schema's order, ``required`` ones
      always written, optional ones each optional; other keys only where
      ``additionalProperties`` is given (``true`` or a schema), or the object
      declares no properties at all;
    - ``anyOf``/``oneOf`` (alternatives), ``allOf`` (merged), ``$ref`` to
      ``#/$defs/…``, ``#/definitions/…`` or ``#`` (recursive schemas too);
    - ``true``/``{}``: any JSON value. Numeric bounds, ``uniqueItems``,
      ``not`` and conditionals are left to the tool's own validation.

    Anything unknown makes the grammar looser, never stricter: a value the
    schema accepts is never masked.
    """

    def __init__(self, *, references: bool) -> None:
        self.references = references
        self.rules: dict[str, str] = {}
        self._memo: dict[tuple[int, str], str] = {}
        self._defs: dict[tuple[int, str], str] = {}

    # -- rules ---------------------------------------------------------------------

    def use(self, name: str) -> str:
        """Add a building block (and those it uses); return its name."""
        if name not in self.rules:
            body, needs = _BLOCKS[name]
            self.rules[name] = body
            for need in needs:
                self.use(need)
        return name

    def fresh(self, hint: str) -> str:
        name = hint
        count = 1
        while name in self.rules or name in _BLOCKS:
            count += 1
            name = f"{hint}-{count}"
        self.rules[name] = ""  # reserved (a recursive schema refers to it first)
        return name

    def define(self, hint: str, body: str) -> str:
        name = self.fresh(hint)
        self.rules[name] = body
        return name

    def text(self) -> str:
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())

    # -- values --------------------------------------------------------------------

    def value(self, schema: Any, root: Any, hint: str, *, top: bool = False) -> str:
        """The rule name of values of ``schema`` (``root`` resolves its ``$ref``)."""
        shape = _shape(schema)
        dumped = json.dumps(shape, sort_keys=True, default=str)
        key = (id(root) if "$ref" in dumped else 0, dumped + ("#top" if top else ""))
        known = self._memo.get(key)
        if known is not None:
            return known
        name = self.fresh(hint)
        self._memo[key] = name
        expression, stringy = self._compile(shape, root, hint)
        if self.references and not stringy and not top:
            expression = f"{expression} | {self.use('ref')}"
        if expression in _BLOCKS:  # no rule of its own for a plain `json-string`
            del self.rules[name]
            self._memo[key] = expression
            return expression
        self.rules[name] = expression
        return name

    def _compile(self, schema: Any, root: Any, hint: str) -> tuple[str, bool]:
        """A GBNF expression for ``schema`` and whether it admits every string."""
        if not isinstance(schema, dict) or not (_SCHEMA_KEYWORDS & schema.keys()):
            return self.use("json-value"), True
        if "$ref" in schema:
            return self._reference(str(schema["$ref"]), root, hint)
        if "const" in schema:
            return literal(json.dumps(schema["const"], ensure_ascii=False)), False
        if "enum" in schema and isinstance(schema["enum"], list):
            return self._enum(schema["enum"]), False
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._union(schema[key], root, hint)
        if isinstance(schema.get("allOf"), list):
            return self._compile(_merge(schema, root), root, hint)
        types = schema.get("type", _implied_type(schema))
        if types is None:
            return self.use("json-value"), True
        if isinstance(types, str):
            types = [types]
        pieces = [self._typed(str(kind), schema, root, hint) for kind in dict.fromkeys(types)]
        pieces = [piece for piece in pieces if piece]
        if not pieces:
            return self.use("json-value"), True
        return " | ".join(pieces), "string" in types and self._plain_string(schema)

    @staticmethod
    def _plain_string(schema: dict[str, Any]) -> bool:
        return not any(k in schema for k in ("minLength", "maxLength", "pattern"))

    def _reference(self, pointer: str, root: Any, hint: str) -> tuple[str, bool]:
        key = (id(root), pointer)
        known = self._defs.get(key)
        if known is None:
            target = _resolve(root, pointer)
            if target is None:
                return self.use("json-value"), True
            name = pointer.rsplit("/", 1)[-1] if "/" in pointer else "root"
            known = self.value(target, root, f"{hint}-{_hint(name)}")
            self._defs[key] = known
        # The target's rule has its own reference alternative when it needs one.
        return known, True

    def _enum(self, values: list[Any]) -> str:
        texts = dict.fromkeys(json.dumps(value, ensure_ascii=False) for value in values)
        if not texts:
            return self.use("json-value")
        return _trie((text, "") for text in texts)

    def _union(self, options: list[Any], root: Any, hint: str) -> tuple[str, bool]:
        names: list[str] = []
        stringy = False
        for i, option in enumerate(options):
            expression, admits = self._compile(_shape(option), root, f"{hint}-{i}")
            stringy = stringy or admits
            if expression not in names:
                names.append(expression)
        return " | ".join(f"({name})" if "|" in name else name for name in names), stringy

    def _typed(self, kind: str, schema: dict[str, Any], root: Any, hint: str) -> str:
        if kind == "string":
            return self._string(schema)
        if kind == "array":
            return self._array(schema, root, hint)
        if kind == "object":
            return self._object(schema, root, hint)
        blocks = {
            "integer": "json-int",
            "number": "json-number",
            "boolean": "json-bool",
            "null": "json-null",
        }
        return self.use(blocks[kind]) if kind in blocks else ""

    def _string(self, schema: dict[str, Any]) -> str:
        if schema.get("pattern") in _IDENTIFIER_PATTERNS:
            return self.use("json-ident")
        low = schema.get("minLength", 0)
        high = schema.get("maxLength")
        if not isinstance(low, int) or low > _MAX_LENGTH:
            low = 0
        if not isinstance(high, int) or high > _MAX_LENGTH or high < low:
            high = None
        if low == 0 and high is None:
            return self.use("json-string")
        bound = f"{{{low},}}" if high is None else f"{{{low},{high}}}"
        return rf'"\"" {self.use("json-char")}{bound} "\""'

    def _array(self, schema: dict[str, Any], root: Any, hint: str) -> str:
        sp = self.use("sp")
        low = schema.get("minItems", 0)
        high = schema.get("maxItems")
        if not isinstance(low, int) or low > _MAX_BOUND:
            low = 0
        if not isinstance(high, int) or high > _MAX_BOUND or high < max(low, 1):
            high = None if not (isinstance(high, int) and high == 0) else 0
        if high == 0:
            return f'"[" {sp} "]"'
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        full = isinstance(prefix, list) and high is not None and len(prefix) >= high
        rest = None if items is False or full else self.value(items, root, f"{hint}-item")
        if isinstance(prefix, list) and prefix:
            body = self._prefix_items(prefix, rest, low, root, hint)
        elif rest is None:
            return f'"[" {sp} "]"'
        elif high is None:
            more = "*" if low <= 1 else f"{{{low - 1},}}"
            body = f'{rest} ({sp} "," {sp} {rest}){more}'
        else:
            more = f"{{{max(low - 1, 0)},{high - 1}}}"
            body = f'{rest} ({sp} "," {sp} {rest}){more}' if high > 1 else rest
        if low == 0:
            return f'"[" {sp} ({body} {sp})? "]"'
        return f'"[" {sp} {body} {sp} "]"'

    def _prefix_items(
        self, prefix: list[Any], rest: str | None, low: int, root: Any, hint: str
    ) -> str:
        sp = self.use("sp")
        more = max(low - len(prefix), 0)  # items past the prefix that minItems asks for
        tail = f'({sp} "," {sp} {rest}){"*" if more == 0 else f"{{{more},}}"}' if rest else ""
        for i in range(len(prefix) - 1, 0, -1):
            item = self.value(prefix[i], root, f"{hint}-{i}")
            step = f'{sp} "," {sp} {item} {tail}'.strip()
            tail = step if i < low else f"({step})?"
        first = self.value(prefix[0], root, f"{hint}-0")
        return f"{first} {tail}".strip()

    def _object(self, schema: dict[str, Any], root: Any, hint: str) -> str:
        sp = self.use("sp")
        declared = schema.get("properties")
        properties: dict[str, Any] = dict(declared) if isinstance(declared, dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        for name in required:
            properties.setdefault(name, True)
        additional = schema.get("additionalProperties")
        extra: str | None = None
        if (
            additional is True
            or isinstance(additional, dict)
            or (additional is None and not properties)
        ):
            value = self.value(additional if isinstance(additional, dict) else True, root, hint)
            extra = f'{self.use("json-string")} {sp} ":" {sp} {value}'
        pairs = [
            (
                name in required,
                f"{literal(json.dumps(name, ensure_ascii=False))} {sp} "
                f'":" {sp} {self.value(sub, root, f"{hint}-{_hint(name)}")}',
            )
            for name, sub in properties.items()
            if sub is not False
        ]
        first = _Members(self, pairs, extra, hint).first(0)
        if first is None:
            return f'"{{" {sp} "}}"'
        if any(needed for needed, _ in pairs):
            return f'"{{" {sp} {first} {sp} "}}"'
        return f'"{{" {sp} ({first} {sp})? "}}"'


class _Members:
    """The members of one object: required ones in order, each optional one optional.

    ``first(i)``: the members from ``i`` on when none was written yet (never
    empty); ``rest(i)``: the same after a member, each with its comma. Rules,
    not inline text, so the grammar grows linearly with the properties.
    """

    def __init__(
        self, compiler: _Compiler, pairs: list[tuple[bool, str]], extra: str | None, hint: str
    ) -> None:
        self.compiler = compiler
        self.pairs = pairs
        self.extra = extra
        self.hint = hint
        self.sp = compiler.use("sp")
        self._rest: dict[int, str] = {}
        self._first: dict[int, str | None] = {}

    def rest(self, i: int) -> str:
        if i in self._rest:
            return self._rest[i]
        sp = self.sp
        if i == len(self.pairs):
            text = f'({sp} "," {sp} {self.extra})*' if self.extra else ""
        else:
            required, pair = self.pairs[i]
            later = self.rest(i + 1)
            step = f'{sp} "," {sp} {pair}'
            text = f"{step} {later}" if required else f"({step})? {later}"
            if i + 1 < len(self.pairs):
                text = self.compiler.define(f"{self.hint}-r{i}", text.strip())
        self._rest[i] = text.strip()
        return self._rest[i]

    def first(self, i: int) -> str | None:
        if i in self._first:
            return self._first[i]
        sp = self.sp
        text: str | None
        if i == len(self.pairs):
            text = f'{self.extra} ({sp} "," {sp} {self.extra})*' if self.extra else None
        else:
            required, pair = self.pairs[i]
            written = f"{pair} {self.rest(i + 1)}".strip()
            later = None if required else self.first(i + 1)
            text = written if later is None else f"{written} | {later}"
            if later is not None:
                text = self.compiler.define(f"{self.hint}-f{i}", text)
        self._first[i] = text
        return text


def _shape(schema: Any) -> Any:
    """``schema`` without the annotations that do not change what it accepts."""
    if isinstance(schema, dict):
        return {key: value for key, value in schema.items() if key not in _ANNOTATIONS}
    return schema


def _implied_type(schema: Mapping[str, Any]) -> str | None:
    if any(k in schema for k in ("properties", "additionalProperties", "required")):
        return "object"
    if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems")):
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern")):
        return "string"
    return None


def _resolve(root: Any, pointer: str) -> Any:
    """The schema a local ``$ref`` names (``#``, ``#/$defs/X``…), ``None`` if none."""
    if not pointer.startswith("#"):
        return None
    node = root
    for part in [p for p in pointer[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _merge(schema: dict[str, Any], root: Any) -> dict[str, Any]:
    """``allOf`` as one schema: properties and requirements joined, the rest first wins."""
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        part = _resolve(root, part["$ref"]) if isinstance(part, dict) and "$ref" in part else part
        if not isinstance(part, dict):
            continue
        part = _merge(part, root) if isinstance(part.get("allOf"), list) else part
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def json_value_grammar(schema: Any, *, references: bool = True) -> str:
    """A grammar whose ``root`` is one JSON value of ``schema``.

    Parameters
    ----------
    schema
        A JSON schema (its ``$ref`` resolve against itself).
    references
        Whether a ``"$name"`` reference may stand where a value may go.

    Returns
    -------
    str
        GBNF text.
    """
    compiler = _Compiler(references=references)
    compiler.rules["root"] = ""
    compiler.rules["root"] = compiler.value(schema, schema, "value", top=True)
    return compiler.text()


def protocol_grammar(
    context: PromptContext,
    *,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    references: bool = True,
) -> str:
    """The GBNF grammar of one turn of the protocol for ``context``.

    Parameters
    ----------
    context
        What the system prompt shows: tools (name, description, JSON
        schema), agents, relics (with their operations), workflows (with
        their parameters) and the internal actions allowed.
    max_elements
        Thoughts, actions and progress responses a turn may hold before its
        last element (a final response or an action).
    references
        Whether ``"$name"`` references may stand where non-string values go.

    Returns
    -------
    str
        GBNF text; check it with :func:`cortex_kernel.llm.gbnf.check` before
        sending it (the model adapter does).

    Examples
    --------
    >>> from cortex_kernel.runtime.ports import PromptContext
    >>> grammar = protocol_grammar(PromptContext(tools=[{"name": "add", "parameters": {
    ...     "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}]))
    >>> grammar.startswith("root ::= ws s10")
    True
    """
    if max_elements < 0:
        raise ValueError("max_elements must be >= 0")
    compiler = _Compiler(references=references)
    compiler.rules["root"] = f"{compiler.use('ws')} first"
    _turn(compiler, max_elements)
    kinds = _kinds(compiler, context)
    for rule, mode in (("act", "mode-async"), ("act-faf", "mode-faf")):
        options = " | ".join(f"{literal(kind)} {compiler.use(mode)} {body}" for kind, body in kinds)
        compiler.rules[rule] = rf'"<action type=\"" ({options}) "</action>"'
    # The turn's rules first, for a reader; the order means nothing to llama.cpp.
    levels = range(max(max_elements - 1, 0), -1, -1)
    order = ["root", "first", *(f"{p}{k}" for p in "stwu" for k in levels), "act", "act-faf"]
    ordered = {name: compiler.rules[name] for name in order}
    compiler.rules = {**ordered, **compiler.rules}
    return compiler.text()


def _turn(compiler: _Compiler, levels: int) -> None:
    """The rules of a turn's elements, ``k`` the elements to spare before its last.

    ``first``: a turn's first element, anything but a thought. ``s{k}``:
    between elements; ``t{k}``: the rest of a thought. ``w{k}`` and ``u{k}``:
    the same once an ``async`` action (``act``) was written, when no final
    response may come (it would be written before that result) and a
    progress note ends the turn. ``act-faf`` is a ``fire_and_forget`` action.
    A thought is closed before the turn ends.
    """
    ws, ttext = compiler.use("ws"), compiler.use("ttext")
    final, progress = compiler.use("final"), compiler.use("progress")
    compiler.rules["s0"] = f"{final} | act"
    compiler.rules["t0"] = f'"</thought>" {ws} s0?'
    compiler.rules["w0"] = "act"
    compiler.rules["u0"] = f'"</thought>" {ws} w0?'

    def after(j: int) -> str:  # anything but a thought, ``j`` elements to spare after it
        return f"act {ws} w{j}? | act-faf {ws} s{j}? | {progress} {ws} s{j}? | {final}"

    for k in range(1, levels):
        j = k - 1
        compiler.rules[f"s{k}"] = f'"<thought>" {ttext} t{j} | {after(j)}'
        compiler.rules[f"t{k}"] = (
            f'"</thought>" {ws} s{k}? | act {ttext} u{j} | act-faf {ttext} t{j}'
        )
        compiler.rules[f"w{k}"] = (
            f'"<thought>" {ttext} u{j} | (act | act-faf) {ws} w{j}? | {progress} {ws}'
        )
        compiler.rules[f"u{k}"] = f'"</thought>" {ws} w{k}? | (act | act-faf) {ttext} u{j}'
    compiler.rules["first"] = after(levels - 1) if levels else "s0"


def _field(name: str, sp: str) -> str:
    return rf'"\"{name}\"" {sp} ":" {sp}'


def _named(compiler: _Compiler, names: Iterable[tuple[str, str]]) -> str:
    """``{"name": `` one of ``names`` (each to its continuation), as a trie."""
    sp = compiler.use("sp")
    entries = [(json.dumps(name, ensure_ascii=False), then) for name, then in names]
    return f'"{{" {sp} {_field("name", sp)} {_trie(entries)}'


def _kinds(compiler: _Compiler, context: PromptContext) -> list[tuple[str, str]]:
    """``(type, body rule)`` for every action type the session offers."""
    sp = compiler.use("sp")
    kinds: list[tuple[str, str]] = []
    tools = [t for t in context.tools if isinstance(t.get("name"), str)]
    if tools:
        entries = []
        for i, tool in enumerate(tools):
            schema = tool.get("parameters") or _OBJECT
            params = compiler.value(schema, schema, f"params{i}", top=True)
            then = f'{sp} "," {sp} {_field("parameters", sp)} {params} {sp} "}}"'
            entries.append((tool["name"], compiler.define(f"tool{i}", then)))
        kinds.append(("tool", compiler.define("body-tool", _named(compiler, entries))))
    string = compiler.use("json-string")
    system = f'({sp} "," {sp} {_field("system", sp)} {string})?'
    llm = f'"{{" {sp} {_field("prompt", sp)} {string} {system} {sp} "}}"'
    kinds.append(("llm", compiler.define("body-llm", llm)))
    agents = [a["name"] for a in context.agents if isinstance(a.get("name"), str)]
    if agents:
        message = f'{sp} "," {sp} {_field("message", sp)} {string} {sp} "}}"'
        tail = compiler.define("agent-message", message)
        body = _named(compiler, [(name, tail) for name in agents])
        kinds.append(("agent", compiler.define("body-agent", body)))
    relics = _relics(compiler, context.relics)
    if relics:
        kinds.append(("relic", relics))
    workflows = _workflows(compiler, context.workflows)
    if workflows:
        kinds.append(("workflow", workflows))
    internal = _internal(compiler, context.internal_actions)
    if internal:
        kinds.append(("internal", internal))
    return kinds


def _parameters_tail(compiler: _Compiler, params: str) -> str:
    sp = compiler.use("sp")
    return f'{sp} "," {sp} {_field("parameters", sp)} {params} {sp} "}}"'


def _relics(compiler: _Compiler, relics: list[dict[str, Any]]) -> str | None:
    sp = compiler.use("sp")
    entries = []
    for i, relic in enumerate(relics):
        if not isinstance(relic.get("name"), str):
            continue
        operations = relic.get("operations")
        if isinstance(operations, dict) and operations:
            options = []
            for j, (op, described) in enumerate(operations.items()):
                schema = (described or {}).get("parameters") or {
                    "type": "object",
                    "properties": {},
                    "additionalProperties": False,
                }
                params = compiler.value(schema, schema, f"relic{i}-params{j}", top=True)
                then = compiler.define(f"relic{i}-op{j}", _parameters_tail(compiler, params))
                options.append((json.dumps(op, ensure_ascii=False), then))
            operation = _trie(options)
        else:  # operations not declared: any name the executor accepts, any parameters
            anything = _parameters_tail(compiler, compiler.use("json-object"))
            operation = rf'"\"" [A-Za-z_] [A-Za-z0-9_\x2D]{{0,63}} "\"" {anything}'
        then = f'{sp} "," {sp} {_field("operation", sp)} {operation}'
        entries.append((relic["name"], compiler.define(f"relic{i}", then)))
    if not entries:
        return None
    return compiler.define("body-relic", _named(compiler, entries))


def _workflows(compiler: _Compiler, workflows: list[dict[str, Any]]) -> str | None:
    entries = []
    for i, workflow in enumerate(workflows):
        if not isinstance(workflow.get("name"), str):
            continue
        declared = workflow.get("parameters")
        defaults: dict[str, Any] = declared if isinstance(declared, dict) else {}
        schema = {
            "type": "object",
            "properties": {name: {} for name in defaults},
            "required": [name for name, default in defaults.items() if default is None],
            "additionalProperties": False,
        }
        params = compiler.value(schema, schema, f"workflow{i}-params", top=True)
        then = compiler.define(f"workflow{i}", _parameters_tail(compiler, params))
        entries.append((workflow["name"], then))
    if not entries:
        return None
    return compiler.define("body-workflow", _named(compiler, entries))


def _internal(compiler: _Compiler, allowed: Iterable[str]) -> str | None:
    entries = []
    for i, name in enumerate(sorted(set(allowed))):
        schema = INTERNAL_PARAMETERS.get(name, {"type": "object", "additionalProperties": True})
        params = compiler.value(schema, schema, f"internal{i}-params", top=True)
        entries.append((name, compiler.define(f"internal{i}", _parameters_tail(compiler, params))))
    if not entries:
        return None
    return compiler.define("body-internal", _named(compiler, entries))

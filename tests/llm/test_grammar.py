"""The protocol grammar: what it lets a model write, checked with llama.cpp's own rules.

Every grammar here goes through :func:`cortex_kernel.llm.gbnf.parse` (llama.cpp's
parser and left-recursion check, transcribed) and is matched with the stacks
llama.cpp keeps (:class:`tests.llm.gbnf.Matcher`).
"""

from __future__ import annotations

import enum
import json
import random
import statistics
from typing import Any, Literal

import jsonschema  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from cortex_kernel.llm.grammar import json_value_grammar, literal, protocol_grammar
from cortex_kernel.llm.prompt import WORKED_EXAMPLE_TURNS
from cortex_kernel.protocol import ActionErrorEvent, ActionParsed, Parser, Text, WarningEvent
from cortex_kernel.runtime.ports import PromptContext
from cortex_kernel.runtime.tools import ToolRegistry
from tests.llm.gbnf import Matcher, accepts, random_text, stack_counts


def obj(required: tuple[str, ...] = (), **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


STRING = {"type": "string"}
EXAMPLE_TOOLS = [
    {"name": "get_weather", "parameters": obj(("city",), city=STRING)},
    {"name": "search_events", "parameters": obj(("city", "date"), city=STRING, date=STRING)},
    {"name": "log_request", "parameters": obj(("topic",), topic=STRING)},
    {"name": "to_fahrenheit", "parameters": obj(("celsius",), celsius={"type": "number"})},
    {"name": "get_temperature", "parameters": obj(("city",), city=STRING)},
]
POPULATION = [{"name": "population", "parameters": obj(("city",), city=STRING)}]


def grammar_of(**fields: Any) -> Matcher:
    return Matcher(protocol_grammar(PromptContext(**fields)))


def action(body: str, attrs: str = 'type="tool" mode="async"') -> str:
    return f"<action {attrs}>{body}</action>"


# -- the protocol ----------------------------------------------------------------------


def test_the_worked_example_is_in_the_grammar() -> None:
    matcher = grammar_of(tools=EXAMPLE_TOOLS, internal_actions=["set_variable"])
    for turn in WORKED_EXAMPLE_TURNS:
        assert accepts(matcher, turn)


CALL = '{"name": "population", "parameters": {"city": "Paris"}}'


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            action(
                '{"name": "population", "parameters": {"type": "object", "properties": '
                '{"city": {"type": "string"}}}}'
            ),
            id="the tool's JSON schema as its parameters",
        ),
        pytest.param(
            action('{"name": "log_request", "parameters": {"topic": "x"}}'), id="the example's tool"
        ),
        pytest.param(
            action(CALL, 'type="tool" mode="async" output_key="pop paris"'),
            id="an output_key that is no identifier",
        ),
        pytest.param(action(CALL, 'type="tool"'), id="no mode"),
        pytest.param(action(CALL, 'type="search" mode="async"'), id="an unknown type"),
        pytest.param(action(CALL, 'type="agent" mode="async"'), id="a type the session lacks"),
        pytest.param(action(CALL, 'mode="async" type="tool"'), id="attributes in another order"),
        pytest.param(action(CALL, "type='tool' mode='async'"), id="single quotes"),
        pytest.param(action(CALL, 'type="tool" mode="async" timeout="0"'), id="timeout 0"),
        pytest.param(action(CALL, 'type="tool" mode="sync"'), id="a sync action"),
        pytest.param("<thought>Paris.</thought>" + action(CALL), id="a thought first"),
        pytest.param("Let me look it up. " + action(CALL), id="text outside any element"),
        pytest.param(action(CALL) + "\nmore text", id="text after an action"),
        pytest.param(
            '<response final="true">a</response><response final="true">b</response>',
            id="anything after the final response",
        ),
        pytest.param("<response>Paris</response>", id="a response without final"),
        pytest.param("<thought>x</response>", id="a thought closed as a response"),
        pytest.param("<thought>x </y</thought>", id="a closing tag's start in a thought"),
        pytest.param(
            '<response final="true">a </thought> b</response>',
            id="a thought's closing tag in a response",
        ),
        pytest.param('<context_feed id="f">{}</context_feed>', id="a context feed"),
        pytest.param(
            action('{"name": "population", "parameters": {"city": 12}}'), id="a number for a string"
        ),
        pytest.param(
            action('{"name": "population", "parameters": {}}'), id="a required parameter missing"
        ),
        pytest.param(
            action('{"name": "population", "parameters": {"city": "a", "n": 1}}'),
            id="a parameter the tool does not have",
        ),
        pytest.param(
            action('{"name": "population", "arguments": {"city": "a"}}'),
            id="'arguments' for 'parameters'",
        ),
        pytest.param(
            action('{"name": "population", "parameters": {"city": "a",}}'), id="a trailing comma"
        ),
        pytest.param(
            action("{'name': 'population', 'parameters': {'city': 'a'}}"), id="Python quotes"
        ),
        pytest.param("", id="nothing at all"),
    ],
)
def test_what_small_models_get_wrong_is_not_in_the_grammar(text: str) -> None:
    matcher = grammar_of(tools=POPULATION)
    assert accepts(matcher, action(CALL))  # the text next to it is fine
    assert not accepts(matcher, text)


def test_the_attributes_and_elements_the_parser_reads() -> None:
    matcher = grammar_of(tools=POPULATION, internal_actions=["set_variable"])
    full = (
        'type="tool" mode="async" id="p_1" depends_on="a,b2" output_key="pop" '
        'timeout="30" retries="2"'
    )
    turn = (
        "\n"
        + action(CALL, 'type="tool" mode="fire_and_forget"')
        + "<thought>Plan: a < b, and <b>bold is text.\n"
        + action(CALL, full)
        + "\nthen</thought>\n"
        + action('{"prompt": "Say $pop", "system": "short"}', 'type="llm" mode="async" id="l"')
        + '<response final="false">It is $pop.\n\n| a | b |</response>\n'
    )
    assert accepts(matcher, turn)
    parser = Parser()
    events = parser.feed(turn) + parser.close()
    assert [e for e in events if isinstance(e, ActionErrorEvent | WarningEvent)] == []
    assert [e.action.id for e in events if isinstance(e, ActionParsed)] == ["a1", "p_1", "l"]
    assert all(e.text.isspace() for e in events if isinstance(e, Text))
    # A thought never opens a turn (Qwen2.5-Coder-1.5B restated the request
    # there, and its calls copied that), and is closed before the turn ends.
    assert not accepts(matcher, "<thought>now</thought>" + action(CALL))
    assert accepts(matcher, action(CALL) + "<thought>now " + action(CALL) + "</thought>")
    assert not accepts(matcher, action(CALL) + "<thought>now " + action(CALL))


def test_no_final_response_in_the_turn_that_started_an_async_action() -> None:
    # Qwen2.5-Coder-1.5B wrote the call, then at once the answer: its figures
    # guessed before the result came ("17 °C with a clear sky" for Nice, 21).
    matcher = grammar_of(tools=POPULATION)
    started = action(CALL, 'type="tool" mode="async" id="p" output_key="pop"')
    final = '<response final="true">It is $pop.</response>'
    assert not accepts(matcher, started + final)
    assert not accepts(matcher, "<thought>" + started + "</thought>" + final)
    assert not accepts(matcher, started + '<response final="false">soon</response>' + final)
    # The turn ends (the results open the next one), or goes on with more work.
    assert accepts(matcher, started)
    assert accepts(matcher, started + '<response final="false">Looking it up…</response>')
    # A progress note ends it: Qwen2.5-Coder-1.5B went on to write the same
    # calls again, note after note, or a sync call of anything to end the turn.
    assert not accepts(
        matcher, started + '<response final="false">Looking it up…</response>' + started
    )
    assert not accepts(
        matcher,
        started + '<response final="false">…</response><response final="false">…</response>',
    )
    assert accepts(matcher, started + "<thought>and Lyon " + action(CALL) + "</thought>")
    assert accepts(matcher, started + action(CALL))
    # An action whose result is never reported does not hold the answer back.
    assert accepts(matcher, action(CALL, 'type="tool" mode="fire_and_forget"') + final)


def test_a_turn_has_at_most_max_elements_before_its_last() -> None:
    later = action(CALL, 'type="tool" mode="fire_and_forget"')
    final = '<response final="true">done</response>'
    matcher = Matcher(protocol_grammar(PromptContext(tools=POPULATION), max_elements=3))
    assert accepts(matcher, later * 3 + final)
    assert accepts(matcher, later + "<thought>" + later + "</thought>" + action(CALL))
    assert not accepts(matcher, later * 4 + final)
    assert not accepts(matcher, later + "<thought>" + later * 2 + "</thought>")


def test_agents_relics_workflows_and_internal_actions_that_exist() -> None:
    matcher = grammar_of(
        agents=[{"name": "researcher", "parameters": {"message": "str"}}],
        relics=[
            {
                "name": "db",
                "operations": {
                    "query": {"parameters": obj(("sql",), sql=STRING)},
                    "ping": {},
                },
            },
            {"name": "kv", "operations": {}},
        ],
        workflows=[{"name": "report", "parameters": {"city": None, "days": 3}}],
        internal_actions=["set_variable", "list_variables"],
    )
    good = [
        ('type="agent"', '{"name": "researcher", "message": "find $x"}'),
        ('type="relic"', '{"name": "db", "operation": "query", "parameters": {"sql": "select 1"}}'),
        ('type="relic"', '{"name": "db", "operation": "ping", "parameters": {}}'),
        ('type="relic"', '{"name": "kv", "operation": "get-all", "parameters": {"k": [1]}}'),
        ('type="workflow"', '{"name": "report", "parameters": {"city": "Oslo"}}'),
        ('type="workflow"', '{"name": "report", "parameters": {"city": "Oslo", "days": 2}}'),
        ('type="internal"', '{"name": "set_variable", "parameters": {"name": "x", "value": [1]}}'),
        ('type="internal"', '{"name": "list_variables", "parameters": {}}'),
    ]
    for kind, body in good:
        assert accepts(matcher, action(body, f'{kind} mode="async"')), body
    bad = [
        ('type="agent"', '{"name": "writer", "message": "x"}'),
        ('type="relic"', '{"name": "db", "operation": "drop", "parameters": {}}'),
        ('type="relic"', '{"name": "db", "operation": "query", "parameters": {}}'),
        ('type="workflow"', '{"name": "report", "parameters": {"days": 2}}'),
        ('type="internal"', '{"name": "clear_context", "parameters": {}}'),
        ('type="internal"', '{"name": "set_variable", "parameters": {"name": "a b", "value": 1}}'),
        ('type="tool"', CALL),  # no tools: no tool type
    ]
    for kind, body in bad:
        assert not accepts(matcher, action(body, f'{kind} mode="async"')), body


def test_names_any_tool_may_have() -> None:
    odd = ["mcp__files__read.v2", 'zäh "quoted" \\ tool', "a", "ab", "abc"]
    tools = [{"name": name, "parameters": obj()} for name in odd]
    matcher = grammar_of(tools=tools)
    for name in odd:
        body = '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "parameters": {}}'
        assert accepts(matcher, action(body)), name
    assert not accepts(matcher, action('{"name": "abcd", "parameters": {}}'))
    assert literal('a"b\\c\né\U0001f600\x7f') == r'"a\"b\\c\n\u00E9\U0001F600\x7F"'


# -- JSON schema -------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: float = 0.0


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


def pydantic_tool_schema() -> dict[str, Any]:
    """What a notebook @tool with every common annotation gets (pydantic's schema)."""
    tools = ToolRegistry()

    @tools.register
    def everything(  # noqa: PLR0913 - one parameter per shape
        a: int,
        b: str = "x",
        c: int | None = None,
        d: list[str] | None = None,
        e: dict[str, Any] | None = None,
        f: Literal["up", "down"] = "up",
        g: Color = Color.RED,
        p: Point | None = None,
        t: tuple[int, str] = (1, "a"),
        s: set[int] | None = None,
        anything: Any = None,
        tree: Tree | None = None,
        flag: bool = False,
        counts: dict[str, int] | None = None,
        ratio: float = 0.5,
    ) -> None:
        """Take one of each."""

    return tools.specs()[0]["parameters"]  # type: ignore[no-any-return]


def test_every_shape_pydantic_writes_for_a_tool() -> None:
    schema = pydantic_tool_schema()
    matcher = Matcher(json_value_grammar(schema))
    value = {
        "a": 1,
        "b": "y",
        "c": None,
        "d": ["q", "r"],
        "e": {"k": [1, {"z": None}], "n": -2.5e-3},
        "f": "down",
        "g": "blue",
        "p": {"x": 1, "y": 2.5},
        "t": [1, "a"],
        "s": [1, 2],
        "anything": [True, "x", {}],
        "tree": {"value": 1, "children": [{"value": 2, "children": []}]},
        "flag": True,
        "counts": {"a": 1},
        "ratio": 1,
    }
    jsonschema.validate(value, schema)
    assert accepts(matcher, json.dumps(value, ensure_ascii=False))
    assert accepts(matcher, '{"a": "$n", "p": {"x": "${q.x[0]}"}, "tree": "$t"}')
    for wrong in [
        {"a": 1.5},
        {"a": "1"},
        {"a": 1, "f": "left"},
        {"a": 1, "g": "green"},
        {"a": 1, "t": [1]},
        {"a": 1, "t": [1, "a", 2]},
        {"a": 1, "flag": "yes"},
        {"a": 1, "counts": {"a": "one"}},
        {"a": 1, "p": {"y": 1}},
        {"a": 1, "tree": {"value": 1, "children": [{"children": []}]}},
        {"b": "no a"},
    ]:
        assert not accepts(matcher, json.dumps(wrong)), wrong


SHAPES: list[tuple[dict[str, Any], list[Any], list[str]]] = [
    ({"type": "string", "minLength": 2, "maxLength": 3}, ["ab", "a\nb", 'é"é'], ['"a"', '"abcd"']),
    ({"type": "integer"}, [0, -7, 10**20], ["1.0", "01", "+1", '"$5"']),
    ({"type": "number"}, [0, -1.5, 1e-7, 2.5e300], ["1.", ".5", "NaN"]),
    ({"type": "boolean"}, [True, False], ["1", '"true"']),
    ({"type": "null"}, [None], ['"null"']),
    ({"type": ["string", "null"]}, ["x", None], ["1"]),
    (
        {"enum": ["a", 1, None, [1, 2], {"k": "v"}]},
        ["a", 1, None, [1, 2], {"k": "v"}],
        ['"b"', "10"],
    ),
    ({"enum": [1, 10, 100]}, [1, 10, 100], ["1000", "0"]),
    ({"const": "only"}, ["only"], ['"other"']),
    (
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        [[1], [1, 2, 3]],
        ["[]", "[1, 2, 3, 4]", '["a"]'],
    ),
    ({"type": "array", "maxItems": 0}, [[]], ["[1]"]),
    (
        {"type": "array", "items": False, "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        [[], ["a"], ["a", 1]],
        ["[1]", '["a", 1, 2]'],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": STRING},
            "required": ["b"],
            "additionalProperties": False,
        },
        [{"b": "x"}, {"a": 1, "b": "x"}],
        ['{"a": 1}', '{"b": "x", "c": 1}', '{"b": "x", "a": 1}'],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": {"type": "boolean"},
        },
        [{}, {"a": 1}, {"a": 1, "z": True}, {"z": False, "y": True}],
        ['{"z": 1}'],
    ),
    ({"type": "object", "additionalProperties": False}, [{}], ['{"a": 1}']),
    ({"type": "object"}, [{}, {"any": [1, {"x": None}]}], ["[]"]),
    (
        {
            "properties": {"a": {"properties": {"b": {"type": "integer"}}, "required": ["b"]}},
            "required": ["a"],
        },
        [{"a": {"b": 1}}],
        ['{"a": {}}', '{"a": {"b": "1"}}'],
    ),
    ({"anyOf": [{"type": "integer"}, {"type": "array", "items": STRING}]}, [1, ["a"]], ['"a"']),
    ({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, [1, True], ["null"]),
    (
        {
            "allOf": [
                {"properties": {"a": STRING}, "required": ["a"]},
                {"properties": {"b": STRING}, "required": ["b"]},
            ]
        },
        [{"a": "x", "b": "y"}],
        ['{"a": "x"}'],
    ),
    (
        {"$defs": {"N": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/N"}},
        [[1, 2]],
        ['["a"]'],
    ),
    (
        {
            "definitions": {
                "L": {"type": "object", "properties": {"next": {"$ref": "#/definitions/L"}}}
            },
            "$ref": "#/definitions/L",
        },
        [{}, {"next": {"next": {}}}],
        ['{"next": 1}'],
    ),
    ({}, [1, "a", None, [{}], {"k": [True]}], ["undefined", "'a'"]),
    ({"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, ["ok_1"], ['"a b"', '"1a"']),
    ({"type": "string", "format": "date", "pattern": "^\\d+$"}, ["2024"], ["1"]),
]


@pytest.mark.parametrize(("schema", "valid", "invalid"), SHAPES)
def test_json_schema_shapes(schema: dict[str, Any], valid: list[Any], invalid: list[str]) -> None:
    matcher = Matcher(json_value_grammar(schema, references=False))
    for value in valid:
        jsonschema.validate(value, schema)  # the case itself is right
        assert accepts(matcher, json.dumps(value, ensure_ascii=False)), value
    for text in invalid:
        assert not accepts(matcher, text), text


def test_a_reference_wherever_a_value_may_go() -> None:
    schema = obj(
        ("n", "xs", "o", "e"),
        n={"type": "integer"},
        xs={"type": "array", "items": {"type": "number"}},
        o=obj(("k",), k={"type": "boolean"}),
        e={"enum": ["a", "b"]},
    )
    with_references = Matcher(json_value_grammar(schema))
    text = '{"n": "$count", "xs": ["$a.b[0]", 1, "${c}"], "o": "$o", "e": "$choice"}'
    assert accepts(with_references, text)
    assert not accepts(with_references, '{"n": "$5", "xs": [], "o": {"k": true}, "e": "a"}')
    assert not accepts(Matcher(json_value_grammar(schema, references=False)), text)


# -- properties ----------------------------------------------------------------------------

KEYS = st.text(alphabet='abz_é"\\ 1', min_size=1, max_size=5)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(alphabet='ab "\\é\n$', max_size=4),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)
LEAF_SCHEMAS = st.one_of(
    st.sampled_from(
        [
            STRING,
            {"type": "integer"},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
            {},
            {"type": ["string", "null"]},
            {"type": ["integer", "boolean"]},
        ]
    ),
    st.builds(
        lambda low, span: {"type": "string", "minLength": low, "maxLength": low + span},
        st.integers(0, 3),
        st.integers(0, 3),
    ),
    st.lists(SCALARS, min_size=1, max_size=4, unique_by=lambda v: json.dumps(v)).map(
        lambda values: {"enum": values}
    ),
    SCALARS.map(lambda value: {"const": value}),
)


def _object_schema(draw: Any, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    properties = draw(st.dictionaries(KEYS, children, max_size=4))
    required = [k for k in properties if draw(st.booleans())]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    extra = draw(st.sampled_from(["absent", "false", "true", "schema"]))
    if extra == "false":
        schema["additionalProperties"] = False
    elif extra == "true":
        schema["additionalProperties"] = True
    elif extra == "schema":
        schema["additionalProperties"] = draw(children)
    return schema


@st.composite
def _containers(draw: Any, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    kind = draw(st.sampled_from(["array", "tuple", "object", "anyOf"]))
    if kind == "array":
        low = draw(st.integers(0, 2))
        schema = {"type": "array", "items": draw(children), "minItems": low}
        if draw(st.booleans()):
            schema["maxItems"] = low + draw(st.integers(0, 2))
        return schema
    if kind == "tuple":
        prefix = draw(st.lists(children, min_size=1, max_size=3))
        items = draw(st.sampled_from([False, True]))
        low = draw(st.integers(0, len(prefix) if items is False else 4))
        return {"type": "array", "prefixItems": prefix, "minItems": low, "items": items}
    if kind == "anyOf":
        return {"anyOf": draw(st.lists(children, min_size=1, max_size=3))}
    return _object_schema(draw, children)


_PLAIN_SCHEMAS = st.recursive(LEAF_SCHEMAS, _containers, max_leaves=6)
# `$ref` at the top only: a nested `#/$defs/D` would name the outer one.
SCHEMAS = _PLAIN_SCHEMAS | _PLAIN_SCHEMAS.map(
    lambda inner: {"$defs": {"D": inner}, "type": "array", "items": {"$ref": "#/$defs/D"}}
)


def values_of(schema: Any, root: Any) -> st.SearchStrategy[Any]:
    """Values of ``schema``, objects with their declared members first, in order."""
    if not isinstance(schema, dict) or not schema or schema.keys() <= {"$defs"}:
        return JSON_VALUES
    if "$ref" in schema:
        return values_of(root["$defs"][schema["$ref"].rsplit("/", 1)[-1]], root)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([values_of(option, root) for option in schema["anyOf"]])
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return st.one_of([_values_of_type(kind, schema, root) for kind in kinds])


def _values_of_type(kind: str, schema: dict[str, Any], root: Any) -> st.SearchStrategy[Any]:
    simple: dict[str, st.SearchStrategy[Any]] = {
        "integer": st.integers(),
        "number": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    if kind in simple:
        return simple[kind]
    if kind == "string":
        characters = st.characters(blacklist_categories=("Cs",))
        return st.text(
            characters, min_size=schema.get("minLength", 0), max_size=schema.get("maxLength")
        )
    if kind == "array":
        if "prefixItems" in schema:
            parts = [values_of(item, root) for item in schema["prefixItems"]]
            return st.integers(0, len(parts)).flatmap(lambda n: st.tuples(*parts[:n]).map(list))
        item = values_of(schema.get("items", {}), root)
        return st.lists(item, min_size=schema.get("minItems", 0), max_size=schema.get("maxItems"))
    return _object_values(schema, root)


def _object_values(schema: dict[str, Any], root: Any) -> st.SearchStrategy[Any]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    extra = schema.get("additionalProperties")
    members = {name: values_of(sub, root) for name, sub in properties.items()}

    @st.composite
    def build(draw: Any) -> dict[str, Any]:
        value = {
            name: draw(strategy)
            for name, strategy in members.items()
            if name in required or draw(st.booleans())
        }
        if extra is True or isinstance(extra, dict) or (extra is None and not properties):
            more = values_of(extra if isinstance(extra, dict) else {}, root)
            keys = KEYS.filter(lambda k: k not in properties)
            value.update(draw(st.dictionaries(keys, more, max_size=2)))
        return value

    return build()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_value_of_a_schema_is_in_its_grammar(data: st.DataObject) -> None:
    schema = data.draw(SCHEMAS, label="schema")
    value = data.draw(values_of(schema, schema), label="value")
    assume(jsonschema.Draft202012Validator(schema).is_valid(value))
    text = json.dumps(value, ensure_ascii=False)
    assert accepts(json_value_grammar(schema, references=False), text)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assume(len(keys) == len(set(keys)))
    return dict(pairs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS, st.randoms(use_true_random=False))
def test_every_value_in_a_schemas_grammar_is_valid(schema: Any, rng: random.Random) -> None:
    matcher = Matcher(json_value_grammar(schema, references=False))
    text = random_text(matcher, rng, explore=120)
    value = json.loads(text, object_pairs_hook=_no_duplicates)
    jsonschema.validate(value, schema)


TOOL_NAMES = st.text(alphabet="abé_.-", min_size=1, max_size=6)


@st.composite
def contexts(draw: Any) -> tuple[PromptContext, dict[str, Any]]:
    """A context and, by tool name, each tool's schema."""
    names = draw(st.lists(TOOL_NAMES, max_size=4, unique=True))
    schemas = {name: _object_schema(draw, _PLAIN_SCHEMAS) for name in names}
    agents = draw(st.lists(TOOL_NAMES, max_size=2, unique=True))
    context = PromptContext(
        tools=[{"name": name, "parameters": schema} for name, schema in schemas.items()],
        agents=[{"name": name} for name in agents],
        relics=[{"name": "db", "operations": {"get": {"parameters": obj(("k",), k=STRING)}}}],
        workflows=[{"name": "wf", "parameters": {"a": None, "b": 2}}],
        internal_actions=draw(
            st.lists(
                st.sampled_from(["set_variable", "list_variables", "add_context_feed"]), unique=True
            )
        ),
    )
    return context, schemas


def _check_action(parsed: Any, context: PromptContext, schemas: dict[str, Any]) -> None:
    body = parsed.body
    kind = parsed.type.value
    if kind == "tool":
        jsonschema.validate(body["parameters"], schemas[body["name"]])
    elif kind == "agent":
        assert body["name"] in {a["name"] for a in context.agents}
        assert isinstance(body["message"], str)
    elif kind == "relic":
        assert (body["name"], body["operation"]) == ("db", "get")
        assert isinstance(body["parameters"]["k"], str)
    elif kind == "workflow":
        assert body["name"] == "wf" and "a" in body["parameters"]
        assert set(body["parameters"]) <= {"a", "b"}
    elif kind == "internal":
        assert body["name"] in context.internal_actions
    else:
        assert kind == "llm" and isinstance(body["prompt"], str)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contexts(), st.randoms(use_true_random=False))
def test_every_turn_in_the_grammar_parses_into_actions_that_can_run(
    offered: tuple[PromptContext, dict[str, Any]], rng: random.Random
) -> None:
    context, schemas = offered
    matcher = Matcher(protocol_grammar(context, references=False))
    text = random_text(matcher, rng, explore=400, end_chance=0.02)
    parser = Parser()
    events = parser.feed(text) + parser.close()
    errors = [e.message for e in events if isinstance(e, ActionErrorEvent)]
    # Random ids may repeat in one turn: the only error the grammar cannot rule out.
    assume(not any(message.startswith("duplicate id") for message in errors))
    assert errors == []
    assert [
        w.message
        for w in events
        if isinstance(w, WarningEvent)
        if not w.message.startswith("depends_on=")
    ] == []
    assert all(e.text.isspace() for e in events if isinstance(e, Text))
    for event in events:
        if isinstance(event, ActionParsed):
            _check_action(event.action, context, schemas)


# -- cost ----------------------------------------------------------------------------------


def many_tools(count: int) -> list[dict[str, Any]]:
    return [
        {
            "name": f"tool_{i}",
            "parameters": obj(
                ("city",),
                city=STRING,
                unit={"enum": ["c", "f"]},
                days={"anyOf": [{"type": "integer"}, {"type": "null"}]},
            ),
        }
        for i in range(count)
    ]


def test_large_tool_sets_keep_few_stacks() -> None:
    # llama.cpp checks every candidate token against every live stack. The
    # names are a trie: past a shared prefix one stack per next character
    # (10 after "tool_"), where a flat alternation keeps 200.
    def turn(name: str) -> str:
        call = f'{{"name": "{name}", "parameters": {{"city": "Oslo", "days": 2}}}}'
        return (
            action(call, 'type="tool" mode="async" id="a" output_key="x"')
            + "<thought>Two at once.\n"
            + action(call.replace("Oslo", "Rome"), 'type="tool" mode="async" id="b"')
            + "</thought>\n"
            + action(call.replace("Oslo", "Lyon"), 'type="tool" mode="async" id="c"')
        )

    small = list(stack_counts(grammar_of(tools=many_tools(4)), turn("tool_3")))
    large = list(stack_counts(grammar_of(tools=many_tools(200)), turn("tool_123")))
    assert max(small) <= 8 and max(large) <= 12
    assert statistics.mean(large) < statistics.mean(small) + 0.5 < 3

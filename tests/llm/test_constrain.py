"""``--constrain``: the protocol grammar on litellm's real HTTP path to loopback servers.

The servers are :class:`tests.llm.fake_openai.FakeOpenAI`: one that answers
like llama.cpp's ``GET /props``, one that publishes llama-cpp-python's
OpenAPI document, one that is neither, one that refuses the grammar, and
one that enforces it (:func:`enforcing`: the reply is what a model that
wants to write a given text writes under the grammar of the request).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ConfigError
from cortex_kernel.llm import constrain
from cortex_kernel.llm.gbnf import check
from cortex_kernel.llm.litellm_model import LiteLLMModel
from cortex_kernel.model_options import ModelOptions, parse_model_line
from cortex_kernel.protocol import ActionErrorEvent
from cortex_kernel.runtime.ports import PromptContext
from cortex_kernel.runtime.run_result import RunResult
from cortex_kernel.runtime.session import Session
from cortex_kernel.runtime.tools import ToolRegistry
from tests.llm.fake_openai import FakeOpenAI, Reply, text_reply
from tests.llm.gbnf import accepts, constrained_text
from tests.llm.support import collect, make_model, request

pytestmark = pytest.mark.anyio

LLAMA_CPP_PROPS = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
LLAMA_CPP_PYTHON_OPENAPI = {
    "paths": {
        "/v1/chat/completions": {
            "post": {
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/CreateChatCompletionRequest"}
                        }
                    }
                }
            }
        }
    },
    "components": {
        "schemas": {
            "CreateChatCompletionRequest": {
                "properties": {"messages": {"type": "array"}, "grammar": {"type": "string"}}
            }
        }
    },
}
FINAL = '<response final="true">done</response>'


@pytest.fixture(autouse=True)
def fresh_detection() -> Iterator[None]:
    """Each test's servers are new (their ports may be reused): nothing detected yet."""
    constrain.forget_support()
    constrain.forget_grammars()
    yield
    constrain.forget_support()
    constrain.forget_grammars()


def population_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    def population(city: str) -> int:
        """People living in ``city``."""
        return {"Paris": 2_100_000, "Lyon": 520_000}.get(city, 1000)

    return tools


def session_on(server: FakeOpenAI, tmp_path: Path, **options: Any) -> Session:
    protocol = options.pop("protocol", "xml")
    # auto unless a test says otherwise: these tests are about what auto does (off is the default).
    settings = {
        "timeout": 10,
        "first_token_timeout": 10,
        "num_retries": 0,
        "constrain": "auto",
        **options,
    }
    return build_session(
        make_model(server, **settings),
        tools=population_tools(),
        transcript_dir=tmp_path,
        protocol=protocol,
    )


def grammar_sent(server: FakeOpenAI, index: int = -1) -> str | None:
    grammar = server.requests[index].body.get("grammar")
    assert grammar is None or isinstance(grammar, str)
    return grammar


def warnings_of(result: RunResult) -> list[str]:
    return [e.message for e in result.events if e.type == "warning"]  # type: ignore[union-attr]


# -- detection -------------------------------------------------------------------------------


async def test_auto_sends_the_grammar_to_llama_cpps_server(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    server.stream(FINAL).stream(FINAL)
    session = session_on(server, tmp_path)
    assert (await session.run("hi")).status == "ok"
    grammar = grammar_sent(server)
    assert grammar is not None and check(grammar) is None
    assert '"population\\""' in grammar  # the session's tool, in the request body
    assert accepts(grammar, FINAL)
    assert server.gets == ["/props"]
    # Asked once per endpoint: a second session on it does not ask again.
    assert (await session_on(server, tmp_path).run("again")).status == "ok"
    assert grammar_sent(server) == grammar
    assert server.gets == ["/props"]


async def test_auto_reads_llama_cpp_pythons_openapi_document(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.get_routes["/openapi.json"] = (200, LLAMA_CPP_PYTHON_OPENAPI)
    server.stream(FINAL)
    assert (await session_on(server, tmp_path).run("hi")).status == "ok"
    assert grammar_sent(server) is not None
    assert server.gets == ["/props", "/openapi.json"]


@pytest.mark.parametrize(
    "routes",
    [
        pytest.param({}, id="neither"),
        pytest.param({"/props": (200, {"model": "x"})}, id="other props"),
        pytest.param(
            {"/openapi.json": (200, {"paths": {"/v1/chat/completions": {"post": {}}}})},
            id="an OpenAPI document without grammar",
        ),
        pytest.param({"/props": (500, {})}, id="an error"),
    ],
)
async def test_auto_sends_nothing_to_other_servers(
    server: FakeOpenAI, tmp_path: Path, routes: dict[str, tuple[int, Any]]
) -> None:
    server.get_routes.update(routes)
    server.stream(FINAL).stream(FINAL)
    session = session_on(server, tmp_path)
    assert (await session.run("hi")).status == "ok"
    assert (await session.run("again")).status == "ok"
    assert grammar_sent(server, 0) is None and grammar_sent(server, 1) is None
    assert server.gets == ["/props", "/openapi.json"]  # once, not per turn


async def test_off_grammar_and_what_never_gets_one(server: FakeOpenAI, tmp_path: Path) -> None:
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    server.stream(FINAL)
    assert (await session_on(server, tmp_path, constrain="off").run("hi")).status == "ok"
    assert grammar_sent(server) is None and server.gets == []
    # `grammar` sends it without asking the server.
    server.get_routes.clear()
    server.stream(FINAL)
    assert (await session_on(server, tmp_path, constrain="grammar").run("hi")).status == "ok"
    assert grammar_sent(server) is not None and server.gets == []
    # Function calling has no protocol text to constrain.
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    server.stream("It is big.")
    result = await session_on(server, tmp_path, protocol="tools").run("hi")
    assert result.status == "ok" and grammar_sent(server) is None
    # Nor does a request without the turn's prompt context (an llm action, a warm-up).
    server.stream("plain text")
    chunks = await collect(make_model(server, constrain="grammar").stream(request()))
    assert "".join(chunks) == "plain text" and grammar_sent(server) is None


# -- refusal ---------------------------------------------------------------------------------


async def test_a_refused_grammar_falls_back_with_one_warning(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    call = '{"name": "population", "parameters": {"city": "Lyon"}}'
    server.error(400, message="Failed to parse grammar")
    server.stream(f'<action type="tool" mode="sync" id="p" output_key="lyon">{call}</action>')
    server.stream('<response final="true">Lyon: $lyon</response>')
    session = session_on(server, tmp_path)  # no retries: the fallback is not one
    result = await session.run("how many in Lyon?")
    assert (result.status, result.answer) == ("ok", "Lyon: 520000")
    assert [grammar_sent(server, i) is not None for i in range(3)] == [True, False, False]
    (warning,) = warnings_of(result)
    assert "refused the protocol grammar" in warning and "Failed to parse grammar" in warning
    assert session.config.model.grammar_refused is not None  # type: ignore[attr-defined]
    # Another session on that server does not send it either, nor asks again.
    server.stream(FINAL)
    assert (await session_on(server, tmp_path).run("hi")).status == "ok"
    assert grammar_sent(server) is None and server.gets == ["/props"]


async def test_an_error_that_is_not_about_the_grammar_is_not_a_fallback(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    server.error(400, message="context length exceeded")
    result = await session_on(server, tmp_path).run("hi")
    assert result.status == "error" and "context length exceeded" in result.message
    assert len(server.requests) == 1 and not warnings_of(result)


async def test_a_grammar_that_would_not_load_is_never_sent(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama-cpp-python's server exits on a grammar it cannot parse: the check
    # before sending is what keeps a generator bug from killing it.
    monkeypatch.setattr(constrain, "protocol_grammar", lambda context: "root ::= missing\n")
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    server.stream(FINAL).stream(FINAL)
    session = session_on(server, tmp_path, constrain="grammar")
    first = await session.run("hi")
    assert first.status == "ok" and grammar_sent(server) is None
    (warning,) = warnings_of(first)
    assert "not sent" in warning and "undefined rule identifier 'missing'" in warning
    second = await session.run("again")
    assert second.status == "ok" and warnings_of(second) == []  # said once


def test_secrets_never_reach_the_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-proj-SECRETSECRET0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    schema = {"type": "object", "properties": {"key": {"enum": [secret, "public"]}}}
    context = PromptContext(tools=[{"name": "login", "parameters": schema}])
    grammar, problem = constrain.grammar_for(context)
    assert problem is None and grammar is not None
    assert "SECRETSECRET" not in grammar and "public" in grammar
    explicit, _ = constrain.grammar_for(
        PromptContext(tools=[{"name": "key-AAAABBBBCCCCDDDD1234", "parameters": {}}]),
        ("key-AAAABBBBCCCCDDDD1234",),
    )
    assert explicit is not None and "AAAABBBB" not in explicit


# -- a server that enforces the grammar ------------------------------------------------------


def enforcing(*candidates: str) -> Reply:
    """A reply made at request time from what the model would write, best first.

    Without a grammar the first candidate is sent. With one, the first
    candidate the grammar accepts, as sampling under a grammar keeps the
    likeliest allowed text; when it accepts none, the first one as decoded
    under the grammar (each refused character masked, then the shortest end).
    """

    def reply(body: dict[str, Any]) -> Reply:
        grammar = body.get("grammar")
        if not isinstance(grammar, str):
            return text_reply(candidates[0], chunk_size=5)
        for text in candidates:
            if accepts(grammar, text):
                return text_reply(text, chunk_size=5)
        return text_reply(constrained_text(grammar, candidates[0]), chunk_size=5)

    return Reply(compute=reply)


# What Qwen2.5-Coder-1.5B writes without a grammar: text outside any element,
# an output_key with a space, the tool's JSON schema as its parameters, the
# worked example's log_request.
DRIFTING = (
    "Sure! Let me check.\n"
    "<thought>I look up both cities.\n"
    '<action type="tool" mode="async" id="p1" output_key="pop paris">'
    '{"name": "population", "parameters": {"type": "object", "properties": '
    '{"city": {"type": "string"}}}}</action>\n'
    '<action type="tool" mode="fire_and_forget">'
    '{"name": "log_request", "parameters": {"topic": "population"}}</action>\n'
    '<action type="tool" mode="sync" id="p2" output_key="lyon">'
    '{"name": "population", "parameters": {"city": "Lyon"}}</action>'
)
# What it writes when those are masked (no thought first, no sync action).
WELL_FORMED = (
    '<action type="tool" mode="async" id="p1" output_key="paris">'
    '{"name": "population", "parameters": {"city": "Paris"}}</action>\n'
    "<thought>Lyon too.\n"
    '<action type="tool" mode="async" id="p2" output_key="lyon">'
    '{"name": "population", "parameters": {"city": "Lyon"}}</action></thought>'
)
ANSWER = '<response final="true">Paris: $paris, Lyon: $lyon.</response>'


async def run_model(server: FakeOpenAI, tmp_path: Path, mode: str, *first: str) -> RunResult:
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    server.add(enforcing(*first))
    server.add(enforcing(ANSWER), times=3)  # later turns (a repair turn included)
    return await session_on(server, tmp_path, constrain=mode).run("Paris and Lyon?")


def action_errors(result: RunResult) -> list[str]:
    return [e.message for e in result.events if isinstance(e, ActionErrorEvent)]


async def test_a_server_that_enforces_the_grammar_gets_no_action_errors(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    result = await run_model(server, tmp_path, "auto", DRIFTING, WELL_FORMED)
    assert grammar_sent(server, 0) is not None
    assert action_errors(result) == []
    assert (result.status, result.answer) == ("ok", "Paris: 2100000, Lyon: 520000.")


async def test_the_same_model_without_the_grammar_gets_them(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    result = await run_model(server, tmp_path, "off", DRIFTING, WELL_FORMED)
    assert grammar_sent(server, 0) is None
    messages = action_errors(result)
    assert any("invalid output_key 'pop paris'" in m for m in messages)
    assert any("unknown tool 'log_request'" in m for m in messages)
    assert any(e.type == "text" and "Sure!" in e.text for e in result.events)  # type: ignore[union-attr]


async def test_masked_character_by_character_it_still_gets_none(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    result = await run_model(server, tmp_path, "auto", DRIFTING)
    assert action_errors(result) == []
    assert not any(e.type == "text" and e.text.strip() for e in result.events)  # type: ignore[union-attr]
    assert result.status in ("ok", "incomplete")


# -- the option ------------------------------------------------------------------------------


def test_the_constrain_option_everywhere(tmp_path: Path) -> None:
    spec, options = parse_model_line("openai/local --constrain off")
    assert (spec, options) == ("openai/local", ModelOptions(constrain="off"))
    assert options.model_kwargs() == {"constrain": "off"}
    with pytest.raises(ConfigError, match="--constrain"):
        parse_model_line("m --constrain maybe")
    assert ModelOptions.from_mapping({"constrain": "grammar"}).constrain == "grammar"
    with pytest.raises(ConfigError, match="constrain"):
        ModelOptions.from_mapping({"constrain": "always"})
    with pytest.raises(ConfigError, match="--constrain"):
        LiteLLMModel("openai/x", constrain="always")
    assert LiteLLMModel("openai/x").constrain == "off"
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(
        "name: local\nmodel:\n  name: openai/local\n  api_base: http://127.0.0.1:9/v1\n"
        "  constrain: 'off'\n",
        encoding="utf-8",
    )
    session = build_session(manifest=manifest, transcript_dir=tmp_path)
    assert session.config.model.constrain == "off"  # type: ignore[attr-defined]
    overridden = build_session(
        manifest=manifest, options=ModelOptions(constrain="grammar"), transcript_dir=tmp_path
    )
    assert overridden.config.model.constrain == "grammar"  # type: ignore[attr-defined]
    assert (
        json.loads(json.dumps(ModelOptions(constrain="auto").model_dump()))["constrain"] == "auto"
    )


async def test_the_check_turn_of_a_worked_out_figure_may_call_only_the_tool_asked_for(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # Asked in words to compute 250 × 1.08 with a tool, the 1.5B model looked
    # the rate up again; under the check turn's grammar it cannot.
    tools = population_tools()

    @tools.register
    def multiply(a: float, b: float) -> float:
        """The product of two numbers."""
        return a * b

    lookup = (
        '<action type="tool" mode="async" id="p" output_key="p">'
        '{"name": "population", "parameters": {"city": "Lyon"}}</action>'
    )
    server.get_routes["/props"] = (200, LLAMA_CPP_PROPS)
    server.stream(lookup)
    server.stream('<response final="true">Twice that is 1,040,001.</response>')
    server.stream(
        '<action type="tool" mode="async" id="m" output_key="twice">'
        '{"name": "multiply", "parameters": {"a": "$p", "b": 2}}</action>'
    )
    server.stream('<response final="true">Twice that is $twice.</response>')
    session = build_session(
        make_model(server, timeout=10, num_retries=0, constrain="grammar"),
        tools=tools,
        transcript_dir=tmp_path,
    )
    result = await session.run("Multiply the population of Lyon by two.")
    assert (result.status, result.answer) == ("ok", "Twice that is 1040000.0.")
    check_grammar, after = grammar_sent(server, 2), grammar_sent(server, 3)
    assert check_grammar is not None and after is not None
    assert check(check_grammar) is None
    assert accepts(
        check_grammar,
        '<action type="tool" mode="async" id="m2">'
        '{"name": "multiply", "parameters": {"a": 1, "b": 2}}</action>',
    )
    assert not accepts(check_grammar, lookup.replace('id="p"', 'id="p2"'))
    assert accepts(check_grammar, FINAL)
    # The system prompt is the same on every turn (a server's prefix cache hits).
    prompts = {r.body["messages"][0]["content"] for r in server.requests}
    assert len(prompts) == 1 and "population(city: string)" in prompts.pop()
    # The turn after the check may call anything again.
    assert accepts(after, lookup.replace('id="p"', 'id="p2"'))

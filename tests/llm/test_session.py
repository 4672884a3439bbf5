"""The runtime on a real model path: Session → LiteLLMModel → litellm → HTTP → fake provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortex_kernel.agent import build_session
from cortex_kernel.llm import ProtocolPrompt
from cortex_kernel.runtime.run_result import RunResult
from cortex_kernel.runtime.session import Session
from cortex_kernel.runtime.tools import ToolRegistry
from tests.llm.fake_openai import FakeOpenAI
from tests.llm.support import add, adder, make_model, registry

pytestmark = pytest.mark.anyio

SECRET = "sk-proj-SECRET-do-not-leak-0123456789"

TURN_1 = (
    "<thought>I store the value first.</thought>"
    '<action type="internal" mode="sync" id="s1">'
    '{"name": "set_variable", "parameters": {"name": "x", "value": 42}}</action>'
)
TURN_2 = '<response final="true">x is $x</response>'


def _read_all(folder: Path) -> list[str]:
    return [path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.jsonl"))]


def session_for(server: FakeOpenAI, tmp_path: Path, **options: object) -> Session:
    return build_session(
        make_model(server, **options),  # type: ignore[arg-type]
        prompt=ProtocolPrompt(),
        transcript_dir=tmp_path,
    )


def tools_session(server: FakeOpenAI, tmp_path: Path, tools: ToolRegistry) -> Session:
    """A function-calling session (``protocol="tools"``) with ``tools``."""
    return build_session(make_model(server), tools=tools, transcript_dir=tmp_path, protocol="tools")


async def run_tools(
    server: FakeOpenAI, tmp_path: Path, tools: ToolRegistry, message: str
) -> RunResult:
    """``message`` run in a new function-calling session with ``tools`` (closed after)."""
    session = tools_session(server, tmp_path, tools)
    try:
        return await session.run(message)
    finally:
        await session.aclose()


async def test_a_two_turn_run_with_a_sync_cut(server: FakeOpenAI, tmp_path: Path) -> None:
    # After the action and some text past it the server stops sending, without
    # ending the stream, until the client leaves: only a cut at </action> lets
    # the run go on, however loaded the machine is.
    first_turn = TURN_1 + " trailing text the model should not have written"
    server.stream(first_turn, chunk_size=8, hang_after=-(-len(first_turn) // 8), hang_seconds=60)
    server.stream(TURN_2, usage=(100, 10))
    # Generous deadlines and no retry: with the helpers' 2 s, a loaded machine
    # (or a GC pause) before the first token made the client retry, and the
    # retry got the second scripted turn ("x is ⟨x: never set⟩").
    session = session_for(
        server,
        tmp_path,
        name="openai/gpt-4o-mini",
        timeout=60,
        first_token_timeout=60,
        num_retries=0,
    )
    result = await session.run("set x")
    assert (result.status, result.answer) == ("ok", "x is 42")
    assert len(server.requests) == 2
    first = server.wait_done(0, timeout=30)  # its thread notices the client left
    assert first.disconnected and not first.completed  # closed at </action>
    system = first.body["messages"][0]
    assert system["role"] == "system" and "<thought>" in system["content"]
    second = server.requests[1].body["messages"]
    assert second[-2] == {"role": "assistant", "content": TURN_1}  # cut at </action>
    assert second[-1]["role"] == "user" and '<action_result id="s1"' in second[-1]["content"]
    assert result.usage.turns == 2
    assert result.usage.prompt_tokens > 100  # the estimate of the cut turn + 100
    assert result.usage.cost is not None and result.usage.cost > 0


async def test_a_broken_stream_leaves_no_half_turn(server: FakeOpenAI, tmp_path: Path) -> None:
    server.stream("<thought>this will be cut off", chunk_size=4, cut_after=3)
    session = session_for(server, tmp_path)
    result = await session.run("hello")
    assert result.status == "error"
    assert "discarded" in result.message
    assert not any("this will" in str(m.get("content")) for m in session.history())
    server.stream(TURN_2.replace("$x", "fine"))
    again = await session.run("again")
    assert again.answer == "x is fine"
    sent = server.requests[-1].body["messages"]
    assert not any("<thought>this" in str(m.get("content")) for m in sent)


async def test_retries_exhausted_end_the_run_with_the_mapped_message(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.error(503, times=3)
    result = await session_for(server, tmp_path, num_retries=2).run("hello")
    assert result.status == "error"
    assert "ProviderDown" in result.message and "--retries" in result.message
    assert len(server.requests) == 3


async def test_build_session_uses_the_environment(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_BASE", server.api_base)
    server.stream(TURN_2.replace("$x", "ok"))
    session = build_session("openai/gpt-4o-mini", transcript_dir=tmp_path)
    result = await session.run("hi")
    assert result.answer == "x is ok"
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert "cortex protocol v" in server.requests[0].body["messages"][0]["content"]


async def test_the_key_never_leaks(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_BASE", server.api_base)
    server.stream(TURN_1).stream(TURN_2)
    server.error(401, message=f"Incorrect API key provided: {SECRET}")
    session = build_session("openai/gpt-4o-mini", transcript_dir=tmp_path)
    events: list[str] = []
    ok = await session.run("set x", on_event=lambda e: events.append(e.to_json()))
    failed = await session.run("again", on_event=lambda e: events.append(e.to_json()))
    assert ok.status == "ok" and failed.status == "error"
    assert "OPENAI_API_KEY" in failed.message
    assert SECRET not in failed.message
    assert not [e for e in events if SECRET in e]
    transcripts = _read_all(tmp_path)
    assert transcripts
    for text in transcripts:
        assert SECRET not in text
    for record in server.requests:
        assert SECRET not in json.dumps(record.body)  # the prompt as the provider saw it
    assert SECRET not in repr(session.config.model)


async def test_native_tool_calls_run_and_answer_with_tool_messages(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    tools = adder()

    server.tool_calls(
        [("call_1", "add", '{"a": 2, "b": 3}'), ("call_2", "add", '{"a": 1, "b": 1}')]
    )
    server.stream("The sums are 5 and 2.")
    session = build_session(
        make_model(server),
        tools=tools,
        prompt=ProtocolPrompt(),
        transcript_dir=tmp_path,
        protocol="tools",
    )
    result = await session.run("add things")
    assert result.status == "ok", result.message
    assert "5 and 2" in result.answer
    first = server.requests[0].body
    assert first["tools"][0]["function"]["name"] == "add"
    assert "<thought>" not in first["messages"][0]["content"]  # the tools prompt
    sent = server.requests[1].body["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    answers = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    # Each result says which call it answers (small models lose track otherwise).
    assert answers == {"call_1": "add(a=2, b=3) returned: 5", "call_2": "add(a=1, b=1) returned: 2"}


async def test_function_calls_bind_output_keys_and_fill_the_answer(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """Function calling has no attributes: ``output_key`` is an optional argument
    of every function, moved to the action, so ``$name`` works in the answer."""
    tools = adder()

    @tools.register
    def tag(text: str, output_key: str) -> str:
        """A tool with its own ``output_key`` argument keeps it."""
        return f"{text}:{output_key}"

    server.tool_calls(
        [
            ("call_1", "add", '{"a": 2, "b": 3, "output_key": "total"}'),
            ("call_2", "tag", '{"text": "t", "output_key": "mine"}'),
        ]
    )
    server.stream("The total is $total.")
    session = tools_session(server, tmp_path, tools)
    result = await session.run("add 2 and 3")
    assert (result.status, result.answer) == ("ok", "The total is 5.")
    assert session.variables["total"] == 5
    offered = {t["function"]["name"]: t["function"] for t in server.requests[0].body["tools"]}
    assert "output_key" in offered["add"]["parameters"]["properties"]
    assert "output_key" not in offered["add"]["parameters"].get("required", [])
    sent = server.requests[1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == [
        "add(a=2, b=3) returned: 5",
        # The tool's own output_key argument is a real argument: shown.
        'tag(text="t", output_key="mine") returned: t:mine',
    ]
    assert "mine" not in session.variables


@pytest.mark.parametrize(
    "content",
    [
        # What llama-cpp-python's server returned for Qwen2.5-Coder-1.5B.
        '```json\n{\n  "name": "add",\n  "arguments": {\n    "a": 2,\n    "b": 3\n  }\n}\n```',
        '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
    ],
)
async def test_tool_calls_written_as_text_are_run_in_the_tools_protocol(
    server: FakeOpenAI, tmp_path: Path, content: str
) -> None:
    tools = adder()

    server.stream(content)
    server.stream("The sum is 5.")
    result = await run_tools(server, tmp_path, tools, "add 2 and 3")
    assert (result.status, result.answer) == ("ok", "The sum is 5.")
    sent = server.requests[1].body["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"] == {
        "name": "add",
        "arguments": '{"a": 2, "b": 3}',
    }
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["add(a=2, b=3) returned: 5"]
    assert assistant["content"] == ""  # the call's text is not echoed besides tool_calls
    assert "add" not in result.answer


async def test_a_text_call_with_code_in_python_triple_quotes_runs(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # What Qwen2.5-Coder-1.5B wrote for a question about a DataFrame: JSON
    # with the code in Python's triple quotes, which strict JSON refuses.
    def python(code: str) -> str:
        """Run Python code."""
        return f"ran {len(code.splitlines())} lines"

    tools = registry(python)
    server.stream(
        '```json\n{\n  "name": "python",\n  "arguments": {\n    "code": """\n'
        "n = sales[sales['region'] == 'North'].shape[0]\nprint(n)\n\"\"\"\n  }\n}\n```"
    )
    server.stream("Done.")
    result = await run_tools(server, tmp_path, tools, "how many sales in the North?")
    assert result.status == "ok", result.message
    sent = server.requests[1].body["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    code = "\nn = sales[sales['region'] == 'North'].shape[0]\nprint(n)\n"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"code": code}
    [reply] = [m["content"] for m in sent if m["role"] == "tool"]
    assert reply.startswith("python(code=") and reply.endswith("returned: ran 3 lines")


async def test_text_calls_over_several_turns_get_their_own_ids(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """Seen from Qwen2.5-Coder-1.5B: every turn's call was ``call_text_1``, and the
    second turn's was refused as a duplicate of the first (which had succeeded)."""
    tools = adder()

    server.stream('```json\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n```')
    server.stream('```json\n{"name": "add", "arguments": {"a": 5, "b": 1}}\n```')
    server.stream('{"name": "reverse", "arguments": {"items": [1, 2]}}')
    server.stream("5, then 6.")
    result = await run_tools(server, tmp_path, tools, "add 2 and 3, then add 1")
    assert (result.status, result.answer) == ("ok", "5, then 6.")
    assert not [e for e in result.events if e.type == "action_error" and "duplicate" in e.message]
    sent = server.requests[3].body["messages"]
    answers = [m["content"] for m in sent if m["role"] == "tool"]
    assert answers[:2] == ["add(a=2, b=3) returned: 5", "add(a=5, b=1) returned: 6"]
    # An unknown tool written in the call shape is a call: its error lists the tools.
    assert "no function reverse" in answers[2] and "your functions are add" in answers[2]


async def test_text_that_only_mentions_a_tool_stays_an_answer(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    from cortex_kernel.llm.function_calling import text_tool_calls

    assert text_tool_calls('Call {"name": "add", "arguments": {}} to add.', ["add"]) == []
    assert text_tool_calls('{"name": "unknown", "x": 1}', ["add"]) == []
    assert text_tool_calls("[1, 2]", ["add"]) == []
    assert [c.name for c in text_tool_calls('[{"name": "add", "arguments": "{}"}]', ["add"])] == [
        "add"
    ]


# What Qwen2.5-Coder-1.5B wrote for "What is the total population of Nice and
# Lille together?" with function calling: fenced calls, a sentence, a call
# using the first two's results, then a call it imagined as the answer.
PLANNED_CALLS = (
    '```json\n{\n  "name": "population",\n  "arguments": {\n    "city": "Nice",\n'
    '    "output_key": "nice"\n  }\n}\n```\n'
    '```json\n{"name": "population", "arguments": {"city": "Lille", '
    '"output_key": "lille"}}\n```\n\n'
    "To get the total population, you can add these two values together:\n"
    '```json\n{"name": "add", "arguments": {"a": "$nice", "b": "$lille", '
    '"output_key": "total"}}\n```\n\n'
    "The total population is 584795."
)


async def test_calls_written_as_blocks_among_text_run_and_chain(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    def population(city: str) -> int:
        """Population of a city."""
        return {"Nice": 348_085, "Lille": 236_710}[city]

    tools = registry(population, add)
    server.stream(PLANNED_CALLS, chunk_size=3)
    server.stream("Together: $total.")
    result = await run_tools(
        server, tmp_path, tools, "What is the total population of Nice and Lille together?"
    )
    assert (result.status, result.answer) == ("ok", "Together: 584795.")
    sent = server.requests[1].body["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == [
        "population",
        "population",
        "add",
    ]
    # Neither the calls' text nor the answer it imagined goes back as its own words.
    assert assistant["content"] == ""
    assert [m["content"] for m in sent if m["role"] == "tool"][2] == (
        'add(a="$nice", b="$lille") returned: 584795'
    )


async def test_a_code_block_in_an_answer_stays_the_answer(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    tools = adder()

    answer = 'Use a slice:\n```python\nitems[::-1]\n```\nOr as JSON:\n```json\n{"a": 1}\n```'
    server.stream(answer, chunk_size=2)
    result = await run_tools(server, tmp_path, tools, "How do I reverse a list?")
    assert (result.status, result.answer) == ("ok", answer)
    assert len(server.requests) == 1


async def test_a_call_in_the_syntax_of_the_tool_messages_is_a_call(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """Seen from Qwen2.5-Coder-1.5B for "Convert that temperature to Fahrenheit":
    its call in the syntax of the tool messages it had seen, with the result it
    imagined (and the wrong case)."""
    tools = ToolRegistry()
    ran: list[float] = []

    @tools.register
    def to_fahrenheit(celsius: float) -> float:
        """Convert a temperature from Celsius to Fahrenheit."""
        ran.append(celsius)
        return round(celsius * 9 / 5 + 32, 1)

    server.stream("To_fahrenheit(celsius=15) returned: 60.0", chunk_size=4)
    server.stream("It is 59 °F.")
    result = await run_tools(server, tmp_path, tools, "Convert 15 °C to Fahrenheit.")
    assert (result.status, result.answer, ran) == ("ok", "It is 59 °F.", [15])
    sent = server.requests[1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == [
        "to_fahrenheit(celsius=15) returned: 59.0"
    ]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["content"] == ""  # the imagined 60.0 is not kept as its words
    # ... but the transcript keeps what the model wrote.
    [turn] = [r for r in _records(tmp_path) if r["type"] == "model_turn" and "written" in r]
    assert turn["written"] == "To_fahrenheit(celsius=15) returned: 60.0"
    assert turn["tool_calls"][0]["function"]["name"] == "to_fahrenheit"


def _records(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for text in _read_all(folder) for line in text.splitlines()]


async def test_a_call_to_a_function_not_given_says_to_answer_without_one(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """Seen from Qwen2.5-Coder-1.5B for "Which expression reverses `items`?": a
    made-up ``reverse`` function; told only "unknown tool" it said so and stopped,
    told it may answer without a function it answered (``items[::-1]``)."""
    server.stream('```json\n{"name": "reverse", "arguments": {"items": [1, 2]}}\n```', chunk_size=5)
    server.stream("Use `items[::-1]`.")
    result = await run_tools(server, tmp_path, adder(), "Which expression reverses `items`?")
    assert (result.status, result.answer) == ("ok", "Use `items[::-1]`.")
    [tool_message] = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert tool_message["content"] == (
        "reverse(items=[1, 2]) error: there is no function reverse; your functions are add. "
        "When none of them fits, answer the question yourself, without a function."
    )
    # The transcript shows what each turn answered, as the model got it.
    turns = [r for r in _records(tmp_path) if r["type"] == "model_turn"]
    # Nothing worked, but with function calling the question does not come
    # again: the 1.5B model then answered it with a made-up figure.
    assert [t["opening"] for t in turns] == [
        [{"role": "user", "content": "Which expression reverses `items`?"}],
        [tool_message],
    ]


async def test_a_misspelt_function_is_named_in_the_tool_message(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.stream('{"name": "ad", "arguments": {"a": 1, "b": 2}}')
    server.stream('{"name": "add", "arguments": {"a": 1, "b": 2}}')
    server.stream("3")
    result = await run_tools(server, tmp_path, adder(), "1 + 2?")
    assert (result.status, result.answer) == ("ok", "3")
    [tool_message] = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "there is no function ad;" in tool_message["content"]
    assert "Did you mean add?" in tool_message["content"]


async def test_the_transcript_keeps_no_secret_of_what_a_turn_answered(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.stream("<response>done</response>")
    session = session_for(server, tmp_path)
    await session.run(f"use the key {SECRET}")
    text = "\n".join(_read_all(tmp_path))
    assert SECRET not in text
    [turn] = [r for r in _records(tmp_path) if r["type"] == "model_turn"]
    assert "use the key" in str(turn["opening"])


async def test_a_made_up_tool_response_is_not_the_answer(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # Qwen2.5-Coder-1.5B on llama-cpp-python, after a failed call: the chat
    # template's result tag, and nothing else. It was the run's `ok` answer.
    for reply in (
        '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": "x"}}\n</tool_call>',
        "<tool_response>\n\n",  # the turn after the failed call
        "I could not add them: b is not a number.",  # the repair turn's
    ):
        server.stream(reply)
    result = await run_tools(server, tmp_path, adder(), "add 2 and x")
    assert (result.status, result.answer) == ("ok", "I could not add them: b is not a number.")
    # The third request is the repair turn's: it asks for the answer.
    assert "You have not answered yet" in server.requests[2].body["messages"][-1]["content"]
    warnings = [e.message for e in result.events if e.type == "warning"]
    assert any("<tool_response>" in w and "not taken as the answer" in w for w in warnings)


async def test_made_up_tool_responses_only_end_without_an_answer(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.stream("<tool_response>\n8\n</tool_response>")
    server.stream("<tool_response>")
    result = await run_tools(server, tmp_path, adder(), "add 2 and 3")
    assert result.status == "no_answer"
    assert "8" not in result.answer


def _population(city: str) -> int:
    """Population of a city."""
    return {"Nice": 348_085, "Lille": 236_710}[city]


async def test_a_figure_worked_out_in_a_function_calling_answer_is_checked(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # Rule 8 with function calling: the answer is the text of a turn without
    # a call, and a sum done in the model's head is questioned once.
    server.tool_calls(
        [
            ("c1", "_population", '{"city": "Nice"}'),
            ("c2", "_population", '{"city": "Lille"}'),
        ]
    )
    server.stream("Together they have 584,895 people.")
    server.tool_calls([("c3", "add", '{"a": 348085, "b": 236710}')])
    server.stream("Together they have 584795 people.")
    result = await run_tools(
        server, tmp_path, registry(_population, add), "Total population of Nice and Lille?"
    )
    assert (result.status, result.answer) == ("ok", "Together they have 584795 people.")
    asked = server.requests[2].body["messages"][-1]
    assert asked["role"] == "user"
    assert asked["content"].startswith("Your answer states 584,895, which no result")
    assert "compute it with a function instead" in asked["content"]
    # The message names no tool that computes: the model chooses.
    assert "tool_choice" not in server.requests[2].body
    assert result.grounding is not None and not result.grounding.unverified


async def test_a_call_written_in_the_answer_is_made_by_the_next_turn(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # Qwen2.5-Coder-1.5B answered with a snippet calling the tool, twice when
    # asked in words; the check turn names the tool as the provider's tool choice.
    server.stream(
        'Call it like this:\n```python\nnice = _population(city="Nice")\nprint(nice)\n```'
    )
    server.tool_calls([("c1", "_population", '{"city": "Nice"}')])
    server.stream("Nice has 348085 people.")
    result = await run_tools(server, tmp_path, registry(_population), "Population of Nice?")
    assert (result.status, result.answer) == ("ok", "Nice has 348085 people.")
    check = server.requests[1].body
    assert check["messages"][-1]["content"].startswith(
        "Your answer calls _population in its text, where nothing runs."
    )
    assert check["tool_choice"] == {"type": "function", "function": {"name": "_population"}}
    # Only that turn: the answer after the result chooses freely again.
    assert "tool_choice" not in server.requests[2].body


async def test_a_conversion_asked_for_by_name_and_done_in_the_head_is_computed(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # Qwen2.5-Coder-1.5B in the kernel: "21 °C in Fahrenheit." for Nice.
    def weather(city: str) -> dict[str, object]:
        """The weather of a city."""
        return {"temp_c": 21, "sky": "sunny"}

    def to_fahrenheit(celsius: float) -> float:
        """Celsius to Fahrenheit."""
        return celsius * 9 / 5 + 32

    server.tool_calls([("c1", "weather", '{"city": "Nice"}')])
    server.stream("Nice: 21 °C in Fahrenheit.")
    server.tool_calls([("c2", "to_fahrenheit", '{"celsius": 21}')])
    server.stream("Nice: 69.8 °F.")
    tools = registry(weather, to_fahrenheit, add)
    result = await run_tools(server, tmp_path, tools, "Temperature in Nice now, in Fahrenheit?")
    assert (result.status, result.answer) == ("ok", "Nice: 69.8 °F.")
    check = server.requests[2].body
    assert check["messages"][-1]["content"].startswith(
        "The user's message asks for what to_fahrenheit computes, and this run has not called it."
    )
    assert check["tool_choice"] == {"type": "function", "function": {"name": "to_fahrenheit"}}
    warned = [e.message for e in result.events if e.type == "warning"]
    assert warned == [
        "the answer does not use to_fahrenheit, which the message asks for: asked to call it"
    ]


async def test_an_answer_referring_to_variables_nothing_set_is_asked_again(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # It said it used the tool, and wrote $variables no call had set.
    server.stream("I used the `_population` function: Nice has $variables[0] people.")
    server.tool_calls([("c1", "_population", '{"city": "Nice"}')])
    server.stream("Nice has 348085 people.")
    result = await run_tools(server, tmp_path, registry(_population, add), "Population of Nice?")
    assert (result.status, result.answer) == ("ok", "Nice has 348085 people.")
    check = server.requests[1].body
    assert check["messages"][-1]["content"].startswith(
        "Your answer refers to $variables, but no action of this run set it"
    )
    assert check["tool_choice"] == {"type": "function", "function": {"name": "_population"}}
    warned = [e.message for e in result.events if e.type == "warning"]
    assert "the answer refers to $variables, which nothing set: asked again" in warned

"""The agent's Python in the notebook's own namespace, through a real kernel.

A replay model writes ``python`` tool actions; the user's approval is the
message the view's buttons send (``click``). What the code changed is on
``_run.changes`` and in what the model reads; ``%undo`` puts it back.
"""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex_kernel.headless import run_headless
from tests.jupyter.conftest import Kernel
from tests.jupyter.test_tools_kernel import box, click
from tests.llm.fake_openai import FakeOpenAI, text_reply
from tests.replays import write_turns

pytestmark = pytest.mark.kernel

DF = "%%python\nimport pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [10, 20]})\nx = 1"


@pytest.fixture
def kernel(cortex_kernelspec: str) -> Iterator[Kernel]:
    k = Kernel(cortex_kernelspec, dict(os.environ))
    yield k
    k.shutdown()


def function_calling(kernel: Kernel, server: FakeOpenAI, code_first: str = "off") -> None:
    """``df`` defined, code approved, the model served by ``server`` with function calling.

    A data question's code is not asked for alone first unless ``code_first`` says so.
    """
    kernel.python(DF)
    kernel.python("%approvals auto")
    kernel.python(
        f"%model openai/local --api-base {server.api_base} --protocol tools "
        f"--code-first {code_first}"
    )


def test_a_data_question_asks_a_local_model_for_its_code_alone_first(kernel: Kernel) -> None:
    """No tools, no agent prompt: the notebook's variables and the question; the code runs."""
    with FakeOpenAI() as server:
        function_calling(kernel, server, code_first="auto")  # a loopback server: on
        server.add(text_reply("Sure:\n```python\nprint(int(df['b'].sum()))\n```\nIt prints."))
        server.add(text_reply("The total of b is 30."))
        server.add(text_reply("A p-value is a probability."))
        asked = kernel.run("What is the total of column b in df?")
        other = kernel.run("What is a p-value?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok" and other.status == "ok", asked.reply["content"]
    first = bodies[0]
    assert "tools" not in first and first["stop"] == ["\n```\n"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    asked_for = first["messages"][1]["content"]
    assert "df: DataFrame (shape (2, 2), columns ['a']: int64, ['b']: int64)" in asked_for
    assert "Question: What is the total of column b in df?" in asked_for
    # The code ran as the python call; the next turn (the agent's prompt and
    # tools) reads that call and its output, never the explanation after it.
    assert "tools" in bodies[1]
    call = next(m for m in bodies[1]["messages"] if m.get("tool_calls"))["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"code": "print(int(df['b'].sum()))"}
    result = next(m for m in bodies[1]["messages"] if m["role"] == "tool")["content"]
    assert "30" in result and "It prints" not in json.dumps(bodies[1]["messages"])
    assert "The total of b is 30." in asked.result_data()["text/plain"]
    # The code is shown in the view like any call's.
    final = asked.of_type("update_display_data")[-1]["content"]["data"]["text/plain"]
    assert "print(int(df['b'].sum()))" in final
    # A question naming no data is asked as usual.
    assert "tools" in bodies[2] and len(bodies) == 3


def test_in_xml_the_code_asked_for_alone_is_the_turns_action(kernel: Kernel) -> None:
    """Protocol text: the call is written into the conversation as the model's own action."""
    with FakeOpenAI() as server:
        kernel.python(DF)
        kernel.python("%approvals auto")
        kernel.python(
            f"%model openai/local --api-base {server.api_base} --protocol xml "
            "--constrain grammar --code-first auto"
        )
        server.add(text_reply("```python\nprint(int(df['b'].sum()))\n```\nIt prints."))
        server.add(text_reply("<response>The total of b is 30.</response>"))
        asked = kernel.run("What is the total of column b in df?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok", asked.reply["content"]
    assert "The total of b is 30." in asked.result_data()["text/plain"]
    # The request for code carries no grammar; the agent's next turn does.
    assert "grammar" not in bodies[0] and "grammar" in bodies[1]
    assistant = next(m for m in bodies[1]["messages"] if m["role"] == "assistant")
    assert '<action type="tool"' in assistant["content"] and "It prints" not in assistant["content"]
    assert (
        "print(int(df['b'].sum()))"
        in json.loads(assistant["content"].split(">", 1)[1].rsplit("</action>", 1)[0])[
            "parameters"
        ]["code"]
    )
    results = json.dumps(bodies[1]["messages"])
    assert "<action_result" in results and "30" in results


def test_no_code_in_the_reply_asks_the_usual_turn(kernel: Kernel) -> None:
    """A reply to the request for code that holds none is dropped; the agent's turn follows."""
    with FakeOpenAI() as server:
        function_calling(kernel, server, code_first="on")
        server.add(text_reply("I would need to see the data."))
        server.tool_calls([("c1", "python", json.dumps({"code": "int(df['b'].sum())"}))])
        server.add(text_reply("The total of b is 30."))
        asked = kernel.run("What is the total of column b in df?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok", asked.reply["content"]
    assert "tools" not in bodies[0] and "tools" in bodies[1] and len(bodies) == 3
    assert "need to see" not in json.dumps(bodies[1]["messages"])
    assert "The total of b is 30." in asked.result_data()["text/plain"]


def python_turns(tmp_path: Path, code: str, name: str = "turns") -> Path:
    """A replay: one ``python`` action running ``code``, then an answer."""
    call = json.dumps({"name": "python", "parameters": {"code": code}})
    turns = [f'<action type="tool" id="p1">{call}</action>', "<response>done</response>"]
    path = tmp_path / f"{name}.jsonl"
    write_turns(path, *turns)
    return path


def test_asks_by_default_then_the_change_is_reported_and_undone(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.python(DF)
    replay = python_turns(tmp_path, "df['total'] = df.a + df.b")
    kernel.python(f"%model replay:{replay}")
    assert kernel.python("%approvals").strip() == "approvals: ask"
    msg_id = kernel.send("add a total column")
    kernel.wait_for_op(msg_id, "n", "p1", "awaiting approval", timeout=30)
    shown = box(kernel, "p1")
    # The whole code, and what it writes into, before anything runs.
    assert "df['total'] = df.a + df.b" in shown["parameters"]
    assert "This code writes into: df (item assignment)" in shown["parameters"]
    click(kernel, "p1", True)
    result = kernel.collect(msg_id)
    assert result.status == "ok", result.reply["content"]
    assert kernel_columns(kernel) == "['a', 'b', 'total']"
    changes = kernel.python("%%python\nprint(_run.changes[0]['summary'])")
    assert "changed in place: df (column 'total' added" in changes
    # The model read the change with the result.
    assert "[notebook changes: changed in place: df" in kernel.python("%history")
    # The final view says it under the action, marked: an object changed in place.
    final = result.of_type("update_display_data")[-1]["content"]["data"]
    assert "changes: ⚠ changed in place: df (column 'total' added" in final["text/plain"]
    assert "changes: ⚠ changed in place: df" in final["text/html"]
    assert "restored: df" in kernel.python("%undo")
    assert kernel_columns(kernel) == "['a', 'b']"
    assert "nothing to undo" in kernel.python("%undo")


def kernel_columns(kernel: Kernel) -> str:
    return kernel.python("%%python\nprint(list(df.columns))").strip()


def test_a_data_question_answered_without_looking_is_asked_again_with_code(
    kernel: Kernel,
) -> None:
    """Function calling: a guess about `df` is dropped and the turn must call `python`."""
    with FakeOpenAI() as server:
        function_calling(kernel, server)
        server.add(text_reply("The total of b is 42."))  # a guess: no code ran
        server.tool_calls([("c1", "python", json.dumps({"code": "int(df['b'].sum())"}))])
        server.add(text_reply("The total of b is 30."))
        server.add(text_reply("A p-value is a probability."))
        asked = kernel.run("What is the total of column b in df?")
        other = kernel.run("What is a p-value?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok" and other.status == "ok", asked.reply["content"]
    assert "tool_choice" not in bodies[0]
    assert bodies[1]["tool_choice"] == {"type": "function", "function": {"name": "python"}}
    # The guess is no part of the conversation the model is shown again.
    assert "42" not in json.dumps(bodies[1]["messages"])
    # After the result the model answers freely; a question naming no data is never forced.
    assert "tool_choice" not in bodies[2] and "tool_choice" not in bodies[3]
    assert len(bodies) == 4
    answer = asked.result_data()["text/plain"]
    assert "30" in answer and "42" not in answer
    assert "asked again, to call `python` first" in json.dumps(asked.iopub, default=str)


def test_a_data_answer_after_a_failed_look_is_asked_again_with_code(kernel: Kernel) -> None:
    """The code failed and the model answered anyway: one more turn, `python` required."""
    with FakeOpenAI() as server:
        function_calling(kernel, server)
        server.tool_calls([("c1", "python", json.dumps({"code": "int(df[b].sum())"}))])
        server.add(text_reply("no fix"))  # the fix asked on its own: none given
        server.add(text_reply("The total of b is 42."))  # after a NameError: a guess
        server.tool_calls([("c2", "python", json.dumps({"code": "int(df['b'].sum())"}))])
        server.add(text_reply("The total of b is 30."))
        asked = kernel.run("What is the total of column b in df?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok", asked.reply["content"]
    assert [b.get("tool_choice") for b in bodies] == [
        None,
        None,
        None,
        {"type": "function", "function": {"name": "python"}},
        None,
    ]
    # The forced turn answers the same messages the guess did: the failed result.
    assert bodies[3]["messages"] == bodies[2]["messages"]
    assert "The total of b is 30." in asked.result_data()["text/plain"]


def test_failed_code_gets_a_fix_asked_of_the_model_on_its_own(kernel: Kernel) -> None:
    """The failure the model reads next carries the fix a short, separate request wrote."""
    with FakeOpenAI() as server:
        function_calling(kernel, server)
        server.tool_calls([("c1", "python", json.dumps({"code": "int(df[b].sum())"}))])
        server.add(text_reply("```python\nint(df['b'].sum())\n```"))
        server.tool_calls([("c2", "python", json.dumps({"code": "int(df['b'].sum())"}))])
        server.add(text_reply("The total of b is 30."))
        asked = kernel.run("What is the total of column b in df?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok", asked.reply["content"]
    assert "The total of b is 30." in asked.result_data()["text/plain"]
    fix_request = bodies[1]
    assert "tools" not in fix_request  # its own request: the line, the error, the frame
    asked_for = fix_request["messages"][-1]["content"]
    assert asked_for.startswith("df: DataFrame, columns 'a' (int64), 'b' (int64)\n")
    assert "This line:\nint(df[b].sum())\nraised:\nNameError" in asked_for
    # The model reads the fix beside the failure, and the run says it was asked.
    failure = next(m for m in bodies[2]["messages"] if m["role"] == "tool")["content"]
    assert "NameError" in failure and "```python\nint(df['b'].sum())\n```" in failure
    assert "asked on its own for a fix" in json.dumps(asked.iopub, default=str)


def test_in_xml_too_the_failure_carries_the_fix(kernel: Kernel) -> None:
    """The protocol text reads its results in a user message: the fix is there too."""
    call = json.dumps({"name": "python", "parameters": {"code": "int(df[b].sum())"}})
    with FakeOpenAI() as server:
        kernel.python(DF)
        kernel.python("%approvals auto")
        kernel.python(
            f"%model openai/local --api-base {server.api_base} --protocol xml --code-first off"
        )
        server.add(text_reply(f'<action type="tool" id="p1">{call}</action>'))
        server.add(text_reply("```python\nint(df['b'].sum())\n```"))
        server.add(text_reply("<response>I could not compute it.</response>"))
        asked = kernel.run("What is the total of column b in df?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok", asked.reply["content"]
    assert len(bodies) == 3
    results = json.dumps(bodies[2]["messages"])
    assert "[failed at line 1: int(df[b].sum())]" in results
    assert "int(df['b'].sum())" in results and "not run; call it if it is right" in results


def test_a_reply_of_python_code_to_a_data_question_runs_that_code(kernel: Kernel) -> None:
    """Asked about the data, the model replied with the code only: that code is the call."""
    with FakeOpenAI() as server:
        function_calling(kernel, server)
        # Not about the notebook's data: code written for the user is an answer.
        server.add(text_reply("```python\nprint('hello')\n```"))
        written = kernel.run("Write the code that prints hello.")
        server.add(text_reply("```python\nint(df['b'].sum())\n```"))
        server.add(text_reply("The total of b is 30."))
        asked = kernel.run("What is the total of column b in df?")
        bodies = [r.body for r in server.requests]
    assert asked.status == "ok", asked.reply["content"]
    assert "The total of b is 30." in asked.result_data()["text/plain"]
    result = next(m for m in bodies[2]["messages"] if m["role"] == "tool")["content"]
    assert "returned: 30" in result
    assert written.status == "ok", written.reply["content"]
    assert "print('hello')" in written.result_data()["text/plain"]
    assert len(bodies) == 3  # the code written for the user was not run


def test_no_fix_is_asked_of_a_recorded_transcript(kernel: Kernel, tmp_path: Path) -> None:
    """A replay's every request takes a recorded turn: none is spent on a fix."""
    kernel.python(DF)
    kernel.python("%approvals auto")
    kernel.python(f"%model replay:{python_turns(tmp_path, 'int(df[b].sum())')}")
    result = kernel.run("total of b")
    assert result.status == "ok", result.reply["content"]
    assert "done" in result.result_data()["text/plain"]
    assert "asked on its own for a fix" not in json.dumps(result.iopub, default=str)


def test_deny_refuses_and_nothing_runs(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python(DF)
    kernel.python(f"%model replay:{python_turns(tmp_path, 'x = 99')}")
    msg_id = kernel.send("set x")
    kernel.wait_for_op(msg_id, "n", "p1", "awaiting approval", timeout=30)
    click(kernel, "p1", False)
    assert kernel.collect(msg_id).status == "ok"
    assert kernel.python("%%python\nprint(x)").strip() == "1"
    assert "denied the call to tool 'python'" in kernel.python("%history")


def test_auto_runs_new_names_asks_before_a_rebinding_and_undo_rebinds(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.python(DF)
    assert kernel.python("%approvals approve").strip() == "approvals: auto"
    kernel.python(f"%model replay:{python_turns(tmp_path, 'total = df.a.sum()', name='new')}")
    result = kernel.run("sum a")
    assert result.status == "ok", result.reply["content"]  # a new name: no box
    assert kernel.python("%%python\nprint(total)").strip() == "3"
    # Giving the user's x another value asks first, as a write into an object does.
    replay = python_turns(tmp_path, "x = 2\ny = df.a.sum()")
    kernel.python(f"%model replay:{replay}")
    msg_id = kernel.send("rebind x")
    kernel.wait_for_op(msg_id, "n", "p1", "awaiting approval", timeout=30)
    assert "x = 2 (replaces x)" in box(kernel, "p1")["parameters"]
    click(kernel, "p1", True)
    assert kernel.collect(msg_id).status == "ok"
    assert kernel.python("%%python\nprint(x, y)").strip() == "2 3"
    assert kernel.python("%%python\nprint(_run.changes[0]['rebound'])").strip() == "['x']"
    undone = kernel.python("%undo")
    assert "restored: x" in undone and "removed: y" in undone
    assert kernel.python("%%python\nprint(x, 'y' in dir())").strip() == "1 False"


def test_an_output_key_binds_the_value_the_code_computed(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python(DF)
    kernel.python("%approvals auto")
    calls = [
        ("p1", "by_a", "df.groupby('a')['b'].sum()"),  # an expression's value
        ("p2", "doubled", "doubled = df['b'] * 2"),  # the name the code bound itself
    ]
    turns = [
        "".join(
            f'<action type="tool" mode="async" id="{i}" output_key="{key}">'
            + json.dumps({"name": "python", "parameters": {"code": code}})
            + "</action>"
            for i, key, code in calls
        ),
        "<response>done</response>",
    ]
    path = tmp_path / "keys.jsonl"
    write_turns(path, *turns)
    kernel.python(f"%model replay:{path}")
    result = kernel.run("group b by a, and double b")
    assert result.status == "ok", result.reply["content"]
    # The notebook holds pandas objects, not the text the model read.
    check = "%%python\nprint(type(by_a).__name__, by_a.to_dict(), type(doubled).__name__)"
    assert kernel.python(check).strip() == "Series {1: 10, 2: 20} Series"
    # doubled was bound by the agent's own code: no warning that the user owns it.
    warnings = "%%python\nprint([getattr(e, 'message', '') for e in _run.events])"
    assert "did not bind" not in kernel.python(warnings)


def test_auto_still_asks_before_writing_into_user_objects(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python(DF)
    kernel.python("%approvals auto")
    replay = python_turns(tmp_path, "df.drop(columns=['b'], inplace=True)")
    kernel.python(f"%model replay:{replay}")
    msg_id = kernel.send("drop b")
    kernel.wait_for_op(msg_id, "n", "p1", "awaiting approval", timeout=30)
    assert "in-place method" in box(kernel, "p1")["parameters"]
    click(kernel, "p1", True)
    assert kernel.collect(msg_id).status == "ok"
    assert kernel_columns(kernel) == "['a']"


def test_a_figure_is_image_display_data(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python("%approvals bypass")
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('plotted')"
    kernel.python(f"%model replay:{python_turns(tmp_path, code)}")
    result = kernel.run("plot it")
    assert result.status == "ok", result.reply["content"]
    images = result.images()
    assert len(images) == 1
    assert base64.b64decode(images[0]).startswith(b"\x89PNG")


def test_agent_code_puts_the_code_in_the_next_cell(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python("%approvals bypass")
    kernel.python(f"%model replay:{python_turns(tmp_path, 'z = 40 + 2')}")
    assert kernel.run("compute").status == "ok"
    result = kernel.run("%agent_code")
    payload = result.reply["content"]["payload"]
    assert payload[0]["source"] == "set_next_input"
    assert payload[0]["text"] == "%%python\nz = 40 + 2"


def test_headless_refuses_without_yes(tmp_path: Path) -> None:
    replay = python_turns(tmp_path, "print(6 * 7)")
    out = io.StringIO()
    run_headless("compute", model=f"replay:{replay}", out=out)
    failed = [
        e for e in map(json.loads, out.getvalue().splitlines()) if e["type"] == "action_failed"
    ]
    assert "nobody can approve here" in failed[0]["error"]
    out = io.StringIO()
    assert run_headless("compute", model=f"replay:{replay}", out=out, yes=True) == 0
    results = [
        e for e in map(json.loads, out.getvalue().splitlines()) if e["type"] == "action_succeeded"
    ]
    assert "42" in json.dumps(results)


ROWS = (
    "%%python\nimport pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3, 4], 'b': [10, 20, 30, 40]})"
)


def test_rows_dropped_in_place_are_reported_and_undone(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python(ROWS)
    kernel.python("%approvals bypass")
    replay = python_turns(tmp_path, "df.drop(index=[0, 1], inplace=True)")
    kernel.python(f"%model replay:{replay}")
    result = kernel.run("drop the first two rows")
    assert result.status == "ok", result.reply["content"]
    assert kernel.python("%%python\nprint(len(df))").strip() == "2"
    changes = kernel.python("%%python\nprint(_run.changes[0]['summary'])")
    assert "changed in place: df (2 rows removed (labels 0, 1); shape (4, 2) → (2, 2))" in changes
    changed = kernel.python(
        "%%python\nc = _run.changes[0]['changed'][0]\nprint(c['names'], c['rows_removed'])"
    )
    assert changed.strip() == "['df'] 2"
    final = result.of_type("update_display_data")[-1]["content"]["data"]
    assert "changes: ⚠ changed in place: df (2 rows removed (labels 0, 1)" in final["text/plain"]
    assert "restored: df" in kernel.python("%undo")
    restored = kernel.python(
        "%%python\nprint(len(df), df.a.tolist(), df.b.tolist(), list(df.index))"
    )
    assert restored.strip() == "4 [1, 2, 3, 4] [10, 20, 30, 40] [0, 1, 2, 3]"


def test_a_list_appended_to_is_reported_and_undone(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python("%%python\nitems = [1, 2, 3]\nsame = items")
    kernel.python("%approvals bypass")
    kernel.python(f"%model replay:{python_turns(tmp_path, 'items.append(4)')}")
    result = kernel.run("append 4")
    assert result.status == "ok", result.reply["content"]
    assert kernel.python("%%python\nprint(items)").strip() == "[1, 2, 3, 4]"
    changes = kernel.python("%%python\nprint(_run.changes[0]['summary'])")
    # Both names of the one list, the append and the length before and after.
    assert "changed in place: items = same (1 item appended; length 3 → 4)" in changes
    assert "[notebook changes: changed in place: items = same (1 item appended" in kernel.python(
        "%history"
    )
    final = result.of_type("update_display_data")[-1]["content"]["data"]
    assert "1 item appended; length 3 → 4" in final["text/plain"]
    assert "restored: items" in kernel.python("%undo")
    # Restored in place: the alias sees the original too.
    assert kernel.python("%%python\nprint(items, same is items)").strip() == "[1, 2, 3] True"


def test_a_frame_past_the_undo_limit_is_reported_without_undo(
    cortex_kernelspec: str, tmp_path: Path
) -> None:
    # 1 MB of undo (CORTEX_UNDO_MB) against a 1.5 MB frame: no copy is kept.
    kernel = Kernel(cortex_kernelspec, {**os.environ, "CORTEX_UNDO_MB": "1"})
    try:
        kernel.python(
            "%%python\nimport numpy as np\nimport pandas as pd\n"
            "big = pd.DataFrame({'v': np.arange(200_000.0)})"
        )
        kernel.python("%approvals bypass")
        replay = python_turns(tmp_path, "big['w'] = big.v * 2")
        kernel.python(f"%model replay:{replay}")
        result = kernel.run("add w")
        assert result.status == "ok", result.reply["content"]
        why = "no copy was kept (it takes about 1.5 MB, past the undo limit of 1.0 MB)"
        changes = kernel.python("%%python\nprint(_run.changes[0]['summary'])")
        assert "changed in place: big (column 'w' added" in changes
        assert f"big: undo not available: {why}" in changes
        changed = kernel.python("%%python\nprint(_run.changes[0]['changed'][0]['undo'])")
        assert changed.strip() == "False"
        final = result.of_type("update_display_data")[-1]["content"]["data"]
        assert f"big: undo not available: {why}" in final["text/plain"]
        assert f"not restored: big (undo not available: {why})" in kernel.python("%undo")
        # Not restored: the column stays.
        assert kernel.python("%%python\nprint(list(big.columns))").strip() == "['v', 'w']"
    finally:
        kernel.shutdown()


def code_turns(tmp_path: Path, *codes: str, mode: str = "sync") -> Path:
    """A replay: one turn of ``python`` actions ``p1``, ``p2``… (output keys ``out1``…)."""
    calls = "".join(
        f'<action type="tool" mode="{mode}" id="p{i}" output_key="out{i}">'
        f"{json.dumps({'name': 'python', 'parameters': {'code': code}})}</action>"
        for i, code in enumerate(codes, 1)
    )
    path = tmp_path / "codes.jsonl"
    turns = [calls, "<response>done</response>"]
    write_turns(path, *turns)
    return path


AGENT_CODE_RUNNING = (
    "%%python\nimport sys\n"
    "print(any(f.f_code.co_filename == '<agent>' for f in sys._current_frames().values()))"
)


# Two barriers of two parties in the notebook: runs that wait at them run at once.
BARRIERS = (
    "%%python\nimport threading\n"
    "gate, gate2 = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)"
)


def test_concurrent_runs_each_capture_their_own_output(kernel: Kernel, tmp_path: Path) -> None:
    # Both runs are inside their code at once, printing before and after the first
    # barrier; neither ends before both printed (the second).
    kernel.python(BARRIERS)
    kernel.python("%approvals bypass")
    replay = code_turns(
        tmp_path,
        "print('one-a')\ngate.wait()\nprint('one-b')\ngate2.wait()",
        "print('two-a')\ngate.wait()\nprint('two-b')\ngate2.wait()",
        mode="async",
    )
    kernel.python(f"%model replay:{replay}")
    result = kernel.run("both at once")
    assert result.status == "ok", result.reply["content"]
    # What each run printed, as the model read it (out1, out2 are the barrier's values).
    read = (
        "%%python\nimport json\nprint(json.dumps({e.id: e.preview for e in _run.events "
        "if type(e).__name__ == 'ActionSucceeded'}))"
    )
    outputs = json.loads(kernel.python(read))
    assert [outputs[i].split()[:2] for i in ("p1", "p2")] == [
        ["one-a", "one-b"],
        ["two-a", "two-b"],
    ]
    # Nothing of the agent's code went to the cell, nor the kernel's output to the model.
    printed = "".join(m["content"].get("text", "") for m in result.of_type("stream"))
    assert "one-" not in printed and "two-" not in printed


def test_an_interrupt_stops_the_agents_code_for_real(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python("%approvals bypass")
    code = "import sys\nn = 0\nsys.stderr.write('looping\\n')\nwhile True:\n    n += 1"
    kernel.python(f"%model replay:{code_turns(tmp_path, code)}")
    msg_id = kernel.send("count for ever")
    kernel.wait_for_stream(msg_id, "looping", timeout=30)  # the loop has begun
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted", result.reply["content"]
    assert "still running" not in result.reply["content"]["evalue"]
    assert kernel.python(AGENT_CODE_RUNNING).strip() == "False"
    out = kernel.python("%%python\nprint(_run.status, _run.unstopped, n > 0)")
    assert out.strip() == "cancelled [] True"
    # What it did until the interrupt is the run's, and %undo puts it back.
    assert "removed: sys, n" in kernel.python("%undo")
    assert kernel.python("%%python\nprint('n' in dir())").strip() == "False"


def test_code_blocked_outside_python_is_reported_as_still_running(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.python("%approvals bypass")
    code = (
        "import sys, threading\ngate = threading.Event()\nfinished = threading.Event()\n"
        "sys.stderr.write('waiting\\n')\ntry:\n    gate.wait()\n    after = True\n"
        "finally:\n    finished.set()"
    )
    kernel.python(f"%model replay:{code_turns(tmp_path, code)}")
    msg_id = kernel.send("wait on the gate")
    kernel.wait_for_stream(msg_id, "waiting", timeout=30)
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30)
    assert result.reply["content"]["ename"] == "RunInterrupted", result.reply["content"]
    assert (
        "still running: p1 (its code is blocked outside Python"
        in (result.reply["content"]["evalue"])
    )
    warnings = [op[1] for op in result.widget_ops() if op[0] == "w"]
    assert any("still running" in w and "p1 (its code is blocked" in w for w in warnings)
    unstopped = kernel.python("%%python\nprint(_run.unstopped)")
    assert "p1 (its code is blocked outside Python" in unstopped
    # Once the blocking call returns, the code stops there: the next line never runs.
    out = kernel.python("%%python\ngate.set()\nprint(finished.wait(30), 'after' in dir())")
    assert out.strip() == "True False"

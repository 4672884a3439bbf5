"""The notebook namespace belongs to the user, through the real kernel (issue 15, issue 9 §3.1).

Each test replays what a hostile or confused model writes: ``$`` paths into
``get_ipython``'s globals, ``set_variable`` on ``__builtins__`` or ``print``,
``delete_variable`` of the user's data, an ``output_key`` that names the
user's tool function or a keyword.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.replays import write_turns

from .conftest import CellResult, Kernel, dump

pytestmark = pytest.mark.kernel

SECRET = "sk-test-0123456789abcdef0123456789"
EXFILTRATE = "$get_ipython.__globals__.os.environ.OPENAI_API_KEY"


def replay(folder: Path, *turns: str) -> str:
    return f"replay:{write_turns(folder / 'turns.jsonl', *turns)}"


def internal(name: str, parameters: dict[str, object], id: str = "i", extra: str = "") -> str:
    body = json.dumps({"name": name, "parameters": parameters})
    return f'<action type="internal" mode="async" id="{id}"{extra}>{body}</action>'


@pytest.fixture
def kernel(cortex_kernelspec: str, tmp_path: Path) -> Iterator[Kernel]:
    env = {
        **os.environ,
        "OPENAI_API_KEY": SECRET,
        "CORTEX_TRANSCRIPT_DIR": str(tmp_path / "transcripts"),
    }
    kernel = Kernel(cortex_kernelspec, env)
    yield kernel
    kernel.shutdown()


def events(kernel: Kernel, kind: str, field: str) -> str:
    return kernel.python(
        f"%%python\nprint([getattr(e, {field!r}) for e in _run.events if e.type == {kind!r}])"
    )


def transcript(kernel: Kernel) -> str:
    path = kernel.python("%transcript path").strip()
    return Path(path).read_text(encoding="utf-8")


def agent(kernel: Kernel, model: str, message: str = "go") -> CellResult:
    result = kernel.run(f"%%agent --model {model}\n{message}")
    assert result.status == "ok", dump(result)
    return result


@pytest.mark.parametrize("grant", ["off", "on"])
def test_dollar_paths_cannot_reach_the_environment(
    kernel: Kernel, tmp_path: Path, grant: str
) -> None:
    kernel.python(f"%read_notebook {grant}")
    kernel.python(
        "%%python\nfrom cortex_kernel import tool\n\n@tool\n"
        'def echo(x: str) -> str:\n    """Echo."""\n    return x\n'
    )
    model = replay(
        tmp_path,
        internal("set_variable", {"name": "leak", "value": EXFILTRATE})
        + '<action type="tool" mode="async" id="t">'
        + json.dumps({"name": "echo", "parameters": {"x": EXFILTRATE}})
        + "</action>",
        f"<response>key: {EXFILTRATE}</response>",
    )
    result = agent(kernel, model)
    errors = events(kernel, "action_failed", "error")
    why = "may not read the notebook" if grant == "off" else "names starting with '_'"
    assert errors.count(why) == 2, errors  # set_variable and the tool parameter
    everything = dump(result) + transcript(kernel) + kernel.python("%history")
    assert SECRET not in everything
    assert kernel.python("%%python\nprint('leak' in dir())").strip() == "False"


def test_paths_read_only_public_attributes_of_plain_data(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python(
        "%%python\nimport os\nfrom types import SimpleNamespace\n"
        "point = SimpleNamespace(x=3, tags=['a', 'b'])\nmod = os"
    )
    kernel.python("%read_notebook on")
    model = replay(
        tmp_path,
        internal("set_variable", {"name": "got", "value": "$point.x $point.tags[1]"})
        + internal("set_variable", {"name": "bad", "value": "$mod.environ"}, "j"),
        "<response>$got</response>",
    )
    result = agent(kernel, model)
    assert result.result_data()["text/plain"] == "3 b"
    assert "reaches a module" in events(kernel, "action_failed", "error")


def test_set_variable_cannot_break_the_kernel(kernel: Kernel, tmp_path: Path) -> None:
    model = replay(
        tmp_path,
        internal("set_variable", {"name": "__builtins__", "value": "nope"})
        + internal("set_variable", {"name": "print", "value": "nope"}, "p")
        + internal("set_variable", {"name": "class", "value": 1}, "k"),
        "<response>tried</response>",
    )
    agent(kernel, model)
    errors = events(kernel, "action_error", "message")
    assert "dunder" in errors and "shadow the Python builtin" in errors and "keyword" in errors
    # Every later cell still works: Python, magics, another run.
    assert kernel.python("%%python\nprint(len('abc'))").strip() == "3"
    assert "model:" in kernel.python("%model")


def test_set_variable_on_a_user_name_keeps_the_users_value(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python("%%python\nrates = {'EUR': 1.0}")
    model = replay(
        tmp_path,
        internal("set_variable", {"name": "rates", "value": "nope"})
        + internal("set_variable", {"name": "get_ipython", "value": "nope"}, "g"),
        "<response>done</response>",
    )
    agent(kernel, model)
    warned = events(kernel, "warning", "message")
    assert "'rates' already names a notebook variable the agent did not bind" in warned
    assert kernel.python("%%python\nprint(rates, _run.variables['rates'])").strip() == (
        "{'EUR': 1.0} nope"
    )
    assert "get_ipython" in events(kernel, "action_error", "message")
    assert "model:" in kernel.python("%model")  # get_ipython still works


def test_delete_variable_spares_the_users_data(kernel: Kernel, tmp_path: Path) -> None:
    kernel.python("%%python\ndf = [1, 2, 3]")
    # delete_variable is blocked by default (docs/protocol.md#actions): this agent is granted it.
    kernel.python(
        "%%python\nfrom cortex_kernel.jupyter.runner import runner_for\n"
        "s = runner_for(get_ipython()).session\n"
        "granted = s.config.allowed_internal | {'delete_variable'}\n"
        "s.config = s.config.replace(allowed_internal=granted)"
    )
    model = replay(
        tmp_path,
        internal("set_variable", {"name": "mine", "value": 1})
        + internal("delete_variable", {"name": "df"}, "d")
        + internal("delete_variable", {"name": "mine"}, "e", ' depends_on="i"'),
        "<response>done</response>",
    )
    agent(kernel, model)
    assert "the agent did not bind" in events(kernel, "action_failed", "error")
    assert kernel.python("%%python\nprint(df, 'mine' in dir())").strip() == "[1, 2, 3] False"


def test_output_key_never_overwrites_a_user_tool(kernel: Kernel, tmp_path: Path) -> None:
    """Issue 9 §3.1, as the local model wrote it: ``output_key="population"`` on another action."""
    kernel.python(
        "%%python\nfrom cortex_kernel import tool\n\n@tool\n"
        "def population(city: str) -> int:\n    '''Population of a city.'''\n    return 1000\n"
    )
    model = replay(
        tmp_path,
        '<action type="tool" mode="async" id="p" output_key="population">'
        '{"name": "population", "parameters": {"city": "Paris"}}</action>'
        '<action type="tool" mode="async" id="q" output_key="for" depends_on="p">'
        '{"name": "population", "parameters": {"city": "Lyon"}}</action>',
        "<response>Paris has $population</response>",
    )
    result = agent(kernel, model)
    assert result.result_data()["text/plain"] == "Paris has 1000"
    warnings = events(kernel, "warning", "message")
    assert "'population' already names a notebook variable the agent did not bind" in warnings
    assert "_run.variables['population']" in warnings
    assert "'for' is a Python keyword" in warnings
    # The view shows the warning.
    assert any(op[0] == "w" and "population" in op[1] for op in result.widget_ops())
    assert kernel.python("%%python\nprint(callable(population), _run.variables['population'])") == (
        "True 1000\n"
    )
    # The tool still works in the next run.
    again = agent(kernel, replay(tmp_path, "<response>ok</response>"))
    assert again.status == "ok"
    model = replay(
        tmp_path,
        '<action type="tool" id="p2">{"name": "population", "parameters": {"city": "Nice"}}'
        "</action>",
        "<response>$p2</response>",
    )
    assert agent(kernel, model).result_data()["text/plain"] == "1000"


def test_a_manifest_grants_reading_the_notebook(kernel: Kernel, tmp_path: Path) -> None:
    manifest = tmp_path / "agent.yaml"
    manifest.write_text("read_notebook: true\n", encoding="utf-8")
    kernel.python("%%python\nprices = [3, 4]")
    model = replay(tmp_path, "<response>$prices</response>")
    refused = agent(kernel, model)
    assert refused.result_data()["text/plain"] == "$prices"  # not granted: left as written
    kernel.python(f"%manifest {manifest}")
    granted = agent(kernel, model)
    assert granted.result_data()["text/plain"] == "[3, 4]"

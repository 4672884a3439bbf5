"""Agent manifests: loading, the messages a bad one gets, the shipped schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.agent import build_session
from cortex_kernel.exceptions import ConfigError
from cortex_kernel.manifest import (
    SCHEMA_PATH,
    CommandTool,
    DockerTool,
    default_agent,
    load_manifest,
    schema_text,
    validate_manifest,
)

GOOD_YAML = """\
name: helper
model: {name: "replay:x.jsonl", temperature: 0.2, max_tokens: 50}
instructions: Answer briefly.
protocol: xml
tools:
  - {name: join, callable: "os.path:join"}
  - name: count
    command: ["wc", "-c"]
    timeout: 5
  - name: boxed
    docker: {image: sandbox, command: ["cat"]}
    network: true
    confirm: true
builtins:
  shell: {enabled: true}
  files: {workspace: work}
limits: {max_turns: 3}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def message(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_manifest(path)
    return str(info.value)


def test_yaml_manifest_loads_every_kind_of_tool(tmp_path: Path) -> None:
    agent = load_manifest(write(tmp_path, "a.yaml", GOOD_YAML)).agent()
    assert agent.name == "helper" and agent.model.temperature == 0.2
    kinds = [type(tool).__name__ for tool in agent.tools]
    assert kinds == ["CallableTool", "CommandTool", "DockerTool"]
    docker = agent.tools[2]
    assert isinstance(docker, DockerTool) and docker.network and docker.confirm
    assert docker.docker.memory == "256m"  # hardened defaults are the defaults
    assert agent.builtins.shell.enabled and not agent.builtins.python.enabled
    assert agent.limits.max_turns == 3


def test_toml_manifest_is_the_same_agent(tmp_path: Path) -> None:
    toml = """\
name = "helper"
model = "replay:x.jsonl"
[[tools]]
name = "count"
command = ["wc", "-c"]
timeout = 5
"""
    agent = load_manifest(write(tmp_path, "a.toml", toml)).agent()
    assert isinstance(agent.tools[0], CommandTool)
    assert agent.tools[0].command == ["wc", "-c"] and agent.model.name == "replay:x.jsonl"


def test_yaml_error_names_file_line_field_and_what_is_allowed(tmp_path: Path) -> None:
    bad = GOOD_YAML.replace("protocol: xml", "protocol: json").replace(
        "    timeout: 5", "    timeout: 5\n    retry: 2"
    )
    text = message(write(tmp_path, "bad.yaml", bad))
    path = tmp_path / "bad.yaml"
    assert f"{path}:4: protocol: Input should be 'xml' or 'tools'" in text
    allowed = "allowed here: allow_options, args, command,"
    assert f"{path}:10: tools[1].retry: unknown field; {allowed}" in text
    assert "Traceback" not in text


def test_a_tool_of_no_kind_says_what_a_tool_needs(tmp_path: Path) -> None:
    text = message(write(tmp_path, "m.yaml", "tools:\n  - name: x\n    timeout: 3\n"))
    assert "m.yaml:2: tools[0]: a tool needs exactly one of 'callable'" in text


def test_preview_chars_still_loads_and_says_it_does_nothing(tmp_path: Path) -> None:
    # It was accepted until 0.3.0 and never changed a preview.
    path = write(tmp_path, "m.yaml", "executors: {preview_chars: 500, max_output_bytes: 9}\n")
    with pytest.warns(FutureWarning, match="preview_chars is ignored"):
        manifest = load_manifest(path)
    assert manifest.agents[0].executors.max_output_bytes == 9


def test_toml_error_names_the_field_without_a_line(tmp_path: Path) -> None:
    text = message(write(tmp_path, "m.toml", "[limits]\nmax_turns = 0\n"))
    assert text.endswith(
        f"{tmp_path / 'm.toml'}: limits.max_turns: Input should be greater than or equal to 1"
    )


def test_syntax_errors_and_unknown_formats_are_one_line(tmp_path: Path) -> None:
    assert ":2: not valid YAML" in message(write(tmp_path, "s.yaml", "name: [a\nb: c\n"))
    assert "not valid TOML" in message(write(tmp_path, "s.toml", "name = \n"))
    assert "use .yaml, .yml, .toml or .json" in message(write(tmp_path, "s.ini", "x"))
    assert "cannot read manifest" in message(tmp_path / "missing.yaml")
    assert "a mapping of fields" in message(write(tmp_path, "l.yaml", "- a\n- b\n"))


def test_duplicate_tool_names_are_refused(tmp_path: Path) -> None:
    text = message(
        write(
            tmp_path,
            "d.yaml",
            "tools:\n  - {name: a, command: [x]}\n  - {name: a, callable: 'os:getcwd'}\n",
        )
    )
    assert "tool name 'a' is used by tools[0] and tools[1]" in text


def test_several_agents_pick_by_name(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "team.yaml",
        "default: writer\nagents:\n  - {name: reader}\n  - {name: writer, instructions: Write.}\n",
    )
    team = load_manifest(path)
    assert team.names() == ["reader", "writer"]
    assert team.agent().name == "writer" and team.agent("reader").name == "reader"
    with pytest.raises(ConfigError, match=r"no agent named 'critic'.*agents: reader, writer"):
        team.agent("critic")
    bad = write(tmp_path, "bad.yaml", "default: x\nagents:\n  - {name: a}\n")
    assert "default agent 'x' is not defined; agents: a" in message(bad)


def test_the_shipped_schema_is_up_to_date_and_accepts_the_examples(tmp_path: Path) -> None:
    # Regenerate with: python -m cortex_kernel.manifest
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text()
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    import yaml

    jsonschema.validate(yaml.safe_load(GOOD_YAML), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"protocol": "json"}, schema)


def test_the_default_agent_needs_no_file() -> None:
    agent = default_agent()
    assert agent.tools == [] and agent.protocol == "xml"
    assert not agent.builtins.python.enabled and not agent.builtins.shell.enabled


def replay_agent(tmp_path: Path, fields: str) -> Path:
    """A manifest file whose model replays one answer, with ``fields`` (YAML) added."""
    turns = write(tmp_path, "t.jsonl", json.dumps({"content": "<response>hi</response>"}) + "\n")
    return write(tmp_path, "a.yaml", f"model: 'replay:{turns}'\n{fields}")


def test_build_session_applies_the_manifest(tmp_path: Path) -> None:
    path = replay_agent(
        tmp_path,
        "name: helper\ninstructions: Be brief.\n"
        "limits: {max_turns: 2}\ninternal_actions: [set_variable]\n"
        "llm_models: [openai/gpt-4o-mini]\n"
        "tools:\n  - {name: count, command: [wc, -c]}\n",
    )
    session = build_session(manifest=path)
    config = session.config
    assert config.agent_name == "helper" and config.instructions == "Be brief."
    assert config.limits.max_turns == 2 and config.allowed_internal == {"set_variable"}
    assert [tool.name for tool in session.tools] == ["count"]
    assert config.llm_models == {"openai/gpt-4o-mini"}
    with pytest.raises(ConfigError, match="there is no manifest"):
        build_session(model=f"replay:{tmp_path / 't.jsonl'}", agent="helper")


def test_a_callable_that_cannot_be_imported_names_the_entry(tmp_path: Path) -> None:
    turns = write(tmp_path, "t.jsonl", json.dumps({"content": "<response>hi</response>"}) + "\n")
    path = write(tmp_path, "a.yaml", "tools:\n  - {name: f, callable: 'no_such_module_x:f'}\n")
    with pytest.raises(
        ConfigError, match=r"a.yaml tools\[0\]: cannot load callable .*: cannot import module"
    ):
        build_session(model=f"replay:{turns}", manifest=path)


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from(["name", "command", "docker", "x"]), inner, max_size=2)
    ),
    max_leaves=6,
)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=200)
@given(
    st.dictionaries(
        st.sampled_from(["name", "protocol", "tools", "limits", "agents", "builtins", "bogus"]),
        _VALUES,
        max_size=4,
    )
)
def test_any_data_gives_a_manifest_or_one_config_error(data: dict[str, object]) -> None:
    # The message builder must cope with every shape pydantic reports: a
    # ConfigError whose lines all name the file, never another exception.
    try:
        validate_manifest(data, Path("p.yaml"))
    except ConfigError as exc:
        lines = str(exc).removeprefix("invalid manifest: ").splitlines()
        assert all(line.startswith(("p.yaml", "(and ")) for line in lines)


def test_declared_sub_agents_relics_workflows_and_feeds_are_never_silent(tmp_path: Path) -> None:
    from cortex_kernel.protocol.models import Action, ActionType

    path = replay_agent(
        tmp_path,
        "sub_agents: [{name: critic}]\n"
        "relics: [{name: db, kind: sqlite}]\n"
        "context_feeds: [{id: news, type: internal, source: {internal: system_clock}}]\n",
    )
    session = build_session(manifest=path)
    assert [spec.id for spec in session.feeds.specs] == ["news"]
    check = session.config.executors[ActionType.RELIC].check
    message = check(Action(type=ActionType.RELIC, id="a1", body={"name": "db"}), None)  # type: ignore[arg-type]
    assert message is not None and 'needs an "operation"' in message and "keys" in message
    message = check(Action(type=ActionType.RELIC, id="a1", body={"name": "dbs"}), None)  # type: ignore[arg-type]
    assert message == "unknown relic 'dbs'; did you mean 'db'? relics: db"
    executors = session.config.executors
    assert ActionType.RELIC in executors and ActionType.WORKFLOW not in executors


# "Billion laughs": 10^9 values in a few hundred bytes, under a field that takes any data.
ALIAS_BOMB = """\
name: x
context_feeds:
  - id: f
    source:
      a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
      internal: [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""

# The same with merge keys, which PyYAML copies into each mapping.
MERGE_BOMB = "name: x\ncontext_feeds:\n  - id: f\n    source:\n      k0: &k0 {v: 1}\n" + "".join(
    f"      k{i}: &k{i} {{<<: [{', '.join([f'*k{i - 1}'] * 9)}], v{i}: 1}}\n" for i in range(1, 10)
)

ANCHORS = """\
default: a
agents:
  - name: a
    model: &shared {name: openai/x, temperature: 0}
    limits: &limits {max_turns: 3}
  - name: b
    model: *shared
    limits: {<<: *limits, max_actions: 5}
"""


def test_an_alias_bomb_is_refused_and_plain_anchors_still_load(tmp_path: Path) -> None:
    bomb = write(tmp_path, "bomb.yaml", ALIAS_BOMB)
    assert message(bomb) == (
        f"{bomb}:10: aliases expand the manifest past 100,000 values (an alias bomb?); "
        "write the values out instead"
    )
    merges = write(tmp_path, "merges.yaml", MERGE_BOMB)
    assert "aliases expand the manifest past 100,000 values" in message(merges)
    loaded = load_manifest(write(tmp_path, "anchors.yaml", ANCHORS))
    assert loaded.agent("b").model == loaded.agent("a").model
    assert loaded.agent("b").model.temperature == 0
    assert (loaded.agent("b").limits.max_turns, loaded.agent("b").limits.max_actions) == (3, 5)


def test_a_recursive_alias_or_deep_nesting_is_one_config_error(tmp_path: Path) -> None:
    looped = write(tmp_path, "loop.yaml", "name: x\ncontext_feeds: &feeds [*feeds]\n")
    assert message(looped) == (
        f"{looped}:2: an alias inside this collection refers to the collection itself "
        "(a recursive alias)"
    )
    deep = write(tmp_path, "deep.yaml", "name: x\ncontext_feeds: " + "[" * 5000 + "]" * 5000)
    assert message(deep) == f"{deep}: not valid YAML: nested too deeply"


def test_a_feed_source_or_relic_has_the_fields_of_its_kind_only(tmp_path: Path) -> None:
    # A misspelt key of a source is an error naming its line (it used to be
    # dropped: the tool then ran without its parameters).
    feeds = write(
        tmp_path,
        "feeds.yaml",
        "context_feeds:\n  - id: price\n    source: {tool: quote, paramters: {symbol: XYZ}}\n",
    )
    assert message(feeds).endswith(
        f"{feeds}:3: context_feeds[0].source.paramters: unknown field; "
        "allowed here: parameters, tool"
    )
    relic = write(tmp_path, "relic.yaml", "relics:\n  - {name: db, kind: sqlite, health: /up}\n")
    assert message(relic).endswith(
        f"{relic}:2: relics[0].health: not a field of sqlite relics "
        "(theirs: confirm, description, kind, name, path, startup_timeout, timeout)"
    )
    loaded = load_manifest(
        write(tmp_path, "good.yaml", "context_feeds: [{id: p, source: {tool: quote}}]\n")
    )
    assert loaded.agent().context_feeds[0].source.data() == {"tool": "quote"}

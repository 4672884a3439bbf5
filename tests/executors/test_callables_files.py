"""Python callables, the file built-ins and the subprocess sandbox, as a manifest declares them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from cortex_kernel.exceptions import ToolError
from cortex_kernel.manifest import AgentManifest
from cortex_kernel.runtime.results import Shown
from cortex_kernel.runtime.tools import ToolRegistry
from cortex_kernel.toolset import build_tools

pytestmark = pytest.mark.anyio

MODULE = "tests.executors.sample_tools"


def tools_for(base: Path | None = None, **manifest: object) -> ToolRegistry:
    return build_tools(AgentManifest.model_validate(manifest), base=base)


async def test_callable_schema_comes_from_hints_and_numpy_docstring() -> None:
    tools = tools_for(tools=[{"name": "scale", "callable": f"{MODULE}:scale"}])
    spec = tools.get("scale").spec()
    assert spec["description"] == "Multiply every value."
    props = spec["parameters"]["properties"]
    assert props["values"] == {
        "type": "array",
        "items": {"type": "number"},
        "description": "The numbers to scale.",
    }
    assert props["factor"]["description"] == "What to multiply by."
    assert spec["parameters"]["required"] == ["values"]
    assert await tools.get("scale").call({"values": [1, 2], "factor": 3}) == [3, 6]


async def test_async_callable_is_awaited_and_google_docstring_read() -> None:
    tools = tools_for(tools=[{"name": "greet", "callable": f"{MODULE}:greet"}])
    props = tools.get("greet").spec()["parameters"]["properties"]
    assert props["name"]["description"] == "Who to greet, by first name."
    assert await tools.get("greet").call({"name": "Ada"}) == "hello Ada"


async def test_sync_callable_runs_in_a_worker_thread() -> None:
    tools = tools_for(tools=[{"name": "where", "callable": f"{MODULE}:thread_name"}])
    assert await tools.get("where").call({}) != threading.current_thread().name


async def test_a_bad_parameter_is_named_before_the_callable_runs() -> None:
    tools = tools_for(tools=[{"name": "scale", "callable": f"{MODULE}:scale"}])
    with pytest.raises(ToolError, match=r"parameter 'values.1': Input should be a valid number"):
        await tools.get("scale").call({"values": [1, "x"]})
    with pytest.raises(ToolError, match="parameter 'values': Field required"):
        await tools.get("scale").call({})


def workspace_tools(tmp_path: Path, **files: object) -> ToolRegistry:
    (tmp_path / "work").mkdir()
    return tools_for(base=tmp_path, builtins={"files": {"workspace": "work", **files}})


async def test_files_read_write_list_inside_the_workspace(tmp_path: Path) -> None:
    tools = workspace_tools(tmp_path)
    written = await tools.get("write_file").call({"path": "a/b.txt", "content": "hi"})
    assert written == {"path": "a/b.txt", "bytes": 2}
    assert (tmp_path / "work/a/b.txt").read_text() == "hi"
    assert await tools.get("read_file").call({"path": "a/b.txt"}) == "hi"
    assert await tools.get("list_files").call({}) == ["a/"]
    assert await tools.get("list_files").call({"path": "a"}) == ["a/b.txt"]


async def test_paths_that_escape_the_workspace_are_refused(tmp_path: Path) -> None:
    tools = workspace_tools(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    os.symlink(secret, tmp_path / "work/link.txt")
    os.symlink(tmp_path, tmp_path / "work/up")
    for path in ("../secret.txt", str(secret), "link.txt", "up/secret.txt", "a/../../secret.txt"):
        with pytest.raises(ToolError, match="outside the workspace"):
            await tools.get("read_file").call({"path": path})
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools.get("write_file").call({"path": "link.txt", "content": "x"})
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools.get("write_file").call({"path": "up/new.txt", "content": "x"})
    assert secret.read_text() == "s3cret" and not (tmp_path / "new.txt").exists()


async def test_the_default_workspace_is_a_folder_of_its_own_made_by_the_first_write(
    tmp_path: Path,
) -> None:
    tools = tools_for(base=tmp_path, builtins={"files": {}})
    assert await tools.get("list_files").call({}) == []  # not made yet: empty, not an error
    await tools.get("write_file").call({"path": "notes.txt", "content": "hi"})
    assert (tmp_path / "cortex-workspace" / "notes.txt").read_text() == "hi"
    assert await tools.get("list_files").call({}) == ["notes.txt"]


async def test_read_only_workspace_has_no_write_file(tmp_path: Path) -> None:
    tools = workspace_tools(tmp_path, write=False)
    assert "write_file" not in tools and "read_file" in tools


async def test_shell_and_python_are_off_unless_enabled() -> None:
    assert len(tools_for()) == 0
    tools = tools_for(builtins={"shell": {"enabled": True}, "python": {"enabled": True}})
    assert {t.name for t in tools} == {"shell", "python"}


async def test_python_builtin_runs_in_a_subprocess_not_the_kernel() -> None:
    tools = tools_for(builtins={"python": {"enabled": True}})
    result = await tools.get("python").call(
        {"code": "import os, json; print(json.dumps(os.getpid()))"}
    )
    assert isinstance(result, int) and result != os.getpid()


async def test_python_builtin_memory_limit_is_a_clear_error() -> None:
    tools = tools_for(builtins={"python": {"enabled": True, "memory": "200m"}})
    with pytest.raises(ToolError, match=r"tool 'python' exited with status 1[\s\S]*MemoryError"):
        await tools.get("python").call({"code": "x = bytearray(400 * 1024 * 1024)"})


async def test_shell_builtin_timeout_kills_it() -> None:
    tools = tools_for(builtins={"shell": {"enabled": True, "timeout": 1}})
    with pytest.raises(ToolError, match="timed out after 1 s"):
        await tools.get("shell").call({"command": "sleep 30"})
    assert await tools.get("shell").call({"command": "echo ok"}) == "ok"


async def test_python_in_kernel_only_when_asked() -> None:
    namespace: dict[str, object] = {"x": 20}
    tools = build_tools(
        AgentManifest.model_validate(
            {"builtins": {"python": {"enabled": True, "in_kernel": True}}}
        ),
        namespace=namespace,
    )
    python = tools.get("python")
    # The model reads the text; an output_key binds the value.
    assert await python.call({"code": "y = x + 1\ny * 2"}) == Shown(
        42, "42\n[notebook changes: added: y]"
    )
    assert namespace["y"] == 21
    # The notebook's own namespace: asked first unless the manifest grants it.
    assert python.confirm


async def test_python_in_kernel_can_be_granted_or_turned_off() -> None:
    namespace: dict[str, object] = {}
    granted = build_tools(
        AgentManifest.model_validate(
            {"builtins": {"python": {"enabled": True, "in_kernel": True, "confirm": False}}}
        ),
        namespace=namespace,
    )
    assert not granted.get("python").confirm
    off = build_tools(
        AgentManifest.model_validate({"builtins": {"python": {"enabled": False}}}),
        namespace=namespace,
    )
    assert "python" not in off


async def test_python_in_kernel_error_says_what_changed_before_it() -> None:
    namespace: dict[str, object] = {}
    tools = build_tools(
        AgentManifest.model_validate(
            {"builtins": {"python": {"enabled": True, "in_kernel": True}}}
        ),
        namespace=namespace,
    )
    # UnicodeDecodeError takes five arguments: the error is told, not rebuilt.
    changed = r"UnicodeDecodeError.*\n\[failed at line 2: .*\]\n\[notebook changes: added: y\]"
    with pytest.raises(ToolError, match=changed):
        await tools.get("python").call({"code": "y = 2\nb'\\xff'.decode('utf-8')"})

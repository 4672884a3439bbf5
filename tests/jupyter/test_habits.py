"""IPython habits inside the Cortex kernel, through jupyter_client.

IPython's magics work in ``%%python`` cells as in the stock kernel;
``%%time`` and ``%%capture`` work around a message cell; a comment-only cell
is not a message; ``{{name}}`` reaches the model as ``{name}``; kernel_info
and the kernelspec agree about the debugger; the kernel takes the CurveZMQ
keys a client provisions.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import Kernel, dump

pytestmark = pytest.mark.kernel


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("%%python\n%time squares = [i * i for i in range(10)]\nprint(squares[3])", "Wall time"),
        ("%%python\n%%time\nfrom math import sqrt\nprint(sqrt(16))", "4.0"),
        ("%%python\n%timeit -n 3 -r 2 sum(range(100))", "per loop"),
        ("%%python\n%%timeit -n 2 -r 1\nsum(range(10))", "per loop"),
        ("%%python\n%%capture captured\nprint('hidden')", ""),
        ("%%python\n%prun -q sum(range(10))", ""),
        ("%%python\nvalue = 7\n%who_ls int", "value"),
    ],
)
def test_ipython_magics_work_in_python_cells(cortex: Kernel, cell: str, expected: str) -> None:
    result = cortex.run(cell)
    assert result.status == "ok", dump(result)
    assert expected in result.stdout + "".join(
        str(m["content"]["data"].get("text/plain", "")) for m in result.of_type("execute_result")
    )


def test_capture_in_a_python_cell_keeps_what_it_captured(cortex: Kernel) -> None:
    cortex.run("%%python\n%%capture captured\nprint('hidden')")
    assert cortex.python("%%python\nprint(captured.stdout.strip())").strip() == "hidden"
    assert cortex.python("%%python\nimport math\n%time x2 = math.pi\nprint(x2)").strip()


def test_time_around_a_message_cell(cortex: Kernel) -> None:
    result = cortex.run("%%time\nWhat is x?")
    assert result.status == "ok", dump(result)
    assert result.result_data()["text/plain"] == "The answer is 42"
    assert "Wall time:" in result.stdout and "CPU times:" in result.stdout


def test_capture_around_a_message_cell(cortex: Kernel) -> None:
    result = cortex.run("%%capture run_output\nWhat is x?")
    assert result.status == "ok", dump(result)
    assert not result.of_type("execute_result") and not result.of_type("display_data")
    out = cortex.python(
        "%%python\nprint(any('The answer is 42' in str(o.data) for o in run_output.outputs))"
    )
    assert out.strip() == "True"
    assert cortex.python("%%python\nprint(x)").strip() == "42"  # the run did run


def test_comment_only_cell_is_not_a_message(cortex: Kernel) -> None:
    result = cortex.run("# just a note to myself\n\n# and another")
    assert result.status == "ok", dump(result)
    assert not result.of_type("display_data"), dump(result)  # no run view


def test_doubled_braces_reach_the_model_single(cortex: Kernel) -> None:
    cortex.python("%%python\nanimal = 'owl'")
    result = cortex.run("Write {{animal}} literally, but use {animal}.")
    assert result.status == "ok", dump(result)
    out = cortex.python("%%python\nprint(_run.events[0].message)")
    assert out.strip() == "Write {animal} literally, but use owl."


def test_kernel_info_and_kernelspec_agree_on_the_debugger(cortex: Kernel) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("cortex")
    cortex.kc.kernel_info()
    reply = cortex.kc.get_shell_msg(timeout=10)["content"]
    in_reply = "debugger" in reply.get("supported_features", []) or bool(reply.get("debugger"))
    assert in_reply == bool(spec.metadata.get("debugger", False))


def test_the_kernel_takes_the_curve_keys_a_client_provisions(
    cortex_kernelspec: str, replay_dir: Path
) -> None:
    # jupyter_client's transport_encryption="required" refuses a kernelspec
    # that does not declare curve; `make demo` asks for "auto" (without it,
    # ipykernel warns on every start that plain TCP is readable by anyone).
    env = {**os.environ, "CORTEX_MODEL": f"replay:{replay_dir}/answer.jsonl"}
    kernel = Kernel(cortex_kernelspec, env, transport_encryption="required")
    try:
        assert kernel.km.curve_publickey and kernel.km.curve_secretkey
        result = kernel.run("What is x?")
        assert result.status == "ok", dump(result)
        assert result.result_data()["text/plain"] == "The answer is 42"
    finally:
        kernel.shutdown()

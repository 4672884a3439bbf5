"""The answer and the view, as a front end receives them through jupyter_client.

Unresolved ``$var``s become marked placeholders and the run says the answer
is incomplete; no answer is typeset as math; a finished run's output becomes
the static rendering (no widget needed to read it again); the header, the
thoughts and the footer tell the truth while and after the run streams.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import Kernel, dump, notebook_json

pytestmark = pytest.mark.kernel

WIDGET = "application/vnd.jupyter.widget-view+json"


def _final_view(result: object) -> dict[str, str]:
    updates = result.of_type("update_display_data")  # type: ignore[attr-defined]
    assert updates, dump(result)  # type: ignore[arg-type]
    data: dict[str, str] = updates[-1]["content"]["data"]
    return data


def test_unresolved_reference_is_a_marked_placeholder(cortex: Kernel, replay_dir: Path) -> None:
    cortex.python(
        "%%python\nfrom cortex_kernel import tool\n\n@tool\n"
        "def ratio(a: float, b: float) -> float:\n    return a / b\n"
    )
    # The price is the user's own figure: grounded, so the answer carries no mark.
    result = cortex.run(f"%%agent --model replay:{replay_dir}/divide.jsonl\nratio, at 5?")
    assert result.status == "ok", dump(result)
    answer = result.result_data()
    assert answer["text/plain"] == "The ratio is ⟨ratio: failed⟩, which costs $5."
    out = cortex.python("%%python\nprint(_run.status, '|', _run.message)")
    status, message = (part.strip() for part in out.split("|"))
    assert status == "incomplete"
    assert "ratio" in message and "failed" in message
    final = _final_view(result)
    assert final["text/plain"].startswith("Cortex run [incomplete]")
    # The header of the unclosed thought cut by the sync action says it ended.
    assert "thinking…" not in final["text/html"]


def test_no_answer_is_typeset_as_math(cortex: Kernel, replay_dir: Path) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/prices.jsonl\nprices, 5 or 6?")
    assert result.status == "ok", dump(result)
    answer = result.result_data()
    assert answer["text/plain"] == "It costs $5 or $6, and the note is kept."
    assert answer["text/markdown"] == (
        r"It costs <span>\$</span>5 or <span>\$</span>6, and the note is kept."
    )
    # The static HTML is marked for MathJax to leave alone.
    assert "tex2jax_ignore" in _final_view(result)["text/html"]


def test_no_blank_line_where_an_action_was_in_a_thought(cortex: Kernel, replay_dir: Path) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/prices.jsonl\nprices?")
    thought = "".join(op[2] for op in result.widget_ops() if op[0] == "th")
    assert thought == "First I store a note.\nThen I answer with prices.", repr(thought)


def test_thought_cut_by_a_sync_action_ends_with_its_turn(cortex: Kernel, replay_dir: Path) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/divide.jsonl\nratio?")
    done: dict[int, bool] = {}
    for op in result.widget_ops():
        if op[0] == "th":
            done[op[1]] = op[3]
    assert done and all(done.values()), done


def test_footer_counts_tokens_while_they_stream(cortex: Kernel, replay_dir: Path) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/prices.jsonl?tps=200\nprices?")
    live = []
    for message in result.of_type("comm_msg"):
        ops = message["content"]["data"].get("content", {}).get("ops", [])
        streaming = any(op[0] == "th" and not op[3] for op in ops)
        tokens = [op[1]["tokens"] for op in ops if op[0] == "f"]
        if streaming and tokens:
            live.append(tokens[-1])
    assert live and max(live) > 0, live


def test_variables_lists_no_action_ids(cortex: Kernel) -> None:
    assert cortex.run("What is x?").status == "ok"
    names = {line.split()[0] for line in cortex.python("%variables").splitlines() if line}
    assert {"x", "summary"} <= names
    assert not names & {"a1", "a2"}, names


def test_finished_run_is_a_static_view(cortex: Kernel) -> None:
    result = cortex.run("What is x?")
    assert result.status == "ok", dump(result)
    first = result.of_type("display_data")[0]["content"]["data"]
    assert WIDGET in first  # live while it runs
    final = _final_view(result)
    assert WIDGET not in final  # a reopened notebook needs no widget model
    assert set(final) == {"text/plain", "text/markdown", "text/html"}
    html = final["text/html"]
    assert "<details" in html and "Let me set x" in html  # the thought, collapsible
    assert "a1" in html and "a2" in html  # the tree
    # The widget's model is closed: nothing stays behind in the kernel.
    assert result.of_type("comm_close"), dump(result)


def test_nbconvert_html_has_the_view_offline(
    cortex_kernelspec: str, replay_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "ask.ipynb"
    path.write_text(notebook_json("What is x?"), encoding="utf-8")
    env = {**os.environ, "CORTEX_MODEL": f"replay:{replay_dir}/answer.jsonl"}
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute"]
    subprocess.run([*command, str(path)], check=True, env=env, capture_output=True, timeout=120)
    html = (tmp_path / "ask.html").read_text(encoding="utf-8")
    assert "cortex-run-static" in html
    assert "Let me set x" in html and "<details" in html  # thoughts
    assert "set_variable" in html  # the tree
    assert "The answer is 42" in html
    # No output needs the widget renderer (which nbconvert's page fetches from a CDN):
    # the view above is plain HTML in the page.
    assert f'<script type="{WIDGET}">' not in html


def test_run_with_background_work_goes_static_when_it_ends(
    cortex: Kernel, replay_dir: Path
) -> None:
    result = cortex.run(f"%%agent --model replay:{replay_dir}/fire.jsonl\nstart it")
    assert result.status == "ok", dump(result)
    display_id = result.of_type("display_data")[0]["content"]["transient"]["display_id"]
    # The cell is done but its fire_and_forget action runs on: the view stays live.
    assert all(WIDGET in m["content"]["data"] for m in result.of_type("update_display_data"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        msg = cortex.kc.get_iopub_msg(timeout=20)
        content = msg["content"]
        if msg["msg_type"] == "update_display_data" and WIDGET not in content["data"]:
            assert content["transient"]["display_id"] == display_id
            assert "f1" in content["data"]["text/plain"]
            assert "succeeded" in content["data"]["text/plain"]
            return
    raise AssertionError("the view never went static after the background action ended")


def test_static_footer_reads_as_the_live_one(cortex: Kernel, replay_dir: Path) -> None:
    # A one-turn run on a model with no price: "1 turn", and no bare "n/a" for the cost.
    result = cortex.run(f"%%agent --model replay:{replay_dir}/prices.jsonl\nprices?")
    assert result.status == "ok", dump(result)
    final = _final_view(result)
    for kind in ("text/html", "text/markdown"):
        assert "1 turn ·" in final[kind], final[kind]
        assert "1 turns" not in final[kind] and "n/a" not in final[kind], final[kind]

"""Write the example notebooks (source only; `make demo` executes them).

Run: .venv/bin/python scripts/make_notebooks.py. The notebooks are committed;
this script is how they were made, so a change to them is one edit here.
A notebook is written only when what this script decides (its kernel, its
cells' kind, source and tags) differs from the file: an unchanged one keeps
its stored outputs and cell ids. The script names each notebook it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from record_local_model import LIVE_MODEL  # the line that switches notebook 04 to live

HERE = Path(__file__).resolve().parents[1] / "notebooks"

CORTEX = {"display_name": "Cortex Agent", "language": "markdown", "name": "cortex"}
PYTHON = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def code(source: str, ignore_output: bool = False) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    if ignore_output:
        cell.metadata["tags"] = ["nbval-ignore-output"]
    return cell


# A %%python cell that shows what the model did in the last run.
SHOW_RUN = (
    "%%python\n"
    "for e in _run.events:\n"
    "    if e.type == 'turn_started':\n"
    "        print(f'turn {e.turn}' + (' (repair turn)' if e.repair else ''))\n"
    "    elif e.type == 'action_parsed':\n"
    "        print('  action', e.action.id, e.action.type.value, e.action.body)\n"
    "    elif e.type in ('action_succeeded', 'action_failed'):\n"
    "        print('   ', e.type, e.id, getattr(e, 'preview', None) or e.error.splitlines()[0])\n"
    "    elif e.type in ('warning', 'action_error'):\n"
    "        print('  ', e.type + ':', e.message)\n"
    "print('status:', _run.status, '|', _run.usage.turns, 'turns')"
)


WRITTEN: list[str] = []
UNCHANGED: list[str] = []


def _made_here(nb: nbformat.NotebookNode) -> object:
    """What this script decides of a notebook; outputs, ids and run metadata are not."""
    return (
        nb.metadata.get("kernelspec"),
        [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells],
    )


def write_replay(name: str, turns: list[str]) -> None:
    """Write ``turns`` as the replay model's file ``data/<name>``, one turn a line."""
    (HERE / "data" / name).write_text(
        "".join(json.dumps({"content": turn}) + "\n" for turn in turns), encoding="utf-8"
    )


def write(name: str, kernel: dict[str, str], cells: list[nbformat.NotebookNode]) -> None:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = kernel
    path = HERE / name
    if path.exists() and _made_here(nbformat.read(path, as_version=4)) == _made_here(nb):
        UNCHANGED.append(name)
        return
    nbformat.write(nb, path)
    WRITTEN.append(name)


write(
    "01_quickstart.ipynb",
    CORTEX,
    [
        new_markdown_cell(
            "# Quickstart: a notebook the agent acts in\n\n"
            "This notebook runs in the **Cortex Agent** kernel: every cell is a message to "
            "the agent, `%%python` cells are Python in the same namespace, and `%` lines "
            "manage the session. It uses the offline replay model, so it runs anywhere; "
            "`%model openai/gpt-4o-mini` (or any litellm model string) talks to a real one."
        ),
        code("%model replay:data/quickstart.jsonl?tps=400\n%read_notebook on"),
        new_markdown_cell(
            "Python first: a text, and two notebook functions marked as tools. "
            "`@tool` derives each tool's JSON schema from its type hints."
        ),
        code(
            "%%python\n"
            "from collections import Counter\n"
            "from cortex_kernel import tool\n\n"
            'essay = """Agents that act while they think start their work the moment a plan '
            "step is written. An agent that waits for its whole plan wastes the time it spent "
            'writing it. The notebook shows each step as it runs."""\n\n\n'
            "@tool\n"
            "def word_count(text: str) -> int:\n"
            '    """Count the words of a text."""\n'
            "    return len(text.split())\n\n\n"
            "@tool\n"
            "def top_words(text: str, n: int = 3) -> list[str]:\n"
            '    """The n most frequent words (longer than three letters)."""\n'
            '    words = [w.strip(".,").lower() for w in text.split()]\n'
            "    return [w for w, _ in Counter(w for w in words if len(w) > 3).most_common(n)]"
        ),
        new_markdown_cell(
            "A message. The live view shows the thought streaming, both tool calls starting "
            "in the middle of it and running side by side, a progress update, then the "
            "final answer with the results filled in."
        ),
        code("How many words does the essay have, and which words does it use most?"),
        new_markdown_cell(
            "Every `output_key` became a notebook variable; `_response` is the answer and "
            "`_run` the whole run."
        ),
        code(
            "%%python\n"
            "print(n_words, frequent)\n"
            "print(_run.status, _run.usage.turns, 'turns')\n"
            "print([e.type for e in _run.events if e.type.startswith('action_succ')])"
        ),
        new_markdown_cell(
            "The conversation goes on across cells. This time a `sync` sub-completion "
            "(`llm` action) cuts the turn: the runtime stops reading the model, waits for "
            "the result and continues the conversation with it."
        ),
        code("Suggest a title for the essay."),
        code("%%python\nprint(title)"),
        code("%history", ignore_output=True),
    ],
)

write(
    "02_parallel_plans.ipynb",
    CORTEX,
    [
        new_markdown_cell(
            "# Parallel plans, dependencies and failures\n\n"
            "Actions start the moment their closing tag arrives and run in parallel under "
            "their dependencies. A failed action is reported, its dependents are skipped, and "
            "the run goes on."
        ),
        code("%model replay:data/parallel.jsonl?tps=600"),
        code(
            "%%python\n"
            "import asyncio\n"
            "from cortex_kernel import tool\n\n"
            "CENSUS = {'Paris': 2_102_650, 'Lyon': 522_250, "
            "'Nice': 348_085, 'Lille': 236_710}\n\n\n"
            "@tool\n"
            "async def population(city: str) -> int:\n"
            '    """Population of a French city (a slow lookup)."""\n'
            "    await asyncio.sleep(0.3)\n"
            "    if city not in CENSUS:\n"
            "        raise KeyError(f'{city} is not in the census')\n"
            "    return CENSUS[city]\n\n\n"
            "@tool\n"
            "def add_all(values: list[int]) -> int:\n"
            '    """Sum of the values."""\n'
            "    return sum(values)"
        ),
        code("What is the total population of Paris, Lyon, Nice and Lille?"),
        new_markdown_cell(
            "Each lookup started the moment its closing tag arrived, without waiting for the "
            "plan to finish; at this stream speed (600 tokens a second) the four 0.3 s "
            "lookups overlapped, and the sum started as soon as the last one landed."
        ),
        code(
            "%%python\n"
            "started = {e.id: e.t for e in _run.events if e.type == 'action_started'}\n"
            "ended = {e.id: e.t for e in _run.events if e.type == 'action_succeeded'}\n"
            "lookups = ['paris', 'lyon', 'nice', 'lille']\n"
            "overlap = max(started[c] for c in lookups) < min(ended[c] for c in lookups)\n"
            "print('lookups overlapped:', overlap)\n"
            "last = max(ended[c] for c in lookups)\n"
            "print('sum started after the last lookup:', started['sum'] >= last)\n"
            "print('total =', total)"
        ),
        code("Now add the population of Atlantis twice."),
        code(
            "%%python\n"
            "for e in _run.events:\n"
            "    if e.type in ('action_failed', 'action_skipped'):\n"
            "        print(e.type, e.id, '-', getattr(e, 'error', None) or e.reason)"
        ),
        code("%variables", ignore_output=True),
    ],
)

write(
    "03_agent_magic.ipynb",
    PYTHON,
    [
        new_markdown_cell(
            "# `%%agent` in the stock Python kernel\n\n"
            "The same engine, view and variables from a cell magic: `%load_ext cortex_kernel`."
        ),
        code("%load_ext cortex_kernel\n%read_notebook on"),
        code(
            "from cortex_kernel import tool\n\n"
            "temperatures = [14.5, 16.0, 15.5, 18.0]\n\n\n"
            "@tool\n"
            "def mean(values: list[float]) -> float:\n"
            '    """Arithmetic mean."""\n'
            "    return round(sum(values) / len(values), 2)"
        ),
        code("%%agent --model replay:data/magic.jsonl\nWhat is the mean of {temperatures}?"),
        code("mean_temp, _response"),
    ],
)
# The drift section replays a function-calling session recorded against the
# live model with the tools of notebook 04 (the transcript keeps, under
# `written`, what the model wrote when calls were read out of its text).
DRIFT_CELLS = (
    [
        new_markdown_cell(
            "## A drift the runtime absorbs\n\n"
            "With function calling (`--protocol tools`), llama-cpp-python's server "
            "returns this model's calls as *text*, and the model drifts from the format. "
            "Recorded against the live model at temperature 0 "
            "(`data/local_model_drift.jsonl`): for the follow-up below it made no call. "
            "It wrote a tool response it *imagined*, in the syntax of the results it had "
            "seen — `to_fahrenheit(celsius=15) returned: 59.0` inside `<tool_response>` "
            "tags. The runtime reads the call in it, runs the real tool, drops the "
            "imagined result, and the model answers from the real one. The transcript "
            "keeps what the model wrote (`written`)."
        ),
        code("%model replay:data/local_model_drift.jsonl --protocol tools"),
        code("What is the weather in Lyon?"),
        code("Convert that temperature to Fahrenheit."),
        code(SHOW_RUN),
        code(
            "%%python\n"
            "import json\n\n"
            "for line in open('data/local_model_drift.jsonl'):\n"
            "    record = json.loads(line)\n"
            "    if record['type'] == 'model_turn' and 'written' in record:\n"
            "        print(repr(record['written']))"
        ),
    ]
    if (HERE / "data" / "local_model_drift.jsonl").exists()
    else []
)

write(
    "04_local_model.ipynb",
    CORTEX,
    [
        new_markdown_cell(
            "# A real model: Qwen2.5-Coder-1.5B on this machine\n\n"
            "Every other notebook replays transcripts written by hand. This one replays a "
            "session **recorded against a real model**: Qwen2.5-Coder-1.5B-Instruct "
            "(Q4_K_M) served on 127.0.0.1 by `make local-model` (llama-cpp-python, 2 CPU "
            "cores), at temperature 0. The recording (`data/local_model.jsonl`, made by "
            "`scripts/record_local_model.py`) runs offline and under nbval; the tools are "
            "real and run again (the `llm` sub-calls' answers are recorded too). It "
            "was recorded with cortex-kernel 0.9.0 (prompt v6) and the protocol grammar "
            "(`--constrain grammar`), as the eval runs it (README, *Eval*).\n\n"
            "To talk to the live model instead, run `make local-model` and change the "
            "next line to:\n\n"
            f"```text\n{LIVE_MODEL}\n```"
        ),
        code("%model replay:data/local_model.jsonl"),
        code(
            "%%python\n"
            "from cortex_kernel import tool\n\n"
            "WEATHER = {'Toulouse': {'temp_c': 25, 'sky': 'clear'}, "
            "'Lyon': {'temp_c': 15, 'sky': 'rainy'},\n"
            "           'Paris': {'temp_c': 18, 'sky': 'cloudy'}, "
            "'Lille': {'temp_c': 12, 'sky': 'foggy'}}\n"
            "POPULATION = {'Lyon': 520_774, 'Nice': 348_085}\n\n\n"
            "@tool\n"
            "def weather(city: str) -> dict:\n"
            '    """Current weather of a French city: temperature in Celsius and sky."""\n'
            "    return WEATHER[city.strip().title()]\n\n\n"
            "@tool\n"
            "def to_fahrenheit(celsius: float) -> float:\n"
            '    """Convert a temperature from Celsius to Fahrenheit."""\n'
            "    return round(celsius * 9 / 5 + 32, 1)\n\n\n"
            "@tool\n"
            "def population(city: str) -> int:\n"
            '    """Population of a French city (census figure)."""\n'
            "    return POPULATION[city.strip().title()]"
        ),
        new_markdown_cell(
            "A two-step question: `weather` then `to_fahrenheit` would give 77 °F. "
            "What the small model actually did:"
        ),
        code("What is the temperature in Toulouse right now, in Fahrenheit?"),
        code(SHOW_RUN),
        new_markdown_cell(
            "It called `weather`, then `to_fahrenheit` with the Celsius figure, each as a "
            "`sync` action that ends its turn, and answered from the result. (Recorded "
            "with prompt v4 and no grammar, the same model asked an `llm` sub-call instead "
            "of the tools and answered with a sentence copied from the prompt.) A question "
            "no tool can answer:"
        ),
        code("What is the population of Atlantis?"),
        code(SHOW_RUN),
        new_markdown_cell(
            "The look-up failed the same way three times; the run then got one turn to "
            "answer without it (the warning says so), and the model said the figure is "
            "not available."
        ),
        *DRIFT_CELLS,
    ],
)

write(
    "05_tools_and_sandboxes.ipynb",
    CORTEX,
    [
        new_markdown_cell(
            "# Tools and sandboxes: a manifest, a callable, a command, Docker, approvals\n\n"
            "An agent manifest (`data/tools_agent.yaml`, shown below) gives the agent its "
            "tools: a Python function (`module:function`), a command, two Docker tools, and "
            "the file built-ins inside a workspace, where every write needs a human's "
            "approval. `docs/manifest.md` describes every field."
        ),
        code("%%python\nprint(open('data/tools_agent.yaml').read())"),
        code("%manifest data/tools_agent.yaml"),
        new_markdown_cell(
            "The Python function and the command run side by side. A command's parameters "
            "go in as JSON on stdin, or as single arguments from the manifest's `args` "
            "template (never through a shell string); JSON output comes back as data."
        ),
        code("How many words and characters does 'An agent that acts while it thinks' have?"),
        code("%%python\nprint(stats, chars)"),
        new_markdown_cell(
            "## Docker tools\n\n"
            "Each call runs in a fresh container of the sandbox image this machine builds "
            "for itself (no registry needed): no network, read-only root, all capabilities "
            "dropped, `no-new-privileges`, a non-root user, memory, CPU and pids limits, "
            "removed afterwards. The next cell says whether a Docker engine answers here; "
            "without one, the Docker cells still run and their tool calls fail with a "
            "clear error naming `DOCKER_HOST`."
        ),
        code(
            "%%python\n"
            "from cortex_kernel.exceptions import ToolError\n"
            "from cortex_kernel.executors.docker import docker_client\n"
            "try:\n"
            "    docker_client()\n"
            "    print('A Docker engine answers: the Docker tools run for real.')\n"
            "except ToolError as exc:\n"
            "    print(f'No Docker engine here ({exc}).')",
            ignore_output=True,
        ),
        code("Compute 2 to the power of 100 in the sandbox.", ignore_output=True),
        code("%%python\nprint(_run.events[-1].status, globals().get('big'))", ignore_output=True),
        new_markdown_cell(
            "What a denied network call looks like: the tool asks for a TCP connection, "
            "and the container has no network (only a manifest entry with "
            "`network: true` gets one)."
        ),
        code("Can the sandbox reach 1.1.1.1 on port 53?", ignore_output=True),
        code("%%python\nprint(globals().get('net'))", ignore_output=True),
        new_markdown_cell(
            "## Approvals\n\n"
            "`write_file` is marked `confirm: true` (here through `confirm: {write_file: "
            "true}`). In JupyterLab the action waits in the tree as *awaiting approval*, "
            "with the exact parameters and **Approve** / **Deny** buttons. This notebook "
            "runs unattended (nbval), so `%approvals deny` and `%approvals approve` answer "
            "for the user; the decision shows in the tree and is an event in the transcript."
        ),
        code("%approvals deny"),
        code("Save the phrase 'acts while it thinks' to notes.txt."),
        code("%approvals approve"),
        code("Save the phrase 'acts while it thinks' to notes.txt."),
        code(
            "%%python\n"
            "print(open('data/workspace/notes.txt').read().strip())\n"
            "print([(e.tool, e.approved, e.by) for e in _run.events "
            "if e.type == 'approval_decided'])"
        ),
        code("%approvals ask"),
        new_markdown_cell(
            "## Tools from an MCP server\n\n"
            "`mcp_demo.py` beside this notebook is a Model Context Protocol server written "
            "with the official `mcp` SDK. `%mcp add NAME -- COMMAND…` declares a stdio "
            "server (`%mcp add NAME URL` a streamable HTTP one; a manifest's `mcp_servers:` "
            "does the same). It starts with the next agent cell, lives as long as the "
            "session, and its tools reach the model as `letters__count_vowels` and "
            "`letters__spell`, with the JSON schemas the server gives, run in parallel "
            "like any other tool."
        ),
        code("%%python\nimport sys\n\nPYTHON = sys.executable  # the kernel's Python has the SDK"),
        code("%mcp add letters -- {PYTHON} mcp_demo.py", ignore_output=True),
        code("How many vowels has 'acts while it thinks', and how is 'thinks' spelled?"),
        code("%mcp", ignore_output=True),
        code("%%python\nprint(vowels, spelled)"),
    ],
)


def notebook_06() -> None:
    """Sub-agents, workflows and relics (issue 12): one manifest, three compound actions."""
    write(
        "06_subagents_workflows_relics.ipynb",
        CORTEX,
        [
            new_markdown_cell(
                "# Sub-agents, workflows and relics\n\n"
                "Three kinds of compound action, from one manifest "
                "(`data/compound_agent.yaml`, shown below): an `agent` action runs another "
                "agent of the manifest as a nested run, drawn as a subtree; a `workflow` "
                "action runs a named DAG of steps on the same scheduler; a `relic` action "
                "calls a persistent service that outlives the cell — here the built-in "
                "SQLite key-value store. The models are replays, so it runs offline."
            ),
            code(
                "%%python\n"
                "import pathlib\n\n"
                "# A fresh store for this demo (the file outlives the kernel).\n"
                "pathlib.Path('data/workspace/memory.sqlite').unlink(missing_ok=True)\n"
                "print(open('data/compound_agent.yaml').read())"
            ),
            code("%manifest data/compound_agent.yaml"),
            new_markdown_cell(
                "## A sub-agent\n\n"
                "`lead` hands the check to `critic`, which has its own model, instructions and "
                "tool. The critic's whole run — its thought, its `divisors` call, its answer — "
                "is nested under the `check` action in the tree (ids `check/d`…), and its "
                "final answer is the action's result."
            ),
            code("Is 221 a prime number? Have the critic check."),
            code(
                "%%python\n"
                "print(verdict)\n"
                "print(sorted({e.id for e in _run.events if getattr(e, 'parent', None) == 'check' "
                "and getattr(e, 'id', None)}))"
            ),
            new_markdown_cell(
                "## A workflow\n\n"
                "`stay_cost` is a parameterised DAG in the manifest: `room` and `guest_nights` "
                "start at once, `tax` waits for `guest_nights`, `total` for both. Its steps "
                "run as a subtree of the `cost` action; the result is the outputs it names."
            ),
            code("What does a 3-night stay for 2 people at 90 a night cost, tax included?"),
            code("%%python\nprint(stay)"),
            new_markdown_cell(
                "## A relic kept across cells\n\n"
                "The `memory` relic starts on its first use and stays up until the kernel "
                "stops (or `%relics stop memory`): a later cell — a new run — reads what an "
                "earlier one wrote. Its file lives in the workspace "
                "(`data/workspace/memory.sqlite`)."
            ),
            code("Remember that my favourite city is Lyon."),
            code("%relics", ignore_output=True),
            code("Which city did I say was my favourite?"),
            code(
                "%%python\n"
                "import cortex_kernel\n\n"
                "print(city)\n"
                "for relic in cortex_kernel.relics().status():\n"
                "    print(relic.name, relic.kind, relic.state, 'calls:', relic.calls)"
            ),
            code("%relics stop memory"),
        ],
    )


def feeds_notebook() -> None:
    """notebooks/07: a periodic feed the model reads, the model adding feeds, a blocked action."""
    audit = (
        "%%python\n"
        "for e in _run.events:\n"
        "    if e.type == 'internal_action':\n"
        "        print('internal_action', e.name, 'allowed' if e.allowed else 'BLOCKED', "
        "e.outcome)\n"
        "    elif e.type == 'action_error':\n"
        "        print('action_error:', e.message)"
    )
    write(
        "07_feeds_and_internal_actions.ipynb",
        CORTEX,
        [
            new_markdown_cell(
                "# Context feeds and internal actions\n\n"
                "A **context feed** is named text the agent sees in its system prompt at every "
                "turn: a value refreshed in the background, a tool's or a function's output, a "
                "model's summary, a workflow's result. **Internal actions** let the model change "
                "its own run — add a feed, set a variable — when its manifest allows it. "
                "`docs/feeds.md` describes both. This notebook uses the offline replay model."
            ),
            code("%%python\nprint(open('data/feeds_agent.yaml').read())"),
            code("%manifest data/feeds_agent.yaml"),
            new_markdown_cell(
                "## A periodic feed the model reads\n\n"
                "`queue` is refreshed in the background every 0.1 s while a run is active, "
                "and each turn reads its latest value from the cache (no fetch on the turn's "
                "path). The first turn sees 12 jobs; the tool takes 8 while the feed keeps "
                "refreshing, so the next turn's prompt says 4. When the run ends, the refresh "
                "stops."
            ),
            code("How many jobs are waiting? Process a batch, then tell me what is left."),
            code(
                "%%python\n"
                "fetches = [e for e in _run.events if e.type == 'feed_updated' "
                "and e.feed_id == 'queue']\n"
                "print('queue refreshed in the background during the run:', len(fetches) > 1)"
            ),
            code("%feeds show queue"),
            new_markdown_cell(
                "## The model adds feeds\n\n"
                "`add_context_feed` is granted by the manifest, so the model may declare feeds "
                "at run time — with the internal action or the `<context_feed>` element (same "
                "permission). It never writes a source: it names one the manifest declares "
                "under `feed_sources` (here `backlog`) or a built-in (`system_clock`); a "
                "`callable`, command or tool it wrote itself would be refused with an "
                "`action_error`, nothing imported. Each call is an `internal_action` event in "
                "the transcript: the audit trail of how the model changed its run."
            ),
            code("Keep an eye on the backlog and the time as well."),
            code(audit),
            code("%feeds", ignore_output=True),
            new_markdown_cell(
                "`%feeds` lists every feed with its type, source, age, size and value. "
                "`notebook_variables` is on by default in notebooks: the names, types and "
                "shapes of your own variables — their values only if you opt in with `%feeds "
                "values on`, and never private names, code or credentials.\n\n"
                "## A blocked internal action\n\n"
                "`remove_context_feed` is not in the manifest's `internal_actions`: the call is "
                "refused, the model sees the error at its next turn, and the audit says so."
            ),
            code("Stop watching the queue."),
            code(audit),
            new_markdown_cell(
                "The user, unlike the model, may always change the feeds: `%feeds add NAME "
                "KIND ARGS…` and `%feeds remove NAME`."
            ),
            code("%feeds remove clock"),
            code("%feeds add jobs --interval 5 callable feeds_demo:queue_length"),
            code(
                "%%python\n"
                "from cortex_kernel.jupyter.runner import runner_for\n"
                "print([f.id for f in runner_for(get_ipython()).session.feeds.specs])"
            ),
        ],
    )


def notebook_08_scale_out() -> None:
    """08: an agent fanning 50 lookups out to a Dask LocalCluster started in the notebook."""
    towns = [f"town_{k:02d}" for k in range(1, 51)]
    lookups = "".join(
        f'<action type="tool" mode="async" id="t{k:02d}" output_key="t{k:02d}">'
        + json.dumps({"name": "lookup", "parameters": {"town": town}})
        + "</action>\n"
        for k, town in enumerate(towns, start=1)
    )
    values = json.dumps([f"$t{k:02d}.population" for k in range(1, 51)])
    turns = [
        "<thought>50 independent lookups: they all go to the cluster at once.\n"
        + lookups
        + '<action type="tool" mode="async" id="total" output_key="total">'
        + f'{{"name": "add_all", "parameters": {{"values": {values}}}}}</action>\n'
        "</thought>\n<response>The 50 towns have **$total** inhabitants together.</response>",
        "<thought>The survey is slow; I give it two seconds.</thought>\n"
        '<action type="tool" mode="sync" id="survey" timeout="2">'
        '{"name": "survey", "parameters": {"town": "town_01"}}</action>',
        "<response>The survey did not finish in time; it was cancelled.</response>",
    ]
    write_replay("scale_out.jsonl", turns)
    write(
        "08_scale_out.ipynb",
        CORTEX,
        [
            new_markdown_cell(
                "# Scale out: tools on a Dask cluster\n\n"
                'A tool marked `@tool(executor="dask")` runs on a '
                "[Dask](https://distributed.dask.org) cluster instead of the kernel's "
                "threads: each call is a future the kernel awaits without blocking, so a "
                "fan-out of heavy calls uses the cluster's processes and the notebook stays "
                "responsive. Here the cluster is a `LocalCluster` of two worker processes "
                "started in the notebook (a real cluster is `Client('tcp://host:8786')`, "
                "`CORTEX_DASK_ADDRESS`, or a manifest's `executor: {kind: dask, address: …}`). "
                "It needs `pip install 'cortex-kernel[dask]'`."
            ),
            code(
                "%%python\n"
                "from distributed import Client, LocalCluster\n\n"
                "cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, "
                "dashboard_address=':0')\n"
                "client = Client(cluster)  # the agent finds this Client in the notebook\n"
                "print(len(client.scheduler_info()['workers']), 'workers')",
                ignore_output=True,
            ),
            code(
                "%%python\n"
                "import os\n"
                "import time\n"
                "from cortex_kernel import tool\n\n\n"
                "@tool(executor='dask')\n"
                "def lookup(town: str) -> dict:\n"
                '    """Census record of a town (runs on a worker)."""\n'
                "    number = int(town.split('_')[1])\n"
                "    time.sleep(0.05)  # a slow service\n"
                "    return {'town': town, 'population': 10_000 + 137 * number, "
                "'pid': os.getpid()}\n\n\n"
                "@tool(executor='dask')\n"
                "def survey(town: str) -> str:\n"
                '    """A long survey of a town: pure-Python work for a minute."""\n'
                "    start = time.perf_counter()\n"
                "    while time.perf_counter() - start < 60:\n"
                "        pass\n"
                "    return 'done'\n\n\n"
                "@tool\n"
                "def add_all(values: list[int]) -> int:\n"
                '    """Sum of the values (in the kernel)."""\n'
                "    return sum(values)"
            ),
            code("%model replay:data/scale_out.jsonl?tps=2000"),
            code("What is the total population of town_01 to town_50?"),
            new_markdown_cell(
                "The tree shows the worker each lookup ran on (`on tcp://127.0.0.1:…`); the "
                "sum ran in the kernel the moment the last lookup landed. The run's events "
                "say the same: an `action_placed` event per call on the cluster."
            ),
            code(
                "%%python\n"
                "from collections import Counter\n\n"
                "placed = Counter(e.where for e in _run.events if e.type == 'action_placed')\n"
                "print(sum(placed.values()), 'lookups on', len(placed), 'workers')\n"
                "print('all in worker processes:', "
                "all(t['pid'] != os.getpid() for t in [globals()[f't{k:02d}'] "
                "for k in range(1, 51)]))\n"
                "print('total =', total)"
            ),
            new_markdown_cell(
                "## Cancelled work leaves nothing behind\n\n"
                "Interrupting the cell (the stop button) cancels the futures of the running "
                "actions and stops the worker threads still computing them. nbval cannot "
                "press the stop button, so this notebook shows the same path through a "
                'timeout: the `survey` action has `timeout="2"`, and at two seconds the '
                "runtime cancels it exactly as an interrupt would (`tests/jupyter/"
                "test_dask_kernel.py` presses the real button through jupyter_client)."
            ),
            code("Survey town_01."),
            code(
                "%%python\n"
                "import time\n\n"
                "print([e.error for e in _run.events if e.type == 'action_failed'])\n"
                "for _ in range(50):  # the worker thread stops within moments\n"
                "    if not client.call_stack() and not any(client.processing().values()):\n"
                "        break\n"
                "    time.sleep(0.1)\n"
                "print('running on the cluster:', client.call_stack(), "
                "dict(Counter(len(v) for v in client.processing().values())))"
            ),
            code("%%python\nclient.close()\ncluster.close()", ignore_output=True),
        ],
    )


def python_action(action_id: str, code: str) -> str:
    """A ``python`` tool action: the agent's code, run in the notebook's namespace."""
    call = json.dumps({"name": "python", "parameters": {"code": code}})
    return f'<action type="tool" mode="sync" id="{action_id}">{call}</action>'


def notebook_09_data_analysis() -> None:
    """Questions of a DataFrame (issue 27): the agent's code runs, a plot, variables bound."""
    turns = [
        "<thought>Both are counts over the DataFrame: one code run.</thought>\n"
        + python_action(
            "count",
            "n_orders = len(sales)\nmissing_prices = int(sales['unit_price'].isna().sum())",
        ),
        "<response>`sales` has **$n_orders** orders; **$missing_prices** of them have no "
        "unit price.</response>",
        "<thought>Revenue is units times unit price, summed per region; an order without a "
        "price adds nothing.</thought>\n"
        + python_action(
            "by_region",
            "revenue = sales['units'] * sales['unit_price']\n"
            "revenue_by_region = revenue.groupby(sales['region']).sum().round(2)"
            ".sort_values(ascending=False)\n"
            "top_region = revenue_by_region.index[0]\n"
            "top_revenue = float(revenue_by_region.iloc[0])\n"
            "revenue_by_region",
        ),
        "<response>**$top_region** brings in the most revenue: $top_revenue. The whole "
        "ranking is in `revenue_by_region`.</response>",
        "<thought>The revenue per month, then a bar chart of it.</thought>\n"
        + python_action(
            "plot",
            "monthly_revenue = revenue.groupby(sales['date'].dt.month).sum().round(2)\n"
            "ax = monthly_revenue.plot.bar(\n"
            "    figsize=(6, 3), xlabel='month', ylabel='revenue', title='Revenue per month'\n"
            ")",
        ),
        "<response>The chart is above; its values are in `monthly_revenue`.</response>",
        "<thought>The follow-up reads `monthly_revenue`, which the last cell bound.</thought>\n"
        + python_action(
            "best",
            "best_month = int(monthly_revenue.idxmax())\n"
            "above_average = round(float(monthly_revenue.max() - monthly_revenue.mean()), 2)",
        ),
        "<response>Month **$best_month** was the best, $above_average above the average "
        "month.</response>",
    ]
    write_replay("data_analysis.jsonl", turns)
    write(
        "09_data_analysis.ipynb",
        CORTEX,
        [
            new_markdown_cell(
                "# Data analysis: questions of a DataFrame\n\n"
                "The agent answers questions about your data by running Python in the "
                "notebook's own namespace (the `python` tool): it sees `sales` by name, "
                "type and columns (the `notebook_variables` feed; no values are sent), "
                "writes the pandas, and its answer is filled from what the code "
                "computed. The model's turns are a replay written by hand "
                "(`data/data_analysis.jsonl`), so the notebook runs offline; the code in "
                "them runs for real in this kernel, so every figure below comes from the "
                "data. `cortex-kernel eval --suite data` measures a real model on such "
                "questions ([Eval](../docs/eval.md))."
            ),
            code("%model replay:data/data_analysis.jsonl?tps=400\n%read_notebook on"),
            new_markdown_cell(
                "In JupyterLab each code run waits for your **Approve**, with the whole "
                "code shown. This notebook runs unattended (nbval), so `%approvals auto` "
                "approves code that only reads your objects or binds new names; it would "
                "still ask before code that writes into `sales`."
            ),
            code("%approvals auto"),
            code(
                "%%python\n"
                "import numpy as np\n"
                "import pandas as pd\n\n"
                "rng = np.random.default_rng(9)\n"
                "orders = 120\n"
                "sales = pd.DataFrame({\n"
                "    'date': np.sort(rng.choice(pd.date_range('2024-01-01', '2024-12-31')"
                ".to_numpy(), orders)),\n"
                "    'region': rng.choice(['North', 'South', 'East', 'West'], orders),\n"
                "    'units': rng.integers(1, 40, orders),\n"
                "    'unit_price': rng.uniform(8, 60, orders).round(2),\n"
                "})\n"
                "sales.loc[rng.choice(orders, 6, replace=False), 'unit_price'] = np.nan\n"
                "sales.head()"
            ),
            code("How many orders are in `sales`, and how many of them have no unit price?"),
            code("Which region brings in the most revenue (units times unit price)?"),
            new_markdown_cell(
                "The code bound its results in the notebook: `revenue_by_region` is a "
                "Series like any other, and `_run.changes` says what each code run added."
            ),
            code(
                "%%python\nprint(revenue_by_region.to_string())\nprint(_run.changes[0]['summary'])"
            ),
            new_markdown_cell(
                "A figure the agent's code draws is shown in the cell, as `image/png`."
            ),
            code("Plot the revenue per month as a bar chart."),
            new_markdown_cell(
                "A follow-up: the next question works on `monthly_revenue`, the Series "
                "the previous cell's code left in the notebook."
            ),
            code("Which month was the best, and by how much did it beat the average month?"),
            code("%%python\nprint(best_month, above_average)\nprint(monthly_revenue.to_string())"),
        ],
    )


notebook_06()
feeds_notebook()
notebook_08_scale_out()
notebook_09_data_analysis()
for written in WRITTEN:
    print(f"wrote {HERE / written}")
print(f"{len(WRITTEN)} notebook(s) written, {len(UNCHANGED)} unchanged")

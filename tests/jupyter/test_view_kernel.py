"""What the agent did, in the final (static) view of a real kernel's cell.

The static view is what a saved notebook shows when it is reopened: the
``update_display_data`` that replaces the widget at the end of the run. It
shows each action's arguments beside its result, and the figures the
kernel drew under the action that drew them; images written by the model
(markdown or HTML in its thought or answer) stay inert.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jupyter.conftest import Kernel
from tests.replays import write_turns

pytestmark = pytest.mark.kernel

# A real 1x1 PNG: what a model would like to pass off as a figure.
SMUGGLED = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
ADD = (
    "%%python\nfrom cortex_kernel import tool\n\n"
    "@tool\ndef add(a: int, b: int) -> int:\n    return a + b\n"
)
PLOT = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])"
)


@pytest.fixture
def kernel(cortex_kernelspec: str) -> Iterator[Kernel]:
    k = Kernel(cortex_kernelspec, dict(os.environ))
    yield k
    k.shutdown()


def replay(tmp_path: Path, *turns: str) -> str:
    return f"replay:{write_turns(tmp_path / 'turns.jsonl', *turns)}"


def test_arguments_and_the_kernels_figure_are_in_the_static_view(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.python(ADD)
    kernel.python("%approvals bypass")
    smuggle = (
        f"![chart](data:image/png;base64,{SMUGGLED}) "
        f'<img src="data:image/png;base64,{SMUGGLED}"> '
        f"[x](data:image/png;base64,{SMUGGLED})"
    )
    add = json.dumps({"name": "add", "parameters": {"a": 2, "b": 3}})
    plot = json.dumps({"name": "python", "parameters": {"code": PLOT}})
    model = replay(
        tmp_path,
        f"<thought>{smuggle}</thought>"
        f'<action type="tool" mode="async" id="s1" output_key="s">{add}</action>'
        f'<action type="tool" id="p1">{plot}</action>',
        f"<response>sum $s, drawn. {smuggle}</response>",
    )
    kernel.python(f"%model {model}")
    result = kernel.run("add and plot")
    assert result.status == "ok", result.reply["content"]
    drawn = result.images()
    final = result.of_type("update_display_data")[-1]["content"]["data"]
    assert len(drawn) == 1, final["text/plain"]  # the figure in the cell, as before
    final = result.of_type("update_display_data")[-1]["content"]["data"]
    html = final["text/html"]

    # Each action's arguments, collapsed beside its result; the code once it ran.
    assert ">arguments</summary>" in html and "a: 2\nb: 3" in html
    assert ">code</summary>" in html and "plt.plot([1, 3, 2])" in html
    assert "  ✓ s1 tool add (async): succeeded\n    args: a: 2 ⏎ b: 3\n" in final["text/plain"]
    assert "args: `a: 2 ⏎ b: 3`" in final["text/markdown"]

    # The one image is the kernel's figure, under the action that drew it.
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert images == [drawn[0].replace("\n", "")], html[:2000]
    assert base64.b64decode(images[0]).startswith(b"\x89PNG")
    assert html.index("p1 tool python") < html.index("<img") < html.index("</li>", html.index("p1"))
    # What the model wrote (in its thought and its answer) is text: no other
    # image, and no data: link, in the view or in the answer.
    assert html.count("<img") == 1 and 'href="data:' not in html
    assert '&lt;img src="data:image/png' in html  # the thought's <img>, as text
    answer = result.result_data()
    assert "<img" not in answer["text/html"] and 'href="data:' not in answer["text/html"]

"""``jupyter_kernel_test`` conformance of the Cortex kernel's Python side (``%%python``)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import jupyter_kernel_test
import pytest

from cortex_kernel.jupyter.install import install

pytestmark = pytest.mark.kernel


DISPLAY_HTML = "%%python\nfrom IPython.display import HTML, display\ndisplay(HTML('<b>x</b>'))"
DISPLAY_LATEX = (
    "%%python\nfrom IPython.display import Math, display\ndisplay(Math('\\\\frac{1}{2}'))"
)


class CortexKernelTests(jupyter_kernel_test.KernelTests):
    kernel_name = "cortex"
    language_name = "markdown"
    file_extension = ".md"

    @classmethod
    def setUpClass(cls) -> None:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

        try:
            KernelSpecManager().get_kernel_spec("cortex")
        except NoSuchKernel:
            install(sys_prefix=True)
        # jupyter_kernel_test allows 0.1 s between two iopub messages of a
        # cell; the background warm-up (jupyter/warmup.py) can hold the GIL
        # longer than that inside one import on a loaded machine (seen in the
        # full suite). The warm-up has its own tests (test_warmup.py).
        os.environ["CORTEX_WARM_UP"] = "0"  # inherited by the kernel started below
        try:
            super().setUpClass()
        finally:
            del os.environ["CORTEX_WARM_UP"]

    code_hello_world = "%%python\nprint('hello, world')"
    code_stderr = "%%python\nimport sys; print('test', file=sys.stderr)"
    completion_samples: ClassVar[list[dict[str, Any]]] = [
        {"text": "%%python\nzi", "matches": {"zip"}}
    ]
    # A %%python cell ends at a blank line, as IPython's cell magics do in a terminal.
    complete_code_samples: ClassVar[list[str]] = [
        "%%python\n1\n",
        "%%python\nprint('hello, world')\n",
    ]
    incomplete_code_samples: ClassVar[list[str]] = ["%%python\nprint('''hello", "%%python\n1"]
    code_page_something = "%%python\nprint?"
    code_generate_error = "%%python\nraise ValueError('boom')"
    code_execute_result: ClassVar[list[dict[str, str]]] = [
        {"code": "%%python\n1 + 2 + 3", "result": "6"},
        {"code": "%%python\n[n * n for n in range(1, 4)]", "result": "[1, 4, 9]"},
    ]
    code_display_data: ClassVar[list[dict[str, str]]] = [
        {"code": DISPLAY_HTML, "mime": "text/html"},
        {"code": DISPLAY_LATEX, "mime": "text/latex"},
    ]
    code_history_pattern = "%%python?1?+?2*"
    supported_history_operations = ("tail", "search")
    code_inspect_sample = "zip"
    code_clear_output = "%%python\nfrom IPython.display import clear_output; clear_output()"

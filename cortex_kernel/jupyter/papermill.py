"""papermill support: parameters as a ``%%python`` cell, replay paths next to the notebook.

papermill finds this module through its ``papermill.engine`` entry point
(``pyproject.toml``) and imports it when it starts. Importing it:

- registers :class:`CortexTranslator` for the ``cortex`` kernel, so the
  injected parameters cell is ``%%python`` assignments (a message cell would
  send them to the agent);
- makes :class:`CortexEngine` papermill's default engine. It is papermill's
  own nbclient engine plus one thing: the kernel learns the notebook's
  folder (``$CORTEX_NOTEBOOK_DIR``), so ``%model replay:data/x.jsonl``
  resolves next to the notebook, as it does in JupyterLab, wherever
  papermill was started; and that nobody is there to approve a call
  (``$CORTEX_UNATTENDED``: such calls are refused, not waited on). Other
  kernels see no difference.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from papermill.engines import NBClientEngine, papermill_engines
from papermill.translators import PythonTranslator, papermill_translators

from .install import KERNEL_NAME

__all__ = ["CortexEngine"]

_PYTHON_CELL = "%%python\n"


class CortexTranslator(PythonTranslator):  # type: ignore[misc]
    """Python assignments, as a ``%%python`` cell of the Cortex kernel."""

    @classmethod
    def codify(cls, parameters: dict[str, Any], comment: str = "Parameters") -> str:
        """The injected cell: ``%%python`` then papermill's Python assignments."""
        return _PYTHON_CELL + str(super().codify(parameters, comment))

    @classmethod
    def inspect(cls, parameters_cell: Any) -> list[Any]:
        """Read a ``%%python`` parameters cell as Python (``papermill --help-notebook``)."""
        source = str(parameters_cell.source)
        if source.lstrip().startswith("%%python"):
            parameters_cell = dict(parameters_cell)
            parameters_cell["source"] = source.lstrip().split("\n", 1)[-1]
            from nbformat import NotebookNode

            parameters_cell = NotebookNode(parameters_cell)  # type: ignore[no-untyped-call]
        found: list[Any] = super().inspect(parameters_cell)
        return found


@contextlib.contextmanager
def _notebook_dir(input_path: Any) -> Iterator[None]:
    path = Path(str(input_path)) if input_path else None
    if path is None or not path.is_file():
        yield  # not a local file (s3://, a NotebookNode…): nothing to say
        return
    with _env("CORTEX_NOTEBOOK_DIR", str(path.resolve().parent)):
        yield


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


class CortexEngine(NBClientEngine):  # type: ignore[misc]
    """papermill's nbclient engine; the kernel is told the notebook's folder."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
        """Run the notebook as nbclient does, with ``$CORTEX_NOTEBOOK_DIR`` set.

        ``$CORTEX_UNATTENDED`` too: nobody clicks Approve under papermill, so
        a call that would wait for it is refused at once.
        """
        with _notebook_dir(kwargs.get("input_path")), _env("CORTEX_UNATTENDED", "1"):
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)


papermill_translators.register(KERNEL_NAME, CortexTranslator)
papermill_engines.register(None, CortexEngine)

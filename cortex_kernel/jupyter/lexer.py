"""The Pygments lexer of Cortex cells, for nbconvert and other exporters.

The kernel's ``language_info`` names it (``pygments_lexer: cortex``), so a
notebook exported to HTML or LaTeX highlights a cell as the editor does: a
cell whose first line is ``%%python`` as (I)Python, any other cell as the
markdown of a message. Pygments finds it through the ``pygments.lexers``
entry point.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.lexers.markup import MarkdownLexer
from pygments.lexers.python import PythonLexer
from pygments.token import Keyword, Operator, Text
from pygments.util import ClassNotFound

__all__ = ["CortexLexer"]

# Leading blank lines, then "%%python" and its arguments (IPython skips the blanks too).
_PYTHON_HEAD = re.compile(r"(\s*)(%%)(python)([^\S\n]+[^\n]*)?(\n|$)")


class CortexLexer(Lexer):  # type: ignore[misc]  # pygments is untyped
    """Cortex cells: ``%%python`` cells as Python, messages as markdown.

    Parameters
    ----------
    **options
        Pygments' lexer options, passed on to the Python and markdown lexers.
    """

    name = "Cortex"
    aliases = ["cortex"]  # noqa: RUF012 - Pygments' class attributes
    filenames: list[str] = []  # noqa: RUF012
    mimetypes: list[str] = []  # noqa: RUF012

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        try:
            # IPython's lexer: line magics and shell escapes in a %%python cell run there too.
            self.python = get_lexer_by_name("ipython3", **options)
        except ClassNotFound:
            self.python = PythonLexer(**options)
        self.markdown = MarkdownLexer(**options)

    def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, Any, str]]:
        """Tokens of one cell: ``(index, token type, value)``, as Pygments expects."""
        head = _PYTHON_HEAD.match(text)
        if head is None:
            yield from self.markdown.get_tokens_unprocessed(text)
            return
        blank, percent, word, arguments, newline = head.groups()
        index = 0
        for token, value in (
            (Text, blank),
            (Operator, percent),
            (Keyword, word),
            (Text, (arguments or "") + newline),
        ):
            if value:
                yield index, token, value
                index += len(value)
        for offset, token, value in self.python.get_tokens_unprocessed(text[head.end() :]):
            yield head.end() + offset, token, value

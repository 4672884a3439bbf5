"""Parameter descriptions from a function's numpy- or Google-style docstring.

Only the ``Parameters`` (numpy) and ``Args``/``Arguments`` (Google) sections
are read; anything else in the docstring is the tool's description. The
parser is deliberately small: a name line, then indented description lines.
"""

from __future__ import annotations

import re

__all__ = ["summary"]

_NUMPY_HEADER = re.compile(r"^(Parameters|Other Parameters)\s*$")
_NUMPY_RULE = re.compile(r"^-{3,}\s*$")
_IDENT = r"[*]{0,2}[A-Za-z_][A-Za-z0-9_]*"
_NUMPY_ITEM = re.compile(rf"^({_IDENT}(?:\s*,\s*{_IDENT})*)\s*(?::.*)?$")
_GOOGLE_HEADER = re.compile(r"^(Args|Arguments|Parameters)\s*:\s*$")
_GOOGLE_ITEM = re.compile(r"^([*]{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^[A-Z][A-Za-z ]+:?\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _numpy(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for start, line in enumerate(lines[:-1]):
        if _NUMPY_HEADER.match(line.strip()) and _NUMPY_RULE.match(lines[start + 1].strip()):
            base = _indent(line)
            names: list[str] = []
            index = start + 2
            while index < len(lines):
                text = lines[index]
                stripped = text.strip()
                if stripped and _indent(text) <= base:
                    if index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1].strip()):
                        break  # the next section
                    match = _NUMPY_ITEM.match(stripped)
                    listed = match.group(1).split(",") if match else []
                    names = [n.strip().lstrip("*") for n in listed]
                    for name in names:
                        out.setdefault(name, "")
                elif stripped and names:
                    for name in names:
                        out[name] = (out[name] + " " + stripped).strip()
                index += 1
    return out


def _google(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for start, line in enumerate(lines):
        if not _GOOGLE_HEADER.match(line.strip()):
            continue
        base = _indent(line)
        item_indent: int | None = None
        name: str | None = None
        for text in lines[start + 1 :]:
            stripped = text.strip()
            if not stripped:
                continue
            if _indent(text) <= base:
                break  # dedent: the section ended
            if item_indent is None:
                item_indent = _indent(text)
            match = _GOOGLE_ITEM.match(stripped)
            if _indent(text) == item_indent and match:
                name = match.group(1).lstrip("*")
                out[name] = match.group(2).strip()
            elif name is not None:
                out[name] = (out[name] + " " + stripped).strip()
    return out


def parameter_descriptions(doc: str | None) -> dict[str, str]:
    """``{parameter: description}`` from a numpy- or Google-style docstring.

    Examples
    --------
    >>> parameter_descriptions('''Add.
    ...
    ... Parameters
    ... ----------
    ... a : int
    ...     The first number.
    ... ''')
    {'a': 'The first number.'}
    >>> parameter_descriptions('''Add.
    ...
    ... Args:
    ...     a (int): The first
    ...         number.
    ... ''')
    {'a': 'The first number.'}
    """
    if not doc:
        return {}
    lines = doc.expandtabs().splitlines()
    found = _numpy(lines)
    for name, text in _google(lines).items():
        found.setdefault(name, text)
    return {name: text for name, text in found.items() if text}


def summary(doc: str | None) -> str:
    """The docstring without its parameter/returns sections (the tool's description)."""
    if not doc:
        return ""
    kept: list[str] = []
    lines = doc.expandtabs().splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        numpy_section = index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1].strip())
        if (numpy_section and stripped) or _GOOGLE_HEADER.match(stripped):
            break
        if _SECTION.match(stripped) and stripped.rstrip(":") in ("Returns", "Raises", "Yields"):
            break
        kept.append(line)
    return "\n".join(kept).strip()

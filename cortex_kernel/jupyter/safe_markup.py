"""Inert markup from model-written and tool-produced text: the one place it is made.

A notebook front end trusts the outputs of a cell it executed: JupyterLab
and Notebook 7 render a trusted ``text/html`` or ``text/markdown`` output
without their sanitizer (scripts in it even run), with the page's access to
the Jupyter server's API (contents, terminals, kernels). Text a model wrote
or a tool returned is the attacker's, so nothing of it may reach an output
as live markup. Every renderer of the kernel (the answer, the static view,
the terminal view) builds its output with these functions:

- :func:`markdown_html`: markdown as HTML. markdown-it-py with raw HTML
  disabled (shown as text), then nh3 (Ammonia) with an allow-list of
  formatting tags; links only to ``http``, ``https`` and ``mailto`` URLs,
  with ``rel="noopener noreferrer nofollow"``; images become links to
  them (no request leaves the page until the user clicks).
- :func:`markdown_source`: the same markdown written back as markdown for
  front ends that render ``text/markdown``: formatting kept, every text
  character that could start markup escaped, the same links and images.
- :func:`literal_markdown`, :func:`code_span`: text that reads literally
  in markdown.
- :func:`escape_html`, :func:`sanitize_view_html`: text for HTML the
  kernel assembles, and the sanitizer that HTML goes through at the end.
- :func:`terminal_safe`: text for ``text/plain`` (``jupyter console``
  prints it to a terminal): control characters, escape sequences and bidi
  overrides shown, not obeyed.

Each keeps ``$`` from being typeset as math (MathJax never pairs
delimiters across elements, so every ``$`` goes in its own ``<span>``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.tree import SyntaxTreeNode
from markdown_it.utils import EnvType, OptionsDict

__all__: list[str] = []  # used inside the jupyter package only

#: The only URL schemes a link from model text may have (no relative URLs either).
URL_SCHEMES = frozenset({"http", "https", "mailto"})

LINK_REL = "noopener noreferrer nofollow"

# A dollar the markdown step reads as literal (``\$``: Jupyter's math
# extraction, GitHub, VS Code), in its own element for MathJax.
DOLLAR_MARKDOWN = "<span>\\$</span>"
DOLLAR_HTML = "<span>$</span>"

# Browsers drop ASCII whitespace and control characters in and around a
# URL's scheme ("java\tscript:" is javascript:).
_URL_IGNORED = re.compile(r"[\x00-\x20\x7f]")
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*):")


def safe_url(url: str) -> str | None:
    """``url`` if it is an absolute ``http``, ``https`` or ``mailto`` URL, else ``None``.

    Relative URLs are refused too: in a notebook they resolve against the
    Jupyter server, which model text has no business pointing at.
    """
    match = _SCHEME.match(_URL_IGNORED.sub("", url))
    if match is None or match.group(1).lower() not in URL_SCHEMES:
        return None
    return url


def _href_filter(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "href":
        return safe_url(value)
    return value


_FORMAT_TAGS = frozenset(
    {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "del", "s"}
    | {"code", "pre", "blockquote", "ul", "ol", "li", "a", "span"}
    | {"table", "thead", "tbody", "tr", "th", "td"}
)

# Model markdown: formatting only. No img, no class (JupyterLab's own class
# names could dress model text up as the page's UI), no style but alignment.
_ANSWER_POLICY: dict[str, Any] = {
    "tags": set(_FORMAT_TAGS),
    "attributes": {"a": {"href"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}},
    "filter_style_properties": {"text-align"},
    "url_schemes": set(URL_SCHEMES),
    "link_rel": LINK_REL,
    "attribute_filter": _href_filter,
    "strip_comments": True,
}

# The static view the kernel assembles: inline styles (which front-end
# sanitizers keep; no property that could place it over the page) and its
# own classes. A new class or style property of the view goes here too.
_VIEW_CLASSES = {
    "cortex-run-static",
    "cortex-answer",
    "cortex-approval-static",
    "cortex-timeline",
    "tex2jax_ignore",
    "mathjax_ignore",
}
# The timeline's drawing (viewstate.timeline): shapes, text and tooltips;
# no link, image, script, style element, filter or animation, and no
# attribute that takes a URL.
_SVG_TAGS = {"svg", "g", "rect", "line", "path", "text", "title"}
_SVG_ATTRIBUTES = {"width", "height", "viewBox", "x", "y", "x1", "y1", "x2", "y2", "d"}
_SVG_ATTRIBUTES |= {"fill", "stroke", "stroke-width", "font-family", "font-size", "text-anchor"}
_SVG_ATTRIBUTES |= {"role", "aria-label"}
_VIEW_POLICY: dict[str, Any] = {
    **_ANSWER_POLICY,
    "tags": set(_FORMAT_TAGS | {"div", "details", "summary", "small", "b", "i"} | _SVG_TAGS),
    "attributes": {
        "*": {"style"},
        "a": {"href", "target"},
        "ol": {"start"},
        **{tag: _SVG_ATTRIBUTES for tag in _SVG_TAGS},
    },
    "allowed_classes": {"div": _VIEW_CLASSES},
    "filter_style_properties": {
        "background",
        "color",
        "font-family",
        "font-size",
        "list-style",
        "margin",
        "max-height",
        "overflow",
        "overflow-wrap",
        "padding",
        "padding-left",
        "text-align",
        "white-space",
    },
}


def sanitize_view_html(markup: str) -> str:
    """HTML the kernel assembled, through nh3 with the static view's allow-list.

    Model text in it is escaped already (:func:`escape_html`); this is the
    second line of defence should a field ever be put in unescaped.
    """
    return nh3.clean(markup, **_VIEW_POLICY)


def escape_html(text: str) -> str:
    """``text`` as HTML text: markup characters escaped, each ``$`` in its own element."""
    return html.escape(text, quote=True).replace("$", DOLLAR_HTML)


# -- markdown -> HTML --------------------------------------------------------


def _render_text(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return escape_html(tokens[idx].content)


def _render_image(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # An image would be fetched as the page renders: a link to it is not.
    token = tokens[idx]
    src = safe_url(str(token.attrGet("src") or ""))
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    opened = sum(t.type == "link_open" for t in tokens[:idx])
    in_link = opened > sum(t.type == "link_close" for t in tokens[:idx])
    if src is None or in_link:  # no link in a link: the alt text only
        return escape_html(alt)
    return f'<a href="{html.escape(src, quote=True)}">{escape_html(alt or src)}</a>'


def _parser() -> MarkdownIt:
    # CommonMark with raw HTML off (it is shown as text), plus GFM tables and ~~strike~~.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    # A link to anything else stays the text it was written as.
    md.validateLink = lambda url: safe_url(url) is not None  # type: ignore[method-assign]
    md.add_render_rule("text", _render_text)
    md.add_render_rule("image", _render_image)
    return md


_MD = _parser()


def markdown_html(text: str) -> str:
    """Model markdown as sanitized HTML, in a ``<div>`` MathJax leaves alone.

    Parameters
    ----------
    text
        Markdown written by a model (or holding a tool's output).

    Returns
    -------
    str
        ``<div class="cortex-answer tex2jax_ignore mathjax_ignore">…</div>``:
        formatting (emphasis, lists, tables, code, headings, quotes) and
        links to ``http``/``https``/``mailto`` URLs; raw HTML shown as text;
        no image, script, style, event handler or other URL.
    """
    body = nh3.clean(_MD.render(text), **_ANSWER_POLICY)
    return f'<div class="cortex-answer tex2jax_ignore mathjax_ignore">{body}</div>'


# -- markdown -> markdown ----------------------------------------------------

# Characters that could start markup anywhere in a line; escaping them keeps
# text from becoming HTML, an entity, a link, code or emphasis.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~#])")
# At the start of a line, these could start a block (a list, a setext heading).
_LINE_START = re.compile(r"^([-+=])|^(\d+)([.)])")
# What a link destination must not hold bare (it ends it, or is read as math).
_DEST_ESCAPES = str.maketrans(
    {"(": "%28", ")": "%29", " ": "%20", "<": "%3C", ">": "%3E", "$": "%24", "\\": "%5C"}
    | {"`": "%60", "\n": "%0A"}
)


def _escape_text(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text.replace("\n", " ")).replace("$", DOLLAR_MARKDOWN)


def _escape_line_starts(markdown: str) -> str:
    return "\n".join(
        _LINE_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", line)
        for line in markdown.split("\n")
    )


def literal_markdown(text: str) -> str:
    """``text`` as markdown that renders as exactly this text (line breaks aside)."""
    return _escape_line_starts(
        "\n".join(_escape_text(line) for line in text.replace("\r\n", "\n").split("\n"))
    )


def code_span(text: str, *, in_table: bool = False) -> str:
    """``text`` as a markdown code span (fenced by more backticks than it holds)."""
    text = text.replace("\n", " ")
    if in_table:
        text = text.replace("|", "\\|")  # GFM: a pipe ends a cell even in code
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = text[0] == "`" or text[-1] == "`" or (text[0] == text[-1] == " " and text.strip())
    return f"{fence} {text} {fence}" if pad else f"{fence}{text}{fence}"


def _destination(url: str) -> str:
    return url.translate(_DEST_ESCAPES)


def _inline(node: SyntaxTreeNode, *, one_line: bool, in_table: bool, in_link: bool) -> str:
    out: list[str] = []
    for child in node.children:
        kind = child.type
        if kind == "text":
            out.append(_escape_text(child.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append(" " if one_line else ("\n" if kind == "softbreak" else "\\\n"))
        elif kind == "code_inline":
            out.append(code_span(child.content, in_table=in_table))
        elif kind in ("em", "strong", "s"):
            mark = {"em": "*", "strong": "**", "s": "~~"}[kind]
            inner = _inline(child, one_line=one_line, in_table=in_table, in_link=in_link)
            out.append(f"{mark}{inner}{mark}" if inner else "")
        elif kind in ("link", "image"):
            url = safe_url(str(child.attrs.get("href" if kind == "link" else "src", "")))
            inner = _inline(child, one_line=one_line, in_table=in_table, in_link=True)
            if kind == "image" and not inner and url is not None:
                inner = _escape_text(url)
            if url is None or in_link:  # no link in a link: its text only
                out.append(inner)
            else:
                out.append(f"[{inner}]({_destination(url)})")
        else:  # anything else (none with this parser's rules): its text, escaped
            out.append(_escape_text(child.content))
    return "".join(out)


def _inline_of(node: SyntaxTreeNode, *, one_line: bool = False, in_table: bool = False) -> str:
    inline = node.children[0] if node.children else None
    if inline is None:
        return ""
    return _escape_line_starts(_inline(inline, one_line=one_line, in_table=in_table, in_link=False))


def _fence(content: str, info: str = "") -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    fence = "`" * max(3, longest + 1)
    # The info string names a language: a word, never markup.
    language = re.sub(r"[^\w+#.-]", "", info.split()[0]) if info.split() else ""
    body = content[:-1] if content.endswith("\n") else content
    return [fence + language, *(body.split("\n") if body else []), fence]


def _list(node: SyntaxTreeNode) -> list[str]:
    items = node.children
    tight = all(
        block.hidden for item in items for block in item.children if block.type == "paragraph"
    )
    ordered = node.type == "ordered_list"
    number = int(str(node.attrs.get("start", 1))) if ordered else 0
    lines: list[str] = []
    for item in items:
        marker = f"{number}{item.markup or '.'}" if ordered else (item.markup or "-")
        number += 1
        body = _blocks(item.children, tight=tight)
        if lines and not tight:
            lines.append("")
        if not body:
            lines.append(marker)
            continue
        indent = " " * (len(marker) + 1)
        lines.append(f"{marker} {body[0]}")
        lines.extend(indent + line if line else "" for line in body[1:])
    return lines


def _table(node: SyntaxTreeNode) -> list[str]:
    rows: list[list[str]] = []
    aligns: list[str] = []
    for section in node.children:
        for row in section.children:
            cells = [_inline_of(cell, one_line=True, in_table=True) for cell in row.children]
            if section.type == "thead":
                aligns = [str(cell.attrs.get("style", "")) for cell in row.children]
            rows.append(cells)
    if not rows:
        return []
    rule = {"text-align:left": ":---", "text-align:right": "---:", "text-align:center": ":---:"}
    delimiter = [rule.get(align, "---") for align in aligns] or ["---"] * len(rows[0])
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(delimiter) + " |"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows[1:])
    return lines


def _block(node: SyntaxTreeNode) -> list[str]:
    kind = node.type
    if kind == "paragraph":
        return _inline_of(node).split("\n")
    if kind == "heading":
        return [f"{'#' * int(node.tag[1:])} {_inline_of(node, one_line=True)}".rstrip()]
    if kind == "blockquote":
        return [f"> {line}" if line else ">" for line in _blocks(node.children)] or [">"]
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind in ("fence", "code_block"):
        return _fence(node.content, node.info if kind == "fence" else "")
    if kind == "hr":
        return ["***"]  # "---" under a paragraph would make it a heading
    if kind == "table":
        return _table(node)
    # Anything else (none with this parser's rules): its text, literally.
    return literal_markdown(node.content).split("\n") if node.content else []


def _blocks(nodes: Sequence[SyntaxTreeNode], *, tight: bool = False) -> list[str]:
    lines: list[str] = []
    for node in nodes:
        block = _block(node)
        if not block:
            continue
        if lines and not tight:
            lines.append("")
        lines.extend(block)
    return lines


def markdown_source(text: str) -> str:
    """Model markdown written back as inert markdown, for ``text/markdown``.

    JupyterLab renders a trusted output's markdown without its sanitizer,
    and other renderers differ on what they let through: so the markdown
    is parsed (CommonMark, GFM tables and strikethrough) and written again
    from the parse. Its structure and formatting are kept; every text
    character that could start markup (``<``, ``&``, brackets, backticks…)
    is escaped, so raw HTML reads as text; links keep only ``http``,
    ``https`` and ``mailto`` URLs (others are their text), images become
    links to their URL; code keeps its text, fenced by more backticks than
    it holds; each ``$`` outside code is a literal dollar.
    """
    tree = SyntaxTreeNode(_MD.parse(text))
    return "\n".join(_blocks(tree.children))


# -- terminals ---------------------------------------------------------------

# C0 controls but newline and tab, DEL, C1 controls (CSI, OSC…), and the
# bidi embeddings, overrides and isolates that show text out of order (the
# plain marks, LRM and RLM, stay: right-to-left text needs them).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ ␍ ␇ …
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def terminal_safe(text: str) -> str:
    """``text`` for a terminal: control characters shown as symbols, not obeyed.

    An escape sequence (``ESC [ 2 J``, an OSC 52 clipboard write, a title
    change), a carriage return that overwrites the line, or a bidi override
    that reorders it becomes visible (``␛[2J``, ``␍``, ``<U+202E>``);
    newlines and tabs stay.
    """
    return _CONTROL.sub(_visible, text)

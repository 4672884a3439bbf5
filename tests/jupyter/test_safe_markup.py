"""The renderers of model text (``cortex_kernel.jupyter.safe_markup``) on hostile input.

Each markdown the kernel publishes is rendered here as a front end renders
trusted markdown (raw HTML passed through) and checked for live markup; the
HTML is checked as it is. The cases are the known ways past a
regex-based escaper (an escaped backtick that is no code span, entities in a
URL's scheme, a reference definition, an autolink); a property test tries
mixtures of markup fragments.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_kernel.jupyter.safe_markup import (
    code_span,
    literal_markdown,
    markdown_html,
    markdown_source,
    terminal_safe,
)

from .test_inert_outputs import TRUSTED_MARKDOWN, live_markup

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "\\`<img src=x onerror=alert(1)>`",  # no code span: the backtick is escaped
    "`a` <img src=x onerror=alert(1)> `b`",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](java&#115;cript:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](<javascript:alert(1)>)",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](vbscript:msgbox(1))",
    "[x][r]\n\n[r]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "![](http://127.0.0.1:9/leak)",
    "![a](http://127.0.0.1:9/leak 'title')",
    "[![a](http://127.0.0.1:9/i)](https://example.com)",
    "<svg onload=alert(1)>",
    "<iframe src=http://127.0.0.1:9/></iframe>",
    "<style>body{background:url(http://127.0.0.1:9/)}</style>",
    "<!-- <img src=x onerror=alert(1)> -->",
    "&lt;img src=x onerror=alert(1)&gt;",
    "<div>\n\n*a* <img src=x onerror=alert(1)>\n\n</div>",
    "```\n<img src=x onerror=alert(1)>\n```\n<img src=x onerror=alert(1)>",
    "> <script>alert(1)</script>\n> - <b onclick=alert(1)>x</b>",
    "| a | b |\n|---|---|\n| `x|y` <img src=x onerror=alert(1)> | c |",
    "*<img src=x onerror=alert(1)>*",
    "[<img src=x onerror=alert(1)>](https://example.com)",
    '[x](https://example.com "<img src=x onerror=alert(1)>")',
    "<a href='javascript:alert(1)'>x</a>",
]


def assert_inert(markup: str, source: str) -> None:
    found = live_markup(markup)
    assert not found.live, (source, found.live, markup)


@pytest.mark.parametrize("source", HOSTILE)
def test_hostile_markdown_is_inert(source: str) -> None:
    assert_inert(markdown_html(source), source)
    assert_inert(TRUSTED_MARKDOWN.render(markdown_source(source)), source)
    assert_inert(TRUSTED_MARKDOWN.render(literal_markdown(source)), source)
    assert_inert(TRUSTED_MARKDOWN.render(code_span(source)), source)


def test_formatting_is_kept() -> None:
    source = "# T\n\n*a* **b** ~~c~~ `d` [e](https://example.com/e)\n\n1. f\n2. g\n\n> h"
    html = markdown_html(source)
    for tag in ("<h1>", "<em>", "<strong>", "<s>", "<code>", "<ol>", "<blockquote>"):
        assert tag in html
    assert '<a href="https://example.com/e" rel="noopener noreferrer nofollow">e</a>' in html
    assert TRUSTED_MARKDOWN.render(markdown_source(source)) == TRUSTED_MARKDOWN.render(source)


def test_dollars_are_never_math() -> None:
    assert markdown_source("It costs $5 or `$6`") == r"It costs <span>\$</span>5 or `$6`"
    assert "<span>$</span>5" in markdown_html("It costs $5")


def test_terminal_controls_are_shown() -> None:
    shown = terminal_safe("a\x1b[2Jb\x1b]52;c;ZXZpbA==\x07c\rd\u202ee\x9bf\tg\nh\u200fi")
    assert shown == "a␛[2Jb␛]52;c;ZXZpbA==␇c␍d<U+202E>e<U+009B>f\tg\nh\u200fi"


FRAGMENTS = st.sampled_from(
    [
        *("<img src=x onerror=a()>", "<script>", "<a href='javascript:x'>", "<svg onload=x>"),
        *("[", "]", "(", ")", "![", "javascript:x", "java\tscript:", "http://e.com/x", "`", "``"),
        *("*", "_", "~~", "\\", "&", "&#60;", "<", ">", "|", "-", "1.", "#", "\n", "\n\n", " "),
        *("    ", "text", "|---|", "> ", "- ", "<http://e.com>", "<javascript:x>", '"', "$"),
        *("---", "```", "~~~", "<!--", "<div>", "[x]: javascript:y", "[x]", "<?", "<!X"),
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FRAGMENTS, max_size=30).map("".join))
def test_any_mixture_is_inert(source: str) -> None:
    assert_inert(markdown_html(source), source)
    assert_inert(TRUSTED_MARKDOWN.render(markdown_source(source)), source)
    assert_inert(TRUSTED_MARKDOWN.render(literal_markdown(source)), source)

"""The fast action builder agrees with the general one on the property corpus.

:func:`~cortex_kernel.protocol._actions.fast_action` builds the common
action (strict JSON, plain attributes) and returns ``None`` for anything else;
:meth:`Parser._close_action` then asks
:func:`~cortex_kernel.protocol._actions.build_action`. Every action the fast
builder accepts must be exactly what the general one builds, with no
warning, and its id claimed the same way.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from cortex_kernel.protocol import Action, IdAllocator, Parser, _actions
from cortex_kernel.protocol import parser as parser_module

from .doc_strategies import documents, mutated_documents

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Compared:
    """Wraps fast_action: checks each of its answers against build_action."""

    def __init__(self) -> None:
        self.accepted = 0

    def __call__(
        self,
        attrs: dict[str, str],
        raw_body: str,
        body: dict[str, Any],
        open_id: str,
        in_thought: bool,
        ids: IdAllocator,
    ) -> Any:
        assert body == _actions.strict_object(raw_body)  # decoded while finding the end, or here
        before = copy.deepcopy(ids)
        fast = _actions.fast_action(attrs, raw_body, body, open_id, in_thought, ids)
        if fast is None:
            assert ids.seen == before.seen, "a refused action claimed an id"
            return None
        self.accepted += 1
        # Built without Action's __init__: every field must be set.
        assert all(hasattr(fast, field.name) for field in dataclasses.fields(Action))
        general = _actions.build_action(
            attrs, raw_body, open_id=open_id, in_thought=in_thought, ids=before
        )
        assert general.error is None and general.warnings == ()
        assert general.action == fast
        assert repr(general.action) == repr(fast)  # the same types too (an enum is no str)
        assert before.seen == ids.seen
        return fast


def _parse_comparing(monkeypatch: pytest.MonkeyPatch, text: str) -> _Compared:
    compared = _Compared()
    with monkeypatch.context() as patch:
        patch.setattr(parser_module, "fast_action", compared)
        parser = Parser()
        parser.feed(text)
        parser.close()
    return compared


@SETTINGS
@given(documents)
def test_fast_builder_equals_general_builder_on_documents(text: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _parse_comparing(monkeypatch, text)


@SETTINGS
@given(mutated_documents())
def test_fast_builder_equals_general_builder_on_broken_documents(text: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _parse_comparing(monkeypatch, text)


def test_the_comparison_sees_fast_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        '<action type="tool" id="x" mode="async" depends_on="a" output_key="k">'
        '{"name": "n", "parameters": {}}</action><action type="llm">{"prompt": "p"}</action>'
        "<action type=tool>{'name': 'n'}</action>"  # not strict JSON: general builder only
    )
    assert _parse_comparing(monkeypatch, text).accepted == 2


def test_escaped_bodies_take_the_fast_builder_unless_a_surrogate_is_lone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What models write in code and documents: \n, \", \\, \u00e9, an emoji as
    # a surrogate pair. A lone surrogate is left to the general builder,
    # which replaces it.
    bodies = [
        r'{"name": "run", "parameters": {"code": "print(\"hi\")\n", "path": "C:\\tmp"}}',
        r'{"name": "say", "parameters": {"text": "caf\u00e9 \t tab"}}',
        r'{"name": "say", "parameters": {"text": "\ud83d\ude00"}}',
        r'{"name": "say", "parameters": {"text": "\ud800 alone"}}',
    ]
    text = "".join(f'<action type="tool">{body}</action>' for body in bodies)
    assert _parse_comparing(monkeypatch, text).accepted == 3
    parser = Parser()
    parsed = [e.action for e in parser.feed(text) if e.type == "action_parsed"]
    texts = [action.parameters.get("text") for action in parsed]
    assert texts == [None, "café \t tab", "😀", "\ufffd alone"]


@pytest.mark.parametrize(("lists", "ok"), [(98, True), (99, False)])
@pytest.mark.parametrize("padding", ["", "é" * 300])
def test_a_body_nested_past_the_limit_is_an_error(lists: int, ok: bool, padding: str) -> None:
    # The body, its parameters, then the lists: 100 levels deep is the limit
    # (MAX_BODY_DEPTH), whether the body is short or long, ASCII or not.
    assert _actions.MAX_BODY_DEPTH == 100
    nested = "[" * lists + "]" * lists
    body = f'{{"name": "t", "parameters": {{"pad": "{padding}", "x": {nested}}}}}'
    events = Parser().feed(f'<action type="tool">{body}</action>')
    assert [e.type for e in events] == ["action_open", "action_parsed" if ok else "action_error"]
    if not ok:
        assert "nested more than 100 levels deep" in events[1].message  # type: ignore[union-attr]


def test_long_flat_bodies_are_actions() -> None:
    # Many items, two levels: not too deep, however the check gets there.
    bodies = [
        {"name": "t", "parameters": {"values": list(range(500))}},
        {"name": "t", "parameters": {f"k{i}": "é" * 20 for i in range(40)}},
        {"name": "t", "parameters": {"rows": [[i, i + 1] for i in range(60)]}},
    ]
    text = "".join(f'<action type="tool">{json.dumps(b)}</action>' for b in bodies)
    parsed = [e for e in Parser().feed(text) if e.type == "action_parsed"]
    assert [e.action.body for e in parsed] == bodies  # type: ignore[union-attr]

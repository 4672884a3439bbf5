"""GBNF grammars read the way llama.cpp reads them, to check one before sending it.

A grammar llama.cpp cannot parse is not always a clean ``400``: the
llama-cpp-python server (0.3.x) streams an empty ``200`` and its process
exits, taking every later request with it. So a grammar is checked here,
against a transcription of llama.cpp's parser (``src/llama-grammar.cpp``:
``parse``, ``parse_sequence``, ``handle_repetitions`` and the left-recursion
check of ``llama_grammar_init_impl``), and only a grammar that passes is ever
sent (see :mod:`cortex_kernel.llm.grammar`).

:func:`parse` returns the rules in llama.cpp's own flat form — each rule a
tuple of ``(kind, value)`` elements, alternatives separated by :data:`ALT`,
ended by :data:`END`, with every group and repetition rewritten into
synthesized rules exactly as llama.cpp does — so a matcher built on them
(the tests' recognizer) keeps the same stacks llama.cpp keeps, which is what
a grammar costs per token.

Deliberately stricter than llama.cpp in two places (a grammar that passes
here passes there): a rule defined twice is an error (llama.cpp keeps the
last), and so is a repetition bound above :data:`MAX_REPETITIONS` (newer
llama.cpp refuses those; older ones expand them into that many rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["check", "parse"]

# Element kinds, as llama.cpp numbers them (enum llama_gretype).
END: Final = 0
ALT: Final = 1
RULE_REF: Final = 2
CHAR: Final = 3
CHAR_NOT: Final = 4
CHAR_RNG_UPPER: Final = 5
CHAR_ALT: Final = 6
CHAR_ANY: Final = 7

#: The largest ``{m,n}`` bound accepted (llama.cpp's MAX_REPETITION_THRESHOLD).
MAX_REPETITIONS: Final = 2000

Element = tuple[int, int]
Rule = tuple[Element, ...]

_ESCAPES: Final = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_SIZES: Final = {"x": 2, "u": 4, "U": 8}
# The same sets of characters as llama.cpp's is_word_char and parse_space.
_NAME: Final = re.compile(r"[A-Za-z0-9-]+")
_SPACE: Final = re.compile(r"(?:[ \t]|#[^\r\n]*)*")
_SPACE_NEWLINES: Final = re.compile(r"(?:[ \t\r\n]|#[^\r\n]*)*")
_PLAIN: Final = re.compile(r'[^"\\]+')  # literal characters without an escape


class GrammarError(ValueError):
    """The grammar would not load in llama.cpp; the message says where and why."""


@dataclass(frozen=True)
class ParsedGrammar:
    """A grammar in llama.cpp's flat form.

    Attributes
    ----------
    rules
        Rule id to its elements (alternatives separated by ``ALT``, ended by ``END``).
    symbols
        Rule name to rule id, synthesized rules (``name_7``) included.
    root
        The id of ``root``.
    """

    rules: tuple[Rule, ...]
    symbols: dict[str, int]
    root: int


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


class _Parser:
    """llama_grammar_parser, on a Python string (a character is a code point)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.symbols: dict[str, int] = {}
        self.rules: list[list[Element] | None] = []
        self.defined: set[int] = set()

    # -- helpers -----------------------------------------------------------------

    def at(self, pos: int, offset: int = 0) -> str:
        """The character at ``pos + offset``, ``""`` past the end (C's NUL)."""
        i = pos + offset
        return self.src[i] if i < len(self.src) else ""

    def fail(self, what: str, pos: int) -> GrammarError:
        line = self.src.count("\n", 0, pos) + 1
        return GrammarError(f"{what} at line {line}: {self.src[pos : pos + 40]!r}")

    def space(self, pos: int, newline_ok: bool) -> int:
        pattern = _SPACE_NEWLINES if newline_ok else _SPACE
        return pattern.match(self.src, pos).end()  # type: ignore[union-attr]  # `*` matches

    def name_end(self, pos: int) -> int:
        found = _NAME.match(self.src, pos)
        if found is None:
            raise self.fail("expecting name", pos)
        return found.end()

    def char(self, pos: int) -> tuple[int, int]:
        c = self.at(pos)
        if c == "\\":
            kind = self.at(pos, 1)
            if kind in _HEX_SIZES:
                size = _HEX_SIZES[kind]
                digits = self.src[pos + 2 : pos + 2 + size]
                if len(digits) != size or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise self.fail(f"expecting {size} hex chars", pos)
                return int(digits, 16), pos + 2 + size
            if kind in _ESCAPES:
                return ord(_ESCAPES[kind]), pos + 2
            raise self.fail("unknown escape", pos)
        if c:
            return ord(c), pos + 1
        raise self.fail("unexpected end of input", pos)

    def symbol(self, name: str) -> int:
        return self.symbols.setdefault(name, len(self.symbols))

    def generated(self, base: str) -> int:
        next_id = len(self.symbols)
        self.symbols[f"{base}_{next_id}"] = next_id
        return next_id

    def add_rule(self, rule_id: int, rule: list[Element]) -> None:
        while len(self.rules) <= rule_id:
            self.rules.append(None)
        self.rules[rule_id] = rule

    # -- the grammar ---------------------------------------------------------------

    def parse(self) -> None:
        pos = self.space(0, True)
        while pos < len(self.src):
            pos = self.rule(pos)

    def rule(self, pos: int) -> int:
        end = self.name_end(pos)
        name = self.src[pos:end]
        rule_id = self.symbol(name)
        if rule_id in self.defined:
            raise self.fail(f"rule {name!r} defined twice", pos)
        self.defined.add(rule_id)
        pos = self.space(end, False)
        if self.src[pos : pos + 3] != "::=":
            raise self.fail("expecting ::=", pos)
        pos = self.alternates(self.space(pos + 3, True), name, rule_id, nested=False)
        c = self.at(pos)
        if c == "\r":
            pos += 2 if self.at(pos, 1) == "\n" else 1
        elif c == "\n":
            pos += 1
        elif c:
            raise self.fail("expecting newline or end", pos)
        return self.space(pos, True)

    def alternates(self, pos: int, name: str, rule_id: int, *, nested: bool) -> int:
        rule: list[Element] = []
        pos = self.sequence(pos, name, rule, nested)
        while self.at(pos) == "|":
            rule.append((ALT, 0))
            pos = self.space(pos + 1, True)
            pos = self.sequence(pos, name, rule, nested)
        rule.append((END, 0))
        self.add_rule(rule_id, rule)
        return pos

    def sequence(self, pos: int, name: str, rule: list[Element], nested: bool) -> int:
        last_start = len(rule)
        item_symbols = len(self.symbols)  # rules known before the last item
        while pos < len(self.src):
            c = self.src[pos]
            if c not in "*+?{":
                item_symbols = len(self.symbols)
            if c == '"':
                # Marked before the characters: an empty literal leaves
                # nothing for a following `*` to repeat (as in llama.cpp).
                last_start = len(rule)
                pos = self.space(self.literal(pos + 1, rule), nested)
            elif c == "[":
                last_start = len(rule)
                pos = self.space(self.char_class(pos + 1, rule), nested)
            elif _is_word(c):
                end = self.name_end(pos)
                last_start = len(rule)
                rule.append((RULE_REF, self.symbol(self.src[pos:end])))
                pos = self.space(end, nested)
            elif c == "(":
                sub = self.generated(name)
                pos = self.alternates(self.space(pos + 1, True), name, sub, nested=True)
                last_start = len(rule)
                rule.append((RULE_REF, sub))
                if self.at(pos) != ")":
                    raise self.fail("expecting ')'", pos)
                pos = self.space(pos + 1, nested)
            elif c == ".":
                last_start = len(rule)
                rule.append((CHAR_ANY, 0))
                pos = self.space(pos + 1, nested)
            elif c in "*+?{":
                pos, low, high = self.quantifier(pos, nested)
                self.check_size(len(self.symbols) - item_symbols, low, high, pos)
                self.repeat(rule, last_start, low, high, name, pos)
            else:
                break
        return pos

    def literal(self, pos: int, rule: list[Element]) -> int:
        while self.at(pos) != '"':
            plain = _PLAIN.match(self.src, pos)
            if plain is not None:
                rule.extend((CHAR, ord(c)) for c in plain.group())
                pos = plain.end()
                continue
            if not self.at(pos):
                raise self.fail("unexpected end of input", pos)
            value, pos = self.char(pos)
            rule.append((CHAR, value))
        return pos + 1

    def char_class(self, pos: int, rule: list[Element]) -> int:
        kind = CHAR
        if self.at(pos) == "^":
            pos += 1
            kind = CHAR_NOT
        start = len(rule)
        while self.at(pos) != "]":
            if not self.at(pos):
                raise self.fail("unexpected end of input", pos)
            value, pos = self.char(pos)
            rule.append((CHAR_ALT if len(rule) > start else kind, value))
            if self.at(pos) == "-" and self.at(pos, 1) != "]":
                if not self.at(pos, 1):
                    raise self.fail("unexpected end of input", pos)
                upper, pos = self.char(pos + 1)
                rule.append((CHAR_RNG_UPPER, upper))
        return pos + 1

    def quantifier(self, pos: int, nested: bool) -> tuple[int, int, int]:
        c = self.src[pos]
        if c != "{":
            low, high = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[c]
            return self.space(pos + 1, nested), low, high
        pos = self.space(pos + 1, nested)
        low, pos = self.integer(pos)
        pos = self.space(pos, nested)
        high = -1
        if self.at(pos) == "}":
            high = low
        elif self.at(pos) == ",":
            pos = self.space(pos + 1, nested)
            if self.at(pos).isdigit():
                high, pos = self.integer(pos)
                pos = self.space(pos, nested)
            if self.at(pos) != "}":
                raise self.fail("expecting '}'", pos)
        else:
            raise self.fail("expecting ','", pos)
        if low > MAX_REPETITIONS or high > MAX_REPETITIONS:
            raise self.fail(f"a repetition bound above {MAX_REPETITIONS}", pos)
        return self.space(pos + 1, nested), low, high

    def check_size(self, item_rules: int, low: int, high: int, pos: int) -> None:
        """Newer llama.cpp refuses a repetition that would make too many rules.

        The item's rules (at least 1) times the bound (``{m,n}``: n; ``{m,}``:
        m; ``*``, ``?``: 1) must stay below :data:`MAX_REPETITIONS`; counted
        here a little more generously than llama.cpp counts them.
        """
        bound = high if high >= 0 else max(low, 1)
        if max(item_rules, 1) * bound >= MAX_REPETITIONS:
            raise self.fail(
                f"a repetition of {max(item_rules, 1)} rule(s) {bound} times "
                f"(llama.cpp refuses {MAX_REPETITIONS} or more)",
                pos,
            )

    def integer(self, pos: int) -> tuple[int, int]:
        end = pos
        while self.at(end).isascii() and self.at(end).isdigit():
            end += 1
        if end == pos:
            raise self.fail("expecting an int", pos)
        return int(self.src[pos:end]), end

    def repeat(
        self, rule: list[Element], last_start: int, low: int, high: int, name: str, pos: int
    ) -> None:
        """llama.cpp's handle_repetitions: ``S{m,n}`` -> ``S`` m times, then n-m nested options."""
        if last_start == len(rule):
            raise self.fail("expecting preceding item to */+/?/{", pos)
        previous = rule[last_start:]
        if low == 0:
            del rule[last_start:]
        else:
            for _ in range(1, low):
                rule.extend(previous)
        last_rec = 0
        n_opt = 1 if high < 0 else high - low
        for i in range(n_opt):
            rec = list(previous)
            rec_id = self.generated(name)
            if i > 0 or high < 0:
                rec.append((RULE_REF, rec_id if high < 0 else last_rec))
            rec += [(ALT, 0), (END, 0)]
            self.add_rule(rec_id, rec)
            last_rec = rec_id
        if n_opt > 0:
            rule.append((RULE_REF, last_rec))


def parse(text: str) -> ParsedGrammar:
    """Parse ``text`` as llama.cpp would, and check that it would load.

    Parameters
    ----------
    text
        A GBNF grammar.

    Returns
    -------
    ParsedGrammar
        The rules in llama.cpp's flat form.

    Raises
    ------
    GrammarError
        A syntax error, an undefined rule, no ``root``, left recursion, or
        one of the two stricter checks (see the module's notes).
    """
    parser = _Parser(text)
    parser.parse()
    names = {rule_id: name for name, rule_id in parser.symbols.items()}
    rules: list[Rule] = []
    for rule_id, elements in enumerate(parser.rules):
        if elements is None:
            raise GrammarError(f"undefined rule identifier {names.get(rule_id, rule_id)!r}")
        rules.append(tuple(elements))
    for rule in rules:
        for kind, value in rule:
            if kind == RULE_REF and (value >= len(rules)):
                raise GrammarError(f"undefined rule identifier {names.get(value, value)!r}")
    if "root" not in parser.symbols:
        raise GrammarError("the grammar has no root rule")
    _check_left_recursion(rules, names)
    _check_empty_loops(rules, names)
    return ParsedGrammar(tuple(rules), dict(parser.symbols), parser.symbols["root"])


def check(text: str) -> str | None:
    """Why llama.cpp would refuse ``text``, or ``None`` when it would load it."""
    try:
        parse(text)
    except GrammarError as exc:
        return str(exc)
    return None


def _check_left_recursion(rules: list[Rule], names: dict[int, str]) -> None:
    """llama_grammar_detect_left_recursion over every rule, as llama_grammar_init_impl runs it."""
    count = len(rules)
    visited = [False] * count
    in_progress = [False] * count
    may_be_empty = [False] * count

    def detect(index: int) -> bool:
        if in_progress[index]:
            return True
        in_progress[index] = True
        rule = rules[index]
        at_start = True
        for kind, _ in rule:
            if kind in (END, ALT):
                if at_start:
                    may_be_empty[index] = True
                    break
                at_start = True
            else:
                at_start = False
        recurse = True
        for kind, value in rule:
            if kind == RULE_REF and recurse:
                if detect(value):
                    return True
                if not may_be_empty[value]:
                    recurse = False
            elif kind in (END, ALT):
                recurse = True
            else:
                recurse = False
        in_progress[index] = False
        visited[index] = True
        return False

    for index in range(count):
        try:
            found = not visited[index] and detect(index)
        except RecursionError:
            raise GrammarError("the grammar nests too deeply to check") from None
        if found:
            raise GrammarError(
                f"left recursion (from rule {names.get(index, index)!r}): a rule can "
                "reach itself before reading any character"
            )


def _alternatives(rule: Rule) -> list[list[Element]]:
    """The alternatives of a flat rule, their character elements whole."""
    found: list[list[Element]] = [[]]
    for element in rule:
        if element[0] == ALT:
            found.append([])
        elif element[0] != END:
            found[-1].append(element)
    return found


def _check_empty_loops(rules: list[Rule], names: dict[int, str]) -> None:
    """Left recursion through rules that may match nothing (stricter than llama.cpp).

    llama.cpp's check only counts a rule as possibly empty when one of its
    alternatives is literally empty, so ``x*`` with ``x ::= "a"?`` loads,
    and its sampler then recurses without end. Here emptiness is computed
    properly (a fixed point) and any such loop is refused.
    """
    shapes = [_alternatives(rule) for rule in rules]
    # Only alternatives made of rule references alone can match nothing.
    candidates = [
        (index, [[value for _, value in alt] for alt in alts if all(k == RULE_REF for k, _ in alt)])
        for index, alts in enumerate(shapes)
    ]
    candidates = [(index, alts) for index, alts in candidates if alts]
    nullable = [False] * len(rules)
    changed = True
    while changed:
        changed = False
        for index, references in candidates:
            if not nullable[index] and any(
                all(nullable[value] for value in refs) for refs in references
            ):
                nullable[index] = changed = True
    # Edges to the rules each rule may start with (after only empty ones).
    edges: list[set[int]] = []
    for alternatives in shapes:
        targets: set[int] = set()
        for alternative in alternatives:
            for kind, value in alternative:
                if kind != RULE_REF:
                    break
                targets.add(value)
                if not nullable[value]:
                    break
        edges.append(targets)
    state = [0] * len(rules)  # 0 unseen, 1 on the path, 2 done
    for start in range(len(rules)):
        if state[start]:
            continue
        path: list[tuple[int, list[int]]] = [(start, sorted(edges[start]))]
        state[start] = 1
        while path:
            node, todo = path[-1]
            if not todo:
                state[node] = 2
                path.pop()
                continue
            nxt = todo.pop()
            if state[nxt] == 1:
                raise GrammarError(
                    f"left recursion: rule {names.get(nxt, nxt)!r} can reach itself "
                    "before reading any character"
                )
            if state[nxt] == 0:
                state[nxt] = 1
                path.append((nxt, sorted(edges[nxt])))

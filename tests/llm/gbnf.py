"""A GBNF recognizer that keeps llama.cpp's stacks, and a decoder constrained by it.

Built on :func:`cortex_kernel.llm.gbnf.parse` (llama.cpp's parser,
transcribed), :class:`Matcher` advances the same pushdown stacks as
``llama_grammar_accept`` / ``llama_grammar_advance_stack``: a character is
allowed when some stack's top accepts it, the text may end when some stack
is empty. ``stack_count`` is therefore what llama.cpp checks every candidate
token against at that point: the cost of the grammar per token.

:func:`constrained_text` is a stand-in for a model under grammar-constrained
decoding: it writes what it wants to write while the grammar allows it, and
each character the grammar refuses is masked, and once its plan is used up
it finishes with the shortest text the grammar accepts (a real sampler
picks the likeliest allowed token; either way the output is in the
grammar's language). :func:`random_text` walks the
grammar at random, for property tests.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Final

from cortex_kernel.llm.gbnf import (
    ALT,
    CHAR,
    CHAR_ALT,
    CHAR_ANY,
    CHAR_RNG_UPPER,
    END,
    RULE_REF,
    ParsedGrammar,
    parse,
)

__all__ = ["Matcher", "accepts", "constrained_text", "random_text"]

Position = tuple[int, int]
Stack = tuple[Position, ...]

#: Characters tried where a class is negated or ``.`` (free text, JSON strings).
PALETTE: Final = "ab zAZ_09.,-:/$\"'\\\n<>{}[]é"
_INF: Final = float("inf")


class _CharSet:
    """The character element at one position: what it matches and where it ends."""

    __slots__ = ("any", "next", "positive", "ranges")

    def __init__(self, rule: tuple[tuple[int, int], ...], i: int) -> None:
        self.positive = rule[i][0] in (CHAR, CHAR_ANY)
        self.any = False
        self.ranges: list[tuple[int, int]] = []
        while True:
            kind, value = rule[i]
            if rule[i + 1][0] == CHAR_RNG_UPPER:
                self.ranges.append((value, rule[i + 1][1]))
                i += 2
            elif kind == CHAR_ANY:
                self.any = True
                i += 1
            else:
                self.ranges.append((value, value))
                i += 1
            if rule[i][0] != CHAR_ALT:
                break
        self.next = i

    def matches(self, code: int) -> bool:
        found = self.any or any(low <= code <= high for low, high in self.ranges)
        return found == self.positive


class Matcher:
    """The stacks of llama.cpp's grammar sampler, fed one character at a time.

    Parameters
    ----------
    grammar
        GBNF text or an already parsed grammar.
    """

    def __init__(self, grammar: str | ParsedGrammar) -> None:
        self.grammar = parse(grammar) if isinstance(grammar, str) else grammar
        self.rules = self.grammar.rules
        self._starts = [self._alternative_starts(rule) for rule in self.rules]
        self._sets: dict[Position, _CharSet] = {}
        self._advanced: dict[Stack, frozenset[Stack]] = {}
        self._min_rule: list[float] | None = None
        self._suffix: dict[Position, float] = {}
        found: set[Stack] = set()
        root = self.grammar.root
        for start in self._starts[root]:
            self._advance(self._push((), root, start), found)
        self.stacks: frozenset[Stack] = frozenset(found)

    @staticmethod
    def _alternative_starts(rule: tuple[tuple[int, int], ...]) -> list[int]:
        starts = [0]
        starts += [i + 1 for i, (kind, _) in enumerate(rule) if kind == ALT]
        return starts

    def _push(self, stack: Stack, rule_id: int, index: int) -> Stack:
        if self.rules[rule_id][index][0] in (END, ALT):
            return stack
        return (*stack, (rule_id, index))

    def _advance(self, stack: Stack, out: set[Stack]) -> None:
        cached = self._advanced.get(stack)
        if cached is not None:
            out.update(cached)
            return
        found: set[Stack] = set()
        if not stack:
            found.add(stack)
        else:
            rule_id, index = stack[-1]
            kind, value = self.rules[rule_id][index]
            if kind == RULE_REF:
                base = self._push(stack[:-1], rule_id, index + 1)
                for start in self._starts[value]:
                    self._advance(self._push(base, value, start), found)
            else:
                found.add(stack)
        self._advanced[stack] = frozenset(found)
        out.update(found)

    def _set(self, position: Position) -> _CharSet:
        char_set = self._sets.get(position)
        if char_set is None:
            char_set = self._sets[position] = _CharSet(self.rules[position[0]], position[1])
        return char_set

    # -- feeding -------------------------------------------------------------------

    def copy(self) -> Matcher:
        """A matcher in the same state (sharing the caches)."""
        twin = object.__new__(Matcher)
        twin.__dict__.update(self.__dict__)
        return twin

    def after(self, char: str) -> frozenset[Stack]:
        """The stacks after ``char`` (empty: the grammar refuses it)."""
        code = ord(char)
        found: set[Stack] = set()
        for stack in self.stacks:
            if not stack:
                continue
            rule_id, index = stack[-1]
            char_set = self._set((rule_id, index))
            if char_set.matches(code):
                self._advance(self._push(stack[:-1], rule_id, char_set.next), found)
        return frozenset(found)

    def allows(self, char: str) -> bool:
        """Whether ``char`` may come next."""
        return bool(self.after(char))

    def feed(self, text: str) -> bool:
        """Accept ``text``; ``False`` (and the state unchanged) if the grammar refuses it."""
        stacks = self.stacks
        for char in text:
            self.stacks = self.after(char)
            if not self.stacks:
                self.stacks = stacks
                return False
        return True

    @property
    def complete(self) -> bool:
        """Whether the text so far is a whole sentence of the grammar (EOS allowed)."""
        return () in self.stacks

    @property
    def stack_count(self) -> int:
        """Stacks alive: what llama.cpp checks each candidate token against."""
        return len(self.stacks)

    # -- generating ----------------------------------------------------------------

    def candidates(self, palette: str = PALETTE, *, named: bool = False) -> list[str]:
        """Characters that may come next: every one a class names, palette ones for the rest.

        ``named``: only those a literal or a positive class names (the
        grammar's structure, not free text).
        """
        found: set[str] = set()
        for stack in self.stacks:
            if not stack:
                continue
            char_set = self._set(stack[-1])
            if not char_set.positive or char_set.any:
                if not named:
                    found.update(c for c in palette if char_set.matches(ord(c)))
                continue
            for low, high in char_set.ranges:
                if high - low < 64:
                    found.update(chr(code) for code in range(low, high + 1))
                else:
                    found.update((chr(low), chr(high)))
                    found.update(c for c in palette if low <= ord(c) <= high)
        return sorted(c for c in found if self.allows(c))

    def to_end(self) -> float:
        """The fewest characters that complete the text (0 when it may end now)."""
        return min((self._stack_min(stack) for stack in self.stacks), default=_INF)

    def _stack_min(self, stack: Stack) -> float:
        return sum(self._suffix_min(position) for position in stack)

    def _suffix_min(self, position: Position) -> float:
        known = self._suffix.get(position)
        if known is not None:
            return known
        total = self._sequence_min(position, self._rule_min())
        self._suffix[position] = total
        return total

    def _sequence_min(self, position: Position, lengths: list[float]) -> float:
        """The fewest characters from ``position`` to the end of its alternative.

        ``lengths`` are the shortest sentences of the rules it refers to.
        """
        rule_id, index = position
        rule = self.rules[rule_id]
        total = 0.0
        while rule[index][0] not in (END, ALT):
            kind, value = rule[index]
            if kind == RULE_REF:
                total += lengths[value]
                index += 1
            else:
                total += 1
                index = self._set((rule_id, index)).next
        return total

    def _rule_min(self) -> list[float]:
        """Each rule's shortest sentence, by fixed-point iteration."""
        if self._min_rule is not None:
            return self._min_rule
        lengths = [_INF] * len(self.rules)
        changed = True
        while changed:
            changed = False
            for rule_id in range(len(self.rules)):
                best = lengths[rule_id]
                for start in self._starts[rule_id]:
                    best = min(best, self._sequence_min((rule_id, start), lengths))
                if best < lengths[rule_id]:
                    lengths[rule_id] = best
                    changed = True
        self._min_rule = lengths
        return lengths

    def finish_char(self, palette: str = PALETTE) -> str | None:
        """The next character on a shortest way to the end, ``None`` when it may end now."""
        if self.complete:
            return None
        best: tuple[float, str] | None = None
        for char in self.candidates(palette):
            cost = min(self._stack_min(stack) for stack in self.after(char))
            if best is None or cost < best[0]:
                best = (cost, char)
        if best is None:
            raise AssertionError("the grammar allows no character and cannot end here")
        return best[1]


def accepts(grammar: str | ParsedGrammar | Matcher, text: str) -> bool:
    """Whether ``text`` is a whole sentence of ``grammar``."""
    matcher = grammar.copy() if isinstance(grammar, Matcher) else Matcher(grammar)
    return matcher.feed(text) and matcher.complete


def _finish(matcher: Matcher, out: list[str], palette: str, limit: int) -> str:
    while len(out) < limit:
        char = matcher.finish_char(palette)
        if char is None:
            return "".join(out)
        matcher.stacks = matcher.after(char)
        out.append(char)
    raise AssertionError(f"no end within {limit} characters: {''.join(out)[-200:]!r}")


def constrained_text(grammar: str | Matcher, wanted: str, *, limit: int = 20_000) -> str:
    """What a model that wants to write ``wanted`` writes under ``grammar``.

    Each character of ``wanted`` the grammar allows is written, each one it
    refuses is masked (the model goes on with the rest of its plan); when
    ``wanted`` is used up, the text is finished the shortest way the
    grammar allows.
    """
    matcher = grammar.copy() if isinstance(grammar, Matcher) else Matcher(grammar)
    out: list[str] = []
    for char in wanted:
        following = matcher.after(char)
        if following:
            matcher.stacks = following
            out.append(char)
    return _finish(matcher, out, PALETTE, limit)


def random_text(
    grammar: str | Matcher,
    rng: random.Random,
    *,
    explore: int = 300,
    end_chance: float = 0.2,
    structure_chance: float = 0.3,
    palette: str = PALETTE,
    limit: int = 50_000,
) -> str:
    """A random sentence of ``grammar``: ``explore`` random steps, then the shortest end.

    At each step, with ``structure_chance``, a character the grammar names
    (a tag, a key, a name) is preferred to free text, so elements open often.
    """
    matcher = grammar.copy() if isinstance(grammar, Matcher) else Matcher(grammar)
    out: list[str] = []
    for _ in range(explore):
        named = matcher.candidates(palette, named=True) if rng.random() < structure_chance else []
        options = named or matcher.candidates(palette)
        if matcher.complete and (not options or rng.random() < end_chance):
            return "".join(out)
        if not options:
            break
        char = rng.choice(options)
        matcher.stacks = matcher.after(char)
        out.append(char)
    return _finish(matcher, out, palette, limit)


def stack_counts(grammar: str | Matcher, text: str) -> Iterable[int]:
    """The number of stacks before each character of ``text`` (``text`` must be accepted)."""
    matcher = grammar.copy() if isinstance(grammar, Matcher) else Matcher(grammar)
    for at, char in enumerate(text):
        yield matcher.stack_count
        if not matcher.feed(char):
            raise AssertionError(f"refused {char!r} after {text[:at]!r}")

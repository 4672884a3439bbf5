"""Grounded answers: which figures of a final answer the run's data backs.

A small model asked for the total of four looked-up populations can answer a
sum of its own invention, and the run still ends ``ok``. The runtime knows
every value a tool, a code run or the user provided; this module reads the
figures of an answer (:func:`figures`), looks each one up among those values
(:class:`Evidence`, :func:`check`) and marks the ones found nowhere
(:func:`mark`). It is a "not found anywhere" signal, not a proof: a figure
that matches is only *consistent* with the data.

Reading figures
---------------
Answers are read in English convention, with other groupings recognised
where they are not ambiguous:

- ``7,174,195`` and ``1,234.5``; ``7 174 195`` (space, no-break or thin
  space); ``7.174.195`` and ``1.234,5`` (dot groups: two or more, or with a
  decimal comma). ``1,234`` and ``1.234`` are both readings (1234 and 1.234),
  and so is ``1008,156`` (1008.156, or 1008156 with its separator misplaced);
  ``3,5`` is the decimal 3.5 or the two numbers 3 and 5 (either grounds it).
- ``12%``, ``12 percent``, ``5 pp`` (12 and 0.12 both match); ``$5``,
  ``€3.2m``, ``5k``, ``2bn``, ``1.2 million`` (the scaled and the bare
  number both match: a tool may return 1.2 in millions); ``-5``, ``−5``.

Not figures: numbers in fenced code blocks and in inline code (unless the
code span is a lone number, ``` `3209695` ```), in URLs and e-mail
addresses, list markers (``1.``), footnotes (``[1]``), ordinals (``3rd``),
dates and times (``2024-05-01``, ``March 5, 2024``, ``14:30``), a bare
year (a four-digit integer from 1900 to 2100 with no sign, separator,
decimals, unit or currency: ``in 2024`` is far likelier a year than a
count), names (``GPT-4``, ``H2O``, ``Q3``, ``4x4``) and labels (``step 1``,
``table 2``, ``top 10``, ``Python 3.11``). Number words (``four``) are not
read.

Matching
--------
A figure matches a value when it equals it rounded to the figure's shown
precision (``3.21 million`` is 3,205,000 to 3,215,000; ``33.3%`` matches
0.3333). An integer ending in three or more zeros is read as rounded to its
last non-zero digit, to no fewer than two significant digits (``3,200,000``
is 3,150,000 to 3,250,000). Signs are not compared: prose says "a loss of 5"
of a -5 as often as it writes -5.

A figure is also grounded by a simple derivation (the search is bounded):

- the sum, mean, min and max of every collection the evidence holds (a
  list's numbers, a dict's numeric values, a key across a list of records,
  a DataFrame's column and its sums and means per group of a
  low-cardinality column, a numpy array as a whole), its length and, for
  one of up to :data:`SHARES_UP_TO` numbers, each number's share of its
  total (``Bude 2,250 (47.6%)``);
- between *operands*: the sum, difference, product, ratio and relative
  change of two; and, taking at most one number from each value added, the
  sum, the mean and the share of a sum (``x`` as a fraction of it) of two
  to :data:`MAX_TERMS` numbers (four separate look-ups added up).

The operands of each value added are its first :data:`OPERANDS_PER_VALUE`
numbers and its first :data:`TOTALS_PER_VALUE` collection totals; table
and array cells are not operands, only their totals are: derived from every
cell of a table, almost any figure would be found (sums of a few small
numbers reach every integer nearby). Operands are kept in the order
evidence is added, up to :data:`MAX_OPERANDS`; sums across values are
taken from the first :data:`SUBSET_VALUES` values, their first three
operands each, up to :data:`MAX_SUMS` sums. Add the run's own results first.

Figures of the answer itself that were found are operands too: the sum,
difference, product, ratio and relative change of two of them (``North 55,
South 50, 105 together``; percentages are no operands), and, when the answer
says ``double``, ``twice``, ``triple``, ``half``…, that multiple of one of them
or of any value (``twice North's 55 is 110``).

The derivations still make the check permissive: a false "unverified" on a
correct answer would cost the reader's trust in the mark.

Counts
------
A small whole number is nearly always *some* cell, length or difference, so
an invented count of what the data labels would pass. A count up to
:data:`COUNTS_UP_TO` of a noun that names a label column or an index the
run saw (``region``: a DataFrame's or a list of records' text column, a
Series' or grouped result's index; in printed text, a pandas repr's index
name, a text column of a DataFrame printed whole, a described column, a
named ``Index``; plurals compared by stem) is checked as a count when the
answer says how many there are (``there are 3 regions``, ``the data has 3
regions``, ``all 3 regions``, ``3 distinct regions``, ``3 regions in all``):
it must be a count of that noun the run saw (distinct labels, a repr's rows
or its ``Length``, ``regions: 4`` or ``4 regions`` in a result's text,
``{"regions": 4}``), a whole result (``4``, a printed line holding only
``4``) or the length of a printed list or set of labels. A frame printed
cut short shows labels, not their count; a count of how many of them do
something (``3 regions sold more than 40``, ``there are 3 regions with…``)
is checked as any figure: the run may have counted without printing it.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
import sys
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from ..exceptions import VariableReferenceError
from ..safejson import safe_str
from .references import find_references, resolve_path

__all__ = ["Evidence", "GroundingReport", "check", "figures", "mark", "marked_answer"]

#: What :func:`mark` puts after an unverified figure (plain markdown: emphasis).
MARK = " *(unverified)*"

#: Numbers taken as operands of derivations from each value added (not table cells).
OPERANDS_PER_VALUE = 4
#: Collection totals taken as operands from each value added (shares of a total).
TOTALS_PER_VALUE = 4
#: Operands in all (pairwise derivations: sum, difference, product, ratio, change).
MAX_OPERANDS = 64
#: The first values added whose operands are summed across values.
SUBSET_VALUES = 12
#: The most numbers a sum or mean across values may have.
MAX_TERMS = 5
#: The most sums across values computed.
MAX_SUMS = 200_000
#: Collections up to this size also give each number's share of their total.
SHARES_UP_TO = 100
#: Counts of things the data names ("4 regions") up to this are checked as counts.
COUNTS_UP_TO = 100

_CURRENCY = "$€£¥₹"
_SIGNS = "-−+"
_GROUP_SPACES = " \u00a0\u202f\u2009"
_NO_SPACES = str.maketrans("", "", _GROUP_SPACES)
# A digit run with dots or commas inside, or groups of three set off by spaces.
_TOKEN = re.compile(r"\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+(?:[.,]\d+)?(?!\d)|\d(?:[\d.,]*\d)?")
# The numbers of a token read as a list ("3,5", "95 100", "1,2,3").
_PIECE = re.compile(r"\d+(?:\.\d+)?")
_ENGLISH = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.(\d+))?")
_EUROPEAN = re.compile(r"\d{1,3}(?:\.\d{3})+(?:,(\d+))?")
_DECIMAL = re.compile(r"\d+\.(\d+)")
_DECIMAL_COMMA = re.compile(r"\d+,(\d+)")
_SCALES = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6}
_SCALES |= {"b": 1e9, "bn": 1e9, "billion": 1e9, "t": 1e12, "tn": 1e12, "trillion": 1e12}
_SUFFIX = re.compile(
    r"(?P<pct>\s?%|\s?(?i:percent|per\s?cent|pct|percentage\s+points?|pp)\b)"
    r"|(?P<scale>k|K|mn|m|M|bn|b|B|tn|T)(?![A-Za-z0-9_])"
    r"|\s(?P<word>(?i:thousand|million|billion|trillion|mn|bn))s?\b"
)
# A currency sign after a figure; never `$`, which opens the next price ("5 $10").
_CURRENCY_AFTER = re.compile(r"\s?([€£¥₹])(?!\d)")
_ORDINAL = re.compile(r"(?:st|nd|rd|th)(?![A-Za-z])")
_NAME_AFTER = re.compile(r"[A-Za-z_]+\d")
_LABEL = re.compile(
    r"(?i)(?<![\w.])(?:steps?|tables?|fig(?:ure)?s?\.?|rows?|columns?|col\.|pages?|p\.|pp\."
    r"|items?|lines?|sections?|§|chapters?|parts?|options?|cases?|examples?|versions?|python"
    r"|top|rank|no\.|nr\.|numbers?|id|questions?|tasks?|phases?|stages?|levels?|rounds?"
    r"|weeks?|days?|appendix|slides?|cells?|issues?|pr)\s*$"
)

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?!\d)(?:st|nd|rd|th)?"
# Spans whose numbers are not claims (see the module docstring).
_NOT_CLAIMS = [
    re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]{0,3}\1[ \t]*$|\Z)", re.M | re.S),
    re.compile(r"(?:https?|ftp)://[^\s<>()\[\]]+|www\.[^\s<>()\[\]]+|\]\([^)]*\)|<[^>\s]+>"),
    re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+|⟨[^⟩\n]*⟩"),
    re.compile(
        r"(?<!\d)\d{4}-\d{1,2}(?:-\d{1,2})?(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?!\d)"
        r"|(?<![\d.])\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}(?!\d)|(?<!\d)\d{4}/\d{1,2}/\d{1,2}(?!\d)"
    ),
    re.compile(
        rf"\b{_MONTH}\s+{_DAY}(?:,?\s+\d{{4}})?|(?<!\d){_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"
        rf"|\b{_MONTH},?\s+\d{{4}}(?!\d)"
    ),
    re.compile(
        r"(?<!\d)\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[AaPp]\.?[Mm]\.?)?"
        r"|(?<!\d)\d{1,2}\s?[ap]\.?m\.?(?![A-Za-z])"
    ),
    re.compile(r"^[ \t]*(?:>[ \t]*)*(?:#{1,6}[ \t]+)?\d{1,9}(?:[.)]|\\\.)(?=[ \t]|$)", re.M),
]
_INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_LONE_FIGURE = re.compile(
    rf"[{_SIGNS}]?[{_CURRENCY}]?\d[\d.,{_GROUP_SPACES}]*(?:\s?%|[kKmMbBT]|mn|bn|tn)?[{_CURRENCY}]?"
)
# Where a mark goes: past letters glued to the figure and a closing delimiter.
_MARK_AFTER = re.compile(r"[A-Za-z]*(?:(?:\*{1,3}|_{1,3}|`+|~~)(?!\w))?")

# What a count counts: the word after it ("4 regions", "4 distinct regions").
_COUNT_NOUN = re.compile(r"[ \t]+((?i:distinct|unique|different|separate)[ \t]+)?([A-Za-z]+)")
# How an answer says how many there are, not how many of them do something
# ("there are 3 regions", "all 3 regions"; not "3 regions sold more than 40").
_TOTAL_BEFORE = re.compile(
    r"(?i)(?:\bthere\s+(?:are|were|is)|\ba\s+total\s+of|\ball|\bacross|\b(?:of|among)\s+the"
    r"|\b(?:data|dataset|table|frame|dataframe|df|file|sheet|list|it)\s+"
    r"(?:has|have|had|contains?|covers?|spans?|includes?|lists?|holds?))"
    r"\s+(?:(?:only|just|exactly)\s+)?$"
)
_TOTAL_AFTER = re.compile(r"(?i)[ \t]+(?:in\s+total|in\s+all|altogether|overall)\b")
# A count narrowed after its noun ("there are 3 regions with more than 40 units"),
# except to the whole data ("in the data", "in all").
_NARROWED = re.compile(
    r"(?i)[ \t]+(?:in|with|that|which|who|where|whose|from|for|above|below|over|under|than"
    r"|at|on|per|having|sold|had|have|has|exceed\w*|out)\b"
    r"(?![ \t]+(?:total|all|the\s+(?:data|dataset|table|frame|dataframe|df|file|sheet)\b))"
)
# "regions: 4", "n_regions = 4" in a result's text. A name starts a word: tried
# from inside a long run of letters, every start would rescan it (quadratic).
_NAMED_NUMBER = re.compile(r"(?<![A-Za-z_])([A-Za-z][A-Za-z_]*)[ \t]*[:=][ \t]*(\d{1,9})(?![\d.,])")
# A line holding only an integer: a printed count (`print(df.region.nunique())`).
_LONE_INTEGER = re.compile(r"^[ \t]*(\d{1,9})[ \t]*$", re.M)
# A pandas repr (printed Series or grouped frame): its index name alone on a line,
# then one row per label ending in a value, then a Series' footer.
_INDEX_NAME = re.compile(r"([A-Za-z_]\w*)[ \t]*")
_REPR_ROW = re.compile(r"\S.*?\s(?:-?[\d.,]+(?:e[+-]?\d+)?|NaN|<NA>|None|True|False)", re.I)
_REPR_FOOTER = re.compile(r"(?:Name: .*|dtype: \w+|Length: \d+.*)")
_REPR_LENGTH = re.compile(r"Length: (\d+)")
# A printed DataFrame: a header of column names, rows of an index and cells, all
# set apart by two or more spaces; one cut short ends with "[N rows x M columns]".
_GAP = re.compile(r"\s{2,}")
_CUT_FRAME = re.compile(r"^\[\d+ rows x \d+ columns\]$", re.M)
_NUMERIC_CELL = re.compile(r"-?[\d.,]+(?:e[+-]?\d+)?%?|NaN|<NA>|None|NaT|True|False", re.I)
# A list or set of labels: ['North' 'South'], {'North', 'South'}, Index([...], name='region').
_LABEL_LIST = re.compile(
    r"[\[{]((?:'[^'\n]*'|\"[^\"\n]*\")(?:,?\s*(?:'[^'\n]*'|\"[^\"\n]*\"))*)[\]}]"
    r"(?:,\s*dtype='?\w+'?(?:,\s*name='(\w+)')?\))?"
)
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
# A text column described (`df.region.describe()`): "unique  4" above "Name: region".
_DESCRIBED = re.compile(r"^unique\s+(\d+)\s*\n(?:.*\n){0,3}?Name: (\w+),", re.M)
# Words that say what a count is, not what it counts ("n_regions", "region_count").
_NOT_NOUNS = frozenset(
    {"n", "nr", "no", "num", "number", "count", "total", "of", "unique", "distinct", "nunique"}
)
# Words that multiply a figure of the answer or a value: "twice that", "half of it".
_FACTORS = [
    (re.compile(r"(?i)\b(?:doubled?|doubles|twice|two times)\b"), 2.0),
    (re.compile(r"(?i)\b(?:tripled?|triples|thrice|three times)\b"), 3.0),
    (re.compile(r"(?i)\b(?:quadrupled?|quadruples|four times)\b"), 4.0),
    (re.compile(r"(?i)\b(?:half|halved|halves)\b"), 0.5),
]


@dataclass(frozen=True, slots=True)
class Figure:
    """A numeric claim in an answer.

    Attributes
    ----------
    text
        As written, with its sign, currency, scale or percent sign.
    start, end
        Its span in the text it was read from.
    value
        The primary reading, signed and scaled (33.3 for ``33.3%``, 3.21e6
        for ``3.21 million``).
    percent
        Written as a percentage.
    currency
        The currency symbol written with it, or ``""``.
    readings
        Every ``(value, tolerance)`` it may mean, unsigned: the values a
        matching number may be within ``tolerance`` of.
    splittable
        It may also be a list of numbers (``3,5``, ``95 100``).
    """

    text: str
    start: int
    end: int
    value: float
    percent: bool = False
    currency: str = ""
    readings: tuple[tuple[float, float], ...] = ()
    splittable: bool = field(default=False, repr=False)


@dataclass(frozen=True, slots=True)
class CheckedFigure:
    """A figure and what :func:`check` found for it.

    Attributes
    ----------
    figure
        The figure.
    grounded
        A number in the evidence, or a derivation of some, matches it.
    how
        ``value``, ``sum of 2``, ``difference``, ``product``, ``ratio``,
        ``relative change``, ``sum of N``, ``mean of N``, ``share of a sum
        of N``, ``separate numbers``, ``count of <noun>``, one of the
        pairwise operations ``of the answer's figures`` or ``K times a
        value``; ``""`` when unverified.
    source
        Where a matching value came from (the ``source`` given to
        :meth:`Evidence.add`), ``""`` for a derivation.
    """

    figure: Figure
    grounded: bool
    how: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class GroundingReport:
    """What :func:`check` found: every figure, and whether data was looked at.

    Attributes
    ----------
    figures
        Every figure of the answer, in order, with what was found for it.
    no_data_looked_at
        The answer states figures, and the run (with the conversation before
        it) read no data at all: no result, no variable. Set when a figure
        is found nowhere, or when the run's lookups all failed and a figure
        is not the user's own (one that then matches a feed's row count is
        a coincidence, not a result).
    evidence_capped
        Only part of the evidence was read (:attr:`Evidence.notes` says which).
    notes
        The evidence's notes on what it left out.
    """

    figures: tuple[CheckedFigure, ...]
    no_data_looked_at: bool = False
    evidence_capped: bool = False
    notes: tuple[str, ...] = ()

    @property
    def unverified(self) -> tuple[Figure, ...]:
        """The figures found in no evidence, in order."""
        return tuple(c.figure for c in self.figures if not c.grounded)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe summary: counts, the unverified figures and their spans."""
        unverified = self.unverified
        return {
            "figures": len(self.figures),
            "grounded": len(self.figures) - len(unverified),
            "unverified": len(unverified),
            "unverified_figures": [
                {"text": f.text, "start": f.start, "end": f.end, "value": f.value}
                for f in unverified
            ],
            "no_data_looked_at": self.no_data_looked_at,
            "evidence_capped": self.evidence_capped,
            "notes": list(self.notes),
        }

    def summary(self, *, shown: int = 6) -> str:
        """One line for the view, or ``""`` when every figure was found.

        Parameters
        ----------
        shown
            How many unverified figures to name; the rest become ``…``.
        """
        unverified = self.unverified
        if not unverified:
            if self.no_data_looked_at:
                return "no data was looked at (every lookup failed): its figures were not computed"
            return ""
        noun = "figure" if len(unverified) == 1 else "figures"
        line = f"{len(unverified)} {noun} not found in any result"
        if self.no_data_looked_at:
            line += " (no data was looked at)"
        elif self.evidence_capped:
            line += " (only part of the data was read)"
        names = [f.text for f in unverified[:shown]]
        if len(unverified) > shown:
            names.append("…")
        return f"{line}: {'; '.join(names)}"


# -- reading figures ---------------------------------------------------------


def _unit(digits: str, decimals: int) -> float:
    """The step of the last digit shown (the rounded-integer rule: module docstring)."""
    if decimals:
        return 10.0**-decimals
    zeros = len(digits) - len(digits.rstrip("0"))
    if len(digits) >= 4 and zeros >= 3:
        return 10.0 ** min(zeros, len(digits) - 2)
    return 1.0


def _candidates(token: str) -> tuple[list[tuple[float, float]], bool] | None:
    """The ``(mantissa, unit)`` readings of a digit token and whether it may be a list.

    ``None`` for a token that is no single number (``1,2,3``, ``1.2.3``).
    """
    if any(c in _GROUP_SPACES for c in token):
        digits, _, frac = token.translate(_NO_SPACES).replace(",", ".").partition(".")
        return [(float(f"{digits}.{frac}" if frac else digits), _unit(digits, len(frac)))], True
    if token.isdigit():
        return [(float(token), _unit(token, 0))], False
    if match := _ENGLISH.fullmatch(token):
        digits = token.split(".")[0].replace(",", "")
        frac = match.group(1) or ""
        out = [(float(f"{digits}.{frac}" if frac else digits), _unit(digits, len(frac)))]
        if not frac and token.count(",") == 1:
            out.append((float(token.replace(",", ".")), 10.0**-3))
        return out, False
    if match := _EUROPEAN.fullmatch(token):
        digits = token.split(",")[0].replace(".", "")
        frac = match.group(1) or ""
        whole = [(float(f"{digits}.{frac}" if frac else digits), _unit(digits, len(frac)))]
        if frac or token.count(".") >= 2:
            return whole, False
        return [(float(token), 10.0**-3), *whole], False
    if match := _DECIMAL.fullmatch(token):
        return [(float(token), _unit("", len(match.group(1))))], False
    if match := _DECIMAL_COMMA.fullmatch(token):
        out = [(float(token.replace(",", ".")), _unit("", len(match.group(1))))]
        if len(match.group(1)) == 3:
            # "1008,156": the thousands separator misplaced (Qwen2.5-Coder-1.5B
            # writing 1008156); read as that whole number too.
            digits = token.replace(",", "")
            out.append((float(digits), _unit(digits, 0)))
        return out, True
    return None


def _readings(
    candidates: list[tuple[float, float]], *, percent: bool, scale: float
) -> tuple[tuple[float, float], ...]:
    """``(value, tolerance)`` of each candidate: as a percentage and a fraction, scaled and bare."""
    out: list[tuple[float, float]] = []
    for mantissa, unit in candidates:
        half = unit / 2
        if percent:
            out += [(mantissa, half), (mantissa / 100, half / 100)]
        elif scale != 1:
            out += [(mantissa * scale, half * scale), (mantissa, half)]
        else:
            out.append((mantissa, half))
    return tuple((v, t) for v, t in out if math.isfinite(v))


def _prefix(text: str, start: int) -> tuple[int, str, int]:
    """Where a figure starts once its currency and sign are taken: ``(start, currency, sign)``."""
    currency, sign, i = "", 0, start
    for _ in range(2):
        before = text[i - 1] if i > 0 else ""
        if before and before in _CURRENCY and not currency:
            currency, i = before, i - 1
        elif before and before in _SIGNS and not sign:
            # A sign only where no word or number ends right before it ("3-5", "COVID-19").
            ahead = text[i - 2] if i > 1 else " "
            if ahead.isalnum() or ahead in ")]_":
                break
            sign, i = (1 if before == "+" else -1), i - 1
        else:
            break
    return i, currency, sign or 1


def _suffix(text: str, end: int) -> tuple[int, bool, float, str]:
    """Where a figure ends once its scale, percent and currency are taken."""
    percent, scale, currency = False, 1.0, ""
    match = _SUFFIX.match(text, end)
    if match:
        end = match.end()
        if match.group("pct"):
            percent = True
        else:
            word = (match.group("scale") or match.group("word") or "").lower()
            scale = _SCALES[word]
    after = _CURRENCY_AFTER.match(text, end)
    if after:
        currency, end = after.group(1), after.end()
    return end, percent, scale, currency


def _not_a_claim(text: str, start: int, end: int, token: str) -> bool:
    """The context of a digit token says it is a name, label, ordinal or marker."""
    before = text[start - 1] if start > 0 else " "
    if before.isalpha() or before in "_#@":
        return True  # H2O, Q3, v2, #3
    if before in "-‐/." and start > 1 and text[start - 2].isalpha():
        return True  # COVID-19, GPT-4
    if before in "[^" and text[end : end + 1] == "]":
        return True  # a footnote: [1], [^1]
    if _ORDINAL.match(text, end) or _NAME_AFTER.match(text, end):
        return True  # 3rd, 4x4
    if token.count(".") >= 2 and "," not in token and not _EUROPEAN.fullmatch(token):
        return True  # a version or an address: 1.2.3, 10.0.0.1
    return _LABEL.search(text, max(0, start - 16), start) is not None


def _bare_year(token: str) -> bool:
    """``2024``: far likelier a year than a count in an answer."""
    return token.isdigit() and len(token) == 4 and 1900 <= int(token) <= 2100


def _stem(word: str) -> str:
    """A word in lower case without its plural ending: both sides of a count compare stems."""
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _nouns(name: Any) -> list[str]:
    """The stems of the words of a column, index or key name (``n_regions``: ``region``)."""
    if not isinstance(name, str):
        return []
    stems = (_stem(word) for word in re.findall(r"[A-Za-z]+", name[:100]))
    return [stem for stem in stems if len(stem) > 1 and stem not in _NOT_NOUNS]


def _count_candidate(figure: Figure) -> bool:
    """A plain whole number that may count something: ``4``, not ``4.0``, ``$4``, ``4%``."""
    return figure.text.isdigit() and figure.value <= COUNTS_UP_TO


def _frame_counts(text: str) -> Iterator[tuple[str, int]]:
    """``(column, distinct labels)`` of each text column of a printed DataFrame in ``text``.

    Only a frame printed whole: one cut short (``[1000 rows x 3 columns]``)
    shows some of its labels, not how many there are.
    """
    if _CUT_FRAME.search(text):
        return
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        header = lines[i]
        names = _GAP.split(header.strip())
        i += 1
        if not header[:1].isspace() or not header.strip():
            continue
        rows: list[list[str]] = []
        while i < len(lines):
            cells = _GAP.split(lines[i].strip())
            if len(cells) != len(names) + 1 or lines[i][:1].isspace():
                break
            rows.append(cells[1:])
            i += 1
        if len(rows) < 2:
            continue
        for j, name in enumerate(names):
            column = [row[j] for row in rows]
            if not any(_NUMERIC_CELL.fullmatch(cell) for cell in column):
                yield name, len(set(column))


def _repr_counts(text: str) -> Iterator[tuple[str, int]]:
    """``(index name, rows)`` of each pandas repr in ``text`` with a named index.

    A printed ``df.groupby("region").units.sum()`` or ``value_counts()``
    lists one row per region under the index name ``region``: the count of
    regions the run saw (a repr cut short says its length in its footer).
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        name = _INDEX_NAME.fullmatch(line)
        if name is None:
            continue
        rows, j = 0, i + 1
        while j < len(lines) and not _REPR_FOOTER.fullmatch(lines[j]):
            if _REPR_ROW.fullmatch(lines[j].rstrip()):
                rows += 1
            elif lines[j].strip() not in ("..", "..."):  # a cut repr's gap
                break
            j += 1
        footer = lines[j] if j < len(lines) and _REPR_FOOTER.fullmatch(lines[j]) else None
        header = i > 0 and lines[i - 1][:1] in " \t" and lines[i - 1].strip() != ""
        if rows and (footer is not None or header):  # a Series, or a frame under its header
            length = _REPR_LENGTH.search(footer or "")
            yield name.group(1), int(length.group(1)) if length else rows


def _figure(text: str, start: int, end: int, *, claims: bool) -> Figure | list[Figure] | None:
    """The figure a digit token at ``start:end`` is; a list when it is several."""
    token = text[start:end]
    if claims and _not_a_claim(text, start, end, token):
        return None
    candidates = _candidates(token)
    if candidates is None:
        return _pieces(text, start, end, claims=claims)
    mantissas, splittable = candidates
    first, currency, sign = _prefix(text, start)
    last, percent, scale, after = _suffix(text, end)
    currency = currency or after
    if claims and _bare_year(token) and not (currency or percent or scale != 1 or sign < 0):
        return None
    value = sign * mantissas[0][0] * (1 if percent else scale)
    return Figure(
        text=text[first:last],
        start=first,
        end=last,
        value=value,
        percent=percent,
        currency=currency,
        readings=_readings(mantissas, percent=percent, scale=scale),
        splittable=splittable,
    )


def _pieces(text: str, start: int, end: int, *, claims: bool) -> list[Figure]:
    out: list[Figure] = []
    for piece in _PIECE.finditer(text, start, end):
        found = _figure(text, piece.start(), piece.end(), claims=claims)
        if isinstance(found, Figure) and math.isfinite(found.value):
            out.append(found)
    return out


def _scan(text: str, *, claims: bool, mask: bytearray | None = None) -> Iterator[Figure]:
    for match in _TOKEN.finditer(text):
        if mask is not None and any(mask[match.start() : match.end()]):
            continue
        found = _figure(text, match.start(), match.end(), claims=claims)
        if isinstance(found, list):
            yield from found
        elif found is not None and math.isfinite(found.value):
            yield found


def _mask(text: str) -> bytearray:
    """1 for each character whose numbers are not claims (module docstring)."""
    mask = bytearray(len(text))
    for pattern in _NOT_CLAIMS:
        for match in pattern.finditer(text):
            mask[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    # Inline code outside code blocks: masked unless it is a lone number.
    blanked = "".join(" " if m else c for c, m in zip(text, mask, strict=True))
    for match in _INLINE_CODE.finditer(blanked):
        if not _LONE_FIGURE.fullmatch(match.group(2).strip()):
            mask[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    return mask


def figures(text: str) -> list[Figure]:
    """The numeric claims of an answer, in order.

    Parameters
    ----------
    text
        The answer as markdown.

    Returns
    -------
    list[Figure]
        Each claim with its span; what is read and what is skipped is in
        the module's docstring.
    """
    return list(_scan(text, claims=True, mask=_mask(text)))


# -- evidence ----------------------------------------------------------------


def _number(item: Any) -> float | None:
    """``item`` as a finite float, when it is a real number (not a bool)."""
    if isinstance(item, bool) or not isinstance(item, numbers.Real | Decimal):
        return None
    try:
        value = float(item)
    except (OverflowError, ValueError, TypeError):
        return None
    return value if math.isfinite(value) else None


def _aggregates(values: Sequence[float]) -> list[float]:
    if len(values) < 2:
        return []
    total = math.fsum(values)
    return [total, total / len(values), min(values), max(values)]


def _module_type(item: Any, module: str, name: str) -> bool:
    """``item`` is ``module.name`` (looked up only if the module is loaded)."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(kind, type) and isinstance(item, kind)


class Evidence:
    """Every number a run saw: results, the user's message, variables, earlier turns.

    Values are walked (dicts with their keys, lists, tuples, sets, pandas
    DataFrames and Series, numpy arrays; strings and other objects by the
    numbers in their text) within bounds; past them the walk stops and
    :attr:`notes` says so.

    Parameters
    ----------
    max_values
        Distinct numbers kept.
    max_items
        Items walked in all (scalars, containers, strings, numbers in text).
    max_chars
        Characters of text scanned in all.
    sample
        Longer collections, Series and arrays are read by their first and
        last ``sample // 2`` items plus their aggregates (sum, mean, min, max, count).
    """

    def __init__(
        self,
        *,
        max_values: int = 20_000,
        max_items: int = 100_000,
        max_chars: int = 1_000_000,
        sample: int = 1_000,
    ) -> None:
        self.max_values = max_values
        self.max_items = max_items
        self.max_chars = max_chars
        self.sample = sample
        self.notes: list[str] = []
        self._values: dict[float, str] = {}
        self._operands: list[float] = []
        self._groups: list[list[float]] = []  # each value's operands
        # Counts by what they count ("region": {4}), and the names a table's labels
        # give (a label column, an index): a count of those is checked as a count.
        self._counts: dict[str, set[float]] = {}
        self._labels: set[str] = set()
        self._scalars: set[float] = set()  # whole results and printed lone integers
        self._data = False
        self._items = 0
        self._chars = 0
        self._sorted: list[float] | None = None
        self._sums: dict[int, list[float]] | None = None

    def __len__(self) -> int:
        """How many distinct numbers (unsigned) the evidence holds."""
        return len(self._values)

    @property
    def data_seen(self) -> bool:
        """Some data was added: a result, a variable, an earlier turn's result."""
        return self._data

    @property
    def capped(self) -> bool:
        """Some of what was added was not read (see :attr:`notes`)."""
        return bool(self.notes)

    def add(self, value: Any, *, source: str = "result", data: bool = True) -> None:
        """Add every number in ``value``.

        Parameters
        ----------
        value
            Any Python value: an action's result, a variable, a message.
        source
            Where it came from, shown for a figure it grounds (``a1``, ``$total``).
        data
            It is data the run looked at (``False`` for the user's own words).
        """
        self._data = self._data or data
        self._sorted = self._sums = None
        number = _number(value)
        if number is not None:
            self._scalars.add(abs(number))
        walk = _Walk(self, source)
        walk.run(value)
        raw, totals = list(dict.fromkeys(walk.raw)), list(dict.fromkeys(walk.totals))
        group = list(dict.fromkeys(raw[:OPERANDS_PER_VALUE] + totals[:TOTALS_PER_VALUE]))
        group = group[: max(MAX_OPERANDS - len(self._operands), 0)]
        if group:
            self._groups.append(group)
            self._operands.extend(n for n in group if n not in self._operands)

    def add_message(self, text: str) -> None:
        """Add the numbers of the user's message: what the user said grounds a figure."""
        self.add(text, source="the message", data=False)

    def add_references(self, answer: str, lookup: Callable[[str], Any]) -> None:
        """Add the values the ``$var`` references of an answer were filled from.

        Parameters
        ----------
        answer
            The final answer as the model wrote it, before filling.
        lookup
            A variable's value by name; raises ``KeyError`` when nothing has it.
        """
        for ref in find_references(answer):
            try:
                value = resolve_path(lookup(ref.name), ref.path, label=ref.name)
            except (KeyError, VariableReferenceError):
                continue
            self.add(value, source=ref.text)

    # The walk's bookkeeping (called by _Walk).

    def _spend(self, items: int = 1) -> bool:
        if self._items + items > self.max_items:
            self._note(f"stopped after {self.max_items} items")
            return False
        self._items += items
        return True

    def _text(self, text: str) -> str:
        room = self.max_chars - self._chars
        if len(text) > room:
            self._note(f"text read up to {self.max_chars} characters")
            text = text[: max(room, 0)]
        self._chars += len(text)
        return text

    def _keep(self, number: float, source: str) -> bool:
        key = abs(number)
        if key in self._values:
            return True
        if len(self._values) >= self.max_values:
            self._note(f"kept the first {self.max_values} distinct numbers")
            return False
        self._values[key] = source
        return True

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def _count_of(self, name: Any, count: float, *, label: bool = False) -> None:
        """Keep ``count`` as a count of ``name``'s things; ``label``: a table names them."""
        for noun in _nouns(name):
            self._counts.setdefault(noun, set()).add(float(count))
            if label:
                self._labels.add(noun)

    # Matching.

    def _match(self, figure: Figure) -> tuple[str, str] | None:
        """``(how, source)`` of the first evidence that matches ``figure``."""
        if self._sorted is None:
            self._sorted = sorted(self._values)
        readings = [(abs(v), t + 1e-9 * max(1.0, abs(v))) for v, t in figure.readings]
        for value, tol in readings:
            hit = _within(self._sorted, value - tol, value + tol)
            if hit is not None:
                return "value", self._values[hit]
        for value, tol in readings:
            how = _pairwise(self._operands, value, tol)
            if how is not None:
                return how, ""
        for value, tol in readings:
            how = self._subsets(value, tol)
            if how is not None:
                return how, ""
        return None

    def _counted(self, answer: str, figure: Figure) -> str | None:
        """What ``figure`` counts, when it is a count of things the data labels.

        ``4 regions`` when a table's label column or index is ``region``: such a
        count is found only among the counts of regions the run saw (never as
        any cell or derivation: a small number is nearly always one of those).
        """
        noun = _COUNT_NOUN.match(answer, figure.end) if _count_candidate(figure) else None
        if noun is None or (stem := _stem(noun.group(2))) not in self._labels:
            return None
        if _NARROWED.match(answer, noun.end()):
            return None  # how many of them do something: checked as any figure
        total = (
            noun.group(1)  # "4 distinct regions"
            or _TOTAL_BEFORE.search(answer, max(0, figure.start - 40), figure.start)
            or _TOTAL_AFTER.match(answer, noun.end())
        )
        return stem if total else None

    def _match_count(self, figure: Figure, noun: str) -> tuple[str, str] | None:
        if figure.value in self._counts.get(noun, ()):
            return f"count of {noun}", ""
        if figure.value in self._scalars:
            return "value", ""
        return None

    def _from_answer(self, figure: Figure, cited: list[float], factors: list[float]) -> str | None:
        """Which operation of the answer's grounded figures (or a factor word) gives ``figure``.

        ``North 55, South 50, 105 in all``: each of 55 and 50 is found, so
        their sum is computed from the evidence too. ``twice``, ``half``…
        multiply a figure of the answer or any value of the evidence.
        """
        if self._sorted is None:
            self._sorted = sorted(self._values)
        readings = [(abs(v), t + 1e-9 * max(1.0, abs(v))) for v, t in figure.readings]
        for value, tol in readings:
            how = _pairwise([*cited, *factors], value, tol)
            if how is not None:
                return f"{how} of the answer's figures"
            for k in factors:
                if _within(self._sorted, (value - tol) / k, (value + tol) / k) is not None:
                    return f"{k:g} times a value"
        return None

    def _subsets(self, t: float, tol: float) -> str | None:
        """Sums, means and shares of sums of 2 to MAX_TERMS numbers of distinct values."""
        if self._sums is None:
            self._sums = _sums_across(self._groups[:SUBSET_VALUES])
        for k, sums in self._sums.items():
            if k > 2 and _within(sums, t - tol, t + tol) is not None:
                return f"sum of {k}"
            if _within(sums, k * (t - tol), k * (t + tol)) is not None:
                return f"mean of {k}"
            # A zero operand is no share of anything: 0 / t is 0, which a sum
            # of zeros (two empty or all-missing columns) would match for every t.
            if t > tol and any(
                _within(sums, a / (t + tol), a / (t - tol)) is not None
                for a in self._operands
                if a > 0
            ):
                return f"share of a sum of {k}"
        return None


def _sums_across(groups: list[list[float]]) -> dict[int, list[float]]:
    """Sums of 2 to MAX_TERMS numbers, one from each of as many groups, sorted by size.

    Each group gives its first three numbers; at most MAX_SUMS sums in all.
    """
    members = [group[:3] for group in groups]
    out: dict[int, list[float]] = {}
    budget = MAX_SUMS
    for k in range(2, MAX_TERMS + 1):
        sums: list[float] = []
        for chosen in itertools.combinations(members, k):
            for terms in itertools.product(*chosen):
                sums.append(sum(terms))
            if len(sums) >= budget:
                break
        budget -= len(sums)
        out[k] = sorted(sums)
        if budget <= 0:
            break
    return out


def _within(
    ordered: Sequence[float], lo: float, hi: float, *, other_than: float | None = None
) -> float | None:
    """The first of ``ordered`` in ``[lo, hi]`` that is not ``other_than``."""
    i = bisect_left(ordered, lo)
    while i < len(ordered) and ordered[i] <= hi:
        if ordered[i] != other_than:
            return ordered[i]
        i += 1
    return None


def _pairwise(operands: list[float], t: float, tol: float) -> str | None:
    """Which operation of two distinct operands gives ``t`` within ``tol``, if one does."""
    ordered = sorted(operands)
    for a in operands:
        if _within(ordered, t - a - tol, t - a + tol, other_than=a) is not None:
            return "sum of 2"
        if _within(ordered, a - t - tol, a - t + tol, other_than=a) is not None:
            return "difference"
        if a <= 0 or t <= tol:
            continue  # a ratio or product of zero, or a figure indistinguishable from it
        if _within(ordered, (t - tol) / a, (t + tol) / a, other_than=a) is not None:
            return "product"
        if _within(ordered, a / (t + tol), a / (t - tol), other_than=a) is not None:
            return "ratio"
        # |a - b| / b = t: a grew from b by t, or fell from b by t.
        if _within(ordered, a / (1 + t + tol), a / (1 + t - tol), other_than=a) is not None:
            return "relative change"
        if t + tol >= 1:
            continue  # no fall of 100% or more
        if _within(ordered, a / (1 - t + tol), a / (1 - t - tol), other_than=a) is not None:
            return "relative change"
    return None


class _Walk:
    """One value's walk into an :class:`Evidence` (iterative: no recursion limit)."""

    def __init__(self, evidence: Evidence, source: str) -> None:
        self.evidence = evidence
        self.source = source
        self.raw: list[float] = []  # numbers as found, in order: operands
        self.totals: list[float] = []  # collections' sums: operands after the raw ones

    def run(self, value: Any) -> None:
        stack: list[Any] = [value]
        while stack:
            if not self.evidence._spend():
                return
            item = stack.pop()
            if isinstance(item, numbers.Number | Decimal):
                number = _number(item)
                if number is not None:
                    self.found(number, operand=self.raw)
            elif isinstance(item, str):
                self.text(item)
            elif isinstance(item, bytes | bytearray):
                self.text(bytes(item[: self.evidence.max_chars]).decode("utf-8", "replace"))
            elif item is not None:
                stack.extend(reversed(self.children(item)))

    def found(self, number: float, *, operand: list[float] | None = None) -> None:
        """Keep ``number``; also as an operand of derivations when ``operand`` is a list."""
        kept = math.isfinite(number) and self.evidence._keep(number, self.source)
        if kept and operand is not None:
            operand.append(abs(number))

    def count(self, *sizes: int) -> None:
        """Keep lengths and shapes: values ("4 cities"), never operands."""
        for size in sizes:
            self.found(float(size))

    def collection(self, values: Sequence[float]) -> None:
        """Keep the aggregates of a collection of numbers and their shares of its total."""
        if len(values) >= 2:
            self.stats(*_aggregates(values))
            self.shares(values)

    def shares(self, values: Sequence[float]) -> None:
        total = math.fsum(values)
        if 2 <= len(values) <= SHARES_UP_TO and total:
            for value in values:
                self.found(value / total)

    def stats(self, total: Any, *others: Any) -> None:
        """Keep a collection's total (an operand: shares of it) and other aggregates."""
        for i, number in enumerate(map(_number, (total, *others))):
            if number is not None:
                self.found(number, operand=self.totals if i == 0 else None)

    def text(self, text: str) -> None:
        body = self.evidence._text(text)
        self.counts_in(body)
        for figure in _scan(body, claims=False):
            if not self.evidence._spend():
                return
            if _count_candidate(figure) and (noun := _COUNT_NOUN.match(body, figure.end)):
                self.evidence._count_of(noun.group(2), figure.value)  # "4 regions"
            for value, _tol in figure.readings:
                self.found(value, operand=self.raw)
            if figure.splittable:  # "3,5" in a result may be 3.5 or the numbers 3 and 5
                for piece in _pieces(figure.text, 0, len(figure.text), claims=False):
                    self.found(piece.value, operand=self.raw)

    def counts_in(self, body: str) -> None:
        """Keep the counts a text states: named, printed alone, a pandas repr's rows,
        a printed frame's distinct labels, a list of labels' length."""
        evidence = self.evidence
        for match in _NAMED_NUMBER.finditer(body):
            evidence._count_of(match.group(1), int(match.group(2)))
        evidence._scalars.update(float(m.group(1)) for m in _LONE_INTEGER.finditer(body))
        for name, rows in [*_repr_counts(body), *_frame_counts(body)]:
            evidence._count_of(name, rows, label=True)
        for match in _DESCRIBED.finditer(body):
            evidence._count_of(match.group(2), int(match.group(1)), label=True)
        for match in _LABEL_LIST.finditer(body):  # `df.region.unique()`: its length
            labels = len(_QUOTED.findall(match.group(1)))
            evidence._scalars.add(float(labels))
            self.found(float(labels))  # a length, as a walked list's: a value, no operand
            if match.group(2):
                evidence._count_of(match.group(2), labels, label=True)

    def children(self, item: Any) -> list[Any]:
        """What to walk inside ``item``, having kept its aggregates."""
        if _module_type(item, "pandas", "DataFrame"):
            return self.frame(item)
        if _module_type(item, "pandas", "Series"):
            return self.series(item)
        if _module_type(item, "numpy", "ndarray"):
            return self.array(item)
        if isinstance(item, Mapping):
            return self.mapping(item)
        if isinstance(item, list | tuple | AbstractSet):
            return self.sequence(list(item))
        return [safe_str(item)]

    def cut(self, items: list[Any], what: str) -> list[Any]:
        """The first and last ``sample // 2`` of ``items`` when there are more."""
        half = self.evidence.sample // 2
        if len(items) <= 2 * half:
            return items
        self.evidence._note(f"{what} of {len(items)} items sampled (its aggregates kept)")
        return items[:half] + items[-half:]

    def mapping(self, item: Mapping[Any, Any]) -> list[Any]:
        values = list(item.values())
        found = [n for n in map(_number, values) if n is not None]
        if len(found) == len(values):  # {"North": 80, "South": 30}, not a record's fields
            self.collection(found)
        for key, value in list(item.items())[: self.evidence.sample]:
            number = _number(value)
            if number is not None and number >= 0 and number.is_integer():
                self.evidence._count_of(key, number)  # {"regions": 4}
        self.count(len(values))
        pairs = self.cut(list(item.items()), "a mapping")
        return [part for pair in pairs for part in pair]

    def sequence(self, items: list[Any]) -> list[Any]:
        self.collection([n for n in map(_number, items) if n is not None])
        self.count(len(items))
        records = [r for r in items[: 100 * self.evidence.sample] if isinstance(r, Mapping)]
        if len(records) >= 2:  # a key across a list of records is a column
            columns: dict[Any, list[float]] = {}
            for record in records:
                for key, value in record.items():
                    number = _number(value)
                    if number is not None:
                        columns.setdefault(key, []).append(number)
            for column in columns.values():
                self.collection(column)
            labels: dict[Any, set[str]] = {}
            for record in records:
                for key, value in record.items():
                    if isinstance(value, str):
                        labels.setdefault(key, set()).add(value)
            for key, seen in labels.items():
                if all(isinstance(r.get(key), str) for r in records):  # a label column
                    self.evidence._count_of(key, len(seen), label=True)
        return self.cut(items, "a collection")

    def cells(self, cells: Any, length: int, what: str) -> list[Any]:
        """Keep the numbers of a column or array (sampled past ``sample``; never operands).

        ``cells`` is sliced (``series.iloc``, ``array.flat``); returns the
        cells that are not numbers, to walk.
        """
        half = self.evidence.sample // 2
        if length <= 2 * half:
            values = list(cells[:].tolist())
        else:
            self.evidence._note(f"{what} of {length} items sampled (its aggregates kept)")
            values = list(cells[:half].tolist()) + list(cells[length - half :].tolist())
        if not self.evidence._spend(len(values)):
            return []
        rest: list[Any] = []
        for value in values:
            number = _number(value) if isinstance(value, numbers.Number | Decimal) else None
            if number is not None:
                self.found(number)
            elif not isinstance(value, numbers.Number | Decimal):
                rest.append(value)  # text, objects: walked like any value
        return rest

    def series(self, series: Any) -> list[Any]:
        self.count(len(series))
        self.index_counts(series.index)
        if series.dtype.kind in "OSU":
            self.label_count(series.name, series)
        return [*self.column(series, "a Series"), *self.labels(series.index), series.name]

    def column(self, series: Any, what: str) -> list[Any]:
        if series.dtype.kind in "iuf" and len(series) >= 2:
            self.stats(series.sum(), series.mean(), series.min(), series.max(), series.count())
            if len(series) <= SHARES_UP_TO:
                self.shares([n for n in map(_number, series.tolist()) if n is not None])
        return self.cells(series.iloc, len(series), what)

    def labels(self, index: Any) -> list[Any]:
        """An index's labels when it has few; none for row numbers (a RangeIndex)."""
        if type(index).__name__ == "RangeIndex" or len(index) > self.evidence.sample:
            return []
        return list(index.tolist())

    def label_count(self, name: Any, column: Any) -> None:
        """Keep how many distinct labels a label column holds, as a count of its name."""
        try:
            distinct = int(column.nunique())
        except Exception:  # unhashable cells: no count, the rest of the walk goes on
            return
        self.evidence._count_of(name, distinct, label=True)

    def index_counts(self, index: Any) -> None:
        """A named index (``groupby("region")``'s): how many distinct labels each level has."""
        for level, name in enumerate(index.names):
            if name is not None:
                self.label_count(name, index.get_level_values(level))

    def frame(self, frame: Any) -> list[Any]:
        rows, width = frame.shape
        self.count(rows, width)
        self.index_counts(frame.index)
        for name, kind in zip(frame.columns[:100], frame.dtypes.iloc[:100], strict=True):
            if kind.kind in "OSU":
                self.label_count(name, frame[name])
        out: list[Any] = [*self.labels(frame.columns), *self.labels(frame.index)]
        for i in range(min(width, self.evidence.sample)):
            out.extend(self.column(frame.iloc[:, i], "a column"))
        self.groups(frame)
        return out

    def groups(self, frame: Any) -> None:
        """Keep sums and means per group of each low-cardinality label column."""
        kinds = list(zip(frame.columns, frame.dtypes, strict=False))
        numeric = [c for c, d in kinds if d.kind in "iuf"]
        labels = [c for c, d in kinds if d.kind in "OSUb"]
        if not numeric or len(frame) < 2:
            return
        for label in labels[:8]:
            try:
                if frame[label].nunique() > 50:
                    continue
                grouped = frame.groupby(label, observed=True)[numeric]
                sums, means = grouped.sum().to_numpy(), grouped.mean().to_numpy()
            except Exception:  # an odd dtype: the groups are a bonus, not a requirement
                continue
            for total, mean in zip(sums.ravel().tolist(), means.ravel().tolist(), strict=True):
                self.stats(total, mean)
            for column in sums.T.tolist():  # each group's share of a column's total
                self.shares([n for n in map(_number, column) if n is not None])

    def array(self, array: Any) -> list[Any]:
        self.count(*array.shape)
        if array.dtype.kind in "iuf" and array.size >= 2:
            self.stats(array.sum(), array.mean(), array.min(), array.max())
            if array.size <= SHARES_UP_TO:
                self.shares([n for n in map(_number, array.flat[:].tolist()) if n is not None])
        return self.cells(array.flat, array.size, "an array")


# -- the check and the marks ---------------------------------------------------


#: The sources that are the user's own words (figures a run may repeat).
_USERS_WORDS: Final = frozenset({"the message", "an earlier message"})


def check(answer: str, evidence: Evidence, *, lookups_failed: bool = False) -> GroundingReport:
    """Look up every figure of ``answer`` in ``evidence``.

    Parameters
    ----------
    answer
        The final answer as shown (its ``$var``s filled in): the spans of
        the report are offsets into it.
    evidence
        What the run saw.
    lookups_failed
        The run tried to look at data and failed (an action failed or was
        refused): with no data seen, its figures are not computed even
        when each matches something (a row count in a feed), except the
        user's own figures, repeated.

    Returns
    -------
    GroundingReport
        Every figure, grounded or not, and whether any data was looked at.
    """
    listed = figures(answer)
    found_of: list[tuple[str, str] | None] = []
    counts: list[bool] = []  # a count of labelled things: checked as a count only
    for figure in listed:
        noun = evidence._counted(answer, figure)
        counts.append(noun is not None)
        if noun is not None:
            found_of.append(evidence._match_count(figure, noun))
            continue
        found = evidence._match(figure)
        if found is None and figure.splittable:
            parts = _pieces(answer, figure.start, figure.end, claims=True)
            if parts and all(evidence._match(p) is not None for p in parts):
                found = ("separate numbers", "")
        found_of.append(found)
    _derive_from_answer(answer, listed, found_of, counts, evidence)
    checked: list[CheckedFigure] = []
    for figure, found in zip(listed, found_of, strict=True):
        if found is None:
            checked.append(CheckedFigure(figure, grounded=False))
        else:
            checked.append(CheckedFigure(figure, grounded=True, how=found[0], source=found[1]))
    unverified = any(not c.grounded for c in checked)
    # After failed lookups, only the user's own figures may be repeated unflagged.
    guessed = lookups_failed and any(c.source not in _USERS_WORDS for c in checked)
    return GroundingReport(
        figures=tuple(checked),
        no_data_looked_at=(unverified or guessed) and not evidence.data_seen,
        evidence_capped=evidence.capped,
        notes=tuple(evidence.notes),
    )


def _derive_from_answer(
    answer: str,
    listed: list[Figure],
    found_of: list[tuple[str, str] | None],
    counts: list[bool],
    evidence: Evidence,
) -> None:
    """Ground, in place, figures computed from the answer's grounded figures.

    A few rounds: ``55 + 50 = 105``, then ``55 is 52.4% of 105``. Percentages
    are no operands (``52.4%`` times anything is rarely meant), and a count of
    labelled things is never derived.
    """
    factors = [k for pattern, k in _FACTORS if pattern.search(answer)]
    for _ in range(3):
        cited = sorted(
            {
                abs(value)
                for figure, found in zip(listed, found_of, strict=True)
                if found is not None and not figure.percent
                for value, _tol in figure.readings
            }
        )
        grew = False
        for i, figure in enumerate(listed):
            if found_of[i] is not None or counts[i]:
                continue
            how = evidence._from_answer(figure, cited, factors)
            if how is not None:
                found_of[i], grew = (how, ""), True
        if not grew:
            return


def mark(answer: str, report: GroundingReport, *, marker: str = MARK) -> str:
    """``answer`` with ``marker`` after each unverified figure.

    The mark goes after letters glued to the figure (``5km``) and a closing
    emphasis or code delimiter (``**80**``), so the markdown stays intact;
    it is plain markdown (no raw HTML) for the views' sanitizer.

    Parameters
    ----------
    answer
        The text :func:`check` read.
    report
        What :func:`check` returned for it.
    marker
        What to insert.

    Raises
    ------
    ValueError
        When a figure's span in ``answer`` is not its text (another text was checked).
    """
    points: list[int] = []
    for figure in report.unverified:
        if answer[figure.start : figure.end] != figure.text:
            raise ValueError(
                f"the report is not of this answer: {figure.text!r} is not at {figure.start}"
            )
        after = _MARK_AFTER.match(answer, figure.end)
        points.append(after.end() if after else figure.end)
    out: list[str] = []
    last = 0
    for point in sorted(set(points)):
        out += [answer[last:point], marker]
        last = point
    out.append(answer[last:])
    return "".join(out)


def marked_answer(
    answer: str, grounding: GroundingReport | Mapping[str, Any] | None
) -> tuple[str, str]:
    """The answer as a view shows it, and the note line under it.

    Parameters
    ----------
    answer
        The final answer the report was made of.
    grounding
        The report, its :meth:`GroundingReport.to_dict` (a ``run_finished``
        event's ``grounding``), or ``None`` when the answer was not checked.

    Returns
    -------
    tuple of str
        ``answer`` with :data:`MARK` after each unverified figure, and
        :meth:`GroundingReport.summary` (``""`` when every figure was found);
        ``answer`` unmarked when the report is of another text.
    """
    if grounding is None:
        return answer, ""
    if isinstance(grounding, Mapping):
        # to_dict keeps only the unverified figures: all that marks and the summary need.
        unverified = tuple(
            CheckedFigure(
                Figure(str(f["text"]), int(f["start"]), int(f["end"]), float(f["value"])),
                grounded=False,
            )
            for f in grounding.get("unverified_figures") or ()
        )
        grounding = GroundingReport(
            unverified,
            no_data_looked_at=bool(grounding.get("no_data_looked_at")),
            evidence_capped=bool(grounding.get("evidence_capped")),
        )
    try:
        return mark(answer, grounding), grounding.summary()
    except ValueError:  # not this answer's report: say what was found, mark nothing
        return answer, grounding.summary()

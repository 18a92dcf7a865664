"""Grounding: :class:`TimeRef`, :data:`PRECISIONS`, the pattern table and :func:`ground`.

Part of the frozen grounding oracle (see the package docstring).
"""

from __future__ import annotations

import calendar
import dataclasses
import re
from dataclasses import dataclass
from datetime import date

from jevmem._core import TIME_PRECISIONS

from ._calendar import (
    AMOUNT_RE,
    DAY,
    FLAGS,
    MONTH_FULL_RE,
    MONTH_RE,
    UNIT_RE,
    WEEKDAY_RE,
    day_of,
    day_start,
)
from ._resolvers import (
    Resolved,
    Resolver,
    resolve_ago,
    resolve_anaphoric_unit,
    resolve_day_month,
    resolve_decade,
    resolve_holiday,
    resolve_holiday_before,
    resolve_iso_day,
    resolve_month,
    resolve_month_range,
    resolve_other_day,
    resolve_part_of_day,
    resolve_rel_unit,
    resolve_season,
    resolve_simple_day,
    resolve_week_of_month,
    resolve_weekday,
    resolve_window,
    resolve_year,
)

__all__ = ["PRECISIONS", "TimeRef", "ground"]

#: Every precision :func:`ground` can produce: the ones the core keeps with
#: a node (`jevmem._core.TIME_PRECISIONS`, one list for both).
PRECISIONS = frozenset(TIME_PRECISIONS)


@dataclass(frozen=True)
class TimeRef:
    """One grounded time expression: the interval ``[start, end)`` in Unix seconds (UTC).

    ``span`` is the character offsets of ``text`` in the grounded string. For
    ``precision == "range"`` (``since 2016``, ``the past 3 weeks``),
    ``anchor_precision`` is the precision of the range's start.
    """

    text: str
    start: int
    end: int
    precision: str
    relative: bool
    span: tuple[int, int] = (0, 0)
    anchor_precision: str = ""


# --------------------------------------------------------------------------- the pattern table

_B = r"(?<![\w-])"  # left word boundary that also refuses a hyphen
_E = r"(?![\w-])"
_REL3 = r"(?P<rel>last|this\s+past|this\s+coming|this|next|the\s+previous|the\s+following|past)"
_YEAR = r"(?P<y>(?:19|20)\d\d)"
# A plural noun after a number makes it a count ("2000 dollars", "1950
# people", "march 5 miles"), not a year or a day; "is", "has" and the like
# end in "s" but are no plural.
_PLURAL = (
    r"(?:people|men|women|children|feet|(?!(?:is|as|us|was|has|his|hers|its|this|thus|plus|yes|"
    r"does|goes|less|unless|across|always|perhaps|sometimes|whereas|besides|towards|afterwards|"
    r"nowadays|ours|yours|theirs|news)(?![\w-]))\w*s)(?![\w-])"
)


# A year after a written date ("8 May 1850", "May 2024", "the first week of
# May 1850"): 1000 to 2099; one before 1900 followed by a plural noun is a
# count ("on May 5, 1500 people came"; "by August 2024 requires" keeps its year).
_DATE_YEAR = r"(?:(?:19|20)\d\d|1[0-8]\d\d(?!\s+" + _PLURAL + r"))"


def _date_year(name: str) -> str:
    return r"(?P<" + name + r">" + _DATE_YEAR + r")"


# A number after a quantifier, before the modal "may" or the verb "march"
# and its next word, is a count ("all 3 may attend"), not a day.
_QUANTIFIERS = (
    "all",
    "these",
    "those",
    "the",
    "only",
    "both",
    "some",
    "any",
    "many",
    "other",
    "just",
)
# ... unless the month is written with its capital ("the 3 May deadline").
_DAY_GUARD = (
    "(?:"
    + "".join(rf"(?<!(?<![\w-]){q}\s)" for q in _QUANTIFIERS)
    + r"|(?!\d{1,2}\s+(?:may|march)\s+(?!\d)\w)|(?=\d{1,2}\s+(?-i:May|March)(?![\w-])))"
)
# A range of months: "between March and May 2023", "from April to July",
# "February - March 2024" (without "between" or "from", only before a year).
_MONTH_RANGE = (
    r"(?:(?:between|from)\s+(?:the\s+months?\s+of\s+)?(?P<ma>" + MONTH_FULL_RE + r")"
    r"(?:,?\s+"
    + _date_year("ya")
    + r")?\s+(?:and|to|through|till|until)\s+(?P<mb>"
    + MONTH_FULL_RE
    + r")|(?P<ma2>"
    + MONTH_FULL_RE
    + r")(?:,?\s+"
    + _date_year("ya2")
    + r")?\s*(?:-|\u2013|\u2014|to|through)\s*(?P<mb2>"
    + MONTH_FULL_RE
    + r")(?=,?\s+"
    + _DATE_YEAR
    + r"(?![\w-])))"
    r"(?:,?\s+" + _date_year("yb") + r")?(?![\w-]|\s*(?::\d|%)|[.,]\d)"
)

# An ordinal week, weekend or weekday of a named month: "the first week of
# May", "the last weekend in June 2023", "the second Tuesday of March"
# (before "last week" and "of May" alone).
_WEEK_OF_MONTH = (
    r"(?:the\s+)?(?P<ord>first|1st|second|2nd|third|3rd|fourth|4th|last|final)\s+"
    r"(?P<unit>week|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"\s+(?:of|in)\s+(?P<mon>" + MONTH_FULL_RE + r")"
    r"(?:,?\s+" + _date_year("y") + r")?(?![\w-]|\s*(?::\d|%)|[.,]\d)"
)


def _holiday_qualified(m: re.Match[str]) -> bool:
    """A holiday is grounded only with a qualifier or a year ("I love Christmas" is generic)."""
    first_word = m.group(0).lower().split()[0]
    return first_word != m.group("hol").lower().split()[0] or m.group("y") is not None


def _resolve_qualified_holiday(m: re.Match[str], obs: date) -> Resolved | None:
    """A holiday with a preposition before it, last/this/next or a year (the
    preposition is left out of the reference's text, as a season's is)."""
    return resolve_holiday(m, obs) if _holiday_qualified(m) else None


_PATTERNS: list[tuple[re.Pattern[str], Resolver]] = [
    (
        re.compile(
            _B + r"(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|"
            r"the\s+day\s+before|the\s+day\s+after|yesterday|today|tomorrow)" + _E,
            FLAGS,
        ),
        resolve_simple_day,
    ),
    (
        re.compile(
            _B + r"(?:(?P<rel>this|yesterday|tomorrow|last)\s+(?P<part>morning|afternoon|evening|"
            r"night)|(?P<rel_t>to)(?P<part_t>night))" + _E,
            FLAGS,
        ),
        resolve_part_of_day,
    ),
    (
        re.compile(
            _B
            + r"(?:(?P<rel>last|this\s+past|this\s+coming|this|next|coming)\s+"
            + WEEKDAY_RE.replace("(?:", "(?P<wd>", 1)
            + r"|the\s+"
            + WEEKDAY_RE.replace("(?:", "(?P<wdx>", 1)
            + r"\s+(?P<rel2>before|after))"
            + _E,
            FLAGS,
        ),
        resolve_weekday,
    ),
    (
        re.compile(
            _B + r"(?:the\s+)?(?P<unit>week|weekend|month|year)\s+(?P<dir>before|after)"
            r"(?P<last>\s+last)?" + _E,
            FLAGS,
        ),
        resolve_anaphoric_unit,
    ),
    (
        re.compile(
            _B + r"(?:(?P<rel>last|this\s+past|this\s+coming|this|next|the\s+previous|"
            r"the\s+following|over\s+the)\s+(?P<unit>week|weekend|month|year))" + _E,
            FLAGS,
        ),
        resolve_rel_unit,
    ),
    (
        re.compile(
            _B
            + r"(?:(?P<fut>in)\s+)?"
            + AMOUNT_RE
            + r"\s+"
            + UNIT_RE
            + r"(?:\s+(?P<ago>ago|back)|(?P<fromnow>\s+from\s+(?:now|(?P<anchor>today|tomorrow|yesterday))))?"
            + _E,
            FLAGS,
        ),
        resolve_ago,
    ),
    (re.compile(_B + r"the\s+other\s+day" + _E, FLAGS), resolve_other_day),
    (
        re.compile(
            _B + r"(?:the\s+)?(?P<dir>past|last|next|coming)\s+" + AMOUNT_RE + r"\s+"
            r"(?P<unit>days|weeks|weekends|months|years)" + _E,
            FLAGS,
        ),
        resolve_window,
    ),
    (
        re.compile(
            _B
            + r"the\s+(?P<dir>past|coming)\s+(?P<unit>days|weeks|months|years|week|month|year)"
            + _E,
            FLAGS,
        ),
        resolve_window,
    ),
    (
        re.compile(
            _B + r"(?P<iso>(?P<y>\d{4})[-/](?P<mo>\d{1,2})[-/](?P<d>\d{1,2}))(?![\w-]|:\d)",
            FLAGS,
        ),
        resolve_iso_day,
    ),
    (
        re.compile(
            _B
            + r"(?:"
            + _DAY_GUARD
            + r"(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<mon>"
            + MONTH_RE
            + r")"
            r"|(?!(?:may|march)\s+\d{1,2}\s+"
            + _PLURAL
            + r")(?P<mon2>"
            + MONTH_RE
            + r")\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?(?!\s*:|\d))"
            r"(?:,?\s+" + _date_year("y") + r")?(?![\w-])",
            FLAGS,
        ),
        resolve_day_month,
    ),
    (
        re.compile(
            _B + r"(?:(?P<mod>early|mid|late)[-\s]+(?:in\s+)?(?P<mon>" + MONTH_RE + r")"
            r"(?:,?\s+(?:of\s+)?" + _date_year("y") + r")?"
            r"|(?P<mon2>" + MONTH_RE + r")(?:,?\s+(?:of\s+)?" + _date_year("y2") + r")"
            r"|(?P<rel>last|this|next)\s+(?P<mon3>" + MONTH_FULL_RE + r"))" + _E,
            FLAGS,
        ),
        resolve_month,
    ),
    (
        re.compile(
            _B + r"(?:in|during|by|until|till|through|throughout|from|since|around|before|after|"
            r"of)\s+(?:the\s+month\s+of\s+)?(?P<x>" + MONTH_FULL_RE + r")(?![\w-]|\s+\d)",
            FLAGS,
        ),
        resolve_month,
    ),
    (re.compile(_B + _MONTH_RANGE, FLAGS), resolve_month_range),
    (re.compile(_B + _WEEK_OF_MONTH, FLAGS), resolve_week_of_month),
    (
        re.compile(
            _B + r"(?:(?:in|during|since|until|till|before|after|back\s+in|the\s+year|between"
            r"|(?<=between\s(?:19|20)\d\d\s)and|(?<=from\s(?:19|20)\d\d\s)(?:to|through))\s+"
            r"|(?:of|by|from|around|circa)\s+(?!(?:19|20)\d\d\s+" + _PLURAL + r"))"
            r"(?P<x>" + _YEAR + r")(?![\w-]|\s*(?::\d|%|am\b|pm\b)|[.,]\d)",
            FLAGS,
        ),
        resolve_year,
    ),
    (
        re.compile(
            _B + r"the\s+(?P<dec>(?:19|20)\d0|\d0)(?:'?s)" + _E,
            FLAGS,
        ),
        resolve_decade,
    ),
    (
        re.compile(
            _B + r"(?:(?P<prep>in|during|over|through|throughout|since|for)\s+)?(?P<x>(?:(?P<rel>"
            r"last|this\s+past|this|next|past)\s+)?(?:the\s+)?(?P<season>spring|summer|autumn|fall|"
            r"winter)(?:\s+(?:of\s+)?" + _YEAR + r")?)" + _E,
            FLAGS,
        ),
        resolve_season,
    ),
    (
        re.compile(
            _B + r"(?:(?:on|at|for|over|during|since|until|till|before|after)\s+)?"
            r"(?P<x>(?:(?P<rel>last|this|next)\s+)?(?P<hol>christmas\s+eve|christmas\s+day|"
            r"christmas|xmas|new\s+year['\u2019]?s\s+eve|new\s+year['\u2019]?s\s+day|halloween|"
            r"valentine['\u2019]?s\s+day|independence\s+day|the\s+fourth\s+of\s+july|"
            r"thanksgiving)(?:,?\s+" + _YEAR + r")?)" + _E,
            FLAGS,
        ),
        _resolve_qualified_holiday,
    ),
]


# Every pattern needs one of these words (or a digit): a cheap first pass.
_TRIGGER = re.compile(
    r"\d|today|yesterday|tomorrow|night|morning|afternoon|evening|day|week|mon|tue|wed|thu|"
    r"fri|sat|sun|month|year|ago|back|now|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|"
    r"spring|summer|autumn|fall|winter|christmas|xmas|halloween|thanksgiving|0s",
    FLAGS,
)
_SINCE_RE = re.compile(r"(?:^|(?<![\w-]))(?:ever\s+)?since\s+$", FLAGS)
#: Long texts are grounded in pieces of about this many characters, cut at a
#: line break (else a space), so the work stays linear in the text's length
#: whatever a pattern costs on one piece.
_PIECE = 16_384
_PIECE_OVERLAP = 64  # how far past its cut a piece is read

_MIN_TS = day_start(date(1, 1, 1))
_MAX_TS = day_start(date(9999, 12, 31))


def _obs_day(observed_at: int) -> date:
    if isinstance(observed_at, bool) or not isinstance(observed_at, int):
        raise TypeError(f"observed_at must be an int (Unix seconds), got {observed_at!r}")
    if not _MIN_TS + 400 * DAY <= observed_at <= _MAX_TS - 400 * DAY:
        raise ValueError(f"observed_at {observed_at} is outside the supported calendar range")
    return day_of(observed_at)


_YEARLY = frozenset({"day", "month", "part_of_month", "season"})


def _year_earlier(start: int, end: int, precision: str, obs: date) -> tuple[int, int] | None:
    """The same calendar interval one year earlier ("since June" means the past
    June); a day: the latest with its month and day on or before D (for Feb 29
    the last leap year's, never a Feb 28), None where the calendar has none."""
    a, b = day_of(start), day_of(end)
    if precision == "day":
        for y in range(obs.year, max(0, obs.year - 9), -1):
            if a.day <= calendar.monthrange(y, a.month)[1] and date(y, a.month, a.day) <= obs:
                s = day_start(date(y, a.month, a.day))
                return s, s + DAY
        return None
    return day_start(_back(a)), day_start(_back(b))


def _back(d: date) -> date:
    """The same day a year earlier (the last of its month when that is shorter)."""
    return date(d.year - 1, d.month, min(d.day, calendar.monthrange(d.year - 1, d.month)[1]))


def ground(text: str, observed_at: int) -> list[TimeRef]:
    """Find time expressions in ``text`` and resolve them against ``observed_at``.

    ``observed_at`` is the observation time in Unix seconds (UTC). Returns
    non-overlapping :class:`TimeRef` objects in text order (on overlap the
    earlier, then the longer, match wins). Never raises on any string ``text``;
    raises :class:`ValueError` / :class:`TypeError` only for a bad
    ``observed_at``. See the module docstring for the supported patterns.
    """
    obs = _obs_day(observed_at)
    if not isinstance(text, str) or not text:
        return []
    if len(text) <= _PIECE:
        return _ground_piece(text, obs)
    # each piece read with the start of the next: it keeps what starts in
    # it, the next drops what starts inside an expression kept before
    refs: list[TimeRef] = []
    for a, b in _pieces(text):
        kept_end = refs[-1].span[1] if refs else 0
        for r in _ground_piece(text[a : b + _PIECE_OVERLAP], obs):
            r = dataclasses.replace(r, span=(r.span[0] + a, r.span[1] + a))
            if kept_end <= r.span[0] < b:
                refs.append(r)
    return refs


def _pieces(text: str) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` pieces of ``text`` of at most about
    ``_PIECE`` characters, each cut after a line break in its second half,
    else after a sentence's end, else after a space, so a time expression is
    rarely split."""
    out = []
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + _PIECE)
        if end < n:
            half = start + _PIECE // 2
            cut = text.rfind("\n", half, end)
            if cut < 0:
                ends = [text.rfind(p + " ", half, end) for p in ".!?"]
                cut = max(ends) + 1 if max(ends) >= 0 else -1
            if cut < 0:
                cut = text.rfind(" ", half, end)
            if cut >= 0:
                end = cut + 1
        out.append((start, end))
        start = end
    return out


def _ground_piece(text: str, obs: date) -> list[TimeRef]:
    """`ground` on one piece of text."""
    if _TRIGGER.search(text) is None:
        return []
    found: list[tuple[int, int, int, int, str, bool, Resolved | None]] = []
    # an ordinal week of a month after "since" is the one before the
    # observation: resolved as if observed a year earlier; a holiday the
    # latest on or before the observation day
    year_before = _back(obs) if obs.year > 1 else None
    for pattern, resolve in _PATTERNS:
        for m in pattern.finditer(text):
            try:
                res = resolve(m, obs)
            except (ValueError, OverflowError, KeyError):
                res = None  # out of the calendar's range, or an unknown word form
            if res is None:
                continue
            group = "x" if "x" in pattern.groupindex and m.group("x") is not None else 0
            a, b = m.span(group)
            earlier = None
            try:
                if resolve is resolve_week_of_month and year_before is not None:
                    earlier = resolve(m, year_before)
                elif resolve is _resolve_qualified_holiday:
                    earlier = resolve_holiday_before(m, obs)
            except (ValueError, OverflowError, KeyError):
                earlier = None  # a year before the calendar's first
            found.append((a, b, *res, earlier))
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    refs: list[TimeRef] = []
    taken_end = -1
    for a, b, start, end, precision, relative, earlier in found:
        if a < taken_end or start >= end:
            continue
        taken_end = b
        since = _SINCE_RE.search(text, max(0, a - 16), a)
        if since is not None:
            a = since.start()
            ahead = relative and start >= day_start(obs) + DAY
            if ahead and earlier is not None:
                start, end = earlier[0], earlier[1]
            elif ahead and precision in _YEARLY:
                shifted = _year_earlier(start, end, precision, obs)
                if shifted is None:
                    continue  # no such day before D in the calendar (Feb 29 in years 1-3)
                start, end = shifted
            refs.append(
                TimeRef(
                    text=text[a:b],
                    start=start,
                    end=max(day_start(obs) + DAY, end),
                    precision="range",
                    relative=True,
                    span=(a, b),
                    anchor_precision=precision,
                )
            )
        else:
            refs.append(TimeRef(text[a:b], start, end, precision, relative, (a, b)))
    return refs

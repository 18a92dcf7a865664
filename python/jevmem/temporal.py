"""Timestamps and grounded temporal references, without an LLM.

Everything here is deterministic, stdlib-only and works in **UTC**: a memory's
timestamp is its *observation time* (when the turn was said or written), never
the time of the event it talks about (SPEC §3.9). :func:`ground` recovers event
times from the text by resolving relative expressions ("yesterday", "last
Saturday", "two weekends ago") against the observation time, each with an
explicit precision.

Timestamps
----------
:func:`parse_timestamp` turns a string into Unix seconds (UTC):

* ISO 8601 extended or basic: ``2023-05-08``, ``2023-05-08T13:56``,
  ``2023-05-08 13:56:00.250Z``, ``2023-05-08T13:56:00+02:00``,
  ``20230508T135600Z``; reduced precision ``2023-05`` and ``2023``.
  A time without ``Z``/offset is taken as UTC. Fractions are floored.
* ``YYYY/MM/DD`` (optionally followed by a time).
* Written dates: ``8 May 2023``, ``8 May, 2023``, ``8th of May 2023``,
  ``May 8, 2023``, ``May 8th 2023``, ``Monday, 8 May 2023`` (month names full or
  abbreviated, any case), optionally preceded by a time and ``on`` (LoCoMo's
  ``1:56 pm on 8 May, 2023``) or followed by an optional ``at`` and a time.
  Times are ``H:MM[:SS]`` with optional ``am``/``pm``.

Anything else raises :class:`ValueError` naming the input. :func:`to_timestamp`
also accepts ints, finite floats (floored), ``datetime`` (naive = UTC) and
``date`` (midnight UTC).

Grounding
---------
:func:`ground` returns :class:`TimeRef` objects, sorted by position, with
``[start, end)`` in Unix seconds. ``D`` below is the observation's UTC calendar
day; weeks are **Monday-based** (Monday 00:00 to next Monday 00:00); a weekend
is Saturday 00:00 to Monday 00:00. Matching is case-insensitive. ``relative``
is True whenever the resolution depends on the observation time (including a
month or day named without a year). ``text`` is the matched span, without a
leading preposition ("in", "on", "during"...) that was only used as a cue.

Supported patterns (``D`` = observation day; precision in brackets):

* ``today`` = D; ``yesterday`` = D-1; ``tomorrow`` = D+1; ``the day before
  yesterday`` = D-2; ``the day after tomorrow`` = D+2; anaphoric ``the day
  before`` / ``the day after`` = D-1 / D+1 [day].
* ``this morning|afternoon|evening`` = 06-12 / 12-18 / 18-24 h of D;
  ``tonight``/``this night`` = D 18:00 to D+1 06:00; ``last night`` = D-1 18:00
  to D 06:00; ``yesterday|tomorrow morning|afternoon|evening|night`` = that part
  of D-1 / D+1 [part_of_day].
* ``last <weekday>`` = the most recent such day strictly before D; ``this
  <weekday>`` = that day of D's Monday-based week; ``next <weekday>`` = the
  first such day strictly after D; ``the <weekday> before|after`` = as
  last|next. Abbreviations Mon/Tue/Tues/Wed/Thu/Thur/Thurs/Fri/Sat/Sun are
  accepted ("Mon", "Wed", "Sat", "Sun" only when capitalised) [day].
* ``last|this|next week`` = the previous / current / following Monday-based
  week; ``this past week``, ``the previous week`` and anaphoric ``the week
  before`` = previous week; ``the following week``, ``the week after`` =
  following week; ``the week before last`` = two weeks back [week].
* ``last|this|next weekend`` = Sat-Sun of the previous / current / following
  week (so on a Sunday "last weekend" is the one before); ``this past
  weekend``, ``over the weekend`` = the current weekend when D is Sat/Sun, else
  last weekend; ``this coming weekend`` = the current one (the next one on a
  weekend); ``the weekend before (last)`` = last weekend (the one before it)
  [weekend].
* ``last|this|next month``, ``the month before|after`` = the calendar month
  before / of / after D [month]; same for ``year`` [year].
* ``N days|weeks|weekends|months|years ago`` (also ``back``) = D-N / the week
  containing D-7N / the N-th weekend back (1 = last weekend) / calendar month
  M-N / calendar year Y-N; ``in N <units>`` and ``N <units> from now`` = D+N /
  week of D+7N / month M+N / year Y+N [day, week, weekend, month, year].
* Fuzzy amounts ``a couple (of)`` = 2-3, ``a few``/``few`` = 2-5, ``several`` =
  3-7: the union of the intervals for that range of N, e.g. ``a few days ago``
  = D-5 .. D-2 [few_days, few_weeks, few_weekends, few_months, few_years];
  ``the other day`` = D-7 .. D-1 [few_days].
* ``the past|last N days|weeks|months|years`` = from D minus N units to the
  end of D [range].
* ``in|during|by|until|till|through|from|since|around|before|after|of
  <Month>`` (text = the month name) = the occurrence nearest D (so within about
  6 months either side); ``last <Month>`` = the most recent one before D's
  month; ``this <Month>`` = in D's year; ``next <Month>`` = the first after D's
  month [month]. ``<Month> [,] [of] <Year>`` = that month [month]. ``early|mid|
  late <Month> [Year]`` = days 1-10 / 11-20 / 21-end [part_of_month].
* ``8 May``, ``8th of May``, ``May 8th``, ``May 8`` with an optional ``[,]
  2023`` = that day; without a year, the occurrence nearest D [day].
  ``2023-05-08`` and ``2023/05/08`` [day].
* ``in|during|since|of|by|until|till|from|around|circa|before|after|back in|the
  year 2022`` (text = the year) = that calendar year [year]; ``the 90s``,
  ``the 1990s`` [decade].
* Seasons (meteorological, northern: spring Mar-May, summer Jun-Aug,
  autumn/fall Sep-Nov, winter Dec-Feb): ``last summer`` = the most recent one
  that ended by D; ``this summer`` = the one in D's year (winter: the one
  containing D, else the coming one); ``next summer`` = the first starting
  after D; ``summer 2022``, ``the summer of 2022``; ``in|during|over the
  summer`` = the occurrence nearest D [season].
* Holidays, only with last/this/next, a year, or after
  on/at/for/over/during/since/until/before/after: Christmas (Eve/Day), New
  Year's Eve/Day, Halloween, Valentine's Day, Independence Day / the Fourth of
  July, Thanksgiving (US, 4th Thursday of November); bare = nearest D [day].
* ``since <any of the above>`` (or ``ever since``) = from that reference's
  start to the end of D; a month, day or season without a year that would lie
  in the future is taken one year earlier [range, with ``anchor_precision``].

Numbers are digits (up to 3) or words (a/an = 1, one ... twenty, thirty ...
ninety, and compounds such as "twenty-five"). Not supported (deliberately, too
ambiguous without tense or dialogue state): bare weekdays ("on Friday"), bare
month names ("May"), numeric dates other than year-first (``5/8/2023``),
clock times inside text, "recently", "a while ago", ordinal weekdays ("the
first weekend of August").

Query cues
----------
:func:`query_time_cues` returns a :class:`TimeCues` typed dict telling whether a
query asks *when* something happened, *how long*, about *order*
(before/after/first/last time) or *recency*, with a score in [0, 1] for the
router's temporal need and any explicit time constraint found in the query.
"""

from __future__ import annotations

import calendar
import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import NamedTuple, TypedDict

__all__ = [
    "PRECISIONS",
    "FactTime",
    "TimeCues",
    "TimeRef",
    "describe",
    "event_time",
    "ground",
    "parse_timestamp",
    "query_fact_time",
    "query_time_cues",
    "to_timestamp",
]

DAY = 86_400
_EPOCH_ORD = date(1970, 1, 1).toordinal()

#: Every precision :func:`ground` can produce.
PRECISIONS = frozenset(
    {
        "part_of_day",
        "day",
        "week",
        "weekend",
        "part_of_month",
        "month",
        "season",
        "year",
        "decade",
        "few_days",
        "few_weeks",
        "few_weekends",
        "few_months",
        "few_years",
        "range",
    }
)


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


# --------------------------------------------------------------------------- vocabulary

_MONTHS: dict[str, int] = {}
for _i, _name in enumerate(calendar.month_name):
    if _i:
        _MONTHS[_name.lower()] = _i
        _MONTHS[_name[:3].lower()] = _i
_MONTHS["sept"] = 9
_MONTH_RE = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_MONTH_FULL_RE = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan\.|feb\.|mar\.|apr\.|aug\.|sept\.|sep\.|oct\.|nov\.|dec\.|"
    r"jan|feb|aug|sept|oct|nov|dec)"
)

_WEEKDAYS: dict[str, int] = {
    "monday": 0,
    "mon": 0,
    "tuesday": 1,
    "tues": 1,
    "tue": 1,
    "wednesday": 2,
    "wed": 2,
    "thursday": 3,
    "thurs": 3,
    "thur": 3,
    "thu": 3,
    "friday": 4,
    "fri": 4,
    "saturday": 5,
    "sat": 5,
    "sunday": 6,
    "sun": 6,
}
# Abbreviations that are also ordinary words: only accepted when capitalised.
_AMBIGUOUS_WD = frozenset({"wed", "sat", "sun", "mon"})
_WEEKDAY_RE = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"tues|tue|thurs|thur|thu|fri|mon|wed|sat|sun)\.?"
)

_UNITS: dict[str, int] = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS: dict[str, int] = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_FUZZY: dict[str, tuple[int, int]] = {
    "couple": (2, 3),
    "few": (2, 5),
    "several": (3, 7),
}
_NUM_WORD_RE = (
    r"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[- ](?:one|two|three|four|"
    r"five|six|seven|eight|nine))?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen)"
)
# An amount: digits, number words, a/an, or a fuzzy quantifier.
_AMOUNT_RE = (
    rf"(?P<n>\d{{1,3}}|{_NUM_WORD_RE}|an?|a\s+couple(?:\s+of)?|a\s+few|couple(?:\s+of)?|few|"
    r"several)"
)
_UNIT_RE = r"(?P<unit>days?|weeks?|weekends?|months?|years?)"

_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

_PARTS: dict[str, tuple[int, int]] = {  # hours from the start of the day
    "morning": (6, 12),
    "afternoon": (12, 18),
    "evening": (18, 24),
    "night": (18, 30),
}

_FLAGS = re.IGNORECASE


def _parse_amount(raw: str) -> tuple[int, int]:
    """(lo, hi) for an amount; exact amounts have lo == hi."""
    s = " ".join(raw.lower().replace("-", " ").split())
    if s.isdigit():
        n = int(s)
        return n, n
    if s in ("a", "an"):
        return 1, 1
    for key, rng in _FUZZY.items():
        if key in s:
            return rng
    parts = s.split()
    total = 0
    for p in parts:
        total += _TENS.get(p, 0) + _UNITS.get(p, 0)
    return total, total


# --------------------------------------------------------------------------- calendar helpers


def _ts(d: date) -> int:
    return (d.toordinal() - _EPOCH_ORD) * DAY


def _day_of(ts: int) -> date:
    return date.fromordinal(ts // DAY + _EPOCH_ORD)


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _add_months(year: int, month: int, n: int) -> tuple[int, int]:
    idx = year * 12 + (month - 1) + n
    return idx // 12, idx % 12 + 1


def _month_iv(year: int, month: int) -> tuple[int, int]:
    ny, nm = _add_months(year, month, 1)
    return _ts(date(year, month, 1)), _ts(date(ny, nm, 1))


def _year_iv(year: int) -> tuple[int, int]:
    return _ts(date(year, 1, 1)), _ts(date(year + 1, 1, 1))


def _day_iv(d: date) -> tuple[int, int]:
    t = _ts(d)
    return t, t + DAY


def _week_iv(d: date) -> tuple[int, int]:
    t = _ts(_monday(d))
    return t, t + 7 * DAY


def _season_iv(season_start_year: int, first_month: int) -> tuple[int, int]:
    y2, m2 = _add_months(season_start_year, first_month, 3)
    return _ts(date(season_start_year, first_month, 1)), _ts(date(y2, m2, 1))


def _nearest_year(obs: date, month: int, day: int = 15) -> int:
    """The year Y in {y-1, y, y+1} making (Y, month, day) nearest to ``obs``."""
    best_year, best_dist = obs.year, None
    for y in (obs.year - 1, obs.year, obs.year + 1):
        dd = min(day, calendar.monthrange(y, month)[1])
        dist = abs(date(y, month, dd).toordinal() - obs.toordinal())
        if best_dist is None or dist < best_dist:
            best_year, best_dist = y, dist
    return best_year


# --------------------------------------------------------------------------- resolvers

# A resolver returns (start, end, precision, relative) or None to reject the match.
_Resolved = tuple[int, int, str, bool]
_Resolver = Callable[["re.Match[str]", date], "_Resolved | None"]


def _g(m: re.Match[str], *names: str) -> str | None:
    """The first participating group among ``names`` (alternations reuse roles)."""
    index = m.re.groupindex
    for name in names:
        v = m.group(name) if name in index else None
        if v is not None:
            return v
    return None


def _weekday_of(m: re.Match[str]) -> int | None:
    raw = _g(m, "wd", "wdx") or ""
    key = raw.rstrip(".").lower()
    if key in _AMBIGUOUS_WD and (len(raw.rstrip(".")) == 3 and not raw[0].isupper()):
        return None
    return _WEEKDAYS[key]


def _r_simple_day(m: re.Match[str], obs: date) -> _Resolved | None:
    w = " ".join(m.group(0).lower().split())
    offsets = {
        "today": 0,
        "yesterday": -1,
        "tomorrow": 1,
        "the day before yesterday": -2,
        "the day after tomorrow": 2,
        "the day before": -1,
        "the day after": 1,
    }
    s, e = _day_iv(obs + timedelta(days=offsets[w]))
    return s, e, "day", True


def _r_part_of_day(m: re.Match[str], obs: date) -> _Resolved | None:
    rel = (_g(m, "rel", "rel_t") or "").lower()
    part = (_g(m, "part", "part_t") or "").lower()
    if rel == "last":
        if part != "night":
            return None
        base = obs - timedelta(days=1)
    else:
        base = obs + timedelta(days={"yesterday": -1, "tomorrow": 1}.get(rel, 0))
    h0, h1 = _PARTS[part]
    t = _ts(base)
    return t + h0 * 3600, t + h1 * 3600, "part_of_day", True


def _r_weekday(m: re.Match[str], obs: date) -> _Resolved | None:
    wd = _weekday_of(m)
    if wd is None:
        return None
    rel = " ".join((m.group("rel") or m.group("rel2") or "").lower().split())
    cur = obs.weekday()
    if rel in ("last", "this past", "past", "before"):
        delta = -((cur - wd) % 7 or 7)
    elif rel in ("next", "after", "this coming", "coming"):
        delta = (wd - cur) % 7 or 7
    else:  # this
        delta = wd - cur
    s, e = _day_iv(obs + timedelta(days=delta))
    return s, e, "day", True


def _r_rel_unit(m: re.Match[str], obs: date) -> _Resolved | None:
    rel = " ".join(m.group("rel").lower().split())
    unit = m.group("unit").lower()
    step = {
        "last": -1,
        "this past": -1,
        "past": -1,
        "the previous": -1,
        "previous": -1,
        "this": 0,
        "this coming": 1 if unit != "weekend" or obs.weekday() >= 5 else 0,
        "next": 1,
        "the following": 1,
        "following": 1,
        "over the": 0,
    }[rel]
    return _shift_unit(obs, unit, step, past_weekend=rel in ("this past", "past", "over the"))


def _shift_unit(obs: date, unit: str, step: int, *, past_weekend: bool = False) -> _Resolved:
    if unit == "week":
        s, e = _week_iv(obs + timedelta(days=7 * step))
        return s, e, "week", True
    if unit == "weekend":
        if past_weekend:
            step = 0 if obs.weekday() >= 5 else -1
        t = _ts(_monday(obs) + timedelta(days=5 + 7 * step))
        return t, t + 2 * DAY, "weekend", True
    if unit == "month":
        y, mo = _add_months(obs.year, obs.month, step)
        s, e = _month_iv(y, mo)
        return s, e, "month", True
    if unit == "day":
        s, e = _day_iv(obs + timedelta(days=step))
        return s, e, "day", True
    s, e = _year_iv(obs.year + step)
    return s, e, "year", True


def _r_anaphoric_unit(m: re.Match[str], obs: date) -> _Resolved | None:
    unit = m.group("unit").lower()
    direction = m.group("dir").lower()
    step = -1 if direction == "before" else 1
    if m.group("last"):
        step = -2
    return _shift_unit(obs, unit, step)


def _unit_interval(obs: date, unit: str, n: int) -> tuple[int, int]:
    """Interval of ``n`` units from D (n < 0: in the past)."""
    if unit == "day":
        return _day_iv(obs + timedelta(days=n))
    if unit == "week":
        return _week_iv(obs + timedelta(days=7 * n))
    if unit == "weekend":
        # 1 weekend ago = last weekend (Saturday = Monday of D's week - 2 days).
        t = _ts(_monday(obs) + timedelta(days=7 * n + 5))
        return t, t + 2 * DAY
    if unit == "month":
        y, mo = _add_months(obs.year, obs.month, n)
        return _month_iv(y, mo)
    return _year_iv(obs.year + n)


def _r_ago(m: re.Match[str], obs: date) -> _Resolved | None:
    ago, fut, fromnow = m.group("ago"), m.group("fut"), m.group("fromnow")
    if not (ago or fut or fromnow) or (ago and (fut or fromnow)):
        return None  # a bare duration ("for two weeks") is not a point in time
    lo, hi = _parse_amount(m.group("n"))
    unit = m.group("unit").lower().rstrip("s")
    future = ago is None
    if hi == 0 or hi > 5000:
        return None
    if future:
        a, b = _unit_interval(obs, unit, lo), _unit_interval(obs, unit, hi)
        start, end = a[0], b[1]
    else:
        a, b = _unit_interval(obs, unit, -hi), _unit_interval(obs, unit, -lo)
        start, end = a[0], b[1]
    if lo != hi:
        return start, end, f"few_{unit}s", True
    return start, end, unit, True


def _r_other_day(m: re.Match[str], obs: date) -> _Resolved | None:
    return _ts(obs - timedelta(days=7)), _ts(obs), "few_days", True


def _shift_day(obs: date, unit: str, n: int) -> date:
    """D moved by ``n`` units (months and years clamp the day of month)."""
    if unit == "day":
        return obs + timedelta(days=n)
    if unit in ("week", "weekend"):
        return obs + timedelta(days=7 * n)
    if unit == "month":
        y, mo = _add_months(obs.year, obs.month, n)
    else:
        y, mo = obs.year + n, obs.month
    return date(y, mo, min(obs.day, calendar.monthrange(y, mo)[1]))


def _r_window(m: re.Match[str], obs: date) -> _Resolved | None:
    """A rolling window: "the past 3 weeks" (D-3w .. end of D), "the next few months"."""
    raw_unit = m.group("unit").lower()
    n = _g(m, "n")
    hi = _parse_amount(n)[1] if n else (5 if raw_unit.endswith("s") else 1)
    if hi == 0 or hi > 5000:
        return None
    unit = raw_unit.rstrip("s")
    if m.group("dir").lower() in ("past", "last"):
        return _ts(_shift_day(obs, unit, -hi)), _ts(obs) + DAY, "range", True
    return _ts(obs), _ts(_shift_day(obs, unit, hi)) + DAY, "range", True


def _month_num(raw: str) -> int:
    return _MONTHS[raw.rstrip(".").lower()]


def _r_month(m: re.Match[str], obs: date) -> _Resolved | None:
    month = _month_num(_g(m, "mon", "mon2", "mon3", "x") or "")
    rel = (_g(m, "rel") or "").lower()
    year_s = _g(m, "y", "y2")
    mod = (_g(m, "mod") or "").lower()
    if "x" in m.re.groupindex:  # the "in <Month>" pattern: no year, no modifier
        rel, year_s, mod = "", None, ""
    if year_s:
        year, relative = int(year_s), False
    elif rel == "last":
        year = obs.year if month < obs.month else obs.year - 1
        relative = True
    elif rel == "next":
        year = obs.year if month > obs.month else obs.year + 1
        relative = True
    elif rel == "this":
        year, relative = obs.year, True
    else:
        year, relative = _nearest_year(obs, month), True
    s, e = _month_iv(year, month)
    if mod:
        last = calendar.monthrange(year, month)[1]
        d0, d1 = {"early": (1, 11), "mid": (11, 21), "late": (21, last + 1)}[mod]
        return s + (d0 - 1) * DAY, s + (d1 - 1) * DAY, "part_of_month", relative
    return s, e, "month", relative


def _r_day_month(m: re.Match[str], obs: date) -> _Resolved | None:
    month = _month_num(_g(m, "mon", "mon2") or "")
    day = int(_g(m, "d", "d2") or "0")
    year_s = m.group("y")
    if year_s:
        year, relative = int(year_s), False
    else:
        if day > 31:
            return None
        year, relative = _nearest_year(obs, month, min(day, 28)), True
    if day < 1 or day > calendar.monthrange(year, month)[1]:
        return None
    s, e = _day_iv(date(year, month, day))
    return s, e, "day", relative


def _r_iso_day(m: re.Match[str], obs: date) -> _Resolved | None:
    y, mo, d = int(m.group("y")), int(m.group("mo")), int(m.group("d"))
    if not 1 <= mo <= 12 or not 1 <= d <= calendar.monthrange(y, mo)[1]:
        return None
    s, e = _day_iv(date(y, mo, d))
    return s, e, "day", False


def _r_year(m: re.Match[str], obs: date) -> _Resolved | None:
    s, e = _year_iv(int(m.group("y")))
    return s, e, "year", False


def _r_decade(m: re.Match[str], obs: date) -> _Resolved | None:
    raw = m.group("dec")
    if len(raw) == 2:
        decade = (1900 if int(raw) >= 30 else 2000) + int(raw)
    else:
        decade = int(raw)
    return _ts(date(decade, 1, 1)), _ts(date(decade + 10, 1, 1)), "decade", len(raw) == 2


def _season_candidates(first_month: int, years: range) -> list[tuple[int, int]]:
    return [_season_iv(y, first_month) for y in years]


def _r_season(m: re.Match[str], obs: date) -> _Resolved | None:
    first = _SEASONS[m.group("season").lower()]
    rel = " ".join((m.group("rel") or "").lower().split())
    year_s = m.group("y")
    if not (rel or year_s or m.group("prep")):
        return None
    today = _ts(obs)
    if year_s:
        s, e = _season_iv(int(year_s), first)
        return s, e, "season", False
    cands = _season_candidates(first, range(obs.year - 2, obs.year + 2))
    if rel in ("last", "this past", "past"):
        s, e = max(c for c in cands if c[1] <= today)
    elif rel == "next":
        s, e = min(c for c in cands if c[0] > today)
    elif rel == "this":
        if first == 12:
            s, e = next((c for c in cands if c[0] <= today < c[1]), _season_iv(obs.year, 12))
        else:
            s, e = _season_iv(obs.year, first)
    else:
        s, e = min(cands, key=lambda c: abs((c[0] + c[1]) // 2 - today))
    return s, e, "season", True


_HOLIDAYS: dict[str, tuple[int, int]] = {
    "christmas eve": (12, 24),
    "christmas day": (12, 25),
    "christmas": (12, 25),
    "xmas": (12, 25),
    "new year's eve": (12, 31),
    "new years eve": (12, 31),
    "new year's day": (1, 1),
    "new years day": (1, 1),
    "halloween": (10, 31),
    "valentine's day": (2, 14),
    "valentines day": (2, 14),
    "independence day": (7, 4),
    "the fourth of july": (7, 4),
    "thanksgiving": (11, 0),
}


def _holiday_date(name: str, year: int) -> date:
    month, day = _HOLIDAYS[name]
    if day == 0:  # US Thanksgiving: fourth Thursday of November
        first = date(year, 11, 1)
        return first + timedelta(days=(3 - first.weekday()) % 7 + 21)
    return date(year, month, day)


def _r_holiday(m: re.Match[str], obs: date) -> _Resolved | None:
    name = " ".join(m.group("hol").lower().replace("\u2019", "'").split())
    rel = (m.group("rel") or "").lower()
    year_s = m.group("y")
    if year_s:
        s, e = _day_iv(_holiday_date(name, int(year_s)))
        return s, e, "day", False
    cands = [_holiday_date(name, y) for y in (obs.year - 1, obs.year, obs.year + 1)]
    if rel == "last":
        d = max(c for c in cands if c < obs)
    elif rel == "next":
        d = min(c for c in cands if c > obs)
    elif rel == "this":
        d = cands[1]
    else:
        d = min(cands, key=lambda c: abs(c.toordinal() - obs.toordinal()))
    s, e = _day_iv(d)
    return s, e, "day", True


# --------------------------------------------------------------------------- the pattern table

_B = r"(?<![\w-])"  # left word boundary that also refuses a hyphen
_E = r"(?![\w-])"
_REL3 = r"(?P<rel>last|this\s+past|this\s+coming|this|next|the\s+previous|the\s+following|past)"
_YEAR = r"(?P<y>(?:19|20)\d\d)"

_PATTERNS: list[tuple[re.Pattern[str], _Resolver]] = [
    (
        re.compile(
            _B + r"(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|"
            r"the\s+day\s+before|the\s+day\s+after|yesterday|today|tomorrow)" + _E,
            _FLAGS,
        ),
        _r_simple_day,
    ),
    (
        re.compile(
            _B + r"(?:(?P<rel>this|yesterday|tomorrow|last)\s+(?P<part>morning|afternoon|evening|"
            r"night)|(?P<rel_t>to)(?P<part_t>night))" + _E,
            _FLAGS,
        ),
        _r_part_of_day,
    ),
    (
        re.compile(
            _B
            + r"(?:(?P<rel>last|this\s+past|this\s+coming|this|next|coming)\s+"
            + _WEEKDAY_RE.replace("(?:", "(?P<wd>", 1)
            + r"|the\s+"
            + _WEEKDAY_RE.replace("(?:", "(?P<wdx>", 1)
            + r"\s+(?P<rel2>before|after))"
            + _E,
            _FLAGS,
        ),
        _r_weekday,
    ),
    (
        re.compile(
            _B + r"(?:the\s+)?(?P<unit>week|weekend|month|year)\s+(?P<dir>before|after)"
            r"(?P<last>\s+last)?" + _E,
            _FLAGS,
        ),
        _r_anaphoric_unit,
    ),
    (
        re.compile(
            _B + r"(?:(?P<rel>last|this\s+past|this\s+coming|this|next|the\s+previous|"
            r"the\s+following|over\s+the)\s+(?P<unit>week|weekend|month|year))" + _E,
            _FLAGS,
        ),
        _r_rel_unit,
    ),
    (
        re.compile(
            _B
            + r"(?:(?P<fut>in)\s+)?"
            + _AMOUNT_RE
            + r"\s+"
            + _UNIT_RE
            + r"(?:\s+(?P<ago>ago|back)|(?P<fromnow>\s+from\s+now))?"
            + _E,
            _FLAGS,
        ),
        _r_ago,
    ),
    (re.compile(_B + r"the\s+other\s+day" + _E, _FLAGS), _r_other_day),
    (
        re.compile(
            _B + r"(?:the\s+)?(?P<dir>past|last|next|coming)\s+" + _AMOUNT_RE + r"\s+"
            r"(?P<unit>days|weeks|weekends|months|years)" + _E,
            _FLAGS,
        ),
        _r_window,
    ),
    (
        re.compile(
            _B
            + r"the\s+(?P<dir>past|coming)\s+(?P<unit>days|weeks|months|years|week|month|year)"
            + _E,
            _FLAGS,
        ),
        _r_window,
    ),
    (
        re.compile(
            _B + r"(?P<iso>(?P<y>\d{4})[-/](?P<mo>\d{1,2})[-/](?P<d>\d{1,2}))(?![\w-]|:\d)",
            _FLAGS,
        ),
        _r_iso_day,
    ),
    (
        re.compile(
            _B + r"(?:(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<mon>" + _MONTH_RE + r")"
            r"|(?P<mon2>" + _MONTH_RE + r")\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?(?!\s*:|\d))"
            r"(?:,?\s+" + _YEAR + r")?(?![\w-])",
            _FLAGS,
        ),
        _r_day_month,
    ),
    (
        re.compile(
            _B + r"(?:(?P<mod>early|mid|late)[-\s]+(?:in\s+)?(?P<mon>" + _MONTH_RE + r")"
            r"(?:,?\s+(?:of\s+)?" + _YEAR + r")?"
            r"|(?P<mon2>" + _MONTH_RE + r")(?:,?\s+(?:of\s+)?(?P<y2>(?:19|20)\d\d))"
            r"|(?P<rel>last|this|next)\s+(?P<mon3>" + _MONTH_FULL_RE + r"))" + _E,
            _FLAGS,
        ),
        _r_month,
    ),
    (
        re.compile(
            _B + r"(?:in|during|by|until|till|through|throughout|from|since|around|before|after|"
            r"of)\s+(?:the\s+month\s+of\s+)?(?P<x>" + _MONTH_FULL_RE + r")(?![\w-]|\s+\d)",
            _FLAGS,
        ),
        _r_month,
    ),
    (
        re.compile(
            _B + r"(?:in|during|since|of|by|until|till|from|around|circa|before|after|back\s+in|"
            r"the\s+year)\s+(?P<x>" + _YEAR + r")(?![\w-]|\s*(?::|%|am\b|pm\b)|[.,]\d)",
            _FLAGS,
        ),
        _r_year,
    ),
    (
        re.compile(
            _B + r"the\s+(?P<dec>(?:19|20)\d0|\d0)(?:'?s)" + _E,
            _FLAGS,
        ),
        _r_decade,
    ),
    (
        re.compile(
            _B + r"(?:(?P<prep>in|during|over|through|throughout|since|for)\s+)?(?P<x>(?:(?P<rel>"
            r"last|this\s+past|this|next|past)\s+)?(?:the\s+)?(?P<season>spring|summer|autumn|fall|"
            r"winter)(?:\s+(?:of\s+)?" + _YEAR + r")?)" + _E,
            _FLAGS,
        ),
        _r_season,
    ),
    (
        re.compile(
            _B + r"(?:(?:(?P<rel>last|this|next)\s+|(?:on|at|for|over|during|since|"
            r"until|till|before|after)\s+)?(?P<hol>christmas\s+eve|christmas\s+day|christmas|"
            r"xmas|new\s+year['\u2019]?s\s+eve|new\s+year['\u2019]?s\s+day|halloween|"
            r"valentine['\u2019]?s\s+day|independence\s+day|the\s+fourth\s+of\s+july|"
            r"thanksgiving)(?:,?\s+" + _YEAR + r")?)" + _E,
            _FLAGS,
        ),
        lambda m, obs: _r_holiday(m, obs) if _holiday_qualified(m) else None,
    ),
]


def _holiday_qualified(m: re.Match[str]) -> bool:
    """A holiday is grounded only with a qualifier or a year ("I love Christmas" is generic)."""
    first_word = m.group(0).lower().split()[0]
    return first_word != m.group("hol").lower().split()[0] or m.group("y") is not None


# Every pattern needs one of these words (or a digit): a cheap first pass.
_TRIGGER = re.compile(
    r"\d|today|yesterday|tomorrow|night|morning|afternoon|evening|day|week|mon|tue|wed|thu|"
    r"fri|sat|sun|month|year|ago|back|now|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|"
    r"spring|summer|autumn|fall|winter|christmas|xmas|halloween|thanksgiving|0s",
    _FLAGS,
)
_SINCE_RE = re.compile(r"(?:^|(?<![\w-]))(?:ever\s+)?since\s+$", _FLAGS)
#: Long texts are grounded in pieces of about this many characters, cut at a
#: line break (else a space), so the work stays linear in the text's length
#: whatever a pattern costs on one piece.
_PIECE = 16_384

_MIN_TS = _ts(date(1, 1, 1))
_MAX_TS = _ts(date(9999, 12, 31))


def _obs_day(observed_at: int) -> date:
    if isinstance(observed_at, bool) or not isinstance(observed_at, int):
        raise TypeError(f"observed_at must be an int (Unix seconds), got {observed_at!r}")
    if not _MIN_TS + 400 * DAY <= observed_at <= _MAX_TS - 400 * DAY:
        raise ValueError(f"observed_at {observed_at} is outside the supported calendar range")
    return _day_of(observed_at)


_YEARLY = frozenset({"day", "month", "part_of_month", "season"})


def _year_earlier(start: int, end: int, precision: str) -> tuple[int, int]:
    """The same calendar interval one year earlier ("since June" means the past June)."""
    a, b = _day_of(start), _day_of(end)

    def back(d: date) -> date:
        return date(d.year - 1, d.month, min(d.day, calendar.monthrange(d.year - 1, d.month)[1]))

    if precision == "day":
        s = _ts(back(a))
        return s, s + DAY
    return _ts(back(a)), _ts(back(b))


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
    refs: list[TimeRef] = []
    for a, b in _pieces(text):
        for r in _ground_piece(text[a:b], obs):
            refs.append(dataclasses.replace(r, span=(r.span[0] + a, r.span[1] + a)))
    return refs


def _pieces(text: str) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` pieces of ``text`` of at most about
    ``_PIECE`` characters, each cut after a line break (else a space) in its
    second half, so a time expression is rarely split."""
    out = []
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + _PIECE)
        if end < n:
            half = start + _PIECE // 2
            cut = text.rfind("\n", half, end)
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
    found: list[tuple[int, int, int, int, str, bool]] = []
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
            found.append((a, b, *res))
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    refs: list[TimeRef] = []
    taken_end = -1
    for a, b, start, end, precision, relative in found:
        if a < taken_end or start >= end:
            continue
        taken_end = b
        since = _SINCE_RE.search(text, max(0, a - 16), a)
        if since is not None:
            a = since.start()
            if relative and start >= _ts(obs) + DAY and precision in _YEARLY:
                start, end = _year_earlier(start, end, precision)
            refs.append(
                TimeRef(
                    text=text[a:b],
                    start=start,
                    end=max(_ts(obs) + DAY, end),
                    precision="range",
                    relative=True,
                    span=(a, b),
                    anchor_precision=precision,
                )
            )
        else:
            refs.append(TimeRef(text[a:b], start, end, precision, relative, (a, b)))
    return refs


# --------------------------------------------------------------------------- describe


def _fmt_day(ts: int) -> str:
    d = _day_of(ts)
    return f"{d.day} {calendar.month_name[d.month]} {d.year}"


def _fmt_month(ts: int) -> str:
    d = _day_of(ts)
    return f"{calendar.month_name[d.month]} {d.year}"


def _fmt(ts: int, precision: str) -> str:
    if precision in ("week", "few_weeks"):
        return f"the week of {_fmt_day(ts)}"
    if precision in ("weekend", "few_weekends"):
        return f"the weekend of {_fmt_day(ts)}"
    if precision in ("month", "few_months"):
        return _fmt_month(ts)
    if precision in ("year", "few_years"):
        return str(_day_of(ts).year)
    if precision == "decade":
        return f"the {_day_of(ts).year}s"
    if precision == "season":
        d = _day_of(ts)
        name = {3: "spring", 6: "summer", 9: "autumn", 12: "winter"}.get(d.month, "season")
        return (
            f"winter {d.year}/{(d.year + 1) % 100:02d}" if name == "winter" else f"{name} {d.year}"
        )
    return _fmt_day(ts)


_FEW_STEP = {
    "few_days": DAY,
    "few_weeks": 7 * DAY,
    "few_weekends": 7 * DAY,
}


def describe(ref: TimeRef) -> str:
    """A short human rendering of a grounded reference, e.g. ``"7 May 2023"``,
    ``"the week of 1 May 2023"``, ``"May 2023"``, ``"since 2016"``."""
    p = ref.precision
    if p == "part_of_day":
        hour = (ref.start % DAY) // 3600
        part = {6: "morning", 12: "afternoon"}.get(
            hour, "night" if ref.end - ref.start > 6 * 3600 else "evening"
        )
        return f"the {part} of {_fmt_day(ref.start)}"
    if p == "part_of_month":
        d = _day_of(ref.start)
        mod = {1: "early", 11: "mid"}.get(d.day, "late")
        return f"{mod} {_fmt_month(ref.start)}"
    if p == "range":
        if ref.anchor_precision:  # "since X"
            return f"since {_fmt(ref.start, ref.anchor_precision)}"
        return f"{_fmt_day(ref.start)} to {_fmt_day(ref.end - DAY)}"
    if p.startswith("few_"):
        if p in _FEW_STEP:
            last = ref.end - _FEW_STEP[p]
        elif p == "few_months":
            last = ref.end - DAY
        else:
            last = ref.end - DAY
        return f"between {_fmt(ref.start, p)} and {_fmt(last, p)}"
    return _fmt(ref.start, p)


# --------------------------------------------------------------------------- timestamps

_TIME_RE = r"(?P<hh>\d{1,2})(?::(?P<mi>\d{2})(?::(?P<ss>\d{2}))?)?\s*(?P<ampm>[ap]\.?m\.?)?"
_ISO_RE = re.compile(
    r"(?P<y>\d{4})(?:(?P<dash>-?)(?P<mo>\d{2})(?:(?P=dash)(?P<d>\d{2})"
    r"(?:[T\s](?P<hh>\d{2})(?::?(?P<mi>\d{2})(?::?(?P<ss>\d{2})(?:[.,](?P<frac>\d+))?)?)?"
    r"\s*(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?)?)?)?",
    _FLAGS,
)
_SLASH_RE = re.compile(
    r"(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})(?:[T\s]+(?:at\s+)?" + _TIME_RE + r")?",
    _FLAGS,
)
_WD_PREFIX = r"(?:" + _WEEKDAY_RE + r",?\s+)?"
_WRITTEN_DATE = (
    _WD_PREFIX
    + r"(?:(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<mon>"
    + _MONTH_RE
    + r")|(?P<mon2>"
    + _MONTH_RE
    + r")\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?)\s*,?\s*(?P<y>\d{4})"
)
_TIME_FIRST_RE = re.compile(
    r"(?:(?P<hh>\d{1,2})(?::(?P<mi>\d{2})(?::(?P<ss>\d{2}))?)?\s*(?P<ampm>[ap]\.?m\.?)?\s*,?\s*"
    r"(?:on\s+)?)?" + _WRITTEN_DATE,
    _FLAGS,
)
_DATE_FIRST_RE = re.compile(
    _WRITTEN_DATE + r"(?:\s*,?\s*(?:at\s+)?" + _TIME_RE + r")?",
    _FLAGS,
)


def _hms(m: re.Match[str], s: str) -> tuple[int, int, int]:
    hh = int(m.group("hh") or 0)
    mi = int(m.group("mi") or 0)
    ss = int(m.group("ss") or 0)
    ampm = (m.group("ampm") or "").replace(".", "").lower()
    if ampm:
        if not 1 <= hh <= 12:
            raise ValueError(f"invalid 12-hour clock time in timestamp {s!r}")
        hh = hh % 12 + (12 if ampm == "pm" else 0)
    if m.group("hh") is not None and m.group("mi") is None and not ampm:
        raise ValueError(f"ambiguous time in timestamp {s!r}")
    if not (0 <= hh <= 23 and 0 <= mi <= 59 and 0 <= ss <= 60):
        raise ValueError(f"invalid time of day in timestamp {s!r}")
    return hh, mi, min(ss, 59)


def _compose(s: str, y: int, mo: int, d: int, hh: int, mi: int, ss: int, offset: int) -> int:
    try:
        base = date(y, mo, d)
    except ValueError as exc:
        raise ValueError(f"invalid date in timestamp {s!r}: {exc}") from None
    return _ts(base) + hh * 3600 + mi * 60 + ss - offset


def parse_timestamp(s: str) -> int:
    """Parse a timestamp string into Unix seconds (UTC).

    Accepts ISO 8601 (``2023-05-08``, ``2023-05-08T13:56:00Z``, offsets,
    fractions, basic form, ``2023-05``, ``2023``), ``YYYY/MM/DD [time]`` and
    written dates with an optional time before (``1:56 pm on 8 May, 2023``) or
    after (``May 8, 2023 at 1:56 pm``). Times without an offset are UTC.

    Raises:
        ValueError: the string is not one of the accepted forms, or names an
            impossible date or time.
    """
    if not isinstance(s, str):
        raise TypeError(f"timestamp must be a str, got {type(s).__name__}")
    raw = " ".join(s.strip().split())
    if not raw:
        raise ValueError("empty timestamp string")
    m = _ISO_RE.fullmatch(raw)
    if m is not None and (m.group("dash") == "-" or m.group("d") is None or len(raw) >= 8):
        y = int(m.group("y"))
        mo = int(m.group("mo") or 1)
        d = int(m.group("d") or 1)
        if m.group("mo") is not None and m.group("d") is None and m.group("dash") != "-":
            raise ValueError(f"unrecognised timestamp {s!r}: use YYYY-MM for a month")
        hh = int(m.group("hh") or 0)
        mi = int(m.group("mi") or 0)
        ss = int(m.group("ss") or 0)
        if not (0 <= hh <= 24 and 0 <= mi <= 59 and 0 <= ss <= 60):
            raise ValueError(f"invalid time of day in timestamp {s!r}")
        if hh == 24 and (mi or ss):
            raise ValueError(f"invalid time of day in timestamp {s!r}")
        offset = 0
        tz = m.group("tz")
        if tz and tz.upper() != "Z":
            digits = tz[1:].replace(":", "")
            oh, om = int(digits[:2]), int(digits[2:] or 0)
            if oh > 23 or om > 59:
                raise ValueError(f"invalid UTC offset in timestamp {s!r}")
            offset = (oh * 3600 + om * 60) * (1 if tz[0] == "+" else -1)
        return _compose(s, y, mo, d, hh, mi, min(ss, 59), offset)
    for rx in (_SLASH_RE, _DATE_FIRST_RE, _TIME_FIRST_RE):
        m = rx.fullmatch(raw)
        if m is None:
            continue
        y = int(m.group("y"))
        if "mon" in rx.groupindex:
            mo = _month_num(_g(m, "mon", "mon2") or "")
            d = int(_g(m, "d", "d2") or "0")
        else:
            mo, d = int(m.group("mo")), int(m.group("d"))
        hh, mi, ss = _hms(m, s)
        return _compose(s, y, mo, d, hh, mi, ss, 0)
    raise ValueError(
        f"unrecognised timestamp {s!r}: expected ISO 8601 (2023-05-08T13:56:00Z), "
        "YYYY/MM/DD, or a written date such as '1:56 pm on 8 May, 2023' or 'May 8, 2023'"
    )


def to_timestamp(x: int | float | datetime | date | str) -> int:
    """Unix seconds (UTC) from an int, a finite float (floored), a ``datetime``
    (naive means UTC), a ``date`` (midnight UTC) or a string (:func:`parse_timestamp`)."""
    if isinstance(x, bool):
        raise TypeError("a bool is not a timestamp")
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"timestamp must be finite, got {x!r}")
        return math.floor(x)
    if isinstance(x, datetime):
        if x.tzinfo is None or x.utcoffset() is None:
            x = x.replace(tzinfo=timezone.utc)
        delta = x - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return delta.days * DAY + delta.seconds
    if isinstance(x, date):
        return _ts(x)
    if isinstance(x, str):
        return parse_timestamp(x)
    raise TypeError(f"cannot convert {type(x).__name__} to a timestamp")


# --------------------------------------------------------------------------- query cues


class TimeCues(TypedDict):
    """What :func:`query_time_cues` found in a query.

    ``score`` is a temporal-need estimate in [0, 1] for the router; ``recency``
    says the query prefers recent memories; ``refs`` are the time expressions
    grounded in the query (relative ones only when ``now`` was given);
    ``constraint`` is the hull ``[start, end)`` of those refs, or None.
    """

    temporal: bool
    score: float
    asks_when: bool
    asks_duration: bool
    asks_order: bool
    recency: bool
    cues: list[str]
    refs: list[TimeRef]
    constraint: tuple[int, int] | None


_CUES: list[tuple[str, str, float, re.Pattern[str]]] = [
    # (name, family, weight, pattern)
    ("when", "when", 0.95, re.compile(r"^\W*(?:and\s+|so\s+|but\s+)?when\b", _FLAGS)),
    ("since_when", "when", 0.95, re.compile(r"\bsince\s+when\b", _FLAGS)),
    (
        "what_time",
        "when",
        0.95,
        re.compile(
            r"\b(?:what|which)\s+(?:date|day|time|year|month|week|weekend|season|decade|"
            r"day\s+of\s+the\s+week)\b",
            _FLAGS,
        ),
    ),
    (
        "on_what_date",
        "when",
        0.9,
        re.compile(r"\b(?:on|in|at)\s+what\s+(?:date|day|year)\b", _FLAGS),
    ),
    ("when_inner", "when", 0.55, re.compile(r"\bwhen\b", _FLAGS)),
    (
        "how_long",
        "duration",
        0.9,
        re.compile(
            r"\bhow\s+(?:long|many\s+(?:days|weeks|weekends|months|years|times)|often|recently|"
            r"soon|old)\b",
            _FLAGS,
        ),
    ),
    ("how_long_ago", "duration", 0.95, re.compile(r"\bhow\s+long\s+ago\b", _FLAGS)),
    ("date_word", "when", 0.6, re.compile(r"\b(?:date|dates|dated|timeline|schedule)\b", _FLAGS)),
    (
        "before_after",
        "order",
        0.7,
        re.compile(
            r"\b(?:before|after|prior\s+to|earlier\s+than|later\s+than|until|since)\b", _FLAGS
        ),
    ),
    (
        "first_last",
        "order",
        0.75,
        re.compile(
            r"\b(?:(?:the\s+)?(?:first|last|previous|next|latest|earliest|final)\s+time|"
            r"for\s+the\s+first\s+time|first|earliest|initially|originally|in\s+what\s+order|"
            r"which\s+came\s+first|in\s+order|chronolog\w*|sequence)\b",
            _FLAGS,
        ),
    ),
    (
        "recency",
        "recency",
        0.6,
        re.compile(
            r"\b(?:latest|most\s+recent(?:ly)?|recently|lately|currently|nowadays|these\s+days|"
            r"right\s+now|now|still|anymore|any\s+more|these\s+days|up\s+to\s+date|current|"
            r"last\s+(?:thing|one|update))\b",
            _FLAGS,
        ),
    ),
    (
        "time_word",
        "when",
        0.5,
        re.compile(
            r"\b(?:ago|yesterday|today|tomorrow|tonight|weekend|week|month|year|years|morning|"
            r"evening|afternoon|night|season|summer|winter|spring|autumn|fall|birthday|"
            r"anniversary|holiday|holidays|vacation)\b",
            _FLAGS,
        ),
    ),
]


_LAST_RE = re.compile(r"\b(?:last|latest|most\s+recent)\b", _FLAGS)


_LAST_RE = re.compile(r"\b(?:last|latest|most\s+recent)\b", _FLAGS)


def query_time_cues(query: str, *, now: int | None = None) -> TimeCues:
    """Detect whether ``query`` asks about time, and any time constraint in it.

    Deterministic and regex-only. ``score`` is the maximum weight of the cues
    found (0.85 at least when the query names a time itself), so "When did
    Caroline go to the support group?" scores 0.95 and "What is Caroline's
    identity?" scores 0. Time expressions are grounded against ``now`` when it
    is given; otherwise only absolute ones ("in 2022", "on 8 May 2023") are kept.
    """
    q = query if isinstance(query, str) else ""
    cues: list[str] = []
    families: set[str] = set()
    score = 0.0
    for name, family, weight, rx in _CUES:
        if rx.search(q):
            if name == "when_inner" and "when" in cues:
                continue
            cues.append(name)
            families.add(family)
            score = max(score, weight)
    anchor = now if now is not None else _ts(date(2000, 1, 1))
    refs = [r for r in ground(q, anchor) if now is not None or not r.relative]
    if refs:
        cues.append("explicit_time")
        score = max(score, 0.85)
    constraint = (min(r.start for r in refs), max(r.end for r in refs)) if refs else None
    return TimeCues(
        temporal=score >= 0.5,
        score=score,
        asks_when="when" in families
        and any(
            c in cues for c in ("when", "since_when", "what_time", "on_what_date", "when_inner")
        ),
        asks_duration="duration" in families,
        asks_order="order" in families,
        recency="recency" in families or ("first_last" in cues and _LAST_RE.search(q) is not None),
        cues=cues,
        refs=refs,
        constraint=constraint,
    )


# --------------------------------------------------------------------------- facts that change


def event_time(observed_at: int | None, refs: Sequence[TimeRef]) -> int | None:
    """When the fact an observation states became true: the start of the first
    time its text grounds ("I switched to soy yesterday": the day before), else
    the observation time itself."""
    return refs[0].start if refs else observed_at


class FactTime(NamedTuple):
    """Which time a query asks facts to hold at (see :func:`query_fact_time`).

    ``stance`` is ``"present"`` (the facts that hold at ``at``, or the latest
    ones when ``at`` is None), ``"dated"`` (the ones that held in the window
    ``[at, until)``), ``"past"`` (what held before a change: "before she
    switched", "used to") or ``"neutral"`` (nothing says which).
    """

    stance: str
    at: int | None = None
    until: int | None = None


# Say "as things stand": explicit present words and present-tense auxiliaries.
_PRESENT_RE = re.compile(
    r"\b(?:now|nowadays|currently|current|these\s+days|at\s+the\s+moment|at\s+present|"
    r"presently|right\s+now|today|still|any\s*more|latest|is|are|am|isn't|aren't|does|do|"
    r"doesn't|don't|has|have|hasn't|haven't)\b",
    _FLAGS,
)
# Point at what held before a change, without naming a time. A plain past
# tense does not ("What did she switch to?" asks for the new value).
_PAST_RE = re.compile(
    r"\b(?:before|used\s+to|previously|originally|formerly|at\s+first|initially|"
    r"in\s+the\s+past|back\s+then|earlier|prior\s+to|former|previous)\b",
    _FLAGS,
)


def query_fact_time(query: str, cues: TimeCues, *, now: int | None = None) -> FactTime:
    """The time a query wants facts to be valid at, from its time cues.

    A time the query names wins ("in February 2026": the window); then words
    that point before a change; then present words or a present tense (at
    ``now`` when given, else the latest state); otherwise neutral.
    """
    q = query if isinstance(query, str) else ""
    window = cues["constraint"]
    if window is not None:
        return FactTime("dated", window[0], window[1])
    if _PAST_RE.search(q):
        return FactTime("past")
    if _PRESENT_RE.search(q):
        return FactTime("present", now)
    return FactTime("neutral")

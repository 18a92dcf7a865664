"""The calendar that grounding and timestamp parsing share.

Part of the frozen grounding oracle (see the package docstring).
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

__all__ = [
    "AMBIGUOUS_WD",
    "AMOUNT_RE",
    "DAY",
    "FLAGS",
    "MONTH_FULL_RE",
    "MONTH_RE",
    "PARTS",
    "SEASONS",
    "UNIT_RE",
    "WEEKDAYS",
    "WEEKDAY_RE",
    "add_months",
    "day_iv",
    "day_of",
    "day_start",
    "first_group",
    "monday_of",
    "month_iv",
    "month_num",
    "nearest_year",
    "parse_amount",
    "season_iv",
    "week_iv",
    "year_iv",
]

DAY = 86_400
_EPOCH_ORD = date(1970, 1, 1).toordinal()


# --------------------------------------------------------------------------- vocabulary

_MONTHS: dict[str, int] = {}
for _i, _name in enumerate(calendar.month_name):
    if _i:
        _MONTHS[_name.lower()] = _i
        _MONTHS[_name[:3].lower()] = _i
_MONTHS["sept"] = 9
MONTH_RE = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
MONTH_FULL_RE = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan\.|feb\.|mar\.|apr\.|aug\.|sept\.|sep\.|oct\.|nov\.|dec\.|"
    r"jan|feb|aug|sept|oct|nov|dec)"
)

WEEKDAYS: dict[str, int] = {
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
AMBIGUOUS_WD = frozenset({"wed", "sat", "sun", "mon"})
WEEKDAY_RE = (
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
AMOUNT_RE = (
    rf"(?P<n>\d{{1,3}}|{_NUM_WORD_RE}|an?|a\s+couple(?:\s+of)?|a\s+few|couple(?:\s+of)?|few|"
    r"several)"
)
UNIT_RE = r"(?P<unit>days?|weeks?|weekends?|months?|years?)"

SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

PARTS: dict[str, tuple[int, int]] = {  # hours from the start of the day
    "morning": (6, 12),
    "afternoon": (12, 18),
    "evening": (18, 24),
    "night": (18, 30),
}

FLAGS = re.IGNORECASE


def parse_amount(raw: str) -> tuple[int, int]:
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


def month_num(raw: str) -> int:
    return _MONTHS[raw.rstrip(".").lower()]


def first_group(m: re.Match[str], *names: str) -> str | None:
    """The first participating group among ``names`` (alternations reuse roles)."""
    index = m.re.groupindex
    for name in names:
        v = m.group(name) if name in index else None
        if v is not None:
            return v
    return None


# --------------------------------------------------------------------------- calendar helpers


def day_start(d: date) -> int:
    return (d.toordinal() - _EPOCH_ORD) * DAY


def day_of(ts: int) -> date:
    return date.fromordinal(ts // DAY + _EPOCH_ORD)


def monday_of(d: date) -> date:
    return d - timedelta(days=d.weekday())


def add_months(year: int, month: int, n: int) -> tuple[int, int]:
    idx = year * 12 + (month - 1) + n
    return idx // 12, idx % 12 + 1


def month_iv(year: int, month: int) -> tuple[int, int]:
    ny, nm = add_months(year, month, 1)
    return day_start(date(year, month, 1)), day_start(date(ny, nm, 1))


def year_iv(year: int) -> tuple[int, int]:
    return day_start(date(year, 1, 1)), day_start(date(year + 1, 1, 1))


def day_iv(d: date) -> tuple[int, int]:
    t = day_start(d)
    return t, t + DAY


def week_iv(d: date) -> tuple[int, int]:
    t = day_start(monday_of(d))
    return t, t + 7 * DAY


def season_iv(season_start_year: int, first_month: int) -> tuple[int, int]:
    y2, m2 = add_months(season_start_year, first_month, 3)
    return day_start(date(season_start_year, first_month, 1)), day_start(date(y2, m2, 1))


def nearest_year(obs: date, month: int, day: int = 15) -> int:
    """The year Y in {y-1, y, y+1} making (Y, month, day) nearest to ``obs``."""
    best_year, best_dist = obs.year, None
    for y in (obs.year - 1, obs.year, obs.year + 1):
        dd = min(day, calendar.monthrange(y, month)[1])
        dist = abs(date(y, month, dd).toordinal() - obs.toordinal())
        if best_dist is None or dist < best_dist:
            best_year, best_dist = y, dist
    return best_year

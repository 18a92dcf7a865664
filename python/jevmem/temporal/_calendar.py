"""The calendar that timestamp parsing and the query cues share.

Internal to :mod:`jevmem.temporal`: month and weekday names with the regexes
that match them, and the Unix seconds of a UTC day. (Grounding keeps its own
calendar in the core.)
"""

from __future__ import annotations

import re
from datetime import date

__all__ = [
    "DAY",
    "FLAGS",
    "MONTH_NAMES",
    "MONTH_RE",
    "WEEKDAY_RE",
    "day_of",
    "day_start",
    "first_group",
    "month_num",
]

DAY = 86_400
_EPOCH_ORD = date(1970, 1, 1).toordinal()


# --------------------------------------------------------------------------- vocabulary

#: English month names by number (index 0 empty). Fixed rather than
#: ``calendar.month_name``, which asks the C locale (a strftime call) on every
#: lookup and would follow a process's LC_TIME into other languages.
MONTH_NAMES: tuple[str, ...] = (
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

_MONTHS: dict[str, int] = {}
for _i, _name in enumerate(MONTH_NAMES):
    if _i:
        _MONTHS[_name.lower()] = _i
        _MONTHS[_name[:3].lower()] = _i
_MONTHS["sept"] = 9
MONTH_RE = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
WEEKDAY_RE = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"tues|tue|thurs|thur|thu|fri|mon|wed|sat|sun)\.?"
)

FLAGS = re.IGNORECASE


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

"""The resolvers of the grounding pattern table (part of the frozen grounding oracle).

Each ``resolve_*`` function takes a match of one pattern family and the
observation day and returns ``(start, end, precision, relative)``, or None
to reject the match; the oracle's ``_grounding`` pairs them with their
patterns.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, timedelta

from ._calendar import (
    AMBIGUOUS_WD,
    DAY,
    PARTS,
    SEASONS,
    WEEKDAYS,
    add_months,
    day_iv,
    day_start,
    first_group,
    monday_of,
    month_iv,
    month_num,
    nearest_year,
    parse_amount,
    season_iv,
    week_iv,
    year_iv,
)

__all__ = [
    "Resolved",
    "Resolver",
    "resolve_ago",
    "resolve_anaphoric_unit",
    "resolve_day_month",
    "resolve_decade",
    "resolve_holiday",
    "resolve_holiday_before",
    "resolve_iso_day",
    "resolve_month",
    "resolve_month_range",
    "resolve_other_day",
    "resolve_part_of_day",
    "resolve_rel_unit",
    "resolve_season",
    "resolve_simple_day",
    "resolve_week_of_month",
    "resolve_weekday",
    "resolve_window",
    "resolve_year",
]

# A resolver returns (start, end, precision, relative) or None to reject the match.
Resolved = tuple[int, int, str, bool]
Resolver = Callable[["re.Match[str]", date], "Resolved | None"]


def _weekday_of(m: re.Match[str]) -> int | None:
    raw = first_group(m, "wd", "wdx") or ""
    key = raw.rstrip(".").lower()
    if key in AMBIGUOUS_WD and (len(raw.rstrip(".")) == 3 and not raw[0].isupper()):
        return None
    return WEEKDAYS[key]


def resolve_simple_day(m: re.Match[str], obs: date) -> Resolved | None:
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
    s, e = day_iv(obs + timedelta(days=offsets[w]))
    return s, e, "day", True


def resolve_part_of_day(m: re.Match[str], obs: date) -> Resolved | None:
    rel = (first_group(m, "rel", "rel_t") or "").lower()
    part = (first_group(m, "part", "part_t") or "").lower()
    if rel == "last":
        if part != "night":
            return None
        base = obs - timedelta(days=1)
    else:
        base = obs + timedelta(days={"yesterday": -1, "tomorrow": 1}.get(rel, 0))
    h0, h1 = PARTS[part]
    t = day_start(base)
    return t + h0 * 3600, t + h1 * 3600, "part_of_day", True


def resolve_weekday(m: re.Match[str], obs: date) -> Resolved | None:
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
    s, e = day_iv(obs + timedelta(days=delta))
    return s, e, "day", True


def resolve_rel_unit(m: re.Match[str], obs: date) -> Resolved | None:
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


def _shift_unit(obs: date, unit: str, step: int, *, past_weekend: bool = False) -> Resolved:
    if unit == "week":
        s, e = week_iv(obs + timedelta(days=7 * step))
        return s, e, "week", True
    if unit == "weekend":
        if past_weekend:
            step = 0 if obs.weekday() >= 5 else -1
        t = day_start(monday_of(obs) + timedelta(days=5 + 7 * step))
        return t, t + 2 * DAY, "weekend", True
    if unit == "month":
        y, mo = add_months(obs.year, obs.month, step)
        s, e = month_iv(y, mo)
        return s, e, "month", True
    if unit == "day":
        s, e = day_iv(obs + timedelta(days=step))
        return s, e, "day", True
    s, e = year_iv(obs.year + step)
    return s, e, "year", True


def resolve_anaphoric_unit(m: re.Match[str], obs: date) -> Resolved | None:
    unit = m.group("unit").lower()
    direction = m.group("dir").lower()
    step = -1 if direction == "before" else 1
    if m.group("last"):
        step = -2
    return _shift_unit(obs, unit, step)


def _unit_interval(obs: date, unit: str, n: int) -> tuple[int, int]:
    """Interval of ``n`` units from D (n < 0: in the past)."""
    if unit == "day":
        return day_iv(obs + timedelta(days=n))
    if unit == "week":
        return week_iv(obs + timedelta(days=7 * n))
    if unit == "weekend":
        # 1 weekend ago = last weekend (Saturday = Monday of D's week - 2 days).
        t = day_start(monday_of(obs) + timedelta(days=7 * n + 5))
        return t, t + 2 * DAY
    if unit == "month":
        y, mo = add_months(obs.year, obs.month, n)
        return month_iv(y, mo)
    return year_iv(obs.year + n)


def resolve_ago(m: re.Match[str], obs: date) -> Resolved | None:
    ago, fut, fromnow = m.group("ago"), m.group("fut"), m.group("fromnow")
    if not (ago or fut or fromnow) or (ago and (fut or fromnow)):
        return None  # a bare duration ("for two weeks") is not a point in time
    lo, hi = parse_amount(m.group("n"))
    unit = m.group("unit").lower().rstrip("s")
    future = ago is None
    if hi == 0 or hi > 5000:
        return None
    # "two days from tomorrow": counted from the day the anchor names
    anchor = (m.group("anchor") or "").lower()
    obs += timedelta(days={"tomorrow": 1, "yesterday": -1}.get(anchor, 0))
    if future:
        a, b = _unit_interval(obs, unit, lo), _unit_interval(obs, unit, hi)
        start, end = a[0], b[1]
    else:
        a, b = _unit_interval(obs, unit, -hi), _unit_interval(obs, unit, -lo)
        start, end = a[0], b[1]
    if lo != hi:
        return start, end, f"few_{unit}s", True
    return start, end, unit, True


def resolve_other_day(m: re.Match[str], obs: date) -> Resolved | None:
    return day_start(obs - timedelta(days=7)), day_start(obs), "few_days", True


def _shift_day(obs: date, unit: str, n: int) -> date:
    """D moved by ``n`` units (months and years clamp the day of month)."""
    if unit == "day":
        return obs + timedelta(days=n)
    if unit in ("week", "weekend"):
        return obs + timedelta(days=7 * n)
    if unit == "month":
        y, mo = add_months(obs.year, obs.month, n)
    else:
        y, mo = obs.year + n, obs.month
    return date(y, mo, min(obs.day, calendar.monthrange(y, mo)[1]))


def resolve_window(m: re.Match[str], obs: date) -> Resolved | None:
    """A rolling window: "the past 3 weeks" (D-3w .. end of D), "the next few months"."""
    raw_unit = m.group("unit").lower()
    n = first_group(m, "n")
    hi = parse_amount(n)[1] if n else (5 if raw_unit.endswith("s") else 1)
    if hi == 0 or hi > 5000:
        return None
    unit = raw_unit.rstrip("s")
    if m.group("dir").lower() in ("past", "last"):
        return day_start(_shift_day(obs, unit, -hi)), day_start(obs) + DAY, "range", True
    return day_start(obs), day_start(_shift_day(obs, unit, hi)) + DAY, "range", True


def resolve_month(m: re.Match[str], obs: date) -> Resolved | None:
    month = month_num(first_group(m, "mon", "mon2", "mon3", "x") or "")
    rel = (first_group(m, "rel") or "").lower()
    year_s = first_group(m, "y", "y2")
    mod = (first_group(m, "mod") or "").lower()
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
        year, relative = nearest_year(obs, month), True
    s, e = month_iv(year, month)
    if mod:
        last = calendar.monthrange(year, month)[1]
        d0, d1 = {"early": (1, 11), "mid": (11, 21), "late": (21, last + 1)}[mod]
        return s + (d0 - 1) * DAY, s + (d1 - 1) * DAY, "part_of_month", relative
    return s, e, "month", relative


def resolve_month_range(m: re.Match[str], obs: date) -> Resolved | None:
    """From the first month's start to the last's end. A year given on one
    end sets the other's (the later month of the two in that year, or the
    year after / before it when the range crosses a new year); without
    either, the first month is the nearest one."""
    first = month_num(first_group(m, "ma", "ma2") or "")
    last = month_num(first_group(m, "mb", "mb2") or "")
    start_s, end_s = first_group(m, "ya", "ya2"), m.group("yb")
    wraps = last < first
    if start_s and end_s:
        start, end = int(start_s), int(end_s)
    elif start_s:
        start = int(start_s)
        end = start + wraps
    elif end_s:
        end = int(end_s)
        start = end - wraps
    else:
        start = nearest_year(obs, first)
        end = start + wraps
    if (end, last) < (start, first):
        return None
    return month_iv(start, first)[0], month_iv(end, last)[1], "month", not (start_s or end_s)


_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ORDINALS = {
    "first": 1,
    "1st": 1,
    "second": 2,
    "2nd": 2,
    "third": 3,
    "3rd": 3,
    "fourth": 4,
    "4th": 4,
}


def resolve_week_of_month(m: re.Match[str], obs: date) -> Resolved | None:
    """An ordinal week of a month: its days 1-7, 8-14, 15-21 or 22-28, or
    its last seven ("last", "final") [week]; an ordinal weekend: the month's
    first to fourth Saturday, or its last, and the Sunday after [weekend];
    an ordinal weekday: the month's first to fourth such day, or its last
    [day]. Without a year, the month nearest the observation."""
    month = month_num(m.group("mon"))
    year_s = m.group("y")
    year = int(year_s) if year_s else nearest_year(obs, month)
    days = calendar.monthrange(year, month)[1]
    nth = _ORDINALS.get(m.group("ord").lower(), 0)  # 0: the last
    unit = m.group("unit").lower()
    if unit != "week":
        weekday, length, precision = (
            (5, 2, "weekend") if unit == "weekend" else (_WEEKDAY_NAMES.index(unit), 1, "day")
        )
        first = 1 + (weekday - date(year, month, 1).weekday()) % 7
        day = first + 7 * (nth - 1 if nth else (days - first) // 7)
        start = day_start(date(year, month, day))
        return start, start + length * DAY, precision, not year_s
    first_day = 7 * (nth - 1) + 1 if nth else days - 6
    start = day_start(date(year, month, first_day))
    return start, start + 7 * DAY, "week", not year_s


def resolve_day_month(m: re.Match[str], obs: date) -> Resolved | None:
    month = month_num(first_group(m, "mon", "mon2") or "")
    day = int(first_group(m, "d", "d2") or "0")
    year_s = m.group("y")
    if year_s:
        year, relative = int(year_s), False
    else:
        if not 1 <= day <= 31:
            return None
        # the nearest year in which the date exists (ties: the earlier)
        years = [
            (abs(date(y, month, day).toordinal() - obs.toordinal()), y)
            for y in range(obs.year - 4, obs.year + 5)
            if 1 <= y <= 9999 and day <= calendar.monthrange(y, month)[1]
        ]
        if not years:
            return None
        year, relative = min(years)[1], True
    if day < 1 or day > calendar.monthrange(year, month)[1]:
        return None
    s, e = day_iv(date(year, month, day))
    return s, e, "day", relative


def resolve_iso_day(m: re.Match[str], obs: date) -> Resolved | None:
    y, mo, d = int(m.group("y")), int(m.group("mo")), int(m.group("d"))
    if not 1 <= mo <= 12 or not 1 <= d <= calendar.monthrange(y, mo)[1]:
        return None
    s, e = day_iv(date(y, mo, d))
    return s, e, "day", False


def resolve_year(m: re.Match[str], obs: date) -> Resolved | None:
    s, e = year_iv(int(m.group("y")))
    return s, e, "year", False


def resolve_decade(m: re.Match[str], obs: date) -> Resolved | None:
    raw = m.group("dec")
    if len(raw) == 2:
        decade = (1900 if int(raw) >= 30 else 2000) + int(raw)
    else:
        decade = int(raw)
    return (
        day_start(date(decade, 1, 1)),
        day_start(date(decade + 10, 1, 1)),
        "decade",
        len(raw) == 2,
    )


def _season_candidates(first_month: int, years: range) -> list[tuple[int, int]]:
    return [season_iv(y, first_month) for y in years]


def resolve_season(m: re.Match[str], obs: date) -> Resolved | None:
    first = SEASONS[m.group("season").lower()]
    rel = " ".join((m.group("rel") or "").lower().split())
    year_s = m.group("y")
    if not (rel or year_s or m.group("prep")):
        return None
    today = day_start(obs)
    if year_s:
        s, e = season_iv(int(year_s), first)
        return s, e, "season", False
    cands = _season_candidates(first, range(obs.year - 2, obs.year + 2))
    if rel in ("last", "this past", "past"):
        s, e = max(c for c in cands if c[1] <= today)
    elif rel == "next":
        s, e = min(c for c in cands if c[0] > today)
    elif rel == "this":
        if first == 12:
            s, e = next((c for c in cands if c[0] <= today < c[1]), season_iv(obs.year, 12))
        else:
            s, e = season_iv(obs.year, first)
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


def resolve_holiday(m: re.Match[str], obs: date) -> Resolved | None:
    name = " ".join(m.group("hol").lower().replace("\u2019", "'").split())
    rel = (m.group("rel") or "").lower()
    year_s = m.group("y")
    if year_s:
        s, e = day_iv(_holiday_date(name, int(year_s)))
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
    s, e = day_iv(d)
    return s, e, "day", True


def resolve_holiday_before(m: re.Match[str], obs: date) -> Resolved | None:
    """A holiday without a year at its latest on or before D: where "since
    <holiday>" starts when the nearest one lies ahead ("since Christmas" said
    in December is last year's; "since Thanksgiving" said in October last
    November's fourth Thursday, not the same date a year before)."""
    if m.group("y"):
        return None
    name = " ".join(m.group("hol").lower().replace("\u2019", "'").split())
    d = max(
        c for c in (_holiday_date(name, obs.year - 1), _holiday_date(name, obs.year)) if c <= obs
    )
    s, e = day_iv(d)
    return s, e, "day", True

"""Short human renderings of grounded references (internal to :mod:`jevmem.temporal`)."""

from __future__ import annotations

from functools import lru_cache

from jevmem.temporal._calendar import DAY, MONTH_NAMES, day_of
from jevmem.temporal._grounding import TimeRef

__all__ = ["describe"]


def _fmt_day(ts: int) -> str:
    d = day_of(ts)
    return f"{d.day} {MONTH_NAMES[d.month]} {d.year}"


def _fmt_month(ts: int) -> str:
    d = day_of(ts)
    return f"{MONTH_NAMES[d.month]} {d.year}"


def _fmt(ts: int, precision: str) -> str:
    if precision in ("week", "few_weeks"):
        return f"the week of {_fmt_day(ts)}"
    if precision in ("weekend", "few_weekends"):
        return f"the weekend of {_fmt_day(ts)}"
    if precision in ("month", "few_months"):
        return _fmt_month(ts)
    if precision in ("year", "few_years"):
        return str(day_of(ts).year)
    if precision == "decade":
        return f"the {day_of(ts).year}s"
    if precision == "season":
        d = day_of(ts)
        name = {3: "spring", 6: "summer", 9: "autumn", 12: "winter"}.get(d.month, "season")
        return (
            f"winter {d.year}/{(d.year + 1) % 100:02d}" if name == "winter" else f"{name} {d.year}"
        )
    return _fmt_day(ts)


#: How far the last unit of a fuzzy reference starts before its end: a
#: weekend is two days (Saturday and Sunday), so the last weekend of "a few
#: weekends ago" starts two days before the Monday that ends it.
_FEW_STEP = {
    "few_days": DAY,
    "few_weeks": 7 * DAY,
    "few_weekends": 2 * DAY,
}


@lru_cache(maxsize=8192)
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
        d = day_of(ref.start)
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
    first = _fmt(ref.start, p)
    if p in ("month", "year"):
        # a run of months or years ("from June to August 2023"): both ends
        final = _fmt(ref.end - DAY, p)
        if final != first:
            return f"{first} to {final}"
    return first

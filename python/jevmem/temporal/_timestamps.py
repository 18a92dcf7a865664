"""Timestamps: :func:`parse_timestamp` and :func:`to_timestamp`.

Internal to :mod:`jevmem.temporal`. Strings, numbers, dates and datetimes
to Unix seconds (UTC); the accepted forms are listed in
:mod:`jevmem.temporal`'s docstring.
"""

from __future__ import annotations

import math
import numbers
import re
from datetime import date, datetime, timezone

from jevmem.temporal._calendar import (
    DAY,
    FLAGS,
    MONTH_RE,
    WEEKDAY_RE,
    day_start,
    first_group,
    month_num,
)

__all__ = ["parse_timestamp", "to_timestamp"]

_TIME_RE = r"(?P<hh>\d{1,2})(?::(?P<mi>\d{2})(?::(?P<ss>\d{2}))?)?\s*(?P<ampm>[ap]\.?m\.?)?"
_ISO_RE = re.compile(
    r"(?P<y>\d{4})(?:(?P<dash>-?)(?P<mo>\d{2})(?:(?P=dash)(?P<d>\d{2})"
    r"(?:[T\s](?P<hh>\d{2})(?::?(?P<mi>\d{2})(?::?(?P<ss>\d{2})(?:[.,](?P<frac>\d+))?)?)?"
    r"\s*(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?)?)?)?",
    FLAGS,
)
_SLASH_RE = re.compile(
    r"(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})(?:[T\s]+(?:at\s+)?" + _TIME_RE + r")?",
    FLAGS,
)
_WD_PREFIX = r"(?:" + WEEKDAY_RE + r",?\s+)?"
_WRITTEN_DATE = (
    _WD_PREFIX
    + r"(?:(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<mon>"
    + MONTH_RE
    + r")|(?P<mon2>"
    + MONTH_RE
    + r")\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?)\s*,?\s*(?P<y>\d{4})"
)
_TIME_FIRST_RE = re.compile(
    r"(?:(?P<hh>\d{1,2})(?::(?P<mi>\d{2})(?::(?P<ss>\d{2}))?)?\s*(?P<ampm>[ap]\.?m\.?)?\s*,?\s*"
    r"(?:on\s+)?)?" + _WRITTEN_DATE,
    FLAGS,
)
_DATE_FIRST_RE = re.compile(
    _WRITTEN_DATE + r"(?:\s*,?\s*(?:at\s+)?" + _TIME_RE + r")?",
    FLAGS,
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
    return day_start(base) + hh * 3600 + mi * 60 + ss - offset


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
            mo = month_num(first_group(m, "mon", "mon2") or "")
            d = int(first_group(m, "d", "d2") or "0")
        else:
            mo, d = int(m.group("mo")), int(m.group("d"))
        hh, mi, ss = _hms(m, s)
        return _compose(s, y, mo, d, hh, mi, ss, 0)
    raise ValueError(
        f"unrecognised timestamp {s!r}: expected ISO 8601 (2023-05-08T13:56:00Z), "
        "YYYY/MM/DD, or a written date such as '1:56 pm on 8 May, 2023' or 'May 8, 2023'"
    )


def to_timestamp(x: int | float | datetime | date | str) -> int:
    """Unix seconds (UTC) from an int (a numpy integer too), a finite float
    (a numpy float too; floored), a ``datetime`` (naive means UTC), a ``date`` (midnight UTC) or
    a string (:func:`parse_timestamp`). A bool is refused."""
    if isinstance(x, bool):
        raise TypeError("a bool is not a timestamp")
    if isinstance(x, int):
        return x
    # numpy's integer scalars are Integral but not int (its float64 is a
    # float already); numpy's bool is not Integral, so it stays refused
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real) and not isinstance(x, int | float):
        # numpy's float32 and float16 (its float64 is a float already)
        x = float(x)
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
        return day_start(x)
    if isinstance(x, str):
        return parse_timestamp(x)
    raise TypeError(f"cannot convert {type(x).__name__} to a timestamp")

"""Grounding: :class:`TimeRef`, :data:`PRECISIONS` and :func:`ground`.

Internal to :mod:`jevmem.temporal`; import these names from there. The core
finds and resolves the expressions (`jevmem._core.ground_times`, the rules
the package docstring lists); this module gives them their Python type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jevmem import _core
from jevmem._core import TIME_PRECISIONS

__all__ = [
    "PRECISIONS",
    "TimeRef",
    "checked_observed_at",
    "ground",
    "ground_batch",
    "ground_tuples_batch",
    "time_refs_of",
]

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


def checked_observed_at(value: object) -> int:
    """``value`` as an observation time: an int within the core's calendar
    (TypeError, ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"observed_at must be an int (Unix seconds), got {value!r}")
    if not -(2**63) <= value < 2**63:  # beyond the core's integers: out of the calendar too
        raise ValueError(f"observed_at {value} is outside the supported calendar range")
    return value


def time_refs_of(text: str, rows: list[tuple[int, int, int, int, str, bool, str]]) -> list[TimeRef]:
    """The core's grounded rows for ``text`` as :class:`TimeRef` objects."""
    return [
        TimeRef(text[a:b], start, end, precision, relative, (a, b), anchor)
        for a, b, start, end, precision, relative, anchor in rows
    ]


def ground(text: str, observed_at: int) -> list[TimeRef]:
    """Find time expressions in ``text`` and resolve them against ``observed_at``.

    ``observed_at`` is the observation time in Unix seconds (UTC). Returns
    non-overlapping :class:`TimeRef` objects in text order (on overlap the
    earlier, then the longer, match wins). Never raises on any string ``text``;
    raises :class:`ValueError` / :class:`TypeError` only for a bad
    ``observed_at``. See the package docstring for the supported patterns.
    """
    at = checked_observed_at(observed_at)
    if not isinstance(text, str) or not text:
        _core.ground_times("", at)  # the range check still applies
        return []
    return time_refs_of(text, _core.ground_times(text, at))


def ground_batch(texts: Sequence[str], observed_at: Sequence[int | None]) -> list[list[TimeRef]]:
    """:func:`ground` over a column of texts and their observation times, in
    one call into the core (which releases the GIL for the whole batch); a text
    whose time is None gets no references."""
    return [
        [TimeRef(t, s, e, p, rel, (a, b), anc) for t, s, e, p, rel, a, b, anc in refs]
        for refs in ground_tuples_batch(texts, observed_at)
    ]


def ground_tuples_batch(
    texts: Sequence[str], observed_at: Sequence[int | None]
) -> list[list[tuple[str, int, int, str, bool, int, int, str]]]:
    """:func:`ground_batch`'s references as plain tuples, ``(text, start,
    end, precision, relative, span start, span end, anchor_precision)``: what
    the store keeps, without a :class:`TimeRef` per reference on the write path."""
    ats = [None if at is None else checked_observed_at(at) for at in observed_at]
    rows = _core.ground_times_batch(list(texts), ats)
    return [
        [
            (text[a:b], start, end, precision, relative, a, b, anchor)
            for a, b, start, end, precision, relative, anchor in r
        ]
        for text, r in zip(texts, rows, strict=True)
    ]

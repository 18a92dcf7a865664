"""What a query asks about time (internal to :mod:`jevmem.temporal`); the
rules run in the core (`jevmem_core::cues`).

:func:`query_time_cues` (when / how long / order / recency, and any time
the query names) and, for facts that change, :func:`event_time` and
:func:`query_fact_time` (which time the facts a query asks about should
hold at).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, TypedDict

from jevmem import _core
from jevmem.temporal._grounding import TimeRef, checked_observed_at, time_refs_of

__all__ = [
    "FactTime",
    "TimeCues",
    "event_time",
    "query_fact_time",
    "query_time_cues",
    "time_cues_of",
]


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


def query_time_cues(query: str, *, now: int | None = None) -> TimeCues:
    """Detect whether ``query`` asks about time, and any time constraint in it.

    Deterministic and pattern-only, in the core (`jevmem._core.query_time_cues`):
    cues for "when" (0.95 for a question that opens with it, 0.55 inside),
    "since when", "what date/day/time/year...", "how long/often/old" (duration),
    "before/after/until/since" and "first/last/earliest..." (order), "latest,
    currently, now, still..." (recency), and time words ("ago, yesterday,
    weekend, birthday..."). ``score`` is the maximum weight of the cues found
    (0.85 at least when the query names a time itself), so "When did
    Caroline go to the support group?" scores 0.95 and "What is Caroline's
    identity?" scores 0. Time expressions are grounded against ``now`` when it
    is given; otherwise only absolute ones ("in 2022", "on 8 May 2023") are kept.
    """
    q = query if isinstance(query, str) else ""
    if now is not None:
        checked_observed_at(now)  # a bad `now` raises as `ground` would
    return time_cues_of(q, _core.query_time_cues(q, now))


def time_cues_of(query: str, found: Any) -> TimeCues:
    """`TimeCues` from the core's tuple for ``query`` (`jevmem._core.query_time_cues`,
    or a plan's: `jevmem._core.ReadSession.plan`)."""
    temporal, score, when, duration, order, recency, cues, refs, constraint = found
    return TimeCues(
        temporal=temporal,
        score=score,
        asks_when=when,
        asks_duration=duration,
        asks_order=order,
        recency=recency,
        cues=list(cues),
        refs=time_refs_of(query, refs),
        constraint=constraint,
    )


# --------------------------------------------------------------------------- facts that change


def event_time(observed_at: int | None, refs: Sequence[TimeRef]) -> int | None:
    """When the fact an observation states became true: the start of the
    latest time its text grounds that begins at or before the observation
    ("after years in Porto since 2016, I moved last month": last month; "I
    switched to soy yesterday": the day before), else the observation time
    itself. A time ahead is an event the fact is about ("my appointment is on
    June 3"), not when it began. Untimed: the first time its text names."""
    if observed_at is None:
        return refs[0].start if refs else None
    past = [r.start for r in refs if r.start <= observed_at]
    return max(past) if past else observed_at


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


def query_fact_time(query: str, cues: TimeCues, *, now: int | None = None) -> FactTime:
    """The time a query wants facts to be valid at, from its time cues.

    A time the query names wins ("in February 2026": the window); then words
    that point before a change ("before", "used to", "previously", "at
    first"...; a plain past tense does not: "What did she switch to?" asks for
    the new value); then present words ("now", "currently", "still"...) or a
    present tense of the query's own ("is", "does", "has"..., and a plan's
    "should", "will", "can": a plan is made on what holds now; not one inside
    a report it asks about: in "Which days did I say my kids have swimming?"
    or "How many sizes have I mentioned?" the statements themselves are
    wanted, whatever changed since), at ``now`` when given, else the latest
    state; otherwise neutral. Decided in the core (`jevmem._core.query_fact_time`).
    """
    q = query if isinstance(query, str) else ""
    stance, at, until = _core.query_fact_time(q, cues["constraint"], now)
    return FactTime(stance, at, until)

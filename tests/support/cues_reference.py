"""What a query asks about time, as `jevmem.temporal._cues` computed it in
Python before the core took it over (`jevmem._core.query_time_cues` and
`query_fact_time`): the oracle of `tests/test_cues.py`, frozen at session 18.

:func:`query_time_cues` (when / how long / order / recency, and any time
the query names) and, for facts that change, :func:`event_time` and
:func:`query_fact_time` (which time the facts a query asks about should
hold at).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from typing import Any, NamedTuple, TypedDict

from jevmem.temporal import TimeRef, ground

FLAGS = re.IGNORECASE


def day_start(d: date) -> int:
    """Midnight UTC of ``d`` in Unix seconds."""
    return (d - date(1970, 1, 1)).days * 86_400


__all__ = [
    "FactTime",
    "TimeCues",
    "asks_for_a_time",
    "event_time",
    "query_fact_time",
    "query_time_cues",
]

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
    ("when", "when", 0.95, re.compile(r"^\W*(?:and\s+|so\s+|but\s+)?when\b", FLAGS)),
    ("since_when", "when", 0.95, re.compile(r"\bsince\s+when\b", FLAGS)),
    (
        "what_time",
        "when",
        0.95,
        re.compile(
            r"\b(?:what|which)\s+(?:date|day|time|year|month|week|weekend|season|decade|"
            r"day\s+of\s+the\s+week)\b",
            FLAGS,
        ),
    ),
    (
        "on_what_date",
        "when",
        0.9,
        re.compile(r"\b(?:on|in|at)\s+what\s+(?:date|day|year)\b", FLAGS),
    ),
    ("when_inner", "when", 0.55, re.compile(r"\bwhen\b", FLAGS)),
    (
        "how_long",
        "duration",
        0.9,
        re.compile(
            r"\bhow\s+(?:long|many\s+(?:days|weeks|weekends|months|years|times)|often|recently|"
            r"soon|old)\b",
            FLAGS,
        ),
    ),
    ("how_long_ago", "duration", 0.95, re.compile(r"\bhow\s+long\s+ago\b", FLAGS)),
    ("date_word", "when", 0.6, re.compile(r"\b(?:date|dates|dated|timeline|schedule)\b", FLAGS)),
    (
        "before_after",
        "order",
        0.7,
        re.compile(
            r"\b(?:before|after|prior\s+to|earlier\s+than|later\s+than|until|since)\b", FLAGS
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
            FLAGS,
        ),
    ),
    (
        "recent",
        "recency",
        0.6,
        re.compile(
            r"\b(?:latest|most\s+recent(?:ly)?|recently|lately|last\s+(?:thing|one|update))\b",
            FLAGS,
        ),
    ),
    (
        "present",
        "recency",
        0.6,
        re.compile(
            r"\b(?:currently|nowadays|these\s+days|right\s+now|now|still|anymore|any\s+more|"
            r"up\s+to\s+date|current)\b",
            FLAGS,
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
            FLAGS,
        ),
    ),
]


_LAST_RE = re.compile(r"\b(?:last|latest|most\s+recent)\b", FLAGS)


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
    anchor = now if now is not None else day_start(date(2000, 1, 1))
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


def asks_for_a_time(cues: Any) -> bool:
    """Whether turns that state a time get the plan's time hint: any time
    cue but the present's alone ("now", "currently", "still"); a recent
    event ("recently", "the latest") asks too."""
    return bool(cues["asks_when"] or any(c != "present" for c in cues["cues"]))


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


# Say "as things stand": explicit present words.
_PRESENT_RE = re.compile(
    r"\b(?:now|nowadays|currently|current|these\s+days|at\s+the\s+moment|at\s+present|"
    r"presently|right\s+now|today|still|any\s*more|latest)\b",
    FLAGS,
)
# A present tense says it too, unless the query asks what someone said.
_TENSE_RE = re.compile(
    r"\b(?:is|are|am|isn't|aren't|does|do|doesn't|don't|has|have|hasn't|haven't"
    r"|should|shall|will|must|can)\b",
    FLAGS,
)
# "did"/"didn't" and a subject of a word or two, right before a "do" or
# "have": the main verb of a past question ("what did I do"), not a present tense.
_DID_BEFORE_RE = re.compile(r"\bdid(?:n't)?\s+(?:\w+\s+){1,2}$", FLAGS)
_SAYING = (
    r"say|said|mention|mentioned|tell|told|share|shared|note|noted|state|stated|describe|"
    r"described|list|listed|bring\s+up|brought\s+up|recommend|recommended|suggest|suggested|"
    r"explain|explained|outline|outlined|propose|proposed|advise|advised"
)
_SAID = (
    r"said|mentioned|told|shared|noted|stated|described|listed|brought\s+up|recommended|"
    r"suggested|explained|outlined|proposed|advised"
)
# Ask what someone said, in a past or perfect tense ("did I say", "have I
# mentioned", "you recommended"): the statements themselves are wanted.
_REPORTED_RE = re.compile(
    rf"\b(?:(?:did|have|has|had)\s+(?:\w+\s+){{1,2}}(?:{_SAYING})"
    rf"|(?:i|you|we|he|she|they)\s+(?:{_SAID}))\b",
    FLAGS,
)
# Point at what held before a change, without naming a time. A plain past
# tense does not ("What did she switch to?" asks for the new value).
_PAST_RE = re.compile(
    r"\b(?:before|used\s+to|previously|originally|formerly|at\s+first|initially|"
    r"in\s+the\s+past|back\s+then|earlier|prior\s+to|former|previous)\b",
    FLAGS,
)


def _own_present_tense(q: str) -> bool:
    # a present-tense auxiliary before any report of what someone said
    tense = next(
        (
            m
            for m in _TENSE_RE.finditer(q)
            if not (m.group().lower() in ("do", "have") and _DID_BEFORE_RE.search(q[: m.start()]))
        ),
        None,
    )
    if tense is None:
        return False
    report = _REPORTED_RE.search(q)
    return report is None or tense.start() < report.start()


def query_fact_time(query: str, cues: TimeCues, *, now: int | None = None) -> FactTime:
    """The time a query wants facts to be valid at, from its time cues.

    A time the query names wins ("in February 2026": the window); then words
    that point before a change; then present words, or a present tense in a
    query that does not ask what someone said (at ``now`` when given, else
    the latest state); otherwise neutral.
    """
    q = query if isinstance(query, str) else ""
    window = cues["constraint"]
    if window is not None:
        return FactTime("dated", window[0], window[1])
    if _PAST_RE.search(q):
        return FactTime("past")
    if _PRESENT_RE.search(q) or _own_present_tense(q):
        return FactTime("present", now)
    return FactTime("neutral")

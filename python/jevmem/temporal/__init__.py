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
also accepts ints (numpy integers too; bools are refused), finite floats
(floored), ``datetime`` (naive = UTC) and ``date`` (midnight UTC).

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
* ``between <Month> [Year] and <Month> [Year]``, ``from <Month> [Year]
  to|through|till|until <Month> [Year]`` and ``<Month> [Year] - <Month> <Year>``
  (a dash or "to"; without "between" or "from" only before a year) = from the
  first month's start to the last's end; a year given at one end sets the
  other's (a range across a new year takes the year before or after), and
  without either the first month is the one nearest D [month].
* ``[the] first|second|third|fourth|1st|...|last|final week|weekend|<Weekday>
  of|in <Month> [Year]`` = the month's days 1-7, 8-14, 15-21, 22-28 or its
  last seven [week]; its first to fourth Saturday, or its last, and the
  Sunday after [weekend]; its first to fourth such weekday, or its last
  [day]; without a year, the month nearest D.
* ``8 May``, ``8th of May``, ``May 8th``, ``May 8`` with an optional ``[,]
  2023`` = that day; without a year, the occurrence nearest D [day]. A
  number after a quantifier ("all", "the", "these"...) before "may" or
  "march" and another word is a count ("all 3 may attend"), unless the month
  is capitalised ("the 3 May deadline").
  ``2023-05-08`` and ``2023/05/08`` [day].
* The year of a written date (a day, ``<Month> <Year>``, ``early|mid|late
  <Month> <Year>``, a range of months, an ordinal week of a month) is any of
  1000-2099 ("February 12, 1809"); one before 1900 followed by a plural noun
  is a count ("on May 5, 1500 people came" is May 5).
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
  on/at/for/over/during/since/until/before/after (text = the holiday, without
  the preposition): Christmas (Eve/Day), New Year's Eve/Day, Halloween,
  Valentine's Day, Independence Day / the Fourth of July, Thanksgiving (US,
  4th Thursday of November); bare = nearest D [day].
* ``since <any of the above>`` (or ``ever since``) = from that reference's
  start to the end of D; a month, season or ordinal week, weekend or weekday
  of a month without a year that would lie in the future is taken one year
  earlier, a day or holiday without a year its latest occurrence on or
  before D ("since Feb 29" the last leap year's, none before year 4)
  [range, with ``anchor_precision``].

Numbers are digits (up to 3) or words (a/an = 1, one ... twenty, thirty ...
ninety, and compounds such as "twenty-five"). Not supported (deliberately, too
ambiguous without tense or dialogue state): bare weekdays ("on Friday"), bare
month names ("May"), numeric dates other than year-first (``5/8/2023``),
clock times inside text, "recently", "a while ago".

Query cues
----------
:func:`query_time_cues` returns a :class:`TimeCues` typed dict telling whether a
query asks *when* something happened, *how long*, about *order*
(before/after/first/last time) or *recency*, with a score in [0, 1] for the
router's temporal need and any explicit time constraint found in the query.

Layout
------
This package's submodules are internal; import from :mod:`jevmem.temporal`.
``_calendar`` holds month and weekday names and UTC days, ``_grounding``
:func:`ground` (the core runs the pattern table: `jevmem._core.ground_times`),
``_describe`` :func:`describe`, ``_timestamps`` :func:`parse_timestamp` and
:func:`to_timestamp`, and ``_cues`` the query cues and fact times.
"""

from __future__ import annotations

from jevmem.temporal._cues import (
    FactTime,
    TimeCues,
    event_time,
    query_fact_time,
    query_time_cues,
    time_cues_of,
)
from jevmem.temporal._describe import describe
from jevmem.temporal._grounding import (
    PRECISIONS,
    TimeRef,
    ground,
    ground_batch,
    ground_tuples_batch,
)
from jevmem.temporal._timestamps import parse_timestamp, to_timestamp

__all__ = [
    "PRECISIONS",
    "FactTime",
    "TimeCues",
    "TimeRef",
    "describe",
    "event_time",
    "ground",
    "ground_batch",
    "ground_tuples_batch",
    "parse_timestamp",
    "query_fact_time",
    "query_time_cues",
    "time_cues_of",
    "to_timestamp",
]

"""Grounded temporal references, timestamps and query cues (jevmem.temporal)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jevmem.temporal import (
    PRECISIONS,
    TimeRef,
    describe,
    ground,
    parse_timestamp,
    query_fact_time,
    query_time_cues,
    to_timestamp,
)

DAY = 86_400
UTC = timezone.utc


def ts(y: int, m: int, d: int, hh: int = 0, mi: int = 0) -> int:
    return int(datetime(y, m, d, hh, mi, tzinfo=UTC).timestamp())


def day(y: int, m: int, d: int) -> tuple[int, int]:
    t = ts(y, m, d)
    return t, t + DAY


def month(y: int, m: int) -> tuple[int, int]:
    ny, nm = (y + 1, 1) if m == 12 else (y, m + 1)
    return ts(y, m, 1), ts(ny, nm, 1)


# LoCoMo's first session: Monday 8 May 2023, 13:56.
OBS = ts(2023, 5, 8, 13, 56)


def one(text: str, obs: int = OBS) -> TimeRef:
    refs = ground(text, obs)
    assert len(refs) == 1, (text, refs)
    return refs[0]


def iv(text: str, obs: int = OBS) -> tuple[int, int]:
    r = one(text, obs)
    return r.start, r.end


# --------------------------------------------------------------------------- parse_timestamp


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("2023-05-08", ts(2023, 5, 8)),
        ("2023-05-08T13:56", ts(2023, 5, 8, 13, 56)),
        ("2023-05-08T13:56:00Z", ts(2023, 5, 8, 13, 56)),
        ("2023-05-08 13:56:00.999z", ts(2023, 5, 8, 13, 56)),
        ("2023-05-08T13:56:00+02:00", ts(2023, 5, 8, 11, 56)),
        ("2023-05-08T13:56:00-0530", ts(2023, 5, 8, 19, 26)),
        ("20230508T135600Z", ts(2023, 5, 8, 13, 56)),
        ("20230508", ts(2023, 5, 8)),
        ("2023-05", ts(2023, 5, 1)),
        ("2023", ts(2023, 1, 1)),
        ("2024-02-29", ts(2024, 2, 29)),
        ("2023-05-08T24:00", ts(2023, 5, 9)),
        ("2023/5/8", ts(2023, 5, 8)),
        ("2023/05/08 1:56 pm", ts(2023, 5, 8, 13, 56)),
        ("8 May 2023", ts(2023, 5, 8)),
        ("8 May, 2023", ts(2023, 5, 8)),
        ("8th of May 2023", ts(2023, 5, 8)),
        ("May 8, 2023", ts(2023, 5, 8)),
        ("may 8th 2023", ts(2023, 5, 8)),
        ("Sept 3, 2022", ts(2022, 9, 3)),
        ("Monday, 8 May 2023", ts(2023, 5, 8)),
        ("1:56 pm on 8 May, 2023", ts(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", ts(2023, 9, 13, 0, 9)),
        ("12:30 pm on 1 January, 2024", ts(2024, 1, 1, 12, 30)),
        ("  10:37 AM on 27 June, 2023 ", ts(2023, 6, 27, 10, 37)),
        ("May 8, 2023 at 1:56 pm", ts(2023, 5, 8, 13, 56)),
        ("8 May 2023 13:56", ts(2023, 5, 8, 13, 56)),
    ],
)
def test_parse_timestamp_formats(s: str, expected: int) -> None:
    assert parse_timestamp(s) == expected


@pytest.mark.parametrize(
    "s",
    [
        "",
        "   ",
        "hello",
        "2023-02-29",
        "2023-13-01",
        "2023-05-08T25:00",
        "2023-05-08T13:60",
        "2023-05-08T13:56+25:00",
        "13:00 pm on 8 May, 2023",
        "0:30 am on 8 May, 2023",
        "31 April 2023",
        "8 Foo 2023",
        "yesterday",
        "5/8/2023",
        "202305",
        "2023-0508",
    ],
)
def test_parse_timestamp_rejects(s: str) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        parse_timestamp(s)


def test_parse_timestamp_type_error() -> None:
    with pytest.raises(TypeError):
        parse_timestamp(123)  # type: ignore[arg-type]


def test_to_timestamp() -> None:
    assert to_timestamp(5) == 5
    assert to_timestamp(5.9) == 5
    assert to_timestamp(-0.5) == -1
    assert to_timestamp(datetime(2023, 5, 8, 13, 56)) == OBS
    plus2 = timezone(timedelta(hours=2))
    assert to_timestamp(datetime(2023, 5, 8, 15, 56, tzinfo=plus2)) == OBS
    assert to_timestamp(date(2023, 5, 8)) == ts(2023, 5, 8)
    assert to_timestamp("1:56 pm on 8 May, 2023") == OBS
    for bad in (True, None, [1]):
        with pytest.raises(TypeError):
            to_timestamp(bad)  # type: ignore[arg-type]
    for nan in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            to_timestamp(nan)


@given(
    st.datetimes(
        min_value=datetime(1900, 1, 1),
        max_value=datetime(2200, 1, 1),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
        ),
    )
)
def test_parse_timestamp_roundtrips_iso(dt: datetime) -> None:
    dt = dt.replace(microsecond=0)
    expected = int(dt.timestamp())
    assert parse_timestamp(dt.isoformat()) == expected
    assert parse_timestamp(dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")) == expected
    assert to_timestamp(dt) == expected


# --------------------------------------------------------------------------- days and parts of days


def test_simple_days() -> None:
    assert iv("I went to a LGBTQ support group yesterday.") == day(2023, 5, 7)
    assert iv("today was fun") == day(2023, 5, 8)
    assert iv("see you Tomorrow!") == day(2023, 5, 9)
    assert iv("the day before yesterday") == day(2023, 5, 6)
    assert iv("the day after tomorrow") == day(2023, 5, 10)
    assert iv("the day before") == day(2023, 5, 7)
    r = one("yesterday")
    assert (r.text, r.precision, r.relative, r.span) == ("yesterday", "day", True, (0, 9))


def test_yesterday_across_boundaries() -> None:
    assert iv("yesterday", ts(2023, 1, 1, 0, 30)) == day(2022, 12, 31)
    assert iv("yesterday", ts(2024, 3, 1, 23, 59)) == day(2024, 2, 29)  # leap year
    assert iv("yesterday", ts(2023, 3, 1, 8)) == day(2023, 2, 28)
    assert iv("tomorrow", ts(2024, 2, 28, 8)) == day(2024, 2, 29)
    assert iv("tomorrow", ts(2023, 12, 31, 8)) == day(2024, 1, 1)


def test_parts_of_day() -> None:
    d = ts(2023, 5, 8)
    assert iv("this morning") == (d + 6 * 3600, d + 12 * 3600)
    assert iv("this afternoon") == (d + 12 * 3600, d + 18 * 3600)
    assert iv("this evening") == (d + 18 * 3600, d + DAY)
    assert iv("tonight") == (d + 18 * 3600, d + DAY + 6 * 3600)
    assert iv("Last night was amazing") == (d - 6 * 3600, d + 6 * 3600)
    assert iv("yesterday evening") == (d - 6 * 3600, d)
    assert iv("tomorrow morning") == (d + DAY + 6 * 3600, d + DAY + 12 * 3600)
    assert one("tonight").precision == "part_of_day"


# --------------------------------------------------------------------------- weekdays


def test_weekdays_relative_to_a_monday() -> None:
    # OBS is Monday 8 May 2023.
    assert iv("last Saturday") == day(2023, 5, 6)
    assert iv("last Monday") == day(2023, 5, 1)  # strictly before the observation day
    assert iv("this Monday") == day(2023, 5, 8)
    assert iv("this Friday") == day(2023, 5, 12)
    assert iv("next Monday") == day(2023, 5, 15)
    assert iv("next Friday") == day(2023, 5, 12)
    assert iv("the Friday before") == day(2023, 5, 5)


def test_weekday_abbreviations() -> None:
    assert iv("Last Fri I finally took my kids") == day(2023, 5, 5)
    assert iv("joined a group last Tues.") == day(2023, 5, 2)
    assert iv("last Sat") == day(2023, 5, 6)
    assert ground("this sun is hot", OBS) == []  # lowercase "sun" is the sun


def test_last_weekday_locomo_cases() -> None:
    # "I ran a charity race last Saturday" said Thursday 25 May 2023.
    assert iv("last Saturday", ts(2023, 5, 25, 13, 14)) == day(2023, 5, 20)
    # "Last Friday" said on Friday 15 July 2023 -> the Friday before.
    assert iv("Last Friday", ts(2023, 7, 14, 13, 51)) == day(2023, 7, 7)
    assert iv("last Sunday", ts(2023, 1, 2)) == day(2023, 1, 1)
    assert iv("last Sunday", ts(2023, 1, 1)) == day(2022, 12, 25)


# --------------------------------------------------------------------------- weeks, weekends


def test_weeks_are_monday_based() -> None:
    assert iv("last week") == (ts(2023, 5, 1), ts(2023, 5, 8))
    assert iv("this week") == (ts(2023, 5, 8), ts(2023, 5, 15))
    assert iv("next week") == (ts(2023, 5, 15), ts(2023, 5, 22))
    assert iv("the week before") == (ts(2023, 5, 1), ts(2023, 5, 8))
    assert iv("the week before last") == (ts(2023, 4, 24), ts(2023, 5, 1))
    assert iv("the week after") == (ts(2023, 5, 15), ts(2023, 5, 22))
    # Sunday 14 May still belongs to the week of 8 May.
    assert iv("last week", ts(2023, 5, 14, 20)) == (ts(2023, 5, 1), ts(2023, 5, 8))
    # Across a year boundary (1 Jan 2024 is a Monday).
    assert iv("last week", ts(2024, 1, 3)) == (ts(2023, 12, 25), ts(2024, 1, 1))
    assert one("last week").precision == "week"


def test_weekends() -> None:
    assert iv("last weekend") == (ts(2023, 5, 6), ts(2023, 5, 8))
    assert iv("this weekend") == (ts(2023, 5, 13), ts(2023, 5, 15))
    assert iv("next weekend") == (ts(2023, 5, 20), ts(2023, 5, 22))
    assert iv("this past weekend") == (ts(2023, 5, 6), ts(2023, 5, 8))
    assert iv("over the weekend") == (ts(2023, 5, 6), ts(2023, 5, 8))
    sunday = ts(2023, 5, 14, 10)
    assert iv("last weekend", sunday) == (ts(2023, 5, 6), ts(2023, 5, 8))
    assert iv("over the weekend", sunday) == (ts(2023, 5, 13), ts(2023, 5, 15))
    assert iv("the weekend before last") == (ts(2023, 4, 29), ts(2023, 5, 1))
    assert one("last weekend").precision == "weekend"


def test_two_weekends_ago_locomo() -> None:
    # LoCoMo: said Monday 17 July 2023; answer "two weekends before 17 July 2023".
    r = one("we went camping with my fam two weekends ago", ts(2023, 7, 17, 14, 31))
    assert (r.start, r.end, r.precision) == (ts(2023, 7, 8), ts(2023, 7, 10), "weekend")


# --------------------------------------------------------------------------- months, years


def test_months_and_years() -> None:
    assert iv("last month") == month(2023, 4)
    assert iv("this month") == month(2023, 5)
    assert iv("next month") == month(2023, 6)
    assert iv("last month", ts(2023, 1, 15)) == month(2022, 12)
    assert iv("next month", ts(2023, 12, 31)) == month(2024, 1)
    assert iv("the month before") == month(2023, 4)
    assert iv("last year") == (ts(2022, 1, 1), ts(2023, 1, 1))
    assert iv("this year") == (ts(2023, 1, 1), ts(2024, 1, 1))
    assert iv("next year") == (ts(2024, 1, 1), ts(2025, 1, 1))
    assert one("next month").precision == "month"


def test_amount_ago() -> None:
    assert iv("3 days ago") == day(2023, 5, 5)
    assert iv("two days ago") == day(2023, 5, 6)
    assert iv("a week ago") == (ts(2023, 5, 1), ts(2023, 5, 8))
    assert iv("two weeks ago") == (ts(2023, 4, 24), ts(2023, 5, 1))
    assert iv("four months ago") == month(2023, 1)
    assert iv("six months ago") == month(2022, 11)
    assert iv("ten years ago") == (ts(2013, 1, 1), ts(2014, 1, 1))
    assert iv("twenty-five years ago") == (ts(1998, 1, 1), ts(1999, 1, 1))
    assert iv("an hour later, a day ago") == day(2023, 5, 7)
    assert iv("a few years back") == (ts(2018, 1, 1), ts(2022, 1, 1))
    assert iv("one day ago", ts(2024, 3, 1)) == day(2024, 2, 29)
    assert one("ten years ago").precision == "year"


def test_fuzzy_amounts() -> None:
    r = one("a few days ago")
    assert (r.start, r.end, r.precision) == (ts(2023, 5, 3), ts(2023, 5, 7), "few_days")
    r = one("a couple of weeks ago")
    assert (r.start, r.end, r.precision) == (ts(2023, 4, 17), ts(2023, 5, 1), "few_weeks")
    assert one("several months ago").precision == "few_months"
    assert iv("the other day") == (ts(2023, 5, 1), ts(2023, 5, 8))


def test_future_amounts() -> None:
    assert iv("in 3 days") == day(2023, 5, 11)
    assert iv("in two weeks") == (ts(2023, 5, 22), ts(2023, 5, 29))
    assert iv("two months from now") == month(2023, 7)
    assert iv("in a year") == (ts(2024, 1, 1), ts(2025, 1, 1))


def test_durations_are_not_grounded() -> None:
    assert ground("I've known these friends for 4 years", OBS) == []
    assert ground("it took two weeks", OBS) == []
    assert ground("Since we last chatted, I've been busy", OBS) == []


def test_windows() -> None:
    r = one("the past three weeks")
    assert (r.start, r.end, r.precision) == (ts(2023, 4, 17), ts(2023, 5, 9), "range")
    assert iv("in the past week") == (ts(2023, 5, 1), ts(2023, 5, 9))
    assert iv("the next few months") == (ts(2023, 5, 8), ts(2023, 10, 9))


# --------------------------------------------------------------------------- named months, dates


def test_named_months() -> None:
    assert iv("we're going camping in June") == month(2023, 6)
    r = one("in June")
    assert (r.text, r.relative) == ("June", True)
    # Nearest occurrence: December said in May means the past December.
    assert iv("in December") == month(2022, 12)
    assert iv("in January", ts(2023, 11, 20)) == month(2024, 1)
    assert iv("last June") == month(2022, 6)
    assert iv("last April") == month(2023, 4)
    assert iv("next May") == month(2024, 5)
    assert iv("this September") == month(2023, 9)
    assert iv("May 2022") == month(2022, 5)
    assert one("September, 2023").relative is False
    assert ground("I may go, and you may too", OBS) == []
    assert ground("We march on", OBS) == []


def test_part_of_month() -> None:
    r = one("early August, 2023")
    assert (r.start, r.end, r.precision) == (ts(2023, 8, 1), ts(2023, 8, 11), "part_of_month")
    assert iv("late February 2024") == (ts(2024, 2, 21), ts(2024, 3, 1))
    assert iv("mid-March") == (ts(2023, 3, 11), ts(2023, 3, 21))


def test_day_month() -> None:
    assert iv("on 8 May") == day(2023, 5, 8)
    assert iv("May 8th") == day(2023, 5, 8)
    assert iv("the 3rd of June") == day(2023, 6, 3)
    assert iv("on May 7, 2022") == day(2022, 5, 7)
    assert iv("10 November, 2022") == day(2022, 11, 10)
    assert iv("on 29 February 2024") == day(2024, 2, 29)
    # not a leap year: no day, only the month is left
    assert [r.precision for r in ground("on 29 February 2023", OBS)] == ["month"]
    assert ground("on 31 April", OBS) == []
    assert iv("2023-05-01") == day(2023, 5, 1)
    assert iv("2023/5/1") == day(2023, 5, 1)
    assert one("on 8 May, 2023").relative is False
    assert one("on 8 May").relative is True


def test_years_and_decades() -> None:
    r = one("I painted it in 2022.")
    assert (r.text, r.start, r.end, r.precision, r.relative) == (
        "2022",
        ts(2022, 1, 1),
        ts(2023, 1, 1),
        "year",
        False,
    )
    assert ground("2022 people came", OBS) == []
    assert ground("at 2022 Main Street", OBS) == []
    assert iv("back in 1999") == (ts(1999, 1, 1), ts(2000, 1, 1))
    assert iv("music from the 90s") == (ts(1990, 1, 1), ts(2000, 1, 1))
    assert one("the 1980s").precision == "decade"


def test_since() -> None:
    r = one("I've been running since 2016")
    assert (r.text, r.start, r.end, r.precision, r.anchor_precision) == (
        "since 2016",
        ts(2016, 1, 1),
        ts(2023, 5, 9),
        "range",
        "year",
    )
    assert describe(r) == "since 2016"
    assert iv("ever since last year") == (ts(2022, 1, 1), ts(2023, 5, 9))
    # "since June" said in May: the past June.
    assert iv("since June") == (ts(2022, 6, 1), ts(2023, 5, 9))


def test_seasons() -> None:
    assert iv("last summer") == (ts(2022, 6, 1), ts(2022, 9, 1))
    assert iv("last summer", ts(2023, 10, 2)) == (ts(2023, 6, 1), ts(2023, 9, 1))
    assert iv("this summer") == (ts(2023, 6, 1), ts(2023, 9, 1))
    assert iv("next summer") == (ts(2023, 6, 1), ts(2023, 9, 1))
    assert iv("the summer of 2022") == (ts(2022, 6, 1), ts(2022, 9, 1))
    assert iv("in fall 2021") == (ts(2021, 9, 1), ts(2021, 12, 1))
    assert iv("this winter", ts(2024, 1, 10)) == (ts(2023, 12, 1), ts(2024, 3, 1))
    assert iv("last winter") == (ts(2022, 12, 1), ts(2023, 3, 1))
    assert iv("during the summer") == (ts(2023, 6, 1), ts(2023, 9, 1))
    assert ground("my kids love summer break", OBS) == []
    assert ground("don't fall down", OBS) == []
    assert one("last summer").precision == "season"


def test_holidays() -> None:
    assert iv("last Christmas") == day(2022, 12, 25)
    assert iv("on Halloween", ts(2023, 10, 20)) == day(2023, 10, 31)
    assert iv("Thanksgiving 2023") == day(2023, 11, 23)
    assert iv("over New Year's Eve", ts(2024, 1, 3)) == day(2023, 12, 31)
    assert ground("I love Christmas", OBS) == []


def test_multiple_and_overlaps() -> None:
    refs = ground("Yesterday I ran, and next week I'll swim; last Friday too.", OBS)
    assert [r.text for r in refs] == ["Yesterday", "next week", "last Friday"]
    assert [r.span[0] for r in refs] == sorted(r.span[0] for r in refs)
    # the longer expression wins over its parts
    assert [r.text for r in ground("the day before yesterday", OBS)] == ["the day before yesterday"]


def test_ground_rejects_bad_observation_time() -> None:
    with pytest.raises(TypeError):
        ground("yesterday", "now")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ground("yesterday", 10**15)


# --------------------------------------------------------------------------- describe


def test_describe() -> None:
    assert describe(one("yesterday")) == "7 May 2023"
    assert describe(one("last week")) == "the week of 1 May 2023"
    assert describe(one("last weekend")) == "the weekend of 6 May 2023"
    assert describe(one("this month")) == "May 2023"
    assert describe(one("last year")) == "2022"
    assert describe(one("last summer")) == "summer 2022"
    assert describe(one("last winter")) == "winter 2022/23"
    assert describe(one("this morning")) == "the morning of 8 May 2023"
    assert describe(one("tonight")) == "the night of 8 May 2023"
    assert describe(one("early June 2023")) == "early June 2023"
    assert describe(one("the 90s")) == "the 1990s"
    assert describe(one("a few days ago")) == "between 3 May 2023 and 6 May 2023"
    assert describe(one("the past week")) == "1 May 2023 to 8 May 2023"


# --------------------------------------------------------------------------- query cues


def test_query_time_cues() -> None:
    c = query_time_cues("When did Caroline go to the LGBTQ support group?")
    assert c["temporal"] and c["asks_when"] and c["score"] >= 0.9
    assert not c["asks_duration"] and c["constraint"] is None

    c = query_time_cues("How long ago was Caroline's 18th birthday?")
    assert c["asks_duration"] and c["temporal"]

    c = query_time_cues("What did Melanie paint in 2022?")
    assert c["temporal"] and c["refs"][0].precision == "year"
    assert c["constraint"] == (ts(2022, 1, 1), ts(2023, 1, 1))

    c = query_time_cues("Did Caroline move before or after her birthday?")
    assert c["asks_order"]

    c = query_time_cues("What is Melanie's latest hobby?")
    assert c["recency"]

    c = query_time_cues("What is Caroline's identity?")
    assert not c["temporal"] and c["score"] == 0.0 and c["cues"] == []

    # Relative expressions need a reference time.
    assert query_time_cues("What did I do last week?")["constraint"] is None
    c = query_time_cues("What did I do last week?", now=OBS)
    assert c["constraint"] == (ts(2023, 5, 1), ts(2023, 5, 8))


# --------------------------------------------------------------------------- properties


_TEMPORAL_WORDS = st.sampled_from(
    [
        "yesterday",
        "last",
        "next",
        "this",
        "ago",
        "in",
        "since",
        "May",
        "8",
        "2022",
        "weekend",
        "week",
        "month",
        "year",
        "a few",
        "two",
        "days",
        "the",
        "before",
        "summer",
        "Friday",
        "Sat",
        "of",
        ",",
        "tonight",
        "Christmas",
        "early",
        "2023-02-30",
        "29 February",
        "9999",
    ]
)
_OBS_TIMES = st.integers(min_value=ts(1950, 1, 1), max_value=ts(2150, 1, 1))


@given(st.text(max_size=200), _OBS_TIMES)
def test_ground_never_raises_on_text(text: str, obs: int) -> None:
    for r in ground(text, obs):
        assert r.start < r.end
        assert r.precision in PRECISIONS
        assert text[r.span[0] : r.span[1]] == r.text
        assert describe(r)


@given(st.lists(_TEMPORAL_WORDS, max_size=12).map(" ".join), _OBS_TIMES)
def test_ground_on_temporal_word_salad(text: str, obs: int) -> None:
    for r in ground(text, obs):
        assert r.start < r.end
        assert r.precision in PRECISIONS
        assert describe(r)


@given(_OBS_TIMES)
def test_yesterday_is_the_previous_calendar_day(obs: int) -> None:
    r = one("yesterday", obs)
    d = datetime.fromtimestamp(obs, UTC).date() - timedelta(days=1)
    assert (r.start, r.end) == day(d.year, d.month, d.day)
    assert r.end - r.start == DAY and r.start % DAY == 0
    assert r.end <= obs < r.end + DAY


@given(_OBS_TIMES, st.sampled_from(["Monday", "Wednesday", "Saturday", "Sunday"]))
def test_last_weekday_is_within_the_previous_seven_days(obs: int, wd: str) -> None:
    r = one(f"last {wd}", obs)
    today = obs - obs % DAY
    assert today - 7 * DAY <= r.start < today
    assert datetime.fromtimestamp(r.start, UTC).strftime("%A") == wd


@given(_OBS_TIMES)
def test_week_and_month_boundaries(obs: int) -> None:
    w = one("last week", obs)
    assert datetime.fromtimestamp(w.start, UTC).weekday() == 0
    assert w.end - w.start == 7 * DAY and w.end <= obs
    m = one("last month", obs)
    assert datetime.fromtimestamp(m.start, UTC).day == 1
    assert datetime.fromtimestamp(m.end, UTC).day == 1 and m.end <= obs


# --------------------------------------------------------------------------- query windows


def test_a_dated_query_leaves_out_the_next_midnight() -> None:
    import random

    import jevmem

    rng = random.Random(0)
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()
    # enough filler before 2023 that the two notes reach the pool through the window only
    texts = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(300)]
    stamps = [ts(2020, 1, 1) + i * DAY for i in range(300)]
    m = jevmem.Memory(embedder=jevmem.HashEmbedder())
    m.add_batch(
        [*texts, "note one", "note two"], timestamps=[*stamps, ts(2023, 5, 8, 12), ts(2023, 5, 9)]
    )
    r = m.search("What did I do on 8 May 2023?", k=5)
    # [8 May, 9 May): a date-only stamp of 9 May is the next day's
    assert r.trace["pool"]["time_window"] == 1


@pytest.mark.parametrize(
    ("query", "stance"),
    [
        ("What did I do?", "neutral"),
        ("What did I have for dinner?", "neutral"),
        ("Did Anna have a dog?", "neutral"),
        ("What do I have for dinner?", "present"),
        ("What did I do, and what do I have?", "present"),
    ],
)
def test_do_and_have_after_did_are_past(query: str, stance: str) -> None:
    assert query_fact_time(query, query_time_cues(query)).stance == stance


@pytest.mark.parametrize(
    "text",
    [
        "All 3 may attend the party.",
        "These 2 may help you.",
        "The 4 march together every year.",
        "I march 5 miles a day.",
        "a budget of 2000 dollars",
        "around 1950 people came",
        "a crowd of 2000 fans",
    ],
)
def test_counts_next_to_may_march_or_a_year_are_no_dates(text: str) -> None:
    assert ground(text, OBS) == []


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("3 May", day(2023, 5, 3)),
        ("May 3rd, 2023", day(2023, 5, 3)),
        ("on 3 may we went", day(2023, 5, 3)),
        ("the march 15 workshop", day(2023, 3, 15)),
        ("in May 2023", month(2023, 5)),
        ("in 2000", (ts(2000, 1, 1), ts(2001, 1, 1))),
        ("in 2019 we moved", (ts(2019, 1, 1), ts(2020, 1, 1))),
        ("in 2019 is when", (ts(2019, 1, 1), ts(2020, 1, 1))),
        # after "in" a year stays a year, a plural noun or not
        ("In 2019 prices rose", (ts(2019, 1, 1), ts(2020, 1, 1))),
        # a colon after a year ends a heading, not a clock time
        ("In 2019: we moved", (ts(2019, 1, 1), ts(2020, 1, 1))),
        # after a quantifier, a month written with its capital stays a day
        ("the 3 May deadline", day(2023, 5, 3)),
        ("the 12 March meeting", day(2023, 3, 12)),
    ],
)
def test_true_dates_beside_the_count_rules_still_ground(text: str, want: tuple[int, int]) -> None:
    assert iv(text) == want


def test_amounts_from_a_day_word_shift_that_day() -> None:
    r = one("a week from today")
    assert (r.start, r.end, r.precision) == (ts(2023, 5, 15), ts(2023, 5, 22), "week")
    assert r.text == "a week from today"
    assert iv("two days from tomorrow") == day(2023, 5, 11)
    assert iv("3 days from yesterday") == day(2023, 5, 10)


@pytest.mark.parametrize(
    "query",
    ["What happened between 2019 and 2021?", "what did we build from 2019 to 2021"],
)
def test_a_range_of_years_dates_a_query_from_its_start_to_its_end(query: str) -> None:
    # both ends are years ("and" and "to" only right after the range's start)
    assert query_time_cues(query)["constraint"] == (ts(2019, 1, 1), ts(2022, 1, 1))
    assert [r.text for r in ground("bread and 2021 cakes, I and 2021", OBS)] == []


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("What happened between March and May 2023?", (ts(2023, 3, 1), ts(2023, 6, 1))),
        # no year: the first month is the nearest one (April 2023 to 8 May 2023)
        ("We travel from April to July", (ts(2023, 4, 1), ts(2023, 8, 1))),
        ("Between the months of June and August", (ts(2023, 6, 1), ts(2023, 9, 1))),
        ("February - March 2024 was busy", (ts(2024, 2, 1), ts(2024, 4, 1))),
        ("from Sept. 2024 to November", (ts(2024, 9, 1), ts(2024, 12, 1))),
        # across a new year: one given year sets the other end's
        ("between Nov 2022 and February", (ts(2022, 11, 1), ts(2023, 3, 1))),
        ("between May and March 2024", (ts(2023, 5, 1), ts(2024, 4, 1))),
        ("from October 2022 through January 2023", (ts(2022, 10, 1), ts(2023, 2, 1))),
    ],
)
def test_a_range_of_months_runs_from_its_first_month_to_its_last(
    text: str, want: tuple[int, int]
) -> None:
    (r,) = ground(text, OBS)
    assert (r.start, r.end, r.precision) == (*want, "month")
    assert query_time_cues(text, now=OBS)["constraint"] == want


def test_what_is_no_range_of_months_is_not_read_as_one() -> None:
    # without "between" or "from", two months are a range only before a year
    assert ground("we may - march on", OBS) == []
    assert [r.text for r in ground("May - June", OBS)] == []
    # an end before the start is no range
    assert ground("between May 2024 and March 2023", OBS)[0].text != (
        "between May 2024 and March 2023"
    )


@pytest.mark.parametrize(
    ("text", "want", "precision"),
    [
        # June 2023 starts on a Thursday: its Saturdays are the 3rd ... 24th
        ("the first week of June", (ts(2023, 6, 1), ts(2023, 6, 8)), "week"),
        ("in the 2nd week of June", (ts(2023, 6, 8), ts(2023, 6, 15)), "week"),
        # the last seven days of the month, not the week before OBS
        ("What did she do the last week of June?", (ts(2023, 6, 24), ts(2023, 7, 1)), "week"),
        ("the final week of February, 2024", (ts(2024, 2, 23), ts(2024, 3, 1)), "week"),
        ("the first weekend in June", (ts(2023, 6, 3), ts(2023, 6, 5)), "weekend"),
        ("the second weekend of June", (ts(2023, 6, 10), ts(2023, 6, 12)), "weekend"),
        ("the last weekend of April 2022", (ts(2022, 4, 30), ts(2022, 5, 2)), "weekend"),
        # an ordinal weekday: that day (August 2023 starts on a Tuesday)
        ("the first Monday of August", (ts(2023, 8, 7), ts(2023, 8, 8)), "day"),
        ("the 2nd tuesday in June", (ts(2023, 6, 13), ts(2023, 6, 14)), "day"),
        ("the last Friday of June", (ts(2023, 6, 30), ts(2023, 7, 1)), "day"),
    ],
)
def test_an_ordinal_week_weekend_or_weekday_of_a_month_is_that_span(
    text: str, want: tuple[int, int], precision: str
) -> None:
    (r,) = ground(text, OBS)
    assert (r.start, r.end, r.precision) == (*want, precision)
    assert r.text.lower().endswith(("june", "august", "2024", "2022"))
    assert query_time_cues(text, now=OBS)["constraint"] == want


def test_since_an_ordinal_week_of_a_month_means_the_one_before() -> None:
    # said on 8 May 2023: the June before, as "since June" means
    (r,) = ground("We have trained since the first week of June", OBS)
    assert (r.start, r.end, r.precision, r.anchor_precision) == (
        ts(2022, 6, 1),
        ts(2023, 5, 9),
        "range",
        "week",
    )
    (r,) = ground("ever since the last weekend of June", OBS)
    assert r.start == ts(2022, 6, 25)  # the last Saturday of June 2022
    # a week already past this year, or a year named, stays as it is
    assert ground("since the first week of May", OBS)[0].start == ts(2023, 5, 1)
    assert ground("since the first week of June 2023", OBS)[0].start == ts(2023, 6, 1)


@pytest.mark.parametrize(
    ("text", "said", "want"),
    [
        ("Dec 31", (2023, 7, 1), (2022, 12, 31)),  # 182 days back, not 183 ahead
        ("on 30 December", (2023, 7, 1), (2023, 12, 30)),  # 182 ahead, 183 back
        ("Feb 29", (2024, 9, 1), (2024, 2, 29)),  # the leap day nearest
        ("Feb 29", (2023, 6, 1), (2024, 2, 29)),
    ],
)
def test_a_day_without_a_year_is_the_nearest_that_exists(
    text: str, said: tuple[int, int, int], want: tuple[int, int, int]
) -> None:
    (r,) = ground(text, ts(*said))
    assert (r.start, r.end) == day(*want)


@pytest.mark.parametrize(
    ("text", "resolved"),
    [
        ("from June to August 2023", "June 2023 to August 2023"),
        ("May 2023 - July 2023", "May 2023 to July 2023"),
        ("between November and February", "November 2023 to February 2024"),
        ("in June 2023", "June 2023"),
    ],
)
def test_a_run_of_months_is_described_by_both_ends(text: str, resolved: str) -> None:
    (ref,) = ground(text, ts(2024, 3, 1, 12))
    assert describe(ref) == resolved


# Friday 1 March 2024, noon
FRI = ts(2024, 3, 1, 12)


@pytest.mark.parametrize(
    ("text", "said", "want", "span"),
    [
        ("I've been vegan since Christmas", (2024, 3, 1), (2023, 12, 25), "since Christmas"),
        ("since last Christmas", (2024, 3, 1), (2023, 12, 25), "since last Christmas"),
        # the coming one lies ahead: last year's
        ("since the fourth of July", (2024, 3, 1), (2023, 7, 4), "since the fourth of July"),
        ("ever since Halloween", (2024, 3, 1), (2023, 10, 31), "ever since Halloween"),
        ("since Christmas 2020", (2024, 3, 1), (2020, 12, 25), "since Christmas 2020"),
        # last November's fourth Thursday, not the 28th a year before the coming one
        ("since Thanksgiving", (2024, 10, 1), (2023, 11, 23), "since Thanksgiving"),
        ("since New Year's Day", (2024, 12, 20), (2024, 1, 1), "since New Year's Day"),
    ],
)
def test_since_a_holiday_is_a_range_from_the_last_one(
    text: str, said: tuple[int, int, int], want: tuple[int, int, int], span: str
) -> None:
    now, end = ts(*said, 12), ts(*said) + DAY
    (r,) = ground(text, now)
    assert (r.text, r.start, r.end, r.precision, r.anchor_precision) == (
        span,
        ts(*want),
        end,
        "range",
        "day",
    )
    assert query_time_cues(f"What have I cooked {span}?", now=now)["constraint"] == (ts(*want), end)


def test_a_holiday_needs_a_qualifier_and_its_preposition_is_no_part_of_it() -> None:
    assert ground("I love Christmas", FRI) == []
    assert ground("Christmas was fun", FRI) == []
    (r,) = ground("We met on Halloween", FRI)
    assert (r.text, r.span, (r.start, r.end), r.precision) == (
        "Halloween",
        (10, 19),
        day(2023, 10, 31),
        "day",
    )
    (r,) = ground("during the Fourth of July", FRI)
    assert (r.text, (r.start, r.end)) == ("the Fourth of July", day(2024, 7, 4))


@pytest.mark.parametrize(
    ("text", "want", "span", "precision"),
    [
        ("Lincoln was born on February 12, 1809.", day(1809, 2, 12), "February 12, 1809", "day"),
        ("The ship sank on 8 May 1850", day(1850, 5, 8), "8 May 1850", "day"),
        ("in May 1850", month(1850, 5), "May 1850", "month"),
        ("early May 1066", (ts(1066, 5, 1), ts(1066, 5, 11)), "early May 1066", "part_of_month"),
        (
            "the first week of May 1850",
            (ts(1850, 5, 1), ts(1850, 5, 8)),
            "the first week of May 1850",
            "week",
        ),
        (
            "between March and May 1850",
            (ts(1850, 3, 1), ts(1850, 6, 1)),
            "between March and May 1850",
            "month",
        ),
        # a year before 1900 followed by a plural noun is a count
        ("on May 5, 1500 people came", day(2023, 5, 5), "May 5", "day"),
        # a year from 1900 on stays one ("by August 2024 requires a plan")
        ("by August 2024 requires a plan", month(2024, 8), "August 2024", "month"),
    ],
)
def test_a_written_date_keeps_a_year_from_1000_on(
    text: str, want: tuple[int, int], span: str, precision: str
) -> None:
    (r,) = ground(text, OBS)
    assert (r.text, (r.start, r.end), r.precision) == (span, want, precision)
    assert r.relative == (span == "May 5")
    assert describe(r)


def test_a_bare_year_before_1900_is_still_no_year() -> None:
    assert ground("in 1850", OBS) == []
    (r,) = ground("since May 8, 1850", FRI)
    assert (r.start, r.end, r.precision) == (ts(1850, 5, 8), ts(2024, 3, 2), "range")


@pytest.mark.parametrize(
    ("text", "said", "want"),
    [
        # ahead: the latest such day before the observation, never a Feb 28
        ("since Feb 29", (2100, 3, 1), (2096, 2, 29)),
        ("since Feb 29", (1900, 3, 1), (1896, 2, 29)),
        ("since Feb 29", (2023, 3, 5), (2020, 2, 29)),
        ("since February 29th", (2104, 1, 15), (2096, 2, 29)),
        # behind: as it is
        ("since Feb 29", (2024, 3, 1), (2024, 2, 29)),
        ("since May 8", (2100, 3, 1), (2099, 5, 8)),
    ],
)
def test_since_a_day_starts_on_or_before_the_observation(
    text: str, said: tuple[int, int, int], want: tuple[int, int, int]
) -> None:
    (r,) = ground(text, ts(*said))
    assert (r.start, r.end, r.precision, r.anchor_precision) == (
        ts(*want),
        ts(*said) + DAY,
        "range",
        "day",
    )


def test_a_leap_day_without_a_year_is_the_nearest() -> None:
    # 2100 is no leap year: 29 Feb 2104 is 1,460 days after 1 March 2100, 29 Feb 2096 1,461 before
    (r,) = ground("Feb 29", ts(2100, 3, 1))
    assert (r.start, r.end) == day(2104, 2, 29)

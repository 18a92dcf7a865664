"""Dump the Python `jevmem.temporal.ground` results as a JSON oracle for the Rust port.

The Rust integration test `rust/core/tests/grounding_oracle.rs` reads the
file named by `JEVMEM_GROUNDING_ORACLE` and checks that `jevmem_core::grounding::ground`
returns exactly these references for every case.

Cases: every LoCoMo-dev and BEAM-100k turn at its own timestamp and at two
fixed observation times, every question at its conversation's last turn time,
synthetic strings from a fixed-seed generator over the pattern vocabulary
(some near the calendar's limits), texts longer than one grounding piece, and
observation times out of range (Python raises ValueError).

Usage: python tests/support/dump_grounding_oracle.py [OUT.json]
(default /tmp/nlp/grounding_oracle.json). The answers come from the frozen
Python implementation in `tests/support/grounding_reference`.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# the repository's tests/ on the path (for `support`), the data beside the repository
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

from jevmem.evaluation import conversation_inputs, load  # noqa: E402
from support.grounding_reference import ground  # noqa: E402

LOCOMO = DATA / "locomo" / "locomo10-dev.json"
BEAM = DATA / "beam" / "beam-100k.json"
SUNDAY = int(datetime(2024, 3, 10, 15, 30, tzinfo=timezone.utc).timestamp())
DEC31 = int(datetime(2022, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp())
DAY = 86_400
MIN_OBS = -62_135_596_800 + 400 * DAY  # 0001-01-01 + 400 days
MAX_OBS = 253_402_214_400 - 400 * DAY  # 9999-12-31 - 400 days


def refs_of(text: str, observed_at: int) -> dict[str, Any]:
    try:
        refs = ground(text, observed_at)
    except ValueError:
        return {"text": text, "observed_at": observed_at, "error": True}
    return {
        "text": text,
        "observed_at": observed_at,
        "refs": [
            [r.span[0], r.span[1], r.start, r.end, r.precision, r.relative, r.anchor_precision]
            for r in refs
        ],
    }


VOCAB = [
    "today",
    "yesterday",
    "tomorrow",
    "tonight",
    "to night",
    "night",
    "morning",
    "afternoon",
    "evening",
    "the day before",
    "the day after",
    "the day before yesterday",
    "the day after tomorrow",
    "day",
    "days",
    "week",
    "weeks",
    "weekend",
    "weekends",
    "month",
    "months",
    "year",
    "years",
    "ago",
    "back",
    "from now",
    "in",
    "last",
    "this",
    "next",
    "coming",
    "this past",
    "this coming",
    "past",
    "the previous",
    "the following",
    "over the",
    "the",
    "before",
    "after",
    "of",
    "since",
    "ever since",
    "during",
    "by",
    "until",
    "till",
    "through",
    "throughout",
    "from",
    "between",
    "to",
    "-",
    "\u2013",
    "all",
    "first",
    "second",
    "third",
    "fourth",
    "final",
    "around",
    "circa",
    "back in",
    "the year",
    "the month of",
    "on",
    "at",
    "for",
    "over",
    "early",
    "mid",
    "late",
    "the other day",
    "a",
    "an",
    "a couple",
    "a couple of",
    "couple",
    "few",
    "a few",
    "several",
    "one",
    "two",
    "three",
    "five",
    "seven",
    "ten",
    "eleven",
    "twelve",
    "fifteen",
    "nineteen",
    "twenty",
    "twenty-five",
    "twenty five",
    "thirty",
    "forty-two",
    "ninety",
    "ninety-nine",
    "spring",
    "summer",
    "autumn",
    "fall",
    "winter",
    "christmas",
    "christmas eve",
    "christmas day",
    "xmas",
    "new year's eve",
    "new years day",
    "new year\u2019s day",
    "halloween",
    "valentine's day",
    "valentines day",
    "independence day",
    "the fourth of july",
    "thanksgiving",
    "am",
    "pm",
    "st",
    "nd",
    "rd",
    "th",
    "'s",
    "s",
    "ever",
    "and",
    "I",
    "we",
    "went",
    "it",
    "was",
]
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sept",
    "sep",
    "oct",
    "nov",
    "dec",
    "jan.",
    "sept.",
    "dec.",
    "may.",
]
WEEKDAYS = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "mon",
    "tue",
    "tues",
    "wed",
    "thu",
    "thur",
    "thurs",
    "fri",
    "sat",
    "sun",
    "fri.",
    "tue.",
]
SEPS = [
    " ",
    " ",
    " ",
    " ",
    "  ",
    "-",
    ", ",
    ",",
    ". ",
    ".",
    "\n",
    "",
    ":",
    " : ",
    "%",
    "'",
    "/",
    "\t",
    " -",
    "_",
    "(",
    ")",
]
EXOTIC = [
    "\u0131",
    "\u0130",
    "\u017f",
    "\u212a",
    "\u0661\u0669",
    "\u0301",
    "\x1c",
    "\u00a0",
    "\u00b2",
    "\u2019",
    "\u3000",
    "\u00e9",
    "\U0001d7ce",
    "\u2028",
]


def number(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        return str(rng.randint(0, 40))
    if r < 0.5:
        return str(rng.choice([1990, 1999, 2000, 2016, 2022, 2023, 2024, 2031, 1899, 2100]))
    if r < 0.6:
        return str(rng.randint(0, 9999))
    if r < 0.7:
        return f"{rng.randint(1900, 2100)}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}"
    if r < 0.75:
        return f"{rng.randint(1900, 2100)}/{rng.randint(1, 12)}/{rng.randint(1, 31)}"
    if r < 0.85:
        return rng.choice(["90s", "1990s", "80's", "2010s", "20s", "the 90s", "the 1980's", "00s"])
    if r < 0.9:
        return str(rng.randint(100, 6000))
    return rng.choice(["12:30", "3pm", "5 pm", "2023:", "2023.5", "50%", "7am"])


def recase(rng: random.Random, s: str) -> str:
    r = rng.random()
    if r < 0.55:
        return s
    if r < 0.7:
        return s.capitalize()
    if r < 0.8:
        return s.upper()
    if r < 0.9:
        return s.title()
    return "".join(c.upper() if rng.random() < 0.5 else c for c in s)


def token(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        t = rng.choice(VOCAB)
    elif r < 0.62:
        t = rng.choice(MONTHS)
    elif r < 0.74:
        t = rng.choice(WEEKDAYS)
    else:
        t = number(rng)
    return recase(rng, t)


def synthetic(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 14)):
        parts.append(token(rng))
        parts.append(rng.choice(SEPS) if rng.random() < 0.35 else " ")
    s = "".join(parts).strip(" ") if rng.random() < 0.8 else "".join(parts)
    if rng.random() < 0.06:  # an exotic character somewhere
        i = rng.randint(0, len(s))
        s = s[:i] + rng.choice(EXOTIC) + s[i:]
    return s


def week_of_month(rng: random.Random) -> str:
    """An ordinal week or weekend of a month, whole or broken, among other words
    (random tokens rarely line up into one)."""
    parts = [
        rng.choice(["", "in ", "since ", "during ", "we met ", "last ", "by "]),
        rng.choice(["the ", "The ", "", "the  "]),
        rng.choice(
            [
                "first",
                "1st",
                "second",
                "2nd",
                "third",
                "3rd",
                "fourth",
                "4th",
                "last",
                "final",
                "fifth",
                "next",
                "past",
            ]
        ),
        rng.choice(
            [" week", " weekend", " weekends", " weeks", "-week", " Monday", " friday", " Sun"]
        ),
        rng.choice([" of ", " in ", " of the ", " on "]),
        rng.choice(MONTHS),
        rng.choice(["", "", ",", " of"]),
        rng.choice(["", " " + number(rng), " 2023", " 2024", " 1999"]),
        rng.choice(["", ".", " at 5pm", ":30", "%", "s", " and then next week", "-ish"]),
    ]
    return recase(rng, "".join(parts))


HOLIDAYS = [
    "christmas",
    "Christmas Eve",
    "christmas day",
    "xmas",
    "New Year's Eve",
    "new years day",
    "new year\u2019s day",
    "Halloween",
    "valentine's day",
    "Valentines Day",
    "independence day",
    "the fourth of July",
    "The Fourth of July",
    "thanksgiving",
]


def holiday_phrase(rng: random.Random) -> str:
    """A holiday after since, on or another preposition, after last/this/next,
    or alone, with or without a year (of any century), among other words."""
    parts = [
        rng.choice(["", "", "I love ", "we met ", "it was ", "ever ", "and ", "the day "]),
        rng.choice(
            [
                "",
                "since ",
                "ever since ",
                "Since\n",
                "on ",
                "at ",
                "for ",
                "over ",
                "during ",
                "until ",
                "till ",
                "before ",
                "after ",
                "in ",
                "by ",
                "since  ",
            ]
        ),
        rng.choice(["", "", "last ", "this ", "next ", "the ", "last  "]),
        rng.choice(HOLIDAYS),
        rng.choice(["", "", " " + number(rng), " 2023", ", 2019", " 1850", " 2150", ",2024"]),
        rng.choice(
            ["", ".", "!", " with friends", " 2 days", "s", "-ish", ":30", " and since Christmas"]
        ),
    ]
    return recase(rng, "".join(parts))


def written_date(rng: random.Random) -> str:
    """A written day, month, part of a month, ordinal week or range of months
    with a year of any century (or a count before a plural noun in its
    place), or a day without a year, Feb 29 among them, after since or on."""
    year = rng.choice(
        [
            str(rng.randint(1000, 2099)),
            str(rng.randint(1000, 1899)),
            str(rng.randint(0, 999)),
            str(rng.randint(2100, 9999)),
            "1809",
            "1850",
            "1500",
            "0999",
            "1000",
            "2099",
            number(rng),
        ]
    )
    sep = rng.choice([" ", ", ", ",", " of ", "  "])
    month = rng.choice(MONTHS)
    day = rng.choice([str(rng.randint(1, 31)), "29", "28", "1st", "12th", "2nd", "31"])
    r = rng.random()
    if r < 0.25:
        core = f"{month} {day}{sep}{year}"
    elif r < 0.4:
        core = f"{day} {rng.choice(['', 'of '])}{month}{sep}{year}"
    elif r < 0.55:
        core = f"{rng.choice(['', '', 'early ', 'mid-', 'late '])}{month}{sep}{year}"
    elif r < 0.65:
        ordinal = rng.choice(["first", "2nd", "last", "third"])
        unit = rng.choice(["week", "weekend", "Friday"])
        core = f"the {ordinal} {unit} {rng.choice(['of', 'in'])} {month}{sep}{year}"
    elif r < 0.75:
        other = rng.choice(MONTHS)
        core = rng.choice(
            [
                f"between {month} and {other}{sep}{year}",
                f"from {month}{sep}{year} to {other}",
                f"{month} - {other}{sep}{year}",
                f"{month} {year} \u2013 {other} {year}",
            ]
        )
    else:
        core = rng.choice(
            ["feb 29", "February 29th", "29 Feb", "the 29th of February", f"{month} {day}"]
        )
    parts = [
        rng.choice(["", "", "since ", "ever since ", "on ", "born on ", "in ", "by ", "from "]),
        core,
        rng.choice(
            [
                "",
                "",
                " people came",
                " years",
                " dollars",
                " is",
                ".",
                " km",
                ":30",
                "%",
                "-ish",
                "s",
                " miles away",
                " it was",
            ]
        ),
    ]
    return recase(rng, "".join(parts))


def leap_obs(rng: random.Random) -> int:
    """An observation time around a century year, where leap days are 8 years apart."""
    if rng.random() < 0.5:
        return obs_time(rng)
    century = rng.choice([1900, 2000, 2100, 2200, 2300, 9900])
    a = int(datetime(century - 5, 1, 1, tzinfo=timezone.utc).timestamp())
    b = int(datetime(century + 6, 1, 1, tzinfo=timezone.utc).timestamp())
    return rng.randint(a, b)


def obs_time(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.8:
        return rng.randint(
            int(datetime(1995, 1, 1, tzinfo=timezone.utc).timestamp()),
            int(datetime(2035, 1, 1, tzinfo=timezone.utc).timestamp()),
        )
    if r < 0.9:
        return rng.randint(MIN_OBS, MIN_OBS + 900 * DAY)
    return rng.randint(MAX_OBS - 900 * DAY, MAX_OBS)


def long_text(rng: random.Random, target: int, newlines: bool, spaces: bool) -> str:
    out: list[str] = []
    n = 0
    while n < target:
        s = synthetic(rng)
        if not spaces:
            s = s.replace(" ", "~")
        out.append(s)
        n += len(s) + 1
    sep = "\n" if newlines else (" " if spaces else "|")
    return sep.join(out)


def main() -> None:
    out_path = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/nlp/grounding_oracle.json")
    cases: list[dict[str, Any]] = []
    timing: dict[str, float] = {}
    for name, path in (("locomo", LOCOMO), ("beam", BEAM)):
        convs, _ = load(path)
        turn_cases: list[tuple[str, int]] = []
        for conv in convs:
            texts, ts, _, _ = conversation_inputs(conv)
            last = None
            for text, t in zip(texts, ts, strict=True):
                if t is None:
                    continue
                turn_cases.append((text, t))
                last = t
            for text, _t in list(zip(texts, ts, strict=True)):
                cases.append(refs_of(text, SUNDAY))
                cases.append(refs_of(text, DEC31))
            if last is not None:
                for qa in conv.qas:
                    cases.append(refs_of(qa.question, last))
        t0 = time.perf_counter()
        for text, t in turn_cases:
            ground(text, t)
        timing[f"{name}_turns_s"] = time.perf_counter() - t0
        timing[f"{name}_turns"] = len(turn_cases)
        timing[f"{name}_chars"] = sum(len(text) for text, _ in turn_cases)
        for text, t in turn_cases:
            case = refs_of(text, t)
            if name == "beam":
                case["beam_turn"] = True  # the Rust test times these again
            cases.append(case)
    rng = random.Random(20240310)
    for _ in range(6000):
        cases.append(refs_of(synthetic(rng), obs_time(rng)))
    for _ in range(1500):
        cases.append(refs_of(week_of_month(rng), obs_time(rng)))
    # a generator of its own, so the cases above and below stay as they were
    dates = random.Random(20240229)
    for _ in range(1500):
        cases.append(refs_of(holiday_phrase(dates), obs_time(dates)))
    for _ in range(1500):
        cases.append(refs_of(written_date(dates), leap_obs(dates)))
    for i in range(8):
        cases.append(refs_of(long_text(rng, 17_000 + 9_000 * i, i % 2 == 0, i % 4 != 3), SUNDAY))
    for bad in (MIN_OBS - 1, MAX_OBS + 1, -(2**62), 2**62):
        cases.append(refs_of("yesterday", bad))
    cases.append(refs_of("", SUNDAY))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({"timing": timing, "cases": cases}, ensure_ascii=False))
    n_refs = sum(len(c.get("refs", [])) for c in cases)
    print(f"{len(cases)} cases, {n_refs} refs -> {out_path}")
    print(json.dumps(timing))


if __name__ == "__main__":
    main()

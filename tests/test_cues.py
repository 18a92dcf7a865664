"""What a query asks about time, in the core (`jevmem._core.query_time_cues`,
`query_fact_time`), held to the Python rules it replaced
(`tests/support/cues_reference.py`) over every development question and
generated text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import cues_reference as ref

from jevmem.evaluation import load
from jevmem.temporal import query_fact_time, query_time_cues

DEV_SETS = (
    Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo10-dev.json",
    Path(__file__).resolve().parents[2] / "shared/data/beam/beam-100k.json",
)
NOW = 1_700_000_000

WORDS = [
    "when", "When", "WHEN", "since", "what", "which", "date", "day", "of", "the", "week", "on",
    "in", "at", "how", "long", "many", "times", "often", "old", "ago", "dates", "timeline",
    "before", "after", "prior", "to", "earlier", "than", "until", "first", "last", "time",
    "latest", "most", "recent", "recently", "now", "still", "any", "more", "anymore", "up",
    "current", "used", "previously", "formerly", "is", "isn't", "does", "don't", "has",
    "yesterday", "2022", "May", "8", "2023", "and", "so", "but", "chronological", "sequence",
    "order", "fall", "birthday", "did", "have", "I", "you", "say", "said", "mentioned",
    "recommend", "brought", "my", "kids", "K\u212a", "\u0130s", "\u017fince", "whenever", "_when",
    "?", ",", "'", "\u00a0", "\n",
]  # fmt: skip
vocab_text = st.lists(st.sampled_from(WORDS), max_size=16).map(" ".join)
# characters Python 3.11's Unicode 14 assigns (see test_text_analysis)
any_text = st.one_of(
    vocab_text, st.text(st.characters(exclude_categories=("Cn", "Cs")), max_size=80)
)


def same(query: str, now: int | None) -> None:
    got = query_time_cues(query, now=now)
    want = ref.query_time_cues(query, now=now)
    assert got == want, query
    assert tuple(query_fact_time(query, got, now=now)) == tuple(
        ref.query_fact_time(query, want, now=now)
    )


@given(any_text, st.sampled_from([None, NOW]))
@settings(max_examples=400, deadline=None)
def test_cues_equal_the_python_rules(query: str, now: int | None) -> None:
    same(query, now)


@pytest.mark.parametrize("path", DEV_SETS, ids=["locomo", "beam"])
def test_every_development_question_gets_the_python_cues(path: Path) -> None:
    if not path.exists():
        pytest.skip("development set not found")
    convs, _ = load(path)
    questions = [qa.question for conv in convs for qa in conv.qas]
    assert questions
    for q in questions:
        same(q, None)
        same(q, NOW)


def test_a_bad_now_raises_as_grounding_does() -> None:
    for now in (2**70, 10**17):
        with pytest.raises(ValueError):
            query_time_cues("when?", now=now)
        with pytest.raises(ValueError):
            ref.query_time_cues("when?", now=now)

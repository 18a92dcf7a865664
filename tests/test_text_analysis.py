"""The write path's text analysis in the core against its old Python form.

Entity extraction, query mentions and time grounding moved into the core
(`jevmem._core`); `tests/support/entities_reference` and
`tests/support/grounding_reference` are frozen copies of the Python they
replaced. The ports must give the same answers: on every development text
when the data sits beside the repository, and on generated text always.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import entities_reference as entities_ref
from support import grounding_reference as grounding_ref

from jevmem import InvalidInputError
from jevmem.entities import extract_entities, extract_entities_batch, mentions, normalise
from jevmem.evaluation import conversation_inputs, load
from jevmem.temporal import ground, ground_batch, ground_tuples_batch

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEV_SETS = [DATA / "locomo" / "locomo10-dev.json", DATA / "beam" / "beam-100k.json"]

T0 = int(datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp())

# Text made of the rules' own vocabulary, so generated strings hit them.
WORDS = [
    "yesterday", "today", "tomorrow", "last", "next", "this", "past", "coming", "ago", "back",
    "since", "ever", "the", "day", "before", "after", "week", "weekend", "month", "year",
    "days", "weeks", "months", "years", "a", "an", "two", "few", "couple", "of", "twenty-five",
    "monday", "Sat", "sun", "Wed", "May", "june", "Sept.", "dec", "spring", "fall", "summer",
    "christmas", "Christmas Eve", "halloween", "new year's eve", "the 90s", "1990s", "2019",
    "in", "during", "early", "mid", "late", "morning", "night", "tonight", "3rd", "21",
    "2022-03-04", "12:30", "%", "am", "pm", "-", ",", ".", ":", "'", "\u2019s", "Caroline",
    "Mel's", "New", "York", "Lord", "Rings", "Mr", "Dr.", "LGBTQ+", "@mel", "#pride", "iPhone",
    "I'm", "Bank", "America", "van", "der", "&", "Wow", "Thanks", "\u00c9milie", "stra\u00dfe",
    "\u00dcBER", "OK", "LOL", "\n", "!", "?", "(", "\u201cquote\u201d", "\u2014",
]  # fmt: skip
vocab_text = st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join)
# Characters Python's Unicode database (14.0 on 3.11) leaves unassigned are
# left out: the core cases them by a newer Unicode (a documented difference,
# BENCHMARKS section 23), so arbitrary text would find it.
assigned = st.characters(exclude_categories=("Cn", "Cs"))
any_text = st.one_of(vocab_text, st.text(assigned, max_size=200))
observed = st.integers(
    int(datetime(1990, 1, 1, tzinfo=timezone.utc).timestamp()),
    int(datetime(2040, 1, 1, tzinfo=timezone.utc).timestamp()),
)


def tuples(refs: Sequence[Any]) -> list[tuple[object, ...]]:
    """Time references of either implementation, as comparable tuples."""
    return [
        (r.text, r.start, r.end, r.precision, r.relative, r.span, r.anchor_precision) for r in refs
    ]


@given(any_text, st.one_of(st.none(), st.sampled_from(["Caroline", "Mel", "dr. who", ""])))
@settings(max_examples=300, deadline=None)
def test_entities_equal_the_python_rules(text: str, speaker: str | None) -> None:
    prov = {"participants": "Ann, Bob; carl", "location": "New York", "mood": "Calm"}
    assert extract_entities(
        text, speaker=speaker, provenance=prov
    ) == entities_ref.extract_entities(text, speaker=speaker, provenance=prov)
    assert normalise(text) == entities_ref.normalise(text)


@given(
    any_text,
    st.lists(st.one_of(st.sampled_from(WORDS), st.text(assigned, max_size=12)), max_size=12),
)
@settings(max_examples=300, deadline=None)
def test_mentions_equal_the_python_rules(query: str, known: list[str]) -> None:
    assert mentions(query, known) == entities_ref.mentions(query, known)


@given(any_text, observed)
@settings(max_examples=400, deadline=None)
def test_grounding_equals_the_python_rules(text: str, at: int) -> None:
    assert tuples(ground(text, at)) == tuples(grounding_ref.ground(text, at))


@given(st.lists(st.tuples(any_text, st.one_of(st.none(), observed)), max_size=8))
@settings(max_examples=100, deadline=None)
def test_batches_equal_one_by_one(rows: list[tuple[str, int | None]]) -> None:
    texts = [t for t, _ in rows]
    ats = [a for _, a in rows]
    batch = ground_batch(texts, ats)
    assert [tuples(r) for r in batch] == [
        [] if a is None else tuples(ground(t, a)) for t, a in zip(texts, ats, strict=True)
    ]
    # the write path's plain tuples say the same, field for field
    assert ground_tuples_batch(texts, ats) == [
        [
            (r.text, r.start, r.end, r.precision, r.relative, *r.span, r.anchor_precision)
            for r in refs
        ]
        for refs in batch
    ]
    speakers = ["Ann" if i % 2 else None for i in range(len(texts))]
    provs = [{"place": t[:10]} for t in texts]
    extras = [["Zed"] if i % 3 else None for i in range(len(texts))]
    assert extract_entities_batch(texts, speakers, provs, extras) == [
        extract_entities(t, speaker=s, provenance=p, extra=e or ())
        for t, s, p, e in zip(texts, speakers, provs, extras, strict=True)
    ]


@pytest.mark.parametrize(
    "line",
    [
        # the cuts fall at sentence ends
        "Line {i}: we met last Friday, two weeks ago, in May 2021.",
        # one run-on "sentence": the cuts fall at spaces, inside expressions
        "we met last Friday and two weeks ago in May 2021 item {i}",
    ],
)
def test_a_long_text_is_grounded_piece_by_piece_as_before(line: str) -> None:
    # over three 16,384-character pieces, with expressions on both sides of the cuts
    text = " ".join(line.format(i=i) for i in range(900))
    assert len(text) > 3 * 16_384
    got = ground(text, T0)
    assert tuples(got) == tuples(grounding_ref.ground(text, T0))
    # no expression is split at a cut
    assert len(got) == 3 * 900


def test_bad_observation_times_raise_as_before() -> None:
    with pytest.raises(TypeError):
        ground("yesterday", "2023-05-08")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ground("yesterday", True)
    for at in (-(10**12), 10**12, 2**70):
        with pytest.raises(ValueError, match="outside the supported calendar range"):
            grounding_ref.ground("yesterday", at)
        with pytest.raises(ValueError, match="outside the supported calendar range"):
            ground("yesterday", at)
        with pytest.raises(ValueError, match="outside the supported calendar range"):
            ground("", at)
    with pytest.raises(InvalidInputError):
        ground_batch(["today", "today"], [T0, 10**12])


@pytest.mark.skipif(not all(p.exists() for p in DEV_SETS), reason="development sets not found")
def test_every_development_text_gets_the_python_answers() -> None:
    compared = 0
    for path in DEV_SETS:
        convs, _ = load(path)
        for conv in convs:
            texts, stamps, speakers, provs = conversation_inputs(conv)
            ids = extract_entities_batch(texts, speakers, provs, [None] * len(texts))
            grounded = ground_batch(texts, stamps)
            known: dict[str, None] = {}
            for text, at, speaker, prov, got_ids, got_refs in zip(
                texts, stamps, speakers, provs, ids, grounded, strict=True
            ):
                assert got_ids == entities_ref.extract_entities(
                    text, speaker=speaker, provenance=prov
                ), text[:80]
                want = [] if at is None else grounding_ref.ground(text, at)
                assert tuples(got_refs) == tuples(want), text[:80]
                known.update(dict.fromkeys(got_ids))
                compared += 1
            last = max((s for s in stamps if s is not None), default=T0)
            for qa in conv.qas:
                q = qa.question
                assert extract_entities(q) == entities_ref.extract_entities(q), q
                assert mentions(q, list(known)) == entities_ref.mentions(q, list(known)), q
                assert tuples(ground(q, last)) == tuples(grounding_ref.ground(q, last)), q
                compared += 1
    assert compared > 9_000


# --- a write candidate's pair signals (`WriteCandidate`) against the old Python

NAMES = ["Mel", "Melanie", "Caro", "Caroline", "New York", "York", "Al", "Alan", "Bank of America"]


@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(NAMES), max_size=4).map(" and ".join),
            st.one_of(st.none(), st.sampled_from(["Ann", "ann", "Bob"])),
            st.one_of(st.none(), st.integers(0, 3)),
            st.sampled_from(["session", "session_id", "episode", "other"]),
            st.one_of(st.none(), st.integers(T0, T0 + 5 * 86_400)),
        ),
        min_size=1,
        max_size=12,
    )
)
@settings(max_examples=60, deadline=None)
def test_pair_signals_equal_the_python_rules(
    rows: list[tuple[str, str | None, int | None, str, int | None]],
) -> None:
    from support import pair_signals_reference as pairs_ref

    from jevmem import MemoryStore

    store = MemoryStore(4, exact_threshold=1_000)
    for i, (names, speaker, session, key, at) in enumerate(rows):
        prov = {} if speaker is None else {"speaker": speaker}
        if session is not None:
            prov[key] = str(session)
        text = f"turn {i}: {names} talked about plans"
        ents = extract_entities(text, speaker=speaker, provenance=prov, extra=["Melanie"] * (i % 2))
        store.add(text, [1.0, 0.5, 0.25, float(i)], timestamp=at, provenance=prov, entities=ents)
    for new_id in range(len(rows)):
        new = store.get(new_id)
        for c in store.write_candidates(new_id):
            other = store.get(c.id)
            assert c.same_session == pairs_ref.same_session(new, other)
            assert c.same_speaker == pairs_ref.same_speaker(new, other)
            assert c.older == pairs_ref.older_signal(other, new)
            assert c.alias == pairs_ref.alias_signal(new.entities, other.entities)


entity_id = st.one_of(
    st.sampled_from([n.lower() for n in NAMES]),
    # ids the store keeps as given: letters (some beyond ASCII) and inner spaces
    st.text(alphabet="abcelmnory \u00e9\u00df", min_size=1, max_size=9)
    .map(lambda s: " ".join(s.split()))
    .filter(bool),
)


@given(st.lists(entity_id, max_size=80), st.lists(entity_id, max_size=80))
@settings(max_examples=200, deadline=None)
def test_the_alias_signal_equals_the_python_rule(a: list[str], b: list[str]) -> None:
    from support import pair_signals_reference as pairs_ref

    from jevmem import MemoryStore

    store = MemoryStore(2, exact_threshold=1_000)
    store.add("first", [1.0, 0.0], entities=a)
    store.add("second", [1.0, 0.0], entities=b)
    (c,) = [c for c in store.write_candidates(1) if c.id == 0]
    first, second = store.get(0), store.get(1)
    assert c.alias == pairs_ref.alias_signal(second.entities, first.entities)

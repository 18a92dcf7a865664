"""Facts that change: supersedes links at write time, validity on the world
timeline, and a read path that ranks the fact valid at the time asked about."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, InvalidInputError, LocalController, Memory, MemoryStore
from jevmem.controller import DecisionRequest, Noul, catalogue
from jevmem.controller.types import PAIR_NOULS, PairAnswers
from jevmem.embed import Embedder
from jevmem.errors import InvalidScoreError, NodeNotFoundError
from jevmem.temporal import event_time, ground, query_fact_time, query_time_cues

DAY = 86_400
START = int(datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc).timestamp())


def date_of(day: int) -> str:
    """'5 March 2026' for START + day days: how a query names a day."""
    d = datetime.fromtimestamp(START + day * DAY, tz=timezone.utc)
    return f"{d.day} {d.strftime('%B %Y')}"


FILLER = [
    "I started learning the cello this week, my teacher is called Ines.",
    "The build server ran out of disk again, I cleared the docker cache.",
    "My sister Lena found an apartment near the river.",
    "Because the deploy failed on Friday, we postponed the release to Monday.",
    "I booked flights for a holiday in June.",
    "My cello recital is on the 20th, Ines picked a Bach suite.",
    "Practised the Bach prelude for two hours, the slow scales helped.",
    "The release went out on Monday without problems.",
]

# (earlier statement, update, day of each, present query, query before the change)
SEQUENCES = {
    "milk": (
        "I prefer oat milk in my coffee, dairy upsets my stomach.",
        "I switched from oat milk to soy milk, oat got too sweet.",
        "What milk does Maya take in her coffee now?",
        "What milk did Maya take in her coffee on {date}?",
    ),
    "paragraphs": (
        "Please write long, detailed paragraphs when you answer me.",
        "I now prefer short paragraphs in your answers, the long ones are hard to read.",
        "How long should the paragraphs of an answer be these days?",
        "How long did Maya want the paragraphs of an answer to be on {date}?",
    ),
    "etl": (
        "Our ETL pipelines are orchestrated with Airflow on a small cluster.",
        "We moved our ETL pipelines from Airflow to Dagster, the migration is done.",
        "Which tool orchestrates our ETL pipelines currently?",
        "Which tool orchestrated our ETL pipelines on {date}?",
    ),
    "city": (
        "I live in Porto, in a flat close to the old town.",
        "We moved to Berlin, I no longer live in Porto and the new flat is near a canal.",
        "Which city does Maya live in now?",
        "Which city did Maya live in on {date}?",
    ),
    # a value that changed, said with a verb of adjusting or rescheduling
    "budget": (
        "My sneaker budget is $600, I track every pair I buy.",
        "I adjusted my sneaker budget to $650 after the bonus came in.",
        "What is Maya's sneaker budget now?",
        "What was Maya's sneaker budget on {date}?",
    ),
    "sync": (
        "Our weekly sync with Kyle is at 3 PM on Thursdays.",
        "Kyle and I rescheduled our weekly sync to 4:30 PM on Thursdays.",
        "When is the weekly sync with Kyle now?",
        "When was the weekly sync with Kyle on {date}?",
    ),
    # a value changed with nobody's "I" or "we": it replaces the statement
    # of the value it changes
    "standup": (
        "The team standup is at 9:30 AM every morning in the small room.",
        "The team standup was rescheduled to 10:15 AM every morning.",
        "When is the team standup now?",
        "When was the team standup on {date}?",
    ),
    "rent": (
        "The rent for the flat on Elm Street is $1,200 a month.",
        "The rent for the flat on Elm Street increased to $1,350 a month.",
        "How much is the rent for the flat on Elm Street now?",
        "How much was the rent for the flat on Elm Street on {date}?",
    ),
}


#: The hand-written controller: its relevance rule reads the validity signals
#: (a fact valid at the asked time is at least as relevant as the best match
#: of its chain). The shipped learned heads do not read them yet, so the
#: tests of that rule pin it; the other tests here run the default.
HAND = LocalController()


def build(
    embedder: Embedder, old: str, new: str, controller: Any = None
) -> tuple[Memory, int, int]:
    """Filler on days 0-13, the old statement on day 3, its update on day 10."""
    m = Memory(embedder, controller)
    days = [0, 1, 2, 4, 6, 8, 11, 13]  # the filler's
    texts = [*FILLER[:3], old, *FILLER[3:6], new, *FILLER[6:]]
    days = [*days[:3], 3, *days[3:6], 10, *days[6:]]
    ids = m.add_batch(
        texts,
        timestamps=[START + d * DAY + i * 60 for i, d in enumerate(days)],
        speakers=["Maya"] * len(texts),
    )
    return m, ids[3], ids[7]


def rank(m: Memory, query: str, node_id: int, **kw: Any) -> int:
    ids = [e.id for e in m.search(query, 10, **kw).evidence]
    return ids.index(node_id) if node_id in ids else 99


@pytest.fixture(scope="module")
def onnx() -> Iterator[Embedder]:
    # the default embedder, skipped only when the onnx extra is missing
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    from jevmem.embed import OnnxEmbedder

    try:
        yield OnnxEmbedder()
    except ImportError as exc:  # the model package of the extra
        pytest.skip(str(exc))


def check_sequence(embedder: Embedder, name: str, controller: Any = None) -> None:
    old, new, present, dated = SEQUENCES[name]
    m, old_id, new_id = build(embedder, old, new, controller)
    # written as a link new -> old, with validity on the world timeline
    assert m.superseded_by(old_id) == [new_id], name
    assert m.supersedes(new_id) == [old_id]
    assert m.history(new_id) == [new_id, old_id]
    start_new, _ = m.validity(new_id)
    assert m.validity(old_id) == (START + 3 * DAY + 3 * 60, start_new)
    assert m.validity(new_id)[1] is None
    # the present: the current fact first, the old one still reachable, lower
    r = m.search(present, 10)
    ids = [e.id for e in r.evidence]
    assert ids[0] == new_id, (name, [e.text for e in r.evidence[:3]])
    assert old_id in ids
    top = r.evidence[0]
    assert top.supersedes == (old_id,) and top.valid_to is None
    old_item = r.evidence[ids.index(old_id)]
    assert old_item.superseded_by == (new_id,) and old_item.valid_to == start_new
    # a day before the change: the fact valid then first
    assert rank(m, dated.format(date=date_of(6)), old_id) == 0, name
    assert rank(m, dated.format(date=date_of(6)), new_id) > 0
    # "now" at a time before the change: the old fact is still current then
    assert rank(m, present, old_id, now=START + 7 * DAY) == 0, name
    assert rank(m, present, new_id, now=START + 12 * DAY) == 0, name


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_updates_with_the_hash_embedder(name: str) -> None:
    # the memory's own rules (links, validity, a replaced fact ranked right
    # below its replacement) under the hand controller, whose answers do not
    # lean on the dense match: a hashing embedder's is noise
    check_sequence(HashEmbedder(256), name, HAND)


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_updates_with_the_hash_embedder_and_the_learned_controller(name: str) -> None:
    # the learned heads saw only the default embedder's similarities; a
    # present-tense query ("now") gives no time hint to a turn that names a
    # date, so a short filler turn that does ("a holiday in June") no longer
    # outranks the update (it did for "milk" while "now" counted as asking
    # for a time)
    check_sequence(HashEmbedder(256), name)


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_updates_with_the_default_embedder(onnx: Embedder, name: str) -> None:
    check_sequence(onnx, name)


def test_before_a_change_without_a_date() -> None:
    old, new, _, _ = SEQUENCES["milk"]
    m, old_id, new_id = build(HashEmbedder(256), old, new, HAND)
    assert rank(m, "What milk did Maya drink before she switched?", old_id) == 0
    assert rank(m, "What milk did Maya drink before she switched?", new_id) > 0


def test_the_demo_memory_answers_the_milk_question_with_soy() -> None:
    from jevmem.demo import LOG

    m = Memory(HashEmbedder(256), HAND)
    m.add_batch(
        [t for _, _, t in LOG],
        timestamps=[START + d * DAY + i * 60 for i, (d, _, _) in enumerate(LOG)],
        speakers=[s for _, s, _ in LOG],
    )
    soy = next(i for i, (_, _, t) in enumerate(LOG) if "soy" in t)
    oat = next(i for i, (_, _, t) in enumerate(LOG) if "prefer oat" in t)
    assert m.superseded_by(oat) == [soy]
    # "yesterday" dates the switch a day before it was said
    said = START + 11 * DAY + soy * 60
    began = event_time(said, ground(LOG[soy][2], said))
    assert m.validity(soy)[0] == began and began is not None and began < said
    q = "What milk does Maya take in her coffee now?"
    assert rank(m, q, soy, now=START + 14 * DAY) == 0
    assert rank(m, q, oat, now=START + 8 * DAY) == 0


def test_the_demo_as_it_runs_answers_the_milk_question_with_soy(onnx: Embedder) -> None:
    # the demo's embedder and the learned controller: "now" is the query's
    # tense, not a term, so the turn "... I practise slow scales now." no
    # longer outranks the switch to soy (it did while "now" was a BM25 term)
    from jevmem.demo import LOG

    m = Memory(onnx)
    m.add_batch(
        [t for _, _, t in LOG],
        timestamps=[START + d * DAY + i * 60 for i, (d, _, _) in enumerate(LOG)],
        speakers=[s for _, s, _ in LOG],
    )
    soy = next(i for i, (_, _, t) in enumerate(LOG) if "soy" in t)
    assert rank(m, "What milk does Maya take in her coffee now?", soy, now=START + 14 * DAY) == 0


def test_unrelated_or_agreeing_observations_are_not_linked() -> None:
    m = Memory(HashEmbedder(256))
    m.add_batch(
        [
            "I prefer oat milk in my coffee.",
            "Oat milk in coffee is still my favourite.",  # agrees: no change cue on a new value
            "We now deploy the release on Mondays.",  # a change, of another subject
        ],
        timestamps=[START, START + DAY, START + 2 * DAY],
        speakers=["Maya", "Maya", "Maya"],
    )
    assert m.store.supersedes_links() == []


def test_unrelated_queries_see_no_fact_signals() -> None:
    old, new, _, _ = SEQUENCES["etl"]
    m, old_id, new_id = build(HashEmbedder(256), old, new)
    # no tense, no time: neither is discounted; both keep their topical ranks
    r = m.search("ETL orchestration Airflow Dagster", 10)
    assert {old_id, new_id} <= {e.id for e in r.evidence}


# ---- the controller's question ------------------------------------------------


def relation(new: str, old: str, **signals: float) -> float:
    qs = catalogue.relation_questions(0, ask_alias=False, ask_temporal=False)
    sig = {"vector": 0.7, "lexical": 0.9, "same_speaker": 1.0, "older": 1.0, **signals}
    req = DecisionRequest(
        "relations",
        {"observation": {"text": new}, "candidates": [{"text": old, "signals": sig}]},
        qs,
    )
    got = LocalController().decide([req])[0]["pair_0_supersedes"]
    assert 0.0 <= got.value <= 1.0  # type: ignore[union-attr]
    return got.value  # type: ignore[union-attr]


def test_supersedes_question_reads_change_cues_subject_and_age() -> None:
    q = next(
        q for q in catalogue.relation_questions(0, ask_alias=False, ask_temporal=False)
        if q.kind == "relation.supersedes"
    )  # fmt: skip
    assert isinstance(q, Noul) and q.id == "pair_0_supersedes" and q.true_if and q.false_if
    old = "I prefer oat milk in my coffee."
    switch = "I switched from oat milk to soy."
    assert relation(switch, old) >= 0.6
    assert relation("Oat milk in coffee is lovely.", old) < 0.6
    # every factor is needed: the same topic, the same subject, a change
    assert relation(switch, old, vector=0.05, lexical=0.0) < 0.6
    assert relation(switch, old, same_speaker=0.0) < relation(switch, old)
    # the change is the one said later: a candidate said after the new text
    # (a log written out of order) replaces it when it states the change
    assert relation(switch, old, older=0.0) < 0.2
    assert relation(old, switch, older=0.0) == relation(switch, old)
    # naming the old value as given up counts for more than a bare cue
    assert relation("I switched to soy.", old) < relation(switch, old)


@settings(max_examples=60)
@given(
    st.text(max_size=80),
    st.text(max_size=80),
    *[st.floats(0.0, 1.0) for _ in range(4)],
)
def test_supersedes_answers_are_valid_for_any_input(
    new: str, old: str, vec: float, lex: float, spk: float, older: float
) -> None:
    relation(new, old, vector=vec, lexical=lex, same_speaker=spk, older=older)


# ---- query stances --------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "stance"),
    [
        ("What milk now?", "present"),
        ("Which city does Maya live in?", "present"),
        ("What milk did Maya drink in February 2026?", "dated"),
        ("What milk did she drink before she switched?", "past"),
        ("Which tool did we use originally?", "past"),
        ("What did Maya switch to?", "neutral"),
        # what someone said: the statement's own present tense asks for no time
        ("Which days did I say my kids have their swimming lessons?", "neutral"),
        ("How many shoe sizes have I mentioned across my messages?", "neutral"),
        ("What did you recommend for the cache I have?", "neutral"),
        # explicit present words still do, and a request is not a report
        ("Which milk did I say I drink now?", "present"),
        ("What snacks do you recommend for me?", "present"),
        ("Which plans am I making, and which did I mention to you?", "present"),
        # a plan is made on what holds now; what someone said one should do is a report
        ("What time should I plan to join the sync with Kyle?", "present"),
        ("When will the webinar take place?", "present"),
        ("What did you say I should do about the cache?", "neutral"),
    ],
)
def test_query_fact_time(query: str, stance: str) -> None:
    now = START + 30 * DAY
    ft = query_fact_time(query, query_time_cues(query, now=now), now=now)
    assert ft.stance == stance
    if stance == "present":
        assert ft.at == now
    if stance == "dated":
        assert ft.at is not None and ft.until is not None and ft.at < ft.until


# ---- random update sequences ------------------------------------------------------

SUBJECTS = {
    # subject: (values, first statement, update, present query, dated query)
    "drink": (
        ["oat milk", "soy milk", "almond milk", "black tea", "espresso"],
        "Every morning I drink {v} with breakfast.",
        "I switched from {o} to {v} with breakfast now.",
        "What does Maya drink with breakfast now?",
        "What did Maya drink with breakfast on {date}?",
    ),
    "editor": (
        ["vim", "emacs", "vscode", "helix", "zed"],
        "I write all my code in {v}.",
        "I moved from {o} to {v} for my code, {o} is no longer my editor.",
        "Which editor does Maya write her code in these days?",
        "Which editor did Maya write her code in on {date}?",
    ),
}


# Unrelated observations that name no time: one that does ("this week")
# matches a dated query by its time alone, which is the time window's doing,
# not a question of which fact held.
TIMELESS_FILLER = [
    "The build server ran out of disk, I cleared the docker cache.",
    "My sister Lena found an apartment near the river.",
    "Ines said my bowing is too tense.",
    "The release went out without problems.",
    "Lena's new job is at a marine research lab.",
    "The recital piece is a Bach suite.",
]


@st.composite
def update_sequences(draw: st.DrawFn) -> dict[str, Any]:
    subject = draw(st.sampled_from(sorted(SUBJECTS)))
    values = SUBJECTS[subject][0]
    chain = draw(st.lists(st.sampled_from(values), min_size=2, max_size=3, unique=True))
    change_days = sorted(draw(st.lists(st.integers(2, 40), min_size=len(chain), max_size=len(chain), unique=True)))  # fmt: skip
    fillers = draw(
        st.lists(
            st.tuples(st.sampled_from(TIMELESS_FILLER), st.integers(0, 45)), min_size=0, max_size=8
        )
    )
    return {"subject": subject, "chain": chain, "days": change_days, "fillers": fillers}


@settings(max_examples=30)
@given(update_sequences())
# found by a random search: an unrelated turn on the day of the change, right after
# the asked day, ranked above the fact that held (lifted by the replaced fact
# beside it, see `ReadSession.supporting_match` in the core)
@example({"subject": "drink", "chain": ["oat milk", "soy milk"], "days": [2, 8], "fillers": [("Ines said my bowing is too tense.", 8)]})  # fmt: skip
def test_random_updates_rank_the_fact_valid_at_the_asked_time(seq: dict[str, Any]) -> None:
    _, first, update, present, dated = SUBJECTS[seq["subject"]]
    chain, days = seq["chain"], seq["days"]
    events: list[tuple[int, str, str]] = []  # (day, kind, text)
    for i, (value, day) in enumerate(zip(chain, days, strict=True)):
        text = first.format(v=value) if i == 0 else update.format(v=value, o=chain[i - 1])
        events.append((day, f"fact{i}", text))
    events += [(d, "filler", t) for t, d in seq["fillers"]]
    events.sort(key=lambda e: e[0])
    m = Memory(HashEmbedder(256), HAND)
    ids = m.add_batch(
        [t for _, _, t in events],
        timestamps=[START + d * DAY + i for i, (d, _, _) in enumerate(events)],
        speakers=["Maya"] * len(events),
    )
    fact = {kind: i for i, (_, kind, _) in zip(ids, events, strict=True) if kind != "filler"}
    last = fact[f"fact{len(chain) - 1}"]
    assert m.history(last) == [fact[f"fact{i}"] for i in reversed(range(len(chain)))]
    # the present: the latest value first
    assert rank(m, present, last) == 0
    # a day before the first change: the first value first
    if days[1] - days[0] >= 2:
        assert rank(m, dated.format(date=date_of(days[1] - 1)), fact["fact0"]) == 0


# ---- equivalence, storage, snapshots, bad input -------------------------------------


@settings(max_examples=15)
@given(update_sequences())
def test_add_batch_equals_one_by_one_with_updates(seq: dict[str, Any]) -> None:
    _, first, update, _, _ = SUBJECTS[seq["subject"]]
    chain = seq["chain"]
    texts = [first.format(v=chain[0])] + [
        update.format(v=v, o=o) for o, v in itertools.pairwise(chain)
    ]
    texts += [t for t, _ in seq["fillers"]]
    stamps = [START + i * DAY for i in range(len(texts))]
    batch = Memory(HashEmbedder(64))
    batch.add_batch(texts, timestamps=stamps, speakers=["Maya"] * len(texts))
    single = Memory(HashEmbedder(64))
    for t, ts in zip(texts, stamps, strict=True):
        single.add(t, timestamp=ts, speaker="Maya")
    assert batch.store.supersedes_links() != [] or len(chain) < 2
    assert batch.store.to_bytes() == single.store.to_bytes()


def test_snapshot_round_trips_with_links(tmp_path: Any) -> None:
    # Reading older format versions (1 and 2, whose node records differ from
    # the current one) is tested in the core: rust/core/src/snapshot.rs
    # (reads_version_1, reads_version_2) and rust/core/tests/integration/facts.rs.
    old, new, present, _ = SEQUENCES["milk"]
    plain = Memory(HashEmbedder(64))
    plain.add_batch(FILLER[:3], timestamps=[START + i for i in range(3)])
    assert MemoryStore.from_bytes(plain.store.to_bytes()).to_bytes() == plain.store.to_bytes()

    m, old_id, new_id = build(HashEmbedder(64), old, new)
    m.save(tmp_path / "m.jvm")
    back = Memory.load(tmp_path / "m.jvm", HashEmbedder(64))
    assert back.store.to_bytes() == m.store.to_bytes()
    assert back.superseded_by(old_id) == [new_id]
    assert back.validity(old_id) == m.validity(old_id)
    a, b = m.search(present, 5), back.search(present, 5)
    assert [(e.id, e.supersedes, e.superseded_by) for e in a.evidence] == [
        (e.id, e.supersedes, e.superseded_by) for e in b.evidence
    ]


def test_bad_links_raise_and_change_nothing() -> None:
    s = MemoryStore(4)
    for i in range(3):
        s.add(f"fact {i}", [1.0, float(i), 0.0, 1.0], timestamp=START + i)
    s.add_supersedes(1, 0, 0.8)
    before = s.to_bytes()
    bad: list[tuple[tuple[int, int, float], type[Exception]]] = [
        ((0, 0, 0.8), InvalidInputError),  # itself
        ((0, 1, 0.8), InvalidInputError),  # a cycle
        ((7, 0, 0.8), NodeNotFoundError),
        ((2, 0, 1.5), InvalidScoreError),
        ((2, 0, float("nan")), InvalidScoreError),
    ]
    for (new, old, w), err in bad:
        with pytest.raises(err):
            s.add_supersedes(new, old, w)
        assert s.to_bytes() == before
    with pytest.raises(InvalidInputError, match="link 1"):
        s.add_supersedes_batch([(2, 1, 0.7), (0, 2, 0.7)])
    with pytest.raises(InvalidInputError):
        s.add_supersedes_batch([(2, 1)])
    assert s.to_bytes() == before
    with pytest.raises(NodeNotFoundError):
        s.set_valid_from(9, START)
    assert s.to_bytes() == before
    s.remove(0)
    assert s.supersedes_links() == [] and s.supersedes(1) == []
    assert s.supersedes_count == 0


@pytest.mark.parametrize("controller", [HAND, None], ids=["hand", "learned"])
def test_a_denial_replaces_what_the_same_speaker_asserted(controller: Any) -> None:
    # "I've never met Kyle" after "I met Kyle": the speaker contradicts
    # themselves, and the denial is the statement that holds; said about
    # what someone else asserted it replaces nothing
    said = "I met Kyle at the sneaker expo in Bridgetown last spring."
    denied = "I've never met Kyle or been to the sneaker expo in Bridgetown."

    def links(first: str) -> list[tuple[int, int]]:
        m = Memory(HashEmbedder(256), controller)
        texts = [FILLER[0], said, FILLER[1], FILLER[2], denied]
        speakers = ["Maya", first, "Maya", "Maya", "Maya"]
        m.add_batch(texts, timestamps=[START + i * DAY for i in range(5)], speakers=speakers)
        return [(x.new, x.old) for x in m.store.supersedes_links()]

    assert links("Maya") == [(4, 1)]
    assert links("Tom") == []


def _ts(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


@pytest.mark.parametrize(
    ("old", "new", "old_said", "new_said", "new_from", "query", "now"),
    [
        # "in March" without a year reads as the nearest March (next year's,
        # said in December): a time ahead never dates when a fact began
        (
            "I live in Porto.",
            "I moved from Porto to Lisbon in March.",
            "2026-01-05T09:00",
            "2026-12-01T09:00",
            "2026-12-01T09:00",
            "Where does Ana live?",
            "2026-12-15T00:00",
        ),
        # the first time named is the old fact's ("since 2016"): the latest
        # one before the statement dates the change
        (
            "I live in Porto.",
            "After ten years in Porto since 2016, I moved to Lisbon last month.",
            "2025-06-01T09:00",
            "2026-03-10T09:00",
            "2026-02-01T00:00",
            "Where does Ana live?",
            "2026-02-15T00:00",
        ),
        # a date ahead is the event the fact is about, not when it began
        (
            "My dentist appointment is on June 3.",
            "My dentist appointment moved to June 10.",
            "2026-01-10T09:00",
            "2026-03-10T09:00",
            "2026-03-10T09:00",
            "When is Ana's dentist appointment?",
            "2026-06-05T00:00",
        ),
    ],
)
def test_a_fact_begins_at_the_latest_time_named_before_it_was_said(
    old: str, new: str, old_said: str, new_said: str, new_from: str, query: str, now: str
) -> None:
    m = Memory(HashEmbedder(256), HAND)
    m.add_batch(
        ["We had pasta for dinner.", "The weather was rainy all week."],
        timestamps=[_ts("2025-01-02T09:00"), _ts("2025-02-02T09:00")],
        speakers=["Ana"] * 2,
    )
    a = m.add(old, timestamp=_ts(old_said), speaker="Ana")
    b = m.update(a, new, timestamp=_ts(new_said))
    assert m.validity(b) == (_ts(new_from), None)
    assert m.validity(a) == (_ts(old_said), _ts(new_from))
    # the fact in force at `now` ranks first; before the change, the old one
    assert rank(m, query, b, now=_ts(now)) == 0
    assert rank(m, query, a, now=_ts(new_from) - DAY) == 0


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_a_change_written_before_the_fact_it_replaces_still_replaces_it(name: str) -> None:
    # a log back-filled out of order: the update is written first, the older
    # statement after it with its earlier time; one by one and in one batch
    old, new, present, dated = SEQUENCES[name]
    said_old, said_new = START + 3 * DAY, START + 10 * DAY
    m = Memory(HashEmbedder(256), HAND)
    m.add_batch(
        FILLER[:4], timestamps=[START + d * DAY for d in (0, 1, 2, 4)], speakers=["Maya"] * 4
    )
    new_id = m.add(new, timestamp=said_new, speaker="Maya")
    old_id = m.add(old, timestamp=said_old, speaker="Maya")
    assert m.superseded_by(old_id) == [new_id], name
    assert m.history(new_id) == [new_id, old_id]
    start_new, _ = m.validity(new_id)
    assert m.validity(old_id) == (said_old, start_new)
    assert rank(m, present, new_id) == 0, name
    assert rank(m, present, old_id, now=START + 7 * DAY) == 0, name
    assert rank(m, dated.format(date=date_of(6)), old_id) == 0, name
    batch = Memory(HashEmbedder(256), HAND)
    batch.add_batch(
        FILLER[:4], timestamps=[START + d * DAY for d in (0, 1, 2, 4)], speakers=["Maya"] * 4
    )
    batch.add_batch([new, old], timestamps=[said_new, said_old], speakers=["Maya"] * 2)
    assert batch.store.to_bytes() == m.store.to_bytes()


class _EverythingReplaces(LocalController):
    """The hand rules, but every pair's supersedes answer is 1."""

    def decide(self, requests: Any) -> Any:
        out = super().decide(requests)
        for req, got in zip(requests, out, strict=True):
            if req.purpose == "relations":
                assert isinstance(got, PairAnswers)
                got.array[:, PAIR_NOULS.index("supersedes")] = 1.0
        return out


def test_a_link_that_would_close_a_cycle_is_left_out_and_the_write_stands() -> None:
    # `update` links by what the caller says, whatever the times: B replaces
    # A though said before it; C, said between them, then replaces B (said
    # earlier) and is replaced by A (said later): A -> C -> B -> A
    m = Memory(HashEmbedder(64), _EverythingReplaces())
    a = m.add("Maya lives in Porto", timestamp=START + 10 * DAY, speaker="Maya")
    b = m.update(a, "Maya lives in Berlin", timestamp=START + DAY)
    c = m.add("Maya lives in Lisbon now", timestamp=START + 5 * DAY, speaker="Maya")
    assert c in m and len(m) == 3
    links = {(link.new, link.old) for link in m.store.supersedes_links()}
    assert (b, a) in links and (c, b) in links and (a, c) not in links


def test_an_update_said_before_the_versions_it_replaces_stands() -> None:
    # every judged link runs from the later text: here from both older
    # versions to the update, which the update's own link (new -> B -> A)
    # would close into a cycle; the caller's word wins
    m = Memory(HashEmbedder(64), _EverythingReplaces())
    a = m.add("Maya lives in Porto", timestamp=START, speaker="Maya")
    b = m.update(a, "Maya lives in Lisbon", timestamp=START + 10 * DAY)
    c = m.update(b, "Maya lives in Berlin", timestamp=START - 10 * DAY)
    assert m.history(c) == [c, b, a]
    assert not m.superseded_by(c)


_STATEMENTS = [
    "I prefer oat milk in my coffee.",
    "I switched from oat milk to soy milk.",
    "I live in Porto, near the old town.",
    "We moved from Porto to Berlin last year.",
    "Our weekly sync is at 3 PM on Thursdays.",
    "The weekly sync was rescheduled to 4:30 PM.",
    "I never drink coffee after noon.",
    "Maya went hiking on Saturday.",
]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_STATEMENTS), st.integers(0, 30), st.sampled_from(["Maya", "Sam"])
        ),
        min_size=1,
        max_size=8,
    )
)
def test_links_of_a_log_in_any_time_order_are_the_same_one_by_one_and_batched(
    rows: list[tuple[str, int, str]],
) -> None:
    # changes written before or after what they replace, in one batch or
    # one by one: the same links, the same memory
    texts = [t for t, _, _ in rows]
    stamps = [START + d * DAY for _, d, _ in rows]
    speakers = [s for _, _, s in rows]
    one = Memory(HashEmbedder(64), HAND)
    for t, ts, s in zip(texts, stamps, speakers, strict=True):
        one.add(t, timestamp=ts, speaker=s)
    batch = Memory(HashEmbedder(64), HAND)
    batch.add_batch(texts, timestamps=stamps, speakers=speakers)
    assert batch.store.to_bytes() == one.store.to_bytes()
    for link in one.store.supersedes_links():
        # a link runs from the one said later (or at the same time)
        assert stamps[link.new] >= stamps[link.old]

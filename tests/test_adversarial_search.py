"""Adversarial checks of search and write semantics at the public API.

What a demanding user tries: odd texts and queries (punctuation, emoji,
RTL and zero-width characters, one letter, very long), empty and tiny
memories, k at its bounds, every mode; `search_batch` against `search`,
`add_batch` against `add`; facts that change across branching and bridged
`update` chains; bad arguments leaving the memory as it was; and an
`update` whose old node is forgotten while it writes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, LocalController, Memory, MemoryConfig, TraversalConfig
from jevmem.controller.types import DecisionRequest
from jevmem.errors import InvalidInputError, JevmemError, NodeNotFoundError
from jevmem.memory import Mode

MODES: tuple[Mode, ...] = ("lexical", "anchors", "traversal", "full")
START = 1_700_000_000
DAY = 86_400
ODD = (
    "!!!",
    "🙂🙂",
    "שלום עולם",
    "\u200b\u200b",
    "\u202eabc\u202c",
    "a",
    "…?",
    "\uff46\uff55\uff4c\uff4c",
)


def fresh(**kw: Any) -> Memory:
    return Memory(HashEmbedder(64), LocalController(), **kw)


def ids_scores(evidence: list[Any]) -> list[tuple[int, float]]:
    return [(e.id, round(e.score, 9)) for e in evidence]


def snapshot(m: Memory) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was."""
    stats = {k: v for k, v in m.stats().items() if k != "controller_calls_query"}
    return (m.store.to_bytes(), stats, [n.id for n in m.list(limit=1000)[0]], m.decisions)


# ---- odd inputs, tiny memories ------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_memory_answers_nothing_in_every_mode(mode: Mode) -> None:
    m = fresh()
    for k in (1, 10_000):
        assert m.search("anything at all", k=k, mode=mode).evidence == []
    assert m.search_batch([], mode=mode) == []


def check_result(r: Any, k: int) -> None:
    ev = r.evidence
    assert len(ev) <= k and len({e.id for e in ev}) == len(ev)
    scores = [e.score for e in ev]
    assert scores == sorted(scores, reverse=True)
    for e in ev:
        a, b = e.passage
        assert 0 <= a <= b <= len(e.text)
        for ref in e.time_refs:
            assert ref["text"] in e.text
    assert r.sufficiency is None or 0.0 <= r.sufficiency <= 1.0


@pytest.mark.parametrize("mode", MODES)
def test_odd_texts_and_queries_are_answered_sanely(mode: Mode) -> None:
    m = fresh()
    m.add_batch(
        [*ODD, "🙂 yesterday I met Kyle 🙂"],
        timestamps=[START + i for i in range(len(ODD) + 1)],
        speakers=[None, "🙂", *([None] * (len(ODD) - 1))],
    )
    queries = [*ODD, "now", "what did when", "Maya " * 1500]
    for k in (1, 3, 10_000):
        together = m.search_batch(queries, k=k, mode=mode)
        for q, r in zip(queries, together, strict=True):
            check_result(r, k)
            assert ids_scores(r.evidence) == ids_scores(m.search(q, k=k, mode=mode).evidence)


@pytest.mark.parametrize("mode", MODES)
def test_one_node_and_many_identical_texts(mode: Mode) -> None:
    m = fresh()
    m.add("Maya drinks oat milk", timestamp=START)
    assert [e.id for e in m.search("oat", k=10_000, mode=mode).evidence] == [0]
    m.add_batch(["Maya drinks oat milk"] * 30, timestamps=[START + i for i in range(1, 31)])
    r = m.search("oat milk", k=10, mode=mode)
    check_result(r, 10)
    assert len(r.evidence) == 10
    again = m.search_batch(["oat milk"] * 3, k=10, mode=mode)
    assert all(ids_scores(x.evidence) == ids_scores(r.evidence) for x in again)


# ---- hard limits ---------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    visited=st.integers(1, 8),
    calls=st.integers(1, 4),
    k=st.sampled_from((1, 5, 50, 500)),
    mode=st.sampled_from(("traversal", "full")),
)
def test_limits_hold_with_chains_and_any_k(visited: int, calls: int, k: int, mode: Mode) -> None:
    """Supersedes chains pull relatives into the ranking; the visited and
    call limits still bound the result."""
    cfg = MemoryConfig(traversal=TraversalConfig(max_visited=visited, max_controller_calls=calls))
    m = fresh(config=cfg)
    m.add_batch(
        [f"note {i} about cello lessons and the garden" for i in range(30)],
        timestamps=[START + 60 * i for i in range(30)],
    )
    node = m.add("Maya drinks oat milk with oat cookies", timestamp=START + DAY)
    for j in range(4):
        node = m.update(node, f"Maya now prefers variant {j}", timestamp=START + (j + 2) * DAY)
    for now in (None, START + DAY + 60):
        r = m.search("what milk does Maya drink now", k=k, mode=mode, now=now)
        assert len(r.evidence) <= min(k, visited)
        assert r.trace["visited"] <= visited
        assert r.trace["controller_calls"] <= calls


# ---- batches equal one by one -----------------------------------------------------

WORDS = ("cello", "teacher", "milk", "oat", "soy", "Paris", "trip", "Maya", "Sam", "yesterday")


@settings(max_examples=10, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
            st.sampled_from(("Maya", "Sam", None)),
            st.booleans(),
            st.sampled_from((None, "k1", "k2")),
            st.sampled_from((None, "u1", "u2")),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_add_batch_equals_add_one_by_one(rows: list[Any]) -> None:
    texts = [" ".join(w) for w, *_ in rows]
    spk = [s for _, s, _, _, _ in rows]
    ts = [START + 600 * i if timed else None for i, (_, _, timed, _, _) in enumerate(rows)]
    keys = [k for *_, k, _ in rows]
    scopes = [None if u is None else {"user": u} for *_, u in rows]
    a, b = fresh(), fresh()
    got = a.add_batch(texts, timestamps=ts, speakers=spk, keys=keys, scopes=scopes)
    one = [
        b.add(t, timestamp=s, speaker=p, key=k, scope=sc)
        for t, s, p, k, sc in zip(texts, ts, spk, keys, scopes, strict=True)
    ]
    assert got == one

    def edges(m: Memory) -> list[tuple[int, int, str, float]]:
        return sorted(
            (e.src, e.dst, e.view, round(e.weight, 6)) for i in set(got) for e in m.neighbors(i)
        )

    assert edges(a) == edges(b)
    assert a.decisions == b.decisions
    for mode in MODES:
        for q in ("who teaches Maya cello", "oat milk yesterday"):
            assert ids_scores(a.search(q, k=6, mode=mode).evidence) == ids_scores(
                b.search(q, k=6, mode=mode).evidence
            )


# ---- facts that change ---------------------------------------------------------------


def test_branching_and_bridged_chains_pick_the_fact_valid_then() -> None:
    m = fresh()
    a = m.add("Maya drinks oat milk", timestamp=START)
    b1 = m.update(a, "Maya drinks soy milk", timestamp=START + 10 * DAY)
    b2 = m.update(a, "Maya drinks rice milk", timestamp=START + 5 * DAY)
    assert m.history(b1) == [b1, a] and m.history(b2) == [b2, a]
    assert sorted(m.superseded_by(a)) == [b1, b2]
    # the earliest successor ends the old fact
    assert m.validity(a) == (START, START + 5 * DAY)
    m.forget(b2)
    assert m.validity(a) == (START, START + 10 * DAY) and m.superseded_by(a) == [b1]
    c = m.update(b1, "Maya drinks almond milk", timestamp=START + 20 * DAY)
    assert m.history(c) == [c, b1, a]
    m.forget(b1)  # the middle: a and c are linked directly
    assert m.history(c) == [c, a] and m.validity(a) == (START, START + 20 * DAY)
    for now, want in ((START + DAY, a), (START + 11 * DAY, a), (START + 21 * DAY, c)):
        r = m.search("what milk does Maya drink now", k=5, now=now)
        assert r.evidence[0].id == want
        assert b1 not in [e.id for e in r.evidence]


def test_update_keeps_scope_metadata_and_speaker_and_history_is_newest_first() -> None:
    m = fresh()
    md = {"flag": True, "x": 1.0, "n": 3, "s": "a"}
    a = m.add(
        "Maya drinks oat milk",
        speaker="Maya",
        provenance={"src": "chat"},
        scope={"u": "1"},
        metadata=md,  # type: ignore[arg-type]
        timestamp=START,
        key="k",
    )
    b = m.update(a, "Maya drinks soy milk", provenance={"src": "mail"})
    node = m.get(b)
    assert node.scope == {"u": "1"} and node.metadata == md
    assert node.provenance == {"src": "mail", "speaker": "Maya"}
    assert m.matching_ids(scope={"u": "1"}, filter={"flag": True}) == [a, b]
    # the old node keeps its key: a retried write returns it
    assert m.add("Maya drinks oat milk", key="k", scope={"u": "1"}) == a
    c = m.update(b, "Maya drinks almond milk", speaker="Sam")
    assert m.history(c) == [c, b, a] and m.get(c).provenance["speaker"] == "Sam"


class ForgetsDuringWrite:
    """The local controller, which forgets a node in the next write's typing
    round (as another request served on the same thread could)."""

    name = "forgets-during-write"

    def __init__(self) -> None:
        self.inner = LocalController()
        self.memory: Memory | None = None
        self.target: int | None = None

    def decide(self, requests: list[DecisionRequest]) -> Any:
        if self.target is not None and requests and requests[0].purpose == "typing":
            target, self.target = self.target, None
            assert self.memory is not None
            self.memory.forget(target)
        return self.inner.decide(requests)


def test_an_update_whose_old_node_goes_while_it_writes_changes_nothing() -> None:
    """`update` raises NodeNotFoundError when its old node is forgotten
    between the check and the link, and leaves no half-made new version."""
    ctl = ForgetsDuringWrite()
    m = Memory(HashEmbedder(64), ctl)  # type: ignore[arg-type]
    ctl.memory = m
    old = m.add("Maya drinks oat milk", timestamp=START)
    other = m.add("a note about the garden", timestamp=START + 1)
    ctl.target = old
    with pytest.raises(NodeNotFoundError):
        m.update(old, "Maya drinks soy milk", timestamp=START + DAY)
    assert [n.id for n in m.list()[0]] == [other]
    assert [e.id for e in m.search("soy milk", mode="lexical").evidence] == []
    # the memory goes on as if the update had never been asked
    new = m.add("Maya drinks soy milk", timestamp=START + DAY)
    assert m.history(new) == [new]


# ---- bad arguments change nothing -------------------------------------------------

BAD_CALLS: list[tuple[str, Any]] = [
    ("add ts nan", lambda m, a: m.add("t", timestamp=float("nan"))),
    ("add ts bool", lambda m, a: m.add("t", timestamp=True)),
    ("add meta nested", lambda m, a: m.add("t", metadata={"a": {"b": 1}})),
    ("add key int", lambda m, a: m.add("t", key=5)),
    ("add_batch second bad", lambda m, a: m.add_batch(["a", "b"], metadatas=[None, {"x": [1]}])),
    ("update unknown", lambda m, a: m.update(99, "t")),
    ("update float id", lambda m, a: m.update(float(a), "t")),
    ("update empty text", lambda m, a: m.update(a, " ")),
    ("update bad ts", lambda m, a: m.update(a, "new", timestamp="soonish")),
    ("update bad provenance", lambda m, a: m.update(a, "new", provenance={"x": None})),
    ("update bad embedding", lambda m, a: m.update(a, "new", embedding=[1.0, 2.0])),
    ("search mode", lambda m, a: m.search("x", mode="fulll")),
    ("search now", lambda m, a: m.search("x", now="yesterday")),
    ("search filter", lambda m, a: m.search("x", filter={"p": {"$regex": "x"}})),
    ("search_batch str", lambda m, a: m.search_batch("abc")),
    ("search k 0", lambda m, a: m.search("x", k=0)),
    ("history -1", lambda m, a: m.history(-1)),
    ("forget twice", lambda m, a: m.forget([a, a])),
    ("forget empty filter", lambda m, a: m.forget(filter={"$and": []})),
    # an "all but these" whose list came out empty selects everything
    ("forget empty exclusion", lambda m, a: m.forget(filter={"p": {"$nin": []}})),
    ("forget empty exclusions", lambda m, a: m.forget(filter={"$and": [{"p": {"$nin": ()}}]})),
    ("list cursor", lambda m, a: m.list(cursor="-1")),
]


@pytest.mark.parametrize(("name", "call"), BAD_CALLS, ids=[n for n, _ in BAD_CALLS])
def test_bad_arguments_raise_typed_and_change_nothing(name: str, call: Any) -> None:
    m = fresh()
    a = m.add("Maya drinks oat milk", timestamp=START, scope={"u": "1"}, metadata={"p": 1})
    m.update(a, "Maya drinks soy milk", timestamp=START + DAY)
    before = snapshot(m)
    with pytest.raises(JevmemError):
        call(m, a)
    assert snapshot(m) == before, name


def test_timestamp_negations_match_observations_without_one() -> None:
    """As documented in `Memory.search`: a missing timestamp matches
    ``$exists: False`` and the negations, as a missing metadata field does."""
    m = fresh()
    m.add_batch(["a", "b"], metadatas=[{"t": 1}, None], timestamps=[START, None])
    assert m.matching_ids(filter={"$timestamp": {"$ne": START}}) == [1]
    assert m.matching_ids(filter={"$timestamp": {"$nin": [START]}}) == [1]
    assert m.matching_ids(filter={"t": {"$ne": 5}}) == [0, 1]
    assert m.matching_ids(filter={"$timestamp": {"$gte": 0}}) == [0]
    with pytest.raises(InvalidInputError):
        m.matching_ids(filter={"$timestamp": {}})

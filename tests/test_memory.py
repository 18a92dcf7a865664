"""jevmem.Memory: batch == one-by-one, hard limits, call budgets, bad input, escalation."""

from __future__ import annotations

import errno
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import (
    HashEmbedder,
    InvalidInputError,
    LocalController,
    Memory,
    MemoryConfig,
    NodeNotFoundError,
    TraversalConfig,
)
from jevmem._core import Node
from jevmem.controller import Answer, ChoiceAnswer, DecisionRequest, NoulAnswer
from jevmem.memory import Mode

NAMES = ["Maya", "Lena", "Ines", "Tom"]
WORDS = ["cello", "lisbon", "release", "deploy", "coffee", "milk", "lake", "hiking", "job", "lab"]
DAY = 86_400


@st.composite
def observations(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 30))
    out = []
    for i in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5))
        day = draw(st.one_of(st.none(), st.integers(0, 30)))
        name = draw(st.sampled_from(NAMES))
        out.append(
            {
                "text": f"{name} talked about " + " ".join(words),
                "timestamp": None if day is None else 1_700_000_000 + day * DAY + i,
                "speaker": draw(st.sampled_from([None, *NAMES])),
                "session": str(draw(st.integers(0, 3))),
            }
        )
    return out


def fresh(**kw: Any) -> Memory:
    return Memory(HashEmbedder(64), **kw)


def add_all(m: Memory, obs: list[dict[str, Any]]) -> list[int]:
    return m.add_batch(
        [o["text"] for o in obs],
        timestamps=[o["timestamp"] for o in obs],
        speakers=[o["speaker"] for o in obs],
        provenances=[{"session": o["session"]} for o in obs],
    )


@settings(max_examples=25)
@given(observations())
def test_add_batch_equals_one_by_one(obs: list[dict[str, Any]]) -> None:
    batch = fresh()
    add_all(batch, obs)
    single = fresh()
    for o in obs:
        single.add(
            o["text"],
            timestamp=o["timestamp"],
            speaker=o["speaker"],
            provenance={"session": o["session"]},
        )
    assert batch.store.to_bytes() == single.store.to_bytes()
    assert batch.decisions == single.decisions
    # one typing call and at most one relation call per batch (+1 per 20 writes)
    assert batch.calls["write"] <= 2 + len(obs) // 20


QUERIES = [
    "what did Maya say about the cello?",
    "when was the release?",
    "why lisbon",
    "coffee milk now",
    # names a time window: the pool also takes what was observed in it
    "what did Maya say about the lake on 20 November 2023?",
    "Tom and hiking in November 2023",
]


@settings(max_examples=20)
@given(
    observations(), st.lists(st.sampled_from(QUERIES), min_size=1, max_size=4), st.integers(1, 15)
)
def test_search_batch_equals_one_by_one_and_respects_limits(
    obs: list[dict[str, Any]], queries: list[str], k: int
) -> None:
    cfg = MemoryConfig(
        traversal=TraversalConfig(max_visited=25, max_controller_calls=7, total_budget=20)
    )
    m = fresh(config=cfg)
    add_all(m, obs)
    calls_before = m.calls["query"]
    together = m.search_batch(queries, k)
    lockstep_calls = m.calls["query"] - calls_before
    alone = [m.search(q, k) for q in queries]
    assert lockstep_calls <= 7  # one call per round for all queries together
    for a, b in zip(together, alone, strict=True):
        assert [e.id for e in a.evidence] == [e.id for e in b.evidence]
        assert [round(e.score, 9) for e in a.evidence] == [round(e.score, 9) for e in b.evidence]
        tr = a.trace
        assert len(a.evidence) <= k
        assert tr["controller_calls"] <= 7
        assert tr["visited"] <= 25
        assert sum(tr["spent"].values()) <= 20
        assert tr["edges_examined"] <= cfg.traversal.as_dict()["max_edges"]
        scores = [e.score for e in a.evidence]
        assert scores == sorted(scores, reverse=True)
        assert a.sufficiency is None or 0.0 <= a.sufficiency <= 1.0


def test_traversal_limits_are_the_configs_read_once_and_read_only() -> None:
    import dataclasses

    cfg = MemoryConfig(traversal=TraversalConfig(max_controller_calls=3, max_wall_s=2.5))
    limits = cfg.traversal_limits
    assert dict(limits) == cfg.traversal.as_dict()
    assert limits["max_controller_calls"] == 3 and limits["max_wall_s"] == 2.5
    with pytest.raises(TypeError):
        limits["max_wall_s"] = 9.0  # type: ignore[index]
    assert cfg.traversal_limits["max_wall_s"] == 2.5
    # a replaced config reads its own traversal's limits, not the first one's
    other = dataclasses.replace(cfg, traversal=TraversalConfig(max_controller_calls=5))
    assert other.traversal_limits["max_controller_calls"] == 5
    assert cfg.traversal_limits["max_controller_calls"] == 3


def _evidence(results: Sequence[Any]) -> list[list[tuple[int, float]]]:
    return [[(e.id, e.score) for e in r.evidence] for r in results]


class _AskedAs:
    """An embedder that embeds each query as another query would be."""

    def __init__(self, inner: HashEmbedder, instead: dict[str, str]) -> None:
        self.inner, self.instead, self.dim = inner, instead, inner.dim

    def embed(self, texts: Sequence[str]) -> Any:
        return self.inner.embed([self.instead.get(t, t) for t in texts])

    def embed_one(self, text: str) -> Any:
        return self.embed([text])[0]


@settings(max_examples=15)
@given(
    observations(),
    st.lists(st.sampled_from(QUERIES), min_size=1, max_size=4),
    st.sampled_from(["lexical", "anchors", "traversal", "full"]),
)
def test_search_on_given_embeddings_equals_search_on_the_embedder(
    obs: list[dict[str, Any]], queries: list[str], mode: Mode
) -> None:
    # vectors made beforehand (a server embeds while the memory answers
    # others) are what the search reads: here each query's vector is the
    # next query's, as an embedder that makes them so would give
    m = fresh()
    add_all(m, obs)
    instead = {q: QUERIES[(i + 1) % len(QUERIES)] for i, q in enumerate(QUERIES)}
    vectors = m.embedder.embed([instead[q] for q in queries])
    given_ = m.search_batch(queries, 5, mode=mode, embeddings=vectors)
    # any array-like of numbers, float64 too
    as_list = m.search_batch(queries, 5, mode=mode, embeddings=vectors.astype(np.float64).tolist())
    one = m.search(queries[0], 5, mode=mode, embedding=vectors[0])
    m.embedder = _AskedAs(m.embedder, instead)  # type: ignore[arg-type]
    want = m.search_batch(queries, 5, mode=mode)
    assert _evidence(given_) == _evidence(want)
    assert _evidence(as_list) == _evidence(want)
    assert _evidence([one]) == _evidence(want[:1])


def test_bad_given_embeddings_are_refused_and_change_nothing() -> None:
    m = fresh()
    add_all(m, [{"text": "Maya started cello lessons", "timestamp": 1_700_000_000, "speaker": "Maya", "session": "1"}])  # fmt: skip
    before = (m.store.to_bytes(), dict(m.calls))
    dim = m.store.dim
    bad: list[tuple[Any, str]] = [
        (np.zeros((2, dim)), "shape"),  # one row too many
        (np.zeros((1, dim + 1)), "shape"),
        (np.zeros(dim), "shape"),  # a batch takes rows
        (np.full((1, dim), np.nan), "finite"),
        (np.full((1, dim), 1e39), "finite"),  # beyond float32
        ("not numbers", "array of numbers"),
        ([["a"] * dim], "array of numbers"),
    ]
    for value, message in bad:
        with pytest.raises(InvalidInputError, match=message):
            m.search_batch(["cello"], 3, embeddings=value)
    with pytest.raises(InvalidInputError, match="embedding"):
        m.search("cello", 3, embedding=np.zeros((1, dim)))
    with pytest.raises(InvalidInputError, match="embedding"):
        m.search("cello", 3, embedding=np.zeros(dim - 1))
    assert (m.store.to_bytes(), dict(m.calls)) == before


def test_default_query_calls_stay_within_sixteen() -> None:
    m = fresh()
    add_all(m, [{"text": f"Maya note {i} about cello and lisbon", "timestamp": 1_700_000_000 + i, "speaker": "Maya", "session": str(i // 5)} for i in range(80)])  # fmt: skip
    for q in QUERIES:
        r = m.search(q, 10)
        assert r.trace["controller_calls"] <= 16
        assert r.trace["stop_reason"] is not None


def test_modes_and_result_fields() -> None:
    m = fresh()
    ids = add_all(m, [{"text": "Maya started cello lessons with Ines yesterday", "timestamp": 1_700_000_000, "speaker": "Maya", "session": "1"}, {"text": "Lena moved to Lisbon", "timestamp": 1_700_000_100, "speaker": "Lena", "session": "1"}])  # fmt: skip
    modes: list[Mode] = ["lexical", "anchors", "traversal", "full"]
    for mode in modes:
        r = m.search("cello lessons", 2, mode=mode)
        assert r.evidence[0].id == ids[0]
        assert r.evidence[0].provenance["speaker"] == "Maya"
    full = m.search("when did Maya start cello?", 2)
    top = full.evidence[0]
    assert top.time_refs and top.time_refs[0]["resolved"]
    assert 0.0 <= (full.sufficiency or 0.0) <= 1.0
    assert full.trace["controller"] == getattr(m.controller, "name", None) == "learned"
    with pytest.raises(InvalidInputError):
        m.search("x", 2, mode="magic")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        m.search("  ", 2)


def test_bad_input_changes_nothing() -> None:
    m = fresh()
    add_all(
        m,
        [
            {
                "text": "Maya plays cello",
                "timestamp": 1_700_000_000,
                "speaker": "Maya",
                "session": "1",
            }
        ],
    )
    before = m.store.to_bytes()
    calls = dict(m.calls)
    for bad in (
        lambda: m.add(""),
        lambda: m.add("fine", timestamp="not a date"),
        lambda: m.add_batch(["a", "b"], timestamps=[1]),
        lambda: m.add_batch(["a", " "]),
        lambda: m.add("x", embedding=[0.0] * 64),
        lambda: m.add("x", embedding=[1.0] * 3),
    ):
        with pytest.raises(InvalidInputError):
            bad()
    assert m.store.to_bytes() == before
    assert m.calls == calls


class Scripted(LocalController):
    """The local controller, except consolidation answers are forced."""

    name = "scripted"

    def __init__(self, label: str, prob: float, contradicting: float) -> None:
        super().__init__()
        self.label, self.prob, self.contra = label, prob, contradicting

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        out = super().decide(requests)
        for req, ans in zip(requests, out, strict=True):
            if req.purpose == "consolidation":
                rest = (1.0 - self.prob) / 3
                dist = {
                    o: (self.prob if o == self.label else rest)
                    for o in ("keep_separate", "merge", "promote", "uncertain")
                }
                ans["representation"] = ChoiceAnswer(self.label, dist)
                ans["contradicting"] = NoulAnswer(self.contra)
        return out


@pytest.mark.parametrize(
    ("label", "prob", "contra", "fires"),
    [
        ("merge", 0.9, 0.1, True),
        ("promote", 0.85, 0.84, True),
        ("merge", 0.84, 0.1, False),
        ("merge", 0.9, 0.85, False),
        ("keep_separate", 0.99, 0.0, False),
        ("uncertain", 0.99, 0.0, False),
    ],
)
def test_summary_escalation_rule(label: str, prob: float, contra: float, fires: bool) -> None:
    seen: list[list[int]] = []

    def summarise(nodes: Sequence[Node]) -> str:
        seen.append([n.id for n in nodes])
        return "summary of " + ", ".join(n.text for n in nodes)

    m = Memory(HashEmbedder(64), Scripted(label, prob, contra), summariser=summarise)
    add_all(m, [{"text": f"Maya note {i} about cello", "timestamp": 1_700_000_000 + i, "speaker": "Maya", "session": "1"} for i in range(20)])  # fmt: skip
    assert len(m.decisions) == 1
    assert bool(seen) == fires
    assert m.decisions[0]["escalated"] == fires
    if fires:
        sid = m.decisions[0]["summary_id"]
        assert m.get(sid).provenance["kind"] == "summary"
        assert {e.dst for e in m.neighbors(sid)} >= set(seen[0])
        # sources are never replaced or deleted
        assert all(i in m for i in seen[0])


def test_save_load_round_trip(tmp_path: Any) -> None:
    m = fresh()
    add_all(m, [{"text": f"Maya note {i} about cello", "timestamp": 1_700_000_000 + i, "speaker": "Maya", "session": "1"} for i in range(25)])  # fmt: skip
    m.save(tmp_path / "m.jvm")
    m2 = Memory.load(tmp_path / "m.jvm", HashEmbedder(64))
    assert m2.store.to_bytes() == m.store.to_bytes()
    assert m2.decisions == m.decisions
    q = "what about the cello?"
    assert [e.id for e in m2.search(q, 5).evidence] == [e.id for e in m.search(q, 5).evidence]


def test_a_missing_path_is_file_not_found_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jvm"
    with pytest.raises(FileNotFoundError) as info:
        Memory.load(missing, HashEmbedder(64))
    assert (info.value.errno, info.value.filename) == (errno.ENOENT, str(missing))
    assert str(missing) in str(info.value)
    m = fresh()
    m.add("kept")
    before = m.store.to_bytes()
    nowhere = tmp_path / "no" / "such" / "x.jvm"
    with pytest.raises(FileNotFoundError) as info:
        m.save(nowhere)
    assert (info.value.errno, info.value.filename) == (errno.ENOENT, str(nowhere))
    assert m.store.to_bytes() == before and not (tmp_path / "no").exists()
    with pytest.raises(IsADirectoryError):
        Memory.load(tmp_path, HashEmbedder(64))
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(NotADirectoryError) as not_dir:
        Memory.open(tmp_path / "file" / "m", HashEmbedder(64))
    assert not_dir.value.filename == str(tmp_path / "file" / "m")


def test_read_path_node_facts_come_from_the_store(tmp_path: Any) -> None:
    """What the read path reads of a node (text, session) comes from the
    store, for written nodes, for a summary written past add_batch, and after
    a load; the Memory keeps no per-node copy of it."""
    from support.pair_signals_reference import session_of

    m = Memory(HashEmbedder(64), Scripted("merge", 0.99, 0.0), summariser=lambda ns: "Maya sums up")
    add_all(m, [{"text": f"Maya met Ines about cello {i}", "timestamp": 1_700_000_000 + i, "speaker": "Maya", "session": str(i % 2)} for i in range(20)])  # fmt: skip
    sid = m.decisions[0]["summary_id"]
    assert any(e.id == sid for e in m.search("Maya sums up", 25).evidence)
    m.save(tmp_path / "m.jvm")
    loaded = Memory.load(tmp_path / "m.jvm", HashEmbedder(64))
    for mem in (m, loaded):
        ids = mem.matching_ids()
        nodes = [mem.get(i) for i in ids]
        assert mem.store.texts(ids) == [n.text for n in nodes]
        first = [ids[0]] * len(ids)
        want = [
            1.0 if session_of(n) is not None and session_of(n) == session_of(nodes[0]) else 0.0
            for n in nodes
        ]
        assert mem.store.same_session(ids, first).tolist() == want
        assert 0.0 < sum(want) < len(want)
        assert mem.derived_state()["speakers"] == {"maya"}
    with pytest.raises(NodeNotFoundError):
        m.store.texts([ids[0], 10_000])
    with pytest.raises(InvalidInputError):
        m.store.same_session(ids, ids[:1])


def test_writes_hold_the_garbage_collector_off_and_leave_it_as_they_found_it() -> None:
    # a write makes no reference cycles; the collector only scanned its
    # objects (BENCHMARKS section 33)
    import gc

    seen: list[bool] = []

    class Watching(LocalController):
        def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
            seen.append(gc.isenabled())
            return super().decide(requests)

    m = fresh(controller=Watching())
    obs = [{"text": f"Maya note {i} about the cello", "timestamp": 1_700_000_000 + i, "speaker": "Maya", "session": "1"} for i in range(5)]  # fmt: skip
    assert gc.isenabled()
    add_all(m, obs)
    m.add("Lena moved to Lisbon", speaker="Lena")
    assert seen and not any(seen)  # off while the writes ran
    assert gc.isenabled()
    with pytest.raises(InvalidInputError):
        m.add_batch(["ok", "also ok"], timestamps=[1_700_000_000])  # a column too short
    assert gc.isenabled()
    gc.disable()
    try:
        m.add("Tom deployed the release", speaker="Tom")
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert len(m) == 7


def test_searches_leave_the_garbage_collector_as_they_found_it() -> None:
    import gc

    class Failing(LocalController):
        def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
            if requests[0].purpose == "routing":
                assert not gc.isenabled()  # held off while the searches run
                raise RuntimeError("boom")
            return super().decide(requests)

    m = fresh(controller=Failing())
    add_all(m, [{"text": "Maya plays cello", "timestamp": 1_700_000_000, "speaker": "Maya", "session": "1"}])  # fmt: skip
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        m.search_batch(["cello?", "who plays?"])
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(RuntimeError):
            m.search("cello?")
        assert not gc.isenabled()
    finally:
        gc.enable()

"""The memory plane through the bindings: typed errors that change nothing,
batch == one-by-one, snapshots, fusion, numpy in and out, thread safety."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jevmem
from jevmem import (
    DimensionMismatchError,
    HashEmbedder,
    InvalidConfigError,
    InvalidInputError,
    InvalidScoreError,
    JevmemError,
    MemoryStore,
    NodeNotFoundError,
    SnapshotError,
)

if TYPE_CHECKING:
    from jevmem._core import ViewName

DIM = 16
VIEWS: list[ViewName] = ["semantic", "causal", "entity"]
EMB = HashEmbedder(DIM)
WORDS = ["alpha", "beta", "gamma", "paint", "paris", "trip", "camping", "dog", "music", "lake"]

texts_st = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    min_size=1,
    max_size=25,
)


def build(texts: list[str], **kw: object) -> MemoryStore:
    m = MemoryStore(DIM, **kw)  # type: ignore[arg-type]
    for i, t in enumerate(texts):
        m.add(t, EMB.embed_one(t), timestamp=1000 + i, entities=[t.split()[0]])
    return m


def test_add_get_and_types() -> None:
    m = MemoryStore(DIM)
    i = m.add(
        "Caroline joined a support group",
        EMB.embed_one("Caroline joined a support group"),
        timestamp=1_683_000_000,
        provenance={"speaker": "Caroline", "dia_id": "D1:3"},
        entities=["Caroline"],
        types=(0.9, 0.1, 0.0, 0.2),
    )
    assert i == 0 and len(m) == 1 and 0 in m and 1 not in m
    n = m.get(0)
    assert n.text.startswith("Caroline")
    assert n.provenance == {"speaker": "Caroline", "dia_id": "D1:3"}
    assert n.entities == ["caroline"]
    assert n.types == pytest.approx((0.9, 0.1, 0.0, 0.2))
    assert m.nodes_with_entity("CAROLINE") == [0]
    e = m.embedding(0)
    assert e.dtype == np.float32 and abs(float(np.linalg.norm(e)) - 1) < 1e-5


def test_error_tree() -> None:
    assert issubclass(DimensionMismatchError, InvalidInputError)
    assert issubclass(InvalidInputError, ValueError)
    assert issubclass(InvalidScoreError, ValueError)
    assert issubclass(NodeNotFoundError, KeyError)
    assert all(
        issubclass(c, JevmemError)
        for c in (DimensionMismatchError, InvalidConfigError, SnapshotError, NodeNotFoundError)
    )
    m = MemoryStore(DIM)
    with pytest.raises(NodeNotFoundError, match="no node with id 3"):
        m.get(3)
    with pytest.raises(InvalidConfigError):
        MemoryStore(0)
    with pytest.raises(InvalidConfigError):
        MemoryStore(DIM, quantization="f64")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError):
        MemoryStore(DIM, bm25_b=2.0)


BAD_ADDS: list[tuple[str, object, dict[str, object], type[Exception]]] = [
    ("", EMB.embed_one("x"), {}, InvalidInputError),
    ("   ", EMB.embed_one("x"), {}, InvalidInputError),
    ("ok", np.ones(DIM + 1, dtype=np.float32), {}, DimensionMismatchError),
    ("ok", np.full(DIM, np.nan, dtype=np.float32), {}, InvalidInputError),
    ("ok", np.zeros(DIM, dtype=np.float32), {}, InvalidInputError),
    ("ok", EMB.embed_one("x"), {"types": (0.5, 0.5, 0.5, 1.5)}, InvalidScoreError),
    ("ok", EMB.embed_one("x"), {"types": (0.5, float("nan"), 0.5, 0.5)}, InvalidScoreError),
    ("ok", EMB.embed_one("x"), {"entities": [" "]}, InvalidInputError),
    ("x" * (4 * 1024 * 1024 + 1), EMB.embed_one("x"), {}, InvalidInputError),
]


@pytest.mark.parametrize(("text", "vec", "kw", "exc"), BAD_ADDS)
def test_bad_add_changes_nothing(
    text: str, vec: object, kw: dict[str, object], exc: type[Exception]
) -> None:
    m = build(["alpha beta", "gamma paint"])
    m.add_edge(0, 1, "semantic", 0.8)
    before = m.to_bytes()
    with pytest.raises(exc):
        m.add(text, vec, **kw)  # type: ignore[arg-type]
    assert m.to_bytes() == before


def test_bad_edges_and_ids_change_nothing() -> None:
    m = build(["alpha beta", "gamma paint", "paris trip"])
    before = m.to_bytes()
    with pytest.raises(NodeNotFoundError):
        m.add_edge(0, 9, "semantic", 0.5)
    with pytest.raises(InvalidInputError, match="unknown view"):
        m.add_edge(0, 1, "spatial", 0.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidScoreError):
        m.add_edge(0, 1, "causal", 1.01)
    with pytest.raises(InvalidInputError):
        m.add_edge(0, 0, "causal", 0.5)
    with pytest.raises(InvalidInputError):
        m.add_edge(0, 1, "causal", 0.5, temporal_label="before")
    with pytest.raises(InvalidInputError):
        m.add_edge(0, 1, "temporal", 0.5, temporal_label="someday")  # type: ignore[arg-type]
    with pytest.raises(InvalidScoreError, match="edge 1"):
        m.add_edges([(0, 1, "semantic", 0.5), (1, 2, "semantic", float("nan"))])
    with pytest.raises(NodeNotFoundError):
        m.remove(17)
    with pytest.raises(NodeNotFoundError):
        m.set_types(17, (0, 0, 0, 0))
    with pytest.raises(InvalidInputError, match="embeddings has 1 entries for 2 texts"):
        m.add_batch(["a", "b"], EMB.embed(["a"]))
    with pytest.raises(InvalidInputError, match="observation 1"):
        m.add_batch(["fine", ""], EMB.embed(["fine", "x"]))
    assert m.to_bytes() == before


def test_edges_views_and_reassertion() -> None:
    m = build(["alpha beta", "gamma paint", "paris trip"])
    assert m.add_edge(0, 1, "causal", 0.4) == "inserted"
    assert m.add_edge(0, 1, "causal", 0.2) == "unchanged"
    assert m.add_edge(0, 1, "causal", 0.9) == "strengthened"
    assert m.add_edge(0, 1, "semantic", 0.3, origin="rule") == "inserted"
    assert m.add_edge(1, 2, "temporal", 1.0, temporal_label="before") == "inserted"
    causal = m.neighbors(0, "causal")
    assert [(e.src, e.dst) for e in causal] == [(0, 1)]
    assert causal[0].weight == pytest.approx(0.9)
    assert {e.view for e in m.neighbors(1)} == {"causal", "semantic", "temporal"}
    assert m.neighbors(2, "temporal")[0].temporal_label == "before"
    s = m.stats()
    assert (s["edges_causal"], s["edges_semantic"], s["edges_temporal"]) == (1, 1, 1)


@given(texts_st)
def test_add_batch_equals_one_by_one(texts: list[str]) -> None:
    one = build(texts)
    batch = MemoryStore(DIM)
    ids = batch.add_batch(
        texts,
        EMB.embed(texts),
        timestamps=[1000 + i for i in range(len(texts))],
        entities=[[t.split()[0]] for t in texts],
    )
    assert ids == list(range(len(texts)))
    assert batch.to_bytes() == one.to_bytes()


@given(texts_st, st.integers(0, 2**32))
def test_snapshot_round_trip(texts: list[str], seed: int) -> None:
    m = build(texts)
    rng = np.random.default_rng(seed)
    n = len(texts)
    for _ in range(min(n, 5)):
        a, b = (int(x) for x in rng.integers(0, n, 2))
        if a != b:
            m.add_edge(a, b, VIEWS[int(rng.integers(3))], float(rng.random()))
    if n > 2:
        m.remove(int(rng.integers(0, n)))
    loaded = MemoryStore.from_bytes(m.to_bytes())
    assert len(loaded) == len(m) and loaded.next_id == m.next_id
    assert loaded.to_bytes() == m.to_bytes()
    for q in ("alpha", "paris trip"):
        ids_a, sc_a = m.search_lexical(q, 10)
        ids_b, sc_b = loaded.search_lexical(q, 10)
        assert ids_a.tolist() == ids_b.tolist()
        np.testing.assert_allclose(sc_a, sc_b)
    for i in range(m.next_id):
        if i in m:
            assert loaded.get(i).text == m.get(i).text
            assert [(e.src, e.dst, e.view) for e in loaded.neighbors(i)] == [
                (e.src, e.dst, e.view) for e in m.neighbors(i)
            ]


def test_snapshot_files_and_corruption(tmp_path: Path) -> None:
    m = build(["alpha beta", "gamma paint", "paris trip"])
    path = tmp_path / "memory.jvm"
    m.save(path)
    assert len(MemoryStore.load(path)) == 3
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    with pytest.raises(SnapshotError, match="checksum"):
        MemoryStore.from_bytes(bytes(data))
    with pytest.raises(SnapshotError):
        MemoryStore.from_bytes(b"JEVMEMSS" + b"\0" * 3)
    with pytest.raises(OSError):
        MemoryStore.load(tmp_path / "missing.jvm")


def rrf_reference(lists: list[list[int]], kappa: float = 60.0) -> list[tuple[int, float]]:
    scores: dict[int, float] = {}
    for ranked in lists:
        seen: set[int] = set()
        for rank, node in enumerate(ranked, start=1):
            if node in seen:
                continue
            seen.add(node)
            scores[node] = scores.get(node, 0.0) + 1.0 / (kappa + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


@given(texts_st, st.sampled_from(WORDS), st.integers(1, 30), st.integers(1, 30))
def test_fused_anchors_match_reference(texts: list[str], q: str, k: int, depth: int) -> None:
    m = build(texts)
    qv = EMB.embed_one(q)
    lex_ids, _ = m.search_lexical(q, depth)
    vec_ids, _ = m.search_vector(qv, depth)
    want = rrf_reference([vec_ids.tolist(), lex_ids.tolist()])[:k]
    ids, scores = m.fused_anchors(q, qv, k, depth=depth)
    assert ids.dtype == np.uint64 and scores.dtype == np.float64
    assert ids.tolist() == [i for i, _ in want]
    np.testing.assert_allclose(scores, [s for _, s in want], rtol=1e-12)


def test_numpy_inputs_are_flexible() -> None:
    m = MemoryStore(DIM)
    v64 = EMB.embed_one("alpha").astype(np.float64)
    m.add("alpha", v64)
    m.add("beta", list(EMB.embed_one("beta")))
    ids, sims = m.search_vector(v64, 2)
    assert ids.tolist()[0] == 0 and sims.dtype == np.float32
    assert sims[0] == pytest.approx(1.0, abs=1e-5)


def test_write_candidates_only_look_back() -> None:
    texts = ["paris trip with dog", "camping at the lake", "paris music", "dog at lake", "trip"]
    m = build(texts)
    for i in range(len(texts)):
        cands = m.write_candidates(i)
        assert all(c.id < i for c in cands)
        assert [c.score for c in cands] == sorted((c.score for c in cands), reverse=True)
        assert all(
            0.0 <= x <= 1.0 for c in cands for x in (c.vector, c.lexical, c.entity, c.temporal)
        )
    assert m.write_candidates(0) == []
    assert len(m.write_candidates(4, k=2)) == 2


def test_removed_nodes_disappear() -> None:
    m = build(["paris trip", "camping lake", "paris music"])
    m.add_edge(0, 2, "entity", 1.0)
    m.remove(0)
    assert 0 not in m
    assert 0 not in m.search_lexical("paris", 10)[0].tolist()
    assert 0 not in m.search_vector(EMB.embed_one("paris trip"), 10)[0].tolist()
    assert m.neighbors(2) == []
    assert m.add("new", EMB.embed_one("new")) == 3


def test_concurrent_searches_match_serial() -> None:
    texts = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(4)) for i in range(300)]
    m = build(texts)
    queries = [WORDS[i % len(WORDS)] + " " + WORDS[(i * 3) % len(WORDS)] for i in range(40)]

    def run(q: str) -> tuple[list[int], list[int]]:
        lexical = m.search_lexical(q, 5)[0].tolist()
        fused = m.fused_anchors(q, EMB.embed_one(q), 5)[0].tolist()
        return lexical, fused

    serial = [run(q) for q in queries]
    mismatches: list[str] = []
    failures: list[BaseException] = []

    def reader() -> None:
        try:
            for q, want in zip(queries, serial, strict=True):
                if run(q) != want:
                    mismatches.append(q)
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert mismatches == [] and failures == []

    # Readers racing a writer: nothing raises, nothing half-written is seen.
    def racing_reader() -> None:
        try:
            for q in queries:
                ids, _ = m.fused_anchors(q, EMB.embed_one(q), 5)
                assert len(ids) <= 5 and all(int(i) < m.next_id for i in ids)
        except BaseException as exc:
            failures.append(exc)

    def writer() -> None:
        for i in range(50):
            m.add(f"extra note {i}", EMB.embed_one(f"extra note {i}"))

    threads = [threading.Thread(target=racing_reader) for _ in range(3)]
    threads.append(threading.Thread(target=writer))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert failures == []
    assert len(m) == 350


def test_expansion_search_changes_on_a_live_graph(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(600, DIM)).astype(np.float32)
    m = MemoryStore(DIM, exact_threshold=0)
    # Batches under 512 insert on one thread. A larger batch inserts on
    # several, so the graph depends on thread timing, and about one build in
    # 60 leaves a top-10 node unreachable, which no ef can find.
    for start in range(0, len(vecs), 300):
        part = range(start, start + 300)
        m.add_batch([f"n{i}" for i in part], vecs[start : start + 300])
    # the default grows with the index: 128 this small (recall@10 0.99 at 250k
    # distinct vectors, BENCHMARKS.md section 28)
    assert m.expansion_search == 128 and m.fixed_expansion_search is None
    query = rng.normal(size=DIM).astype(np.float32)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    exact = np.argsort(-(unit @ (query / np.linalg.norm(query))), kind="stable")[:10]
    # an ef past the node count visits every node: the exact top 10
    m.set_expansion_search(4096)
    assert m.expansion_search == 4096 and m.fixed_expansion_search == 4096
    assert m.search_vector(query, 10)[0].tolist() == exact.tolist()
    before = m.to_bytes()
    for bad in (0, 1 << 17):
        with pytest.raises(InvalidConfigError):
            m.set_expansion_search(bad)
    assert m.expansion_search == 4096 and m.to_bytes() == before
    m.save(tmp_path / "s.jvm")
    assert MemoryStore.load(tmp_path / "s.jvm").expansion_search == 4096
    # back to growing, kept too
    m.set_expansion_search(None)
    assert m.expansion_search == 128 and m.fixed_expansion_search is None
    m.save(tmp_path / "g.jvm")
    assert MemoryStore.load(tmp_path / "g.jvm").fixed_expansion_search is None
    assert MemoryStore(DIM, expansion_search=64).fixed_expansion_search == 64
    with pytest.raises(InvalidConfigError):
        MemoryStore(DIM, expansion_search=0)


def test_timestamps_read_in_bulk() -> None:
    m = MemoryStore(DIM)
    a = m.add("at noon", EMB.embed_one("at noon"), timestamp=1_700_000_000)
    b = m.add("no time", EMB.embed_one("no time"))
    c = m.add("before 1970", EMB.embed_one("before 1970"), timestamp=-5)
    m.remove(c)
    assert m.timestamps([b, a, c, 99]) == [None, 1_700_000_000, None, None]
    assert m.timestamps([]) == [] and m.timestamps([a]) == [m.get(a).timestamp]


def test_entity_names_follow_the_nodes() -> None:
    m = MemoryStore(DIM)
    a = m.add("x", EMB.embed_one("x"), entities=["Oslo", "Maya"])
    m.add("y", EMB.embed_one("y"), entities=["maya"])
    names = m.entity_names()
    assert names == sorted(names) and m.entities_known(names) == [True] * len(names)
    m.remove(a)
    assert m.entity_names() == [n for n in names if m.nodes_with_entity(n)]
    assert len(m.entity_names()) == len(names) - 1  # Oslo had one carrier


def test_version() -> None:
    assert isinstance(jevmem.__version__, str)


def _linked(
    m: MemoryStore, texts: list[str], **over: object
) -> tuple[list[int], dict[str, Any], dict[str, Any]]:
    n = len(texts)
    args: dict[str, Any] = {
        "timestamps": [1_000 + 60 * (i % 3) for i in range(n)],
        "provenances": [{"speaker": "Mel" if i % 2 else "Caro"} for i in range(n)],
        "entities": [["mel"] if i % 2 else ["caroline"] for i in range(n)],
        "derived_version": 1,
        "question_shares": [0.0] * n,
        "time_refs": [[] for _ in range(n)],
        "focus": [i % 2 == 1 for i in range(n)],
        "focus_k": 2,
    }
    args.update(over)
    return m.add_linked(texts, EMB.embed(texts), **args)


def test_add_linked_lists_each_writes_candidates_as_columns() -> None:
    texts = ["paris trip with dog", "camping at the lake", "paris music", "dog at lake", "trip"]
    m = build(["the dog likes paris", "lake camping"])
    one_by_one = build(["the dog likes paris", "lake camping"])
    ids, pairs, neighbours = _linked(m, texts)
    assert ids == list(range(2, 7))
    # the same rows added one at a time, each node's candidates read right
    # after its add (later adds change the BM25 statistics)
    expected: list[tuple[int, int, float, float, float, float, str, str | None]] = []
    expected_neighbours: list[tuple[int, int]] = []
    for r, t in enumerate(texts):
        node = one_by_one.add(
            t,
            EMB.embed_one(t),
            timestamp=1_000 + 60 * (r % 3),
            provenance={"speaker": "Mel" if r % 2 else "Caro"},
            entities=["mel"] if r % 2 else ["caroline"],
        )
        if r % 2 == 1:
            expected_neighbours += [(r, c.id) for c in one_by_one.write_candidates(node, k=2)]
        for c in one_by_one.write_candidates(node):
            other = one_by_one.get(c.id)
            expected.append(
                (
                    r,
                    c.id,
                    c.vector,
                    c.lexical,
                    c.entity,
                    c.alias,
                    other.text,
                    other.provenance.get("speaker"),
                )
            )
    got = list(
        zip(
            pairs["row"].tolist(),
            pairs["candidate"].tolist(),
            pairs["vector"].tolist(),
            pairs["lexical"].tolist(),
            pairs["entity"].tolist(),
            pairs["alias"].tolist(),
            pairs["text"],
            pairs["speaker"],
            strict=True,
        )
    )
    assert got == expected
    assert list(zip(neighbours["row"].tolist(), neighbours["candidate"].tolist(), strict=True)) == (
        expected_neighbours
    )


@pytest.mark.parametrize(
    "over",
    [
        {"question_shares": [0.0, 2.0]},  # a share outside [0, 1]
        {"focus": [True]},  # one flag for two texts
        {"time_refs": [[("x", 0, 1, "century", False, 0, 1, "")], []]},  # unknown precision
        {"timestamps": ["soon", None]},
    ],
)
def test_add_linked_bad_input_changes_nothing(over: dict[str, Any]) -> None:
    m = build(["the dog likes paris", "lake camping"])
    before = m.to_bytes()
    with pytest.raises((JevmemError, TypeError, ValueError)):
        _linked(m, ["paris trip", "dog at lake"], **over)
    assert m.to_bytes() == before


def test_store_writes_refuse_times_no_memory_could_read_back() -> None:
    # a time outside years 3..9997, or a bool, was stored and left a file
    # that no Memory could open; refused now, nothing written
    from jevmem import InvalidInputError, InvalidTypeError
    from jevmem._validate import MAX_TIMESTAMP, MIN_TIMESTAMP

    store = MemoryStore(4)
    vec = np.ones(4, np.float32)
    first = store.add("an observation", vec, timestamp=1_700_000_000)
    before = bytes(store.to_bytes())
    cases: list[tuple[Any, type[Exception]]] = [
        (lambda: store.add("t", vec, timestamp=MAX_TIMESTAMP + 1), InvalidInputError),
        (lambda: store.add("t", vec, timestamp=MIN_TIMESTAMP - 1), InvalidInputError),
        (lambda: store.add("t", vec, timestamp=10**15), InvalidInputError),
        (lambda: store.add("t", vec, timestamp=True), InvalidTypeError),
        (
            lambda: store.add_batch(["a", "b"], np.ones((2, 4)), timestamps=[1, MAX_TIMESTAMP + 1]),
            InvalidInputError,
        ),
        (lambda: store.add_batch(["a"], np.ones((1, 4)), timestamps=[False]), InvalidTypeError),
        (lambda: store.set_valid_from(first, MAX_TIMESTAMP + 1), InvalidInputError),
        (lambda: store.set_valid_from(first, True), InvalidTypeError),
    ]
    for call, error in cases:
        with pytest.raises(error):
            call()
        assert bytes(store.to_bytes()) == before
    # the ends themselves are times, and what is stored loads again
    store.add("at the start", vec, timestamp=MIN_TIMESTAMP)
    store.add("at the end", vec, timestamp=MAX_TIMESTAMP)
    store.set_valid_from(first, MAX_TIMESTAMP)
    assert len(MemoryStore.from_bytes(store.to_bytes())) == 3


def test_store_calls_refuse_what_is_not_a_node_id_typed() -> None:
    # an int that names no node is NodeNotFoundError as an unknown id is; a
    # bool or a non-int InvalidTypeError; `in` is False for all of them
    from jevmem import InvalidTypeError, NodeNotFoundError

    store = MemoryStore(4)
    vec = np.ones(4, np.float32)
    a = store.add("an observation", vec, timestamp=1_700_000_000)
    b = store.add("another one", vec, timestamp=1_700_000_100)
    before = bytes(store.to_bytes())
    cases: list[tuple[Any, type[Exception]]] = [
        (-1, NodeNotFoundError),
        (2**64, NodeNotFoundError),
        (True, InvalidTypeError),
        ("0", InvalidTypeError),
        (1.5, InvalidTypeError),
    ]
    calls: list[Any] = [
        lambda x: store.get(x),
        lambda x: store.history(x),
        lambda x: store.validity(x),
        lambda x: store.supersedes(x),
        lambda x: store.superseded_by(x),
        lambda x: store.neighbors(x),
        lambda x: store.remove(x),
        lambda x: store.forget([a, x]),
        lambda x: store.set_types(x, (0.1, 0.2, 0.3, 0.4)),
        lambda x: store.set_valid_from(x, None),
        lambda x: store.add_supersedes(x, a, 1.0),
        lambda x: store.add_edge(a, x, "semantic", 0.5),
        lambda x: store.temporal_context(x),
    ]
    for bad, error in cases:
        for call in calls:
            with pytest.raises(error):
                call(bad)
        assert bad not in store
        assert bytes(store.to_bytes()) == before
    assert a in store and b in store and store.history(b) == [b]


def test_store_writes_refuse_embeddings_numpy_cannot_read_typed() -> None:
    from jevmem import InvalidInputError, InvalidTypeError

    store = MemoryStore(8)
    store.add("an observation", np.ones(8, np.float32))
    before = bytes(store.to_bytes())
    cases: list[tuple[Any, type[Exception]]] = [
        (lambda: store.add("t", np.ones((1, 8))), InvalidTypeError),  # a matrix, not a vector
        (lambda: store.add("t", "abcdefgh"), InvalidInputError),
        (lambda: store.add_batch(["a"], np.ones(8)), InvalidTypeError),  # a vector, not rows
        (lambda: store.add_batch(["a"], [["x"] * 8]), InvalidInputError),
        (lambda: store.check_batch(["a"], np.ones((1, 1, 8))), InvalidTypeError),
    ]
    for call, error in cases:
        with pytest.raises(error, match="embedding"):
            call()
        assert bytes(store.to_bytes()) == before


def test_store_writes_refuse_bad_type_scores_and_passage_spans_typed() -> None:
    from jevmem import InvalidInputError, InvalidTypeError

    store = MemoryStore(4)
    store.add("an observation", np.ones(4, np.float32))
    before = bytes(store.to_bytes())
    v = np.ones(4, np.float32)
    rows = np.ones((1, 4), np.float32)
    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: store.add("t u", v, types=(1.0, 0.0, 0.0)), InvalidInputError, "types"),  # type: ignore[arg-type]
        (lambda: store.add("t u", v, types="abcd"), InvalidTypeError, "types"),  # type: ignore[arg-type]
        (lambda: store.add("t u", v, passages=(rows, [(-1, 2)])), InvalidInputError, "passages"),
        (
            lambda: store.add_batch(["t u"], rows, types=[(1.0, 0.0, 0.0, 0.0, 0.0)]),  # type: ignore[list-item]
            InvalidInputError,
            "types",
        ),
        (
            lambda: store.check_batch(["t u"], rows, passages=[(rows, [(0, -3)])]),
            InvalidInputError,
            "passages",
        ),
    ]
    for call, error, field in cases:
        with pytest.raises(error, match=field):
            call()
        assert bytes(store.to_bytes()) == before


def test_a_word_is_found_however_it_is_composed() -> None:
    """'café' typed composed or decomposed (as macOS sends it), a ligature or
    full-width letters: one BM25 term."""
    import jevmem

    m = jevmem.Memory(jevmem.HashEmbedder(32), jevmem.LocalController())
    decomposed = m.add("we met at the cafe\u0301 with Zoe\u0308")
    composed = m.add("the r\u00e9sum\u00e9 is on the desk")
    for query, want in (
        ("caf\u00e9 Zo\u00eb", decomposed),
        ("cafe\u0301", decomposed),
        ("re\u0301sume\u0301", composed),
        ("\uff52\u00e9sum\u00e9", composed),
    ):
        assert [e.id for e in m.search(query, k=1, mode="lexical").evidence] == [want], query

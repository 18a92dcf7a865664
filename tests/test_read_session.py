"""`jevmem._core.ReadSession`: a query's signals and pool in the core, held to
the Python it replaced (`tests/support/pool_reference.py`) on generated
memories and on development conversations."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cues_reference import asks_for_a_time
from support.pool_reference import PoolQuery, reference_assessment, reference_item

import jevmem
from jevmem import HashEmbedder, InvalidInputError, Memory, MemoryConfig, NodeNotFoundError
from jevmem._core import FACT_COLUMNS, SIGNAL_COLUMNS, ReadSession
from jevmem.evaluation import conversation_inputs, load
from jevmem.plane.config import WINDOW_SCAN
from jevmem.plane.query import QueryRun
from jevmem.plane.scoped import ScopedView

DAY = 86_400
T0 = 1_700_000_000
DEV_SETS = (
    Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo10-dev.json",
    Path(__file__).resolve().parents[2] / "shared/data/beam/beam-100k.json",
)


def reference_for(run: QueryRun) -> PoolQuery:
    """The frozen Python pool over the same query inputs as ``run``'s session."""
    window = run.time_cues["constraint"]
    plan = run.session.inputs()
    return PoolQuery(
        store=run.m.store,
        query=run.query,
        qvec=run.qvec.copy(),
        fused_ids=list(run.fused_ids),
        passage_ids=list(run.passage_ids),
        lex_list=list(plan["lexical_ranked"]),
        vec_list=list(plan["vector_ranked"]),
        max_lex=plan["best_lexical"],
        max_sim=plan["best_dense"],
        max_passage_sim=plan["best_passage"],
        named=list(run.query_entities),
        window=None if window is None else (int(window[0]), int(window[1])),
        asks_when=asks_for_a_time(run.time_cues),
        fact_time=plan["fact_time"],
        allowed=run.allowed,
        cfg=run.m.config,
        window_scan=WINDOW_SCAN,
    )


#: columns read from the query vector, which the feedback moves: the core
#: normalises the moved vector in f64, numpy in f32, so they may differ in
#: the last bits
DENSE = {"dense", "dense_raw", "dense_passage", "chain_match"}
#: what kind of query asks: the same for every node (`QueryFeatures.columns`)
QUERY_COLUMNS = {"query_self", "query_request", "query_summary", "query_answerer"}


def assert_same_pool(
    m: Memory, query: str, now: int | None = None, view: ScopedView | None = None
) -> None:
    run = QueryRun(m, query, m.embedder.embed([query])[0], 10, now, "full", 0.0, view)
    ref = reference_for(run)
    ids, sigs = run.pool()
    want_ids, want, want_sources = ref.pool()
    assert ids == want_ids, query
    assert run.pool_sources == want_sources, query
    for name, col in want.items():
        got = sigs[name]
        if name in DENSE:
            np.testing.assert_allclose(got, col, rtol=0, atol=2e-6, err_msg=f"{query}: {name}")
        else:
            np.testing.assert_array_equal(got, col, err_msg=f"{query}: {name}")
    assert set(sigs) == set(want) | QUERY_COLUMNS
    np.testing.assert_allclose(run.qvec, ref.qvec, rtol=0, atol=1e-6)
    assert abs(run.session.best_dense - ref.max_sim) <= 1e-6
    assert abs(run.session.best_passage - ref.max_passage_sim) <= 1e-6
    assert run.session.replaced() == ref.fact_state.replaced()
    # the evidence read: each node's best passage by the moved vector
    store = m.store
    spans = [store.passages(i) for i in ids]
    want_spans = [s[ref.best_passage[i]] if s else None for i, s in zip(ids, spans, strict=True)]
    assert [row[4] for row in run.session.evidence(ids)] == want_spans
    cfg = m.config
    context = dict(second_step_decay=cfg.second_step_decay, reply_link=cfg.reply_link)
    near = run.session.anchor_context(**context)
    np.testing.assert_allclose(near, ref.anchor_context(ids, want), rtol=0, atol=2e-6)
    # a round over nodes outside the pool and a few inside (as an expansion
    # reaches them), from pool nodes, with the pool's best as the evidence
    inside = set(ids)
    outside = [n for n in m.store.list_ids() if n not in inside][:12]
    cands = outside + ids[-3:]
    if not ids or not cands:
        return
    from_nodes = [ids[k % len(ids)] for k in range(len(cands))]
    evidence = ids[:5]
    rows, facts, best, extra = run.session.round(cands, from_nodes, evidence, **context)
    round_sigs = run.columns(cands, rows, facts)
    want_sigs, want_extra = ref.round(cands, from_nodes, evidence)
    for name, col in want_sigs.items():
        np.testing.assert_allclose(
            round_sigs[name], col, rtol=0, atol=2e-6, err_msg=f"{query}: {name}"
        )
    assert set(round_sigs) == set(want_sigs) | QUERY_COLUMNS
    np.testing.assert_allclose(extra, want_extra, rtol=0, atol=2e-6, err_msg=query)
    assert best.tolist() == [ref.best_passage[i] for i in cands]
    assert run.topical == pytest.approx(ref.topical, abs=2e-6)
    assert run.session.replaced() == ref.fact_state.replaced()


WORDS = ["cooked", "hiking", "coffee", "moved", "lisbon", "milk", "cello"]
QUERIES = [
    "what did Ana cook on 20 November 2023?",
    "Bo hiking in November 2023",
    "why coffee?",
    "when did Cy move?",
    "What milk does Ana drink now?",
    "What did Bo use to drink before?",
    "What did Cy play last week?",
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["Ana", "Bo", "Cy"]), st.integers(0, 60), st.integers(0, 4)),
        min_size=1,
        max_size=50,
    ),
    st.sampled_from(QUERIES),
    st.integers(1, 20),
    st.integers(0, 10),
    st.integers(0, 8),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.booleans(),
)
def test_the_pool_equals_the_python_rules(
    rows: list[tuple[str, int, int]],
    query: str,
    pool_size: int,
    seeds: int,
    window: int,
    feedback: float,
    scoped: bool,
) -> None:
    m = Memory(
        HashEmbedder(64),
        config=MemoryConfig(
            anchor_depth=pool_size,
            anchor_pool=pool_size,
            anchors=1,
            context_seeds=seeds,
            time_window_nodes=window,
            feedback_weight=feedback,
            # the Python rules read the query's own terms (related words:
            # tests/test_related_words.py)
            related_words=False,
        ),
    )
    texts = [
        f"{who} {WORDS[day % len(WORDS)]} on day {day}, then {WORDS[(day * 3) % len(WORDS)]}"
        for who, day, _ in rows
    ]
    ids = m.add_batch(
        texts,
        speakers=[r[0] for r in rows],
        timestamps=[T0 + r[1] * DAY + i for i, r in enumerate(rows)],
        provenances=[{"session": str(r[2])} for r in rows],
        scopes=[{"user": "a" if r[2] % 2 else "b"} for r in rows],
    )
    # a few changed facts, so the chains and the validity columns take part
    stamps = dict(zip(ids, m.store.timestamps(ids), strict=True))
    for old, new in zip(ids[::4], ids[2::4], strict=False):
        if (stamps[old] or 0) < (stamps[new] or 0):
            m.store.add_supersedes(new, old, 0.9)
    view = ScopedView.of(m, {"user": "a"}, None) if scoped else None
    assert_same_pool(m, query, view=view)
    assert_same_pool(m, query, now=T0 + 30 * DAY, view=view)


@pytest.mark.parametrize("path", DEV_SETS, ids=["locomo", "beam"])
def test_development_questions_get_the_python_pool(path: Path) -> None:
    if not path.exists():
        pytest.skip("development set not found")
    convs, _ = load(path)
    conv = convs[0]
    texts, stamps, speakers, provs = conversation_inputs(conv)
    m = jevmem.Memory(
        embedder=jevmem.HashEmbedder(64),
        config=MemoryConfig(related_words=False),
        store=jevmem.MemoryStore(64, max_text_bytes=1 << 22),
    )
    m.add_batch(texts, timestamps=stamps, speakers=speakers, provenances=provs)
    for qa in conv.qas[:80]:
        assert_same_pool(m, qa.question)
    # a result's evidence items, read in one call, as they were read one by one
    for qa in conv.qas[:20]:
        for mode in ("lexical", "full"):
            got = m.search(qa.question, k=10, mode=mode)
            run = QueryRun(m, qa.question, m.embedder.embed([qa.question])[0], 10, None, mode, 0.0)
            if mode == "full":
                run.pool()  # the feedback moves the vector the passages are read by
            want = [
                reference_item(m.store, run.qvec, None, e.id, e.score, e.via) for e in got.evidence
            ]
            assert got.evidence == want, (mode, qa.question)


def session(m: Memory, **over: Any) -> ReadSession:
    args: dict[str, Any] = dict(
        lexical_ranked=[],
        vector_ranked=[],
        best_lexical=1.0,
        best_dense=1.0,
        best_passage=1.0,
        named=[],
    )
    args.update(over)
    return ReadSession(m.store, "milk", np.ones(64, dtype=np.float32), **args)


def test_bad_input_raises_and_changes_nothing() -> None:
    m = Memory(HashEmbedder(64))
    a, b = m.add_batch(["oat milk daily", "soy milk now"], timestamps=[T0, T0 + DAY])
    m.store.add_supersedes(b, a, 0.9)
    with pytest.raises(InvalidInputError):
        ReadSession(m.store, "milk", np.ones(3, dtype=np.float32), lexical_ranked=[], vector_ranked=[], best_lexical=1.0, best_dense=1.0, best_passage=1.0, named=[])  # fmt: skip
    with pytest.raises(InvalidInputError, match="stance"):
        session(m, fact_stance="sometime")
    s = session(m, fact_stance="present")
    before = s.vector.copy()
    plan: dict[str, Any] = dict(
        time_window_nodes=4,
        window_scan=64,
        feedback_weight=0.5,
        feedback_nodes=2,
        context_seeds=2,
        second_step_decay=0.7,
        reply_link=1.0,
    )
    with pytest.raises(NodeNotFoundError):
        s.pool([a, 99], [], **plan)
    with pytest.raises(NodeNotFoundError):
        s.signals([a, 99])
    assert np.array_equal(s.vector, before) and s.replaced() == []
    with pytest.raises(InvalidInputError):
        s.pool([a], [], **{**plan, "feedback_weight": -1.0})
    rows, facts, best = s.signals([a, b])
    assert rows.shape == (2, len(SIGNAL_COLUMNS)) and best.tolist() == [0, 0]
    assert facts is not None and facts.shape == (2, len(FACT_COLUMNS))
    assert facts[:, 0].tolist() == [0.0, 1.0]
    assert s.replaced() == [(a, [b])]
    ids, rows, facts, best, sources = s.pool([a], [], **plan)
    assert sorted(ids.tolist()) == [a, b] and sources["fused"] == 1
    assert not np.array_equal(s.vector, before)


def drive(m: Memory, query: str, check: Any) -> QueryRun:
    """Run one full query as `Memory.search` does, calling ``check(run,
    request)`` on every assessment request."""
    run = QueryRun(m, query, m.embedder.embed([query])[0], 10, None, "full", time.perf_counter())
    gen = run.steps()
    try:
        reqs = next(gen)
        while True:
            for req in reqs:
                if req.purpose == "assessment":
                    check(run, req)
            reqs = gen.send(m.controller.decide(reqs))
    except StopIteration:
        pass
    return run


@pytest.mark.skipif(not DEV_SETS[0].exists(), reason="development sets not found")
def test_assessments_read_the_evidence_as_the_python_did() -> None:
    convs, _ = load(DEV_SETS[0])
    conv = convs[1]
    texts, stamps, speakers, provs = conversation_inputs(conv)
    m = jevmem.Memory(embedder=jevmem.HashEmbedder(64))
    m.add_batch(texts, timestamps=stamps, speakers=speakers, provenances=provs)
    seen = 0

    def check(run: QueryRun, req: Any) -> None:
        nonlocal seen
        state = req.state
        shown = [e["id"] for e in state["evidence"]]
        assert shown == run.shown
        coverage, known, covered = reference_assessment(run, shown)
        assert (state["coverage"], state["known_terms"], state["covered_terms"]) == (
            coverage,
            known,
            covered,
        )
        want = m.store.content_coverage(
            shown,
            run.session.inputs()["content_tokens"],
            list(run.asked_people),
            sorted(run.speakers),
        ).tolist()
        got = [
            [e["signals"]["content_coverage"], e["signals"]["other_coverage"]]
            for e in state["evidence"]
        ]
        assert got == want
        assert got == [list(c) for c in run.coverages(shown)]
        assert [e["text"] for e in state["evidence"]] == m.store.texts(shown)
        scores = [e["score"] for e in state["evidence"]]
        assert scores == sorted(scores, reverse=True)
        seen += 1

    for qa in conv.qas[:40]:
        run = drive(m, qa.question, check)
        t = run.traversal
        assert t is not None
        ranked = run.ranked(t)
        assert sorted(n for n, _ in ranked) == sorted(e.node for e in t.result())
        keys = [(-score, node) for node, score in ranked]
        assert keys == sorted(keys)
    assert seen >= 40


def test_what_kind_of_query_asks_reaches_every_candidate() -> None:
    """The query's own columns (the same for every node) say what it asks:
    "what did you recommend" asks what the answerer said (and, by its verb,
    for advice), "what did I say" and a plain request for advice do not."""
    m = Memory(HashEmbedder(64), jevmem.LocalController())
    m.add_batch(
        ["Which cache should I use for my API?", "I recommend Redis with a short TTL."],
        speakers=["user", "assistant"],
    )
    expect = {
        "What cache did you recommend for my API?": (1.0, 1.0),
        "Which cache have you suggested so far?": (1.0, 0.0),
        "What did I say about my API?": (0.0, 0.0),
        "Can you recommend a cache?": (0.0, 1.0),
    }
    for query, (answerer, request) in expect.items():
        run = QueryRun(m, query, m.embedder.embed([query])[0], 10, None, "full", 0.0)
        ids, sigs = run.pool()
        assert ids, query
        assert sigs["query_answerer"].tolist() == [answerer] * len(ids), query
        assert sigs["query_request"].tolist() == [request] * len(ids), query

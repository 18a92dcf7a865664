"""Long observations: kept whole up to the size limit, indexed in passages so
every part of the text is searchable, refused past the limit with nothing
stored, and short texts exactly as before (no passages, same signals)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, LocalController, Memory, MemoryConfig
from jevmem._core import DEFAULT_MAX_TEXT_BYTES, MemoryStore
from jevmem.controller.types import DecisionRequest
from jevmem.errors import DimensionMismatchError, InvalidInputError
from jevmem.passages import PassagePlanner, passage_spans
from jevmem.plane.query import QueryRun
from jevmem.temporal import ground

T0 = 1_700_000_000
_WORDS = (
    "the pipeline moved to Dagster last week and we kept Airflow for backfills while "
    "Maya reviewed the schema caf\u00e9 na\u00efve \u00fcber \u6771\u4eac deploy yesterday "
    "retries 2023 config_value x=42 def run(): return None"
).split()


def long_text(seed: int, size: int) -> str:
    """Prose-like text of about ``size`` characters: words, sentence ends,
    line and paragraph breaks, the odd long token and non-ASCII letters."""
    rng = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(_WORDS)
        if rng.random() < 0.01:
            w = "x" * rng.randint(20, 900)  # a token longer than a passage
        sep = rng.choices([" ", ". ", "? ", "\n", "\n\n", ", "], [30, 4, 1, 2, 1, 3])[0]
        out.append(w + sep)
        n += len(w) + len(sep)
    return "".join(out)[:size].strip() or "x"


def memory(**cfg: Any) -> Memory:
    return Memory(HashEmbedder(64), config=MemoryConfig(**cfg))


class Recording(LocalController):
    """The local controller, keeping every request it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[DecisionRequest] = []

    def decide(self, requests: Any, **kw: Any) -> Any:
        self.requests.extend(requests)
        return super().decide(requests, **kw)


# ---------------------------------------------------------------- the limit


def test_default_limit_is_4_mib_everywhere() -> None:
    assert DEFAULT_MAX_TEXT_BYTES == 4 * 1024 * 1024
    assert MemoryStore(8).max_text_bytes == DEFAULT_MAX_TEXT_BYTES
    assert MemoryConfig().max_text_bytes == DEFAULT_MAX_TEXT_BYTES
    assert memory().store.max_text_bytes == DEFAULT_MAX_TEXT_BYTES
    assert memory(max_text_bytes=1000).store.max_text_bytes == 1000
    s = MemoryStore(8)
    v = np.ones(8, np.float32)
    s.add("a" * DEFAULT_MAX_TEXT_BYTES, v)  # exactly the limit is fine
    with pytest.raises(InvalidInputError, match=f"the limit is {DEFAULT_MAX_TEXT_BYTES}"):
        s.add("a" * (DEFAULT_MAX_TEXT_BYTES + 1), v)
    assert len(s) == 1


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=6),
    limit=st.integers(100, 2000),
    data=st.data(),
)
def test_over_limit_text_is_refused_and_nothing_stored(
    sizes: list[int], limit: int, data: st.DataObject
) -> None:
    m = memory(max_text_bytes=limit)
    m.add("an observation already stored", timestamp=T0)
    before = (len(m), m.store.stats(), m.store.to_bytes())
    bad = data.draw(st.integers(0, len(sizes) - 1))
    # two UTF-8 bytes a character: the limit counts bytes, not characters
    texts = ["\u00e9" * min(s, limit // 2) for s in sizes]
    texts[bad] = "\u00e9" * (limit // 2 + 1)
    over = [i for i, t in enumerate(texts) if len(t.encode()) > limit]
    assert over == [bad]
    with pytest.raises(InvalidInputError) as err:
        m.add_batch(texts, timestamps=[T0 + i for i in range(len(texts))])
    msg = str(err.value)
    assert f"observation {over[0]}" in msg and str(limit) in msg
    assert (len(m), m.store.stats(), m.store.to_bytes()) == before
    # the store itself refuses too, naming the observation
    with pytest.raises(InvalidInputError, match=f"observation {over[0]}"):
        m.store.add_batch(texts, np.ones((len(texts), 64), np.float32))
    assert (len(m), m.store.stats(), m.store.to_bytes()) == before


# ---------------------------------------------------------------- passages


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    size=st.integers(1, 6000),
    budget=st.integers(1, 400),
    tokens=st.booleans(),
)
def test_passage_spans_cover_the_text_within_budget(
    seed: int, size: int, budget: int, tokens: bool
) -> None:
    text = long_text(seed, size)
    starts = [
        i for i, c in enumerate(text) if not c.isspace() and (i == 0 or text[i - 1].isspace())
    ]
    spans = passage_spans(text, budget, starts if tokens else None)
    covered = [False] * len(text)
    prev_end = 0
    for a, b in spans:
        assert prev_end <= a < b <= len(text)
        assert not text[a].isspace() and not text[b - 1].isspace()
        units = sum(1 for s in starts if a <= s < b) if tokens else b - a
        assert units <= budget
        for i in range(a, b):
            covered[i] = True
        prev_end = b
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace())
    if not tokens:
        # never inside a word that fits a passage
        for a, b in spans:
            for cut in (a, b):
                if 0 < cut < len(text) and not text[cut - 1].isspace() and not text[cut].isspace():
                    lo = text.rfind(" ", 0, cut) + 1
                    hi = min(
                        (j for j in (text.find(" ", cut), text.find("\n", cut)) if j >= 0),
                        default=len(text),
                    )
                    assert hi - lo > budget // 2 or "\n" in text[lo:hi]


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32),
    size=st.one_of(st.integers(600, 5000), st.integers(5000, 250_000)),
    window=st.integers(24, 200),
)
@example(seed=1, size=250_000, window=128)  # a few hundred KB, the default window
def test_long_text_round_trips_whole_and_every_passage_is_searchable(
    tmp_path: Path, seed: int, size: int, window: int
) -> None:
    m = memory(passage_tokens=window)
    ids = m.add_batch(
        ["a short note about lunch", long_text(seed, size), "another short one"],
        speakers=["Ann", "Assistant", "Ann"],
        timestamps=[T0, T0 + 60, T0 + 120],
    )
    text = long_text(seed, size)
    node = ids[1]
    assert m.get(node).text == text
    spans = m.store.passages(node)
    assert spans == PassagePlanner(m.embedder, window).spans(text, "Assistant: ")
    assert m.store.passages(ids[0]) == [] and m.store.passages(ids[2]) == []
    assert m.store.stats()["passages"] == len(spans)
    path = tmp_path / f"m{seed}.jevmem"
    m.save(path)
    loaded = Memory.load(path, HashEmbedder(64), config=MemoryConfig(passage_tokens=window))
    assert loaded.get(node).text == text
    assert loaded.store.passages(node) == spans
    # the first, the last and a sample between (every one on small texts)
    rng = random.Random(seed)
    # (a text that fits one window has no passages: nothing more to find)
    check = (
        sorted({0, len(spans) - 1, *rng.sample(range(len(spans)), min(40, len(spans)))})
        if spans
        else []
    )
    for store in (m.store, loaded.store):
        for i in check:
            a, b = spans[i]
            q = m.embedder.embed_one("Assistant: " + text[a:b])
            np.testing.assert_allclose(store.passage_embedding(node, i), q, atol=1e-5)
            hit_ids, hit_idx, sims = store.search_passages(q, 3)
            # its own passage matches perfectly: the node comes first (or ties
            # with another node holding the same words), by passage i or by
            # one of its passages with the same vector
            assert abs(float(sims[0]) - 1.0) < 1e-4
            tied = [
                (int(n), int(p))
                for n, p, sim in zip(hit_ids, hit_idx, sims, strict=True)
                if sim >= sims[0] - 1e-5
            ]
            assert any(
                n == node and np.allclose(store.passage_embedding(node, p), q, atol=1e-4)
                for n, p in tied
            ), (i, tied)


def test_evidence_names_the_passage_that_matched() -> None:
    filler = long_text(7, 20_000)
    needle = "The migration window for the billing database is Thursday at noon."
    text = filler + "\n\n" + needle + "\n\n" + long_text(8, 5_000)
    m = memory()
    ids = m.add_batch(
        ["We had pasta for dinner.", text, "The weather was nice."],
        speakers=["Ann", "Assistant", "Ann"],
        timestamps=[T0, T0 + 60, T0 + 120],
    )
    at = text.index(needle)
    for mode in ("lexical", "anchors", "full"):
        r = m.search("migration window billing database Thursday noon", k=3, mode=mode)
        item = next(e for e in r.evidence if e.id == ids[1])
        a, b = item.passage
        assert a <= at and at + len(needle) <= b, (mode, item.passage)
        assert (b - a) < len(text)
    off = memory(index_passages=False)
    off.add(text)
    assert off.store.stats()["passages"] == 0
    short = next(e for e in m.search("pasta dinner", k=3).evidence if e.id == ids[0])
    assert short.passage == (0, len(short.text))
    assert "passages" in m.search("billing database", k=3).trace["pool"]


def test_passage_nodes_join_the_pool() -> None:
    # the fused lists hold one node (a short exact match); the long text,
    # whose head is unrelated, comes in by its late passage
    text = long_text(3, 30_000) + "\n\nOur quarterly offsite is in Lisbon this spring."
    m = memory(anchor_depth=1, anchor_pool=1, anchors=1, context_seeds=0)
    ids = m.add_batch(["quarterly offsite Lisbon spring", text])
    run = QueryRun(
        m,
        "quarterly offsite Lisbon spring",
        m.embedder.embed_one("quarterly offsite Lisbon spring"),
        1,
        None,
        "full",
        0.0,
    )
    pool_ids, sigs = run.pool()
    assert run.fused_ids == [ids[0]]
    assert pool_ids == ids and run.pool_sources["passages"] == 1
    assert sigs["dense_passage"][1] > sigs["dense"][1]
    r = m.search("quarterly offsite Lisbon spring", k=1)
    assert r.trace["pool"]["passages"] == 1


@settings(max_examples=10, deadline=None)
@given(
    turns=st.lists(
        st.text(
            st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=100
        ).filter(lambda t: t.strip() != ""),
        min_size=1,
        max_size=12,
    ),
    query=st.sampled_from(["what did Ann say", "lunch plans", "the café"]),
)
def test_short_texts_get_no_passages_and_the_same_signals(turns: list[str], query: str) -> None:
    ctl = Recording()
    m = Memory(HashEmbedder(64), ctl)
    m.add_batch(
        turns, speakers=["Ann", "Bo"] * 6 and [("Ann", "Bo")[i % 2] for i in range(len(turns))]
    )
    assert m.store.stats()["passages"] == 0
    assert all(m.store.passages(i) == [] for i in range(len(turns)))
    ctl.requests.clear()
    r = m.search(query, k=5)
    assert r.trace["pool"]["passages"] == 0
    for e in r.evidence:
        assert e.passage == (0, len(e.text))
    scored = [req for req in ctl.requests if req.purpose == "scoring"]
    assert scored
    for req in scored:
        for c in req.state["candidates"]:
            sig = c["signals"]
            assert sig["dense_passage"] == sig["dense"]
    # search_passages over short texts is search_vector with passage 0
    q = m.embedder.embed_one(query)
    ids, sims = m.store.search_vector(q, 10)
    p_ids, p_idx, p_sims = m.store.search_passages(q, 10)
    assert p_ids.tolist() == ids.tolist() and p_sims.tolist() == sims.tolist()
    assert set(p_idx.tolist()) <= {0}


# ---------------------------------------------------------------- the store API


def test_store_passages_validate_and_change_nothing() -> None:
    s = MemoryStore(4)
    v = np.ones(4, np.float32)
    s.add("abcdef", v, passages=(np.eye(4, dtype=np.float32)[:2], [(0, 3), (3, 6)]))
    before = s.to_bytes()
    bad: list[Any] = [
        (np.ones((1, 4), np.float32), [(0, 7)]),  # past the end
        (np.ones((1, 4), np.float32), [(3, 3)]),  # empty
        (np.ones((2, 4), np.float32), [(2, 4), (1, 5)]),  # out of order
        (np.ones((2, 4), np.float32), [(0, 3)]),  # rows and spans differ
        (np.full((1, 4), np.nan, np.float32), [(0, 3)]),
    ]
    for p in bad:
        with pytest.raises(InvalidInputError):
            s.add("abcdef", v, passages=p)
        with pytest.raises(InvalidInputError, match="observation 1"):
            s.add_batch(["fine", "abcdef"], np.ones((2, 4), np.float32), passages=[None, p])
        assert s.to_bytes() == before
    with pytest.raises(DimensionMismatchError):
        s.add("abcdef", v, passages=(np.ones((1, 5), np.float32), [(0, 3)]))
    assert s.to_bytes() == before
    sims, idx = s.passage_similarities(np.array([0, 1, 0, 0], np.float32), [0, 99])
    assert idx[0] == 1 and abs(sims[0] - 1.0) < 1e-6 and np.isnan(sims[1])
    s.remove(0)
    assert s.stats()["passages"] == 0


@settings(max_examples=20, deadline=None)
@given(
    spans_per_node=st.lists(st.integers(0, 4), min_size=1, max_size=8),
    seed=st.integers(0, 2**32),
)
def test_add_batch_with_passages_equals_one_by_one(spans_per_node: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    texts = ["w" * (4 * max(1, m)) for m in spans_per_node]
    vecs = rng.normal(size=(len(texts), 8)).astype(np.float32)
    passages: list[Any] = [
        (rng.normal(size=(m, 8)).astype(np.float32), [(4 * j, 4 * j + 4) for j in range(m)])
        if m
        else None
        for m in spans_per_node
    ]
    a, b = MemoryStore(8), MemoryStore(8)
    a.add_batch(texts, vecs, passages=passages)
    for t, v, p in zip(texts, vecs, passages, strict=True):
        b.add(t, v, passages=p)
    assert a.to_bytes() == b.to_bytes()
    assert MemoryStore.from_bytes(a.to_bytes()).to_bytes() == a.to_bytes()


# ---------------------------------------------------------------- linear steps


def test_grounding_sees_the_whole_text() -> None:
    # past the old 200,000-character cut, and across the pieces it is grounded in
    text = long_text(1, 450_000).replace("yesterday", "later") + " We shipped it yesterday."
    refs = ground(text, T0)
    assert refs and refs[-1].text == "yesterday"
    a, b = refs[-1].span
    assert text[a:b] == "yesterday" and a > 400_000
    for r in refs:
        assert text[r.span[0] : r.span[1]] == r.text

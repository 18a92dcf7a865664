"""Property tests of the bounded traversal through the Python bindings.

Random memories (through ``MemoryStore``), random configs, routings and anchors
are driven with deterministic score oracles and with adversarial calls. The
traversal must keep every hard limit, reject every bad call with the right
exception while staying exactly as it was, and agree step by step with the
pure-Python reference in ``tests/support/traversal_reference.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st
from support import traversal_reference as ref

from jevmem import (
    Candidate,
    DimensionMismatchError,
    Evidence,
    InvalidConfigError,
    InvalidInputError,
    InvalidScoreError,
    JevmemError,
    MemoryStore,
    NodeNotFoundError,
    Traversal,
    TraversalConfig,
    TraversalStateError,
    depth_limit,
    largest_remainder,
    rrf,
    view_budgets,
)

if TYPE_CHECKING:
    from jevmem._core import ViewName  # a stub-only alias

DIM = 8  # below the dot kernel's 16 lanes: Rust then sums the products in order
DAY = 86_400
T0 = 1_700_000_000
VIEWS: tuple[ViewName, ...] = ("semantic", "temporal", "causal", "entity")
Routing4 = tuple[float, float, float, float]
Mode = Literal["ones", "zeros", "random", "continue"]
BAD_UNITS = [math.nan, math.inf, -math.inf, -1e-3, -1.0, 1.001, 5.0]


def f32(x: float) -> float:
    return float(np.float32(x))


# ---------------------------------------------------------------- oracle

MASK = (1 << 64) - 1


def mix(x: int) -> int:
    """splitmix64 finaliser."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


@dataclass(frozen=True)
class Oracle:
    """A deterministic controller: answers depend on (mode, seed, round, node) only."""

    mode: Mode
    seed: int

    def draw(self, rnd: int, node: int, k: int) -> float:
        h = mix(self.seed ^ mix(rnd ^ mix(node ^ mix(k))))
        return (h >> 40) / float(1 << 24)  # exact in f32

    def assessment(self, rnd: int) -> Routing4:
        if self.mode == "ones":
            return (1.0, 1.0, 1.0, 1.0)
        if self.mode == "zeros":
            return (0.0, 0.0, 0.0, 0.0)
        if self.mode == "random":
            d = [self.draw(rnd, MASK, k) for k in (1, 2, 3, 4)]
            # Usefulness mostly high, so that traversals get deep.
            return (d[0], 0.1 + 0.9 * d[1], d[2], d[3])
        return (0.0, 1.0, 1.0, 0.0)

    def scores(self, rnd: int, node: int) -> Routing4:
        if self.mode == "ones":
            return (1.0, 1.0, 1.0, 1.0)
        if self.mode == "zeros":
            return (0.0, 0.0, 0.0, 0.0)
        d = [self.draw(rnd, node, k) for k in (5, 6, 7, 8)]
        return (d[0], d[1], d[2], d[3])


# ---------------------------------------------------------------- random memories


@dataclass
class Memory:
    store: MemoryStore
    ids: list[int]  # present nodes, ascending
    # (src, dst, view) -> weight as stored (f32), the model of the graph
    edges: dict[tuple[int, int, ViewName], float]


weights = st.one_of(
    st.integers(0, 10).map(lambda k: k / 10),  # coarse: ties exercise the tie rules
    st.floats(0.0, 1.0),
)


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    n = draw(st.integers(1, 6)) if draw(st.integers(0, 4)) == 4 else draw(st.integers(8, 30))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM))
    # Random lengths: the store normalises.
    vecs *= rng.uniform(0.1, 10.0, size=(n, 1)) / np.linalg.norm(vecs, axis=1, keepdims=True)
    timestamps = draw(st.lists(st.none() | st.integers(T0, T0 + 100 * DAY), min_size=n, max_size=n))
    store = MemoryStore(DIM)
    ids = store.add_batch([f"memory {i}" for i in range(n)], vecs, timestamps=timestamps)
    assert ids == list(range(n))

    # Bulk edges from the seeded generator (dense graphs, cheap to draw), a few
    # from Hypothesis (shrinkable). Coarse weights make ties common.
    density = draw(st.sampled_from([8, 1, 4, 16]))  # edges per node
    bulk = [
        (
            int(rng.integers(n)),
            int(rng.integers(n)),
            VIEWS[int(rng.integers(4))],
            float(rng.integers(11)) / 10 if rng.random() < 0.5 else float(rng.random()),
        )
        for _ in range(int(rng.integers(density * n // 2, density * n + 1)))
    ]
    raw = bulk + draw(
        st.lists(
            st.tuples(st.sampled_from(ids), st.sampled_from(ids), st.sampled_from(VIEWS), weights),
            max_size=n,
        )
    )
    direct = rng.random(len(raw)) < 0.3
    flush_after = rng.random(len(raw)) < 0.2
    model: dict[tuple[int, int, ViewName], float] = {}
    batch: list[tuple[int, int, ViewName, float]] = []
    batch_want: list[str] = []

    def flush() -> None:
        assert store.add_edges(batch) == batch_want
        batch.clear()
        batch_want.clear()

    for i, (src, dst, view, w) in enumerate(raw):
        if src == dst:
            continue
        key = (src, dst, view)
        old = model.get(key)
        want = "inserted" if old is None else "strengthened" if f32(w) > old else "unchanged"
        model[key] = f32(w) if old is None else max(old, f32(w))
        if direct[i]:
            flush()
            assert store.add_edge(src, dst, view, w) == want
        else:
            batch.append((src, dst, view, w))
            batch_want.append(want)
            if flush_after[i]:
                flush()
    flush()

    # Some removals: sparse ids, and their edges must be gone.
    removed = draw(st.sets(st.sampled_from(ids), max_size=n // 4))
    for node in removed:
        store.remove(node)
    present = [i for i in ids if i not in removed]
    model = {k: w for k, w in model.items() if k[0] not in removed and k[1] not in removed}
    for node in present:
        got = {(e.src, e.dst, e.view): e.weight for e in store.neighbors(node)}
        assert got == {k: w for k, w in model.items() if node in (k[0], k[1])}
    return Memory(store, present, model)


@dataclass(frozen=True)
class Knobs:
    total_budget: int
    min_per_view: int
    gamma: float
    theta_act: float
    depth_max: int
    beam_width: int
    max_visited: int
    max_edges: int
    max_controller_calls: int
    theta_useful: float
    lambdas: tuple[float, float, float, float, float]
    recency_weight: float
    min_admit_score: float

    def rust(self) -> TraversalConfig:
        return TraversalConfig(
            total_budget=self.total_budget,
            min_per_view=self.min_per_view,
            gamma=self.gamma,
            theta_act=self.theta_act,
            depth_max=self.depth_max,
            beam_width=self.beam_width,
            max_visited=self.max_visited,
            max_edges=self.max_edges,
            max_controller_calls=self.max_controller_calls,
            theta_useful=self.theta_useful,
            lambdas=self.lambdas,
            recency_weight=self.recency_weight,
            min_admit_score=self.min_admit_score,
        )

    def reference(self) -> ref.TraversalConfig:
        return ref.TraversalConfig(
            total_budget=self.total_budget,
            min_per_view=self.min_per_view,
            gamma=self.gamma,
            theta_act=self.theta_act,
            depth_max=self.depth_max,
            beam_width=self.beam_width,
            max_visited=self.max_visited,
            max_edges=self.max_edges,
            max_controller_calls=self.max_controller_calls,
            theta_useful=self.theta_useful,
            lambdas=self.lambdas,
            recency_weight=self.recency_weight,
            min_admit_score=self.min_admit_score,
        )


probability = st.sampled_from([0.0, 0.05, 0.1, 0.5, 1.0]) | st.floats(0.0, 1.0)


@st.composite
def knobs(draw: st.DrawFn) -> Knobs:
    def mostly(usual: st.SearchStrategy[int], rare: st.SearchStrategy[int], odds: int = 4) -> int:
        # Hypothesis favours small and boundary values; tiny limits would end
        # most runs in round 0, so draw them only now and then.
        return draw(rare) if draw(st.integers(0, odds)) == odds else draw(usual)

    min_per_view = draw(st.integers(0, 3))
    lambdas = draw(st.tuples(*[st.sampled_from([1.0, 0.0, 0.5, 2.0])] * 5))
    if sum(lambdas) == 0:
        lambdas = (1.0, 1.0, 1.0, 1.0, 1.0)
    return Knobs(
        total_budget=mostly(st.integers(20, 80), st.integers(max(1, 4 * min_per_view), 20)),
        min_per_view=min_per_view,
        gamma=draw(st.sampled_from([1.0, 1.0, 0.5, 2.0])),
        theta_act=draw(st.sampled_from([0.1, 0.0, 0.1, 0.5, 1.0])),
        depth_max=mostly(st.integers(3, 6), st.integers(1, 2)),
        beam_width=mostly(st.integers(2, 6), st.just(1)),
        max_visited=mostly(st.integers(15, 60), st.integers(1, 15)),
        max_edges=mostly(st.integers(100, 1000), st.integers(1, 40), odds=2),
        max_controller_calls=mostly(st.integers(6, 16), st.integers(1, 5)),
        theta_useful=draw(st.sampled_from([0.15, 0.0])),
        lambdas=lambdas,
        recency_weight=draw(st.sampled_from([0.1, 0.0, 1.0])),
        min_admit_score=draw(st.sampled_from([0.25, 0.0, 0.1]) | st.floats(0.0, 0.6)),
    )


@dataclass(frozen=True)
class Query:
    routing: Routing4
    multi_hop: float
    recency: float
    anchors: list[tuple[int, float]]
    vector: list[float] | None  # f32 values, not unit length
    now: int | None
    calls_used: int
    oracle: Oracle


@st.composite
def queries(draw: st.DrawFn, mem: Memory, k: Knobs) -> Query:
    routing = draw(st.tuples(probability, probability, probability, probability))
    # Mostly a few anchors; none at all now and then.
    anchor_ids = draw(st.lists(st.sampled_from(mem.ids), unique=True, max_size=6))
    if not anchor_ids and draw(st.integers(0, 9)) < 9:
        anchor_ids = [mem.ids[0]]
    scores = draw(st.lists(probability, min_size=len(anchor_ids), max_size=len(anchor_ids)))
    vector = None
    if draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        vector = [float(x) for x in rng.normal(size=DIM).astype(np.float32)]
    mode: Mode = draw(st.sampled_from(get_args(Mode)))
    return Query(
        routing=routing,
        multi_hop=draw(st.sampled_from([1.0, 0.6]) | probability),
        recency=draw(probability),
        anchors=list(zip(anchor_ids, scores, strict=True)),
        vector=vector,
        now=draw(st.none() | st.integers(T0 - DAY, T0 + 120 * DAY)),
        # Routing's call, mostly; Hypothesis would favour the limit itself.
        calls_used=1
        if draw(st.integers(0, 3)) < 3
        else draw(st.integers(0, k.max_controller_calls)),
        oracle=Oracle(mode, draw(st.integers(0, 2**64 - 1))),
    )


def start(mem: Memory, k: Knobs, q: Query) -> Traversal:
    return mem.store.traverse(
        q.routing,
        q.anchors,
        multi_hop=q.multi_hop,
        recency=q.recency,
        query_vector=None if q.vector is None else np.array(q.vector, dtype=np.float32),
        now=q.now,
        config=k.rust(),
        calls_used=q.calls_used,
    )


def score_rows(q: Query, rnd: int, cands: Sequence[Candidate]) -> npt.NDArray[np.float64]:
    rows = [q.oracle.scores(rnd, c.node) for c in cands]
    return np.array(rows, dtype=np.float64).reshape(len(rows), 4)


# ---------------------------------------------------------------- checks


def cand_key(c: Candidate) -> tuple[int, str, float, int, int, int]:
    return (c.node, c.view, c.edge_weight, c.src, c.dst, c.from_node)


def ev_key(e: Evidence) -> tuple[object, ...]:
    return (e.node, e.score, e.depth, None if e.via is None else cand_key(e.via))


def snapshot(t: Traversal) -> tuple[object, ...]:
    """Everything observable about a traversal except the running clock."""
    tr = t.trace()
    del tr["elapsed_s"]
    return (
        t.phase,
        t.stop_reason,
        t.calls_left,
        tr,
        [ev_key(e) for e in t.result()],
        [cand_key(c) for c in t.candidates()],
        t.frontier(),
    )


@dataclass
class Tracker:
    """What a correct traversal must look like, followed from the outside."""

    mem: Memory
    knobs: Knobs
    query: Query
    seen: set[int]
    rounds_done: int = 0

    def check(self, t: Traversal) -> None:
        k, tr = self.knobs, t.trace()
        assert tr["visited"] == len(self.seen) <= k.max_visited
        assert tr["edges_examined"] <= k.max_edges
        assert tr["controller_calls"] <= k.max_controller_calls
        assert t.calls_left == k.max_controller_calls - tr["controller_calls"]
        assert tr["depth_limit"] == depth_limit(self.query.multi_hop, k.depth_max)
        assert len(tr["rounds"]) - 1 <= tr["depth_limit"]
        assert [r["depth"] for r in tr["rounds"]] == list(range(len(tr["rounds"])))
        budgets, spent = tr["budgets"], tr["spent"]
        assert sum(budgets.values()) == k.total_budget
        for v in VIEWS:
            assert spent[v] <= budgets[v]
            if v in tr["active_views"]:
                assert budgets[v] >= k.min_per_view
            else:
                assert budgets[v] == 0 and spent[v] == 0
        assert (t.phase == "done") == (t.stop_reason is not None) == (tr["stop_reason"] is not None)
        if t.stop_reason == "budget_exhausted":
            assert all(spent[v] == budgets[v] for v in tr["active_views"])

        result = t.result()
        assert len({e.node for e in result}) == len(result)
        assert all((a.score, -a.node) > (b.score, -b.node) for a, b in itertools.pairwise(result))
        for j in range(len(result) + 1):
            assert [ev_key(e) for e in t.result(j)] == [ev_key(e) for e in result[:j]]
        for e in result:
            assert 0.0 <= e.score <= 1.0
            if e.depth == 0:
                assert e.via is None
            else:
                assert e.via is not None and e.via.node == e.node
                assert e.depth <= self.rounds_done
                assert e.score >= f32(k.min_admit_score)
        admitted = [sum(1 for e in result if e.depth == d) for d in range(len(tr["rounds"]))]
        assert admitted == [r["admitted"] for r in tr["rounds"]]
        assert all(r["admitted"] <= k.beam_width for r in tr["rounds"][1:])

    def check_expansion(self, t: Traversal, frontier: list[int], cands: list[Candidate]) -> None:
        tr = t.trace()
        assert [cand_key(c) for c in t.candidates()] == [cand_key(c) for c in cands]
        per_view = dict.fromkeys(VIEWS, 0)
        for c in cands:
            assert c.node not in self.seen, "a candidate was visited before"
            self.seen.add(c.node)
            assert c.view in tr["active_views"]
            assert c.from_node in frontier
            assert {c.node, c.from_node} == {c.src, c.dst}
            edges = {
                (e.src, e.dst, e.view): e.weight
                for e in self.mem.store.neighbors(c.from_node, c.view)
            }
            assert edges.get((c.src, c.dst, c.view)) == c.edge_weight, "no such edge"
            assert self.mem.edges[(c.src, c.dst, c.view)] == c.edge_weight
            per_view[c.view] += 1
        assert (
            len(cands)
            <= tr["budgets"]["semantic"]
            + tr["budgets"]["temporal"]
            + tr["budgets"]["causal"]
            + tr["budgets"]["entity"]
        )
        if cands:
            assert tr["rounds"][-1]["candidates"] == len(cands)
        else:
            assert t.phase == "done"


def expect_unchanged(t: Traversal, call: Callable[[], object], exc: type[JevmemError]) -> None:
    before = snapshot(t)
    with pytest.raises(exc):
        call()
    assert snapshot(t) == before


def inject_faults(t: Traversal, data: st.DataObject) -> None:
    """A few bad calls; each must raise its typed error and change nothing."""
    for _ in range(data.draw(st.integers(0, 3), label="faults")):
        phase = t.phase
        n = len(t.candidates())
        good = np.full((max(n, 1), 4), 0.5)
        kind = data.draw(
            st.sampled_from(["wrong_phase", "bad_value", "bad_shape"]), label="fault kind"
        )
        if kind == "wrong_phase" or phase in ("done", "expand"):
            if phase != "assess":
                expect_unchanged(t, lambda: t.assess(0.0, 1.0, 1.0, 0.0), TraversalStateError)
            if phase != "expand":
                expect_unchanged(t, t.expand, TraversalStateError)
            if phase != "score":
                bad = good.copy()
                if data.draw(st.booleans(), label="NaN too"):
                    bad[0, 0] = math.nan  # the phase is checked first
                expect_unchanged(t, partial(t.score, bad), TraversalStateError)
        elif phase == "assess":
            args = [0.0, 1.0, 1.0, 0.0]
            args[data.draw(st.integers(0, 3))] = data.draw(st.sampled_from(BAD_UNITS))
            expect_unchanged(t, partial(t.assess, *args), InvalidScoreError)
        elif kind == "bad_value":
            bad = np.full((n, 4), 0.5)
            i, j = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, 3))
            bad[i, j] = data.draw(st.sampled_from(BAD_UNITS))
            expect_unchanged(t, partial(t.score, bad), InvalidScoreError)
        else:
            rows, cols = data.draw(
                st.sampled_from([(n + 1, 4), (n - 1, 4), (n, 3), (n, 5), (n + 2, 4)])
            )
            bad = np.full((rows, cols), 0.5)
            expect_unchanged(t, partial(t.score, bad), InvalidInputError)


def drive(
    t: Traversal, tracker: Tracker, q: Query, data: st.DataObject | None
) -> list[tuple[str, object]]:
    """Run to the end with the oracle; returns the valid calls made, in order."""
    log: list[tuple[str, object]] = []
    steps = 0
    tracker.check(t)
    while t.phase != "done":
        steps += 1
        assert steps <= 3 * (tracker.knobs.depth_max + 1), "the traversal does not terminate"
        if data is not None:
            inject_faults(t, data)
        rnd = len(t.trace()["rounds"]) - 1
        if t.phase == "assess":
            a = q.oracle.assessment(rnd)
            log.append(("assess", a))
            assert t.assess(*a) == t.phase
        elif t.phase == "expand":
            frontier = t.frontier()
            cands = t.expand()
            log.append(("expand", [cand_key(c) for c in cands]))
            tracker.check_expansion(t, frontier, cands)
        else:
            rows = score_rows(q, rnd, t.candidates())
            log.append(("score", rows.tolist()))
            assert t.score(rows) == t.phase
            tracker.rounds_done += 1
        assert t.check_time() == t.phase
        tracker.check(t)
    if data is not None:
        inject_faults(t, data)
    return log


def tracker_for(mem: Memory, k: Knobs, q: Query) -> Tracker:
    return Tracker(mem, k, q, seen={n for n, _ in q.anchors[: k.max_visited]})


# ---------------------------------------------------------------- invariants


@given(mem=memories(), k=knobs(), data=st.data())
def test_invariants_hold_under_adversarial_calls(
    mem: Memory, k: Knobs, data: st.DataObject
) -> None:
    q = data.draw(queries(mem, k), label="query")
    t = start(mem, k, q)
    drive(t, tracker_for(mem, k, q), q, data)
    assert t.stop_reason in get_args(ref.StopReason)
    assert t.remaining_s >= 0.0
    note(f"stop {t.stop_reason}, trace {t.trace()}")
    event(f"stop: {t.stop_reason}")


@given(mem=memories(), k=knobs(), data=st.data())
def test_bad_calls_change_nothing_and_the_run_is_the_same(
    mem: Memory, k: Knobs, data: st.DataObject
) -> None:
    """Faults interleaved with a run leave it identical to the clean run."""
    q = data.draw(queries(mem, k), label="query")
    clean = start(mem, k, q)
    clean_log = drive(clean, tracker_for(mem, k, q), q, None)
    faulty = start(mem, k, q)
    faulty_log = drive(faulty, tracker_for(mem, k, q), q, data)
    assert faulty_log == clean_log
    assert snapshot(faulty) == snapshot(clean)


@pytest.mark.parametrize("mode", get_args(Mode))
def test_every_score_stream_terminates(mode: Mode) -> None:
    m = MemoryStore(DIM)
    rng = np.random.default_rng(3)
    ids = m.add_batch(["x"] * 50, rng.normal(size=(50, DIM)))
    m.add_edges([(i, (i * 7 + 1) % 50, VIEWS[i % 4], 0.5) for i in ids if i != (i * 7 + 1) % 50])
    k = Knobs(80, 1, 1.0, 0.1, 8, 10, 60, 2400, 16, 0.15, (1.0,) * 5, 0.1, 0.25)
    q = Query((1.0, 1.0, 1.0, 1.0), 1.0, 0.5, [(0, 1.0)], None, T0, 1, Oracle(mode, 7))
    mem = Memory(m, ids, {(e.src, e.dst, e.view): e.weight for i in ids for e in m.neighbors(i)})
    t = start(mem, k, q)
    drive(t, tracker_for(mem, k, q), q, None)
    assert t.phase == "done"


# ---------------------------------------------------------------- equivalence


class StoreGraph(ref.Graph):
    """The reference graph with the store's similarity: for DIM < 16 the Rust
    dot kernel adds the f32 products one by one in f32."""

    def similarity(self, unit_query: Sequence[float], node: int) -> float | None:
        emb = self.embeddings.get(node)
        if emb is None or len(emb) != len(unit_query):
            return None
        s = 0.0
        for x, y in zip(unit_query, emb, strict=True):
            s = ref.f32(s + ref.f32(x * y))
        return s


def export(mem: Memory) -> StoreGraph:
    """The memory in the reference's format, with the embeddings the store keeps."""
    g = StoreGraph(nodes=set(mem.ids))
    for node in mem.ids:
        for e in mem.store.neighbors(node):
            other = e.dst if e.src == node else e.src
            view = VIEWS.index(e.view)
            g.edges.setdefault(view, {}).setdefault(node, []).append(
                (other, e.weight, e.src, e.dst)
            )
        g.embeddings[node] = [float(x) for x in mem.store.embedding(node)]
        ts = mem.store.get(node).timestamp
        if ts is not None:
            g.timestamps[node] = ts
    return g


def normalize(v: Sequence[float]) -> list[float]:
    """VectorIndex::normalize: the f64 norm summed in order, each entry divided in f64."""
    acc = 0.0
    for x in v:
        acc += x * x
    n = math.sqrt(acc)
    if n == 0.0 or not math.isfinite(n):
        return list(v)
    return [ref.f32(x / n) for x in v]


def ref_cand_key(c: ref.Candidate) -> tuple[int, str, float, int, int, int]:
    return (c.node, VIEWS[c.view], c.edge_weight, c.src, c.dst, c.from_)


@given(mem=memories(), k=knobs(), data=st.data())
def test_equals_the_python_reference(mem: Memory, k: Knobs, data: st.DataObject) -> None:
    q = data.draw(queries(mem, k), label="query")
    faults = data.draw(st.booleans(), label="with faults")
    g = export(mem)
    t = start(mem, k, q)
    r = ref.Traversal.start(
        k.reference(),
        ref.Routing(q.routing, q.multi_hop, q.recency),
        None if q.vector is None else normalize(q.vector),
        q.now,
        q.anchors,
        q.calls_used,
        0.0,
        g,
        clock=lambda: 0.0,
    )
    tracker = tracker_for(mem, k, q)
    tracker.check(t)
    while True:
        assert t.phase == r.phase
        if r.done:
            break
        if faults:
            inject_faults(t, data)
        rnd = len(r.rounds) - 1
        if r.phase == "assess":
            a = q.oracle.assessment(rnd)
            t.assess(*a)
            r.assess(ref.Assessment(*a))
        elif r.phase == "expand":
            frontier = t.frontier()
            assert frontier == r.frontier
            cands = t.expand()
            assert [cand_key(c) for c in cands] == [ref_cand_key(c) for c in r.expand(g)]
            tracker.check_expansion(t, frontier, cands)
        else:
            rows = [q.oracle.scores(rnd, c.node) for c in r.candidates]
            t.score(np.array(rows, dtype=np.float64).reshape(len(rows), 4))
            r.score(g, [ref.CandidateScores(*row) for row in rows])
            tracker.rounds_done += 1
        tracker.check(t)

    tr, rt = t.trace(), r.trace()
    assert t.stop_reason == rt["stop"]
    for key in ("visited", "edges_examined", "controller_calls", "depth_limit"):
        assert tr[key] == rt[key], key
    assert tr["activation_fallback"] == rt["fallback"]
    assert tr["active_views"] == [v for v, a in zip(VIEWS, rt["active"], strict=True) if a]
    assert [tr["budgets"][v] for v in VIEWS] == rt["budgets"]
    assert [tr["spent"][v] for v in VIEWS] == rt["spent"]
    assert [(x["candidates"], x["admitted"]) for x in tr["rounds"]] == [
        (x["candidates"], x["admitted"]) for x in rt["rounds"]
    ]
    got, want = t.result(), r.result(len(r.evidence))
    assert [(e.node, e.depth) for e in got] == [(e.node, e.depth) for e in want]
    for mine, theirs in zip(got, want, strict=True):
        assert abs(mine.score - theirs.score) <= 1e-6
        assert (mine.via is None) == (theirs.via is None)
        if mine.via is not None and theirs.via is not None:
            assert cand_key(mine.via) == ref_cand_key(theirs.via)
    assert t.frontier() == r.frontier
    event(f"stop: {t.stop_reason}")
    event(f"rounds: {min(len(tr['rounds']) - 1, 3)}{'+' if len(tr['rounds']) > 3 else ''}")


# ---------------------------------------------------------------- budgets and fusion


@given(
    lists=st.lists(st.lists(st.integers(0, 30), max_size=12), max_size=4),
    kappa=st.sampled_from([60.0, 1.0]) | st.floats(1e-3, 1e3),
)
def test_rrf_matches_the_reference(lists: list[list[int]], kappa: float) -> None:
    got = rrf(lists, kappa)
    assert got == ref.rrf(lists, kappa)
    assert {n for n, _ in got} == {n for lst in lists for n in lst}
    assert all(s > 0 for _, s in got)
    assert all((a[1], -a[0]) > (b[1], -b[0]) for a, b in itertools.pairwise(got))
    # A node's score is at most one first-rank share per list.
    assert all(s <= len(lists) / (kappa + 1) * (1 + 1e-12) for _, s in got)


@pytest.mark.parametrize("kappa", [0.0, -1.0, math.nan, math.inf])
def test_rrf_rejects_bad_kappa(kappa: float) -> None:
    with pytest.raises(InvalidConfigError):
        rrf([[1, 2]], kappa)


@st.composite
def apportionments(draw: st.DrawFn) -> tuple[list[float], int, int]:
    ws = draw(
        st.lists(
            st.sampled_from([0.0, 1.0, 0.5, 1 / 3]) | st.floats(0.0, 1e6) | st.floats(0.0, 1e-30),
            min_size=1,
            max_size=8,
        )
    )
    if all(w == 0 for w in ws):
        ws[0] = 1.0
    minimum = draw(st.integers(0, 10))
    total = draw(st.integers(minimum * len(ws), minimum * len(ws) + 500))
    return ws, total, minimum


@given(apportionments())
def test_largest_remainder(args: tuple[list[float], int, int]) -> None:
    ws, total, minimum = args
    out = largest_remainder(ws, total, minimum)
    assert out == ref.largest_remainder(ws, total, minimum)
    assert sum(out) == total
    assert all(o >= minimum for o in out)
    rest = total - minimum * len(ws)
    wsum = sum(Fraction(w) for w in ws)
    for o, w in zip(out, ws, strict=True):
        # Within one unit of the exact quota (the 41-bit fixed point is far finer).
        assert abs((o - minimum) - rest * Fraction(w) / wsum) < 1 + Fraction(1, 10**6)
    # Larger weights never get less.
    for i, wi in enumerate(ws):
        for j, wj in enumerate(ws):
            if wi > wj:
                assert out[i] >= out[j]


@pytest.mark.parametrize(
    ("ws", "total", "minimum", "exc"),
    [
        ([], 10, 1, InvalidInputError),
        ([1.0, -0.5], 10, 1, InvalidInputError),
        ([1.0, math.nan], 10, 1, InvalidInputError),
        ([1.0, math.inf], 10, 1, InvalidInputError),
        ([0.0, 0.0], 10, 1, InvalidInputError),
        ([1.0, 1.0, 1.0], 5, 2, InvalidConfigError),
    ],
)
def test_largest_remainder_rejects(
    ws: list[float], total: int, minimum: int, exc: type[JevmemError]
) -> None:
    with pytest.raises(exc):
        largest_remainder(ws, total, minimum)
    with pytest.raises(ValueError):  # the reference's errors are ValueErrors too
        ref.largest_remainder(ws, total, minimum)


@given(
    probs=st.tuples(probability, probability, probability, probability),
    theta_act=probability,
    minimum=st.integers(0, 5),
    extra=st.integers(0, 200),
    gamma=st.sampled_from([1.0, 0.5, 2.0, 3.0]),
)
def test_view_budgets(
    probs: Routing4, theta_act: float, minimum: int, extra: int, gamma: float
) -> None:
    total = 4 * minimum + extra
    active, budgets, fallback = view_budgets(probs, theta_act, total, minimum, gamma)
    assert (active, budgets, fallback) == ref.view_budgets(probs, theta_act, total, minimum, gamma)
    p = [f32(x) for x in probs]
    assert fallback == all(x < f32(theta_act) for x in p)
    if fallback:
        assert active == [i == p.index(max(p)) for i in range(4)]
    else:
        assert active == [x >= f32(theta_act) for x in p]
    assert sum(budgets) == total
    for a, b in zip(active, budgets, strict=True):
        assert b >= minimum if a else b == 0


@pytest.mark.parametrize(
    ("probs", "theta_act", "gamma", "exc"),
    [
        ((math.nan, 0.5, 0.5, 0.5), 0.1, 1.0, InvalidScoreError),
        ((1.5, 0.5, 0.5, 0.5), 0.1, 1.0, InvalidScoreError),
        ((0.5, -0.5, 0.5, 0.5), 0.1, 1.0, InvalidScoreError),
        ((0.5, 0.5, 0.5, 0.5), 1.5, 1.0, InvalidConfigError),
        ((0.5, 0.5, 0.5, 0.5), math.nan, 1.0, InvalidConfigError),
        ((0.5, 0.5, 0.5, 0.5), 0.1, 0.0, InvalidConfigError),
        ((0.5, 0.5, 0.5, 0.5), 0.1, -1.0, InvalidConfigError),
        ((0.5, 0.5, 0.5, 0.5), 0.1, math.inf, InvalidConfigError),
    ],
)
def test_view_budgets_rejects(
    probs: Routing4, theta_act: float, gamma: float, exc: type[JevmemError]
) -> None:
    with pytest.raises(exc):
        view_budgets(probs, theta_act, 80, 1, gamma)


def test_view_budgets_total_too_small() -> None:
    with pytest.raises(InvalidConfigError):
        view_budgets((1.0, 1.0, 1.0, 1.0), 0.1, 7, 2, 1.0)


@given(h=probability, depth_max=st.integers(0, 64))
def test_depth_limit(h: float, depth_max: int) -> None:
    d = depth_limit(h, depth_max)
    assert d == ref.depth_limit(h, depth_max)
    if depth_max >= 1:
        assert 1 <= d <= depth_max
        assert d == min(depth_max, max(1, math.ceil(depth_max * f32(h))))
        assert depth_limit(min(1.0, h + 0.1), depth_max) >= d


@pytest.mark.parametrize("h", [math.nan, -0.1, 1.1, math.inf])
def test_depth_limit_rejects(h: float) -> None:
    with pytest.raises(InvalidScoreError):
        depth_limit(h, 8)


# ---------------------------------------------------------------- unit tests


def chain(weight: float, n: int = 3) -> MemoryStore:
    """0 - 1 - ... - n-1 in the semantic view, no timestamps."""
    m = MemoryStore(DIM)
    m.add_batch([f"n{i}" for i in range(n)], np.eye(n, DIM))
    m.add_edges([(i, i + 1, "semantic", weight) for i in range(n - 1)])
    return m


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.49])
def test_relevance_alone_never_admits(weight: float) -> None:
    # Defaults: s = (z + a + p*l + n + (pi + c)/2) / 5 with only a = 1 (and pi < 0.5) is < 0.25.
    t = chain(weight).traverse((1.0, 0.0, 0.0, 0.0), [(0, 1.0)], multi_hop=1.0)
    assert t.assess(0.0, 1.0, 1.0, 0.0) == "expand"
    assert [c.node for c in t.expand()] == [1]
    assert t.score([[1.0, 0.0, 0.0, 0.0]]) == "done"
    assert t.stop_reason == "frontier_exhausted"
    assert [e.node for e in t.result()] == [0]


def test_relevance_with_support_admits() -> None:
    t = chain(1.0).traverse((1.0, 0.0, 0.0, 0.0), [(0, 1.0)], multi_hop=1.0)
    t.assess(0.0, 1.0, 1.0, 0.0)
    t.expand()
    assert t.score([[1.0, 0.0, 0.0, 1.0]]) == "assess"  # (1 + (1 + 1)/2) / 5 = 0.4
    (anchor, e) = t.result()
    assert (anchor.node, e.node, e.depth) == (0, 1, 1)
    assert e.score == pytest.approx(0.4)
    assert anchor.via is None and e.via is not None and e.via.from_node == 0


@pytest.mark.parametrize("elapsed", [0.5, 0.75, 100.0])
def test_time_already_spent_stops_at_once(elapsed: float) -> None:
    t = chain(0.5).traverse(
        (1.0, 0.0, 0.0, 0.0),
        [(0, 1.0)],
        config=TraversalConfig(max_wall_s=0.5),
        elapsed_s=elapsed,
    )
    assert t.phase == "done"
    assert t.stop_reason == "time_limit"
    assert t.remaining_s == 0.0
    assert t.check_time() == "done"
    assert [e.node for e in t.result()] == [0]
    expect_unchanged(t, lambda: t.assess(0.0, 1.0, 1.0, 0.0), TraversalStateError)


def test_time_limit_during_the_run() -> None:
    t = chain(0.5).traverse(
        (1.0, 0.0, 0.0, 0.0), [(0, 1.0)], config=TraversalConfig(max_wall_s=0.05), elapsed_s=0.049
    )
    while t.check_time() != "done":
        pass
    assert t.stop_reason == "time_limit"
    assert t.trace()["elapsed_s"] >= 0.05


@pytest.mark.parametrize(("limit", "used"), [(1, 1), (16, 16), (5, 5)])
def test_calls_used_at_the_limit(limit: int, used: int) -> None:
    t = chain(0.5).traverse(
        (1.0, 0.0, 0.0, 0.0),
        [(0, 1.0)],
        config=TraversalConfig(max_controller_calls=limit),
        calls_used=used,
    )
    assert t.phase == "done"
    assert t.stop_reason == "controller_call_limit"
    assert t.calls_left == 0
    assert t.trace()["controller_calls"] == used


def test_calls_used_beyond_the_limit() -> None:
    with pytest.raises(InvalidInputError):
        chain(0.5).traverse(
            (1.0, 0.0, 0.0, 0.0),
            [(0, 1.0)],
            config=TraversalConfig(max_controller_calls=3),
            calls_used=4,
        )


def test_bad_starts() -> None:
    m = chain(0.5)
    routing = (1.0, 0.0, 0.0, 0.0)
    with pytest.raises(NodeNotFoundError):
        m.traverse(routing, [(0, 1.0), (99, 0.5)])
    with pytest.raises(KeyError):
        m.traverse(routing, [(99, 0.5)])
    m.remove(2)
    with pytest.raises(NodeNotFoundError):
        m.traverse(routing, [(2, 0.5)])
    with pytest.raises(InvalidInputError):
        m.traverse(routing, [(0, 1.0), (0, 0.5)])
    for bad in BAD_UNITS:
        with pytest.raises(InvalidScoreError):
            m.traverse(routing, [(0, bad)])
        with pytest.raises(InvalidScoreError):
            m.traverse((bad, 0.0, 0.0, 0.0), [(0, 1.0)])
        with pytest.raises(InvalidScoreError):
            m.traverse(routing, [(0, 1.0)], multi_hop=bad)
        with pytest.raises(InvalidScoreError):
            m.traverse(routing, [(0, 1.0)], recency=bad)
    with pytest.raises(DimensionMismatchError):
        m.traverse(routing, [(0, 1.0)], query_vector=np.ones(DIM + 1))
    with pytest.raises(InvalidInputError):
        m.traverse(routing, [(0, 1.0)], query_vector=np.full(DIM, math.nan))
    with pytest.raises(InvalidInputError):
        m.traverse(routing, [(0, 1.0)], elapsed_s=-1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"total_budget": 0},
        {"total_budget": 7, "min_per_view": 2},
        {"depth_max": 0},
        {"beam_width": 0},
        {"max_visited": 0},
        {"max_edges": 0},
        {"max_controller_calls": 0},
        {"max_wall_s": 0.0},
        {"max_wall_s": -1.0},
        {"max_wall_s": math.nan},
        {"gamma": 0.0},
        {"theta_act": 1.5},
        {"min_admit_score": math.nan},
        {"lambdas": (0.0, 0.0, 0.0, 0.0, 0.0)},
        {"lambdas": (1.0, -1.0, 1.0, 1.0, 1.0)},
        {"recency_weight": -0.1},
    ],
)
def test_config_rejects(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidConfigError):
        TraversalConfig(**kwargs)  # type: ignore[arg-type]


def test_no_anchors_is_frontier_exhausted() -> None:
    t = chain(0.5).traverse((1.0, 0.0, 0.0, 0.0), [])
    assert (t.phase, t.stop_reason, t.result()) == ("done", "frontier_exhausted", [])


def test_score_with_a_flat_array_is_invalid_input() -> None:
    t = chain(0.9).traverse((1.0, 0.0, 0.0, 0.0), [(0, 1.0)], multi_hop=1.0)
    t.assess(0.0, 1.0, 1.0, 0.0)
    t.expand()
    expect_unchanged(t, lambda: t.score(np.ones(4)), InvalidInputError)

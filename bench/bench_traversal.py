"""Traversal latency: jevmem's Rust traversal vs the pure-Python reference.

Side by side in one run, on the same synthetic memory and the same queries:
  * one round: ``expand`` + ``score`` with fixed scores, no controller (the
    traversal is started and assessed outside the timer);
  * a whole traversal: start, then assess/expand/score with a deterministic
    hash oracle until the traversal stops (paper defaults: B = 80, beam 10,
    60 visited nodes, ...).

The memory: N nodes with 384-d unit embeddings and timestamps, built with
``MemoryStore.add_batch``; per view, 4 out-edges per node to random targets
with random weights (so ~8 incident edges per node per view), added with
``add_edges``. The reference gets the same graph as adjacency lists; its
embeddings stay in one numpy array and a row becomes a Python list only when
the reference computes that node's similarity (its own pure-Python dot).

    python bench/bench_traversal.py --sizes 10000,100000 --json bench/out/traversal.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

# the pure-Python reference lives with the tests (their oracle)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import traversal_reference as ref

import jevmem

if TYPE_CHECKING:
    from jevmem._core import ViewName

DIM = 384
OUT_DEGREE = 4  # per node per view; with the incoming ones ~8 incident edges
VIEWS: tuple[ViewName, ...] = ("semantic", "temporal", "causal", "entity")
T0 = 1_700_000_000
DAY = 86_400
ROUTING = (0.9, 0.5, 0.3, 0.6)
MULTI_HOP = 1.0
RECENCY = 0.5
GO_ON = (0.0, 1.0, 1.0, 0.0)  # sufficiency, usefulness, missing, contradiction


# ---------------------------------------------------------------- data


@dataclass
class Synthetic:
    n: int
    vectors: npt.NDArray[np.float32]  # unit rows
    timestamps: list[int]
    # per view: (src, dst, weight) arrays, no self-loops, (src, dst) unique
    edges: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]]]


def synthesize(n: int, seed: int) -> Synthetic:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    timestamps = (T0 + rng.integers(0, 365 * DAY, size=n)).tolist()
    edges = []
    for _ in VIEWS:
        src = np.repeat(np.arange(n, dtype=np.int64), OUT_DEGREE)
        dst = rng.integers(0, n, size=src.size, dtype=np.int64)
        weight = rng.random(src.size, dtype=np.float32)
        keep = src != dst
        src, dst, weight = src[keep], dst[keep], weight[keep]
        # One edge per (src, dst): the first one (the store would keep the max weight).
        _, first = np.unique(src * n + dst, return_index=True)
        edges.append((src[first], dst[first], weight[first]))
    return Synthetic(n, vectors, timestamps, edges)


def build_store(data: Synthetic) -> jevmem.MemoryStore:
    store = jevmem.MemoryStore(DIM)
    chunk = 10_000
    for lo in range(0, data.n, chunk):
        hi = min(data.n, lo + chunk)
        store.add_batch(
            [f"memory {i}" for i in range(lo, hi)],
            data.vectors[lo:hi],
            timestamps=data.timestamps[lo:hi],
        )
    for view, (src, dst, weight) in zip(VIEWS, data.edges, strict=True):
        batch = [
            (s, d, view, w)
            for s, d, w in zip(src.tolist(), dst.tolist(), weight.tolist(), strict=True)
        ]
        for lo in range(0, len(batch), 100_000):
            store.add_edges(batch[lo : lo + 100_000])
    return store


class ArrayGraph(ref.Graph):
    """The reference graph with embeddings kept in one array (a list per node
    would take gigabytes); the similarity is still the reference's Python dot."""

    def __init__(self, data: Synthetic) -> None:
        super().__init__(nodes=set(range(data.n)))
        self.vectors = data.vectors
        self.timestamps = dict(enumerate(data.timestamps))
        for v, (src, dst, weight) in enumerate(data.edges):
            adj: dict[int, list[tuple[int, float, int, int]]] = {}
            for s, d, w in zip(src.tolist(), dst.tolist(), weight.tolist(), strict=True):
                adj.setdefault(s, []).append((d, w, s, d))
                adj.setdefault(d, []).append((s, w, s, d))
            self.edges[v] = adj

    def similarity(self, unit_query: Sequence[float], node: int) -> float | None:
        if node not in self.nodes:
            return None
        emb: list[float] = self.vectors[node].tolist()
        return ref.f32(sum(q * e for q, e in zip(unit_query, emb, strict=False)))


# ---------------------------------------------------------------- oracle


def draw(*keys: int) -> float:
    """A deterministic pseudo-random number in [0, 1) (exact in f32)."""
    h = 0x9E3779B97F4A7C15
    for k in keys:
        h = ((h ^ k) * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
        h ^= h >> 31
    return (h >> 40) / float(1 << 24)


def assessment(rnd: int) -> tuple[float, float, float, float]:
    """Keep going for three rounds, then sufficient."""
    return GO_ON if rnd < 3 else (1.0, 1.0, 0.0, 0.0)


def scores(rnd: int, node: int) -> tuple[float, float, float, float]:
    return (draw(rnd, node, 1), draw(rnd, node, 2), draw(rnd, node, 3), draw(rnd, node, 4))


@dataclass(frozen=True)
class Query:
    anchors: list[tuple[int, float]]
    vector: npt.NDArray[np.float32]
    unit: list[float]  # as Rust normalises it
    now: int


def make_queries(data: Synthetic, count: int, seed: int) -> list[Query]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        nodes = rng.choice(data.n, size=10, replace=False).tolist()
        anchors = [(int(a), round(1.0 - 0.05 * i, 2)) for i, a in enumerate(nodes)]
        vec = rng.standard_normal(DIM, dtype=np.float32)
        acc = 0.0  # VectorIndex::normalize: an f64 sum in order, f64 division
        for x in vec.tolist():
            acc += x * x
        unit = [ref.f32(x / acc**0.5) for x in vec.tolist()]
        out.append(Query(anchors, vec, unit, T0 + 366 * DAY))
    return out


# ---------------------------------------------------------------- drivers


FIXED_ROWS = np.full((1024, 4), 0.5)
FIXED_REF = [ref.CandidateScores(0.5, 0.5, 0.5, 0.5)] * 1024


def rust_start(store: jevmem.MemoryStore, q: Query) -> jevmem.Traversal:
    return store.traverse(
        ROUTING,
        q.anchors,
        multi_hop=MULTI_HOP,
        recency=RECENCY,
        query_vector=q.vector,
        now=q.now,
    )


def ref_start(g: ArrayGraph, q: Query) -> ref.Traversal:
    return ref.Traversal.start(
        ref.TraversalConfig(),
        ref.Routing(ROUTING, MULTI_HOP, RECENCY),
        q.unit,
        q.now,
        q.anchors,
        1,
        0.0,
        g,
    )


def rust_round(store: jevmem.MemoryStore, q: Query) -> tuple[float, int]:
    t = rust_start(store, q)
    t.assess(*GO_ON)
    t0 = time.perf_counter()
    cands = t.expand()
    t.score(FIXED_ROWS[: len(cands)])
    return time.perf_counter() - t0, len(cands)


def ref_round(g: ArrayGraph, q: Query) -> tuple[float, int]:
    t = ref_start(g, q)
    t.assess(ref.Assessment(*GO_ON))
    t0 = time.perf_counter()
    cands = t.expand(g)
    t.score(g, FIXED_REF[: len(cands)])
    return time.perf_counter() - t0, len(cands)


@dataclass
class Outcome:
    seconds: float
    stop: str | None
    rounds: int
    evidence: list[tuple[int, int]]  # (node, depth), best first
    scores: list[float]


def rust_whole(store: jevmem.MemoryStore, q: Query) -> Outcome:
    t0 = time.perf_counter()
    t = rust_start(store, q)
    rnd = 0
    while (phase := t.phase) != "done":
        if phase == "assess":
            t.assess(*assessment(rnd))
        elif phase == "expand":
            t.expand()
        else:
            t.score([scores(rnd, c.node) for c in t.candidates()])
            rnd += 1
    res = t.result(10)
    dt = time.perf_counter() - t0
    return Outcome(dt, t.stop_reason, rnd, [(e.node, e.depth) for e in res], [e.score for e in res])


def ref_whole(g: ArrayGraph, q: Query) -> Outcome:
    t0 = time.perf_counter()
    t = ref_start(g, q)
    rnd = 0
    while not t.done:
        if t.phase == "assess":
            t.assess(ref.Assessment(*assessment(rnd)))
        elif t.phase == "expand":
            t.expand(g)
        else:
            t.score(g, [ref.CandidateScores(*scores(rnd, c.node)) for c in t.candidates])
            rnd += 1
    res = t.result(10)
    dt = time.perf_counter() - t0
    return Outcome(dt, t.stop, rnd, [(e.node, e.depth) for e in res], [e.score for e in res])


# ---------------------------------------------------------------- stats


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary(xs: Sequence[float]) -> dict[str, float]:
    return {
        "p50_us": statistics.median(xs) * 1e6,
        "p99_us": pct(xs, 0.99) * 1e6,
        "mean_us": statistics.fmean(xs) * 1e6,
    }


def measure(fn: Callable[[Query], float], queries: Sequence[Query], warmup: int) -> list[float]:
    for q in queries[:warmup]:
        fn(q)
    return [fn(q) for q in queries]


def bench_size(n: int, count: int, seed: int) -> dict[str, Any]:
    print(f"\n== {n:,} nodes", file=sys.stderr)
    t0 = time.perf_counter()
    data = synthesize(n, seed)
    store = build_store(data)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = ArrayGraph(data)
    ref_build_s = time.perf_counter() - t0
    edges = sum(len(e[0]) for e in data.edges)
    print(f"  built: jevmem {build_s:.1f}s, reference graph {ref_build_s:.1f}s", file=sys.stderr)
    queries = make_queries(data, count, seed + 1)
    res: dict[str, Any] = {"nodes": n, "edges": edges, "queries": count, "build_s": build_s}

    rust_cands: list[int] = []
    ref_cands: list[int] = []

    def rust_round_s(q: Query) -> float:
        dt, c = rust_round(store, q)
        rust_cands.append(c)
        return dt

    def ref_round_s(q: Query) -> float:
        dt, c = ref_round(g, q)
        ref_cands.append(c)
        return dt

    res["round"] = {
        "jevmem": summary(measure(rust_round_s, queries, 5)),
        "python": summary(measure(ref_round_s, queries, 5)),
        "candidates_mean": statistics.fmean(rust_cands[5:]),
    }
    assert rust_cands == ref_cands, "the two rounds expanded different candidate counts"

    for q in queries[:5]:  # warm-up
        rust_whole(store, q)
        ref_whole(g, q)
    rust_runs = [rust_whole(store, q) for q in queries]
    ref_runs = [ref_whole(g, q) for q in queries]
    same = sum(
        a.stop == b.stop
        and a.evidence == b.evidence
        and all(abs(x - y) <= 1e-6 for x, y in zip(a.scores, b.scores, strict=True))
        for a, b in zip(rust_runs, ref_runs, strict=True)
    )
    res["whole"] = {
        "jevmem": summary([r.seconds for r in rust_runs]),
        "python": summary([r.seconds for r in ref_runs]),
        "rounds_mean": statistics.fmean(r.rounds for r in rust_runs),
        "stops": dict(Counter(str(r.stop) for r in rust_runs)),
        "identical_results": same,
    }
    stops = res["whole"]["stops"]
    print(f"  whole traversals: {same}/{count} identical top-10, stops {stops}", file=sys.stderr)
    return res


def machine() -> str:
    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def table(results: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| nodes | workload | jevmem p50 (µs) | jevmem p99 (µs) | Python p50 (µs) "
        "| Python p99 (µs) | speed-up p50 | speed-up p99 |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for key, label in (("round", "one round (expand + score)"), ("whole", "whole traversal")):
            a, b = r[key]["jevmem"], r[key]["python"]
            lines.append(
                f"| {r['nodes']:,} | {label} | {a['p50_us']:,.1f} | {a['p99_us']:,.1f} "
                f"| {b['p50_us']:,.1f} | {b['p99_us']:,.1f} "
                f"| {b['p50_us'] / a['p50_us']:,.1f}x | {b['p99_us'] / a['p99_us']:,.1f}x |"
            )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10000,100000", help="comma-separated node counts")
    p.add_argument("--queries", type=int, default=300, help="traversals per workload and size")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    results = [
        bench_size(int(s), args.queries, args.seed) for s in args.sizes.split(",") if s.strip()
    ]
    print(f"\nMachine: {machine()}, jevmem {jevmem.__version__}\n")
    print(table(results))
    for r in results:
        w = r["whole"]
        print(
            f"\n{r['nodes']:,} nodes, {r['edges']:,} edges: one round expands "
            f"{r['round']['candidates_mean']:.1f} candidates on average; whole traversals "
            f"run {w['rounds_mean']:.2f} rounds (stops {w['stops']}), "
            f"{w['identical_results']}/{r['queries']} with identical top-10 results."
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"machine": machine(), "version": jevmem.__version__, "results": results}
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The vector index on a memory's own vectors: recall@10 against exact search
and query latency, for several HNSW search expansions (ef).

The vectors are `bench_memory_scale.py`'s: every turn of both development
sets embedded as the write path embeds it ("speaker: text"), repeated until
the size is reached, each repetition moved by a small random step and
renormalised (near-duplicates, the case where HNSW loses recall). Queries are
a fixed sample of the development questions, embedded. Only the vector index
is exercised (`MemoryStore.search_vector`): one graph per size, searched at
each ef in turn (`MemoryStore.set_expansion_search`), every ef twice, with
the same queries.

    python bench/bench_vector_recall.py --sizes 100000 --ef 64,128,256 \\
        --embedding-cache /tmp/embcache --json bench/out/vector_recall.json
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import machine
from bench_memory_scale import corpus_vectors, near_copy

from jevmem import MemoryStore

Vectors = npt.NDArray[np.float32]

#: cosine similarity within which a result counts as tied with the exact k-th
EPSILON = 0.01


def vectors_of_size(base: Vectors, n: int, step: float, corpus_kind: str) -> Vectors:
    """``n`` rows: ``base``, then, past it, either near copies of it as
    bench_memory_scale writes them (``near-copies``) or ``mixtures``: each row
    the normalised blend of two random turns' vectors (weights 0.3-0.7) plus
    the same small step, a distinct point in the space real turns span."""
    rng = np.random.default_rng(7)
    out = np.empty((n, base.shape[1]), np.float32)
    written, copy = 0, 0
    while written < n:
        take = min(n - written, len(base))
        rows = base[:take]
        if copy and corpus_kind == "mixtures":
            other = base[rng.integers(0, len(base), take)]
            w = rng.uniform(0.3, 0.7, (take, 1)).astype(np.float32)
            rows = w * rows + (1 - w) * other
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        out[written : written + take] = near_copy(rows, rng, step) if copy else rows
        written += take
        copy += 1
    return out


def exact_top(vecs: Vectors, queries: Vectors, k: int) -> list[tuple[set[int], float]]:
    """Per query: the exact top ``k`` ids and the ``k``-th best similarity."""
    out = []
    for q in queries:
        scores = vecs @ q
        top = np.argpartition(-scores, k)[:k]
        out.append((set(top.tolist()), float(scores[top].min())))
    return out


def build(vecs: Vectors) -> tuple[MemoryStore, float]:
    store = MemoryStore(vecs.shape[1])
    t0 = time.perf_counter()
    for at in range(0, len(vecs), 20_000):
        chunk = vecs[at : at + 20_000]
        store.add_batch([f"n{at + i}" for i in range(len(chunk))], chunk)
    if store.pending_graph:
        store.finish_graph()
    return store, time.perf_counter() - t0


def run_ef(
    store: MemoryStore,
    queries: Vectors,
    exact: list[tuple[set[int], float]],
    ef: int,
    k: int,
) -> dict[str, Any]:
    store.set_expansion_search(ef)
    for q in queries[:20]:  # warm
        store.search_vector(q, k)
    lat, hits, near_hits = [], 0, 0
    for q, (want, kth) in zip(queries, exact, strict=True):
        t0 = time.perf_counter()
        got, sims = store.search_vector(q, k)
        lat.append(time.perf_counter() - t0)
        hits += len(want & set(got.tolist()))
        # epsilon recall (as ann-benchmarks counts it): a result at least as
        # similar as the exact k-th, less EPSILON, is as good as an exact one
        near_hits += int(np.sum(sims >= kth - EPSILON))
    return {
        "ef": ef,
        "recall@10": hits / (k * len(queries)),
        f"recall@10_eps{EPSILON}": near_hits / (k * len(queries)),
        "p50_ms": 1000 * float(np.percentile(lat, 50)),
        "p99_ms": 1000 * float(np.percentile(lat, 99)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", default="100000", help="comma-separated node counts")
    ap.add_argument("--ef", default="64,128,256", help="comma-separated search expansions")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--embedding-cache", default=None, help="directory of cached vectors")
    ap.add_argument("--step", type=float, default=0.15, help="size of a copy's vector step")
    ap.add_argument("--corpus", choices=("near-copies", "mixtures"), default="near-copies")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    turns, base, sample, queries, _ = corpus_vectors(
        args.embedder, args.embedding_cache, args.queries
    )
    print(f"corpus: {len(turns):,} turns, {len(sample)} queries; {machine()}", file=sys.stderr)
    results: dict[str, Any] = {"machine": machine(), "command": " ".join(sys.argv), "sizes": []}
    for n in (int(s) for s in args.sizes.split(",")):
        vecs = vectors_of_size(base.astype(np.float32), n, args.step, args.corpus)
        exact = exact_top(vecs, queries, 10)
        store, build_s = build(vecs)
        default_ef = store.expansion_search
        print(f"{n:,} nodes built in {build_s:.0f} s (default ef {default_ef})", file=sys.stderr)
        rows = []
        # the same graph at every ef, twice in turn (a second pass shows the noise)
        efs = [int(e) for e in args.ef.split(",")]
        for ef in efs + efs:
            row = run_ef(store, queries, exact, ef, 10)
            rows.append(row)
            print(
                f"{n:,} nodes ({args.corpus}), ef {ef}: recall@10 {row['recall@10']:.3f} "
                f"(within {EPSILON}: {row[f'recall@10_eps{EPSILON}']:.3f}), "
                f"p50 {row['p50_ms']:.3f} ms, p99 {row['p99_ms']:.3f} ms",
                file=sys.stderr,
            )
        del store
        gc.collect()
        results["sizes"].append(
            {"nodes": n, "build_s": build_s, "default_ef": default_ef, "runs": rows}
        )
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

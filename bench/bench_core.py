"""Memory-plane benchmarks at 10k / 100k / 1M nodes (384-d vectors).

Side by side in one run, on the same corpus, tokens and queries:
  * insert throughput and memory per node of a jevmem MemoryStore;
  * BM25 query latency: jevmem vs bm25s (numpy backend) vs rank_bm25;
  * vector query latency: jevmem's search_vector vs raw usearch (same HNSW
    parameters), with recall@10 of both against exact search;
  * fused anchors (BM25 + vector + RRF) latency.

(The traversal round is measured by bench/bench_traversal.py.)

Both HNSW indexes get the same parameters (M = 16, ef_add = 128, ef_search =
64, cosine, f32). jevmem's ``add_batch`` inserts the graph in parallel on all
cores; the raw usearch build uses ``--usearch-threads`` (default 1; 0 = all
cores), so build times compare only when both use all cores. Query vectors are
drawn around the corpus' own centroids (different noise), so they have real
nearest neighbours. rank_bm25 (pure Python) is skipped above --rank-bm25-max.

    python bench/bench_core.py --sizes 10000,100000 --json bench/out/core.json
    python bench/bench_core.py --sizes 1000000 --usearch-threads 0 --json bench/out/core_1m.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Corpus,
    latencies,
    load,
    machine,
    peak_rss_bytes,
    progress,
    rss_bytes,
    summary_us,
    timed,
)

import jevmem

DIM = 384
K1 = 1.2  # jevmem default bm25_k1
# the same HNSW parameters on both sides
M, EF_ADD, EF_SEARCH = 16, 128, 64


def bench_size(
    n: int,
    n_queries: int,
    rank_bm25_max: int,
    skip: set[str],
    usearch_threads: int,
    checkpoint: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Measure one size; ``checkpoint(res)`` saves partial results after each phase."""
    print(f"\n== {n:,} nodes (load {load()})", file=sys.stderr)
    load_start = load()
    corpus = Corpus(n, DIM)
    texts = corpus.texts()
    vectors = corpus.embeddings(n)
    queries = corpus.queries(n_queries)
    # same centroids as the corpus, fresh noise
    qvecs = corpus.embeddings(n_queries, noise_seed=99)
    res: dict[str, Any] = {"nodes": n, "queries": n_queries, "load_start": load_start}

    # ---- build --------------------------------------------------------------
    gc.collect()
    rss0 = rss_bytes()
    store = jevmem.MemoryStore(
        DIM,
        bm25_k1=K1,
        bm25_b=0.75,
        connectivity=M,
        expansion_add=EF_ADD,
        expansion_search=EF_SEARCH,
    )
    chunk = 10_000
    t0 = time.perf_counter()
    for lo in progress(range(0, n, chunk), "jevmem add_batch"):
        store.add_batch(texts[lo : lo + chunk], vectors[lo : lo + chunk])
    build_s = time.perf_counter() - t0
    stats = store.stats()
    res["insert_per_s"] = n / build_s
    res["build_s"] = build_s
    res["bytes_per_node_reported"] = (
        stats["graph_bytes"] + stats["bm25_bytes"] + stats["vector_bytes"]
    ) / n
    res["bytes_per_node_rss"] = (rss_bytes() - rss0) / n
    res["bytes_per_node_by_part"] = {
        k: stats[f"{k}_bytes"] / n for k in ("graph", "bm25", "vector")
    }
    print(f"  built in {build_s:.1f}s ({n / build_s:,.0f}/s), load {load()}", file=sys.stderr)
    checkpoint(res)

    # ---- lexical ------------------------------------------------------------
    tokens = [store.tokenize(t) for t in progress(texts, "tokenize (shared tokens)")]
    qtokens = [store.tokenize(q) for q in queries]
    lex = latencies(lambda q: store.search_lexical(q, 10), queries)
    res["bm25_jevmem"] = summary_us(lex)
    # our search includes tokenizing the query (no pre-tokenized path is
    # exposed), bm25s and rank_bm25 get the tokens: conservative for us.
    if "bm25s" not in skip:
        import bm25s

        idx = bm25s.BM25(k1=K1, b=0.75, method="lucene", backend="numpy")
        t = timed(lambda: idx.index(tokens, show_progress=False))

        def bm25s_query(qt: list[str]) -> tuple[Any, Any]:
            docs, scores = idx.retrieve(
                [qt], k=10, show_progress=False, n_threads=0, backend_selection="numpy"
            )
            return docs, scores

        # interleaved with ours, query by query, so load drift hits both alike
        ours_lat, theirs_lat = [], []
        for q, qt in zip(queries[:3], qtokens[:3], strict=True):  # warm-up
            store.search_lexical(q, 10)
            bm25s_query(qt)
        for q, qt in zip(queries, qtokens, strict=True):
            t1 = time.perf_counter()
            store.search_lexical(q, 10)
            t2 = time.perf_counter()
            bm25s_query(qt)
            t3 = time.perf_counter()
            ours_lat.append(t2 - t1)
            theirs_lat.append(t3 - t2)
        lat = theirs_lat
        res["bm25_jevmem_interleaved"] = summary_us(ours_lat)
        res["bm25s"] = {**summary_us(lat), "index_s": t}
        # Agreement (same tokens, same Lucene idf). bm25s pads the top k with
        # zero-score documents when fewer than k match, and its scores lack
        # BM25's constant (k1 + 1) factor; so compare (a) the sets of
        # positive-score documents and (b) the top-10 score lists, ours divided
        # by (k1 + 1). (a) can differ only by tie-breaking at the 10th place.
        agree, same_scores = [], []
        for q, qt in zip(queries[:50], qtokens[:50], strict=True):
            ids, scores = store.search_lexical(q, 10)
            docs, theirs = bm25s_query(qt)
            pos = {int(d) for d, sc in zip(docs[0], theirs[0], strict=True) if sc > 0}
            agree.append(len(set(ids.tolist()) & pos) / max(1, len(pos)))
            a = np.sort(scores / (K1 + 1.0))[::-1]
            b = np.sort(theirs[0][theirs[0] > 0])[::-1]
            same_scores.append(a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-4)))
        res["bm25s"]["top10_set_agreement"] = float(np.mean(agree))
        res["bm25s"]["top10_scores_equal"] = float(np.mean(same_scores))
        res["bm25_ratio_bm25s_over_jevmem"] = (
            res["bm25s"]["p50_us"] / res["bm25_jevmem_interleaved"]["p50_us"]
        )
        del idx
    if "rank_bm25" not in skip and n <= rank_bm25_max:
        from rank_bm25 import BM25Okapi

        t0 = time.perf_counter()
        rb = BM25Okapi(tokens, k1=K1, b=0.75)
        t = time.perf_counter() - t0
        few = qtokens[: max(10, n_queries // 10)]
        lat = latencies(lambda qt: np.argpartition(-rb.get_scores(qt), 10)[:10], few, warmup=1)
        res["rank_bm25"] = {**summary_us(lat), "index_s": t, "queries": len(few)}
        del rb
    elif "rank_bm25" not in skip:
        res["rank_bm25"] = {"skipped": f"pure Python; n > --rank-bm25-max {rank_bm25_max}"}
    tokens.clear()
    gc.collect()
    checkpoint(res)

    # ---- vector -------------------------------------------------------------
    vec = latencies(lambda q: store.search_vector(q, 10), list(qvecs))
    res["vector_jevmem"] = summary_us(vec)
    exact = [np.argsort(-(vectors @ q))[:10] for q in qvecs[:50]]
    ours_recall = np.mean(
        [
            len(set(store.search_vector(q, 10)[0].tolist()) & set(e.tolist())) / 10
            for q, e in zip(qvecs[:50], exact, strict=True)
        ]
    )
    res["vector_jevmem"]["recall@10"] = float(ours_recall)

    # ---- fused anchors -----------------------------------------------------
    pairs = list(zip(queries, qvecs, strict=True))
    fused = latencies(lambda p: store.fused_anchors(p[0], p[1], 10, depth=50), pairs)
    res["fused_anchors"] = summary_us(fused)
    checkpoint(res)

    # ---- raw usearch (last: at 1M its build is the slowest step) ----------
    if "usearch" not in skip:
        from usearch.index import Index

        raw = Index(
            ndim=DIM,
            metric="cos",
            dtype="f32",
            connectivity=M,
            expansion_add=EF_ADD,
            expansion_search=EF_SEARCH,
        )
        t0 = time.perf_counter()
        raw.add(np.arange(n, dtype=np.uint64), vectors, threads=usearch_threads)
        res["usearch_build_s"] = time.perf_counter() - t0
        res["usearch_build_threads"] = usearch_threads or os.cpu_count()
        print(f"  raw usearch built in {res['usearch_build_s']:.1f}s", file=sys.stderr)
        # interleaved query by query with ours (same warm-up for both)
        for q in qvecs[:3]:
            store.search_vector(q, 10)
            raw.search(q, 10)
        ours_lat, lat = [], []
        for q in qvecs:
            t1 = time.perf_counter()
            store.search_vector(q, 10)
            t2 = time.perf_counter()
            raw.search(q, 10)
            t3 = time.perf_counter()
            ours_lat.append(t2 - t1)
            lat.append(t3 - t2)
        res["vector_jevmem_interleaved"] = summary_us(ours_lat)
        res["vector_usearch"] = summary_us(lat)
        raw_recall = np.mean(
            [
                len(set(raw.search(q, 10).keys.tolist()) & set(e.tolist())) / 10
                for q, e in zip(qvecs[:50], exact, strict=True)
            ]
        )
        res["vector_usearch"]["recall@10"] = float(raw_recall)
        res["vector_overhead_ratio"] = (
            res["vector_jevmem_interleaved"]["p50_us"] / res["vector_usearch"]["p50_us"]
        )
        del raw

    res["peak_rss_bytes"] = peak_rss_bytes()
    res["load_end"] = load()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--rank-bm25-max", type=int, default=100_000, help="skip rank_bm25 above this size"
    )
    ap.add_argument("--skip", default="", help="comma list of: bm25s,rank_bm25,usearch")
    ap.add_argument(
        "--usearch-threads",
        type=int,
        default=1,
        help="threads for the raw usearch build (0 = all cores; jevmem always uses all)",
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    out: dict[str, Any] = {"machine": machine(), "jevmem": jevmem.__version__, "sizes": []}

    def save(partial: dict[str, Any] | None = None) -> None:
        # after every phase, so a later failure or timeout keeps what was measured
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            now = {"partial": True, "peak_rss_bytes": peak_rss_bytes(), "load_now": load()}
            sizes = out["sizes"] + ([{**partial, **now}] if partial else [])
            args.json.write_text(json.dumps({**out, "sizes": sizes}, indent=1))

    for n in (int(s) for s in args.sizes.split(",")):
        r = bench_size(n, args.queries, args.rank_bm25_max, skip, args.usearch_threads, save)
        out["sizes"].append(r)
        print(json.dumps(r, indent=1))
        save()


if __name__ == "__main__":
    main()

"""Memory-plane benchmarks at 10k / 100k / 1M nodes (384-d vectors).

Side by side in one run, on the same corpus, tokens and queries:
  * insert throughput and memory per node of a jevmem MemoryStore;
  * BM25 query latency: jevmem vs bm25s (numpy backend) vs rank_bm25;
  * vector query latency: jevmem's search_vector vs raw usearch (same HNSW
    parameters), with recall@10 of both against exact search;
  * fused anchors (BM25 + vector + RRF) latency;
  * one traversal round (expand + score, no controller): jevmem vs a
    pure-Python reference of the same algorithm.

    python bench/bench_core.py --sizes 10000,100000,1000000 --json bench/out/core.json
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Corpus, latencies, machine, progress, rss_bytes, summary_us, timed

import jevmem

DIM = 384


def bench_size(n: int, n_queries: int, rank_bm25_max: int, skip: set[str]) -> dict[str, Any]:
    print(f"\n== {n:,} nodes", file=sys.stderr)
    corpus = Corpus(n, DIM)
    texts = corpus.texts()
    vectors = corpus.embeddings(n)
    queries = corpus.queries(n_queries)
    qvecs = corpus.embeddings(n_queries, seed=99)
    res: dict[str, Any] = {"nodes": n, "queries": n_queries}

    # ---- build --------------------------------------------------------------
    gc.collect()
    rss0 = rss_bytes()
    store = jevmem.MemoryStore(DIM)
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

    # ---- lexical ------------------------------------------------------------
    tokens = [store.tokenize(t) for t in progress(texts, "tokenize (shared tokens)")]
    qtokens = [store.tokenize(q) for q in queries]
    lex = latencies(lambda q: store.search_lexical(q, 10), queries)
    res["bm25_jevmem"] = summary_us(lex)
    # our search includes tokenization of the query; also time a pre-tokenized
    # comparison path is not exposed, so the comparison is conservative for us.
    if "bm25s" not in skip:
        import bm25s

        idx = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        t = timed(lambda: idx.index(tokens, show_progress=False))
        lat = latencies(
            lambda qt: idx.retrieve([qt], k=10, show_progress=False, n_threads=0), qtokens
        )
        res["bm25s"] = {**summary_us(lat), "index_s": t}
        # agreement of the top-10 sets (same tokens, same formula)
        agree = []
        for q, qt in zip(queries[:50], qtokens[:50], strict=True):
            ours = set(store.search_lexical(q, 10)[0].tolist())
            docs, _ = idx.retrieve([qt], k=10, show_progress=False)
            agree.append(len(ours & set(docs[0].tolist())) / 10)
        res["bm25s"]["top10_agreement"] = float(np.mean(agree))
        del idx
    if "rank_bm25" not in skip and n <= rank_bm25_max:
        from rank_bm25 import BM25Okapi

        t0 = time.perf_counter()
        rb = BM25Okapi(tokens, k1=1.2, b=0.75)
        t = time.perf_counter() - t0
        few = qtokens[: max(10, n_queries // 10)]
        lat = latencies(lambda qt: np.argpartition(-rb.get_scores(qt), 10)[:10], few, warmup=1)
        res["rank_bm25"] = {**summary_us(lat), "index_s": t, "queries": len(few)}
        del rb
    tokens.clear()
    gc.collect()

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
    if "usearch" not in skip:
        from usearch.index import Index

        raw = Index(
            ndim=DIM,
            metric="cos",
            dtype="f32",
            connectivity=16,
            expansion_add=128,
            expansion_search=64,
        )
        t0 = time.perf_counter()
        # single-threaded adds, as jevmem does, so build times compare
        raw.add(np.arange(n, dtype=np.uint64), vectors, threads=1)
        res["usearch_build_s"] = time.perf_counter() - t0
        lat = latencies(lambda q: raw.search(q, 10), list(qvecs))
        res["vector_usearch"] = summary_us(lat)
        raw_recall = np.mean(
            [
                len(set(raw.search(q, 10).keys.tolist()) & set(e.tolist())) / 10
                for q, e in zip(qvecs[:50], exact, strict=True)
            ]
        )
        res["vector_usearch"]["recall@10"] = float(raw_recall)
        res["vector_overhead_ratio"] = (
            res["vector_jevmem"]["p50_us"] / res["vector_usearch"]["p50_us"]
        )
        del raw

    # ---- fused anchors -----------------------------------------------------
    pairs = list(zip(queries, qvecs, strict=True))
    fused = latencies(lambda p: store.fused_anchors(p[0], p[1], 10, depth=50), pairs)
    res["fused_anchors"] = summary_us(fused)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--rank-bm25-max", type=int, default=100_000, help="skip rank_bm25 above this size"
    )
    ap.add_argument("--skip", default="", help="comma list of: bm25s,rank_bm25,usearch")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    out: dict[str, Any] = {"machine": machine(), "jevmem": jevmem.__version__, "sizes": []}
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench_size(n, args.queries, args.rank_bm25_max, skip)
        out["sizes"].append(r)
        print(json.dumps(r, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

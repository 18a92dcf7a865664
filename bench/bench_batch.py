"""`Memory.search_batch` against the same queries one by one, in process:
what a lockstep batch saves (one controller call per round for all its
queries), and whether every query's evidence is the same either way.

One memory per conversation (vectors from ``--embedding-cache``), query
vectors precomputed (the plane and the controller only). Each conversation's
questions are cut into groups of ``--batch``; every group is searched one by
one and as one batch, in turn, ``--passes`` times (the first untimed). The
figures are the medians of a group's time each way, and their ratio.

    .venv/bin/python bench/bench_batch.py --data ../shared/data/locomo/locomo10-dev.json \\
        --embedding-cache /tmp/embcache [--batch 4] [--conversations 1] [--passes 4] \\
        [--embedder onnx|hash] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from _common import CachedEmbedder, finish_report
from bench_query import conversation_memory
from locomo_retrieval import make_embedder

from jevmem.evaluation import load_samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--embedding-cache", type=Path, required=True)
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--conversations", type=int, default=1)
    ap.add_argument("--passes", type=int, default=4, help="passes (the first untimed)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.batch < 1 or args.passes < 2:
        raise SystemExit("--batch must be at least 1 and --passes at least 2")

    emb = make_embedder(args.embedder, 1)
    cache = CachedEmbedder(emb, args.embedding_cache)
    convs, _ = load_samples(json.loads(args.data.read_text()))
    one: list[float] = []
    together: list[float] = []
    groups_seen = 0
    differing: list[str] = []
    for conv in convs[: args.conversations]:
        m, qs, table = conversation_memory(conv, cache, emb)
        m.embedder = table
        groups = [qs[i : i + args.batch] for i in range(0, len(qs) - args.batch + 1, args.batch)]
        groups_seen += len(groups)
        for p in range(args.passes):
            for g in groups:
                t = time.perf_counter()
                alone = [m.search(q, k=10) for q in g]
                a = time.perf_counter() - t
                t = time.perf_counter()
                batch = m.search_batch(g, k=10)
                b = time.perf_counter() - t
                if p:
                    one.append(a)
                    together.append(b)
                else:
                    for q, x, y in zip(g, alone, batch, strict=True):
                        if [(e.id, e.score) for e in x.evidence] != [
                            (e.id, e.score) for e in y.evidence
                        ]:
                            differing.append(q)
    if not one:
        raise SystemExit(f"no group of {args.batch} questions in the data")
    report: dict[str, object] = {
        "data": str(args.data),
        "batch": args.batch,
        "groups": groups_seen,
        "one_by_one_ms": statistics.median(one) * 1e3,
        "batch_ms": statistics.median(together) * 1e3,
        "speedup": statistics.median(one) / statistics.median(together),
        "queries_with_different_evidence": len(differing),
        "different_evidence": differing,
    }
    finish_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Query p50 per mode on development conversations, with precomputed query
vectors and with the default embedder: what one build's read path costs.

One memory per conversation (the turns' vectors from ``--embedding-cache``,
so building is quick); every question is searched ``--passes`` times per
mode, the modes interleaved question by question; the first pass warms up
and is not timed. "precomputed" modes read the query vector from a table
filled beforehand (the plane's cost alone); "embedded" modes embed the
query with the default ONNX embedder (``--embedder``), as a user's search does. To compare
two builds, run this once with each (``PYTHONPATH=<package>``), in turn.

    .venv/bin/python bench/bench_query.py --data ../shared/data/locomo/locomo10-dev.json \\
        --embedding-cache /tmp/embcache [--conversations 2] [--passes 3] \\
        [--embedder-threads 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import CachedEmbedder, finish_report
from locomo_retrieval import MAX_TEXT_BYTES, make_embedder

import jevmem
from jevmem.evaluation import conversation_inputs, load_samples

MODES = ("lexical", "full")


class TableEmbedder:
    """Query vectors looked up in a table filled beforehand."""

    def __init__(self, dim: int, rows: dict[str, npt.NDArray[np.float32]]) -> None:
        self.dim = dim
        self.rows = rows

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.rows[t] for t in texts])

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        return self.rows[text]


def conversation_memory(
    conv: Any, embedder: Any, query_embedder: Any
) -> tuple[jevmem.Memory, list[str], TableEmbedder]:
    """One conversation's memory, built with ``embedder`` (a cache, say), its
    questions, and a table of their vectors from ``query_embedder``."""
    texts, ts, spk, provs = conversation_inputs(conv)
    store = jevmem.MemoryStore(query_embedder.dim, max_text_bytes=MAX_TEXT_BYTES)
    m = jevmem.Memory(embedder=embedder, store=store)
    m.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
    qs = [qa.question for qa in conv.qas]
    table = TableEmbedder(query_embedder.dim, {q: query_embedder.embed([q])[0] for q in qs})
    return m, qs, table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--embedding-cache", type=Path, required=True)
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument(
        "--embedder-threads",
        type=int,
        default=2,
        help="the ONNX embedder's threads (1 when two builds run side by side, one core each)",
    )
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--passes", type=int, default=3, help="passes per mode (the first untimed)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    emb = make_embedder(args.embedder, args.embedder_threads)
    cache = CachedEmbedder(emb, args.embedding_cache)
    convs, _ = load_samples(json.loads(args.data.read_text()))
    times: dict[str, list[float]] = {
        f"{mode}_{how}": [] for mode in MODES for how in ("precomputed", "embedded")
    }
    questions = 0
    for conv in convs[: args.conversations]:
        m, qs, table = conversation_memory(conv, cache, emb)
        questions += len(qs)
        for p in range(args.passes):
            for q in qs:
                for how, embedder in (("precomputed", table), ("embedded", emb)):
                    m.embedder = embedder
                    for mode in MODES:
                        t = time.perf_counter()
                        m.search(q, k=10, mode=mode)  # type: ignore[arg-type]
                        if p:
                            times[f"{mode}_{how}"].append(time.perf_counter() - t)
    report: dict[str, object] = {
        "package": str(Path(jevmem.__file__).parent),
        "data": str(args.data),
        "questions": questions,
        "passes": args.passes,
        "embedder_threads": args.embedder_threads,
    }
    for key, xs in times.items():
        report[f"{key}_p50_ms"] = statistics.median(xs) * 1e3
    report["full_over_lexical_embedded"] = (
        report["full_embedded_p50_ms"] / report["lexical_embedded_p50_ms"]  # type: ignore[operator]
    )
    finish_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

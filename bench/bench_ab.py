"""Two builds of jevmem side by side in one process: each one's query p50, the
ratio, and whether every search returns the same evidence.

Separate runs of ``bench_query.py`` on a shared, noisy machine drift by 5-15 %
from one minute to the next, more than a small change is worth. Here both
builds (``--a`` and ``--b``: directories holding a ``jevmem`` package with its
built ``_core``, e.g. ``python/`` or a copy of it) are imported into one
process, a memory is built with each from the same turns (vectors from
``--embedding-cache``), and every question is searched with both, the order
alternating, query vectors precomputed: the machine's drift falls on both
alike. The first pass warms up and is not timed.

    .venv/bin/python bench/bench_ab.py --a /tmp/base/python --b python \\
        --data ../shared/data/locomo/locomo10-dev.json --embedding-cache /tmp/embcache \\
        [--mode full] [--conversations 2] [--passes 6] [--style notes] [--json OUT]

``--style`` stores the conversations restyled (`jevmem.evaluation.RESTYLES`:
messages, blocks, notes, pages, stream, stream_late, ...), with the same
questions.

Run it on one core (``taskset -c 0``) with nothing else running there.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
from _common import CachedEmbedder, finish_report


def load_build(directory: Path) -> dict[str, types.ModuleType]:
    """Import the ``jevmem`` package under ``directory`` and return its modules
    (``sys.modules`` then holds them until another build is loaded)."""
    for name in [n for n in sys.modules if n == "jevmem" or n.startswith("jevmem.")]:
        del sys.modules[name]
    sys.path.insert(0, str(directory))
    try:
        pkg = importlib.import_module("jevmem")
        importlib.import_module("jevmem.evaluation")
        importlib.import_module("jevmem.embed")
    finally:
        sys.path.remove(str(directory))
    if not Path(pkg.__file__ or "").resolve().is_relative_to(directory.resolve()):
        raise SystemExit(f"{directory}: jevmem came from {pkg.__file__}")
    return {n: m for n, m in sys.modules.items() if n == "jevmem" or n.startswith("jevmem.")}


class TableEmbedder:
    """Query vectors looked up in a table filled beforehand."""

    def __init__(self, dim: int, rows: dict[str, Any]) -> None:
        self.dim = dim
        self.rows = rows

    def embed(self, texts: Any) -> Any:
        return np.stack([self.rows[t] for t in texts])

    def embed_one(self, text: str) -> Any:
        return self.rows[text]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--a", type=Path, required=True, help="directory with build A's jevmem")
    ap.add_argument("--b", type=Path, required=True, help="directory with build B's jevmem")
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--embedding-cache", type=Path, required=True)
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--mode", default="full")
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--passes", type=int, default=6, help="passes (the first untimed)")
    ap.add_argument(
        "--style",
        default="turns",
        # (named here: the builds' own jevmem is imported only once loaded)
        choices=(
            "turns",
            "messages",
            "blocks",
            "notes",
            "pages",
            "untimed",
            "texting",
            "stream",
            "stream_late",
        ),
        help="store each conversation restyled (jevmem.evaluation.RESTYLES)",
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    builds = [load_build(args.a), load_build(args.b)]
    # the embedder and the data loader are A's: both builds get the same vectors
    jv_a = builds[0]["jevmem"]
    sys.modules.update(builds[0])
    embed = builds[0]["jevmem.embed"]
    emb = (
        embed.HashEmbedder(256)
        if args.embedder == "hash"
        else embed.default_embedder(threads=1, warn=False)
    )
    cache = CachedEmbedder(emb, args.embedding_cache)
    evaluation = builds[0]["jevmem.evaluation"]
    convs, _ = evaluation.load_samples(json.loads(args.data.read_text()))
    memories: list[list[Any]] = [[], []]
    questions: list[list[str]] = []
    for conv in convs[: args.conversations]:
        conv = evaluation.RESTYLES[args.style](conv)
        qs = [qa.question for qa in conv.qas]
        questions.append(qs)
        table = {q: emb.embed([q])[0] for q in qs}
        texts, ts, spk, provs = evaluation.conversation_inputs(conv)
        for which, mods in enumerate(builds):
            sys.modules.update(mods)
            jv = mods["jevmem"]
            store = jv.MemoryStore(emb.dim, max_text_bytes=1 << 22)
            m = jv.Memory(embedder=cache, store=store)
            m.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
            m.embedder = TableEmbedder(emb.dim, table)
            memories[which].append(m)
    del jv_a

    times: list[list[float]] = [[], []]
    differing: list[str] = []
    for p in range(args.passes):
        for c, qs in enumerate(questions):
            for i, q in enumerate(qs):
                got: list[Any] = [None, None]
                # alternate which build goes first, question by question
                for which in (0, 1) if (p + i) % 2 == 0 else (1, 0):
                    sys.modules.update(builds[which])
                    m = memories[which][c]
                    t = time.perf_counter()
                    res = m.search(q, k=10, mode=args.mode)
                    dt = time.perf_counter() - t
                    if p:
                        times[which].append(dt)
                    got[which] = [(e.id, e.score) for e in res.evidence]
                if p == 0 and got[0] != got[1]:
                    differing.append(q)
    a, b = (statistics.median(t) * 1e3 for t in times)
    report: dict[str, object] = {
        "a": str(args.a),
        "b": str(args.b),
        "data": str(args.data),
        "mode": args.mode,
        "style": args.style,
        "searches_per_build": len(times[0]),
        "a_p50_ms": a,
        "b_p50_ms": b,
        "b_over_a": b / a,
        "b_over_a_median_per_query": statistics.median(
            y / x for x, y in zip(times[0], times[1], strict=True)
        ),
        "questions": sum(len(qs) for qs in questions),
        "questions_with_different_evidence": len(differing),
        "different_evidence": differing[:20],
    }
    finish_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A whole `jevmem.Memory` (write path, controller, traversal) at 100k and 1M
nodes of realistic text: build rate, bytes per node, search latency and the
vector index's recall against exact search.

The text is the development sets' turns (LoCoMo dev: two friends chatting;
BEAM 100K: a user and an assistant, long turns), conversation after
conversation with their speakers and sessions, repeated until the size is
reached. Each repetition is another stretch of time (timestamps move on by
the corpus's span) and its vectors are the first copy's moved by a small
random step and renormalised, so the index holds near-duplicates, as an
agent's memory of recurring requests does, rather than exact copies.
With ``--corpus mixtures`` a later copy's vector instead blends its turn's
vector with another random turn's (weights 0.5-0.8 for its own) plus the same
step: the text repeats, but the vectors are distinct points in the space the
real turns span, so the vector index's recall is measured on a memory of
distinct observations rather than on near-ties among ~n/7,854 copies of each
turn (at 1M the near-copies corpus holds ~127 of every turn, and its exact
top 10 is such a tie; BENCHMARKS.md section 17).
Vectors are precomputed (``--embedder``: the default ONNX model through the
embedding cache, or the hashing embedder) and queries are timed with
precomputed vectors: the query embedding is not part of the figures.
``--ef-recall`` also measures the vector recall at other search expansions
of the same graph (`MemoryStore.set_expansion_search`), after the timings.

One memory is built up to the largest of ``--sizes`` and measured as it
passes each (the JSON is rewritten at each, so a stopped run keeps the sizes
it reached). Queries are the development sets' questions, a fixed sample; each is run in
``full`` mode (the product path) and in ``lexical`` mode (BM25 only) on the
same memory, one after the other.

    python bench/bench_memory_scale.py --sizes 100000 --embedder onnx \\
        --embedding-cache /tmp/embcache --json bench/out/memory_scale.json
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import CachedEmbedder, default_data_path, machine, rss_bytes

from jevmem import LocalController, Memory, MemoryConfig
from jevmem.controller import default_controller
from jevmem.embed import Embedder, HashEmbedder, default_embedder
from jevmem.evaluation import conversation_inputs, load
from jevmem.memory import Mode

Vectors = npt.NDArray[np.float32]


def corpus() -> tuple[list[tuple[str, int | None, str, dict[str, str]]], list[str]]:
    """Every turn of both development sets, in order, and their questions."""
    data = default_data_path().parents[1]
    turns: list[tuple[str, int | None, str, dict[str, str]]] = []
    questions: list[str] = []
    for path in (data / "locomo" / "locomo10-dev.json", data / "beam" / "beam-100k.json"):
        convs, _ = load(path)
        for conv in convs:
            texts, ts, spk, provs = conversation_inputs(conv)
            turns.extend(zip(texts, ts, spk, provs, strict=True))
            questions.extend(q.question for q in conv.qas)
    return turns, questions


def corpus_vectors(
    embedder_kind: str, cache: str | None, queries: int
) -> tuple[
    list[tuple[str, int | None, str, dict[str, str]]], Vectors, list[str], Vectors, Embedder
]:
    """The corpus with its vectors as the write path makes them (the speaker
    with the words), a fixed sample of ``queries`` questions with theirs, and
    the embedder (through the cache when one is given)."""
    turns, questions = corpus()
    inner: Embedder = default_embedder() if embedder_kind == "onnx" else HashEmbedder(384)
    embedder: Any = CachedEmbedder(inner, cache) if cache else inner
    base = np.asarray(embedder.embed([f"{t[2]}: {t[0]}" if t[2] else t[0] for t in turns]))
    sample = random.Random(11).sample(questions, min(queries, len(questions)))
    qvecs = np.asarray(embedder.embed(sample), dtype=np.float32)
    if isinstance(embedder, CachedEmbedder):
        embedder.flush()
    return turns, base, sample, qvecs, inner


class Fixed:
    """Precomputed query vectors: the figures leave the query embedding out."""

    def __init__(self, dim: int, vectors: dict[str, Vectors]) -> None:
        self.dim = dim
        self.vectors = vectors

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self.vectors[t] for t in texts])

    def embed_one(self, text: str) -> Vectors:
        return self.vectors[text]


def near_copy(
    v: Vectors, rng: np.random.Generator, step: float, blend: Vectors | None = None
) -> Vectors:
    """``v`` moved by a random step (and first blended with ``blend``, each
    row by its own weight in [0.5, 0.8], when given), renormalised."""
    if blend is not None:
        w = rng.uniform(0.5, 0.8, (len(v), 1)).astype(np.float32)
        v = w * v + (1.0 - w) * blend
    moved = v + rng.normal(0.0, step / np.sqrt(v.shape[-1]), v.shape).astype(np.float32)
    moved /= np.linalg.norm(moved, axis=-1, keepdims=True)
    return moved.astype(np.float32)


def run_sizes(
    sizes: list[int],
    turns: list[tuple[str, int | None, str, dict[str, str]]],
    base: Vectors,
    queries: list[str],
    qvecs: Vectors,
    args: argparse.Namespace,
    report: Callable[[dict[str, Any]], None],
) -> None:
    """One memory, built up to the largest size and measured as it passes
    each size (`report` gets each size's figures as soon as they are taken:
    a long build that is stopped keeps the sizes it reached). Build time and
    rate count the writes only, not the measurements between them."""
    rng = np.random.default_rng(7)
    stamps = [t[1] for t in turns if t[1] is not None]
    span = (max(stamps) - min(stamps) + 86_400) if stamps else 86_400
    controller = LocalController() if args.controller == "hand" else default_controller()
    memory = Memory(Fixed(base.shape[1], {}), controller, config=MemoryConfig())
    gc.collect()
    rss0 = rss_bytes()
    n = max(sizes)
    written = 0
    all_vecs = np.empty((n, base.shape[1]), np.float32)
    build_s = 0.0
    next_report = args.batch * 20
    for size in sorted(set(sizes)):
        t_build = time.perf_counter()
        while written < size:
            # a batch never crosses a copy of the corpus or a measured size
            copy, at = divmod(written, len(turns))
            rows = turns[at : at + min(args.batch, size - written, len(turns) - at)]
            vecs = base[at : at + len(rows)]
            if copy:
                blend = (
                    base[rng.integers(0, len(base), len(rows))]
                    if args.corpus == "mixtures"
                    else None
                )
                vecs = near_copy(vecs, rng, args.step, blend)
            memory.add_batch(
                [r[0] for r in rows],
                timestamps=[None if r[1] is None else r[1] + copy * span for r in rows],
                speakers=[r[2] for r in rows],
                provenances=[{**r[3], "session": f"{copy}:{r[3]['session']}"} for r in rows],
                embeddings=vecs,
            )
            all_vecs[written : written + len(rows)] = vecs
            written += len(rows)
            if written >= next_report:
                rate = written / (build_s + time.perf_counter() - t_build)
                print(f"  {written:,}/{n:,} nodes, {rate:,.0f} nodes/s", file=sys.stderr)
                next_report += args.batch * 20
        build_s += time.perf_counter() - t_build
        report(measure(memory, size, build_s, rss0, all_vecs[:size], base, queries, qvecs, args))
    if args.save:
        # the memory and the vectors it holds, so later code can be measured
        # on the same memory without building it again (--load)
        t0 = time.perf_counter()
        memory.save(args.save)
        np.save(f"{args.save}.vectors.npy", all_vecs)
        print(f"saved to {args.save} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def run_loaded(
    base: Vectors,
    queries: list[str],
    qvecs: Vectors,
    args: argparse.Namespace,
    report: Callable[[dict[str, Any]], None],
) -> None:
    """Measure a memory written by ``--save`` (its build time is not known
    here: ``build_s`` is the load's)."""
    controller = LocalController() if args.controller == "hand" else default_controller()
    gc.collect()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    memory = Memory.load(args.load, Fixed(base.shape[1], {}), controller, config=MemoryConfig())
    open_s = time.perf_counter() - t0
    # the HNSW graph is rebuilt (not stored): in the background from the
    # load on, and here waited for
    if memory.store.pending_graph:
        memory.store.finish_graph()
    load_s = time.perf_counter() - t0
    if args.expansion_search:
        memory.store.set_expansion_search(
            None if args.expansion_search == "grows" else int(args.expansion_search)
        )
    all_vecs = np.load(f"{args.load}.vectors.npy")
    print(
        f"loaded {len(memory.store):,} nodes in {load_s:.0f} s ({open_s:.0f} s, then the graph)",
        file=sys.stderr,
    )
    figures = measure(memory, len(all_vecs), load_s, rss0, all_vecs, base, queries, qvecs, args)
    report(
        {
            **figures,
            "loaded_from": args.load,
            "load_s": load_s,
            "open_s": open_s,
            "graph_s": load_s - open_s,
        }
    )


def measure(
    memory: Memory,
    n: int,
    build_s: float,
    rss0: int,
    all_vecs: Vectors,
    base: Vectors,
    queries: list[str],
    qvecs: Vectors,
    args: argparse.Namespace,
) -> dict[str, Any]:
    if memory.store.pending_graph:
        memory.store.finish_graph()
    gc.collect()
    rss = rss_bytes() - rss0

    memory.embedder = Fixed(base.shape[1], dict(zip(queries, qvecs, strict=True)))
    for q in queries[:10]:  # warm
        memory.search(q)
    timings: dict[Mode, list[float]] = {"full": [], "lexical": []}
    for q in queries:
        for mode in timings:
            t0 = time.perf_counter()
            memory.search(q, 10, mode=mode)
            timings[mode].append(time.perf_counter() - t0)

    # the vector index against exact search over the same vectors
    exact = [set(np.argsort(-(all_vecs @ qv), kind="stable")[:10].tolist()) for qv in qvecs]

    def vector_recall() -> float:
        hits = 0
        for qv, best in zip(qvecs, exact, strict=True):
            got, _ = memory.store.search_vector(qv, 10)
            hits += len(set(got.tolist()) & best)
        return hits / (10 * len(qvecs))

    recall = vector_recall()
    default_ef, setting = memory.store.expansion_search, memory.store.fixed_expansion_search
    recall_at = {default_ef: recall}
    for ef in (int(e) for e in args.ef_recall.split(",") if e):
        memory.store.set_expansion_search(ef)
        recall_at[ef] = vector_recall()
    memory.store.set_expansion_search(setting)

    def ms(xs: list[float], p: float) -> float:
        return 1000 * float(np.percentile(xs, p))

    out = {
        "nodes": n,
        "build_s": build_s,
        "nodes_per_s": n / build_s,
        "write_ms_per_node": 1000 * build_s / n,
        "rss_bytes_per_node": rss / n,
        "full_p50_ms": ms(timings["full"], 50),
        "full_p99_ms": ms(timings["full"], 99),
        "lexical_p50_ms": ms(timings["lexical"], 50),
        "lexical_p99_ms": ms(timings["lexical"], 99),
        "full_over_lexical_p50": statistics.median(timings["full"])
        / statistics.median(timings["lexical"]),
        "vector_recall_at_10": recall,
        "expansion_search": default_ef,
        "vector_recall_at_10_by_ef": {str(ef): r for ef, r in sorted(recall_at.items())},
        "corpus": args.corpus,
        "queries": len(queries),
    }
    print(
        f"{n:,} nodes: build {build_s:.0f} s ({out['nodes_per_s']:,.0f} nodes/s), "
        f"{out['rss_bytes_per_node']:,.0f} B/node RSS; full p50 {out['full_p50_ms']:.2f} ms "
        f"p99 {out['full_p99_ms']:.2f} ms; lexical p50 {out['lexical_p50_ms']:.2f} ms; "
        f"vector recall@10 {recall:.3f} (ef {default_ef}); by ef "
        + ", ".join(f"{ef}: {r:.3f}" for ef, r in sorted(recall_at.items())),
        file=sys.stderr,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--sizes",
        default="100000",
        help="comma-separated node counts, measured as one build passes each",
    )
    ap.add_argument("--queries", type=int, default=300, help="questions sampled (fixed seed)")
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--embedding-cache", default=None, help="directory of cached vectors")
    ap.add_argument("--controller", choices=("learned", "hand"), default="learned")
    ap.add_argument("--batch", type=int, default=500, help="observations per add_batch")
    ap.add_argument("--step", type=float, default=0.15, help="size of a copy's vector step")
    ap.add_argument(
        "--corpus",
        choices=("near-copies", "mixtures"),
        default="near-copies",
        help="how a later copy's vectors differ from the first's (see the module doc)",
    )
    ap.add_argument(
        "--ef-recall", default="", help="other search expansions to measure recall at, e.g. 256"
    )
    ap.add_argument("--save", default=None, help="write the memory here after the largest size")
    ap.add_argument(
        "--load", default=None, help="measure a memory written by --save instead of building one"
    )
    ap.add_argument(
        "--expansion-search",
        default=None,
        help="with --load: the ef to search with, or 'grows' (a file keeps its own setting)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    turns, base, sample, qvecs, inner = corpus_vectors(
        args.embedder, args.embedding_cache, args.queries
    )
    print(
        f"corpus: {len(turns):,} turns, {len(sample)} queries; {machine()}; "
        f"embedder {inner!r}, controller {args.controller}",
        file=sys.stderr,
    )
    results: list[dict[str, Any]] = []

    def report(figures: dict[str, Any]) -> None:
        results.append(figures)
        if args.json:  # rewritten at every size, so a stopped run keeps what it measured
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(
                json.dumps({"machine": machine(), "args": vars(args), "results": results}, indent=1)
                + "\n"
            )

    if args.load:
        run_loaded(base, sample, qvecs, args, report)
    else:
        sizes = [int(s) for s in args.sizes.split(",")]
        run_sizes(sizes, turns, base, sample, qvecs, args, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

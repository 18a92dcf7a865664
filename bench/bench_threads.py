"""Searches per second of 1 and N threads searching one `Memory`: how much of
a query runs without the GIL (on 2 cores, the most two threads can add).

One development conversation, built from cached vectors; its questions are
searched with precomputed query vectors (the plane and the controller only),
each thread starting at another question. 1 and N threads alternate
``--rounds`` times for ``--seconds`` each. To compare two builds, run this
once with each (``PYTHONPATH=<package>``), in turn.

    .venv/bin/python bench/bench_threads.py --data ../shared/data/locomo/locomo10-dev.json \\
        --embedding-cache /tmp/embcache [--threads 4] [--seconds 6] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import CachedEmbedder
from bench_query import TableEmbedder
from locomo_retrieval import MAX_TEXT_BYTES, make_embedder

import jevmem
from jevmem.evaluation import conversation_inputs, load_samples


def searches_per_second(m: jevmem.Memory, questions: list[str], n: int, seconds: float) -> float:
    return searchers_rate(lambda _, q: m.search(q, k=10), questions, n, seconds)


def searchers_rate(
    search: Callable[[int, str], object], questions: list[str], n: int, seconds: float
) -> float:
    """Searches per second of ``n`` threads calling ``search(thread, question)``
    for ``seconds``, each thread starting elsewhere in the questions."""
    done = [0] * n
    stop = time.perf_counter() + seconds

    def work(i: int) -> None:
        j = i * 37
        while time.perf_counter() < stop:
            search(i, questions[j % len(questions)])
            done[i] += 1
            j += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--embedding-cache", type=Path, required=True)
    ap.add_argument("--conversation", type=int, default=0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    emb = make_embedder("onnx", 2)
    convs, _ = load_samples(json.loads(args.data.read_text()))
    conv = convs[args.conversation]
    texts, stamps, speakers, provs = conversation_inputs(conv)
    store = jevmem.MemoryStore(emb.dim, max_text_bytes=MAX_TEXT_BYTES)
    m = jevmem.Memory(embedder=CachedEmbedder(emb, args.embedding_cache), store=store)
    m.add_batch(texts, timestamps=stamps, speakers=speakers, provenances=provs)
    questions = [qa.question for qa in conv.qas]
    m.embedder = TableEmbedder(emb.dim, {q: emb.embed([q])[0] for q in questions})
    for q in questions:  # warm up
        m.search(q, k=10)
    one: list[float] = []
    many: list[float] = []
    for _ in range(args.rounds):
        one.append(searches_per_second(m, questions, 1, args.seconds))
        many.append(searches_per_second(m, questions, args.threads, args.seconds))
    report = {
        "package": jevmem.__file__,
        "data": str(args.data),
        "nodes": len(m),
        "threads": args.threads,
        "one": one,
        "many": many,
        "ratio_of_medians": statistics.median(many) / statistics.median(one),
    }
    print(json.dumps(report, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

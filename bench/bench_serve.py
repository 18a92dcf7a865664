"""Searches per second that ``jevmem serve`` gives 1 and N concurrent
searchers of one memory (the serve target: 4 searchers >= 1.7x one, 2 cores).

One development conversation is built in this process (cached vectors),
saved, and served by ``jevmem serve --memory conv=FILE`` in a separate
process (``--embedder``: the server embeds each query; ``hash`` leaves the
plane and the controller as the cost). Client threads in this process, one
`MemoryClient` each, loop over the conversation's questions, each starting
elsewhere; 1 and N threads alternate ``--rounds`` times for ``--seconds``
each. Run it once per package (``PYTHONPATH=<package>``) to compare two builds.

    .venv/bin/python bench/bench_serve.py --data ../shared/data/locomo/locomo10-dev.json \\
        --embedding-cache /tmp/embcache [--threads 4] [--seconds 5] [--rounds 3] \\
        [--embedder default|hash] [--max-search-batch N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import CachedEmbedder, finish_report
from bench_grpc import announced
from bench_threads import searchers_rate
from locomo_retrieval import MAX_TEXT_BYTES, make_embedder

import jevmem
from jevmem.evaluation import conversation_inputs, load_samples
from jevmem.remote import MemoryClient

K = 10


def searches_per_second(target: str, questions: list[str], n: int, seconds: float) -> float:
    clients = [MemoryClient(target, timeout_s=60) for _ in range(n)]
    for c in clients:  # a connection per searcher, open before the clock starts
        c.search("conv", questions[0], K)
    try:
        return searchers_rate(lambda i, q: clients[i].search("conv", q, K), questions, n, seconds)
    finally:
        for c in clients:
            c.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--embedding-cache", type=Path, required=True)
    ap.add_argument("--conversation", type=int, default=0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--embedder", choices=("default", "hash"), default="default")
    ap.add_argument("--max-search-batch", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    emb = make_embedder("onnx" if args.embedder == "default" else "hash", 1)
    conv = load_samples(json.loads(args.data.read_text()))[0][args.conversation]
    texts, ts, spk, provs = conversation_inputs(conv)
    store = jevmem.MemoryStore(emb.dim, max_text_bytes=MAX_TEXT_BYTES)
    m = jevmem.Memory(embedder=CachedEmbedder(emb, args.embedding_cache), store=store)
    m.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
    questions = [qa.question for qa in conv.qas]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conv.jvm"
        m.save(path)
        flags = ["--memory", f"conv={path}", "--embedder", args.embedder, "--grace", "0"]
        if args.max_search_batch is not None:
            flags += ["--max-search-batch", str(args.max_search_batch)]
        server = subprocess.Popen(
            [sys.executable, "-m", "jevmem", "serve", *flags, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            target = announced(server, "serve")
            one: list[float] = []
            many: list[float] = []
            for _ in range(args.rounds):
                one.append(searches_per_second(target, questions, 1, args.seconds))
                many.append(searches_per_second(target, questions, args.threads, args.seconds))
                print(f"1 searcher {one[-1]:.1f}/s, {args.threads} searchers {many[-1]:.1f}/s")
        finally:
            server.terminate()
            server.wait(30)
    report: dict[str, object] = {
        "package": str(Path(jevmem.__file__).parent),
        "data": str(args.data),
        "nodes": len(texts),
        "embedder": args.embedder,
        "threads": args.threads,
        "max_search_batch": args.max_search_batch,
        "one": one,
        "many": many,
        "ratio_of_medians": statistics.median(many) / statistics.median(one),
    }
    finish_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

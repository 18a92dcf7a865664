"""Searches per second that ``jevmem serve`` gives 1 and N concurrent
searchers of one memory (the serve target: 4 searchers >= 1.7x one, 2 cores).

One development conversation is built in this process (cached vectors),
saved (by each build under test, as a build reads only the snapshot
formats up to its own), and served by ``jevmem serve --memory conv=FILE``
in a separate process (``--embedder``: the server embeds each query; ``hash`` leaves the
plane and the controller as the cost). Client threads in this process, one
`MemoryClient` each, loop over the conversation's questions, each starting
elsewhere; 1 and N threads alternate ``--rounds`` times for ``--seconds``
each. ``--a DIR --b DIR`` (two package trees, the ``python/`` folder of two
builds) serves the memory from both at once, one server per build, and
measures them in turn within every round (the order alternating), so that
the two builds meet the same machine: this machine's speed drifts by tens
of percent between runs minutes apart.

The report's ``cpu`` gives, per build, the medians of the server's cores
busy and CPU milliseconds a search (from /proc, Linux) and the client's,
at one and at N searchers: at C ms of CPU a search (server and client) two
cores serve at most 2000 / C searches a second, which bounds the ratio
whatever the GIL does (BENCHMARKS.md section 63).

    .venv/bin/python bench/bench_serve.py --data ../shared/data/locomo/locomo10-dev.json \\
        --embedding-cache /tmp/embcache [--threads 4] [--seconds 5] [--rounds 3] \\
        [--embedder default|hash] [--max-search-batch N] [--a DIR --b DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import CachedEmbedder, finish_report
from bench_ab import load_build
from bench_grpc import announced
from bench_threads import searchers_rate
from locomo_retrieval import MAX_TEXT_BYTES, make_embedder

import jevmem
from jevmem.evaluation import conversation_inputs, load_samples
from jevmem.remote import MemoryClient

K = 10


def searches_per_second(
    target: str, questions: list[str], n: int, seconds: float, server_pid: int | None = None
) -> tuple[float, dict[str, float]]:
    """Searches per second of ``n`` searchers, and where the CPU went: the
    server's cores busy and CPU milliseconds a search (read from Linux's
    /proc when ``server_pid`` is given), the client's likewise."""
    clients = [MemoryClient(target, timeout_s=60) for _ in range(n)]
    for c in clients:  # a connection per searcher, open before the clock starts
        c.search("conv", questions[0], K)
    try:
        server0, client0, t0 = process_cpu_s(server_pid), time.process_time(), time.perf_counter()
        rate = searchers_rate(lambda i, q: clients[i].search("conv", q, K), questions, n, seconds)
        wall = time.perf_counter() - t0
        searches = rate * wall
        cpu = {
            "client_cores": (time.process_time() - client0) / wall,
            "client_ms_per_search": (time.process_time() - client0) / searches * 1e3,
        }
        server1 = process_cpu_s(server_pid)
        if server0 is not None and server1 is not None:
            cpu["server_cores"] = (server1 - server0) / wall
            cpu["server_ms_per_search"] = (server1 - server0) / searches * 1e3
        return rate, cpu
    finally:
        for c in clients:
            c.close()


def process_cpu_s(pid: int | None) -> float | None:
    """A process's user + system CPU seconds so far (Linux; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(flags: list[str], tree: Path | None) -> subprocess.Popen[str]:
    """``jevmem serve FLAGS`` in a process of its own, from the package tree
    ``tree`` (None: this process's jevmem)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return subprocess.Popen(
        [sys.executable, "-m", "jevmem", "serve", *flags, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


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
    ap.add_argument("--a", type=Path, default=None, help="package tree of build A (with --b)")
    ap.add_argument("--b", type=Path, default=None, help="package tree of build B (with --a)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if (args.a is None) != (args.b is None):
        raise SystemExit("--a and --b go together")

    emb = make_embedder("onnx" if args.embedder == "default" else "hash", 1)
    conv = load_samples(json.loads(args.data.read_text()))[0][args.conversation]
    texts, ts, spk, provs = conversation_inputs(conv)
    questions = [qa.question for qa in conv.qas]
    builds = {"": None} if args.a is None else {"a": args.a, "b": args.b}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        for name, tree in builds.items():
            # each build saves the memory it serves: a build reads the
            # snapshot formats up to its own, not a newer one
            mods = {"jevmem": jevmem} if tree is None else load_build(tree)
            jv = mods["jevmem"]
            store = jv.MemoryStore(emb.dim, max_text_bytes=MAX_TEXT_BYTES)
            m = jv.Memory(embedder=CachedEmbedder(emb, args.embedding_cache), store=store)
            m.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
            # the file names the embedder serve is given (a load refuses
            # another one), not the cache, which only sped up the build
            named = getattr(jv.embed, "embedder_from_spec", None)
            if named is not None:
                m.embedder = emb if tree is None else named(jevmem.embed.embedder_spec(emb))
            path = Path(tmp) / f"conv{name}.jvm"
            m.save(path)
            flags = ["--memory", f"conv={path}", "--embedder", args.embedder, "--grace", "0"]
            if args.max_search_batch is not None:
                flags += ["--max-search-batch", str(args.max_search_batch)]
            servers[name] = start_server(flags, tree)
        one: dict[str, list[float]] = {name: [] for name in builds}
        many: dict[str, list[float]] = {name: [] for name in builds}
        cpu: dict[str, dict[str, list[float]]] = {name: {} for name in builds}
        try:
            targets = {name: announced(srv, "serve") for name, srv in servers.items()}
            for r in range(args.rounds):
                order = list(builds) if r % 2 == 0 else list(builds)[::-1]
                for label, n, rates in (("one", 1, one), ("many", args.threads, many)):
                    for name in order:
                        rate, used = searches_per_second(
                            targets[name], questions, n, args.seconds, servers[name].pid
                        )
                        rates[name].append(rate)
                        for key, value in used.items():
                            cpu[name].setdefault(f"{label}_{key}", []).append(value)
                for name in order:
                    print(
                        f"{name or 'served'}: 1 searcher {one[name][-1]:.1f}/s, "
                        f"{args.threads} searchers {many[name][-1]:.1f}/s"
                    )
        finally:
            for srv in servers.values():
                srv.terminate()
                srv.wait(30)
    report: dict[str, object] = {
        "package": str(Path(jevmem.__file__).parent),
        "data": str(args.data),
        "nodes": len(texts),
        "embedder": args.embedder,
        "threads": args.threads,
        "max_search_batch": args.max_search_batch,
    }
    for name in builds:
        prefix = f"{name}_" if name else ""
        report[f"{prefix}one"] = one[name]
        report[f"{prefix}many"] = many[name]
        report[f"{prefix}ratio_of_medians"] = statistics.median(many[name]) / statistics.median(
            one[name]
        )
        # medians over the rounds; one searcher's CPU a search bounds what
        # more searchers can reach: the cores over (server + client) ms
        report[f"{prefix}cpu"] = {k: statistics.median(v) for k, v in cpu[name].items()}
    if args.a is not None:
        report["a"], report["b"] = str(args.a), str(args.b)
        # each round's B over A, measured minutes apart at most
        report["b_over_a_many"] = [b / a for a, b in zip(many["a"], many["b"], strict=True)]
        report["b_over_a_one"] = [b / a for a, b in zip(one["a"], one["b"], strict=True)]
    finish_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

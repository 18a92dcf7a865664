"""gRPC benchmarks: remote controller overhead, batching through the remote, memory-service load.

    .venv/bin/python bench/bench_grpc.py [--nodes 600] [--queries 64] [--quick]

1. in-process vs gRPC loopback controller: per-query latency ratio and RPCs
   per query (single ``search`` calls);
2. ``search_batch`` of 64 / 256 queries vs a loop of single searches, both
   through the remote controller: throughput ratio;
3. ``jevmem serve`` (a separate process) under 1 / 8 / 32 / 64 calls in
   flight with a concurrency cap of 32: the 64 run is a 2x overload that must
   shed with RESOURCE_EXHAUSTED rather than queue.
All servers bind 127.0.0.1 on ports picked at run time.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import select
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from jevmem import HashEmbedder, Memory
from jevmem.remote import GrpcController, MemoryClient, serve_controller

REPO = Path(__file__).resolve().parents[1]
NAMES = ["Maya", "Lena", "Ines", "Tom", "Ravi", "Omar", "Sara", "Jonas"]
TOPICS = ["cello", "Lisbon", "deploy", "coffee", "hiking", "the lab", "a new job", "the lake",
          "a concert", "the garden", "a marathon", "the bakery"]  # fmt: skip


def corpus(n: int, seed: int = 7) -> tuple[list[str], list[int], list[str]]:
    rng = random.Random(seed)
    texts, stamps, speakers = [], [], []
    for i in range(n):
        who, what = rng.choice(NAMES), rng.sample(TOPICS, 2)
        texts.append(f"{who} talked about {what[0]} and {what[1]} because of {rng.choice(TOPICS)}")
        stamps.append(1_700_000_000 + i * 1_800)
        speakers.append(who)
    return texts, stamps, speakers


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    forms = ["what did {w} say about {t}?", "why did {w} go to {t}?", "when was {w} at {t}?"]
    return [rng.choice(forms).format(w=rng.choice(NAMES), t=rng.choice(TOPICS)) for _ in range(n)]


def build(controller: object | None, n: int) -> Memory:
    m = Memory(HashEmbedder(128), controller=controller)  # type: ignore[arg-type]
    texts, stamps, speakers = corpus(n)
    for i in range(0, n, 200):
        m.add_batch(
            texts[i : i + 200], timestamps=stamps[i : i + 200], speakers=speakers[i : i + 200]
        )
    return m


def latency(m: Memory, qs: list[str]) -> list[float]:
    out = []
    for q in qs:
        t0 = time.perf_counter()
        m.search(q)
        out.append(time.perf_counter() - t0)
    return out


def bench_controller(n: int, nq: int) -> None:
    print(f"\n## 1. in-process vs gRPC loopback controller ({n} nodes, {nq} single queries)")
    with serve_controller() as server, GrpcController(server.address, use_fallback=False) as g:
        local, remote = build(None, n), build(g, n)
        qs = queries(nq)
        latency(local, qs[:8]), latency(remote, qs[:8])  # warm up
        rpcs0, calls0 = g.counters["rpcs"], remote.calls["query"]
        a, b = latency(local, qs), latency(remote, qs)
        rpcs = g.counters["rpcs"] - rpcs0
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"median per query: in-process {ma * 1e3:.2f} ms, gRPC {mb * 1e3:.2f} ms, "
              f"ratio {mb / ma:.2f}x (p90 {sorted(b)[int(0.9 * len(b))] * 1e3:.2f} ms)")  # fmt: skip
        print(f"RPCs per query: {rpcs / nq:.2f} (controller calls per query "
              f"{(remote.calls['query'] - calls0) / nq:.2f}); fallbacks {g.counters['fallbacks']}")  # fmt: skip

        print("\n## 2. search_batch vs a loop of single searches, both through the remote")
        for size in (64, 256):
            qs = queries(size, seed=size)
            r0 = g.counters["rpcs"]
            t0 = time.perf_counter()
            remote.search_batch(qs)
            tb = time.perf_counter() - t0
            rb = g.counters["rpcs"] - r0
            r0 = g.counters["rpcs"]
            t0 = time.perf_counter()
            for q in qs:
                remote.search(q)
            tl = time.perf_counter() - t0
            rl = g.counters["rpcs"] - r0
            print(f"{size:4d} queries: batch {size / tb:7.1f} q/s ({rb} RPCs), loop {size / tl:7.1f} q/s "
                  f"({rl} RPCs): throughput ratio {tl / tb:.2f}x")  # fmt: skip


def bench_service(n: int, seconds: float) -> None:
    cap = 32
    print(
        f"\n## 3. jevmem serve load test ({n} nodes, cap {cap} in flight, {seconds:.0f} s per level)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "jevmem", "serve", "--port", "0", "--embedder", "hash-128",
         "--max-concurrent", str(cap), "--max-workers", str(cap), "--grace", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        if not select.select([proc.stdout], [], [], 30)[0]:
            raise SystemExit("jevmem serve did not start")
        address = proc.stdout.readline().rsplit(" ", 1)[1].strip()
        with MemoryClient(address, timeout_s=60) as c:
            texts, stamps, speakers = corpus(n)
            for i in range(0, n, 200):
                c.add_batch("bench", [c.observation(t, timestamp=s, speaker=p) for t, s, p in
                                      zip(texts[i:i + 200], stamps[i:i + 200], speakers[i:i + 200], strict=True)])  # fmt: skip
            qs = queries(512)
            for inflight in (1, 8, 32, 64):
                lat: list[float] = []
                codes: dict[str, int] = {}
                stop = time.perf_counter() + seconds

                def worker(
                    wid: int,
                    lat: list[float] = lat,
                    codes: dict[str, int] = codes,
                    inflight: int = inflight,
                    stop: float = stop,
                ) -> None:
                    i = wid
                    while time.perf_counter() < stop:
                        t0 = time.perf_counter()
                        try:
                            c.search("bench", qs[i % len(qs)])
                            lat.append(time.perf_counter() - t0)
                            codes["OK"] = codes.get("OK", 0) + 1
                        except grpc.RpcError as exc:
                            name = exc.code().name if isinstance(exc, grpc.Call) else "ERROR"
                            codes[name] = codes.get(name, 0) + 1
                            if name == "RESOURCE_EXHAUSTED":
                                time.sleep(0.005)  # a shed client backs off a little
                        i += inflight

                t0 = time.perf_counter()
                with ThreadPoolExecutor(inflight) as pool:
                    list(pool.map(worker, range(inflight)))
                wall = time.perf_counter() - t0
                lat.sort()
                p50 = lat[len(lat) // 2] * 1e3 if lat else float("nan")
                p99 = lat[int(0.99 * (len(lat) - 1))] * 1e3 if lat else float("nan")
                tag = " (2x overload)" if inflight == 2 * cap else ""
                print(f"{inflight:3d} in flight{tag}: {codes.get('OK', 0) / wall:7.1f} ok/s, "
                      f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, outcomes {codes}")  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=600)
    ap.add_argument("--queries", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.queries, args.seconds = 200, 16, 1.0
    print(
        f"# bench_grpc: Python {platform.python_version()}, {os.cpu_count()} cores, grpcio {grpc.__version__}"
    )
    bench_controller(args.nodes, args.queries)
    bench_service(args.nodes, args.seconds)


if __name__ == "__main__":
    main()

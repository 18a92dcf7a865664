"""Durable memories: acknowledged writes per second and ack latency per sync
mode, recovery time against log length, checkpoint time, and a long kill loop.

Side by side in one run, the same inserts (a short text and a precomputed
384-d vector, so the log is measured and not the embedder):

  * jevmem in memory (no log), and a durable MemoryStore in each mode:
    ``sync`` (ack after fsync, group commit), ``interval:100``, ``none``;
  * SQLite in WAL mode, one transaction per insert: ``synchronous=FULL``
    (compare with ``sync``) and ``NORMAL`` (compare with ``interval``);
  * each with 1 writer and with 8 concurrent writer threads.

``--memory-level`` also times ``Memory.add`` (controller included) per mode.
``recovery``: reopen time of a store whose log holds N records (no
checkpoint), with the replay rate. ``checkpoint``: time of one checkpoint of
N nodes. ``kill``: the kill loop of tests/test_durable.py run for N cycles.

    python bench/bench_durability.py writes --seconds 5 --json bench/out/durability_writes.json
    python bench/bench_durability.py recovery --sizes 10000,100000,1000000
    python bench/bench_durability.py checkpoint --sizes 100000,1000000
    python bench/bench_durability.py kill --cycles 2000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from jevmem._core import MemoryStore

DIM = 384


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 256 centroids, shaped like sentence embeddings
    (uniform random 384-d vectors are HNSW's worst case, several times slower
    to insert than real embeddings)."""
    rng = np.random.default_rng(seed)
    centroids = rng.standard_normal((256, DIM)).astype(np.float32)
    v = centroids[rng.integers(0, 256, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _text(i: int) -> str:
    return f"observation {i}: the user mentioned topic {i % 97} and detail {i * 7919 % 10007}"


#: The write benchmark keeps vectors in the exact tier (no HNSW graph), so
#: what it times is the log and the store's own bookkeeping, as SQLite's
#: inserts are; building the graph is bench_core.py's subject.
EXACT = 1 << 30


class _JevmemTarget:
    def __init__(self, mode: str | None, root: Path) -> None:
        self.mode = mode
        if mode is None:
            self.store = MemoryStore(DIM, exact_threshold=EXACT)
        else:
            self.store = MemoryStore.open(
                root / "mem", DIM, embedder="bench", durability=mode, exact_threshold=EXACT
            )[0]

    def insert(self, i: int, vec: np.ndarray) -> None:
        self.store.add(_text(i), vec)

    def close(self) -> None:
        if self.mode is not None:
            self.store.close()


class _SqliteTarget:
    def __init__(self, sync: str, root: Path) -> None:
        self.path = root / "bench.sqlite"
        self.sync = sync
        con = self._connect()
        con.execute("CREATE TABLE obs (id INTEGER PRIMARY KEY, text TEXT, vec BLOB)")
        con.close()
        self.local = threading.local()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"PRAGMA synchronous={self.sync}")
        return con

    def insert(self, i: int, vec: np.ndarray) -> None:
        con = getattr(self.local, "con", None)
        if con is None:
            con = self.local.con = self._connect()
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO obs (text, vec) VALUES (?, ?)", (_text(i), vec.tobytes()))
        con.execute("COMMIT")

    def close(self) -> None:
        pass


def _run_writers(target: Any, writers: int, seconds: float, vecs: np.ndarray) -> dict[str, Any]:
    latencies: list[list[float]] = [[] for _ in range(writers)]
    stop = time.perf_counter() + seconds
    start_gate = threading.Barrier(writers)

    def work(w: int) -> None:
        start_gate.wait()
        i = w
        lat = latencies[w]
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            target.insert(i, vecs[i % len(vecs)])
            lat.append(time.perf_counter() - t0)
            i += writers

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    flat = sorted(x for lat in latencies for x in lat)
    n = len(flat)
    return {
        "writes": n,
        "writes_per_s": n / wall,
        "p50_ms": 1e3 * flat[n // 2] if n else None,
        "p99_ms": 1e3 * flat[min(n - 1, int(0.99 * n))] if n else None,
    }


def cmd_writes(args: argparse.Namespace) -> dict[str, Any]:
    vecs = _vectors(4096)
    targets: list[tuple[str, Any]] = [
        ("jevmem in memory", lambda root: _JevmemTarget(None, root)),
        ("jevmem sync", lambda root: _JevmemTarget("sync", root)),
        ("jevmem interval:100", lambda root: _JevmemTarget("interval:100", root)),
        ("jevmem none", lambda root: _JevmemTarget("none", root)),
        ("sqlite WAL synchronous=FULL", lambda root: _SqliteTarget("FULL", root)),
        ("sqlite WAL synchronous=NORMAL", lambda root: _SqliteTarget("NORMAL", root)),
    ]
    rows: dict[str, Any] = {}
    # interleaved rounds, so drift on a noisy machine hits every target alike
    for rnd in range(args.rounds):
        for writers in (1, 8):
            for name, make in targets:
                root = Path(tempfile.mkdtemp(prefix="jevmem-bench-", dir=args.dir))
                try:
                    t = make(root)
                    r = _run_writers(t, writers, args.seconds, vecs)
                    t.close()
                finally:
                    shutil.rmtree(root, ignore_errors=True)
                rows.setdefault(f"{name} x{writers}", []).append(r)
                print(
                    f"round {rnd} {name:32s} x{writers}: {r['writes_per_s']:9.0f} writes/s  "
                    f"p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms",
                    file=sys.stderr,
                )
    summary = {
        k: {
            "writes_per_s": statistics.median(r["writes_per_s"] for r in v),
            "p50_ms": statistics.median(r["p50_ms"] for r in v),
            "p99_ms": statistics.median(r["p99_ms"] for r in v),
            "rounds": len(v),
        }
        for k, v in rows.items()
    }
    if args.memory_level:
        summary.update(_memory_level(args, vecs))
    return summary


def _memory_level(args: argparse.Namespace, vecs: np.ndarray) -> dict[str, Any]:
    from jevmem import Memory
    from jevmem.controller import LocalController
    from jevmem.embed import HashEmbedder

    out: dict[str, Any] = {}
    for mode in (None, "sync", "interval:100", "none"):
        root = Path(tempfile.mkdtemp(prefix="jevmem-bench-", dir=args.dir))
        try:
            emb = HashEmbedder(DIM)
            m = (
                Memory(emb, LocalController())
                if mode is None
                else Memory.open(root / "m", emb, LocalController(), durability=mode)
            )
            lat = []
            stop = time.perf_counter() + args.seconds
            i = 0
            t0 = time.perf_counter()
            while time.perf_counter() < stop:
                s = time.perf_counter()
                m.add(_text(i), embedding=vecs[i % len(vecs)])
                lat.append(time.perf_counter() - s)
                i += 1
            wall = time.perf_counter() - t0
            m.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
        lat.sort()
        key = f"Memory.add {mode or 'in memory'} x1"
        out[key] = {
            "writes_per_s": len(lat) / wall,
            "p50_ms": 1e3 * lat[len(lat) // 2],
            "p99_ms": 1e3 * lat[int(0.99 * len(lat))],
            "rounds": 1,
        }
        print(f"{key}: {out[key]}", file=sys.stderr)
    return out


def _fill_log(path: Path, n: int, exact: bool) -> None:
    """A directory whose log holds ``n`` one-node records after an empty
    checkpoint. Without ``exact`` the checkpoint says the default exact tier
    (HNSW past 4,096 vectors) but the records are written in a child process
    with the switch moved out of reach and then left without a checkpoint,
    as after a crash: the log's bytes are the same as a memory past the exact
    tier writes, without waiting ~1 ms per write for its HNSW inserts."""
    if not exact:
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, "fill child failed"
            return
    store = MemoryStore.open(
        path, DIM, embedder="bench", durability="none", exact_threshold=EXACT if exact else None
    )[0]
    if not exact:
        store._set_exact_threshold(EXACT)
    vecs = _vectors(min(n, 65536))
    t0 = time.perf_counter()
    for i in range(n):
        store.add(_text(i), vecs[i % len(vecs)])
        if i % 50000 == 0 and i:
            rate = i / (time.perf_counter() - t0)
            print(f"  filled {i}/{n} ({rate:,.0f}/s)", file=sys.stderr)
    if exact:
        store.close()
    else:
        store.flush()
        os._exit(0)  # no close, no checkpoint: the whole log replays on open


def _search_ms(store: MemoryStore, queries: np.ndarray) -> float:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        store.search_vector(q, 10)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _graph_progress(store: MemoryStore, wait_s: float) -> dict[str, Any]:
    """Follow the background graph build for up to ``wait_s`` seconds."""
    start_pending = store.pending_graph
    t0 = time.perf_counter()
    while store.pending_graph and time.perf_counter() - t0 < wait_s:
        time.sleep(0.25)
    took = time.perf_counter() - t0
    left = store.pending_graph
    return {
        "pending_at_open": start_pending,
        "graph_followed_s": took,
        "graph_pending_after": left,
        "graph_inserts_per_s": (start_pending - left) / took if took else None,
        "graph_complete": left == 0,
    }


def cmd_recovery(args: argparse.Namespace) -> dict[str, Any]:
    """``--exact``: vectors stay in the exact tier, so the log's own replay
    is timed. Without it the memory is past the exact tier: it opens with
    the replayed vectors pending (searched exactly) and a background thread
    builds the HNSW graph; search latency right after open and the graph's
    progress are reported too."""
    out: dict[str, Any] = {}
    queries = _vectors(20, seed=99)
    for n in args.sizes:
        root = Path(tempfile.mkdtemp(prefix="jevmem-bench-", dir=args.dir))
        key = f"{n} {'exact' if args.exact else 'hnsw'}"
        try:
            _fill_log(root / "m", n, args.exact)
            log_bytes = sum(p.stat().st_size for p in (root / "m").glob("wal-*.log"))
            t0 = time.perf_counter()
            store, _, _, report = MemoryStore.open(root / "m", DIM, embedder="bench")
            took = time.perf_counter() - t0
            assert report["replayed_records"] == n and len(store) == n
            out[key] = {
                "records": n,
                "log_mb": log_bytes / 2**20,
                "recovery_s": took,
                "records_per_s": n / took,
            }
            if not args.exact:
                out[key]["search_p50_ms_after_open"] = _search_ms(store, queries)
                out[key].update(_graph_progress(store, args.graph_wait))
                out[key]["search_p50_ms_after_wait"] = _search_ms(store, queries)
            store.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"recovery of {n} records: {out[key]}", file=sys.stderr)
    return out


def cmd_checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in args.sizes:
        root = Path(tempfile.mkdtemp(prefix="jevmem-bench-", dir=args.dir))
        try:
            store = MemoryStore.open(
                root / "m",
                DIM,
                embedder="bench",
                durability="none",
                exact_threshold=EXACT if args.exact else None,
            )[0]
            vecs = _vectors(min(n, 65536))
            for lo in range(0, n, 10000):
                hi = min(n, lo + 10000)
                store.add_batch(
                    [_text(i) for i in range(lo, hi)], vecs[np.arange(lo, hi) % len(vecs)]
                )
            t0 = time.perf_counter()
            report = store.checkpoint(b"")
            took = time.perf_counter() - t0
            store.close()
            t0 = time.perf_counter()
            store = MemoryStore.open(root / "m", DIM, embedder="bench")[0]
            reopen = time.perf_counter() - t0
            extra: dict[str, Any] = {}
            if not args.exact:
                queries = _vectors(20, seed=99)
                extra["search_p50_ms_after_open"] = _search_ms(store, queries)
                extra.update(_graph_progress(store, args.graph_wait))
                extra["search_p50_ms_after_wait"] = _search_ms(store, queries)
            store.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
        out[f"{n} {'exact' if args.exact else 'hnsw'}"] = {
            "nodes": n,
            "checkpoint_s": took,
            "checkpoint_mb": report["bytes"] / 2**20,
            "reopen_from_checkpoint_s": reopen,
            **extra,
        }
        print(
            f"checkpoint of {n} nodes: {out[f'{n} ' + ('exact' if args.exact else 'hnsw')]}",
            file=sys.stderr,
        )
    return out


def cmd_kill(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_durable import _kill_cycles  # the CI test's loop, run longer

    root = Path(tempfile.mkdtemp(prefix="jevmem-bench-", dir=args.dir))
    try:
        t0 = time.perf_counter()
        counts: dict[str, Any] = dict(_kill_cycles(root / "m", args.cycles, seed=args.seed))
        counts["seconds"] = round(time.perf_counter() - t0, 1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"kill loop: {counts}", file=sys.stderr)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dir", default=None, help="where temporary memories go (default: $TMPDIR)")
    ap.add_argument("--json", type=Path, default=None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("writes")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--memory-level", action="store_true")
    p.set_defaults(func=cmd_writes)
    for name, func, default in (
        ("recovery", cmd_recovery, "10000,100000"),
        ("checkpoint", cmd_checkpoint, "100000"),
    ):
        p = sub.add_parser(name)
        p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=default)
        p.add_argument("--exact", action="store_true", help="vectors in the exact tier (no HNSW)")
        p.add_argument(
            "--graph-wait",
            type=float,
            default=600.0,
            help="seconds to follow the background graph build after opening (HNSW tier)",
        )
        p.set_defaults(func=func)
    p = sub.add_parser("kill")
    p.add_argument("--cycles", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_kill)
    args = ap.parse_args()
    if isinstance(getattr(args, "sizes", None), str):
        args.sizes = [int(x) for x in args.sizes.split(",")]
    result = {
        "command": " ".join(sys.argv),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "results": args.func(args),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)


if __name__ == "__main__":
    main()

"""gRPC benchmarks on the LoCoMo dev split: remote controller, batching through it, memory service.

    .venv/bin/python bench/bench_grpc.py [--data FILE] [--server process|thread]
        [--queries N] [--limit-conversations N] [--seconds S] [--json OUT] [--quick]

One memory per conversation, built as ``bench/locomo_retrieval.py`` builds
them (one node per turn, its speaker, timestamp and provenance), with the
default embedder; the turns are embedded once and the same vectors go into
the in-process memory and the one whose controller is remote. Questions are
searched at k = 20 in ``full`` mode.

1. in-process local controller vs the same controller behind
   ``jevmem serve-controller`` on loopback: per-query latency of single
   ``search`` calls, the two interleaved question by question (alternating
   which goes first) so load drift hits both; RPCs per query; and whether
   the evidence is identical.
2. per conversation, ``search_batch`` of 64 and 256 of its questions (cycled
   when it has fewer) through the remote, against a loop of single searches
   through the same remote and against a loop of single searches in-process
   (and, for reference, ``search_batch`` in-process): throughput ratios. The
   remote batch runs twice: with each round streamed in chunks
   (``DecideStream``, the default) and as one unary ``Decide`` per round
   (``GrpcController(stream=False)``). Each batch runs once before and once
   after the loops, which alternate query by query.
Then, where the remote time goes: the controller calls of 64 single searches
and of one 256-batch on the largest conversation are replayed stage by stage
(building the request, serialising, the server's decoding, the controller,
encoding and reading the answers; best of 3 each), next to the round trip of
a minimal Decide.

3. ``jevmem serve`` (a separate process, default embedder, one named memory
   per conversation) under 1 / 8 / 32 / 64 calls in flight with a
   concurrency cap of 32: the 64 run is a 2x overload that must shed with
   RESOURCE_EXHAUSTED rather than queue. Queries are the conversations'
   questions, round-robin over the memories. Two servers hold the same
   memories: one runs the Search calls waiting for a memory together (the
   default), the other each alone (``--max-search-batch 1``); each level
   runs on both, one after the other.

``--server process`` (default) runs the controller server as its own process,
as a remote controller is deployed; ``--server thread`` runs it on a thread
of the benchmark process (client and server then share one interpreter).
All servers bind 127.0.0.1 on ports picked at run time.
"""

from __future__ import annotations

import argparse
import json
import platform
import select
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt
from _common import default_data_path, machine
from _common import load as load_average

import jevmem
from jevmem import Memory, SearchResult
from jevmem._proto.jevmem.v1 import controller_pb2 as cpb
from jevmem._proto.jevmem.v1 import controller_pb2_grpc as cpb_grpc
from jevmem.controller import catalogue
from jevmem.controller.local import LocalController
from jevmem.controller.types import Answer, DecisionRequest, validate_answers
from jevmem.embed import Embedder, HashEmbedder
from jevmem.evaluation import Conversation, conversation_inputs, load, percentile
from jevmem.remote import GrpcController, MemoryClient, serve_controller
from jevmem.remote.convert import (
    answers_from_proto,
    answers_to_proto,
    requests_from_proto,
    requests_to_proto,
)

REPO = Path(__file__).resolve().parents[1]
K = 20
SIZES: tuple[int, ...] = (64, 256)


@dataclass
class Prepared:
    """One conversation's inputs for ``Memory.add_batch``, turns embedded once."""

    conv: Conversation
    texts: list[str]
    stamps: list[int | None]
    speakers: list[str]
    provenances: list[dict[str, str]]
    vectors: npt.NDArray[np.float32]
    embedder: Embedder

    @property
    def questions(self) -> list[str]:
        return [qa.question for qa in self.conv.qas]

    def build(self, controller: Any | None) -> Memory:
        m = Memory(self.embedder, controller=controller)
        m.add_batch(
            self.texts,
            timestamps=self.stamps,
            speakers=self.speakers,
            provenances=self.provenances,
            embeddings=self.vectors,
        )
        return m


def prepare(convs: Sequence[Conversation], emb: Embedder) -> list[Prepared]:
    out = []
    for conv in convs:
        texts, stamps, speakers, provs = conversation_inputs(conv)
        # what Memory.add_batch embeds when it is given speakers
        vecs = emb.embed([f"{s}: {t}" for s, t in zip(speakers, texts, strict=True)])
        out.append(Prepared(conv, texts, stamps, speakers, provs, vecs, emb))
    return out


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f} ms"


def same(a: SearchResult, b: SearchResult) -> bool:
    """Identical evidence (ids, scores, provenance, paths) and assessment."""
    return a.evidence == b.evidence and all(
        getattr(a, n) == getattr(b, n)
        for n in ("sufficiency", "usefulness", "missing", "contradiction")
    )


@contextmanager
def controller_server(kind: str) -> Iterator[str]:
    """The address of a local controller served over gRPC, in a process or on a thread."""
    if kind == "thread":
        with serve_controller() as server:
            yield server.address
        return
    proc = spawn(["serve-controller", "--grace", "0"])
    try:
        yield announced(proc, "serve-controller")
    finally:
        proc.terminate()
        proc.wait(10)


def spawn(args: Sequence[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "jevmem", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )


def announced(proc: subprocess.Popen[str], what: str, timeout_s: float = 60.0) -> str:
    assert proc.stdout is not None
    if not select.select([proc.stdout], [], [], timeout_s)[0]:
        proc.kill()
        raise SystemExit(f"jevmem {what} did not start within {timeout_s:.0f} s")
    return proc.stdout.readline().rsplit(" ", 1)[1].strip()


# ---- 1. single queries, in-process vs remote ---------------------------------------------------


def bench_latency(
    pairs: Sequence[tuple[Prepared, Memory, Memory]], g: GrpcController, per_conv: int | None
) -> dict[str, Any]:
    n_q = sum(len(p.questions[:per_conv]) for p, _, _ in pairs)
    print(f"\n## 1. single searches, in-process vs gRPC loopback ({n_q} questions, k={K})")
    for p, local, remote in pairs:  # warm-up: lazy indexes, the first ONNX run
        local.search(p.questions[0], K)
        remote.search(p.questions[0], K)
    lat_local: list[float] = []
    lat_remote: list[float] = []
    ratios: list[float] = []
    rpcs: list[int] = []
    calls: list[int] = []
    differ: list[str] = []
    seconds0 = dict(g.seconds)
    i = 0
    for p, local, remote in pairs:
        for q in p.questions[:per_conv]:
            r0 = g.counters["rpcs"]
            order = ((local, lat_local), (remote, lat_remote))
            got: dict[int, SearchResult] = {}
            for m, lat in order if i % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                got[id(m)] = m.search(q, K)
                lat.append(time.perf_counter() - t0)
            i += 1
            ratios.append(lat_remote[-1] / lat_local[-1])
            rpcs.append(g.counters["rpcs"] - r0)
            calls.append(int(got[id(remote)].trace["controller_calls"]))
            if not same(got[id(local)], got[id(remote)]):
                differ.append(f"{p.conv.sample_id}: {q}")
    a, b = statistics.median(lat_local), statistics.median(lat_remote)
    spent = {k: (g.seconds[k] - seconds0[k]) / n_q for k in g.seconds}

    def dist(xs: list[float]) -> dict[str, float]:
        return {
            q: 1e3 * (percentile(xs, v) or 0.0)
            for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
        }

    out: dict[str, Any] = {
        "questions": n_q,
        "in_process_ms": dist(lat_local),
        "grpc_ms": dist(lat_remote),
        "ratio_of_p50": b / a,
        "median_per_query_ratio": statistics.median(ratios),
        "rpcs_per_query": statistics.fmean(rpcs),
        "controller_calls_per_query": statistics.fmean(calls),
        "client_ms_per_query": {k: v * 1e3 for k, v in spent.items()},
        "identical_evidence": n_q - len(differ),
        "different": differ[:10],
    }
    print(
        f"p50 per query: in-process {ms(a)}, gRPC {ms(b)}: ratio {b / a:.2f}x "
        f"(median of per-query ratios {out['median_per_query_ratio']:.2f}x; target <= 2x)"
    )
    print(
        f"p90 / p99: in-process {out['in_process_ms']['p90']:.2f} / "
        f"{out['in_process_ms']['p99']:.2f} ms, gRPC {out['grpc_ms']['p90']:.2f} / "
        f"{out['grpc_ms']['p99']:.2f} ms"
    )
    print(
        f"RPCs per query {out['rpcs_per_query']:.2f} (= controller calls per query "
        f"{out['controller_calls_per_query']:.2f}); client side per query: building requests "
        f"{spent['encode'] * 1e3:.2f} ms, RPCs {spent['call'] * 1e3:.2f} ms, reading answers "
        f"{spent['decode'] * 1e3:.2f} ms"
    )
    print(f"identical evidence in-process and remote: {n_q - len(differ)}/{n_q}")
    for d in differ[:10]:
        print(f"  differs: {d}")
    return out


# ---- 2. search_batch vs loops ------------------------------------------------------------------


def batch_of(p: Prepared, size: int) -> list[str]:
    qs = p.questions
    return [qs[i % len(qs)] for i in range(size)]


class Tally:
    """Wall time, queries and RPCs per way of running them."""

    def __init__(self, g: GrpcController) -> None:
        self.g = g
        names = ("remote_batch", "remote_batch_unary", "remote_loop", "local_loop", "local_batch")
        self.wall = dict.fromkeys(names, 0.0)
        self.done = dict.fromkeys(names, 0)
        self.rpcs = dict.fromkeys(names, 0)

    def run(self, name: str, m: Memory, qs: list[str], *, batch: bool) -> None:
        g = m.controller if isinstance(m.controller, GrpcController) else self.g
        r0 = g.counters["rpcs"]
        t0 = time.perf_counter()
        if batch:
            m.search_batch(qs, K)
        else:
            for q in qs:
                m.search(q, K)
        self.wall[name] += time.perf_counter() - t0
        self.done[name] += len(qs)
        self.rpcs[name] += g.counters["rpcs"] - r0


def bench_batches(
    pairs: Sequence[tuple[Prepared, Memory, Memory]], g: GrpcController, unary: GrpcController
) -> dict[str, Any]:
    print(
        "\n## 2. search_batch vs loops of single searches "
        f"(one batch per conversation and size, k={K})"
    )
    out: dict[str, Any] = {}
    for size in SIZES:
        t = Tally(g)
        for p, local, remote in pairs:
            qs = batch_of(p, size)
            # each batch runs before and after the loops (mirrored), and the two
            # loops alternate query by query, so load drift hits all four alike
            t.run("remote_batch", remote, qs, batch=True)
            t.run("local_batch", local, qs, batch=True)
            remote.controller = unary
            t.run("remote_batch_unary", remote, qs, batch=True)
            remote.controller = g
            for i, q in enumerate(qs):
                loops = [("remote_loop", remote), ("local_loop", local)]
                for name, m in loops if i % 2 == 0 else loops[::-1]:
                    t.run(name, m, [q], batch=False)
            remote.controller = unary
            t.run("remote_batch_unary", remote, qs, batch=True)
            remote.controller = g
            t.run("local_batch", local, qs, batch=True)
            t.run("remote_batch", remote, qs, batch=True)
        n = len(pairs) * size
        qps = {k: t.done[k] / t.wall[k] for k in t.wall}
        row = {
            "queries_per_mode": dict(t.done),
            "batches": 2 * len(pairs),
            "qps": qps,
            "rpcs_per_batch": t.rpcs["remote_batch"] / (2 * len(pairs)),
            "rpcs_per_batch_unary": t.rpcs["remote_batch_unary"] / (2 * len(pairs)),
            "rpcs_per_loop": t.rpcs["remote_loop"] / len(pairs),
            "batch_vs_remote_loop": qps["remote_batch"] / qps["remote_loop"],
            "batch_vs_local_loop": qps["remote_batch"] / qps["local_loop"],
            "unary_batch_vs_local_loop": qps["remote_batch_unary"] / qps["local_loop"],
            "streamed_vs_unary_batch": qps["remote_batch"] / qps["remote_batch_unary"],
            "local_batch_vs_local_loop": qps["local_batch"] / qps["local_loop"],
        }
        out[str(size)] = row
        print(
            f"{size:4d} per batch ({2 * len(pairs)} batches, {n} looped): remote search_batch "
            f"{qps['remote_batch']:6.1f} q/s streamed ({row['rpcs_per_batch']:.1f} RPCs a batch), "
            f"{qps['remote_batch_unary']:6.1f} q/s unary "
            f"({row['rpcs_per_batch_unary']:.1f} RPCs a batch), "
            f"remote loop {qps['remote_loop']:6.1f} q/s ({row['rpcs_per_loop']:.0f} RPCs per "
            f"{size}), in-process loop {qps['local_loop']:6.1f} q/s, in-process search_batch "
            f"{qps['local_batch']:6.1f} q/s"
        )
        print(
            f"      remote batch / remote loop {row['batch_vs_remote_loop']:.2f}x (target >= 3x), "
            f"remote batch / in-process loop {row['batch_vs_local_loop']:.2f}x (target >= 1x; "
            f"unary {row['unary_batch_vs_local_loop']:.2f}x), streamed / unary "
            f"{row['streamed_vs_unary_batch']:.2f}x, "
            f"in-process batch / in-process loop {row['local_batch_vs_local_loop']:.2f}x"
        )
    return out


# ---- where the remote time goes -------------------------------------------------------------


class Recorder:
    """The local controller, keeping every ``decide`` call's requests."""

    name = "local"

    def __init__(self) -> None:
        self.inner = LocalController()
        self.calls: list[list[DecisionRequest]] = []

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        self.calls.append(list(requests))
        return self.inner.decide(requests)


def stage_costs(calls: Sequence[list[DecisionRequest]], repeat: int = 3) -> dict[str, float]:
    """Seconds per stage of sending ``calls`` through the wire form (best of ``repeat``)."""
    ctrl = LocalController()
    total: dict[str, float] = {}
    for requests in calls:
        best: dict[str, float] = {}
        for _ in range(repeat):
            t: dict[str, float] = {}
            t0 = time.perf_counter()
            msg = requests_to_proto(requests)
            t1 = time.perf_counter()
            wire = msg.SerializeToString()
            t2 = time.perf_counter()
            got = requests_from_proto(cpb.DecideRequest.FromString(wire))
            t3 = time.perf_counter()
            answers = ctrl.decide(got)
            t4 = time.perf_counter()
            validate_answers(got, answers)
            back = answers_to_proto(got, answers, "local").SerializeToString()
            t5 = time.perf_counter()
            decoded = answers_from_proto(cpb.DecideResponse.FromString(back), requests)
            validate_answers(requests, decoded)
            t6 = time.perf_counter()
            t["client: build request"] = t1 - t0
            t["serialize request"] = t2 - t1
            t["server: decode request"] = t3 - t2
            t["controller decide (also paid in-process)"] = t4 - t3
            t["server: check + encode answers"] = t5 - t4
            t["client: read + check answers"] = t6 - t5
            t["request bytes"] = float(len(wire))
            t["answer bytes"] = float(len(back))
            for k, v in t.items():
                best[k] = min(best.get(k, v), v)
        for k, v in best.items():
            total[k] = total.get(k, 0.0) + v
    return total


def bench_breakdown(
    pairs: Sequence[tuple[Prepared, Memory, Memory]], address: str
) -> dict[str, Any]:
    """Replay the controller calls of single searches and of one 256-batch, stage by stage."""
    p, local, _ = max(pairs, key=lambda x: len(x[0].texts))
    print(
        f"\n## where the remote time goes ({p.conv.sample_id}, {len(p.texts)} turns; "
        "best of 3 per stage, replayed in this process)"
    )
    saved = local.controller
    out: dict[str, Any] = {}
    try:
        singles = p.questions[:64]
        rec = Recorder()
        local.controller = rec
        for q in singles:
            local.search(q, K)
        out["single"] = stage_costs(rec.calls)
        out["single"]["queries"] = len(singles)
        out["single"]["rpcs"] = len(rec.calls)
        rec = Recorder()
        local.controller = rec
        local.search_batch(batch_of(p, 256), K)
        out["batch_256"] = stage_costs(rec.calls)
        out["batch_256"]["queries"] = 256
        out["batch_256"]["rpcs"] = len(rec.calls)
    finally:
        local.controller = saved
    # the fixed cost of one RPC: a routing-only Decide (4 questions, ~0.3 KB)
    small = requests_to_proto(
        [DecisionRequest("routing", {"query": {"text": "when?"}}, catalogue.routing_questions())]
    )
    with grpc.insecure_channel(address) as ch:
        stub = cpb_grpc.SystemOneStub(ch)
        lat = []
        for i in range(330):
            t0 = time.perf_counter()
            stub.Decide(small, timeout=5)
            if i >= 30:
                lat.append(time.perf_counter() - t0)
    rtt = statistics.median(lat)
    out["small_rpc_s"] = rtt
    rows = [
        k for k in out["single"] if k not in ("queries", "rpcs", "request bytes", "answer bytes")
    ]
    print("| stage, per query | single searches | search_batch of 256 |")
    print("|---|---:|---:|")
    for k in rows:
        a = out["single"][k] / out["single"]["queries"]
        b = out["batch_256"][k] / out["batch_256"]["queries"]
        print(f"| {k} | {a * 1e3:.3f} ms | {b * 1e3:.3f} ms |")
    for k in ("request bytes", "answer bytes"):
        a = out["single"][k] / out["single"]["queries"]
        b = out["batch_256"][k] / out["batch_256"]["queries"]
        print(f"| {k} | {a / 1e3:.1f} KB | {b / 1e3:.1f} KB |")
    rq = out["single"]["rpcs"] / out["single"]["queries"]
    rb = out["batch_256"]["rpcs"] / out["batch_256"]["queries"]
    print(
        f"| RPCs per query x {rtt * 1e3:.3f} ms (a routing-only Decide round trip, p50) | "
        f"{rq:.2f} x = {rq * rtt * 1e3:.3f} ms | {rb:.3f} x = {rb * rtt * 1e3:.3f} ms |"
    )
    return out


# ---- 3. jevmem serve under load ----------------------------------------------------------------


def _load_level(
    c: MemoryClient, work: Sequence[tuple[str, str]], inflight: int, seconds: float
) -> dict[str, Any]:
    """``inflight`` callers searching round-robin for ``seconds``: ok/s, latency, outcomes."""
    lat: list[float] = []
    codes: dict[str, int] = {}
    stop = time.perf_counter() + seconds

    def worker(wid: int) -> None:
        i = wid
        while time.perf_counter() < stop:
            name, q = work[i % len(work)]
            t0 = time.perf_counter()
            try:
                c.search(name, q, K)
                lat.append(time.perf_counter() - t0)
                codes["OK"] = codes.get("OK", 0) + 1
            except grpc.RpcError as exc:
                code = exc.code().name if isinstance(exc, grpc.Call) else "ERROR"
                codes[code] = codes.get(code, 0) + 1
                if code == "RESOURCE_EXHAUSTED":
                    time.sleep(0.005)  # a shed client backs off a little
            i += inflight

    t0 = time.perf_counter()
    with ThreadPoolExecutor(inflight) as pool:
        list(pool.map(worker, range(inflight)))
    wall = time.perf_counter() - t0
    p50, p99 = percentile(lat, 0.5), percentile(lat, 0.99)
    return {
        "ok_per_s": codes.get("OK", 0) / wall,
        "p50_ms": None if p50 is None else p50 * 1e3,
        "p99_ms": None if p99 is None else p99 * 1e3,
        "outcomes": codes,
    }


def bench_service(preps: Sequence[Prepared], seconds: float) -> dict[str, Any]:
    """Two ``jevmem serve`` processes, the same memories in each: one runs the
    Search calls that wait for a memory together (the default), the other
    each alone (``--max-search-batch 1``); every load level runs on both,
    one after the other, alternating which goes first."""
    cap = 32
    n_turns = sum(len(p.texts) for p in preps)
    print(
        f"\n## 3. jevmem serve load test ({len(preps)} memories, {n_turns} turns, default "
        f"embedder in the server; cap {cap} in flight, {seconds:.0f} s per level and server)"
    )
    flags = ["--embedder", "default", "--max-concurrent", str(cap), "--max-workers", str(cap)]
    servers = {
        name: spawn(["serve", *flags, "--grace", "0", "--max-search-batch", batch])
        for name, batch in (("batched", "256"), ("alone", "1"))
    }
    out: dict[str, Any] = {"batched": {}, "alone": {}}
    try:
        clients = {
            name: MemoryClient(announced(proc, "serve"), timeout_s=120)
            for name, proc in servers.items()
        }
        work = [
            (p.conv.sample_id, q)
            for qs in zip(*[p.questions for p in preps], strict=False)
            for p, q in zip(preps, qs, strict=True)
        ]
        for name, c in clients.items():
            t0 = time.perf_counter()
            for p in preps:
                obs = [
                    c.observation(t, timestamp=s, speaker=sp, provenance=pv)
                    for t, s, sp, pv in zip(
                        p.texts, p.stamps, p.speakers, p.provenances, strict=True
                    )
                ]
                c.add_batch(p.conv.sample_id, obs)
            print(f"built over the service ({name}) in {time.perf_counter() - t0:.1f} s")
            for m, q in work[: len(preps)]:
                c.search(m, q, K)  # warm-up
        for level, inflight in enumerate((1, 8, 32, 64)):
            order = ["batched", "alone"] if level % 2 == 0 else ["alone", "batched"]
            for name in order:
                out[name][str(inflight)] = _load_level(clients[name], work, inflight, seconds)
            tag = " (2x overload)" if inflight == 2 * cap else ""
            for name in ("batched", "alone"):
                row = out[name][str(inflight)]
                p50, p99 = row["p50_ms"], row["p99_ms"]
                print(
                    f"{inflight:3d} in flight{tag}, {name:7s}: {row['ok_per_s']:7.1f} ok/s, "
                    f"p50 {ms(None if p50 is None else p50 / 1e3)}, "
                    f"p99 {ms(None if p99 is None else p99 / 1e3)}, outcomes {row['outcomes']}"
                )
            ratio = out["batched"][str(inflight)]["ok_per_s"] / max(
                out["alone"][str(inflight)]["ok_per_s"], 1e-9
            )
            out.setdefault("batched_vs_alone", {})[str(inflight)] = ratio
            print(f"      batched / alone: {ratio:.2f}x ok/s")
        for c in clients.values():
            c.close()
    finally:
        for proc in servers.values():
            proc.terminate()
            proc.wait(10)
    return out


# ---- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=default_data_path())
    ap.add_argument("--server", choices=("process", "thread"), default="process")
    ap.add_argument("--queries", type=int, default=None, help="part 1: per conversation")
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=3.0, help="part 3: per load level")
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    ap.add_argument("--skip-service", action="store_true", help="skip part 3")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--quick", action="store_true", help="one conversation, few queries")
    args = ap.parse_args(argv)
    if args.quick:
        args.limit_conversations, args.queries, args.seconds = 1, 24, 1.0
    start_load = load_average()
    convs, _ = load(args.data)
    convs = convs[: args.limit_conversations]
    emb = jevmem.default_embedder(threads=args.threads, warn=False)
    if isinstance(emb, HashEmbedder):
        raise SystemExit("the default embedder (ONNX) is not installed: pip install 'jevmem[onnx]'")
    print(
        f"# bench_grpc: {machine()}, grpcio {grpc.__version__}; load {start_load}\n"
        f"# {args.data.name}: {len(convs)} conversations, "
        f"{sum(len(c.turns) for c in convs)} turns, {sum(len(c.qas) for c in convs)} questions; "
        f"embedder {emb!r}; controller server: {args.server}"
    )
    t0 = time.perf_counter()
    preps = prepare(convs, emb)
    log(f"embedded the turns once in {time.perf_counter() - t0:.1f} s")
    result: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", *map(shlex.quote, sys.argv)]),
        "machine": machine(),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "server": args.server,
        "load_start": start_load,
    }
    with (
        controller_server(args.server) as address,
        GrpcController(address, use_fallback=False, timeout_s=30.0, call_budget_s=60.0) as g,
        GrpcController(
            address, use_fallback=False, timeout_s=30.0, call_budget_s=60.0, stream=False
        ) as unary,
    ):
        g.wait_ready(30.0)
        unary.wait_ready(30.0)
        t_local = t_remote = 0.0
        pairs = []
        for p in preps:
            t0 = time.perf_counter()
            local = p.build(None)
            t_local += time.perf_counter() - t0
            r0 = g.counters["rpcs"]
            t0 = time.perf_counter()
            remote = p.build(g)
            t_remote += time.perf_counter() - t0
            assert g.counters["rpcs"] - r0 == remote.calls["write"]
            pairs.append((p, local, remote))
        write_rpcs = sum(r.calls["write"] for _, _, r in pairs)
        print(
            f"build from the shared vectors: in-process {t_local:.2f} s, remote controller "
            f"{t_remote:.2f} s ({write_rpcs} RPCs, one per add_batch phase)"
        )
        result["build_s"] = {"in_process": t_local, "remote": t_remote, "rpcs": write_rpcs}
        result["latency"] = bench_latency(pairs, g, args.queries)
        result["batches"] = bench_batches(pairs, g, unary)
        result["breakdown"] = bench_breakdown(pairs, address)
        if g.counters["fallbacks"] or g.counters["retries"]:
            print(f"!! fallbacks {g.counters['fallbacks']}, retries {g.counters['retries']}")
        result["controller_counters"] = dict(g.counters)
        result["controller_counters_unary"] = dict(unary.counters)
    if not args.skip_service:
        result["service"] = bench_service(preps, args.seconds)
    result["load_end"] = load_average()
    print(f"\n# load average at start {start_load}, at end {result['load_end']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

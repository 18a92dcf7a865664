"""LoCoMo retrieval harness: evidence recall, abstention AUROC, build and query cost.

One memory per conversation, one node per turn (text = the turn text, plus
``" [image: <caption>]"`` when it shares a photo; speaker; timestamp = the
session's date-time plus a few seconds per turn index; provenance
``{"dia_id", "session", "speaker", "sample_id"}``). Every question is then
searched once per mode at k = 20, the modes interleaved on the same memories;
recall@5/@10 are read from the prefix of that list.

Metrics, per category 1..5 and pooled over 1-4 (``overall_1_4``):
recall@5/@10/@20 (mean fraction of gold dia_ids in the top k; questions
without gold evidence are not scored), all-evidence@10, any-evidence@10;
``abstain_auroc`` = AUROC of (1 - sufficiency) separating adversarial (5)
from answerable (1-4) questions, i.e. P(sufficiency of an answerable question
> that of an adversarial one), ties half (null when the mode has no
controller); ``query_p50_ms``/``query_p99_ms`` per ``search`` call, query
embedding included (after one untimed warm-up search per mode and memory);
``build_s`` (``add_batch`` with the memory embedding the texts itself),
``embed_s`` and ``build_s_no_embed`` (texts embedded first, then
``add_batch(..., embeddings=)``; null when the backend has no such argument);
controller calls per write and per query.

    .venv/bin/python bench/locomo_retrieval.py --data FILE [--json OUT]
        [--backend memory|baseline] [--embedder onnx|hash]
        [--modes lexical,anchors,traversal,full] [--limit-conversations N]

``--backend memory`` (default) uses ``jevmem.Memory``; ``--backend baseline``
a stand-in with the same interface on ``jevmem.MemoryStore`` alone (modes
``lexical`` = BM25, ``anchors`` = RRF of BM25 and vector; no controller).
"""

from __future__ import annotations

import argparse
import inspect
import json
import shlex
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from _common import CachedEmbedder, default_data_path, machine

import jevmem
from jevmem.embed import Embedder, HashEmbedder
from jevmem.evaluation import (
    ADVERSARIAL,
    ANSWERABLE,
    CATEGORIES,
    RESTYLES,
    UPDATE_ABILITIES,
    aggregate,
    auroc,
    conversation_inputs,
    interleaved,
    load_samples,
    merged,
    percentile,
    update_order,
    update_pairs_linked,
    windows,
)

ALL_MODES = ("lexical", "anchors", "traversal", "full", "full_hand")
#: harness modes that run Memory's "full" mode: with the memory's default
#: controller, and with the hand-written LocalController, side by side
CONTROLLER_MODES = {"full": "default", "full_hand": "hand"}
#: BEAM holds one 349 KB turn (a generation loop in the source data)
MAX_TEXT_BYTES = 4 * 1024 * 1024
KS = (5, 10, 20)


# --- the interface the harness codes against ----------------------------------------------------


class SearchResultLike(Protocol):
    @property
    def evidence(self) -> Sequence[Any]: ...
    @property
    def trace(self) -> dict[str, Any]: ...
    @property
    def sufficiency(self) -> float | None: ...


class MemoryLike(Protocol):
    def add_batch(
        self,
        texts: Sequence[str],
        *,
        timestamps: Sequence[int | None] | None = ...,
        speakers: Sequence[str] | None = ...,
        provenances: Sequence[dict[str, str]] | None = ...,
    ) -> list[int]: ...
    def search(self, query: str, k: int = ..., mode: str = ...) -> SearchResultLike: ...
    def stats(self) -> dict[str, Any]: ...


# --- the baseline stand-in: jevmem.MemoryStore alone ---------------------------------------------


@dataclass(frozen=True)
class BaselineEvidence:
    id: int
    text: str
    score: float
    timestamp: int | None
    provenance: dict[str, str]
    via: None = None


@dataclass(frozen=True)
class BaselineResult:
    evidence: list[BaselineEvidence]
    trace: dict[str, Any] = field(default_factory=dict)
    sufficiency: float | None = None


class BaselineMemory:
    """``jevmem.Memory``'s interface on a bare :class:`jevmem.MemoryStore`, no controller.

    ``lexical``: BM25 (``search_lexical``); ``anchors``: reciprocal rank fusion of
    BM25 and cosine (``fused_anchors``). No traversal, no write-time relations.
    """

    modes = ("lexical", "anchors")

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.store = jevmem.MemoryStore(embedder.dim)

    def add_batch(
        self,
        texts: Sequence[str],
        *,
        timestamps: Sequence[int | None] | None = None,
        speakers: Sequence[str] | None = None,
        provenances: Sequence[dict[str, str]] | None = None,
        embeddings: npt.NDArray[np.float32] | None = None,
    ) -> list[int]:
        vecs = self.embedder.embed(texts) if embeddings is None else embeddings
        provs = [dict(p) for p in (provenances or [{} for _ in texts])]
        if speakers is not None:
            for p, s in zip(provs, speakers, strict=True):
                p.setdefault("speaker", s)
        return self.store.add_batch(texts, vecs, timestamps=timestamps, provenances=provs)

    def search(self, query: str, k: int = 20, mode: str = "anchors") -> BaselineResult:
        if mode == "lexical":
            ids, scores = self.store.search_lexical(query, k)
            pairs = list(zip(ids.tolist(), scores.tolist(), strict=True))
        elif mode == "anchors":
            vec = self.embedder.embed_one(query)
            fid, fscores = self.store.fused_anchors(query, vec, k)
            pairs = list(zip(fid.tolist(), fscores.tolist(), strict=True))
        else:
            raise ValueError(f"baseline backend has no mode {mode!r}; it has {self.modes}")
        out = []
        for i, s in pairs:
            node = self.store.get(int(i))
            out.append(BaselineEvidence(node.id, node.text, s, node.timestamp, node.provenance))
        return BaselineResult(out, {"controller_calls": 0, "stop_reason": None}, None)

    def stats(self) -> dict[str, Any]:
        return {**self.store.stats(), "controller_calls_write": 0}


# --- running -------------------------------------------------------------------------------------


def make_embedder(kind: str, threads: int) -> Embedder:
    if kind == "hash":
        return HashEmbedder(256)
    emb = jevmem.default_embedder(threads=threads, warn=False)
    if isinstance(emb, HashEmbedder):
        raise SystemExit(
            "--embedder onnx: the ONNX stack is not installed (pip install 'jevmem[onnx]')"
        )
    return emb


class TimedController:
    """A controller (the memory's default unless given), with the time of
    each read-path call recorded by round kind: the anchor round (routing +
    scoring the pool), expansion scoring rounds (at most beam-width
    candidates) and assessments."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner if inner is not None else jevmem.default_controller()
        self.name = getattr(self.inner, "name", "custom")
        self.rounds: list[tuple[str, int, float]] = []  # (kind, candidates, seconds)

    def decide(self, requests: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
        t0 = time.perf_counter()
        out = self.inner.decide(requests)
        dt = time.perf_counter() - t0
        purposes = {r.purpose for r in requests}
        if purposes & {"routing", "scoring", "assessment"}:
            n = sum(len(r.state.get("candidates", ())) for r in requests if r.purpose == "scoring")
            kind = "anchor" if "routing" in purposes else "scoring" if n else "assessment"
            self.rounds.append((kind, n, dt))
        return out


def make_memory(backend: str, emb: Embedder, controller: Any = None) -> Any:
    if backend == "baseline":
        return BaselineMemory(emb)
    cls = getattr(jevmem, "Memory", None)
    if cls is None:
        raise SystemExit(
            "jevmem.Memory is not available in this build of jevmem (the high-level Memory API "
            "is missing); run with --backend baseline for the MemoryStore-only stand-in"
        )
    # the harness admits whole turns of any length the memory allows
    store = jevmem.MemoryStore(emb.dim, max_text_bytes=MAX_TEXT_BYTES)
    return cls(embedder=emb, controller=controller, store=store)


def accepts_embeddings(mem: Any) -> bool:
    try:
        return "embeddings" in inspect.signature(mem.add_batch).parameters
    except (TypeError, ValueError):
        return False


@dataclass
class ModeRecords:
    rows: dict[int, list[tuple[list[str | None], tuple[str, ...]]]] = field(
        default_factory=lambda: {c: [] for c in CATEGORIES}
    )
    suff: dict[int, list[float]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    suff_missing: int = 0
    latency_s: list[float] = field(default_factory=list)
    controller_calls: list[float] = field(default_factory=list)
    stop_reasons: dict[str, int] = field(default_factory=dict)
    #: per ability label (BEAM's beam_type): (rows, sufficiencies)
    per_ability: dict[str, tuple[list[Any], list[float]]] = field(default_factory=dict)
    #: per conversation: (rows of categories 1-4, answerable sufficiencies, adversarial ones)
    per_conversation: dict[str, tuple[list[Any], list[float], list[float]]] = field(
        default_factory=dict
    )


def dia_ids(res: Any) -> list[str | None]:
    out: list[str | None] = []
    for item in res.evidence:
        prov = getattr(item, "provenance", None) or {}
        out.append(prov.get("dia_id"))
    return out


def search(mem: Any, question: str, k: int, mode: str, hand: Any) -> Any:
    """One search in a harness mode: ``full_hand`` is Memory's full mode with
    the hand-written controller in place of the memory's own."""
    if mode != "full_hand":
        return mem.search(question, k=k, mode=mode)
    own = mem.controller
    mem.controller = hand
    try:
        return mem.search(question, k=k, mode="full")
    finally:
        mem.controller = own


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    samples = json.loads(args.data.read_text())
    if args.limit_conversations is not None:
        samples = samples[: args.limit_conversations]
    convs, report = load_samples(samples)  # the drop report covers the conversations run
    if args.merge > 1:
        convs = merged(convs, args.merge)
    if args.interleave > 1:
        convs = interleaved(convs, args.interleave, threads_apart=args.threads_apart)
    if args.window is not None:
        convs = [w for c in convs for w in windows(c, args.window)]
    convs = [RESTYLES[args.style](c) for c in convs]
    emb = make_embedder(args.embedder, args.threads)
    modes: list[str] = args.modes or (
        list(BaselineMemory.modes) if args.backend == "baseline" else list(ALL_MODES)
    )
    probe = make_memory(args.backend, emb)
    have = getattr(probe, "modes", None)
    if have is not None and (bad := [m for m in modes if m not in have]):
        raise SystemExit(f"backend {args.backend!r} has no mode(s) {bad}; it has {list(have)}")
    split_timing = accepts_embeddings(probe) and not args.no_embed_split
    cache = None
    if args.embedding_cache is not None and args.backend == "memory":
        cache = CachedEmbedder(emb, args.embedding_cache)
        split_timing = False
    del probe
    kmax = max(KS)
    n_q = sum(len(c.qas[: args.limit_questions or None]) for c in convs)
    log(
        f"{args.data.name}: {len(convs)} conversations, {sum(len(c.turns) for c in convs)} "
        f"turns, {n_q} questions; backend={args.backend} embedder={emb!r} modes={modes}"
    )
    log(report.summary())

    recs = {m: ModeRecords() for m in modes}
    timed = TimedController() if args.backend != "baseline" else None
    hand = TimedController(jevmem.LocalController()) if "full_hand" in modes else None
    build_s = 0.0
    embed_s = 0.0
    build_no_embed_s = 0.0
    writes = 0
    write_calls = 0.0
    done_q = 0
    per_question: list[dict[str, Any]] | None = [] if args.per_question else None
    link_count = 0
    update_pairs: dict[str, tuple[int, int]] = {}
    for ci, conv in enumerate(convs, 1):
        texts, ts, spk, provs = conversation_inputs(conv, speaker_in_text=args.speaker_in_text)
        if split_timing:
            t0 = time.perf_counter()
            vecs = emb.embed(texts)
            embed_s += time.perf_counter() - t0
            other = make_memory(args.backend, emb)
            t0 = time.perf_counter()
            other.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs, embeddings=vecs)
            build_no_embed_s += time.perf_counter() - t0
            del other
        mem = make_memory(args.backend, emb, timed)
        if cache is not None:
            # a development run: the build reads its rows from the cache
            # (build_s then excludes embedding); queries use the real embedder
            mem.embedder = cache
        t0 = time.perf_counter()
        ids = mem.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
        dt = time.perf_counter() - t0
        if cache is not None:
            cache.flush()
            mem.embedder = emb
        build_s += dt
        if len(ids) != len(texts):
            raise SystemExit(f"add_batch returned {len(ids)} ids for {len(texts)} texts")
        writes += len(texts)
        write_calls += float(mem.stats().get("controller_calls_write", 0) or 0)
        # windows: a memory per question, so a line every hundred
        if args.window is None or ci % 100 == 0 or ci == len(convs):
            log(
                f"[{ci}/{len(convs)}] {conv.sample_id}: {len(texts)} turns built in {dt:.2f}s; "
                f"{len(conv.qas)} questions"
            )
        qas = conv.qas[: args.limit_questions or None]
        if hasattr(mem, "superseded_by"):
            # the links the build wrote against the changes the questions ask about
            dia_of = {i: p["dia_id"] for i, p in zip(ids, provs, strict=True)}
            links = [(dia_of[x.new], dia_of[x.old]) for x in mem.store.supersedes_links()]
            link_count += len(links)
            for name, (asked, linked) in update_pairs_linked(links, qas).items():
                before = update_pairs.get(name, (0, 0))
                update_pairs[name] = (before[0] + asked, before[1] + linked)
        if qas:
            mark = len(timed.rounds) if timed is not None else 0
            for m in modes:  # warm-up: lazy indexes, caches, the first onnx run
                search(mem, qas[0].question, kmax, m, hand)
            if timed is not None:
                del timed.rounds[mark:]  # the warm-up's rounds are not measured
        for qi, qa in enumerate(qas, 1):
            for m in modes:
                t0 = time.perf_counter()
                res = search(mem, qa.question, kmax, m, hand)
                lat = time.perf_counter() - t0
                r = recs[m]
                r.latency_s.append(lat)
                r.rows[qa.category].append((dia_ids(res)[:kmax], qa.evidence))
                if per_question is not None:
                    per_question.append(
                        {
                            "conversation": conv.sample_id,
                            "question": qa.question,
                            "category": qa.category,
                            "mode": m,
                            "retrieved": dia_ids(res)[:kmax],
                            "evidence": list(qa.evidence),
                            # what abstention reads (None outside the full modes)
                            "sufficiency": getattr(res, "sufficiency", None),
                        }
                    )
                mine = r.per_conversation.setdefault(conv.sample_id, ([], [], []))
                if qa.category in ANSWERABLE:
                    mine[0].append((dia_ids(res)[:kmax], qa.evidence))
                trace = getattr(res, "trace", None) or {}
                r.controller_calls.append(float(trace.get("controller_calls", 0) or 0))
                stop = str(trace.get("stop_reason"))
                r.stop_reasons[stop] = r.stop_reasons.get(stop, 0) + 1
                suff = getattr(res, "sufficiency", None)
                if qa.ability is not None:
                    ab = r.per_ability.setdefault(qa.ability, ([], []))
                    ab[0].append((dia_ids(res)[:kmax], qa.evidence))
                    if suff is not None:
                        ab[1].append(float(suff))
                if suff is None:
                    r.suff_missing += 1
                else:
                    r.suff[qa.category].append(float(suff))
                    mine[1 if qa.category in ANSWERABLE else 2].append(float(suff))
            done_q += 1
            if qi % 50 == 0 or (qi == len(qas) and args.window is None):
                log(f"    questions {qi}/{len(qas)} (total {done_q}/{n_q})")

    out_modes: dict[str, Any] = {}
    for m, r in recs.items():
        d: dict[str, Any] = {
            "overall_1_4": aggregate([row for c in ANSWERABLE for row in r.rows[c]], KS)
        }
        for c in CATEGORIES:
            d[str(c)] = aggregate(r.rows[c], KS)
        pos = [s for c in ANSWERABLE for s in r.suff[c]]
        neg = r.suff[ADVERSARIAL]
        d["abstain_auroc"] = auroc(pos, neg) if r.suff_missing == 0 else None
        d["abstain_n"] = {"answerable": len(pos), "adversarial": len(neg)}
        p50, p99 = percentile(r.latency_s, 0.5), percentile(r.latency_s, 0.99)
        d["query_p50_ms"] = None if p50 is None else 1e3 * p50
        d["query_p99_ms"] = None if p99 is None else 1e3 * p99
        d["query_mean_ms"] = 1e3 * statistics.fmean(r.latency_s) if r.latency_s else None
        d["controller_calls_per_query"] = (
            statistics.fmean(r.controller_calls) if r.controller_calls else None
        )
        d["stop_reasons"] = r.stop_reasons
        d["per_conversation"] = {
            cid: {
                "recall@10": aggregate(rows, KS).get("recall@10"),
                "abstain_auroc": auroc(p, n) if p and n else None,
            }
            for cid, (rows, p, n) in r.per_conversation.items()
        }
        # per ability label, where the file has them (BEAM's beam_type)
        d["per_ability"] = {
            name: {
                **aggregate(rows, KS),
                "questions": len(rows),
                "sufficiency_mean": statistics.fmean(sf) if sf else None,
                # a question about a fact that changed: is the fact that
                # holds ranked above the one it replaced?
                **({"update_order": update_order(rows)} if name in UPDATE_ABILITIES else {}),
            }
            for name, (rows, sf) in sorted(r.per_ability.items())
        }
        out_modes[m] = d

    if per_question is not None:
        args.per_question.parent.mkdir(parents=True, exist_ok=True)
        args.per_question.write_text("".join(json.dumps(row) + "\n" for row in per_question))

    rounds: dict[str, Any] = {}
    for kind in ("anchor", "scoring", "assessment"):
        got = [(n, dt) for k, n, dt in (timed.rounds if timed else []) if k == kind]
        if got:
            rounds[kind] = {
                "rounds": len(got),
                "candidates_p50": percentile([float(n) for n, _ in got], 0.5),
                "ms_p50": 1e3 * (percentile([dt for _, dt in got], 0.5) or 0.0),
                "ms_p99": 1e3 * (percentile([dt for _, dt in got], 0.99) or 0.0),
            }
    return {
        "modes": out_modes,
        "controller_round_ms": rounds,
        "build_s": build_s,
        "build_embeddings_cached": cache is not None,
        "embed_s": embed_s if split_timing else None,
        "build_s_no_embed": build_no_embed_s if split_timing else None,
        "controller_calls_per_write": write_calls / writes if writes else None,
        # supersedes links written, and the update questions (BEAM's
        # knowledge_update, contradiction_resolution) two of whose gold
        # turns a link joins
        "supersedes": {
            "links": link_count,
            "update_pairs": {
                name: {"questions": asked, "linked": linked}
                for name, (asked, linked) in sorted(update_pairs.items())
            },
        },
        "dropped": report.as_dict(),
        "dropped_summary": report.summary(),
        "backend": args.backend,
        "speaker_in_text": args.speaker_in_text,
        "style": args.style,
        "merge": args.merge,
        "interleave": args.interleave,
        "threads_apart": args.threads_apart,
        "window": args.window,
        "embedder": repr(emb),
        "data": str(args.data),
        "conversations": len(convs),
        "turns": writes,
        "questions": done_q,
        "ks": list(KS),
        "machine": machine(),
        "command": " ".join([".venv/bin/python", *map(shlex.quote, sys.argv)]),
    }


def fmt(x: object, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"`{result['command']}`", ""]
    lines.append(
        f"backend {result['backend']}, embedder {result['embedder']}, "
        f"speaker in text: {result['speaker_in_text']}, style: {result.get('style', 'turns')}, "
        f"merged: {result.get('merge', 1)} a memory, "
        f"interleaved: {result.get('interleave', 1)} a memory"
        f"{' (threads apart)' if result.get('threads_apart') else ''}, "
        f"window: {result.get('window') or 'none'}, "
        f"{result['conversations']} conversations, {result['turns']} turns, "
        f"{result['questions']} questions; {result['machine']}"
    )
    lines.append("")
    cats = " | ".join(f"R@10 c{c}" for c in CATEGORIES)
    lines.append(f"| mode | {cats} | R@10 1-4 | AUROC | p50 ms |")
    lines.append("|---|" + "---|" * (len(CATEGORIES) + 3))
    for m, d in result["modes"].items():
        by_cat = " | ".join(fmt(d[str(c)]["recall@10"]) for c in CATEGORIES)
        lines.append(
            f"| {m} | {by_cat} | {fmt(d['overall_1_4']['recall@10'])} | "
            f"{fmt(d['abstain_auroc'])} | {fmt(d['query_p50_ms'], 2)} |"
        )
    lines.append("")
    lines.append(
        "| mode (1-4 pooled) | n | R@5 | R@10 | R@20 | all@10 | any@10 | p99 ms | ctrl calls/q |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for m, d in result["modes"].items():
        o = d["overall_1_4"]
        lines.append(
            f"| {m} | {o['n']} | {fmt(o['recall@5'])} | {fmt(o['recall@10'])} | "
            f"{fmt(o['recall@20'])} | {fmt(o['all_evidence@10'])} | {fmt(o['any_evidence@10'])} | "
            f"{fmt(d['query_p99_ms'], 2)} | {fmt(d['controller_calls_per_query'], 2)} |"
        )
    lines.append("")
    lines.append(
        f"build {fmt(result['build_s'], 2)} s (embedding included); embedding alone "
        f"{fmt(result['embed_s'], 2)} s, build with precomputed embeddings "
        f"{fmt(result['build_s_no_embed'], 2)} s; controller calls per write "
        f"{fmt(result['controller_calls_per_write'], 3)}"
    )
    sup = result.get("supersedes") or {}
    if sup.get("links") is not None:
        pairs = sup.get("update_pairs") or {}
        asked = [p for p in pairs.items() if p[1]["questions"]]
        lines.append(
            f"supersedes links {sup['links']} over {result['turns']} nodes"
            + (
                "; update questions with two gold turns joined by a link: "
                + ", ".join(f"{n} {p['linked']}/{p['questions']}" for n, p in asked)
                if asked
                else ""
            )
        )
    full = result["modes"].get("full")
    if full and full.get("per_conversation"):
        lines.append(
            "per conversation (full): "
            + ", ".join(
                f"{cid} R@10 {fmt(v['recall@10'])} AUROC {fmt(v['abstain_auroc'])}"
                for cid, v in full["per_conversation"].items()
            )
        )
    abilities = sorted({a for d in result["modes"].values() for a in d.get("per_ability", {})})
    if abilities:
        lines.append("")
        lines.append("| R@10 by ability | " + " | ".join(result["modes"]) + " |")
        lines.append("|---|" + "---|" * len(result["modes"]))
        for a in abilities:
            cells = []
            for d in result["modes"].values():
                row = d.get("per_ability", {}).get(a, {})
                cell = fmt(row.get("recall@10"))
                if row.get("recall@10") is None and row.get("sufficiency_mean") is not None:
                    cell = f"suff {fmt(row['sufficiency_mean'])}"
                cells.append(cell)
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
        for a in abilities:
            orders = [
                d.get("per_ability", {}).get(a, {}).get("update_order")
                for d in result["modes"].values()
            ]
            if any(orders):
                lines.append(
                    f"| {a}: newest gold turn above the oldest | "
                    + " | ".join(
                        f"{o['newest_first']}/{o['questions']}" if o else "-" for o in orders
                    )
                    + " |"
                )
        lines.append("")
    for kind, r in result.get("controller_round_ms", {}).items():
        lines.append(
            f"controller time, {kind} rounds (full mode): p50 {fmt(r['ms_p50'], 3)} ms, "
            f"p99 {fmt(r['ms_p99'], 3)} ms over {r['rounds']} rounds, "
            f"{fmt(r['candidates_p50'], 0)} candidates (p50)"
        )
    lines.append("")
    lines.append(result["dropped_summary"])
    for issue in result["dropped"]["issues"]:
        fixed = f" -> {issue['result']}" if issue["result"] else ""
        lines.append(
            f"- {issue['reason']}: {issue['raw']!r}{fixed} ({issue['sample_id']}: "
            f"{issue['question']})"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=default_data_path())
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--backend", choices=("memory", "baseline"), default="memory")
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    ap.add_argument(
        "--modes",
        type=lambda s: [m.strip() for m in s.split(",") if m.strip()],
        default=None,
        help="comma-separated, from lexical,anchors,traversal,full (default: all the backend has)",
    )
    ap.add_argument(
        "--per-question",
        type=Path,
        default=None,
        help="write every question's retrieved ids, per mode, here (JSON lines; for diffs)",
    )
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--limit-questions", type=int, default=None, help="per conversation")
    ap.add_argument(
        "--speaker-in-text",
        action="store_true",
        help='node text "<speaker>: <turn text>" instead of the bare turn text (experiment)',
    )
    ap.add_argument(
        "--style",
        choices=tuple(RESTYLES),
        default="turns",
        help="turns: one node per turn; messages: each turn a burst of short messages "
        "(jevmem.evaluation.as_messages); blocks: a session's turns packed into long "
        "observations (as_blocks); notes: each turn a speakerless note (as_notes); pages: "
        "blocks of up to 4,000 characters (as_pages); untimed: the turns without their "
        "times (as_untimed); texting: messages lower-cased, without final punctuation, common "
        "words shortened (as_texting); stream: each turn with a time of its own and no "
        "session, as a messaging app exports a chat (as_stream); stream_late: the same with "
        "every session started at 23:55 UTC, so that each runs past midnight: styles neither "
        "development set has",
    )
    ap.add_argument(
        "--merge",
        type=int,
        default=1,
        metavar="N",
        help="join each N consecutive conversations into one memory (jevmem.evaluation."
        "merged; before --style): a log N times as long as the file's, with every "
        "conversation's questions",
    )
    ap.add_argument(
        "--interleave",
        type=int,
        default=1,
        metavar="N",
        help="hold each N consecutive conversations as one group chat (jevmem.evaluation."
        "interleaved; before --style): their k-th sessions as one, their turns taking turns, "
        "so that the turn before a node is often another pair's",
    )
    ap.add_argument(
        "--threads-apart",
        action="store_true",
        help="with --interleave: each conversation's turns keep a session of their own "
        "(a chat app that keeps threads apart), on one timeline",
    )
    ap.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="N",
        help="one memory per question: N consecutive turns that hold its evidence "
        "(jevmem.evaluation.windows; after --merge, before --style): young memories, "
        "where the development sets' are hundreds of turns long",
    )
    ap.add_argument(
        "--no-embed-split",
        action="store_true",
        help="skip the second build with precomputed embeddings (build_s_no_embed = null)",
    )
    ap.add_argument(
        "--embedding-cache",
        type=Path,
        default=None,
        help="keep the build's embeddings in this folder and reuse them (development runs; "
        "build_s then excludes embedding, queries still embed)",
    )
    args = ap.parse_args(argv)
    if args.merge < 1:
        ap.error("--merge must be >= 1")
    if args.interleave < 1:
        ap.error("--interleave must be >= 1")
    if args.threads_apart and args.interleave < 2:
        ap.error("--threads-apart needs --interleave N (N >= 2)")
    if args.merge > 1 and args.interleave > 1:
        ap.error("--merge and --interleave do not go together")
    if args.window is not None and args.window < 1:
        ap.error("--window must be >= 1")
    for m in args.modes or []:
        if m not in ALL_MODES:
            ap.error(f"unknown mode {m!r}; expected some of {','.join(ALL_MODES)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(markdown(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""LoCoMo answer accuracy: every question answered through ``Memory.answer``, judged by an LLM.

One memory per conversation, built as ``locomo_retrieval.py`` builds it (one
node per turn, speaker, session time + a few seconds per turn, provenance
``dia_id``/``session``/``speaker``/``sample_id``). Each question is then
answered by up to three systems through the same model and prompt
(`jevmem.answering.DEFAULT_ANSWER_PROMPT`):

* ``jevmem``: ``Memory.answer`` (full mode, top ``--k``, abstention on);
* ``topk``: plain top-K retrieval, the fused BM25 + vector anchors
  (``mode="anchors"``, no traversal, no abstention), same pack and prompt;
* ``full_context``: the whole conversation in the prompt (every turn, in
  order, in the same pack layout), no retrieval.

A judge model (``--judge-*``, default: the answering endpoint) grades each
answer against the gold answer with our own prompt (`JUDGE_PROMPT`);
adversarial questions (category 5) count as right only when the answer
declines. Reported per system: judge accuracy per category, over all
questions and over 1-4; token F1 against the gold answers (1-4,
SQuAD-style normalisation); abstention rate; answer and judge tokens per
question; latency per question (search + pack + generation, the judge
excluded); the memory build time.

Resumable: every judged question is appended to ``--out`` (JSONL, flushed
and fsynced per line) under a fingerprint of the settings that change
answers (models, prompts, k, abstention, embedder); a restart with the same
settings skips what is there, and a crash loses only the questions in
flight. The report reads the file, so it always covers everything judged.

    .venv/bin/python bench/locomo_qa.py --data FILE --out bench/out/locomo_qa.jsonl \\
        [--base-url URL --model M] [--judge-base-url URL --judge-model M]
        [--systems jevmem,topk,full_context] [--k 10] [--concurrency 8]
        [--embedder onnx|hash] [--limit-conversations N] [--limit-questions N]

The endpoint settings default to JEVMEM_S2_BASE_URL / JEVMEM_S2_MODEL /
JEVMEM_S2_API_KEY (then OPENAI_*); ``--api-key-env`` / ``--judge-api-key-env``
name other variables to read keys from (keys are never taken on the command
line).

With ``--concurrency 1`` the jevmem rows call ``Memory.answer`` itself;
above it they run the same steps split (``Memory.search``, then
``answering.prepare`` and ``answering.generate``) so that each search is
timed alone while model calls overlap.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import default_data_path, machine, progress
from locomo_retrieval import make_embedder, make_memory

import jevmem
from jevmem import answering
from jevmem.evaluation import (
    ANSWERABLE,
    CATEGORIES,
    QA,
    Conversation,
    conversation_inputs,
    judge_verdict,
    load_samples,
    token_f1,
)
from jevmem.memory import EvidenceItem, SearchResult
from jevmem.system_two import ChatCompletionsClient, SystemTwo
from jevmem.temporal import describe, ground

SYSTEMS = ("jevmem", "topk", "full_context")
NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass(frozen=True)
class JudgePrompt:
    version: str
    system: str
    user: str
    #: what stands for the gold answer of a question the conversation never answers
    unanswerable: str


JUDGE_PROMPT = JudgePrompt(
    version="jevmem-judge-1",
    system=(
        "You grade answers to questions about a long conversation, comparing each "
        "answer with a reference answer.\n"
        "Judge the meaning, not the wording. The answer is CORRECT when it states the "
        "same fact as the reference: the same person, thing, place, number or time, "
        "even if it is shorter or longer, phrased differently, or gives a date in "
        "another format or at another precision that still contains the reference's "
        "date. It is WRONG when it states a different fact, leaves out what was asked, "
        "hedges between several facts, or declines to answer.\n"
        "When the reference says the conversation never says this, the answer is "
        "CORRECT only if it declines or says it does not know, and WRONG if it "
        "answers.\n"
        "Reply with one word: CORRECT or WRONG."
    ),
    user="Question: {question}\nGold answer: {gold}\nCandidate answer: {candidate}\n\nVerdict:",
    unanswerable="(none: the conversation never says this)",
)


def judge_messages(p: JudgePrompt, qa: QA, candidate: str) -> list[dict[str, str]]:
    gold = p.unanswerable if qa.adversarial else (qa.answer or "")
    return [
        {"role": "system", "content": p.system},
        {
            "role": "user",
            "content": p.user.format(question=qa.question, gold=gold, candidate=candidate),
        },
    ]


# --- the systems ---------------------------------------------------------------------------


def all_turns(mem: Any) -> list[EvidenceItem]:
    """Every node of a memory as evidence, time references grounded as the read path does."""
    out = []
    for i in range(mem.store.next_id):
        if i not in mem.store:
            continue
        n = mem.store.get(i)
        refs = tuple(
            {"text": r.text, "resolved": describe(r), "precision": r.precision}
            for r in (ground(n.text, n.timestamp) if n.timestamp is not None else ())
        )
        out.append(EvidenceItem(n.id, n.text, 0.0, n.timestamp, dict(n.provenance), None, refs))
    return out


def prepare_for(
    system: str, mem: Any, qa: QA, args: argparse.Namespace, turns: list[EvidenceItem]
) -> answering.PreparedAnswer:
    if system == "full_context":
        return answering.prepare(SearchResult(qa.question, turns, {}), abstain=False)
    if system == "topk":
        res = mem.search(qa.question, k=args.k, mode="anchors")
        return answering.prepare(res, abstain=False)
    res = mem.search(qa.question, k=args.k, mode="full")
    return answering.prepare(res, abstain=not args.no_abstain, abstain_below=args.abstain_below)


# --- the log -----------------------------------------------------------------------------------


class Log:
    """The append-only JSONL of judged questions and builds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash: its question is redone
                if isinstance(rec, dict):
                    self.records.append(rec)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = path.open("a")
        if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            self._f.write("\n")  # end a line a crash cut, so the next record starts clean
        self._lock = threading.Lock()

    def done(self, fingerprint: str) -> set[str]:
        return {
            r["key"] for r in self.records if r.get("type") == "qa" and r.get("fp") == fingerprint
        }

    def append(self, rec: dict[str, Any]) -> None:
        line = json.dumps(rec, ensure_ascii=False)
        with self._lock:
            self._f.write(line + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())
            self.records.append(rec)

    def close(self) -> None:
        self._f.close()


def question_key(sample_id: str, qi: int, system: str) -> str:
    return f"{sample_id}#{qi}#{system}"


def fingerprint(args: argparse.Namespace) -> str:
    """What changes answers: a run with other settings writes under another print."""
    parts = {
        "model": args.model_name,
        "base_url": args.base_url_name,
        "judge_model": args.judge_model_name,
        "answer_prompt": answering.DEFAULT_ANSWER_PROMPT.version,
        "pack": answering.PACK_VERSION,
        "judge_prompt": JUDGE_PROMPT.version,
        "k": args.k,
        "abstain": not args.no_abstain,
        "abstain_below": args.abstain_below,
        "embedder": args.embedder,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


# --- running -----------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def client_for(
    base_url: str | None, model: str | None, key_env: str | None, args: argparse.Namespace
) -> ChatCompletionsClient:
    key = os.environ.get(key_env) if key_env else None
    if key_env and not key:
        raise SystemExit(f"{key_env} is not set")
    return ChatCompletionsClient(
        base_url,
        model,
        key,
        timeout_s=args.timeout_s,
        max_retries=args.max_retries,
        backoff_s=args.backoff_s,
    )


class Runner:
    def __init__(self, args: argparse.Namespace, answerer: SystemTwo, judge: SystemTwo) -> None:
        self.args = args
        self.answerer = answerer
        self.judge = judge
        self.errors = 0
        self.consecutive_errors = 0
        self._lock = threading.Lock()

    def judged(
        self, qa: QA, sample_id: str, qi: int, system: str, ans: answering.Answer
    ) -> dict[str, Any]:
        """Judge one answer; the JSONL record."""
        j0 = time.perf_counter()
        jdone = self.judge.complete(judge_messages(JUDGE_PROMPT, qa, ans.text), max_tokens=10)
        judge_s = time.perf_counter() - j0
        ok = judge_verdict(jdone.text)
        t = ans.trace
        gold_ids = set(qa.evidence)
        cited_dia = [e.provenance.get("dia_id") for e in ans.cited_evidence]
        search_s = float(t.get("search_s") or 0.0)
        return {
            "type": "qa",
            "fp": self.args.fp,
            "key": question_key(sample_id, qi, system),
            "system": system,
            "sample_id": sample_id,
            "qi": qi,
            "category": qa.category,
            "question": qa.question,
            "gold": qa.answer,
            "answer": ans.text,
            "abstained": ans.abstained,
            "abstained_by": t.get("abstained_by"),
            "correct": bool(ok),
            "judge_reply": jdone.text[:200],
            "judge_unparsed": ok is None,
            "f1": None if qa.adversarial else token_f1(ans.text, qa.answer or ""),
            "cited_dia_ids": cited_dia,
            "cited_gold": sum(1 for d in cited_dia if d in gold_ids),
            "gold_dia_ids": list(qa.evidence),
            "sufficiency": t.get("sufficiency"),
            "pack_items": t.get("pack_items"),
            "pack_tokens_estimate": t.get("pack_tokens_estimate"),
            "prompt_tokens": t.get("prompt_tokens"),
            "completion_tokens": t.get("completion_tokens"),
            "judge_prompt_tokens": jdone.prompt_tokens,
            "judge_completion_tokens": jdone.completion_tokens,
            "search_s": search_s,
            "pack_s": t.get("pack_s"),
            "generate_s": t.get("generate_s"),
            "latency_s": search_s + float(t.get("pack_s") or 0.0) + float(t.get("generate_s") or 0),
            "judge_s": judge_s,
            "attempts": (t.get("completion") or {}).get("attempts"),
        }

    def failed(self, where: str, exc: BaseException) -> None:
        with self._lock:
            self.errors += 1
            self.consecutive_errors += 1
        log(f"    {where}: {type(exc).__name__}: {exc}")

    def succeeded(self) -> None:
        with self._lock:
            self.consecutive_errors = 0

    @property
    def stop(self) -> bool:
        return self.consecutive_errors >= int(self.args.max_errors)


def run(args: argparse.Namespace, answerer: SystemTwo, judge: SystemTwo, out: Log) -> None:
    samples = json.loads(args.data.read_text())
    if args.limit_conversations is not None:
        samples = samples[: args.limit_conversations]
    convs: list[Conversation]
    convs, report = load_samples(samples)
    systems: list[str] = args.systems
    done = out.done(args.fp)
    runner = Runner(args, answerer, judge)
    emb = make_embedder(args.embedder, args.threads)
    out.append(
        {
            "type": "run",
            "fp": args.fp,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": args.command,
            "model": args.model_name,
            "judge_model": args.judge_model_name,
            "systems": systems,
            "already_judged": len(done),
            "machine": machine(),
        }
    )
    in_flight = threading.BoundedSemaphore(max(1, 2 * args.concurrency))
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for ci, conv in enumerate(convs, 1):
            qas = list(enumerate(conv.qas[: args.limit_questions or None]))
            todo = [
                (qi, qa, s)
                for qi, qa in qas
                for s in systems
                if question_key(conv.sample_id, qi, s) not in done
            ]
            if not todo:
                log(f"[{ci}/{len(convs)}] {conv.sample_id}: all {len(qas) * len(systems)} judged")
                continue
            if runner.stop:
                break
            texts, ts, spk, provs = conversation_inputs(conv)
            mem = make_memory("memory", emb)
            t0 = time.perf_counter()
            mem.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
            build_s = time.perf_counter() - t0
            out.append(
                {
                    "type": "build",
                    "sample_id": conv.sample_id,
                    "embedder": args.embedder,
                    "turns": len(texts),
                    "build_s": build_s,
                }
            )
            log(
                f"[{ci}/{len(convs)}] {conv.sample_id}: {len(texts)} turns built in "
                f"{build_s:.2f}s; {len(todo)} answers to judge"
            )
            mem.search(qas[0][1].question, k=args.k)  # warm-up: lazy indexes, the first onnx run
            turns = all_turns(mem) if "full_context" in systems else []
            futures: list[Future[None]] = []
            for qi, qa, system in progress(todo, conv.sample_id):
                if runner.stop:
                    break
                where = f"{conv.sample_id} q{qi} {system}"
                if system == "jevmem" and args.concurrency == 1:
                    # Memory.answer itself, one at a time
                    try:
                        ans = mem.answer(
                            qa.question,
                            args.k,
                            system_two=answerer,
                            abstain=not args.no_abstain,
                            abstain_below=args.abstain_below,
                        )
                        out.append(runner.judged(qa, conv.sample_id, qi, system, ans))
                        runner.succeeded()
                    except jevmem.SystemTwoError as exc:
                        runner.failed(where, exc)
                    continue
                prepared = prepare_for(system, mem, qa, args, turns)
                in_flight.acquire()

                def work(
                    p: answering.PreparedAnswer = prepared,
                    qa: QA = qa,
                    qi: int = qi,
                    system: str = system,
                    where: str = where,
                    sample_id: str = conv.sample_id,
                ) -> None:
                    try:
                        (ans,) = answering.generate([p], answerer, 1)
                        out.append(runner.judged(qa, sample_id, qi, system, ans))
                        runner.succeeded()
                    except jevmem.SystemTwoError as exc:
                        runner.failed(where, exc)
                    finally:
                        in_flight.release()

                futures.append(pool.submit(work))
            for f in futures:
                f.result()
    if runner.errors:
        log(f"{runner.errors} answers failed (not recorded; a rerun retries them)")
    if runner.stop:
        raise SystemExit(
            f"stopped after {args.max_errors} failures in a row; what was judged is kept in "
            f"{out.path}: rerun the same command to resume"
        )
    log(report.summary())


# --- the report --------------------------------------------------------------------------------


def _mean(xs: Sequence[float | None]) -> float | None:
    ys = [float(x) for x in xs if x is not None]
    return statistics.fmean(ys) if ys else None


def _pct(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarise(records: Sequence[dict[str, Any]], fp: str, systems: Sequence[str]) -> dict[str, Any]:
    qa = [r for r in records if r.get("type") == "qa" and r.get("fp") == fp]
    builds: dict[str, float] = {}
    for r in records:
        if r.get("type") == "build":
            builds[r["sample_id"]] = float(r["build_s"])  # the latest build of each conversation
    out: dict[str, Any] = {"systems": {}, "build_s": sum(builds.values()), "built": len(builds)}
    for s in systems:
        rows = [r for r in qa if r["system"] == s]
        if not rows:
            continue
        d: dict[str, Any] = {"n": len(rows)}

        def acc(cats: Sequence[int], rows: list[dict[str, Any]] = rows) -> dict[str, Any]:
            got = [r for r in rows if r["category"] in cats]
            return {
                "n": len(got),
                "accuracy": _mean([float(r["correct"]) for r in got]),
                "f1": _mean([r["f1"] for r in got]),
                "abstained": _mean([float(r["abstained"]) for r in got]),
            }

        for c in CATEGORIES:
            d[str(c)] = acc((c,))
        d["overall"] = acc(CATEGORIES)
        d["overall_1_4"] = acc(ANSWERABLE)
        lat = [float(r["latency_s"]) for r in rows]
        d["latency_p50_s"] = _pct(lat, 0.5)
        d["latency_p95_s"] = _pct(lat, 0.95)
        d["search_p50_ms"] = 1e3 * (_pct([float(r["search_s"]) for r in rows], 0.5) or 0.0)
        d["generate_p50_s"] = _pct([float(r["generate_s"] or 0.0) for r in rows], 0.5)
        d["prompt_tokens_mean"] = _mean([r["prompt_tokens"] for r in rows])
        d["completion_tokens_mean"] = _mean([r["completion_tokens"] for r in rows])
        d["judge_tokens_mean"] = _mean(
            [
                (r["judge_prompt_tokens"] or 0) + (r["judge_completion_tokens"] or 0)
                for r in rows
                if r["judge_prompt_tokens"] is not None
            ]
        )
        d["pack_tokens_estimate_mean"] = _mean([r["pack_tokens_estimate"] for r in rows])
        d["judge_unparsed"] = sum(1 for r in rows if r["judge_unparsed"])
        cited = [r for r in rows if r["cited_dia_ids"] and r["gold_dia_ids"]]
        d["cited_gold_share"] = _mean([r["cited_gold"] / len(r["cited_dia_ids"]) for r in cited])
        out["systems"][s] = d
    return out


def fmt(x: object, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def markdown(summary: dict[str, Any], header: str) -> str:
    lines = [header, ""]
    cats = " | ".join(f"{NAMES[c]}" for c in CATEGORIES)
    lines.append(f"| system | n | overall | 1-4 | {cats} | F1 1-4 |")
    lines.append("|---|" + "---:|" * (len(CATEGORIES) + 4))
    for s, d in summary["systems"].items():
        by = " | ".join(fmt(d[str(c)]["accuracy"]) for c in CATEGORIES)
        lines.append(
            f"| {s} | {d['n']} | {fmt(d['overall']['accuracy'])} | "
            f"{fmt(d['overall_1_4']['accuracy'])} | {by} | {fmt(d['overall_1_4']['f1'])} |"
        )
    lines.append("")
    lines.append(
        "| system | latency p50 / p95 s | search p50 ms | generation p50 s | prompt tokens | "
        "completion tokens | judge tokens | abstained 1-4 / 5 | cited gold share |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s, d in summary["systems"].items():
        lines.append(
            f"| {s} | {fmt(d['latency_p50_s'], 2)} / {fmt(d['latency_p95_s'], 2)} | "
            f"{fmt(d['search_p50_ms'], 1)} | {fmt(d['generate_p50_s'], 2)} | "
            f"{fmt(d['prompt_tokens_mean'], 0)} | {fmt(d['completion_tokens_mean'], 0)} | "
            f"{fmt(d['judge_tokens_mean'], 0)} | {fmt(d['overall_1_4']['abstained'])} / "
            f"{fmt(d['5']['abstained'])} | {fmt(d['cited_gold_share'])} |"
        )
    lines.append("")
    lines.append(
        f"build {fmt(summary['build_s'], 2)} s for {summary['built']} conversations "
        "(embedding included)"
    )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=default_data_path())
    ap.add_argument("--out", type=Path, default=Path("bench/out/locomo_qa.jsonl"))
    ap.add_argument("--json", type=Path, default=None, help="write the summary here")
    ap.add_argument(
        "--systems",
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        default=list(SYSTEMS),
        help=f"comma-separated, from {','.join(SYSTEMS)}",
    )
    ap.add_argument("--k", type=int, default=10, help="evidence items per answer")
    ap.add_argument("--no-abstain", action="store_true", help="jevmem: always ask the model")
    ap.add_argument("--abstain-below", type=float, default=answering.DEFAULT_ABSTAIN_BELOW)
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--limit-questions", type=int, default=None, help="per conversation")
    ap.add_argument("--concurrency", type=int, default=8, help="model calls in flight")
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--model", default=None)
    ap.add_argument("--api-key-env", default=None, help="read the answer model's key from here")
    ap.add_argument("--judge-base-url", default=None, help="default: --base-url")
    ap.add_argument("--judge-model", default=None, help="default: --model")
    ap.add_argument("--judge-api-key-env", default=None, help="default: --api-key-env")
    ap.add_argument("--timeout-s", type=float, default=60.0)
    ap.add_argument("--max-retries", type=int, default=4)
    ap.add_argument("--backoff-s", type=float, default=0.5)
    ap.add_argument(
        "--max-errors", type=int, default=20, help="stop after this many failed answers in a row"
    )
    args = ap.parse_args(argv)
    for s in args.systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r}; expected some of {','.join(SYSTEMS)}")
    if args.concurrency < 1 or args.k < 1 or args.max_errors < 1:
        ap.error("--concurrency, --k and --max-errors must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    answerer = client_for(args.base_url, args.model, args.api_key_env, args)
    judge = client_for(
        args.judge_base_url or args.base_url or answerer.base_url,
        args.judge_model or args.model or answerer.model,
        args.judge_api_key_env or args.api_key_env,
        args,
    )
    args.model_name, args.base_url_name = answerer.model, answerer.base_url
    args.judge_model_name = judge.model
    args.fp = fingerprint(args)
    args.command = " ".join([".venv/bin/python", *map(shlex.quote, sys.argv)])
    out = Log(args.out)
    try:
        run(args, answerer, judge, out)
    finally:
        out.close()
    summary = summarise(out.records, args.fp, args.systems)
    summary.update(
        {
            "fingerprint": args.fp,
            "model": answerer.model,
            "judge_model": judge.model,
            "answer_prompt": answering.DEFAULT_ANSWER_PROMPT.version,
            "judge_prompt": JUDGE_PROMPT.version,
            "k": args.k,
            "data": str(args.data),
            "out": str(args.out),
            "machine": machine(),
            "command": args.command,
        }
    )
    header = (
        f"`{args.command}`\n\nanswer model {answerer.model} ({answerer.base_url}), judge "
        f"{judge.model}; prompts {answering.DEFAULT_ANSWER_PROMPT.version} / "
        f"{JUDGE_PROMPT.version}; k={args.k}; {summary['machine']}"
    )
    print(markdown(summary, header))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

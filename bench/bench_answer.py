"""What one answer costs apart from the model: the evidence pack and the answer path's overhead.

LoCoMo conversations built as in ``locomo_retrieval.py``; for each question,
interleaved: ``Memory.search`` (full mode, k) and ``Memory.answer`` (same
query and k, ``abstain=False`` so every answer takes the whole path)
against the loopback fake model of ``jevmem.testing`` (an instant,
deterministic OpenAI-compatible server: its HTTP round trip is what a real
endpoint's network and model time replace). Reported, medians over the
questions: the evidence pack's size (items, characters, ~tokens at 4
characters a token, and the prompt tokens the fake counts with
``\\w+|[^\\w\\s]``), the time to build the pack and the messages, the HTTP
round trip, and ``answer - search`` (the answer path's whole overhead)
and ``answer - search - HTTP`` (what jevmem itself adds; also against the
answer's own search as its trace times it, free of the noise of comparing
two separate searches).

    .venv/bin/python bench/bench_answer.py [--data FILE] [--limit-conversations 1]
        [--limit-questions 100] [--k 10] [--embedder onnx|hash] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import default_data_path, load, machine
from locomo_retrieval import make_embedder, make_memory

from jevmem.evaluation import conversation_inputs, load_samples
from jevmem.system_two import ChatCompletionsClient
from jevmem.testing import FakeChatServer


def med(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def run(args: argparse.Namespace) -> dict[str, Any]:
    samples = json.loads(args.data.read_text())[: args.limit_conversations]
    convs, _ = load_samples(samples)
    emb = make_embedder(args.embedder, args.threads)
    rows: list[dict[str, float]] = []
    load_start = load()
    with FakeChatServer() as fake:
        client = ChatCompletionsClient(fake.base_url, "fake")
        for conv in convs:
            texts, ts, spk, provs = conversation_inputs(conv)
            mem = make_memory("memory", emb)
            mem.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
            qas = conv.qas[: args.limit_questions]
            for qa in qas[:3]:  # warm-up: lazy indexes, the first onnx run, the connection
                mem.answer(qa.question, args.k, system_two=client, abstain=False)
            for qa in qas:
                t0 = time.perf_counter()
                mem.search(qa.question, args.k)
                search_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                a = mem.answer(qa.question, args.k, system_two=client, abstain=False)
                answer_s = time.perf_counter() - t0
                t = a.trace
                rows.append(
                    {
                        "search_s": search_s,
                        "answer_s": answer_s,
                        "inner_search_s": t["search_s"],
                        "http_s": t["completion"]["latency_s"],
                        "pack_s": t["pack_s"],
                        "parse_s": t["parse_s"],
                        "items": t["pack_items"],
                        "chars": t["pack_chars"],
                        "tokens_est": t["pack_tokens_estimate"],
                        "prompt_tokens": t["prompt_tokens"],
                    }
                )
    col = {k: [r[k] for r in rows] for k in rows[0]}
    overhead = [r["answer_s"] - r["search_s"] for r in rows]
    own = [r["answer_s"] - r["search_s"] - r["http_s"] for r in rows]
    # the same, against the answer's own search (as its trace times it): no
    # noise from two separate searches
    own_inner = [r["answer_s"] - r["inner_search_s"] - r["http_s"] for r in rows]
    return {
        "questions": len(rows),
        "conversations": len(convs),
        "k": args.k,
        "pack_items_p50": med(col["items"]),
        "pack_chars_p50": med(col["chars"]),
        "pack_tokens_estimate_p50": med(col["tokens_est"]),
        "prompt_tokens_p50": med(col["prompt_tokens"]),
        "pack_build_ms_p50": 1e3 * med(col["pack_s"]),
        "parse_ms_p50": 1e3 * med(col["parse_s"]),
        "search_ms_p50": 1e3 * med(col["search_s"]),
        "answer_ms_p50": 1e3 * med(col["answer_s"]),
        "http_ms_p50": 1e3 * med(col["http_s"]),
        "overhead_ms_p50": 1e3 * med(overhead),
        "own_overhead_ms_p50": 1e3 * med(own),
        "own_overhead_vs_inner_search_ms_p50": 1e3 * med(own_inner),
        "embedder": repr(emb),
        "load_start": load_start,
        "load_end": load(),
        "machine": machine(),
        "command": " ".join([".venv/bin/python", *map(shlex.quote, sys.argv)]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=default_data_path())
    ap.add_argument("--limit-conversations", type=int, default=1)
    ap.add_argument("--limit-questions", type=int, default=100, help="per conversation")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime threads")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    r = run(args)
    print(json.dumps(r, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

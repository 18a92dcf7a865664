"""Cost of one long observation, step by step, at several sizes.

Builds realistic long texts by joining BEAM turns (markdown, code, prose) in
order until each size is reached, then times every per-text step of
``Memory.add_batch`` on its own (entity extraction, temporal grounding, the
question share, the store's tokenizer, the store insert) and the whole
``add_batch`` of that one text into a memory that already holds a few hundred
turns. Per-step times that grow faster than the size show up as a rising
us/KiB column.

    python bench/bench_long.py --sizes 64K,512K,4M [--onnx] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from jevmem import Memory
from jevmem._core import MemoryStore, question_share
from jevmem.embed import Embedder, HashEmbedder, default_embedder
from jevmem.entities import extract_entities
from jevmem.temporal import ground

BEAM = Path(__file__).resolve().parents[2] / "shared" / "data" / "beam" / "beam-100k.json"
OBSERVED = 1_700_000_000


def beam_turns(path: Path) -> list[tuple[str, str]]:
    data = json.loads(path.read_text())
    out: list[tuple[str, str]] = []
    for conv in data:
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            out.extend((t["speaker"], t["text"]) for t in c[f"session_{n}"])
            n += 1
    return out


def long_text(turns: list[tuple[str, str]], size: int) -> str:
    parts: list[str] = []
    total = 0
    i = 0
    while total < size:
        text = turns[i % len(turns)][1]
        parts.append(text)
        total += len(text.encode()) + 2
        i += 1
    raw = "\n\n".join(parts).encode()[:size]
    return raw.decode("utf-8", errors="ignore")


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1024, "M": 1024 * 1024}.get(s[-1:], 1)
    return int(float(s.rstrip("KM")) * mult)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, default=BEAM)
    ap.add_argument("--sizes", default="64K,512K,4M")
    ap.add_argument("--base-turns", type=int, default=300)
    ap.add_argument("--onnx", action="store_true", help="the default (ONNX) embedder")
    ap.add_argument(
        "--skip", default="", help="comma-separated steps to leave out (entities, add_batch, ...)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    turns = beam_turns(args.data)
    embedder: Embedder = default_embedder() if args.onnx else HashEmbedder()
    rows = []
    for size in (parse_size(s) for s in args.sizes.split(",")):
        text = long_text(turns, size)
        nbytes = len(text.encode())
        store = MemoryStore(embedder.dim, max_text_bytes=max(nbytes, 1 << 16))
        vec = np.ones(embedder.dim, np.float32)
        row: dict[str, Any] = {"bytes": nbytes, "chars": len(text)}
        skip = set(args.skip.split(","))
        steps: dict[str, Callable[[], Any]] = {
            "entities": partial(extract_entities, text, speaker="Assistant"),
            "ground": partial(ground, text, OBSERVED),
            "question_share": partial(question_share, text),
            "tokenize": partial(store.tokenize, text),
        }
        for name, fn in steps.items():
            if name not in skip:
                row[f"{name}_s"] = timed(fn)
        # many distinct entities: the store's dedupe must not be quadratic in them
        ents = [f"entity {i}" for i in range(max(1, nbytes // 64))]
        row["entity_count"] = len(ents)
        row["store_add_s"] = timed(partial(store.add, text, vec, entities=ents))
        if "add_batch" not in skip:
            base = turns[: args.base_turns]
            big = MemoryStore(embedder.dim, max_text_bytes=max(nbytes, 1 << 16))
            m = Memory(embedder, store=big)
            m.add_batch(
                [t for _, t in base],
                speakers=[s for s, _ in base],
                timestamps=[OBSERVED + 60 * i for i in range(len(base))],
            )

            def add(m: Memory = m, t: str = text) -> None:
                m.add_batch([t], speakers=["Assistant"], timestamps=[OBSERVED + 86_400])

            row["add_batch_s"] = timed(add)
            row["passages"] = len(big.passages(len(base))) if hasattr(big, "passages") else 0
        rows.append(row)
        kib = nbytes / 1024
        timings = {k: v for k, v in row.items() if k.endswith("_s")}
        print(
            f"{kib:8.0f} KiB  "
            + "  ".join(
                f"{k[:-2]}={v:.3f}s ({1e6 * v / kib:.0f}us/KiB)" for k, v in timings.items()
            )
            + f"  entities={row['entity_count']} passages={row.get('passages', '-')}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"embedder": repr(embedder), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

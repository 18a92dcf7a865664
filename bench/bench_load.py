"""`Memory.load` per node: the whole memory against its store alone.

Builds one memory per conversation of a file in the LoCoMo layout (hash
embedder: loading does not embed, so the vectors' source does not matter),
saves it, then loads it ``--repeat`` times, alternating `Memory.load` and
`MemoryStore.load_with_state` (what the store alone costs), and prints the
medians per node. To compare two builds, run this once with each
(``PYTHONPATH=<package>``), in turn, on the same file: a snapshot is read by
the build that wrote it.

    .venv/bin/python bench/bench_load.py --data ../shared/data/locomo/locomo10-dev.json \\
        [--conversations 2] [--repeat 21] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import finish_report

import jevmem
from jevmem.embed import HashEmbedder
from jevmem.evaluation import conversation_inputs, load_samples

MAX_TEXT_BYTES = 4 * 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    emb = HashEmbedder(384)
    convs, _ = load_samples(json.loads(args.data.read_text()))
    whole: list[float] = []
    store_only: list[float] = []
    nodes = 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, conv in enumerate(convs[: args.conversations]):
            texts, ts, spk, provs = conversation_inputs(conv)
            store = jevmem.MemoryStore(emb.dim, max_text_bytes=MAX_TEXT_BYTES)
            m = jevmem.Memory(emb, jevmem.LocalController(), store=store)
            m.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
            path = Path(tmp) / f"m{i}.jvm"
            m.save(path)
            paths.append(path)
            nodes += len(m)
        for _ in range(args.repeat):
            t = time.perf_counter()
            for path in paths:
                jevmem.Memory.load(path, emb, jevmem.LocalController())
            whole.append(time.perf_counter() - t)
            t = time.perf_counter()
            for path in paths:
                jevmem.MemoryStore.load_with_state(path)
            store_only.append(time.perf_counter() - t)
    per_node = {
        "memory_load_us_per_node": statistics.median(whole) / nodes * 1e6,
        "store_load_us_per_node": statistics.median(store_only) / nodes * 1e6,
    }
    per_node["python_part_us_per_node"] = (
        per_node["memory_load_us_per_node"] - per_node["store_load_us_per_node"]
    )
    report = {
        "package": str(Path(jevmem.__file__).parent),
        "data": str(args.data),
        "nodes": nodes,
        "repeat": args.repeat,
        **per_node,
    }
    finish_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

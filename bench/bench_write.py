"""The write path per node with precomputed vectors, and what its text
analysis (entity extraction and time grounding) costs of it.

Builds one memory per conversation of a file in the LoCoMo layout with
`Memory.add_batch` in batches of ``--batch`` turns, the vectors computed
beforehand (hashing embedder: the write path, not an embedder, is measured),
``--repeat`` times (the controller's text caches emptied before each, so
no build reads a text the previous one cached), and prints the median
milliseconds per node. Beside it,
the same turns' entity extraction and time grounding alone
(`jevmem.entities.extract_entities`, `jevmem.temporal.ground`), timed the
same way, so the share of the text analysis is read off one run. To compare
two builds, give both (``--a DIR --b DIR``, directories holding a ``jevmem``
package with its built ``_core``): both are imported into this process and
build in turn, the order alternating, so the machine's drift falls on both
alike; the report gives each one's median, B over A, and whether the two
built the same stores (snapshot bytes, every repeat).

    .venv/bin/python bench/bench_write.py --data ../shared/data/beam/beam-100k.json \\
        [--conversations 2] [--repeat 5] [--a DIR --b DIR] [--style notes] [--json OUT]

``--style`` writes the conversations restyled (`jevmem.evaluation.RESTYLES`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import finish_report
from bench_ab import load_build

import jevmem
from jevmem.controller.local import clear_text_caches
from jevmem.embed import HashEmbedder
from jevmem.entities import extract_entities
from jevmem.evaluation import RESTYLES, conversation_inputs, load_samples
from jevmem.temporal import ground

MAX_TEXT_BYTES = 4 * 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--a", type=Path, default=None, help="directory with build A's jevmem")
    ap.add_argument("--b", type=Path, default=None, help="directory with build B's jevmem")
    ap.add_argument(
        "--style", default="turns", choices=sorted(RESTYLES), help="write the turns restyled"
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if (args.a is None) != (args.b is None):
        raise SystemExit("--a and --b go together")

    emb = HashEmbedder(384)
    convs, _ = load_samples(json.loads(args.data.read_text()))
    inputs = []
    for conv in convs[: args.conversations]:
        texts, ts, spk, provs = conversation_inputs(RESTYLES[args.style](conv))
        inputs.append((texts, ts, spk, provs, emb.embed(texts)))
    nodes = sum(len(i[0]) for i in inputs)
    chars = sum(len(t) for i in inputs for t in i[0])

    def build(jv: Any = jevmem) -> list[bytes]:
        """Every conversation's memory built with the package ``jv``; their
        stores' snapshot bytes."""
        stores = []
        for texts, ts, spk, provs, vecs in inputs:
            store = jv.MemoryStore(emb.dim, max_text_bytes=MAX_TEXT_BYTES)
            m = jv.Memory(emb, jv.LocalController(), store=store)
            b = args.batch
            for i in range(0, len(texts), b):
                m.add_batch(
                    texts[i : i + b],
                    timestamps=ts[i : i + b],
                    speakers=spk[i : i + b],
                    provenances=provs[i : i + b],
                    embeddings=vecs[i : i + b],
                )
            stores.append(store)
        return [st.to_bytes() for st in stores]

    if args.a is not None:
        return compare_builds(args, build, nodes, chars)

    def analyse() -> None:
        for texts, ts, spk, provs, _ in inputs:
            for text, stamp, speaker, prov in zip(texts, ts, spk, provs, strict=True):
                extract_entities(text, speaker=speaker, provenance=prov)
                if stamp is not None:
                    ground(text, stamp)

    writes: list[float] = []
    analysis: list[float] = []
    for _ in range(args.repeat):
        # every write reads a new text: the controller's text caches start
        # empty, as in a memory that never saw these turns
        clear_text_caches()
        t = time.perf_counter()
        build()
        writes.append(time.perf_counter() - t)
        t = time.perf_counter()
        analyse()
        analysis.append(time.perf_counter() - t)
    write_ms = statistics.median(writes) / nodes * 1e3
    analysis_ms = statistics.median(analysis) / nodes * 1e3
    report = {
        "package": str(Path(jevmem.__file__).parent),
        "data": str(args.data),
        "style": args.style,
        "nodes": nodes,
        "mean_chars_per_node": chars / nodes,
        "repeat": args.repeat,
        "batch": args.batch,
        "write_ms_per_node": write_ms,
        "text_analysis_ms_per_node": analysis_ms,
        "text_analysis_share": analysis_ms / write_ms,
    }
    finish_report(report, args.json)
    return 0


def compare_builds(
    args: argparse.Namespace, build: Callable[[Any], list[bytes]], nodes: int, chars: int
) -> int:
    """Builds A and B in turn, ``args.repeat`` times each, the order
    alternating; each build's text caches emptied before it builds."""
    builds = {"a": load_build(args.a), "b": load_build(args.b)}
    times: dict[str, list[float]] = {"a": [], "b": []}
    same = True
    for r in range(args.repeat):
        made = {}
        for name in ("a", "b") if r % 2 == 0 else ("b", "a"):
            mods = builds[name]
            mods["jevmem.controller.local"].clear_text_caches()
            t = time.perf_counter()
            stores = build(mods["jevmem"])
            times[name].append(time.perf_counter() - t)
            made[name] = stores
        same = same and made["a"] == made["b"]
    a_ms, b_ms = (statistics.median(times[n]) / nodes * 1e3 for n in ("a", "b"))
    report = {
        "a": str(args.a),
        "b": str(args.b),
        "data": str(args.data),
        "style": args.style,
        "nodes": nodes,
        "mean_chars_per_node": chars / nodes,
        "repeat": args.repeat,
        "batch": args.batch,
        "a_write_ms_per_node": a_ms,
        "b_write_ms_per_node": b_ms,
        "b_over_a": b_ms / a_ms,
        "b_over_a_each": [tb / ta for ta, tb in zip(times["a"], times["b"], strict=True)],
        "same_stores": same,
    }
    finish_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

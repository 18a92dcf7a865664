"""Write the development sets' turns and a fixed sample of their questions as
plain text, one per line, for the core's BM25 benchmark on real text
(`cargo bench --bench bm25 -- --texts OUT/texts.txt --queries OUT/questions.txt`).

A turn's line is its speaker and its words, as the lexical index reads them;
the questions are `bench_memory_scale.py`'s sample (same seed).

    python bench/dev_texts.py /tmp/dev_texts
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from bench_memory_scale import corpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("out", help="directory for texts.txt and questions.txt")
    ap.add_argument("--queries", type=int, default=300, help="questions sampled (fixed seed)")
    args = ap.parse_args(argv)
    turns, questions = corpus()
    sample = random.Random(11).sample(questions, min(args.queries, len(questions)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    one_line = str.maketrans("\n\r", "  ")
    (out / "texts.txt").write_text(
        "".join(
            f"{speaker or ''} {text}".translate(one_line) + "\n" for text, _, speaker, _ in turns
        )
    )
    (out / "questions.txt").write_text("".join(q.translate(one_line) + "\n" for q in sample))
    print(f"{len(turns):,} turns and {len(sample)} questions in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

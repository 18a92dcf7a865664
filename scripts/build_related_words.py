"""Build the related-words table the query plan expands rare query words with
(`rust/core/data/related_words.bin`, read by `jevmem_core::related`).

The words are bert-base-uncased's whole-word vocabulary entries (lower-case
ASCII letters, two or more), the vocabulary jevmem ships. Each is embedded
alone with the default embedder (paraphrase-MiniLM-L3-v2); a word's related
words are the others whose vectors are closest to its own, cosine at least
``--min-similarity``, at most ``--per-word``. Nothing here reads a dataset.

    .venv/bin/python scripts/build_related_words.py [--out rust/core/data/related_words.bin]

Format (little-endian): ``b"JVRW1\\n"``, u32 word count n, u32 byte length
of the words block, the words joined by ``\\n``, u32 offsets[n + 1] into the
entries, then the entries: u16 word index, u8 similarity (cosine x 255,
rounded down), each word's by similarity, most similar first.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

import numpy as np

from jevmem.embed import default_embedder, vocab_path

MAGIC = b"JVRW1\n"


def whole_words() -> list[str]:
    words = [line.rstrip("\n") for line in vocab_path().open(encoding="utf-8")]
    return sorted({w for w in words if len(w) >= 2 and w.isascii() and w.isalpha() and w.islower()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("rust/core/data/related_words.bin"))
    ap.add_argument("--per-word", type=int, default=12)
    ap.add_argument("--min-similarity", type=float, default=0.5)
    args = ap.parse_args()

    words = whole_words()
    assert len(words) < 0xFFFF
    vecs = default_embedder(threads=2, warn=False).embed(words).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    offsets = [0]
    entries = bytearray()
    for start in range(0, len(words), 1024):
        sims = vecs[start : start + 1024] @ vecs.T
        for row, i in enumerate(range(start, min(start + 1024, len(words)))):
            s = sims[row]
            s[i] = -1.0  # not its own neighbour
            top = np.argsort(-s, kind="stable")[: args.per_word]
            for j in top:
                if s[j] < args.min_similarity:
                    break
                entries += struct.pack("<HB", int(j), int(min(1.0, float(s[j])) * 255))
            offsets.append(len(entries) // 3)
    block = "\n".join(words).encode("ascii")
    out = bytearray(MAGIC)
    out += struct.pack("<II", len(words), len(block)) + block
    out += struct.pack(f"<{len(offsets)}I", *offsets) + entries
    args.out.write_bytes(bytes(out))
    print(f"{args.out}: {len(words)} words, {len(entries) // 3} related pairs, {len(out)} bytes")


if __name__ == "__main__":
    main()

"""Embedders that need no model download.

:class:`HashEmbedder` maps text to a fixed-size vector by signed feature
hashing of word unigrams and bigrams. It knows no synonyms, so it is no
substitute for a neural embedder on real data, but it is deterministic,
instant and dependency-free: the right default for tests, demos and for
memories whose retrieval is mostly lexical.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Signed feature hashing of lowercased word unigrams and bigrams, L2-normalised."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError("HashEmbedder needs dim >= 8")
        self.dim = dim

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per text. Texts with no word characters map to a fixed unit vector."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                h = int.from_bytes(digest, "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        row: npt.NDArray[np.float32] = self.embed([text])[0]
        return row

"""An embedder that holds a write still until a test lets it go."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from jevmem import HashEmbedder


class GatedEmbedder(HashEmbedder):
    """A hash embedder whose embed calls, once armed, wait for ``release``
    (``entered`` says one is waiting); with ``once`` only the first armed
    call waits."""

    def __init__(self, dim: int = 32, *, once: bool = False) -> None:
        super().__init__(dim)
        self.once = once
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.armed:
            if self.once:
                self.armed = False
            self.entered.set()
            assert self.release.wait(30), "the test never released the embedder"
        return super().embed(texts)

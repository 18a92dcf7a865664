"""Concurrent searches of one memory, answered together (documented internal).

Searches that overlap in time (threads of one process calling
``Memory.search``, or ``jevmem serve``'s handlers) go through two stages,
each taken in turn by whichever caller finds it free:

1. **Embedding** (its own lock): whoever holds it embeds every query that
   arrived without a vector, in one embedder call, and hands them on.
2. **Answering** (the run lock the caller names): whoever holds it runs the
   embedded searches waiting, grouped by their options, each group as one
   lockstep batch (one controller call per round for all of them), and
   hands each caller its result.

The stages overlap: while one caller runs controller rounds (Python, holding
the GIL), another embeds the next queries (an ONNX model releases the GIL).
An idle memory answers a lone search at once, nothing waits for company,
and each search gets the result it gets alone (a batch equals its searches
one by one). An error reaches only the searches whose group (or embedding)
raised it. The two locks are never held together; the embedding lock is
re-entrant, and so is the run lock a `Memory` uses: a controller or
embedder that searches the same memory from inside a round runs its search
there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem.plane.results import SearchResult

Vector = npt.NDArray[np.float32]
#: runs one group's searches: (queries, their vectors) -> results, in order
GroupRun = Callable[[list[str], Vector], list[SearchResult]]


class Pending:
    """One search waiting: its query, the key of the searches it may run
    with (equal keys: the same options), how its group runs, whether its
    caller still waits (``alive``; None: always) and what it gets if not
    (``gone``)."""

    __slots__ = ("alive", "done", "error", "gone", "key", "query", "result", "run", "vector")

    def __init__(
        self,
        query: str,
        key: Hashable,
        run: GroupRun,
        *,
        vector: Vector | None = None,
        alive: Callable[[], bool] | None = None,
        gone: Callable[[], BaseException] | None = None,
    ) -> None:
        self.query, self.key, self.run, self.vector = query, key, run, vector
        self.alive, self.gone = alive, gone
        self.done = False
        self.result: SearchResult | None = None
        self.error: BaseException | None = None

    def still_wanted(self) -> bool:
        """False (and the search done, with ``gone``'s error) when its caller left."""
        if self.alive is None or self.alive():
            return True
        self.error = self.gone() if self.gone is not None else RuntimeError("the caller left")
        self.done = True
        return False


class SearchQueue:
    """The two stages of one memory's concurrent searches (see the module)."""

    def __init__(self, max_batch: int = 256) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        #: at most this many searches in one batch (the rest wait for the next turn)
        self.max_batch = max_batch
        self._lock = threading.Lock()  # the two lists
        self._embedding = threading.RLock()
        self._unembedded: list[Pending] = []
        self._waiting: list[Pending] = []

    def search(self, embed: Callable[[list[str]], Any], run_lock: Any, me: Pending) -> SearchResult:
        """``me``'s result, once the stages have run it; ``embed``: the
        memory's embedder call; ``run_lock``: the lock the memory's searches
        run under (re-entrant if a controller may search the memory). Raises
        the error its group (or embedding) raised."""
        with self._lock:
            (self._waiting if me.vector is not None else self._unembedded).append(me)
        if me.vector is None:
            with self._embedding:
                # whoever embeds hands on what it embedded, so a search
                # without a vector yet is still in the embedding queue
                while me.vector is None and not me.done:
                    with self._lock:
                        todo = self._unembedded[: self.max_batch]
                        del self._unembedded[: self.max_batch]
                    ready = _embed_all(embed, todo)
                    with self._lock:
                        self._waiting.extend(ready)
        with run_lock:
            # whoever holds the memory finishes every search it takes from
            # the queue before letting go, so one not done yet is still queued
            while not me.done:
                with self._lock:
                    batch = self._waiting[: self.max_batch]
                    del self._waiting[: self.max_batch]
                _run_all(batch)
        if me.error is not None:
            raise me.error
        assert me.result is not None
        return me.result


def _embed_all(embed: Callable[[list[str]], Any], todo: list[Pending]) -> list[Pending]:
    """Give each search its query's vector: one embedder call for all, or
    one each when that fails, so that an error reaches only its own search.
    The searches embedded, in order."""
    live = [p for p in todo if p.still_wanted()]
    vectors: list[Vector | None]
    try:
        try:
            vectors = list(embed([p.query for p in live])) if live else []
        except Exception:
            vectors = []
            for p in live:
                try:
                    vectors.append(embed([p.query])[0])
                except Exception as exc:
                    p.error, p.done = exc, True
                    vectors.append(None)
    except BaseException as exc:  # e.g. KeyboardInterrupt: no search may wait forever
        _fail(todo, exc)
        raise
    for p, v in zip(live, vectors, strict=True):
        p.vector = v
    return [p for p in live if not p.done]


def _run_all(batch: list[Pending]) -> None:
    """Run the searches of ``batch``, each group of equal keys as one batch."""
    try:
        groups: dict[Hashable, list[Pending]] = {}
        if len(batch) == 1:  # the common case, a lone search
            if batch[0].still_wanted():
                groups[None] = batch
        else:
            for p in batch:
                if p.still_wanted():
                    groups.setdefault(p.key, []).append(p)
        for group in groups.values():
            vectors = [p.vector for p in group if p.vector is not None]
            assert len(vectors) == len(group)  # the embedding stage gave each its vector
            stacked = np.stack(vectors) if len(vectors) > 1 else vectors[0][None, :]
            try:
                results = group[0].run([p.query for p in group], stacked)
            except Exception as exc:
                _fail(group, exc)
                continue
            for p, r in zip(group, results, strict=True):
                p.result, p.done = r, True
    except BaseException as exc:  # e.g. KeyboardInterrupt: no search may wait forever
        _fail(batch, exc)
        raise


def _fail(searches: Sequence[Pending], exc: BaseException) -> None:
    for p in searches:
        if not p.done:
            p.error, p.done = exc, True

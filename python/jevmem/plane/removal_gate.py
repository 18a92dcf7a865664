"""Searches and removals of one memory kept apart (documented internal).

A search reads the store in many short calls, one per step of its loop,
with controller rounds between them; a node it found in one call must still
be there in the next. So a removal (`Memory.forget`) waits for the searches
running to finish and holds new ones back while it removes; searches pass
together, and writes that add (`add`, `update`) never wait here.

Lock order: the memory's write lock, then this gate, then the search
queue's run lock. A removal takes the write lock before the gate (a write
whose controller failed takes its nodes back holding the write lock), and a
search passes the gate before it queues for the run lock (a thread the gate
lets through must never wait for a run lock held by one the gate stops).

A waiting removal goes first: searches that arrive after it wait for it, so
a steady stream of searches cannot keep it out. A thread already searching
(a controller or embedder that searches the same memory inside a round)
passes again at once, and so does one that holds the memory's write lock (a
controller that searches from inside a write's round): a removal removes
under that lock, so it cannot run meanwhile, and waiting for it there would
wait for the writer itself. Nothing that takes the write lock (a write, a
forget, a save) may run from inside a search's round: it could wait for a
writer that waits for this very search, so it is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from jevmem.errors import InvalidInputError

__all__ = ["RemovalGate"]


class RemovalGate:
    """Many searches at once, or one removal alone."""

    def __init__(self, writing: Callable[[], bool]) -> None:
        #: whether this thread holds the memory's write lock
        self._writing = writing
        self._state = threading.Condition(threading.Lock())
        self._searches = 0
        self._removing = False
        self._removals_waiting = 0
        self._depth = threading.local()  # this thread's searches in progress

    @contextmanager
    def search(self) -> Iterator[None]:
        """Held while a search (or a lockstep batch of them) runs."""
        depth = getattr(self._depth, "n", 0)
        if not depth and self._writing():
            yield
            return
        if not depth:
            with self._state:
                while self._removing or self._removals_waiting:
                    self._state.wait()
                self._searches += 1
        self._depth.n = depth + 1
        try:
            yield
        finally:
            self._depth.n = depth
            if not depth:
                with self._state:
                    self._searches -= 1
                    if not self._searches:
                        self._state.notify_all()

    def searching(self) -> bool:
        """Whether this thread is inside a search (a controller's round)."""
        return getattr(self._depth, "n", 0) > 0

    @contextmanager
    def removal(self) -> Iterator[None]:
        """Held while nodes are removed: no search runs meanwhile."""
        if getattr(self._depth, "n", 0):
            raise InvalidInputError(
                "forget was called from inside a search of the same memory (a controller's "
                "or embedder's round); forget after the search returns"
            )
        with self._state:
            self._removals_waiting += 1
            try:
                while self._removing or self._searches:
                    self._state.wait()
            finally:
                self._removals_waiting -= 1
                # (interrupted: the searches held back for it go on)
                self._state.notify_all()
            self._removing = True
        try:
            yield
        finally:
            with self._state:
                self._removing = False
                self._state.notify_all()

"""Holding Python's cyclic garbage collector off around allocation-heavy work."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector off for the length of the block.

    A lockstep round of ``search_batch`` keeps every query's requests and
    answers alive at once (tens of thousands of dicts and answer objects for
    a few hundred queries), and a controller server decodes as many for one
    call; the collector scanned them several times per batch (a sixth of the
    time) to find nothing: these paths make no reference cycles. Reference
    counting frees everything as usual, and the collector resumes when the
    block ends. Left alone when it is already off (by the host or by a
    concurrent block, which then turns it back on when it ends).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

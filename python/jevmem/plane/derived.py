"""Facts a Memory derives from each observation's text when it is written:
the grounded time references (`jevmem.temporal.ground`, most of what
loading cost) and each text's question share.

The core keeps them (`MemoryStore.set_derived`: a logged op, and part of
snapshot format 4), so loading and reopening do not derive them again. They
are a cache of pure functions of the text and its timestamp: a store whose
facts came from another `DERIVED_VERSION` is derived anew, and so is a node
the store has none for (a summary the consolidation wrote, a store written
by hand).

Memories saved before format 4 kept them as JSON in the memory's own state
(`encode_derived`); `decode_derived` still reads that, defensively: another
version or anything malformed gives nothing, and the facts are derived anew.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jevmem.temporal import PRECISIONS, TimeRef, describe

#: Bump when `ground` or `question_share` change what they return for a
#: text: snapshots written before are then derived anew on load
#: (tests/test_derived.py pins their output on a sample and says so).
DERIVED_VERSION = 6


@dataclass
class DerivedFacts:
    """Question shares of the nodes it covers, and the time references of
    those that have any."""

    asks: dict[int, float] = field(default_factory=dict)
    time_refs: dict[int, tuple[TimeRef, ...]] = field(default_factory=dict)

    def refs_of(self, node_id: int) -> tuple[TimeRef, ...] | None:
        """The node's grounded time references; None when not covered."""
        if node_id not in self.asks:
            return None
        return self.time_refs.get(node_id, ())

    def update(self, other: DerivedFacts) -> None:
        self.asks.update(other.asks)
        self.time_refs.update(other.time_refs)


#: A time reference as the core takes and gives it (`MemoryStore.set_derived`).
RefTuple = tuple[str, int, int, str, bool, int, int, str]


def ref_tuple(r: TimeRef) -> RefTuple:
    return (
        r.text,
        r.start,
        r.end,
        r.precision,
        r.relative,
        r.span[0],
        r.span[1],
        r.anchor_precision,
    )


def ref_of(t: Sequence[Any]) -> TimeRef:
    text, start, end, precision, relative, a, b, anchor = t
    return TimeRef(text, start, end, precision, relative, (a, b), anchor)


@lru_cache(maxsize=4096)
def time_ref_entry(raw: tuple[Any, ...]) -> dict[str, Any]:
    """An evidence item's entry for a grounded time reference as the core
    returns it (`ref_of`'s input), rendered once per reference: the same
    nodes come back query after query. Shared: a caller hands out copies.
    Holds a few words of a text, so `drop_text_caches` empties it."""
    r = ref_of(raw)
    return {
        "text": r.text,
        "start": r.start,
        "end": r.end,
        "precision": r.precision,
        "resolved": describe(r),
        "role": "event time, resolved against the observation time",
    }


def encode_derived(
    asks: Mapping[int, float],
    time_refs: Mapping[int, tuple[TimeRef, ...]],
    ids: Iterable[int] | None = None,
) -> dict[str, Any]:
    """The facts of ``ids`` (default: every node with a question share) in
    the JSON layout memories saved before format 4 kept in their state (what
    `decode_derived` reads; nothing writes it now but the tests of old states)."""
    chosen = sorted(asks) if ids is None else [i for i in ids if i in asks]
    return {
        "version": DERIVED_VERSION,
        "ids": chosen,
        "asks": [asks[i] for i in chosen],
        "time_refs": [
            [
                i,
                [
                    [r.text, r.start, r.end, r.precision, r.relative, *r.span, r.anchor_precision]
                    for r in time_refs[i]
                ],
            ]
            for i in chosen
            if i in time_refs
        ],
    }


def decode_derived(raw: object) -> DerivedFacts:
    """`encode_derived`'s data back; empty for another version or anything malformed."""
    try:
        return _decode(raw)
    except (TypeError, ValueError, KeyError):
        return DerivedFacts()


def _decode(raw: object) -> DerivedFacts:
    if not isinstance(raw, Mapping) or raw.get("version") != DERIVED_VERSION:
        return DerivedFacts()
    ids, asks = raw["ids"], raw["asks"]
    if not (isinstance(ids, list) and isinstance(asks, list) and len(ids) == len(asks)):
        raise ValueError("ids and asks differ")
    for i, a in zip(ids, asks, strict=True):
        if not (_is_int(i) and i >= 0 and isinstance(a, float | int) and 0.0 <= a <= 1.0):
            raise ValueError("bad question share")
    out = DerivedFacts(asks={i: float(a) for i, a in zip(ids, asks, strict=True)})
    for node_id, refs in raw["time_refs"]:
        if node_id not in out.asks:
            raise ValueError("time references of an uncovered node")
        out.time_refs[node_id] = tuple(_time_ref(r) for r in refs)
    return out


def _time_ref(r: object) -> TimeRef:
    if not isinstance(r, list) or len(r) != 8:
        raise ValueError("bad time reference")
    text, start, end, precision, relative, a, b, anchor = r
    if not (
        isinstance(text, str)
        and all(_is_int(x) for x in (start, end, a, b))
        and precision in PRECISIONS
        and isinstance(relative, bool)
        and isinstance(anchor, str)
        and (anchor == "" or anchor in PRECISIONS)
    ):
        raise ValueError("bad time reference")
    return TimeRef(text, start, end, precision, relative, (a, b), anchor)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)

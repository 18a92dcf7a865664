"""A write candidate's pair signals as Python computed them before the core
did (`WriteCandidate.same_session`, `.same_speaker`, `.older`, `.alias`): the
tests' oracle for the ported rules."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from jevmem._core import Node


def session_of(node: Node) -> str | None:
    prov = node.provenance
    for key in ("session", "session_id", "episode"):
        if key in prov:
            return f"{key}:{prov[key]}"
    return None


def same_speaker(a: Node, b: Node) -> float:
    sa = a.provenance.get("speaker", "").lower()
    return 1.0 if sa and sa == b.provenance.get("speaker", "").lower() else 0.0


def older_signal(candidate: Node, new: Node) -> float:
    """1 when the candidate was observed before the new node (or at the same
    time, or either time is unknown: then insertion order says it came first), else 0."""
    if candidate.timestamp is None or new.timestamp is None:
        return 1.0
    return 1.0 if candidate.timestamp <= new.timestamp else 0.0


def same_session(a: Node, b: Node) -> float:
    sa = session_of(a)
    return 1.0 if sa is not None and sa == session_of(b) else 0.0


#: `alias_signal` compares at most this many entities of each node (they
#: come speaker first, then in order of appearance): every pair is compared,
#: and a long text can carry thousands.
ALIAS_SCAN = 64


def alias_signal(a: Sequence[str], b: Sequence[str]) -> float:
    """Best prefix/containment match between differing entity ids ('mel' ~ 'melanie').

    A pair matches when the shorter id (3+ characters) starts the longer one
    or one of its words; it scores the length ratio plus 0.3, at most 1.
    Only pairs whose shorter id's first three letters start a word of the
    longer are compared (`_word_starts`), so two long texts' entity lists
    cost about their length, not its square."""
    a_ids, a_starts = _word_starts(tuple(a[:ALIAS_SCAN]))
    b_ids, b_starts = _word_starts(tuple(b[:ALIAS_SCAN]))
    best = 0.0
    for shorts, longs in ((a_ids, b_starts), (b_ids, a_starts)):
        for short in shorts:
            for long_ in longs.get(short[:3], ()):
                if len(short) < len(long_) and (long_.startswith(short) or f" {short}" in long_):
                    best = max(best, len(short) / len(long_) + 0.3)
                    if best >= 1.0:
                        return 1.0
    return min(1.0, best)


@lru_cache(maxsize=4096)
def _word_starts(ids: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """The ids of 3+ characters, and which of them have a word starting
    with each three letters (the longer side of a match starts a word with
    the shorter's first three)."""
    kept = tuple(dict.fromkeys(x for x in ids if len(x) >= 3))
    starts: dict[str, list[str]] = {}
    for x in kept:
        grams = {x[:3]} | {x[i + 1 : i + 4] for i, c in enumerate(x) if c == " "}
        for g in grams:
            if len(g) == 3:
                starts.setdefault(g, []).append(x)
    return kept, {g: tuple(v) for g, v in starts.items()}

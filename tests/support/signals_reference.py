"""The read path's per-node signals as Python computed them before the core
did (`MemoryStore.read_signals`, `MemoryStore.time_matches`): the tests'
oracle for the ported rules, built from the store's single-purpose reads."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from jevmem import Allowed, MemoryStore
from jevmem.plane.derived import ref_of
from jevmem.temporal import TimeRef

DAY_S = 86_400

Column = npt.NDArray[np.float64]


def time_match(
    refs: Sequence[TimeRef],
    stamp: int | None,
    window: tuple[int, int] | None,
    asks_when: bool,
) -> float:
    """How well a node's time fits what the query asks (`QueryFeatures.time_match`)."""
    if window is None:
        if not asks_when:
            return 0.0
        return 0.3 if refs else 0.0
    lo, hi = window
    scale = max(3 * DAY_S, hi - lo)
    spans = [(r.start, r.end) for r in refs]
    if stamp is not None:
        spans.append((stamp, stamp))
    best = 0.0
    for start, end in spans:
        # whole seconds: [start, end) holds start..end-1, the window lo..hi-1
        gap = max(0, lo - max(start, end - 1), start - (hi - 1))
        best = max(best, math.exp(-gap / scale))
    return best


def _share_of_best(x: Column, best: float) -> Column:
    if not best > 0:
        return np.zeros(len(x))
    return np.fmin(1.0, np.fmax(0.0, x) / best)


def _raw_similarity(sims: Column) -> Column:
    return np.where((sims > 0.0) & (sims < 1.0), sims, (sims >= 1.0).astype(np.float64))


def _rank_share(ranks: Column) -> Column:
    return np.where(ranks >= 0, 1.0 / (1.0 + np.fmax(ranks, 0.0) / 9.0), 0.0)


def signals(
    store: MemoryStore,
    query: str,
    qvec: npt.NDArray[np.float32],
    ids: list[int],
    *,
    lexical_ranked: list[int],
    vector_ranked: list[int],
    best_lexical: float,
    best_dense: float,
    best_passage: float,
    named: list[str],
    window: tuple[int, int] | None,
    asks_when: bool,
    allowed: Allowed | None,
) -> tuple[dict[str, Column], list[int]]:
    """`QueryFeatures.signals` before the move (its columns and best passages)."""
    n = len(ids)
    lex = store.lexical_scores(query, ids, allowed=allowed).astype(np.float64)
    sims = store.similarities(qvec, ids).astype(np.float64)
    p_sims, p_idx = store.passage_similarities(qvec, ids)
    nodes = [store.get(i) for i in ids]
    if named:
        ent = [
            1.0
            if (spk := node.provenance.get("speaker", "").lower()) and spk in named
            else 0.6
            if not frozenset(node.entities).isdisjoint(named)
            else 0.0
            for node in nodes
        ]
    else:
        ent = [0.0] * n
    timed = window is not None or asks_when
    times = [
        time_match(tuple(ref_of(t) for t in store.time_refs(i)), node.timestamp, window, asks_when)
        for i, node in zip(ids, nodes, strict=True)
    ]
    styles = store.styles(ids, allowed=allowed)
    has_speaker = [bool(node.provenance.get("speaker", "")) for node in nodes]
    types = np.array([tuple(node.types) for node in nodes], dtype=np.float64).reshape(n, 4)
    lex_rank = {node: r for r, node in enumerate(lexical_ranked)}
    vec_rank = {node: r for r, node in enumerate(vector_ranked)}
    ranks = np.array(
        [(lex_rank.get(i, -1.0), vec_rank.get(i, -1.0)) for i in ids], dtype=np.float64
    ).reshape(n, 2)
    out = {
        "lexical": _share_of_best(lex, best_lexical),
        "dense": _share_of_best(sims, best_dense),
        "dense_passage": _share_of_best(p_sims.astype(np.float64), best_passage),
        "entity_match": np.array(ent, dtype=np.float64),
        "time_match": np.array(times, dtype=np.float64) if timed else np.zeros(n),
        "asks": store.question_shares(ids),
        "dense_raw": _raw_similarity(sims),
        "lexical_rank": _rank_share(ranks[:, 0]),
        "dense_rank": _rank_share(ranks[:, 1]),
        "length": styles[:, 0],
        "speaker_asks": styles[:, 1],
        "speaker_length": styles[:, 2],
        "type_episodic": types[:, 0],
        "type_semantic": types[:, 1],
        "type_procedural": types[:, 2],
        "type_preference": types[:, 3],
        "has_speaker": np.array([1.0 if sp else 0.0 for sp in has_speaker], dtype=np.float64),
        "memory_length": np.full(n, store.typical_length(allowed=allowed)),
    }
    return out, p_idx.tolist()

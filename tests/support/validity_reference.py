"""Facts that change on the read path, as Python computed them before the
core did (`jevmem._core.FactState`, `MemoryStore.fact_chains(allowed=)`):
the tests' oracle for the ported rules. Frozen: change the core, not this."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem._core import Allowed, MemoryStore

CHAIN_NODES = 32


def share_of_best(x: float, best: float) -> float:
    return min(1.0, max(0.0, x) / best) if best > 0 else 0.0


class FactReference:
    """One query's validity signals and record, the old way."""

    def __init__(
        self,
        store: MemoryStore,
        query: str,
        qvec: npt.NDArray[np.float32],
        max_lex: float,
        max_sim: float,
        stance: str,
        at: int | None,
        until: int | None,
        allowed: Allowed | None = None,
    ) -> None:
        self.store, self.query, self.qvec = store, query, qvec
        self.max_lex, self.max_sim = max_lex, max_sim
        self.stance, self.at, self.until = stance, at, until
        self.allowed = allowed
        self.replaced: dict[int, set[int]] = {}
        self.holders: dict[int, set[int]] = {}
        self.invalid: set[int] = set()

    def fact_chains(self, ids: list[int]) -> list[Any]:
        store = self.store
        chains = store.fact_chains(ids)
        allowed = self.allowed
        if allowed is None:
            return chains
        out: list[Any] = []
        for chain in chains:
            if chain is None:
                out.append(None)
                continue
            start, end, olds, news = chain
            seen_olds = [(o, w) for o, w in olds if o in allowed]
            seen_news = [(n, w) for n, w in news if n in allowed]
            if not seen_olds and not seen_news:
                out.append(None)
                continue
            if len(seen_news) != len(news):
                starts = [s for s in (store.validity(n)[0] for n, _ in seen_news) if s is not None]
                end = min(starts) if starts else None
                if end is not None and start is not None:
                    end = max(end, start)
            out.append((start, end, seen_olds, seen_news))
        return out

    def chain_of(self, olds: list[tuple[int, float]], news: list[tuple[int, float]]) -> list[int]:
        found = [r for r, _ in olds + news]
        seen = set(found)
        frontier = list(found)
        while frontier and len(found) < CHAIN_NODES:
            step = []
            for chain in self.fact_chains(frontier):
                if chain is not None:
                    for r, _ in chain[2] + chain[3]:
                        if r not in seen:
                            seen.add(r)
                            step.append(r)
            found += step
            frontier = step
        return found[:CHAIN_NODES]

    def chain_relatives(self, ids: list[int]) -> list[int]:
        if self.stance == "neutral" or not ids or not self.store.supersedes_count:
            return []
        out: list[int] = []
        for chain in self.fact_chains(ids):
            if chain is not None:
                out.extend(r for r, _ in chain[2] + chain[3])
        return out

    def signals(self, ids: list[int]) -> npt.NDArray[np.float64] | None:
        store = self.store
        if self.stance == "neutral" or not ids or not store.supersedes_count:
            return None
        chains = self.fact_chains(ids)
        if all(chain is None for chain in chains):
            return None
        held_col, after_col, before_col, match_col = (np.full(len(ids), np.nan) for _ in range(4))
        valid_rows: list[tuple[int, list[int]]] = []
        for row, (node_id, chain) in enumerate(zip(ids, chains, strict=True)):
            if chain is None:
                continue
            start, end, olds, news = chain
            if self.stance == "past":
                held, after, before = (1.0, 0.0, 0.0) if news else (0.0, 0.0, 1.0)
            elif self.stance == "present":
                t = self.at
                replaced = bool(news) and (t is None or end is None or end <= t)
                begun = start is None or t is None or start <= t
                held = 1.0 if begun and not replaced else 0.0
                after = 1.0 if replaced else 0.0
                before = 0.0 if begun else 1.0
            else:
                lo, hi = self.at, self.until
                assert lo is not None and hi is not None
                width = max(1, hi - lo)
                a = lo if start is None else max(lo, start)
                b = hi if end is None else min(hi, end)
                held = max(0, b - a) / width
                after = 0.0 if end is None else max(0, hi - max(lo, end)) / width
                before = 0.0 if start is None else max(0, min(hi, start) - lo) / width
            held_col[row] = min(1.0, held)
            after_col[row] = min(1.0, after)
            before_col[row] = min(1.0, before)
            match_col[row] = 0.0
            chain_ids = self.chain_of(olds, news)
            if held > 0:
                valid_rows.append((row, chain_ids))
                for r in chain_ids:
                    self.holders.setdefault(r, set()).add(node_id)
                for r in self.invalid.intersection(chain_ids):
                    self.replaced.setdefault(r, set()).add(node_id)
            elif after > 0 or before > 0:
                self.invalid.add(node_id)
                if node_id in self.holders:
                    self.replaced.setdefault(node_id, set()).update(self.holders[node_id])
        relatives = sorted({r for _, rel in valid_rows for r in rel})
        if relatives:
            lex = store.lexical_scores(self.query, relatives, allowed=self.allowed).tolist()
            sims = store.similarities(self.qvec, relatives).tolist()
            match = {
                r: 0.5 * share_of_best(lx, self.max_lex)
                + 0.5 * share_of_best(0.0 if math.isnan(sm) else sm, self.max_sim)
                for r, lx, sm in zip(relatives, lex, sims, strict=True)
            }
            for row, rel in valid_rows:
                best = max(match.get(r, 0.0) for r in rel)
                match_col[row] = min(1.0, best * float(held_col[row]))
        return np.stack([held_col, after_col, before_col, match_col], axis=1)

"""The read path's pool as it was in Python before `jevmem._core.ReadSession`
took it over: the oracle of `tests/test_read_session.py`.

Frozen from `jevmem.plane.query_features.QueryFeatures.pool` (with its
`signals` and `fact_signals`) at session 17: the fused list, a time window's
best nodes, long observations by their best passage, Rocchio feedback on the
query vector, the time-order context of the strongest nodes and their
supersedes chains, each block's signals from the store's per-batch reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem._core import SIGNAL_COLUMNS, FactState, MemoryStore

Signals = dict[str, npt.NDArray[np.float64]]


def share_of_best(x: float, best: float) -> float:
    return min(1.0, max(0.0, x) / best) if best > 0 else 0.0


def share_of_best_columns(x: npt.NDArray[np.float64], best: float) -> npt.NDArray[np.float64]:
    if not best > 0:
        return np.zeros(len(x))
    return np.fmin(1.0, np.fmax(0.0, x) / best)


def plain_match_columns(signals: Signals) -> npt.NDArray[np.float64]:
    return 0.5 * signals["lexical"] + 0.5 * signals["dense"]


def concat_signals(blocks: list[Signals], lengths: list[int]) -> Signals:
    names: dict[str, None] = {}
    for block in blocks:
        names.update(dict.fromkeys(block))
    return {
        name: np.concatenate(
            [block.get(name, np.full(n, np.nan)) for block, n in zip(blocks, lengths, strict=True)]
        )
        for name in names
    }


@dataclass
class PoolQuery:
    """What the pool reads of one query (as `QueryFeatures` held it)."""

    store: MemoryStore
    query: str
    qvec: npt.NDArray[np.float32]
    fused_ids: list[int]
    passage_ids: list[int]
    lex_list: list[int]
    vec_list: list[int]
    max_lex: float
    max_sim: float
    max_passage_sim: float
    named: list[str]
    window: tuple[int, int] | None
    asks_when: bool
    fact_time: tuple[str, int | None, int | None]
    allowed: Any
    #: the plane's configuration (time_window_nodes, feedback_weight, ...)
    cfg: Any
    window_scan: int
    best_passage: dict[int, int] = field(default_factory=dict)
    topical: dict[int, float] = field(default_factory=dict)
    episode_strength: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fact_state = FactState(*self.fact_time)

    def signals(self, ids: list[int]) -> Signals:
        rows, best = self.store.read_signals(
            self.query,
            self.qvec,
            ids,
            lexical_ranked=self.lex_list,
            vector_ranked=self.vec_list,
            best_lexical=self.max_lex,
            best_dense=self.max_sim,
            best_passage=self.max_passage_sim,
            named=self.named,
            window=self.window,
            asks_when=self.asks_when,
            allowed=self.allowed,
        )
        self.best_passage.update(zip(ids, best.tolist(), strict=True))
        out: Signals = {name: rows[:, j] for j, name in enumerate(SIGNAL_COLUMNS)}
        if self.fact_time[0] != "neutral" and ids and self.store.supersedes_count:
            cols = self.fact_state.signals(
                self.store,
                ids,
                query=self.query,
                vector=self.qvec,
                best_lexical=self.max_lex,
                best_dense=self.max_sim,
                allowed=self.allowed,
            )
            if cols is not None:
                out.update(
                    valid_at_query_time=cols[:, 0],
                    superseded=cols[:, 1],
                    not_yet_valid=cols[:, 2],
                    chain_match=cols[:, 3],
                )
        return out

    def pool(self) -> tuple[list[int], Signals, dict[str, int]]:
        cfg = self.cfg
        store = self.store
        ids = [int(i) for i in self.fused_ids]
        seen = set(ids)
        window = self.window
        if window is not None and cfg.time_window_nodes:
            inside = [
                n
                for n in store.timeline_window(*window, allowed=self.allowed).tolist()
                if n not in seen
            ]
            if len(inside) > cfg.time_window_nodes:
                step = max(1, len(inside) // self.window_scan)
                inside = inside[::step][: self.window_scan]
                lex = store.lexical_scores(self.query, inside, allowed=self.allowed).tolist()
                sims = store.similarities(self.qvec, inside).tolist()
                top_lex, top_sim = max(lex), max(sims)
                match = {
                    n: share_of_best(a, top_lex) + share_of_best(b, top_sim)
                    for n, a, b in zip(inside, lex, sims, strict=True)
                }
                inside = sorted(inside, key=lambda n: (-match[n], n))[: cfg.time_window_nodes]
            for node_id in inside:
                seen.add(node_id)
                ids.append(node_id)
        in_window = len(ids) - len(self.fused_ids)
        for node_id in self.passage_ids:
            if node_id not in seen:
                seen.add(node_id)
                ids.append(node_id)
        sources = {
            "fused": len(self.fused_ids),
            "time_window": in_window,
            "passages": len(ids) - len(self.fused_ids) - in_window,
        }
        sigs = self.signals(ids)
        raw = dict(zip(ids, plain_match_columns(sigs).tolist(), strict=True))
        if cfg.feedback_weight > 0 and cfg.feedback_nodes > 0 and ids:
            top = sorted(ids, key=lambda n: (-raw[n], n))[: cfg.feedback_nodes]
            centroid = store.mean_embedding(top)
            moved = self.qvec + cfg.feedback_weight * centroid
            norm = float(np.linalg.norm(moved))
            if norm > 0:
                self.qvec = (moved / norm).astype(np.float32)
                sims = store.similarities(self.qvec, ids)
                self.max_sim = float(sims.max())
                p_sims, p_idx = store.passage_similarities(self.qvec, ids)
                self.max_passage_sim = float(p_sims.max())
                self.best_passage.update(zip(ids, p_idx.tolist(), strict=True))
                sims64 = sims.astype(np.float64)
                sigs["dense"] = share_of_best_columns(sims64, self.max_sim)
                sigs["dense_raw"] = np.fmin(1.0, np.fmax(0.0, sims64))
                sigs["dense_passage"] = share_of_best_columns(
                    p_sims.astype(np.float64), self.max_passage_sim
                )
                raw = dict(zip(ids, plain_match_columns(sigs).tolist(), strict=True))
        strongest = sorted(ids, key=lambda n: (-raw[n], n))[: cfg.context_seeds]
        context = []
        for node_id in strongest:
            for other, _w in store.temporal_context(
                node_id,
                allowed=self.allowed,
                second_step_decay=cfg.second_step_decay,
                reply_link=cfg.reply_link,
            ):
                if other not in seen:
                    seen.add(other)
                    context.append(other)
        if context:
            sigs = concat_signals([sigs, self.signals(context)], [len(ids), len(context)])
            ids += context
        sources["context"] = len(context)
        chained = []
        relatives = (
            self.fact_state.chain_relatives(store, strongest, allowed=self.allowed)
            if store.supersedes_count
            else []
        )
        for other in relatives:
            if other not in seen:
                seen.add(other)
                chained.append(other)
        if chained:
            sigs = concat_signals([sigs, self.signals(chained)], [len(ids), len(chained)])
            ids += chained
        sources["supersedes"] = len(chained)
        return ids, sigs, sources

    # -- the support of anchors and of a round's candidates ----------------------

    def supporting_match(self, sigs: Signals) -> npt.NDArray[np.float64]:
        """Plain match, or 0 for a fact that held at none of a named time."""
        match = plain_match_columns(sigs)
        held = sigs.get("valid_at_query_time")
        if self.fact_time[0] != "dated" or held is None:
            return match
        return np.where(held <= 0.0, 0.0, match)

    def context_matches(self, ids: list[int], own: list[float] | None = None) -> Any:
        rows = self.store.context_matches(
            ids,
            list(self.topical),
            list(self.topical.values()),
            own,
            allowed=self.allowed,
            second_step_decay=self.cfg.second_step_decay,
            reply_link=self.cfg.reply_link,
        )
        if own is not None:
            self.topical.update(zip(ids, own, strict=True))
        return rows

    def anchor_context(self, ids: list[int], sigs: Signals) -> npt.NDArray[np.float64]:
        raw = self.topical = dict(zip(ids, self.supporting_match(sigs).tolist(), strict=True))
        by_episode: dict[int, list[float]] = {}
        episodes = self.store.episode_keys(ids).tolist()
        for n, ep in zip(ids, episodes, strict=True):
            by_episode.setdefault(ep, []).append(raw[n])
        self.episode_strength = {
            ep: sum(sorted(v, reverse=True)[:3]) / 3 for ep, v in by_episode.items() if ep
        }
        near = self.context_matches(ids)
        strength = [self.episode_strength.get(ep, 0.0) for ep in episodes]
        return np.column_stack([near, np.array(strength, dtype=np.float64)])

    def round(
        self, ids: list[int], from_nodes: list[int], evidence: list[int]
    ) -> tuple[Signals, npt.NDArray[np.float64]]:
        sigs = self.signals(ids)
        repeats = self.store.max_similarities(ids, evidence)
        strength = self.episode_strength.get
        episodes = [strength(ep, 0.0) for ep in self.store.episode_keys(ids).tolist()]
        near = self.context_matches(ids, self.supporting_match(sigs).tolist())
        same = self.store.same_session(ids, from_nodes)
        extra = np.column_stack(
            [repeats, near[:, 0], near[:, 1], near[:, 2], np.array(episodes), same]
        )
        return sigs, extra


def reference_item(
    store: MemoryStore,
    qvec: npt.NDArray[np.float32],
    allowed: Any,
    node_id: int,
    score: float,
    via: Any,
) -> Any:
    """A result's evidence item as `QueryRun.item` built it, read by read."""
    from jevmem.plane.derived import ref_of
    from jevmem.plane.results import EvidenceItem
    from jevmem.temporal import describe

    node = store.get(node_id)
    refs = tuple(
        {
            "text": r.text,
            "start": r.start,
            "end": r.end,
            "precision": r.precision,
            "resolved": describe(r),
            "role": "event time, resolved against the observation time",
        }
        for r in (ref_of(t) for t in store.time_refs(node_id))
    )
    facts: dict[str, Any] = {}
    if store.supersedes_count:
        chain = store.fact_chains([node_id], allowed=allowed)[0]
        if chain is not None:
            start, end, olds, news = chain
            facts = {
                "supersedes": tuple(o for o, _ in olds),
                "superseded_by": tuple(n for n, _ in news),
                "valid_from": start,
                "valid_to": end,
            }
    spans = store.passages(node_id)
    if spans:
        _, idx = store.passage_similarities(qvec, [node_id])
        span = spans[int(idx[0])]
    else:
        span = (0, len(node.text))
    return EvidenceItem(
        node_id, node.text, score, node.timestamp, dict(node.provenance), via, refs, span, **facts
    )


def reference_assessment(run: Any, shown: list[int]) -> tuple[float, float, float]:
    """(coverage, known_terms, covered_terms) of an assessment showing
    ``shown``, as `QueryRun.assessment_request` and `term_presence` read them."""
    import math

    store = run.m.store
    plan = run.session.inputs()
    query_tokens, content_tokens = set(plan["tokens"]), set(plan["content_tokens"])
    order = sorted(query_tokens)
    held = np.zeros(len(order), dtype=bool)
    if shown[:5]:
        for row in store.tokens_present(shown[:5], order):
            held |= row
    covered = {t for t, there in zip(order, held.tolist(), strict=True) if there}
    coverage = len(query_tokens & covered) / len(query_tokens) if query_tokens else 1.0
    tokens, freqs, n = store.document_frequencies(run.query, allowed=run.allowed)
    idf = {
        t: (math.log1p(n / (f + 0.5)), f > 0)
        for t, f in zip(tokens, freqs, strict=True)
        if t in content_tokens
    }
    total = sum(w for w, _ in idf.values())
    if total <= 0:
        return coverage, 1.0, 1.0
    known = sum(w for w, seen in idf.values() if seen) / total
    hit = sum(w for t, (w, _) in idf.items() if t in covered) / total
    return coverage, known, hit

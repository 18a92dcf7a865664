"""A query's read path (SPEC §3) as a generator of controller requests, and its result."""

from __future__ import annotations

import math
import time
from operator import itemgetter
from typing import Any

import numpy as np

from jevmem._core import Traversal
from jevmem.controller import catalogue
from jevmem.controller.types import CandidateQuestions, CandidateTable, DecisionRequest
from jevmem.plane.config import ASSESSED_ITEMS, REPLACED_BELOW, VIEWS, Steps
from jevmem.plane.derived import ref_of
from jevmem.plane.query_features import QueryFeatures
from jevmem.plane.results import EvidenceItem, SearchResult, Via
from jevmem.plane.signals import (
    SCORE_ROW,
    answer_value,
    evidence_scores,
    round_questions,
    round_values,
)
from jevmem.temporal import describe


class QueryRun(QueryFeatures):
    """One query's read path as a generator of controller requests."""

    # -- the loop --------------------------------------------------------------

    def steps(self) -> Steps:
        store = self.m.store
        cfg = self.m.config
        anchor_ids, anchor_sig = self.pool()
        # Support of a pool node: how strongly the nodes around it in time
        # (adjacent turns of a dialogue, steps of a task) match the query, and
        # how strongly its episode does (mean of the episode's best three).
        near = self.session.anchor_context(
            second_step_decay=cfg.second_step_decay, reply_link=cfg.reply_link
        )
        anchor_sig.update(
            support=near[:, 0],
            prev_match=near[:, 1],
            next_match=near[:, 2],
            episode_support=near[:, 3],
            edge_weight=np.ones(len(anchor_ids)),
        )
        cands = CandidateTable(anchor_ids, self.texts_of(anchor_ids), anchor_sig)
        scoring_q = round_questions(catalogue.anchor_questions, len(cands))
        got = yield [
            DecisionRequest(
                "routing", {"query": self.query_state()}, catalogue.routing_questions()
            ),
            DecisionRequest(
                "scoring", {"query": self.query_state(), "candidates": cands}, scoring_q
            ),
        ]
        route = {q.id: answer_value(got[0][q.id]) for q in catalogue.routing_questions()}
        self.routing = {v: route[v] for v in VIEWS}
        relevance = self.relevance
        # two answers per anchor, in question order: relevance, support
        assert scoring_q.kinds == ("score.relevance", "score.support")
        scored = round_values(got[1], scoring_q)
        relevance.update(zip(anchor_ids, scored[:, 0].tolist(), strict=True))
        # A seed's score: its own relevance, lifted by support from its neighbours.
        anchors = list(
            zip(anchor_ids, evidence_scores(scored[:, 0], scored[:, 1]).tolist(), strict=True)
        )
        # best first, ties by id: two stable sorts instead of a tuple key per anchor
        anchors.sort(key=itemgetter(0))
        anchors.sort(key=itemgetter(1), reverse=True)
        t = store.traverse(
            tuple(self.routing[v] for v in VIEWS),  # type: ignore[arg-type]
            anchors[: max(cfg.anchors, self.k)],
            multi_hop=route["multi_hop"],
            recency=route["recency"],
            query_vector=self.qvec,
            now=self.now,
            config=cfg.traversal,
            calls_used=1,
            elapsed_s=time.perf_counter() - self.t0,
            allowed=self.allowed,
        )
        self.traversal = t
        while t.phase != "done":
            if t.phase == "assess":
                got = yield [self.assessment_request(t)]
                answer = got[0]
                vals = tuple(
                    answer_value(answer[n])
                    for n in ("sufficiency", "usefulness", "missing", "contradiction")
                )
                self.assessment = vals  # type: ignore[assignment]
                # what the request showed (the evidence has not changed since)
                self.assessed_top = self.shown
                t.assess(*vals)
                self.ranking = None
            elif t.phase == "expand":
                found = t.expand()
                self.ranking = None
                if not found:
                    continue
                request = self.scoring_request(t, found)
                got = yield [request]
                # one row per candidate, its four questions in order (SCORE_ROW)
                qs = request.questions
                assert isinstance(qs, CandidateQuestions) and qs.kinds == SCORE_ROW
                rows = round_values(got[0], qs).astype(np.float32)
                nodes = [c.node for c in found]
                rel64, sup64 = rows[:, 0].astype(np.float64), rows[:, 3].astype(np.float64)
                relevance.update(zip(nodes, rel64.tolist(), strict=True))
                self.evidence_score.update(
                    zip(nodes, evidence_scores(rel64, sup64).tolist(), strict=True)
                )
                t.score(rows)
                self.ranking = None
            else:  # "score" without candidates cannot happen; guard anyway
                break
        # A traversal that stops right after a scoring round (visited or edge
        # limit) was last assessed on less evidence than it returns: assess
        # once more, so the result's sufficiency describes its own evidence,
        # when the call budget and the time allow.
        limits = cfg.traversal.as_dict()
        if (
            [e.node for e in self.ranked(t)[:ASSESSED_ITEMS]] != self.assessed_top
            and int(t.trace()["controller_calls"]) < int(limits["max_controller_calls"])  # type: ignore[call-overload]
            and time.perf_counter() - self.t0 < float(limits["max_wall_s"])  # type: ignore[arg-type]
        ):
            got = yield [self.assessment_request(t)]
            self.assessment = tuple(  # type: ignore[assignment]
                answer_value(got[0][n])
                for n in ("sufficiency", "usefulness", "missing", "contradiction")
            )
            self.final_assessment = True

    def assessment_request(self, t: Traversal) -> DecisionRequest:
        text = self.text
        top = self.ranked(t)[:ASSESSED_ITEMS]
        self.shown = [e.node for e in top]
        ev = []
        # the query's tokens the best five items contain
        covered = self.tokens_in([e.node for e in top[:5]])
        self.coverages([e.node for e in top])
        self.texts_of([e.node for e in top])()  # one read for all
        for e in top:
            ev.append(
                {
                    "id": e.node,
                    "text": text(e.node),
                    "score": self.final_score.get(e.node, e.score),
                    "signals": {
                        "relevance": self.relevance.get(e.node, 0.0),
                        "entity_ok": self.entity_ok.get(e.node, 1.0),
                        "content_coverage": self.coverage_of(e.node)[0],
                        "other_coverage": self.coverage_of(e.node)[1],
                        "dense_raw": self.dense_raw.get(e.node, 0.0),
                    },
                }
            )
        coverage = (
            len(self.query_tokens & covered) / len(self.query_tokens) if self.query_tokens else 1.0
        )
        known_terms, covered_terms = self.term_presence(covered)
        frontier = t.frontier()
        frontier_best = max((self.relevance.get(f, 0.0) for f in frontier), default=0.0)
        return DecisionRequest(
            "assessment",
            {
                "query": self.query_state(),
                "evidence": ev,
                "coverage": coverage,
                "known_terms": known_terms,
                "covered_terms": covered_terms,
                # the query names a person the memory knows as a speaker:
                # whether the evidence is about that person can be checked
                "names_speaker": 1.0 if self.asked_people and self.speakers else 0.0,
                "frontier_best": frontier_best,
            },
            catalogue.assessment_questions(),
        )

    def term_presence(self, covered: set[str]) -> tuple[float, float]:
        """How much of what the query asks the memory has words for: the
        IDF-weighted share of the query's content tokens that occur in any
        node, and the share that occur in the best evidence (``covered``). A
        query about something never discussed uses words the memory lacks,
        whatever the style of the chat."""
        idf = self.term_idf
        if idf is None:
            tokens, freqs, n = self.m.store.document_frequencies(self.query, allowed=self.allowed)
            wanted = self.content_tokens
            idf = self.term_idf = {
                t: (math.log1p(n / (f + 0.5)), f > 0)
                for t, f in zip(tokens, freqs, strict=True)
                if t in wanted
            }
        total = sum(w for w, _ in idf.values())
        if total <= 0:
            return 1.0, 1.0
        known = sum(w for w, seen in idf.values() if seen) / total
        hit = sum(w for t, (w, _) in idf.items() if t in covered) / total
        return known, hit

    def ranked(self, t: Traversal) -> list[Any]:
        """Everything gathered so far, best first. The traversal's transition
        score decides where to go next; the answer ranks every gathered node on
        one scale, the one seeds had. Kept until the traversal next moves
        (`steps` resets it), as the end of a query asks for it up to three times."""
        if self.ranking is None:
            score = self.evidence_score.get
            found = t.result()
            final = {e.node: score(e.node, e.score) for e in found}
            if self.fact_time.stance != "neutral" and self.m.store.supersedes_count:
                self.rank_below_replacements(final)
            self.final_score = final
            self.ranking = sorted(found, key=lambda e: (-final[e.node], e.node))
        return self.ranking

    def rank_below_replacements(self, final: dict[int, float]) -> None:
        """A fact that did not hold at the time the query asks about ranks
        right below the gathered fact of its chain that did (never above it,
        and no further down: the history stays next to the answer)."""
        for node, holders in self.session.replaced():
            if node in final:
                best = max((final[h] for h in holders if h in final), default=None)
                if best is not None and final[node] >= best:
                    final[node] = best * REPLACED_BELOW

    def scoring_request(self, t: Traversal, found: list[Any]) -> DecisionRequest:
        cfg = self.m.config
        ids = [c.node for c in found]
        # in candidate order: a candidate's context reads the topical match of
        # the candidates before it (`ReadSession.round`)
        rows, facts, _, extra = self.session.round(
            ids,
            [c.from_node for c in found],
            [e.node for e in t.result()],
            second_step_decay=cfg.second_step_decay,
            reply_link=cfg.reply_link,
        )
        sigs = self.columns(ids, rows, facts)
        # how much each candidate repeats the evidence so far
        repeats = extra[:, 0]
        sigs.update(
            edge_weight=np.array([float(c.edge_weight) for c in found], dtype=np.float64),
            max_evidence_similarity=repeats,
            novelty=1.0 - repeats,
            # the same support as a seed's: its temporal neighbours and its
            # episode (the edge it came by is judged by usefulness)
            support=extra[:, 1],
            prev_match=extra[:, 2],
            next_match=extra[:, 3],
            episode_support=extra[:, 4],
            # the candidate and the node it was reached from name one session
            same_session=extra[:, 5],
        )
        cands = CandidateTable(ids, self.texts_of(ids), sigs, views=[c.view for c in found])
        qs = round_questions(catalogue.scoring_questions, len(cands))
        return DecisionRequest("scoring", {"query": self.query_state(), "candidates": cands}, qs)

    # -- results ---------------------------------------------------------------

    def items(self, found: list[tuple[int, float, Via | None]]) -> list[EvidenceItem]:
        """The result's evidence, (node, score, via) each, read in one call
        (`ReadSession.evidence`): text, observation time, provenance, the
        grounded time references, the span of the passage that matches the
        query best, and the node's place in a supersedes chain."""
        rows = self.session.evidence(
            [node for node, _, _ in found], chains=bool(self.m.store.supersedes_count)
        )
        out = []
        for (node_id, score, via), row in zip(found, rows, strict=True):
            text, timestamp, provenance, time_refs, passage, chain = row
            refs = tuple(
                {
                    "text": r.text,
                    "start": r.start,
                    "end": r.end,
                    "precision": r.precision,
                    "resolved": describe(r),
                    "role": "event time, resolved against the observation time",
                }
                for r in map(ref_of, time_refs)
            )
            facts: dict[str, Any] = {}
            if chain is not None:
                start, end, olds, news = chain
                facts = {
                    "supersedes": tuple(o for o, _ in olds),
                    "superseded_by": tuple(n for n, _ in news),
                    "valid_from": start,
                    "valid_to": end,
                }
            out.append(
                EvidenceItem(
                    node_id,
                    text,
                    score,
                    timestamp,
                    dict(provenance),
                    via,
                    refs,
                    passage if passage is not None else (0, len(text)),
                    **facts,
                )
            )
        return out

    def simple_result(self) -> SearchResult:
        store = self.m.store
        if self.mode == "lexical":
            ids, scores = store.search_lexical(self.query, self.k, allowed=self.allowed)
            pairs = [(int(i), float(s)) for i, s in zip(ids, scores, strict=True)]
        else:
            pairs = [
                (int(i), float(s))
                for i, s in zip(self.fused_ids[: self.k], self.fused_scores, strict=False)
            ]
        evidence = self.items([(i, s, None) for i, s in pairs])
        trace = {
            "mode": self.mode,
            "controller": None,
            "controller_calls": 0,
            "stop_reason": None,
            "elapsed_s": time.perf_counter() - self.t0,
        }
        return SearchResult(self.query, evidence, trace)

    def result(self) -> SearchResult:
        t = self.traversal
        assert t is not None
        found = []
        for e in self.ranked(t)[: self.k]:
            via = None
            if e.via is not None:
                via = Via(e.via.view, e.via.src, e.via.dst, e.via.edge_weight, e.via.from_node)
            found.append((e.node, self.final_score.get(e.node, e.score), via))
        evidence = self.items(found)
        trace = dict(t.trace())
        cfg = self.m.config.traversal.as_dict()
        trace.update(
            {
                "mode": self.mode,
                "controller": (
                    "local-fallback"
                    if self.fell_back
                    else getattr(self.m.controller, "name", "custom")
                    if self.mode == "full"
                    else "signals"
                ),
                "query_entities": self.query_entities,
                "anchors": len(self.fused_ids),
                # where the ranked pool came from: the fused lists, a time
                # window the query names, the time-order context of the best
                "pool": dict(self.pool_sources),
                "total_elapsed_s": time.perf_counter() - self.t0,
                # one more assessment after the traversal stopped (see steps)
                "final_assessment": self.final_assessment,
                "controller_calls": int(trace["controller_calls"]) + self.final_assessment,
                "thresholds": {
                    "theta_suff": cfg["theta_suff"],
                    "theta_missing": cfg["theta_missing"],
                    "theta_contradiction": cfg["theta_contradiction"],
                },
            }
        )
        s = self.assessment
        return SearchResult(
            self.query,
            evidence,
            trace,
            *(s if s is not None else (None, None, None, None)),
        )

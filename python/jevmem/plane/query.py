"""A query's read path (SPEC §3) as a generator of controller requests, and its result."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jevmem._core import Traversal
from jevmem.controller import catalogue
from jevmem.controller.types import CandidateQuestions, CandidateTable, DecisionRequest
from jevmem.plane.config import ASSESSED_ITEMS, REPLACED_BELOW, VIEWS, Steps
from jevmem.plane.derived import time_ref_entry
from jevmem.plane.query_features import QueryFeatures
from jevmem.plane.results import EvidenceItem, SearchResult, Via, evidence_item
from jevmem.plane.signals import (
    SCORE_ROW,
    answer_value,
    evidence_scores,
    round_questions,
    round_values,
)


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
        cands = CandidateTable.of_plane(anchor_ids, self.texts_of(anchor_ids), anchor_sig)
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
        # two answers per anchor, in question order: relevance, support
        assert scoring_q.kinds == ("score.relevance", "score.support")
        scored = round_values(got[1], scoring_q)
        self.session.record(anchor_ids, scored[:, 0])
        # A seed's score: its own relevance, lifted by support from its
        # neighbours; the seeds are the best, ties by id (one lexsort: the
        # order two stable sorts by id, then by score descending, give)
        seed_scores = evidence_scores(scored[:, 0], scored[:, 1])
        ids = np.asarray(anchor_ids, dtype=np.int64)
        best = np.lexsort((ids, -seed_scores))[: max(cfg.anchors, self.k)]
        t = store.traverse(
            tuple(self.routing[v] for v in VIEWS),  # type: ignore[arg-type]
            list(zip(ids[best].tolist(), seed_scores[best].tolist(), strict=True)),
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
                self.session.record(nodes, rel64, evidence_scores(rel64, sup64))
                t.score(rows)
                self.ranking = None
            else:  # "score" without candidates cannot happen; guard anyway
                break
        # A traversal that stops right after a scoring round (visited or edge
        # limit) was last assessed on less evidence than it returns: assess
        # once more, so the result's sufficiency describes its own evidence,
        # when the call budget and the time allow.
        limits = cfg.traversal_limits
        if (
            [node for node, _ in self.ranked(t)[:ASSESSED_ITEMS]] != self.assessed_top
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
        top = self.ranked(t)[:ASSESSED_ITEMS]
        self.shown = [node for node, _ in top]
        # read in the core (`ReadSession.assess`): each item's signals and
        # coverage, the share of the query's tokens the best five hold, the
        # IDF-weighted share of its content words the memory knows (a query
        # about something never discussed uses words the memory lacks,
        # whatever the style of the chat) and the best five hold
        items, coverage, known_terms, covered_terms, frontier_best = self.session.assess(
            top, t.frontier()
        )
        ev = [
            {
                "id": node,
                "text": text,
                "score": score,
                "signals": {
                    "relevance": relevance,
                    "entity_ok": entity_ok,
                    "content_coverage": content,
                    "other_coverage": other,
                    "dense_raw": dense_raw,
                },
            }
            for node, score, relevance, entity_ok, content, other, dense_raw, text in items
        ]
        return DecisionRequest(
            "assessment",
            {
                "query": self.query_state(),
                "evidence": ev,
                "coverage": coverage,
                "known_terms": known_terms,
                "covered_terms": covered_terms,
                # the query names a person the memory knows (a speaker, or a
                # label heading its transcript lines): whether the evidence is
                # about that person can be checked
                "names_speaker": 1.0 if self.asked_people and self.speakers else 0.0,
                "frontier_best": frontier_best,
                # how many nodes the search could read (a scoped one: its
                # scope's): what evidence scores mean moves with it
                "memory_nodes": (
                    len(self.allowed) if self.allowed is not None else len(self.m.store)
                ),
            },
            catalogue.assessment_questions(),
        )

    def ranked(self, t: Traversal) -> list[tuple[int, float]]:
        """Everything gathered so far, best first, as (node, score): the
        traversal's transition score decides where to go next; the answer
        ranks every gathered node on one scale, the one seeds had, with the
        fact of a chain that held at the asked time in the place of a better
        ranked one that did not, and that one right below it, and what other
        speakers said lowered when the query asks about one speaker
        (`ReadSession.rank`). Kept until the traversal next moves (`steps`
        resets it), as the end of a query asks for it up to three times."""
        if self.ranking is None:
            self.ranking = self.session.rank(
                t,
                replaced_below=REPLACED_BELOW,
                other_speaker_share=self.m.config.other_speaker_share,
            )
        return self.ranking

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
        cands = CandidateTable.of_plane(
            ids, self.texts_of(ids), sigs, views=[c.view for c in found]
        )
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
            # a copy of each reference's entry: a result's dicts are the caller's
            refs = tuple(dict(time_ref_entry(tuple(r))) for r in time_refs)
            supersedes: tuple[int, ...] = ()
            superseded_by: tuple[int, ...] = ()
            valid_from = valid_to = None
            if chain is not None:
                valid_from, valid_to, olds, news = chain
                supersedes = tuple(o for o, _ in olds)
                superseded_by = tuple(n for n, _ in news)
            out.append(
                evidence_item(
                    node_id,
                    text,
                    score,
                    timestamp,
                    dict(provenance),
                    via,
                    refs,
                    passage if passage is not None else (0, len(text)),
                    supersedes,
                    superseded_by,
                    valid_from,
                    valid_to,
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
        came_by = {e.node: e.via for e in t.result()}
        found = []
        for node, score in self.ranked(t)[: self.k]:
            via = None
            if (c := came_by[node]) is not None:
                via = Via(c.view, c.src, c.dst, c.edge_weight, c.from_node)
            found.append((node, score, via))
        evidence = self.items(found)
        trace = dict(t.trace())
        cfg = self.m.config.traversal_limits
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
                # the one speaker asked about: what others said ranks lower
                "speaker_asked": self.session.speaker_asked,
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

"""The default System-One controller: in-process, deterministic, no model.

It answers every question kind from fast signals: the similarities, overlaps
and time gaps the memory plane puts in each request's ``signals``, plus cue
lexicons read off the texts. Each answer is a smooth function of its inputs
(never a constant), so a model-backed controller can replace it question by
question without changing the memory code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem.controller import changes
from jevmem.controller.catalogue import REPRESENTATION_OPTIONS, TEMPORAL_LABELS
from jevmem.controller.changes import change_statements, denials
from jevmem.controller.cues import (
    CAUSE,
    EPISODIC,
    MULTI,
    NEGATION,
    PREFERENCE,
    PROCEDURAL,
    RECENT,
    SEMANTIC,
    WHY,
    Cue,
)
from jevmem.controller.scoring import clip_columns, clip_value, score_columns, score_rounds
from jevmem.controller.types import (
    PAIR_NOULS,
    Answer,
    CandidateQuestions,
    CandidateTable,
    Choice,
    ChoiceAnswer,
    DecisionRequest,
    Noul,
    NoulAnswer,
    PairAnswers,
    PairQuestions,
)
from jevmem.errors import UnknownQuestionKindError
from jevmem.temporal import query_time_cues

__all__ = ["LocalController", "clear_text_caches", "question_index", "relation_arrays"]


def clear_text_caches() -> None:
    """Empty the caches keyed by observation texts (see `jevmem.Memory.forget`)."""
    changes.clear_caches()
    for cached in (_count, cause_cue):
        cached.cache_clear()


def _squash(x: float, mid: float = 0.5, steep: float = 8.0) -> float:
    """Logistic map of a raw signal onto (0, 1), centred on ``mid``."""
    return 1.0 / (1.0 + math.exp(-steep * (x - mid)))


def _density(pattern: Cue, text: str, per: float = 2.0) -> float:
    """Saturating count of cue matches: 0 -> 0, `per` matches -> ~0.63, many -> 1."""
    return 1.0 - math.exp(-_count(pattern, text) / per)


@lru_cache(maxsize=8192)
def _count(pattern: Cue, text: str) -> int:
    # A write asks several questions about the same texts; count each cue once.
    return pattern.count(text)


def _sig(item: Mapping[str, Any], name: str, default: float = 0.0) -> float:
    v = item.get("signals", {}).get(name, default)
    return default if v is None else float(v)


class LocalController:
    """Answers every question kind from signals and cue lexicons, in microseconds."""

    name = "local"

    def __init__(self) -> None:
        self._handlers: dict[
            str, Callable[[DecisionRequest, Noul | Choice, int | None], Answer]
        ] = {
            "type.episodic": self._typing,
            "type.semantic": self._typing,
            "type.procedural": self._typing,
            "type.preference": self._typing,
            "relation.semantic": self._relation,
            "relation.causal_candidate_to_new": self._relation,
            "relation.causal_new_to_candidate": self._relation,
            "relation.same_episode": self._relation,
            "relation.entity_alias": self._relation,
            "relation.supersedes": self._relation,
            "relation.temporal": self._temporal_choice,
            "consolidate.redundant": self._consolidation,
            "consolidate.contradicting": self._consolidation,
            "consolidate.obsolete": self._consolidation,
            "consolidate.extra_link": self._consolidation,
            "consolidate.representation": self._representation,
            "route.semantic": self._routing,
            "route.temporal": self._routing,
            "route.causal": self._routing,
            "route.entity": self._routing,
            "route.multi_hop": self._routing,
            "route.recency": self._routing,
            "score.relevance": self._scoring,
            "score.relation_usefulness": self._scoring,
            "score.novelty": self._scoring,
            "score.support": self._scoring,
            "assess.sufficiency": self._assessment,
            "assess.usefulness": self._assessment,
            "assess.missing": self._assessment,
            "assess.contradiction": self._assessment,
        }

    @staticmethod
    def kinds() -> tuple[str, ...]:
        return tuple(LocalController()._handlers)

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        out: list[MutableMapping[str, Answer]] = []
        handlers = self._handlers
        # every relation round of the batch as one set of columns
        rounds = [k for k, req in enumerate(requests) if type(req.questions) is PairQuestions]
        paired = (
            dict(zip(rounds, _pair_rounds([requests[k] for k in rounds]), strict=True))
            if rounds
            else {}
        )
        # whole scoring rounds: answered as columns, a batch's together (see
        # `scoring`), and put in their places after the loop
        scored: list[int] = []
        for k, req in enumerate(requests):
            qs = req.questions
            if type(qs) is CandidateQuestions and _SCORING_KINDS.issuperset(qs.kinds):
                scored.append(k)
                out.append({})
                continue
            if k in paired:
                out.append(paired[k])
                continue
            answers: dict[str, Answer] = {}
            # the request's relation answers, every pair and kind at once
            relations: npt.NDArray[np.float64] | None = None
            # an assessment's four answers from one reading of its evidence,
            # an observation's four types from one reading of its text
            assessed: dict[str, float] | None = None
            typed: dict[str, float] | None = None
            for q in qs:
                kind = q.kind
                if kind in _TYPING_KINDS:
                    if typed is None:
                        typed = _typing_values(req.state)
                    answers[q.id] = NoulAnswer(typed[kind])
                    continue
                if kind in _ASSESSMENT_KINDS:
                    if assessed is None:
                        assessed = _assessment_values(req.state)
                    answers[q.id] = NoulAnswer(assessed[kind])
                    continue
                if kind in _RELATION_COLUMN:
                    i = question_index(q.id)
                    assert i is not None
                    if relations is None:
                        relations = relation_arrays([req.state])[0]
                    answers[q.id] = NoulAnswer(float(relations[i, _RELATION_COLUMN[kind]]))
                    continue
                if kind in _SCORING_KINDS:
                    # most of a query's questions: answered without the
                    # handler table (same arithmetic as _scoring)
                    i = question_index(q.id)
                    assert i is not None
                    answers[q.id] = NoulAnswer(_score(req.state, kind, i))
                    continue
                handler = handlers.get(kind)
                if handler is None:
                    raise UnknownQuestionKindError(
                        f"the local controller has no answer for question kind {kind!r}"
                    )
                answers[q.id] = handler(req, q, question_index(q.id))
            out.append(answers)
        if scored:
            asked: list[tuple[Mapping[str, Any], CandidateQuestions]] = []
            for k in scored:
                qs = requests[k].questions
                assert type(qs) is CandidateQuestions
                asked.append((requests[k].state, qs))
            answered = score_rounds(asked) if len(asked) > 1 else [score_columns(*asked[0])]
            for k, got in zip(scored, answered, strict=True):
                out[k] = got
        return out

    # ---- typing ------------------------------------------------------------

    def _typing(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        return NoulAnswer(_typing_values(req.state)[q.kind])

    # ---- relations ---------------------------------------------------------

    def _relation(self, req: DecisionRequest, q: Noul | Choice, i: int | None) -> Answer:
        assert i is not None
        return NoulAnswer(float(relation_arrays([req.state])[0][i, _RELATION_COLUMN[q.kind]]))

    def _temporal_choice(self, req: DecisionRequest, q: Noul | Choice, i: int | None) -> Answer:
        assert i is not None and isinstance(q, Choice)
        return _temporal_of(req.state, i)

    # ---- consolidation -----------------------------------------------------

    def _consolidation(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        focus = req.state["focus"]
        nbrs: list[Mapping[str, Any]] = list(req.state.get("neighbours", []))
        if not nbrs:
            return NoulAnswer(0.0)
        best = max(nbrs, key=lambda n: _sig(n, "vector") + _sig(n, "lexical"))
        sim = 0.6 * _sig(best, "vector") + 0.4 * _sig(best, "lexical")
        if q.kind == "consolidate.redundant":
            return NoulAnswer(clip_value(_squash(sim, mid=0.85, steep=14.0)))
        focus_neg = NEGATION.found(str(focus["text"]))
        if q.kind == "consolidate.contradicting":
            flips = [
                0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical")
                for n in nbrs
                if NEGATION.found(str(n["text"])) != focus_neg
            ]
            return NoulAnswer(
                clip_value(_squash(max(flips, default=0.0), mid=0.7, steep=10.0) * 0.8)
            )
        if q.kind == "consolidate.obsolete":
            newer = [
                0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical")
                for n in nbrs
                if _sig(n, "newer") > 0
            ]
            return NoulAnswer(
                clip_value(_squash(max(newer, default=0.0), mid=0.75, steep=10.0) * 0.7)
            )
        # extra_link: a close neighbour not yet connected
        unlinked = [
            0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical")
            for n in nbrs
            if not _sig(n, "linked")
        ]
        return NoulAnswer(clip_value(_squash(max(unlinked, default=0.0), mid=0.6, steep=10.0)))

    def _representation(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        nbrs: list[Mapping[str, Any]] = list(req.state.get("neighbours", []))
        sims = sorted(
            (0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical") for n in nbrs), reverse=True
        )
        tight = sum(sims[:3]) / 3 if sims else 0.0
        merge = _squash(tight, mid=0.85, steep=14.0)
        promote = _squash(tight, mid=0.7, steep=10.0) * 0.5 * (1.0 - merge)
        uncertain = 0.15
        keep = max(0.05, 1.0 - merge - promote - uncertain)
        raw = dict(zip(REPRESENTATION_OPTIONS, (keep, merge, promote, uncertain), strict=True))
        total = sum(raw.values())
        dist = {k: v / total for k, v in raw.items()}
        return ChoiceAnswer(max(dist, key=lambda k: dist[k]), dist)

    # ---- routing -----------------------------------------------------------

    def _routing(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        query = req.state["query"]
        text = str(query["text"])
        which = q.kind.split(".", 1)[1]
        if which == "semantic":
            # topical context helps unless the query is a pure date or list lookup
            return NoulAnswer(clip_value(0.6 + 0.3 * min(1.0, len(text.split()) / 12.0)))
        if which == "temporal":
            cues = query.get("time") or query_time_cues(text)
            return NoulAnswer(clip_value(0.15 + 0.85 * float(cues["score"])))
        if which == "causal":
            return NoulAnswer(clip_value(0.1 + 0.85 * _density(WHY, text, per=1.0)))
        if which == "entity":
            n = len(query.get("entities", []))
            return NoulAnswer(clip_value(0.2 + 0.35 * n))
        if which == "multi_hop":
            n = len(query.get("entities", []))
            return NoulAnswer(
                clip_value(0.15 + 0.5 * _density(MULTI, text, per=2.0) + 0.15 * max(0, n - 1))
            )
        return NoulAnswer(clip_value(0.05 + 0.9 * _density(RECENT, text, per=1.0)))

    # ---- candidate scoring -------------------------------------------------

    def _scoring(self, req: DecisionRequest, q: Noul | Choice, i: int | None) -> Answer:
        assert i is not None
        return NoulAnswer(_score(req.state, q.kind, i))

    # ---- assessment --------------------------------------------------------

    def _assessment(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        return NoulAnswer(_assessment_values(req.state)[q.kind])


def _temporal_of(state: Mapping[str, Any], i: int) -> ChoiceAnswer:
    """``relation.temporal`` for pair ``i`` of a relation round."""
    sig, _, _ = _pair_signals([{"candidates": [state["candidates"][i]]}])
    return _temporal_answer(float(sig["inserted_before"][0]), float(sig["same_session"][0]))


def _temporal_answer(inserted_before: float, same_session: float) -> ChoiceAnswer:
    """``relation.temporal`` from a pair's two signals (read as `_pair_signals` reads them)."""
    # Without timestamps, insertion order is the only evidence: earlier ids
    # were observed first, which weakly suggests "before".
    # clipped: a signal outside [0, 1] must not make a weight negative
    order = clip_value(inserted_before)
    same = clip_value(same_session)
    weights = {label: 0.05 for label in TEMPORAL_LABELS}
    weights["before"] += 0.35 * order
    weights["after"] += 0.35 * (1.0 - order)
    weights["same_time"] += 0.2 * same
    weights["unknown"] += 0.3
    total = sum(weights.values())
    dist = {k: v / total for k, v in weights.items()}
    return ChoiceAnswer(max(dist, key=lambda k: dist[k]), dist)


def _assessment_values(state: Mapping[str, Any]) -> dict[str, float]:
    """The answers to the four ``assess.*`` kinds, from one reading of the evidence."""
    evidence: list[Mapping[str, Any]] = list(state.get("evidence", []))
    coverage = float(state.get("coverage", 0.0))
    # weighed by how well each item ranks as evidence (its score)
    weights = [0.6 + 0.4 * clip_value(float(e.get("score", 0.0))) for e in evidence]

    # An item answers the query only if it covers what is asked AND is
    # about whom it is asked: a strong topical match about someone else
    # (the usual unanswerable question) must not count, and evidence that
    # asserts the same content about another person counts against.
    def strength(name: str) -> float:
        return max((_sig(e, name) * w for e, w in zip(evidence, weights, strict=True)), default=0.0)

    grounded = strength("content_coverage")
    against = strength("other_coverage")
    if grounded + against > 0:
        # 1: asserted about whom it asks, nobody else; 0.5: as much about
        # someone else; 0: only about someone else
        sufficiency = clip_value(0.5 + 0.5 * (grounded - against))
    else:
        # nothing asserts the content either way: topical match alone never
        # gets past undecided
        best = max((clip_value(float(e.get("score", 0.0))) for e in evidence), default=0.0)
        sufficiency = clip_value(0.5 * best)
    top = sorted(evidence, key=lambda e: -_sig(e, "relevance"))[:5]
    negs = [NEGATION.found(str(e.get("text", ""))) for e in top]
    mixed = 0.0 if not negs else min(sum(negs), len(negs) - sum(negs)) / len(negs)
    frontier = float(state.get("frontier_best", 0.0))
    # What is missing is the part of the query no item states about whom it
    # asks: read off the best item's coverage as it stands. How well that
    # item ranks is the sufficiency's business; weighed by it here, an item
    # that states the whole answer at an evidence score below 0.63 left
    # "missing" at 0.15 or more and the early stop out of reach.
    said = max((_sig(e, "content_coverage") for e in evidence), default=0.0)
    return {
        "assess.sufficiency": sufficiency,
        "assess.missing": clip_value(1.0 - max(said, 0.5 * coverage)),
        "assess.contradiction": clip_value(0.4 * mixed),
        "assess.usefulness": clip_value((1.0 - grounded) * (0.3 + 0.7 * frontier)),
    }


_TYPING_CUES = {
    "type.episodic": EPISODIC,
    "type.semantic": SEMANTIC,
    "type.procedural": PROCEDURAL,
    "type.preference": PREFERENCE,
}
_TYPING_KINDS = frozenset(_TYPING_CUES)


def _typing_values(state: Mapping[str, Any]) -> dict[str, float]:
    """The answers to the four ``type.*`` kinds: how densely the text carries
    each type's cue words."""
    text = str(state["observation"]["text"])
    got = {kind: _density(cue, text) for kind, cue in _TYPING_CUES.items()}
    if state["observation"].get("time_refs"):
        # a grounded time reference dates a happening
        got["type.episodic"] = max(got["type.episodic"], 0.8)
    return {kind: clip_value(v) for kind, v in got.items()}


#: Each ``relation.*`` Noul's column in `relation_arrays` (`PAIR_NOULS` order).
_RELATION_COLUMN = {f"relation.{name}": j for j, name in enumerate(PAIR_NOULS)}
_ALIAS_COLUMN = PAIR_NOULS.index("entity_alias")


def _pair_rounds(requests: Sequence[DecisionRequest]) -> list[PairAnswers]:
    """Relation rounds (`PairQuestions`) as arrays, every pair of every
    round read at once; an entity alias not asked is 0, a temporal Choice
    is answered where asked."""
    states = [req.state for req in requests]
    sig, texts, sizes = _pair_signals(states)
    arrays = _relation_columns(states, sig, texts, sizes)
    # the temporal Choice's two signals, read off the same columns
    order, same = sig["inserted_before"].tolist(), sig["same_session"].tolist()
    out = []
    at = 0
    for req, values, size in zip(requests, arrays, sizes, strict=True):
        qs = req.questions
        assert isinstance(qs, PairQuestions)
        if len(values) < qs.n_pairs:
            raise IndexError(f"{qs.n_pairs} pairs asked about, {len(values)} given")
        values = values[: qs.n_pairs]
        values[:, _ALIAS_COLUMN] *= qs.alias
        temporal: list[ChoiceAnswer | None] = [None] * qs.n_pairs
        for i in np.flatnonzero(qs.temporal).tolist():
            temporal[i] = _temporal_answer(order[at + i], same[at + i])
        out.append(PairAnswers(qs, values, temporal))
        at += size
    return out


def relation_arrays(states: Sequence[Mapping[str, Any]]) -> list[npt.NDArray[np.float64]]:
    """The relation Nouls of every (new observation, candidate) pair of
    each state, an (n_candidates, 6) array per state in `PAIR_NOULS` order:
    from the pairs' signals (a `PairTable`'s columns or each candidate's
    mapping; NaN reads as absent) and the cue words of the two texts, all
    states' pairs as one set of columns."""
    return _relation_columns(states, *_pair_signals(states))


def _relation_columns(
    states: Sequence[Mapping[str, Any]],
    sig: Mapping[str, npt.NDArray[np.float64]],
    texts: Sequence[Sequence[str]],
    sizes: Sequence[int],
) -> list[npt.NDArray[np.float64]]:
    """`relation_arrays` of states whose pairs' signals are read already (`_pair_signals`)."""
    cue_new: list[float] = []
    cue_old: list[float] = []
    change: list[float] = []
    denied: list[float] = []
    # a candidate said after the new text (a log written out of order): the
    # change, if any, is the candidate's, stated about the new text
    said_later = (sig["older"] < 0.5).tolist()
    at = 0
    for state, olds in zip(states, texts, strict=True):
        new_text = str(state["observation"]["text"])
        cue_new.extend([cause_cue(new_text)] * len(olds))
        cue_old.extend([cause_cue(t) for t in olds])
        forward_change = change_statements(new_text, olds)
        forward_denied = denials(new_text, olds)
        for j, old_text in enumerate(olds):
            if said_later[at + j]:
                forward_change[j] = change_statements(old_text, [new_text])[0]
                forward_denied[j] = denials(old_text, [new_text])[0]
        change.extend(forward_change)
        denied.extend(forward_denied)
        at += len(olds)
    vec, ent, tmp, alias = sig["vector"], sig["entity"], sig["temporal"], sig["alias"]
    out = np.empty((len(vec), len(PAIR_NOULS)))
    with np.errstate(all="ignore"):  # NaN and infinities are clipped to 0, as clip_value does
        match = 0.6 * vec + 0.4 * sig["lexical"]
        # Causal: the cause comes first; the explaining text carries the cue word.
        topical = _squash_column(match, 0.45, 10.0)
        about = 0.6 + 0.4 * np.maximum(ent, tmp)
        # Supersedes: three things must hold together, so the answer is their
        # product: the two are on one topic (vector and lexical match), about
        # one subject (same speaker, a shared entity or an alias), and the
        # one said later says something changed (change words, the old value
        # named as given up, or a flip between asserting and denying).
        on_topic = _squash_column(match, 0.4, 10.0)
        subject = np.maximum(np.maximum(sig["same_speaker"], np.minimum(1.0, 2.0 * ent)), alias)
        on = {
            "semantic": _squash_column(match, 0.55, 10.0),
            "causal_candidate_to_new": topical * (0.25 + 0.75 * np.array(cue_new)) * about,
            "causal_new_to_candidate": topical * (0.25 + 0.75 * (np.array(cue_old) * 0.8)) * about,
            "same_episode": 0.55 * sig["same_session"] + 0.35 * tmp + 0.1 * vec,
            "supersedes": on_topic
            * (0.4 + 0.6 * subject)
            # a denial of what the same speaker asserted changes it too
            * (0.1 + 0.9 * np.maximum(change, np.array(denied) * sig["same_speaker"])),
            "entity_alias": alias * (0.5 + 0.5 * vec),
        }
        for j, name in enumerate(PAIR_NOULS):
            out[:, j] = clip_columns(on[name])
    return np.split(out, np.cumsum(sizes)[:-1]) if sizes else []


def _pair_signals(
    states: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, npt.NDArray[np.float64]], list[list[str]], list[int]]:
    """The `_PAIR_SIGNALS` of every pair of ``states`` as columns (absent
    and NaN read as the default), each state's candidate texts, and how
    many pairs each state has."""
    cols: dict[str, list[npt.NDArray[np.float64]]] = {name: [] for name in _PAIR_SIGNALS}
    texts: list[list[str]] = []
    for state in states:
        cands: Sequence[Mapping[str, Any]] = state["candidates"]
        if isinstance(cands, CandidateTable):
            texts.append(cands.texts)
            for name, parts in cols.items():
                col = cands.columns.get(name)
                parts.append(np.full(len(cands), np.nan) if col is None else col)
        else:
            texts.append([str(c["text"]) for c in cands])
            sigs = [c.get("signals") or {} for c in cands]
            for name, parts in cols.items():
                got = [s.get(name) for s in sigs]
                parts.append(np.array([np.nan if v is None else v for v in got], dtype=np.float64))
    sig = {}
    for name, parts in cols.items():
        col = np.concatenate(parts) if parts else np.zeros(0)
        sig[name] = np.where(np.isnan(col), _PAIR_SIGNALS[name], col)
    return sig, texts, [len(t) for t in texts]


#: The pair signals `relation_arrays` reads, with the value of an absent one.
_PAIR_SIGNALS = {
    "vector": 0.0,
    "lexical": 0.0,
    "entity": 0.0,
    "temporal": 0.0,
    "alias": 0.0,
    "same_speaker": 0.0,
    "same_session": 0.0,
    "older": 1.0,
    "inserted_before": 1.0,
}


def _squash_column(x: npt.NDArray[np.float64], mid: float, steep: float) -> npt.NDArray[np.float64]:
    """`_squash` of every element."""
    return 1.0 / (1.0 + np.exp(-steep * (x - mid)))


@lru_cache(maxsize=8192)
def cause_cue(text: str) -> float:
    """How densely a text uses cause words ("because", "due to", "led to"), in [0, 1]."""
    # a text is read as a new observation once and as a candidate many times
    return _density(CAUSE, text, per=1.0)


_ASSESSMENT_KINDS = frozenset(
    ("assess.sufficiency", "assess.usefulness", "assess.missing", "assess.contradiction")
)

_SCORING_KINDS = frozenset(
    ("score.relevance", "score.relation_usefulness", "score.novelty", "score.support")
)


def _score(state: Mapping[str, Any], kind: str, i: int) -> float:
    """The answer to a ``score.*`` question about candidate ``i``."""
    cand = state["candidates"][i]
    if kind == "score.relevance":
        return relevance(cand)
    sig = cand.get("signals", {})
    if kind == "score.relation_usefulness":
        route = state["query"].get("routing", {})
        p = float(route.get(cand.get("view", "semantic"), 0.5))
        return clip_value(
            0.5 * p + 0.3 * _num(sig, "edge_weight", 0.0) + 0.2 * _num(sig, "same_session", 0.0)
        )
    if kind == "score.novelty":
        return clip_value(1.0 - _num(sig, "max_evidence_similarity", 0.0))
    # Support from the temporal neighbours, and from the whole episode when
    # the memory plane measured it (two thirds / one third).
    near = _num(sig, "support", 0.0)
    return clip_value((2.0 * near + _num(sig, "episode_support", near)) / 3.0)


def _num(signals: Mapping[str, Any], name: str, default: float) -> float:
    """`_sig` on an item's signals already in hand."""
    v = signals.get(name, default)
    return default if v is None else float(v)


def relevance(item: Mapping[str, Any]) -> float:
    """How much a node is about the query, from its retrieval signals.

    BM25 and embedding similarity (each normalised by the query's best) carry
    the topic; agreement with the people the query names and a match with the
    time it names add to it; a node that is mostly a question asserts little
    and loses some. Clipped to [0, 1].
    """
    sig = item.get("signals") or {}
    get = sig.get
    base = clip_value(
        0.45 * float(get("lexical") or 0.0)
        + 0.35 * float(get("dense") or 0.0)
        + 0.2 * float(get("entity_match") or 0.0)
        + 0.3 * float(get("time_match") or 0.0)
        - 0.1 * float(get("asks") or 0.0)
    )
    if "valid_at_query_time" not in sig:  # not in a supersedes chain
        return base
    return validity_adjusted(base, sig)


# ---- facts that change: the validity adjustment -----------------------------


def validity_adjusted(base: float, sig: Mapping[str, Any]) -> float:
    """Relevance of a node in a supersedes chain: a fact valid at the query's
    time answers what its chain is about, so it is at least as relevant as the
    best match in its chain (``chain_match``, 0 when it did not hold then).

    A fact that did not hold then (``superseded`` / ``not_yet_valid``) keeps
    its own relevance: the memory plane ranks the fact that held in its
    place when it ranked higher, and it right below (`ReadSession.rank` in
    the core), so the history stays next to the answer. Discounting it here as well measured worse on BEAM, where an
    update question's gold evidence is both facts (0.15 off: recall@10 down
    0.02 to 0.05 on four question types, BENCHMARKS.md section 7)."""
    return clip_value(max(base, _num(sig, "chain_match", 0.0)))


@lru_cache(maxsize=4096)
def question_index(question_id: str) -> int | None:
    """The i of a pair_{i}_ / candidate_{i}_ id."""
    for prefix in ("pair_", "candidate_"):
        if question_id.startswith(prefix):
            rest = question_id[len(prefix) :]
            head = rest.split("_", 1)[0]
            if head.isdigit():
                return int(head)
    return None

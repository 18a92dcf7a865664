"""The features the learned System-One controller's heads read, as columns.

A documented internal module of `jevmem.controller.learned` (which
re-exports its public names): the feature names of each question kind, a
scoring request's candidates and an assessment's evidence summary as
bounded feature columns (products of signals included), and the hand
rule's answers as features. The training script builds its matrices with
the same functions the controller answers with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem._core import FACT_COLUMNS, SIGNAL_COLUMNS
from jevmem.controller.types import Answer, CandidateTable, NoulAnswer

__all__ = [
    "ASSESSMENT_BASE",
    "ASSESSMENT_FEATURES",
    "CONTEXT_FEATURES",
    "MATCH_FEATURES",
    "OWN_FEATURES",
    "SCORING_SIGNALS",
    "SPEAKERLESS_CONTEXT_FEATURES",
    "SPEAKERLESS_OWN_FEATURES",
    "SPEAKER_SIGNALS",
    "assessment_features",
    "assessment_row",
    "base_names_of",
    "bound_columns",
    "candidate_base_columns",
    "candidate_matrix",
    "candidate_rows",
    "feature_matrix",
    "feature_products",
    "hand_answers",
    "memory_youth",
    "scoring_base",
    "without_speakers",
]

#: A candidate's own signals (what ``score.relevance`` is about). A name with
#: ``*`` is the product of the named signals. ``query_summary`` (the query
#: asks for a summary or an overview, the same for every candidate) enters
#: only in products: a summary wants the substance of many turns, whose
#: length and speaker say more then than for a question one turn answers.
#: So does ``query_answerer`` (the query asks what the one who answers said
#: before, "what did you recommend"): its answer is a reply, whose speaker
#: rarely asks, where most questions want what the asker stated.
OWN_FEATURES: tuple[str, ...] = (
    "lexical",
    "dense",
    "dense_raw",
    "lexical_rank",
    "dense_rank",
    "entity_match",
    "time_match",
    "asks",
    "length",
    "speaker_asks",
    "speaker_length",
    "asks*speaker_asks",
    "length*dense",
    "length*lexical",
    "expanded",
    "edge_weight",
    "dense_passage",
    "length*dense_passage",
    "hand_relevance",
    "query_summary*length",
    "query_summary*speaker_asks",
    "query_answerer*speaker_asks",
)
#: The own features that measure how well a candidate matches the query:
#: the lexical and dense matches, their ranks and shares, the names and
#: time it agrees on, the hand rule's relevance, and their products with
#: the length (a share in [0, 1], so a product rises with its match). A
#: relevance head trained monotone (``bench/train_controller.py
#: --monotone``) never answers lower when one of them rises, the rest held:
#: fitted to one embedder's similarities, a free head may learn that a
#: weaker match scores higher, and carry that to an embedder whose
#: similarities mean something else.
MATCH_FEATURES: tuple[str, ...] = (
    "lexical",
    "dense",
    "dense_raw",
    "lexical_rank",
    "dense_rank",
    "entity_match",
    "time_match",
    "dense_passage",
    "length*dense",
    "length*lexical",
    "length*dense_passage",
    "hand_relevance",
)
#: A candidate's context (what ``score.support`` is about): how the turns
#: around it match the query, by direction, and how its episode does.
CONTEXT_FEATURES: tuple[str, ...] = (
    "support",
    "episode_support",
    "prev_match",
    "next_match",
    "prev_match*speaker_asks",
    "next_match*speaker_asks",
    "same_session",
    "hand_support",
)
#: The signals that say who speaks a candidate: its speaker's question
#: share and typical length per turn in the memory (a turn: the speaker's
#: consecutive nodes in one session, so a burst of messages reads as the
#: turn it would be in a chat that stores turns whole). A node without a speaker has
#: neither (``has_speaker`` 0): the heads for such nodes read the features
#: without them (`without_speakers`), so that they rank without leaning on
#: who speaks, as a memory of notes, documents or transcript chunks must.
SPEAKER_SIGNALS: tuple[str, ...] = ("speaker_asks", "speaker_length")


def without_speakers(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` less every feature that reads a speaker signal (a product
    with one included)."""
    return tuple(n for n in names if not set(n.split("*")) & set(SPEAKER_SIGNALS))


#: The features of the heads for nodes without a speaker: no speaker signal,
#: but ``memory_length``, how long the memory's nodes are on a fixed scale
#: (the same for every candidate). The speaker signals let the other heads
#: tell a chat of short turns between friends from a log of an assistant's
#: long answers, which want different weights; a memory without speakers
#: still shows how long its observations are.
SPEAKERLESS_OWN_FEATURES: tuple[str, ...] = (*without_speakers(OWN_FEATURES), "memory_length")
SPEAKERLESS_CONTEXT_FEATURES: tuple[str, ...] = (
    *without_speakers(CONTEXT_FEATURES),
    "memory_length",
)


#: What a scoring head may read: the columns the memory plane gives a
#: scoring round's candidates (the core's signals and validity facts, the
#: query's kind, the context and expansion columns) and the ones
#: `candidate_base_columns` adds. Any other name would read as 0 for every
#: candidate, so `LearnedController` refuses a head that reads one.
SCORING_SIGNALS: frozenset[str] = frozenset(
    (
        *SIGNAL_COLUMNS,
        *FACT_COLUMNS,
        *("query_self", "query_request", "query_summary", "query_answerer"),
        *("support", "prev_match", "next_match", "episode_support", "same_session"),
        *("edge_weight", "max_evidence_similarity", "novelty"),
        *("expanded", "hand_relevance", "hand_support"),
    )
)


#: The summary of an assessment's evidence that ``assess.sufficiency`` reads.
ASSESSMENT_BASE: tuple[str, ...] = (
    "top_score",
    "second_score",
    "top3_score",
    "top_relevance",
    "grounded",
    "against",
    "coverage",
    "known_terms",
    "covered_terms",
    "frontier_best",
    "top_dense_raw",
    "hand_sufficiency",
    "names_speaker",
    "unnamed",
    "memory_youth",
)
#: What ``assess.sufficiency`` reads: the summary, the summary apart for
#: queries that name a known speaker (whether the evidence is about that
#: person is the question) and for those that do not (whether the memory
#: holds the subject at all is), and the summary weighed by the memory's
#: youth (in a young memory the same scores and coverage mean otherwise).
ASSESSMENT_FEATURES: tuple[str, ...] = ASSESSMENT_BASE + tuple(
    f"{gate}*{name}"
    for gate in ("names_speaker", "unnamed", "memory_youth")
    for name in ASSESSMENT_BASE[:12]
)


def _base_columns(
    rows: Sequence[Mapping[str, Any]],
    base: Sequence[str],
    extra: Mapping[str, Sequence[float] | npt.NDArray[np.float64]],
    n: int | None = None,
) -> tuple[npt.NDArray[np.float64], dict[str, int]]:
    """The named signals as bounded columns, one row per mapping, and the
    column of each name (``extra`` supplies whole columns by name, ahead of
    the mappings). Missing values are 0; non-finite ones are made 0 and the
    rest bounded (signals are shares in [0, 1]; nothing else may overflow or
    turn into NaN when products are taken). ``n``: the number of rows, when
    ``extra`` supplies every column."""
    from_rows = [b for b in base if b not in extra]
    from_extra = [b for b in base if b in extra]
    width = len(from_rows) + len(from_extra)
    raw = np.empty((len(rows) if n is None else n, width), dtype=np.float64)
    if rows and from_rows:
        raw[:, : len(from_rows)] = [[r.get(b) or 0.0 for b in from_rows] for r in rows]
    for j, b in enumerate(from_extra, len(from_rows)):
        raw[:, j] = extra[b]
    bound_columns(raw)
    return raw, {b: j for j, b in enumerate(from_rows + from_extra)}


def bound_columns(raw: npt.NDArray[np.float64]) -> None:
    """Non-finite values to 0, the rest into [-1e6, 1e6], in place (what
    ``nan_to_num`` then ``clip`` give, without their per-call overhead: this
    runs on every request)."""
    np.copyto(raw, 0.0, where=~np.isfinite(raw))
    np.maximum(raw, -1e6, out=raw)
    np.minimum(raw, 1e6, out=raw)


def feature_products(
    raw: npt.NDArray[np.float64], at: Mapping[str, int], names: Sequence[str]
) -> npt.NDArray[np.float64]:
    """Feature columns from base columns (``a*b`` = the product), the
    features of one arity at a time (factors multiplied left to right)."""
    out = np.empty((raw.shape[0], len(names)), dtype=np.float64)
    for places, columns in _product_columns(tuple(at.items()), tuple(names)):
        col = raw[:, columns[0]]
        for c in columns[1:]:
            col *= raw[:, c]
        out[:, places] = col
    return out


@lru_cache(maxsize=256)
def _product_columns(
    base: tuple[tuple[str, int], ...], names: tuple[str, ...]
) -> list[tuple[npt.NDArray[np.intp], list[npt.NDArray[np.intp]]]]:
    """`_product_plan` as column indexes (``base``: each base name's column):
    per arity, the features' places and, factor by factor, the column of each."""
    at = dict(base)
    return [
        (
            np.array(places, dtype=np.intp),
            [np.array([at[f[k]] for f in factors], dtype=np.intp) for k in range(len(factors[0]))],
        )
        for places, factors in _product_plan(names)
    ]


@lru_cache(maxsize=256)
def _product_plan(names: tuple[str, ...]) -> list[tuple[list[int], list[list[str]]]]:
    """The features grouped by their number of factors: (their places, their factors)."""
    groups: dict[int, tuple[list[int], list[list[str]]]] = {}
    for i, name in enumerate(names):
        parts = name.split("*")
        places, factors = groups.setdefault(len(parts), ([], []))
        places.append(i)
        factors.append(parts)
    return [groups[k] for k in sorted(groups)]


def _base_names(names: Iterable[str]) -> list[str]:
    """The base columns the features ``names`` multiply, sorted (cached: a
    model's heads ask for the same few lists on every request)."""
    return list(base_names_of(tuple(names)))


@lru_cache(maxsize=64)
def scoring_base(features: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    """The base columns that heads reading ``features`` read together
    (cached: a model's scoring heads ask for the same set every round)."""
    return base_names_of(tuple(f for names in features for f in names))


@lru_cache(maxsize=256)
def base_names_of(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted({part for name in names for part in name.split("*")}))


def feature_matrix(
    rows: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    extra: Mapping[str, Sequence[float]] | None = None,
) -> npt.NDArray[np.float64]:
    """Feature rows (`candidate_rows`, or any mappings) as columns: one row
    per mapping, one column per feature name (``a*b`` = product); see
    `_base_columns` for ``extra`` and how values are bounded."""
    raw, at = _base_columns(rows, _base_names(names), extra or {})
    return feature_products(raw, at, names)


def candidate_rows(
    candidates: Sequence[Mapping[str, Any]], hand: Mapping[str, Sequence[float]] | None = None
) -> list[dict[str, Any]]:
    """A scoring request's candidates as feature rows: their signals, plus
    ``expanded`` (1 for a candidate reached along an edge: its signals then
    carry ``novelty``; 0 for an anchor-pool node) and the hand rule's answers
    (``hand_relevance``, ``hand_support``: a head learns what to add to them)."""
    rows = []
    for i, c in enumerate(candidates):
        sig = dict(c.get("signals") or {})
        sig["expanded"] = 1.0 if "novelty" in sig else 0.0
        for name, values in (hand or {}).items():
            sig[name] = values[i]
        rows.append(sig)
    return rows


def candidate_matrix(
    candidates: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    hand: Mapping[str, Sequence[float]] | None = None,
) -> npt.NDArray[np.float64]:
    """The feature columns of a scoring request's candidates: the same as
    ``feature_matrix(candidate_rows(candidates, hand), names)``, without
    copying every candidate's signals (this runs on every scoring round)."""
    raw, at = candidate_base_columns(candidates, _base_names(names), hand)
    return feature_products(raw, at, names)


def candidate_base_columns(
    candidates: Sequence[Mapping[str, Any]],
    base: Sequence[str],
    hand: Mapping[str, Sequence[float] | npt.NDArray[np.float64]] | None,
) -> tuple[npt.NDArray[np.float64], dict[str, int]]:
    """`_base_columns` of a scoring request's candidates, with ``expanded``
    and the hand rule's columns (see `candidate_rows`)."""
    extra: dict[str, Sequence[float] | npt.NDArray[np.float64]] = dict(hand or {})
    if type(candidates) is CandidateTable:
        # columns already: absent (NaN) reads as 0, as a missing key does
        # (`_base_columns` makes NaN 0)
        n = len(candidates)
        extra["expanded"] = candidates.present("novelty").astype(np.float64)
        columns = candidates.columns
        for name in base:
            if name not in extra:
                col = columns.get(name)
                extra[name] = np.zeros(n) if col is None else col
        return _base_columns([], base, extra, n=n)
    extra["expanded"] = [1.0 if "novelty" in (c.get("signals") or {}) else 0.0 for c in candidates]
    return _base_columns([c.get("signals") or {} for c in candidates], base, extra)


def assessment_features(state: Mapping[str, Any], hand_sufficiency: float) -> dict[str, float]:
    """The summary of an assessment request's evidence (`ASSESSMENT_BASE`;
    `assessment_row` adds the products)."""
    evidence: list[Mapping[str, Any]] = list(state.get("evidence") or [])
    # one pass over the evidence (this runs on every assessment)
    scores = []
    # each the largest over the items (0 without any); a raw similarity may be negative
    top_relevance = grounded = against = top_dense_raw = -math.inf
    for e in evidence:
        score = _finite(e.get("score"))
        scores.append(score)
        sig = e.get("signals") or {}
        # as the hand rule weighs an item: by how well it ranks as evidence
        weight = 0.6 + 0.4 * min(1.0, max(0.0, score))
        top_relevance = max(top_relevance, _finite(sig.get("relevance")))
        grounded = max(grounded, _finite(sig.get("content_coverage")) * weight)
        against = max(against, _finite(sig.get("other_coverage")) * weight)
        top_dense_raw = max(top_dense_raw, _finite(sig.get("dense_raw")))
    scores.sort(reverse=True)
    if not evidence:
        top_relevance = grounded = against = top_dense_raw = 0.0
    return {
        "top_score": scores[0] if scores else 0.0,
        "second_score": scores[1] if len(scores) > 1 else 0.0,
        "top3_score": sum(scores[:3]) / 3.0,
        "top_relevance": top_relevance,
        "grounded": grounded,
        "against": against,
        "coverage": _finite(state.get("coverage")),
        "known_terms": _finite(state.get("known_terms", 1.0)),
        "covered_terms": _finite(state.get("covered_terms", 1.0)),
        "frontier_best": _finite(state.get("frontier_best")),
        "top_dense_raw": top_dense_raw,
        "hand_sufficiency": _finite(hand_sufficiency),
        "names_speaker": _finite(state.get("names_speaker")),
        "unnamed": 1.0 - _finite(state.get("names_speaker")),
        "memory_youth": memory_youth(_finite(state.get("memory_nodes"))),
    }


def memory_youth(nodes: float) -> float:
    """How young a memory is, by the nodes a search could read: 1 -
    log10(1 + n) / 2.5, at least 0 (10 nodes 0.58, 30 0.40, 100 0.20, 316
    or more 0). A score that says "found" in a memory of hundreds says less
    in one of a dozen turns; a head reads the summary through it. It is 0
    from the size of the memories a head is fitted on whole (a few hundred
    turns), so no larger memory reads as more different from them than
    they are from each other."""
    return max(0.0, 1.0 - math.log10(1.0 + max(nodes, 0.0)) / 2.5)


def assessment_row(
    state: Mapping[str, Any], hand_sufficiency: float, names: Sequence[str]
) -> npt.NDArray[np.float64]:
    """One assessment's features, in the order ``names`` asks for."""
    return feature_matrix([assessment_features(state, hand_sufficiency)], names)


def _finite(v: object) -> float:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) else 0.0


def hand_answers(answers: Mapping[str, Answer], n: int) -> dict[str, list[float]]:
    """The hand rule's relevance and support answers per candidate, as feature columns."""
    out: dict[str, list[float]] = {}
    for name in ("relevance", "support"):
        col = []
        for i in range(n):
            a = answers.get(f"candidate_{i}_{name}")
            col.append(a.value if isinstance(a, NoulAnswer) else 0.0)
        out[f"hand_{name}"] = col
    return out

"""Small pure functions the read path scores with, and the neutral answers of the traversal ablation."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from jevmem.controller import catalogue
from jevmem.controller.types import (
    Answer,
    CandidateAnswers,
    CandidateQuestions,
    CandidateTable,
    DecisionRequest,
    Noul,
    NoulAnswer,
)
from jevmem.plane.config import ANCHOR_RELEVANCE_WEIGHT


def answer_value(a: Answer) -> float:
    if isinstance(a, NoulAnswer):
        return a.value
    raise TypeError("expected a Noul answer")


def evidence_score(relevance: float, support: float) -> float:
    """A node's score as evidence: its own relevance, lifted by its support."""
    w = ANCHOR_RELEVANCE_WEIGHT
    return min(1.0, w * float(relevance) + (1 - w) * float(support))


def evidence_scores(
    relevance: npt.NDArray[np.float64], support: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """`evidence_score` of every pair (float64, the same arithmetic; NaN gives 1 as min does)."""
    w = ANCHOR_RELEVANCE_WEIGHT
    return np.fmin(1.0, w * relevance + (1 - w) * support)


def plain_match(sig: Mapping[str, float]) -> float:
    """A pool node's plain topical match, before any controller judgment."""
    return 0.5 * sig["lexical"] + 0.5 * sig["dense"]


def logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


def rank_share(rank: int) -> float:
    """A 0-based list rank as a value in (0, 1]: 1 at the top, 0.5 at the tenth."""
    return 1.0 / (1.0 + rank / 9.0)


def share_of_best(x: float, best: float) -> float:
    """A score as a share of the query's best, in [0, 1]."""
    return min(1.0, max(0.0, x) / best) if best > 0 else 0.0


#: the signal the neutral answer to each score.* kind is
_NEUTRAL_FIELD = {
    "score.relevance": "dense",
    "score.relation_usefulness": "edge_weight",
    "score.novelty": "novelty",
    "score.support": "support",
}


#: A batch of nodes' signals: one float64 column per signal, a row per node
#: (NaN: the node lacks that signal, as a missing key of a candidate's mapping).
Signals = dict[str, npt.NDArray[np.float64]]


def share_of_best_columns(x: npt.NDArray[np.float64], best: float) -> npt.NDArray[np.float64]:
    """`share_of_best` of every element (NaN reads as 0, as ``max(0.0, x)`` does)."""
    if not best > 0:
        return np.zeros(len(x))
    return np.fmin(1.0, np.fmax(0.0, x) / best)


def plain_match_columns(signals: Signals) -> npt.NDArray[np.float64]:
    """`plain_match` of every row."""
    return 0.5 * signals["lexical"] + 0.5 * signals["dense"]


def supporting_match_columns(signals: Signals) -> npt.NDArray[np.float64]:
    """The topical match a node lends its time-order neighbours as support:
    `plain_match`, or 0 for a fact in a supersedes chain that did not hold at
    any of the asked time (``valid_at_query_time`` 0; absent outside a chain).

    Such a fact ranks below the fact that held (`rank_below_replacements`);
    the turns around it are about the value that did not hold either, so
    they get no support from it. A fact that held for part of the asked time
    (one that began during the asked day) still lends all of its match."""
    match = plain_match_columns(signals)
    held = signals.get("valid_at_query_time")
    if held is None:
        return match
    return np.where(held <= 0.0, 0.0, match)


def concat_signals(blocks: Sequence[Signals], lengths: Sequence[int]) -> Signals:
    """Blocks of rows one after another; a signal some block lacks is NaN there."""
    names: dict[str, None] = {}
    for block in blocks:
        names.update(dict.fromkeys(block))
    return {
        name: np.concatenate(
            [block.get(name, np.full(n, np.nan)) for block, n in zip(blocks, lengths, strict=True)]
        )
        if blocks
        else np.zeros(0)
        for name in names
    }


def neutral_answers(requests: Sequence[DecisionRequest]) -> list[Mapping[str, Answer]]:
    """The 'traversal' ablation: signals only, no controller judgment.

    Routing is uniform, candidates are scored by embedding similarity and
    edge weight, and the assessment never stops early.
    """
    out: list[Mapping[str, Answer]] = []
    for req in requests:
        qs = req.questions
        if type(qs) is CandidateQuestions and all(k in _NEUTRAL_FIELD for k in qs.kinds):
            cands = req.state["candidates"]
            if type(cands) is CandidateTable and len(cands) == qs.n_candidates:
                values = np.stack(
                    [cands.signal(_NEUTRAL_FIELD[k], 0.0) for k in qs.kinds], axis=1
                ).reshape(qs.n_candidates, len(qs.kinds))
            else:
                values = np.array(
                    [
                        [c["signals"].get(_NEUTRAL_FIELD[k], 0.0) for k in qs.kinds]
                        for c in cands[: qs.n_candidates]
                    ],
                    dtype=np.float64,
                ).reshape(qs.n_candidates, len(qs.kinds))
            # min(1, max(0, x)) of each, NaN as 0 (fmax and fmin skip NaN, as max does)
            out.append(CandidateAnswers(qs, np.fmin(1.0, np.fmax(0.0, values))))
            continue
        ans: dict[str, Answer] = {}
        for q in req.questions:
            kind = q.kind
            if kind.startswith("route."):
                ans[q.id] = NoulAnswer(0.5)
            elif kind.startswith("assess."):
                ans[q.id] = NoulAnswer(
                    1.0 if kind in ("assess.usefulness", "assess.missing") else 0.0
                )
            else:
                i = int(q.id.split("_")[1])
                sig = req.state["candidates"][i]["signals"]
                field_ = _NEUTRAL_FIELD[kind]
                ans[q.id] = NoulAnswer(float(min(1.0, max(0.0, sig.get(field_, 0.0)))))
        out.append(ans)
    return out


#: An expansion round's answers, per candidate, as `Traversal.score` takes them.
SCORE_ROW = ("score.relevance", "score.relation_usefulness", "score.novelty", "score.support")
assert tuple(q.kind for q in catalogue.scoring_questions(0)) == SCORE_ROW


def round_values(answers: Mapping[str, Answer], questions: CandidateQuestions) -> np.ndarray:
    """A candidate round's answers as a (candidates x template) float64 array:
    a `CandidateAnswers` as it is, any other mapping read question by question."""
    if type(answers) is CandidateAnswers and answers.questions is questions:
        return answers.array
    width = len(questions.template)
    return np.array([answer_value(answers[q.id]) for q in questions], dtype=np.float64).reshape(
        questions.n_candidates, width
    )


@lru_cache(maxsize=1024)
def round_questions(per_candidate: Callable[[int], tuple[Noul, ...]], n: int) -> CandidateQuestions:
    """The questions of a scoring round over ``n`` candidates, candidate by
    candidate (cached: every query's round over n candidates asks the same)."""
    return CandidateQuestions(per_candidate, n)

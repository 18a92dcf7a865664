"""Small pure functions the read path scores with, and the neutral answers of the traversal ablation."""

from __future__ import annotations

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

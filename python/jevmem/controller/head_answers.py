"""How the learned controller's scoring heads answer one request: the heads
of the kinds it asks, their values over its candidates' columns, bounded to
[0, 1], and the answers for candidates without a speaker (the
``.speakerless`` heads). A documented internal module of
`jevmem.controller.learned`."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from jevmem.controller.features import (
    candidate_base_columns,
    feature_products,
    hand_answers,
    scoring_base,
)
from jevmem.controller.local import question_index
from jevmem.controller.types import (
    Answer,
    CandidateAnswers,
    CandidateQuestions,
    CandidateTable,
    DecisionRequest,
    NoulAnswer,
)

if TYPE_CHECKING:
    from jevmem.controller.learned import Head

__all__ = [
    "Override",
    "hand_columns",
    "head_values",
    "heads_asked",
    "put_speakerless",
    "speakerless_answers",
    "unit_columns",
    "unit_value",
    "without_speaker",
]


def heads_asked(req: DecisionRequest, heads: Mapping[str, Head | None]) -> dict[str, Head]:
    """The heads of the kinds a scoring request asks (a round's kinds are
    its template's: no pass over every candidate's questions)."""
    qs = req.questions
    wanted = set(qs.kinds) if type(qs) is CandidateQuestions else {q.kind for q in qs}
    return {kind: h for kind, h in heads.items() if h is not None and kind in wanted}


def head_values(
    req: DecisionRequest, answers: MutableMapping[str, Answer], heads: Mapping[str, Head]
) -> dict[str, npt.NDArray[np.float64]]:
    """Each head's values (before `unit_columns`) for a scoring request's
    candidates, their signals and the hand rule's answers read into columns
    once for all the heads."""
    cands = req.state.get("candidates") or []
    base = scoring_base(tuple(head.features for head in heads.values()))
    hand = (
        hand_columns(answers)
        if isinstance(answers, CandidateAnswers)
        else hand_answers(answers, len(cands))
    )
    raw, at = candidate_base_columns(cands, base, hand)
    return {kind: head(feature_products(raw, at, head.features)) for kind, head in heads.items()}


#: a round's answers for its candidates without a speaker: per kind, which
#: candidates and every candidate's value (before `unit_columns`)
Override = list[tuple[str, npt.NDArray[np.bool_], npt.NDArray[np.float64]]]


def without_speaker(cands: Any) -> npt.NDArray[np.bool_] | None:
    """Which candidates have no speaker (``has_speaker`` 0); None when the
    plane gives no such signal (a plug-in plane's candidates read as spoken)."""
    if type(cands) is CandidateTable:
        col = cands.columns.get("has_speaker")
        return None if col is None else np.asarray(col) == 0.0
    if not cands:
        return None
    return np.array([(c.get("signals") or {}).get("has_speaker") == 0 for c in cands], dtype=bool)


def speakerless_answers(
    req: DecisionRequest, answers: MutableMapping[str, Answer], heads: Mapping[str, Head]
) -> Override:
    """The speakerless heads' values for a scoring round (its hand answers
    as features, as the other heads read them), for the kinds it asks; none
    when every candidate has a speaker."""
    without = without_speaker(req.state.get("candidates") or [])
    if without is None or not without.any():
        return []
    chosen = heads_asked(req, heads)
    if not chosen:
        return []
    return [(kind, without, v) for kind, v in head_values(req, answers, chosen).items()]


def put_speakerless(
    req: DecisionRequest, answers: MutableMapping[str, Answer], got: Override
) -> None:
    """Put the speakerless heads' answers in for the candidates without a
    speaker, bounded as `_score_candidates` bounds the others'."""
    if isinstance(answers, CandidateAnswers):
        for kind, without, values in got:
            answers.column(kind)[without] = unit_columns(values)[without]
        return
    by_kind = {kind: (without, values.tolist()) for kind, without, values in got}
    for q in req.questions:
        hit = by_kind.get(q.kind)
        i = question_index(q.id) if hit is not None else None
        if hit is not None and i is not None and hit[0][i]:
            answers[q.id] = NoulAnswer(unit_value(hit[1][i]))


def hand_columns(answers: CandidateAnswers) -> dict[str, npt.NDArray[np.float64]]:
    """The hand rule's relevance and support answers of a round held as
    columns, as feature columns (0 for a kind the round did not ask)."""
    kinds = answers.questions.kinds
    return {
        f"hand_{n}": (
            answers.column(f"score.{n}").copy()
            if f"score.{n}" in kinds
            else np.zeros(answers.questions.n_candidates)
        )
        for n in ("relevance", "support")
    }


def unit_columns(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`unit_value` of every element (NaN and -inf give 0, +inf 1), in two
    ufunc calls where comparisons and selections took six; a zero may come
    out with either sign (numpy's `fmax` does not order -0.0 and +0.0; no
    head gives a zero)."""
    out = np.minimum(x, 1.0)
    # fmax, not maximum: it takes the 0 over a NaN
    return np.fmax(out, 0.0, out=out)


def unit_value(x: float) -> float:
    return x if 0.0 <= x <= 1.0 else (1.0 if x > 1.0 else 0.0)

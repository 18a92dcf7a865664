"""A learned System-One controller: small models over the signals the memory
plane measures, answering the question kinds where they beat the hand rules.

The memory puts each candidate's signals (lexical and dense matches, list
ranks, time and person matches, how its neighbours in time match, its length
and its speaker's habits relative to the memory) into every scoring request;
this controller reads them as columns, one row per candidate, and answers

- ``score.relevance`` from the candidate's own signals,
- ``score.support`` from its context (its neighbours in time, its episode),
- ``assess.sufficiency`` from a summary of the evidence an assessment shows,

each with a head (the features: `jevmem.controller.features`): a standardised feature vector through a small multilayer
perceptron (or a plain logistic regression: no hidden layer) and a logistic
output, evaluated with numpy. Every other kind is answered by the hand-written
`LocalController` it extends. The weights ship as a small versioned JSON file
in the package (``models/system_one.json``), written by
``bench/train_controller.py`` from the development sets' gold evidence and
abstention questions; that script also reports the held-out comparison with
the hand rules that decides which kinds a shipped model answers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from jevmem.controller.features import (
    ASSESSMENT_BASE,
    ASSESSMENT_FEATURES,
    CONTEXT_FEATURES,
    MATCH_FEATURES,
    OWN_FEATURES,
    SCORING_SIGNALS,
    SPEAKER_SIGNALS,
    SPEAKERLESS_CONTEXT_FEATURES,
    SPEAKERLESS_OWN_FEATURES,
    assessment_features,
    assessment_row,
    base_names_of,
    bound_columns,
    candidate_base_columns,
    candidate_matrix,
    candidate_rows,
    feature_matrix,
    feature_products,
    hand_answers,
    scoring_base,
    without_speakers,
)
from jevmem.controller.head_answers import (
    Override,
    hand_columns,
    head_values,
    heads_asked,
    put_speakerless,
    speakerless_answers,
    unit_columns,
    unit_value,
)
from jevmem.controller.local import LocalController, question_index
from jevmem.controller.types import (
    Answer,
    CandidateAnswers,
    CandidateTable,
    DecisionRequest,
    NoulAnswer,
)
from jevmem.errors import InvalidConfigError, InvalidTypeError

__all__ = [
    "ASSESSMENT_BASE",
    "ASSESSMENT_FEATURES",
    "CONTEXT_FEATURES",
    "MATCH_FEATURES",
    "OWN_FEATURES",
    "SPEAKERLESS",
    "SPEAKERLESS_CONTEXT_FEATURES",
    "SPEAKERLESS_OWN_FEATURES",
    "SPEAKER_SIGNALS",
    "Head",
    "LearnedController",
    "SystemOneModel",
    "assessment_features",
    "assessment_row",
    "candidate_matrix",
    "candidate_rows",
    "feature_matrix",
    "hand_answers",
    "without_speakers",
]

_T = TypeVar("_T")

#: The format of the model file this build reads.
MODEL_FORMAT = 1


@dataclass(frozen=True)
class Head:
    """Features -> a value in (0, 1): standardise, tanh hidden layers, logistic out."""

    features: tuple[str, ...]
    mean: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]
    #: (weights (in, out), bias (out,)) per layer; the last has one output
    layers: tuple[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]], ...]

    def __post_init__(self) -> None:
        width = len(self.features)
        if self.mean.shape != (width,) or self.scale.shape != (width,):
            raise InvalidConfigError("a head's mean and scale must match its features")
        if not self.layers:
            raise InvalidConfigError("a head needs at least one layer")
        for w, b in self.layers:
            if w.ndim != 2 or w.shape[0] != width or b.shape != (w.shape[1],):
                raise InvalidConfigError("a head's layer shapes do not chain")
            if not (np.isfinite(w).all() and np.isfinite(b).all()):
                raise InvalidConfigError("a head's weights must be finite")
            width = w.shape[1]
        if width != 1:
            raise InvalidConfigError("a head's last layer must have one output")
        if not (np.isfinite(self.mean).all() and np.isfinite(self.scale).all()):
            raise InvalidConfigError("a head's scale must be positive and its mean finite")
        if not (self.scale > 0).all():
            raise InvalidConfigError("a head's scale must be positive and its mean finite")

    def logits(
        self, x: npt.NDArray[np.float64], segments: Sequence[int] | None = None
    ) -> npt.NDArray[np.float64]:
        """The output layer's values before the logistic. ``segments``: the
        rows are several requests' (their counts, in order), each answered
        as it would be alone (see `_segment_products`)."""
        # in place where the values are the same: this runs on every request
        if not np.isfinite(x).all():  # the columns the plane builds are finite already
            x = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
        h = x - self.mean
        h /= self.scale
        # a feature far outside what training saw must not dominate (one
        # ufunc call: the same values as maximum then minimum)
        h.clip(-8.0, 8.0, out=h)
        return self.standardized_logits(h, segments)

    def standardized_logits(
        self, h: npt.NDArray[np.float64], segments: Sequence[int] | None = None
    ) -> npt.NDArray[np.float64]:
        """`logits` of features already standardised and clipped."""
        for w, b in self.layers[:-1]:
            h = _segment_products(h, w, segments)
            h += b
            np.tanh(h, out=h)
        w, b = self.layers[-1]
        out = _segment_products(h, w, segments)
        out += b
        return out[:, 0]

    def __call__(
        self, x: npt.NDArray[np.float64], segments: Sequence[int] | None = None
    ) -> npt.NDArray[np.float64]:
        return _logistic(self.logits(x, segments))

    @staticmethod
    def averaged(heads: Sequence[Head]) -> Head:
        """One head whose logit is the mean of ``heads``' logits: an ensemble
        as an ordinary head. The heads must read the same features with the
        same standardisation and have the same depth; their first layers
        stand side by side, deeper hidden layers block-diagonal, and the
        output layer averages."""
        if not heads:
            raise InvalidConfigError("averaging needs at least one head")
        first = heads[0]
        for h in heads[1:]:
            if (
                h.features != first.features
                or not np.array_equal(h.mean, first.mean)
                or not np.array_equal(h.scale, first.scale)
                or len(h.layers) != len(first.layers)
            ):
                raise InvalidConfigError(
                    "averaged heads must share features, standardisation and depth"
                )
        n, depth = len(heads), len(first.layers)
        layers = []
        for li in range(depth):
            ws = [h.layers[li][0] for h in heads]
            bs = [h.layers[li][1] for h in heads]
            if li == depth - 1:
                w = (np.vstack(ws) if depth > 1 else np.sum(ws, axis=0)) / n
                b = np.sum(bs, axis=0) / n
            elif li == 0:
                w, b = np.hstack(ws), np.concatenate(bs)
            else:
                w = np.zeros((sum(x.shape[0] for x in ws), sum(x.shape[1] for x in ws)))
                r = c = 0
                for x in ws:
                    w[r : r + x.shape[0], c : c + x.shape[1]] = x
                    r, c = r + x.shape[0], c + x.shape[1]
                b = np.concatenate(bs)
            layers.append((w, b))
        return Head(first.features, first.mean, first.scale, tuple(layers))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "layers": [{"weights": w.tolist(), "bias": b.tolist()} for w, b in self.layers],
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Head:
        try:
            return Head(
                tuple(str(f) for f in d["features"]),
                np.asarray(d["mean"], dtype=np.float64),
                np.asarray(d["scale"], dtype=np.float64),
                tuple(
                    (
                        np.asarray(layer["weights"], dtype=np.float64),
                        np.asarray(layer["bias"], dtype=np.float64),
                    )
                    for layer in d["layers"]
                ),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InvalidConfigError(f"malformed model head: {exc}") from None


#: The suffix of the heads that score candidates without a speaker
#: (``"score.relevance.speakerless"``): heads fitted on the features
#: `without_speakers`, so that a memory of speakerless observations is not
#: ranked as if every node were a speaker who never asks.
SPEAKERLESS = ".speakerless"


@dataclass(frozen=True)
class SystemOneModel:
    """Heads by question kind, plus what the training run recorded about them."""

    heads: Mapping[str, Head]
    meta: Mapping[str, Any] = field(default_factory=dict)

    #: the kinds a head may answer, and the features each reads by default;
    #: a scoring kind with `SPEAKERLESS` after it answers for the candidates
    #: without a speaker (``has_speaker`` 0), where the model has one
    KINDS = (
        "score.relevance",
        "score.support",
        "assess.sufficiency",
        "score.relevance" + SPEAKERLESS,
        "score.support" + SPEAKERLESS,
    )

    def __post_init__(self) -> None:
        for kind, head in self.heads.items():
            if kind not in self.KINDS:
                raise InvalidConfigError(f"a model head cannot answer {kind!r}")
            if kind.endswith(SPEAKERLESS) and without_speakers(head.features) != head.features:
                raise InvalidConfigError(f"the head {kind!r} reads a speaker signal")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MODEL_FORMAT,
            "heads": {k: h.to_json() for k, h in self.heads.items()},
            "meta": dict(self.meta),
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> SystemOneModel:
        if not isinstance(d, Mapping) or not isinstance(d.get("meta") or {}, Mapping):
            raise InvalidConfigError("a model file is a JSON object, with a 'meta' object if any")
        if d.get("format") != MODEL_FORMAT:
            raise InvalidConfigError(
                f"model format {d.get('format')!r} is not supported (this build reads {MODEL_FORMAT})"
            )
        heads = d.get("heads")
        if not isinstance(heads, Mapping):
            raise InvalidConfigError("a model file needs a 'heads' table")
        return SystemOneModel(
            {str(k): Head.from_json(v) for k, v in heads.items()}, dict(d.get("meta") or {})
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @staticmethod
    def load(path: str | Path) -> SystemOneModel:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError, RecursionError) as exc:  # JSON, UTF-8, nesting
            raise InvalidConfigError(f"cannot read the model file {path}: {exc}") from None
        return SystemOneModel.from_json(data)

    @staticmethod
    def shipped() -> SystemOneModel:
        """The model that ships inside the package (read once per process)."""
        return _shipped()


@lru_cache(maxsize=1)
def _shipped() -> SystemOneModel:
    text = resources.files("jevmem.controller").joinpath("models/system_one.json").read_text()
    return SystemOneModel.from_json(json.loads(text))


def _logistic(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """1 / (1 + exp(-z)), z clipped to [-60, 60], in place."""
    z.clip(-60.0, 60.0, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    z += 1.0
    return np.reciprocal(z, out=z)


def _sufficiency_values(head: Head, summaries: Sequence[Mapping[str, float]]) -> list[float]:
    """The sufficiency head's answers for assessment summaries
    (`assessment_features`), each row as alone: ``unit_value`` of
    ``head(feature_matrix(summaries, head.features), [1] * len(summaries))``, bit
    for bit. Each feature (a product of two base values, or one value and 1)
    is built, standardised and clipped with one array operation each over
    every feature at once (the same IEEE operations, elementwise, that
    `feature_matrix` and `Head.__call__` apply); the matrix products and the
    logistic run as `Head.__call__` runs them."""
    plan = _row_plan(head)
    if plan is None:  # a feature of three factors or more: the general path
        x = feature_matrix(summaries, head.features)
        return [unit_value(v) for v in head(x, [1] * len(summaries)).tolist()]
    first, second, mean, scale = plan
    # each base value as `bound_columns` bounds it, then a 1 that a feature
    # of one factor is multiplied by (exactly itself)
    base = np.array(
        [
            [*(_bound_one(summary.get(name) or 0.0) for name in ASSESSMENT_BASE), 1.0]
            for summary in summaries
        ],
        dtype=np.float64,
    ).reshape(len(summaries), len(ASSESSMENT_BASE) + 1)
    # into a row-major array, as `feature_matrix` gives (the product that
    # follows rounds by the layout it reads)
    h = np.multiply(base[:, first], base[:, second], out=np.empty((len(summaries), len(first))))
    h -= mean
    h /= scale
    np.maximum(h, -8.0, out=h)
    np.minimum(h, 8.0, out=h)
    values = _logistic(head.standardized_logits(h, [1] * len(summaries))).tolist()
    return [unit_value(v) for v in values]


#: `_row_plan`'s answer for each head it was asked about, by the head's id
#: (the head kept, so an id is not reused while it is here)
def _row_plan(
    head: Head,
) -> (
    tuple[
        npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64], npt.NDArray[np.float64]
    ]
    | None
):
    """Per feature of a sufficiency head, as arrays: the places of its two
    factors in `ASSESSMENT_BASE` (the second past its end for a feature of
    one factor: the 1 `_sufficiency_values` appends), its mean and its
    scale; None when a feature has more than two factors (built once per
    head)."""

    def build() -> (
        tuple[
            npt.NDArray[np.intp],
            npt.NDArray[np.intp],
            npt.NDArray[np.float64],
            npt.NDArray[np.float64],
        ]
        | None
    ):
        at = {name: i for i, name in enumerate(ASSESSMENT_BASE)}
        one = len(ASSESSMENT_BASE)
        first: list[int] = []
        second: list[int] = []
        for feature in head.features:
            parts = [at[p] for p in feature.split("*")]
            if len(parts) > 2:
                return None
            first.append(parts[0])
            second.append(parts[1] if len(parts) == 2 else one)
        return (
            np.array(first, dtype=np.intp),
            np.array(second, dtype=np.intp),
            np.asarray(head.mean, dtype=np.float64),
            np.asarray(head.scale, dtype=np.float64),
        )

    return _per_heads("row plan", (head,), build)


#: what `_per_heads` made, by purpose and the heads' ids (the heads kept, so
#: an id is not reused while it is here)
_PER_HEADS: dict[tuple[str, tuple[int, ...]], tuple[tuple[Head, ...], Any]] = {}


def _per_heads(purpose: str, heads: tuple[Head, ...], build: Callable[[], _T]) -> _T:
    """What ``build`` makes of ``heads``, made once per set of heads: a
    model's heads are read on every request."""
    key = (purpose, tuple(id(h) for h in heads))
    hit = _PER_HEADS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], heads, strict=True)):
        return cast(_T, hit[1])
    made = build()
    if len(_PER_HEADS) > 64:
        _PER_HEADS.clear()
    _PER_HEADS[key] = (heads, made)
    return made


def _bound_one(v: float) -> float:
    """One value as `bound_columns` bounds it."""
    v = float(v)
    return min(max(v, -1e6), 1e6) if math.isfinite(v) else 0.0


class LearnedController(LocalController):
    """`LocalController` with the kinds its model has heads for answered by the model."""

    name = "learned"

    def __init__(self, model: SystemOneModel | None = None) -> None:
        super().__init__()
        if model is not None and not isinstance(model, SystemOneModel):
            # a path is not read here: SystemOneModel.load says what is wrong with the file
            raise InvalidTypeError(
                f"model must be a SystemOneModel, got {type(model).__name__} "
                "(a model file: LearnedController(SystemOneModel.load(path)))"
            )
        self.model = model if model is not None else SystemOneModel.shipped()
        head = self.model.heads.get("assess.sufficiency")
        known = set(ASSESSMENT_BASE)
        if head is not None and (
            unknown := {f for f in head.features if not set(f.split("*")) <= known}
        ):
            raise InvalidConfigError(
                f"the sufficiency head reads unknown features {sorted(unknown)}"
            )
        for kind, h in self.model.heads.items():
            # a name no round carries would read as 0 for every candidate
            if kind.startswith("score.") and (
                unknown := {f for f in h.features if not set(f.split("*")) <= SCORING_SIGNALS}
            ):
                raise InvalidConfigError(
                    f"the {kind} head reads unknown features {sorted(unknown)}"
                )

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        out = super().decide(requests)
        heads = self.model.heads
        relevance, support = heads.get("score.relevance"), heads.get("score.support")
        sufficiency = heads.get("assess.sufficiency")
        speakerless = {
            kind: head
            for kind in ("score.relevance", "score.support")
            if (head := heads.get(kind + SPEAKERLESS)) is not None
        }
        # scoring rounds held as columns and sufficiency questions, answered
        # together below
        columns: list[tuple[DecisionRequest, CandidateAnswers]] = []
        assessed: list[tuple[MutableMapping[str, Answer], str, dict[str, float]]] = []
        # the answers of candidates without a speaker, from the hand answers
        # (read before the heads below replace them), put in at the end
        overrides: list[tuple[DecisionRequest, MutableMapping[str, Answer], Override]] = []
        main = {"score.relevance": relevance, "score.support": support}
        for req, answers in zip(requests, out, strict=True):
            if req.purpose == "scoring" and speakerless:
                got = speakerless_answers(req, answers, speakerless)
                if got:
                    overrides.append((req, answers, got))
                    # no candidate has a speaker and the speakerless heads
                    # answer every kind the others would: theirs is all of it
                    whole = {kind for kind, without, _ in got if without.all()}
                    if set(heads_asked(req, main)) <= whole:
                        continue
            if req.purpose == "scoring" and (relevance or support):
                table = req.state.get("candidates")
                if (
                    isinstance(answers, CandidateAnswers)
                    and type(table) is CandidateTable
                    and len(table) == answers.questions.n_candidates
                ):
                    columns.append((req, answers))
                else:
                    self._score_candidates(req, answers, relevance, support)
            elif req.purpose == "assessment" and sufficiency is not None:
                for q in req.questions:
                    if q.kind == "assess.sufficiency":
                        hand_sufficiency = answers[q.id]
                        assert isinstance(hand_sufficiency, NoulAnswer)
                        summary = assessment_features(req.state, hand_sufficiency.value)
                        assessed.append((answers, q.id, summary))
        if columns:
            _score_rounds(columns, relevance, support)
        for req, answers, got in overrides:
            put_speakerless(req, answers, got)
        if assessed and sufficiency is not None:
            # one row per assessment, read together; the products row by row
            # (as alone: see `_segment_products`)
            values = _sufficiency_values(sufficiency, [summary for _, _, summary in assessed])
            for (answers, qid, _), v in zip(assessed, values, strict=True):
                answers[qid] = NoulAnswer(v)
        return out

    @staticmethod
    def _score_candidates(
        req: DecisionRequest,
        answers: MutableMapping[str, Answer],
        relevance: Head | None,
        support: Head | None,
    ) -> None:
        """A scoring request's relevance and support answers from the heads:
        the candidates' signals are read into columns once for both heads,
        and the answers replaced in one pass over the questions."""
        heads = heads_asked(req, {"score.relevance": relevance, "score.support": support})
        if not heads:
            return
        values = head_values(req, answers, heads)
        if isinstance(answers, CandidateAnswers):
            # the round as columns: the heads' answers written a column at a time
            for kind, v in values.items():
                answers.column(kind)[:] = unit_columns(v)
            return
        listed = {kind: v.tolist() for kind, v in values.items()}
        for q in req.questions:
            got = listed.get(q.kind)
            if got is not None:
                # candidate_{i}_<name>: i indexes the candidates
                i = question_index(q.id)
                assert i is not None
                answers[q.id] = NoulAnswer(unit_value(got[i]))


def _segment_products(
    h: npt.NDArray[np.float64], w: npt.NDArray[np.float64], segments: Sequence[int] | None
) -> npt.NDArray[np.float64]:
    """``h @ w``, a product per segment of rows when there are several: BLAS
    can round a row's result differently with the number of rows beside it,
    and each request must get the answers it gets alone (elementwise steps
    give the same values whatever the rows around them)."""
    if segments is None or len(segments) < 2:
        return h @ w
    out = np.empty((h.shape[0], w.shape[1]), dtype=np.float64)
    at = 0
    for n in segments:
        out[at : at + n] = h[at : at + n] @ w
        at += n
    return out


def _score_rounds(
    rounds: Sequence[tuple[DecisionRequest, CandidateAnswers]],
    relevance: Head | None,
    support: Head | None,
) -> None:
    """`LearnedController._score_candidates` for the scoring rounds of one
    call whose candidates and answers are columns (one round, or a lockstep
    batch's): rounds asking the same kinds are read as one set of rows and
    their heads evaluated together (`_StackedHeads`); only the matrix
    products go round by round. Each round's answers are those it gets alone."""
    groups: dict[tuple[str, ...], list[tuple[CandidateTable, CandidateAnswers]]] = {}
    for req, answers in rounds:
        kinds = answers.questions.kinds
        wanted = tuple(
            kind
            for kind, head in (("score.relevance", relevance), ("score.support", support))
            if head is not None and kind in kinds
        )
        if wanted:
            table = req.state["candidates"]
            groups.setdefault(wanted, []).append((table, answers))
    for wanted, members in groups.items():
        heads = tuple(relevance if k == "score.relevance" else support for k in wanted)
        stacked = _stacked_heads(heads)  # type: ignore[arg-type]
        if stacked is None:
            _score_rounds_head_by_head(wanted, heads, members)  # type: ignore[arg-type]
            continue
        sizes = [len(table) for table, _ in members]
        values = stacked(
            np.concatenate([stacked.columns(t, a) for t, a in members], axis=1)
            if len(members) > 1
            else stacked.columns(*members[0]),
            sizes,
        )
        start = 0
        for (_, answers), n in zip(members, sizes, strict=True):
            for j, kind in enumerate(wanted):
                answers.column(kind)[:] = values[start : start + n, j]
            start += n


def _score_rounds_head_by_head(
    wanted: tuple[str, ...],
    heads: tuple[Head, ...],
    members: Sequence[tuple[CandidateTable, CandidateAnswers]],
) -> None:
    """`_score_rounds` for heads `_StackedHeads` cannot stack (of different
    depths): each head on its own."""
    base = scoring_base(tuple(h.features for h in heads))
    sizes = [len(table) for table, _ in members]
    raws = []
    for table, answers in members:
        raw, at = candidate_base_columns(table, base, hand_columns(answers))
        raws.append(raw)
    raw = np.concatenate(raws) if len(raws) > 1 else raws[0]
    for kind, head in zip(wanted, heads, strict=True):
        values = unit_columns(head(feature_products(raw, at, head.features), sizes))
        start = 0
        for (_, answers), n in zip(members, sizes, strict=True):
            answers.column(kind)[:] = values[start : start + n]
            start += n


class _StackedHeads:
    """Several heads of the same depth evaluated as one computation, with
    the values each gives alone (`Head.__call__` then `unit_columns`), bit
    for bit: the scoring round's hot path, where the heads' own steps, each
    a numpy call on a few hundred numbers, cost more than their arithmetic.

    The heads' features stand side by side in one matrix (a feature two
    heads read appears twice, standardised by each); elementwise steps run
    once over all of them, while each head's matrix products read their
    slice of it, row segment by row segment as `Head.logits` does, into
    their slice of the next layer (BLAS reads a slice of a wider matrix as
    it reads the matrix alone). The output layer is stored negated (exactly
    ``-z``: IEEE rounding is symmetric), which saves the negation the
    logistic needs."""

    def __init__(self, heads: tuple[Head, ...]) -> None:
        self.heads = heads
        names = [f for h in heads for f in h.features]
        self.base = base_names_of(tuple(names))
        at = {b: i for i, b in enumerate(self.base)}
        # product features, each computed once (factors left to right, as
        # `feature_products` multiplies them), after the base rows
        products = sorted({n for n in names if "*" in n}, key=lambda n: (n.count("*"), n))
        row = {n: len(self.base) + i for i, n in enumerate(products)}
        row.update(at)
        self.width = len(self.base) + len(products)
        self.product_steps: list[tuple[slice, list[npt.NDArray[np.intp]]]] = []
        for arity in sorted({n.count("*") + 1 for n in products}):
            group = [n for n in products if n.count("*") + 1 == arity]
            first = row[group[0]]
            factors = [n.split("*") for n in group]
            self.product_steps.append(
                (
                    slice(first, first + len(group)),
                    [np.array([at[f[k]] for f in factors], dtype=np.intp) for k in range(arity)],
                )
            )
        self.feature_rows = np.array([row[n] for n in names], dtype=np.intp)
        self.mean = np.concatenate([h.mean for h in heads])
        self.scale = np.concatenate([h.scale for h in heads])
        # each head's columns in the stacked features, then layer by layer
        # in the stacked hidden values; the biases side by side
        spans = []
        at_col = 0
        for h in heads:
            spans.append(slice(at_col, at_col + len(h.features)))
            at_col += len(h.features)
        #: per layer: each head's input columns, its output columns, its
        #: weights, and every head's biases side by side
        self.layers: list[
            tuple[list[slice], list[slice], list[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
        ] = []
        depth = len(heads[0].layers)
        for li in range(depth):
            last = li == depth - 1
            ws = [-h.layers[li][0] if last else h.layers[li][0] for h in heads]
            bs = [-h.layers[li][1] if last else h.layers[li][1] for h in heads]
            outs = []
            at_col = 0
            for w in ws:
                outs.append(slice(at_col, at_col + w.shape[1]))
                at_col += w.shape[1]
            self.layers.append((spans, outs, ws, np.concatenate(bs)))
            spans = outs
        # with inputs clipped to [-8, 8] and finite weights no value can
        # overflow into a NaN, so the logistic's outputs lie in (0, 1] and
        # `unit_columns` would change nothing
        self.bounded = all(_cannot_overflow(h) for h in heads)

    def columns(self, table: CandidateTable, answers: CandidateAnswers) -> npt.NDArray[np.float64]:
        """A round's base signals, one row per base name (``expanded`` and the
        hand rule's answers among them, as `candidate_base_columns` reads them),
        bounded as `bound_columns` bounds them."""
        n = len(table)
        got = table.columns
        kinds = answers.questions.kinds
        rows: list[npt.NDArray[Any]] = []
        for name in self.base:
            if name == "expanded":
                col = got.get("novelty")
                rows.append(np.zeros(n) if col is None else col == col)  # not NaN
            elif name in ("hand_relevance", "hand_support"):
                kind = "score." + name[5:]
                rows.append(answers.column(kind) if kind in kinds else np.zeros(n))
            else:
                col = got.get(name)
                rows.append(np.zeros(n) if col is None else col)
        raw = np.empty((self.width, n), dtype=np.float64)
        base = raw[: len(self.base)]
        base[...] = rows
        bound_columns(base)
        return raw

    def __call__(
        self, raw: npt.NDArray[np.float64], segments: Sequence[int]
    ) -> npt.NDArray[np.float64]:
        """The heads' values for the base rows ``raw`` (`columns`, several
        rounds' side by side), one column per head."""
        for places, factors in self.product_steps:
            out = raw[places]
            np.multiply(raw[factors[0]], raw[factors[1]], out=out)
            for f in factors[2:]:
                out *= raw[f]
        n = raw.shape[1]
        # standardised and clipped, one row per candidate (C order, as the
        # matrix products of `Head.logits` read it)
        h: npt.NDArray[np.float64] = np.subtract(
            raw[self.feature_rows].T, self.mean, out=np.empty((n, len(self.mean)))
        )
        h /= self.scale
        np.maximum(h, -8.0, out=h)
        np.minimum(h, 8.0, out=h)
        last = len(self.layers) - 1
        for li, (ins, outs, ws, b) in enumerate(self.layers):
            nxt = np.empty((n, len(b)), dtype=np.float64)
            for src, dst, w in zip(ins, outs, ws, strict=True):
                if len(segments) < 2:
                    np.matmul(h[:, src], w, out=nxt[:, dst])
                else:
                    at = 0
                    for k in segments:
                        np.matmul(h[at : at + k, src], w, out=nxt[at : at + k, dst])
                        at += k
            nxt += b
            h = nxt
            if li < last:
                np.tanh(h, out=h)
        # h is -z: the logistic 1 / (1 + exp(-z)), z clipped to [-60, 60]
        np.maximum(h, -60.0, out=h)
        np.minimum(h, 60.0, out=h)
        np.exp(h, out=h)
        h += 1.0
        np.reciprocal(h, out=h)
        if not self.bounded:
            np.minimum(h, 1.0, out=h)
            np.fmax(h, 0.0, out=h)
        return h


#: the stacked form of each set of heads read together, by the heads' ids
#: (the heads themselves kept, so an id is not reused while it is here)
def _stacked_heads(heads: tuple[Head, ...]) -> _StackedHeads | None:
    """The stacked form of ``heads`` (built once per set of heads), or None
    when their depths differ."""
    return _per_heads(
        "stacked",
        heads,
        lambda: _StackedHeads(heads) if len({len(h.layers) for h in heads}) == 1 else None,
    )


def _cannot_overflow(head: Head) -> bool:
    """Whether no value ``head`` computes from inputs clipped to [-8, 8] can
    overflow (so none becomes NaN): a bound on each layer's outputs from the
    one before (tanh bounds hidden values by 1) stays far from overflow."""
    bound = 8.0
    for i, (w, b) in enumerate(head.layers):
        with np.errstate(over="ignore"):  # an overflow is the answer, not a fault
            out = bound * np.abs(w).sum(axis=0) + np.abs(b)
        if not np.isfinite(out).all() or out.max(initial=0.0) > 1e300:
            return False
        bound = 1.0 if i < len(head.layers) - 1 else bound
    return True

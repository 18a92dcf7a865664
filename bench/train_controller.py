"""Train the learned System-One controller (`jevmem.controller.learned`).

Reproducible from the development sets alone (files in the LoCoMo layout):

    .venv/bin/python bench/train_controller.py \\
        --data ../shared/data/locomo/locomo10-dev.json \\
        --data ../shared/data/beam/beam-100k.json \\
        --out python/jevmem/controller/models/system_one.json \\
        --report bench/out/train_controller.json [--embedding-cache DIR]

1. **Features.** One memory per conversation, one node per turn (as
   ``bench/locomo_retrieval.py`` builds them); every question is searched in
   full mode with the hand-written `LocalController` behind a recorder, which
   keeps each scoring request's candidates (their signals: the columns the
   model reads) and the hand answers. A candidate's label: its turn is in the
   question's gold evidence.
2. **Scoring heads.** ``score.relevance`` (own signals) and ``score.support``
   (context signals) are fitted jointly to the evidence score the memory
   ranks by, ``0.6 relevance + 0.4 support``, with a weighted log loss (every
   question weighs the same, and each data set half). Folds: conversations,
   split into ``--folds`` groups per data set; plus leave-one-data-set-out.
   Reported per data set: recall@10 of the anchor pool ranked by the hand
   answers and by the held-out heads.
3. **End to end, held out.** Each conversation's questions are searched again
   with a `LearnedController` whose scoring heads were fitted without that
   conversation's fold: full-mode recall@10, hand vs learned, and the
   assessment requests those searches make (the last one per question).
4. **Sufficiency head.** ``assess.sufficiency`` is fitted on those
   assessments to tell answerable questions (categories 1-4) from those about
   something never said (5); held-out AUROC per data set, hand vs learned.
   ``--windows 10,30,100`` adds young memories: per question a window of
   that many consecutive turns holding its evidence
   (`jevmem.evaluation.windows`), searched the same way; the head is then
   fitted on full memories and windows, each half of a data set's weight,
   and judged on both.
5. **Ship.** A head is shipped only if it beats the hand rule held out on
   every data set (scoring: end-to-end recall@10; sufficiency: AUROC); its
   final weights are fitted on all conversations. ``--ship-all`` writes every
   head (for experiments and tests).

``--monotone`` keeps the relevance head non-decreasing in each match signal
(`jevmem.controller.features.MATCH_FEATURES`). ``--scoring-from MODEL``
keeps MODEL's scoring heads as they are (stages 1-3 skipped; the assessments
come from searches with those heads, which saw every conversation) and fits
only the sufficiency head.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import pickle
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import CachedEmbedder, machine
from locomo_retrieval import MAX_TEXT_BYTES, make_embedder

import jevmem
from jevmem.controller.learned import (
    ASSESSMENT_FEATURES,
    CONTEXT_FEATURES,
    MATCH_FEATURES,
    OWN_FEATURES,
    SPEAKERLESS,
    SPEAKERLESS_CONTEXT_FEATURES,
    SPEAKERLESS_OWN_FEATURES,
    Head,
    LearnedController,
    SystemOneModel,
    assessment_row,
    candidate_rows,
    feature_matrix,
    hand_answers,
)
from jevmem.controller.types import DecisionRequest, NoulAnswer
from jevmem.evaluation import (
    ADVERSARIAL,
    ANSWERABLE,
    RESTYLES,
    Conversation,
    auroc,
    conversation_inputs,
    hits_at_k,
    load_samples,
    turn_ids,
    windows,
)
from jevmem.plane.config import ANCHOR_RELEVANCE_WEIGHT

Array = npt.NDArray[np.float64]
#: each question's first row in stacked candidate rows
Starts = npt.NDArray[np.int64]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- recording ----------------------------------------------------------------------------------


class Recorder:
    """A controller wrapper that keeps the read path's scoring and assessment
    requests with the answers they got."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "recorded")
        self.scoring: list[tuple[DecisionRequest, dict[str, Any]]] = []
        self.assessments: list[tuple[DecisionRequest, dict[str, Any]]] = []

    def decide(self, requests: Sequence[DecisionRequest]) -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = self.inner.decide(requests)
        for req, got in zip(requests, answers, strict=True):
            if req.purpose == "scoring":
                self.scoring.append((req, got))
            elif req.purpose == "assessment":
                self.assessments.append((req, got))
        return answers

    def clear(self) -> None:
        self.scoring.clear()
        self.assessments.clear()


@dataclass
class QueryRows:
    dataset: str
    conversation: str
    category: int
    gold: frozenset[str]
    #: candidate rows of every scoring round: the feature rows (signals and
    #: hand answers), label, anchor round or not, hand evidence score
    rows: list[dict[str, Any]]
    label: Array
    anchor: npt.NDArray[np.bool_]
    hand: Array
    dia: list[str]


@dataclass
class Built:
    dataset: str
    conversation: str
    memory: Any
    questions: list[Any]
    dia_of: dict[int, str] = field(default_factory=dict)
    #: the scoring heads are fitted on it (``--styles``)
    fitted: bool = True
    #: the speakerless heads are fitted on it (``--styles`` and ``--speakerless-styles``)
    speakerless_fitted: bool = True
    #: the heads are judged on it, held out by conversation (``--judge-styles``)
    judged: bool = False
    #: the conversation it holds, in its style (``--windows`` cuts it), and
    #: the embedder its nodes were embedded with (an embedding cache, say)
    source: Conversation | None = None
    build_embedder: Any = None


def hand_value(got: dict[str, Any], qid: str) -> float:
    a = got.get(qid)
    return a.value if isinstance(a, NoulAnswer) else 0.0


def query_rows(built: Built, qa: Any, rec: Recorder) -> QueryRows:
    feats: list[dict[str, Any]] = []
    labels, anchor, hand, dia = [], [], [], []
    for req, got in rec.scoring:
        cands = req.state["candidates"]
        if not cands:
            continue
        is_anchor = any(q.kind == "score.support" for q in req.questions) and not any(
            q.kind == "score.novelty" for q in req.questions
        )
        feats.extend(candidate_rows(cands, hand_answers(got, len(cands))))
        for i, c in enumerate(cands):
            d = built.dia_of.get(int(c["id"]), "")
            dia.append(d)
            labels.append(1.0 if any(t in qa.evidence for t in turn_ids(d)) else 0.0)
            anchor.append(is_anchor)
            rel = hand_value(got, f"candidate_{i}_relevance")
            sup = hand_value(got, f"candidate_{i}_support")
            hand.append(ANCHOR_RELEVANCE_WEIGHT * rel + (1 - ANCHOR_RELEVANCE_WEIGHT) * sup)
    return QueryRows(
        built.dataset,
        built.conversation,
        qa.category,
        frozenset(qa.evidence),
        feats,
        np.asarray(labels),
        np.asarray(anchor, dtype=bool),
        np.asarray(hand),
        dia,
    )


def memory_of(
    conv: Conversation, build_embedder: Any, query_embedder: Any
) -> tuple[Any, list[int]]:
    """A memory of ``conv``'s nodes (one per turn), embedded by
    ``build_embedder`` (an embedding cache, kept on disk), that embeds
    queries with ``query_embedder``; and the nodes' ids."""
    texts, ts, spk, provs = conversation_inputs(conv)
    store = jevmem.MemoryStore(query_embedder.dim, max_text_bytes=MAX_TEXT_BYTES)
    mem = jevmem.Memory(embedder=build_embedder, controller=jevmem.LocalController(), store=store)
    ids = mem.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
    if isinstance(build_embedder, CachedEmbedder):
        build_embedder.flush()
    mem.embedder = query_embedder
    return mem, ids


def build_all(args: argparse.Namespace) -> list[Built]:
    emb = make_embedder(args.embedder, args.threads)
    cache = CachedEmbedder(emb, args.embedding_cache) if args.embedding_cache else None
    out: list[Built] = []
    for path in args.data:
        try:
            convs, _report = load_samples(json.loads(Path(path).read_text()))
        except jevmem.InvalidInputError as exc:  # the loader names the sample and field
            raise SystemExit(f"train_controller: {path}: {exc}") from None
        if not convs:  # a wrong file, most likely: say so rather than fit on the others
            raise SystemExit(f"train_controller: {path} holds no conversations")
        convs = convs[: args.limit_conversations or None]
        styles = list(dict.fromkeys([*args.styles, *args.speakerless_styles, *args.judge_styles]))
        for conv, style in ((RESTYLES[st](c), st) for c in convs for st in styles):
            t0 = time.perf_counter()
            mem, ids = memory_of(conv, cache or emb, emb)
            name = Path(path).stem + ("" if style == "turns" else f"+{style}")
            b = Built(
                name,
                conv.sample_id,
                mem,
                list(conv.qas),
                fitted=style in args.styles,
                speakerless_fitted=style in args.styles or style in args.speakerless_styles,
                judged=style in args.judge_styles,
                source=conv,
                build_embedder=cache or emb,
            )
            b.dia_of = {i: t.dia_id for i, t in zip(ids, conv.turns, strict=True)}
            out.append(b)
            log(
                f"built {b.dataset}/{b.conversation}: {len(ids)} turns in {time.perf_counter() - t0:.1f}s"
            )
    return out


def judge(
    judged: list[Built],
    folds: dict[tuple[str, str], int],
    fold_fits: dict[int, Fit],
    speakerless_fits: dict[int, Fit],
    k: int,
) -> dict[str, dict[str, float | None]]:
    """Full-mode recall@10 on the judged memories (styles the heads are not
    fitted on), each conversation with the heads fitted without its fold:
    the hand rules, the scoring heads, and (``--speakerless``) the scoring
    heads with the speakerless heads answering for nodes without a speaker."""
    if not judged:
        return {}

    def heads_for(b: Built, speakerless: bool) -> LearnedController:
        fit = fold_fits[folds[(b.dataset, b.conversation)]]
        heads = {"score.relevance": fit.own, "score.support": fit.ctx}
        if speakerless:
            bare = speakerless_fits[folds[(b.dataset, b.conversation)]]
            heads["score.relevance" + SPEAKERLESS] = bare.own
            heads["score.support" + SPEAKERLESS] = bare.ctx
        return LearnedController(SystemOneModel(heads))

    ends = {
        "hand": record(judged, lambda b: jevmem.LocalController(), k)[1],
        "learned": record(judged, lambda b: heads_for(b, False), k)[1],
    }
    if speakerless_fits:
        ends["learned_speakerless"] = record(judged, lambda b: heads_for(b, True), k)[1]
    table = {
        d: {name: mean_recall(e, d) for name, e in ends.items()}
        for d in sorted({b.dataset for b in judged})
    }
    log(f"  full-mode recall@10 held out, judged styles: {table}")
    return table


def record(built: list[Built], controller_for: Any, k: int) -> tuple[list[QueryRows], list[Any]]:
    """Search every question in full mode; rows per question and, per
    question, (dataset, conversation, category, recall@10, last assessment)."""
    rows: list[QueryRows] = []
    ends: list[Any] = []
    for b in built:
        rec = Recorder(controller_for(b))
        b.memory.controller = rec
        for qa in b.questions:
            rec.clear()
            ends.append(search_end(b, b.memory, qa, rec, k))
            rows.append(query_rows(b, qa, rec))
        b.memory.controller = jevmem.LocalController()
    return rows, ends


def search_end(b: Built, memory: Any, qa: Any, rec: Recorder, k: int) -> tuple[Any, ...]:
    """One question searched in full mode in ``memory`` (its controller
    ``rec``): (dataset, conversation, category, recall@10, last assessment)."""
    res = memory.search(qa.question, k=k, mode="full")
    found = hits_at_k([e.provenance.get("dia_id") for e in res.evidence], qa.evidence, 10)
    recall = found.recall if qa.evidence else None
    last = rec.assessments[-1] if rec.assessments else None
    return (b.dataset, b.conversation, qa.category, recall, last)


def record_windows(
    built: list[Built], sizes: Sequence[int], controller_for: Any, k: int
) -> list[Any]:
    """`record`'s ends for young memories: every question of each memory
    in ``built`` again, in a memory of a window of ``size`` of its turns
    (`jevmem.evaluation.windows`), for each size; each end carries its size."""
    ends: list[Any] = []
    for b in built:
        assert b.source is not None
        for size in sizes:
            for w in windows(b.source, size):
                # queries embedded as the full memory's are
                mem, _ = memory_of(w, b.build_embedder, b.memory.embedder)
                (qa,) = w.qas
                rec = Recorder(controller_for(b))
                mem.controller = rec
                ends.append((*search_end(b, mem, qa, rec, k), size))
        log(f"  windows of {b.dataset}/{b.conversation}: {len(ends)} questions so far")
    return ends


# --- fitting ------------------------------------------------------------------------------------


def _init(rng: np.random.Generator, sizes: Sequence[int]) -> list[list[Array]]:
    return [
        [rng.normal(0.0, 1.0 / np.sqrt(a), size=(a, b)), np.zeros(b)]
        for a, b in itertools.pairwise(sizes)
    ]


def _forward(layers: list[list[Array]], x: Array) -> tuple[Array, list[Array]]:
    acts = [x]
    h = x
    for w, b in layers[:-1]:
        h = np.tanh(h @ w + b)
        acts.append(h)
    w, b = layers[-1]
    return (h @ w + b)[:, 0], acts


def _backward(layers: list[list[Array]], acts: list[Array], dz: Array) -> list[list[Array]]:
    grads: list[list[Array]] = []
    g = dz[:, None]
    for li in range(len(layers) - 1, -1, -1):
        w, _ = layers[li]
        a = acts[li]
        grads.append([a.T @ g, g.sum(axis=0)])
        if li:
            g = (g @ w.T) * (1.0 - acts[li] ** 2)
    return grads[::-1]


def _keep_rising(layers: list[list[Array]], rising: Sequence[int]) -> None:
    """Zero, in place, each first-layer weight of a feature in ``rising``
    whose sign disagrees with its unit's output weight (no hidden layer:
    each negative weight), so the head does not fall as the feature rises."""
    first = layers[0][0]
    if len(layers) == 1:
        first[rising, 0] = np.maximum(first[rising, 0], 0.0)
        return
    if len(layers) > 2:
        raise ValueError("monotone heads have at most one hidden layer")
    out = layers[1][0][:, 0]
    block = first[rising]
    block[block * out[None, :] < 0] = 0.0
    first[rising] = block


@dataclass
class Fit:
    own: Head
    ctx: Head


def standardise(x: Array) -> tuple[Array, Array]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 1e-9, scale, 1.0)


def fit_scoring(
    own: Array,
    ctx: Array,
    y: Array,
    weight: Array,
    starts: Starts,
    *,
    hidden: int,
    l2: float,
    epochs: int,
    seed: int,
    loss: str = "listwise",
    sharpness: float = 20.0,
    monotone: bool = False,
    names: tuple[Sequence[str], Sequence[str]] = (OWN_FEATURES, CONTEXT_FEATURES),
) -> Fit:
    """Fit s = w sig(f(own)) + (1 - w) sig(g(ctx)) to the labels (Adam).

    ``loss="listwise"``: per question, a softmax over ``sharpness * s`` of its
    candidates against its gold turns (what ranking asks for: the gold above
    the rest of its own pool; ``starts`` are the questions' first rows), each
    question weighted as `question_weights` says; ``"pointwise"``: a weighted
    log loss on s.

    ``monotone``: the relevance head is kept non-decreasing in each of
    `MATCH_FEATURES` (features that are products of a match with a share in
    [0, 1] rise with it): after every step, a first-layer weight of such a
    feature whose path to the output would turn its rise into a fall is set
    to 0 (projected gradient). Standardising and clipping keep the order of
    a feature's values, and tanh rises, so a head whose every such path has
    a non-negative sign rises with the feature.
    """
    rng = np.random.default_rng(seed)
    mo, so = standardise(own)
    mc, sc = standardise(ctx)
    xo, xc = np.clip((own - mo) / so, -8, 8), np.clip((ctx - mc) / sc, -8, 8)
    sizes_o = [own.shape[1], *([hidden] if hidden else []), 1]
    sizes_c = [ctx.shape[1], *([hidden] if hidden else []), 1]
    params = [_init(rng, sizes_o), _init(rng, sizes_c)]
    rising = [names[0].index(f) for f in MATCH_FEATURES if f in names[0]] if monotone else []
    if rising:
        _keep_rising(params[0], rising)
    flat = [p for layers in params for layer in layers for p in layer]
    m1 = [np.zeros_like(p) for p in flat]
    m2 = [np.zeros_like(p) for p in flat]
    wrel = ANCHOR_RELEVANCE_WEIGHT
    wsum = weight.sum()
    sizes = np.diff(np.append(starts, len(y))).astype(np.int64)
    gold = np.add.reduceat(y, starts)
    has_gold = np.repeat(gold > 0, sizes)
    target = np.where(has_gold, y / np.repeat(np.maximum(gold, 1), sizes), 0.0)
    # a question's weight (the sum of its rows' weights), on every row; none without gold
    qtotal = np.add.reduceat(weight, starts)
    qweight = np.where(has_gold, np.repeat(qtotal / qtotal[gold > 0].sum(), sizes), 0.0)
    lr, b1, b2, eps = 0.03, 0.9, 0.999, 1e-8
    for step in range(1, epochs + 1):
        zo, ao = _forward(params[0], xo)
        zc, ac = _forward(params[1], xc)
        a = 1 / (1 + np.exp(-np.clip(zo, -60, 60)))
        b = 1 / (1 + np.exp(-np.clip(zc, -60, 60)))
        s = np.clip(wrel * a + (1 - wrel) * b, 1e-6, 1 - 1e-6)
        if loss == "listwise":
            # s is bounded, so its scaled value is a logit that cannot run
            # away (logit(s) could: s near 1 for a few rows wins any softmax)
            z = sharpness * s
            zmax = np.maximum.reduceat(z, starts)
            e = np.exp(z - np.repeat(zmax, sizes))
            p = e / np.repeat(np.add.reduceat(e, starts), sizes)
            # d loss / d z = p - target, target = the gold share
            ds = qweight * (p - target) * sharpness
        else:
            ds = weight * (s - y) / (s * (1 - s)) / wsum
        go = _backward(params[0], ao, ds * wrel * a * (1 - a))
        gc = _backward(params[1], ac, ds * (1 - wrel) * b * (1 - b))
        grads = [g for layers in (go, gc) for layer in layers for g in layer]
        for i, (p, g) in enumerate(zip(flat, grads, strict=True)):
            if p.ndim == 2:
                g = g + l2 * p
            m1[i] = b1 * m1[i] + (1 - b1) * g
            m2[i] = b2 * m2[i] + (1 - b2) * g * g
            p -= lr * (m1[i] / (1 - b1**step)) / (np.sqrt(m2[i] / (1 - b2**step)) + eps)
        if rising:
            _keep_rising(params[0], rising)

    def head(names: Sequence[str], m: Array, s_: Array, layers: list[list[Array]]) -> Head:
        return Head(tuple(names), m, s_, tuple((w.copy(), b.copy()) for w, b in layers))

    return Fit(head(names[0], mo, so, params[0]), head(names[1], mc, sc, params[1]))


def fit_members(
    own: Array,
    ctx: Array,
    y: Array,
    weight: Array,
    starts: Starts,
    *,
    members: int = 1,
    seed: int,
    **kw: Any,
) -> Fit:
    """`fit_scoring` ``members`` times from seeds ``seed, seed + 1, ...``,
    merged into one pair of heads whose logit is the members' mean (a deep
    ensemble: the members agree where the data decide and average out where
    only their starting point did). The merged head is an ordinary `Head`:
    the members share the standardisation (it depends on the data alone), so
    their hidden layers stand side by side and the output layer averages."""
    fits = [fit_scoring(own, ctx, y, weight, starts, seed=seed + i, **kw) for i in range(members)]
    if members == 1:
        return fits[0]
    return Fit(Head.averaged([f.own for f in fits]), Head.averaged([f.ctx for f in fits]))


def fit_logistic(
    x: Array, y: Array, weight: Array, *, l2: float, epochs: int, names: Sequence[str]
) -> Head:
    mean, scale = standardise(x)
    xs = np.clip((x - mean) / scale, -8, 8)
    w = np.zeros((x.shape[1], 1))
    b = np.zeros(1)
    m = [np.zeros_like(w), np.zeros_like(b)]
    v = [np.zeros_like(w), np.zeros_like(b)]
    wsum = weight.sum()
    for step in range(1, epochs + 1):
        p = 1 / (1 + np.exp(-np.clip(xs @ w[:, 0] + b[0], -60, 60)))
        g = weight * (p - y) / wsum
        grads = [xs.T @ g[:, None] + l2 * w, np.array([g.sum()])]
        for i, (param, gr) in enumerate(zip((w, b), grads, strict=True)):
            m[i] = 0.9 * m[i] + 0.1 * gr
            v[i] = 0.999 * v[i] + 0.001 * gr * gr
            param -= 0.05 * (m[i] / (1 - 0.9**step)) / (np.sqrt(v[i] / (1 - 0.999**step)) + 1e-8)
    return Head(tuple(names), mean, scale, ((w, b),))


def question_weights(rows: list[QueryRows]) -> list[float]:
    """Each question weighs the same within its data set, and each data set half."""
    per = {d: sum(1 for r in rows if r.dataset == d) for d in {r.dataset for r in rows}}
    return [1.0 / (len(per) * per[r.dataset]) for r in rows]


def stack(
    rows: list[QueryRows],
    names: tuple[Sequence[str], Sequence[str]] = (OWN_FEATURES, CONTEXT_FEATURES),
) -> tuple[Array, Array, Array, Array, Starts]:
    qw = question_weights(rows)
    own = np.concatenate([matrix(r, names[0]) for r in rows])
    ctx = np.concatenate([matrix(r, names[1]) for r in rows])
    y = np.concatenate([r.label for r in rows])
    # a question's weight is shared by its candidates, positives and negatives
    # weighed apart (each half) so that a rare gold turn is not drowned
    w = []
    for r, q in zip(rows, qw, strict=True):
        pos = r.label.sum()
        neg = len(r.label) - pos
        w.append(np.where(r.label > 0, 0.5 * q / max(pos, 1), 0.5 * q / max(neg, 1)))
    lengths = [len(r.label) for r in rows if len(r.label)]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return own, ctx, y, np.concatenate(w), starts


#: the features of the heads for candidates without a speaker
SPEAKERLESS_NAMES = (SPEAKERLESS_OWN_FEATURES, SPEAKERLESS_CONTEXT_FEATURES)


def pool_recall(rows: list[QueryRows], score_of: Any, k: int = 10) -> float | None:
    """Recall@k of each question's anchor pool ranked by ``score_of(rows)``."""
    vals = []
    for r in rows:
        if not r.gold or r.category not in ANSWERABLE:
            continue
        mask = r.anchor
        scores = np.asarray(score_of(r))[mask]
        dias = [d for d, m in zip(r.dia, mask, strict=True) if m]
        order = np.lexsort((np.arange(len(scores)), -scores))[:k]
        got = {t for i in order for t in turn_ids(dias[i])}
        vals.append(sum(1 for g in r.gold if g in got) / len(r.gold))
    return float(np.mean(vals)) if vals else None


def base_of(dataset: str) -> str:
    """The data file a data set was made from (``"beam-100k+messages"`` -> ``"beam-100k"``)."""
    return dataset.split("+", 1)[0]


def fold_of(built: list[Built], folds: int) -> dict[tuple[str, str], int]:
    """Conversations into ``folds`` groups, round robin within each data
    file; a conversation's restyled copies share its fold, so no fold is
    tested on a conversation another style of it was trained on."""
    out: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], int] = {}
    seen: dict[str, int] = {}
    for b in built:
        key = (base_of(b.dataset), b.conversation)
        if key not in first:
            first[key] = seen.get(key[0], 0) % folds
            seen[key[0]] = seen.get(key[0], 0) + 1
        out[(b.dataset, b.conversation)] = first[key]
    return out


_MATRICES: dict[tuple[int, tuple[str, ...]], Array] = {}


def matrix(r: QueryRows, names: Sequence[str]) -> Array:
    """A question's rows as the features ``names`` (built once per question and names)."""
    key = (id(r), tuple(names))
    if key not in _MATRICES:
        _MATRICES[key] = feature_matrix(r.rows, names)
    return _MATRICES[key]


def learned_score(fit: Fit, r: QueryRows) -> Array:
    w = ANCHOR_RELEVANCE_WEIGHT
    return w * fit.own(matrix(r, fit.own.features)) + (1 - w) * fit.ctx(matrix(r, fit.ctx.features))


def mean_recall(ends: list[Any], dataset: str) -> float | None:
    vals = [e[3] for e in ends if e[0] == dataset and e[2] in ANSWERABLE and e[3] is not None]
    return float(np.mean(vals)) if vals else None


def assess_matrix(ends: list[Any]) -> tuple[Array, Array, list[str], list[float], list[str]]:
    xs, ys, ds, hands, convs = [], [], [], [], []
    for dataset, conv, cat, _recall, last, *_size in ends:
        if last is None:
            continue
        req, got = last
        hand = hand_value(got, "sufficiency")
        xs.append(assessment_row(req.state, hand, ASSESSMENT_FEATURES)[0])
        ys.append(0.0 if cat == ADVERSARIAL else 1.0)
        ds.append(dataset)
        hands.append(hand)
        convs.append(conv)
    return np.asarray(xs), np.asarray(ys), ds, hands, convs


def auroc_of(scores: Sequence[float], labels: Sequence[float]) -> float | None:
    pos = [s for s, y in zip(scores, labels, strict=True) if y > 0]
    neg = [s for s, y in zip(scores, labels, strict=True) if y == 0]
    return auroc(pos, neg)


def digest(paths: Sequence[Path]) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in paths}


def source_key(args: argparse.Namespace) -> str:
    """What stage 1's recording depends on: the data and the read path's code."""
    h = hashlib.sha256()
    pkg = Path(jevmem.__file__).resolve().parent
    for path in [*args.data, *sorted(pkg.rglob("*.py")), *sorted(pkg.glob("_core*"))]:
        h.update(str(path.name).encode())
        h.update(Path(path).read_bytes())
    styles = (args.styles, args.speakerless_styles)
    h.update(repr((args.embedder, args.k, args.limit_conversations, styles)).encode())
    return h.hexdigest()


def recorded(args: argparse.Namespace, built: list[Built]) -> tuple[list[QueryRows], list[Any]]:
    """Stage 1, or its saved result when nothing it depends on changed."""
    key = source_key(args)
    cache = args.record_cache
    if cache is not None and cache.exists():
        with cache.open("rb") as f:
            saved = pickle.load(f)
        if saved.get("key") == key:
            log(f"  read from {cache}")
            return saved["rows"], saved["ends"]
    rows, ends = record(built, lambda b: jevmem.LocalController(), args.k)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("wb") as f:
            pickle.dump({"key": key, "rows": rows, "ends": ends}, f)
    return rows, ends


def run(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    every = build_all(args)
    if not any(b.questions for b in every if b.fitted):
        raise SystemExit(
            f"train_controller: no questions to fit on: the data files hold "
            f"{len({(b.dataset, b.conversation) for b in every})} conversations and none asks one"
        )
    if args.scoring_from is not None:
        return run_sufficiency_only(args, every)
    # recorded: what some heads are fitted on; built: what the scoring heads are
    recorded_built = [b for b in every if b.fitted or b.speakerless_fitted]
    built = [b for b in every if b.fitted]
    judged = [b for b in every if b.judged]
    datasets = sorted({b.dataset for b in built})
    kw: dict[str, Any] = dict(
        hidden=args.hidden,
        l2=args.l2,
        epochs=args.epochs,
        seed=args.seed,
        loss=args.loss,
        members=args.members,
        monotone=args.monotone,
    )

    log("stage 1: recording the hand controller's requests")
    # the speakerless heads' rows (their own styles too), and the scoring heads'
    bare_rows, every_hand_ends = recorded(args, recorded_built)
    if args.record_only:
        return {"recorded_questions": len(bare_rows), "record_cache": str(args.record_cache)}
    rows = [r for r in bare_rows if r.dataset in datasets]
    hand_ends = [e for e in every_hand_ends if e[0] in datasets]
    folds = fold_of(every, args.folds)
    fold_fits: dict[int, Fit] = {}
    speakerless_fits: dict[int, Fit] = {}
    held_pool: dict[str, dict[str, float | None]] = {d: {} for d in datasets}
    for f in range(args.folds):
        train = [r for r in rows if folds[(r.dataset, r.conversation)] != f]
        if not train:
            continue
        fold_fits[f] = fit_members(*stack(train), **kw)
        if args.speakerless:
            bare_train = [r for r in bare_rows if folds[(r.dataset, r.conversation)] != f]
            speakerless_fits[f] = fit_members(
                *stack(bare_train, SPEAKERLESS_NAMES), names=SPEAKERLESS_NAMES, **kw
            )
        log(f"  fold {f}: fitted on {len(train)} questions")
    # every conversation is judged by the heads fitted without its fold: a
    # fold with nothing outside it to fit on cannot be held out
    unfit = sorted({folds[(b.dataset, b.conversation)] for b in every} - set(fold_fits))
    if unfit:
        raise SystemExit(
            f"train_controller: cannot hold out by conversation: no questions outside "
            f"fold(s) {unfit} to fit on (--folds {args.folds}; each data file's conversations "
            "are dealt into the folds in turn): give the data files at least two "
            "conversations with questions each"
        )

    def speakerless_score(r: QueryRows) -> Array:
        return learned_score(speakerless_fits[folds[(r.dataset, r.conversation)]], r)

    lodo_fits: dict[str, Fit] = {}
    for d in datasets:
        test = [r for r in rows if r.dataset == d]
        held_pool[d]["hand"] = pool_recall(test, lambda r: r.hand)
        held_pool[d]["learned_by_conversation"] = pool_recall(
            test, lambda r: learned_score(fold_fits[folds[(r.dataset, r.conversation)]], r)
        )
        if speakerless_fits:
            held_pool[d]["speakerless_by_conversation"] = pool_recall(test, speakerless_score)
        others = [r for r in rows if base_of(r.dataset) != base_of(d)]
        if others:
            # one fit per data file left out, whatever its styles
            if base_of(d) not in lodo_fits:
                lodo_fits[base_of(d)] = fit_members(*stack(others), **kw)
            lodo = lodo_fits[base_of(d)]
            held_pool[d]["learned_other_dataset_only"] = pool_recall(
                test, lambda r, fit=lodo: learned_score(fit, r)
            )
        log(f"  pool recall@10 {d}: {held_pool[d]}")
    for d in sorted({r.dataset for r in bare_rows} - set(datasets)):
        test = [r for r in bare_rows if r.dataset == d]
        held_pool[d] = {
            "hand": pool_recall(test, lambda r: r.hand),
            "speakerless_by_conversation": pool_recall(test, speakerless_score),
        }
        log(f"  pool recall@10 {d} (speakerless heads only): {held_pool[d]}")

    log("stage 2: end to end with held-out scoring heads")

    def controller_for_ends(b: Built) -> LearnedController:
        fit = fold_fits[folds[(b.dataset, b.conversation)]]
        return LearnedController(
            SystemOneModel({"score.relevance": fit.own, "score.support": fit.ctx})
        )

    _learned_rows, learned_ends = record(built, controller_for_ends, args.k)
    end_to_end = {
        d: {"hand": mean_recall(hand_ends, d), "learned": mean_recall(learned_ends, d)}
        for d in datasets
    }
    judged_table = judge(judged, folds, fold_fits, speakerless_fits, args.k)
    log(f"  full-mode recall@10 held out: {end_to_end}")

    log("stage 3: the sufficiency head")
    window_ends = (
        record_windows(built, args.windows, controller_for_ends, args.k) if args.windows else []
    )
    suff_head, abstention, abstention_windows = fit_sufficiency(
        args, learned_ends, window_ends, folds, datasets
    )

    heads: dict[str, Head] = {}
    scoring_ok = beats(end_to_end) or args.ship_all
    if scoring_ok:
        final = fit_members(*stack(rows), **kw)
        heads["score.relevance"], heads["score.support"] = final.own, final.ctx
    # the speakerless heads with them, where on every style judged (memories
    # they were not fitted on) they beat both the hand rules and the other heads
    speakerless_ok = bool(judged_table) and all(
        (v.get("learned_speakerless") or 0.0) > max(v["hand"] or 0.0, v["learned"] or 0.0)
        for v in judged_table.values()
    )
    if scoring_ok and args.speakerless and (speakerless_ok or args.ship_all):
        final = fit_members(*stack(bare_rows, SPEAKERLESS_NAMES), names=SPEAKERLESS_NAMES, **kw)
        heads["score.relevance" + SPEAKERLESS] = final.own
        heads["score.support" + SPEAKERLESS] = final.ctx
    if suff_head is not None:
        heads["assess.sufficiency"] = suff_head
    return finish(
        args,
        built,
        heads,
        t_start,
        {
            "candidate_rows": int(sum(len(r.label) for r in rows)),
            "folds": args.folds,
            "settings": kw,
            "held_out_pool_recall@10": held_pool,
            "held_out_full_recall@10": end_to_end,
            "held_out_abstain_auroc": abstention,
            "held_out_abstain_auroc_windows": abstention_windows,
            "windows": args.windows,
            "held_out_full_recall@10_judged": judged_table,
            "speakerless": args.speakerless,
            "styles": args.styles,
            "speakerless_styles": args.speakerless_styles,
            "judge_styles": args.judge_styles,
        },
    )


def finish(
    args: argparse.Namespace,
    built: list[Built],
    heads: dict[str, Head],
    t_start: float,
    fields: dict[str, Any],
) -> dict[str, Any]:
    """The run's report (what it was fitted on, ``fields``, what shipped,
    how it was run), and the model with it as its training record written
    to ``--out``."""
    datasets = sorted({b.dataset for b in built})
    report = {
        "datasets": datasets,
        "data_sha256": digest(args.data),
        "conversations": {d: sum(1 for b in built if b.dataset == d) for d in datasets},
        "questions": {d: sum(len(b.questions) for b in built if b.dataset == d) for d in datasets},
        **fields,
        "shipped_heads": sorted(heads),
        "ship_all": args.ship_all,
        "seconds": time.perf_counter() - t_start,
        "machine": machine(),
        "command": " ".join([".venv/bin/python", *map(shlex.quote, sys.argv)]),
    }
    if args.out is not None:
        SystemOneModel(heads, {"version": args.version, "training": report}).save(args.out)
        log(f"wrote {args.out} with heads {sorted(heads)}")
    return report


def beats(table: dict[str, dict[str, float | None]], key: str = "learned") -> bool:
    """Whether ``key`` beats the hand rule on every data set of ``table``
    that has a hand figure; never when none has one (no answerable question
    whose evidence a turn carries, or one class only): a head nothing
    judged is not shipped."""
    judged = [v for v in table.values() if v.get("hand") is not None]
    if not judged:
        log(f"  no data set judged {key!r} against the hand rule (no figures): not shipped")
    return bool(judged) and all((v.get(key) or 0.0) > (v.get("hand") or 0.0) for v in judged)


Table = dict[str, dict[str, float | None]]


def fit_sufficiency(
    args: argparse.Namespace,
    ends: list[Any],
    window_ends: list[Any],
    folds: dict[tuple[str, str], int],
    datasets: list[str],
) -> tuple[Head | None, Table, dict[str, Table]]:
    """Stage 3: the sufficiency head fitted on the last assessment of each
    search (full memories, and the windows where given), held out by
    conversation; the head fitted on all of them when it beats the hand
    rule held out on every data set (on full memories, and on the windows
    pooled), else None (``--ship-all``: always). Returns the head, the
    held-out AUROC per data set on full memories, and per window size (and
    ``"all"``, the windows pooled) per data set."""
    x, y, ds, hands, convs = assess_matrix([*ends, *window_ends])
    # a search that made no assessment has no row (`assess_matrix`)
    sizes = [0 for e in ends if e[4] is not None] + [e[5] for e in window_ends if e[4] is not None]
    group = np.array(sizes)
    d_arr = np.array(ds)
    fold_ids = np.array([folds[(d, c)] for d, c in zip(ds, convs, strict=True)])
    # each data set weighs the same; within one, full memories half and the
    # windows half (each size alike), and within each of those the abstention
    # questions as much as the answerable ones
    share = (
        {0: 1.0}
        if not window_ends
        else {0: 0.5, **{z: 0.5 / len(args.windows) for z in args.windows}}
    )
    w = np.zeros(len(y))
    for d in datasets:
        for g, part in share.items():
            for label in (0.0, 1.0):
                m = (d_arr == d) & (group == g) & (y == label)
                if m.any():
                    w[m] = part / (2 * len(datasets) * m.sum())
    held = np.zeros(len(y))
    for f in range(args.folds):
        tr, te = fold_ids != f, fold_ids == f
        if tr.any() and te.any() and len(set(y[tr])) == 2:
            head = fit_logistic(
                x[tr], y[tr], w[tr], l2=args.l2, epochs=args.epochs, names=ASSESSMENT_FEATURES
            )
            held[te] = head(x[te])

    def table(mask: npt.NDArray[np.bool_]) -> Table:
        out: Table = {}
        for d in datasets:
            m = mask & (d_arr == d)
            if m.any():
                out[d] = {
                    "hand": auroc_of([h for h, k in zip(hands, m, strict=True) if k], list(y[m])),
                    "learned": auroc_of(list(held[m]), list(y[m])),
                }
        return out

    full = table(group == 0)
    log(f"  abstention AUROC held out: {full}")
    by_size: dict[str, Table] = {}
    if window_ends:
        for z in args.windows:
            by_size[str(z)] = table(group == z)
        by_size["all"] = table(group > 0)
        log(f"  abstention AUROC held out, windows: {by_size}")
    ok = beats(full) and (not window_ends or beats(by_size["all"]))
    if not ((ok or args.ship_all) and len(set(y)) == 2):
        return None, full, by_size
    final = fit_logistic(x, y, w, l2=args.l2, epochs=args.epochs, names=ASSESSMENT_FEATURES)
    return final, full, by_size


def run_sufficiency_only(args: argparse.Namespace, every: list[Built]) -> dict[str, Any]:
    """``--scoring-from``: the given model's scoring heads kept as they are,
    the sufficiency head fitted on searches made with them."""
    t_start = time.perf_counter()
    given = SystemOneModel.load(args.scoring_from)
    scoring = {k: h for k, h in given.heads.items() if k.startswith("score.")}
    built = [b for b in every if b.fitted]
    datasets = sorted({b.dataset for b in built})
    folds = fold_of(every, args.folds)

    def controller_for_ends(b: Built) -> LearnedController:
        return LearnedController(SystemOneModel(scoring))

    log(f"stage 2: searches with the scoring heads of {args.scoring_from}")
    _rows, ends = record(built, controller_for_ends, args.k)
    log("stage 3: the sufficiency head")
    window_ends = (
        record_windows(built, args.windows, controller_for_ends, args.k) if args.windows else []
    )
    head, abstention, abstention_windows = fit_sufficiency(args, ends, window_ends, folds, datasets)
    heads = dict(scoring)
    if head is not None:
        heads["assess.sufficiency"] = head
    return finish(
        args,
        built,
        heads,
        t_start,
        {
            "folds": args.folds,
            "settings": {"l2": args.l2, "epochs": args.epochs},
            "scoring_from": {
                "path": str(args.scoring_from),
                "version": given.meta.get("version"),
                "training": given.meta.get("training"),
            },
            "full_recall@10": {d: mean_recall(ends, d) for d in datasets},
            "held_out_abstain_auroc": abstention,
            "held_out_abstain_auroc_windows": abstention_windows,
            "windows": args.windows,
        },
    )


def comma_list(value: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (a style list option)."""
    return [x.strip() for x in value.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, action="append", required=True)
    ap.add_argument("--out", type=Path, default=None, help="model file to write")
    ap.add_argument("--report", type=Path, default=None, help="JSON report to write")
    ap.add_argument("--embedder", choices=("onnx", "hash"), default="onnx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--embedding-cache", type=Path, default=None)
    ap.add_argument(
        "--record-cache",
        type=Path,
        default=None,
        help="keep stage 1's recording here (reused while the data and jevmem's code are unchanged)",
    )
    ap.add_argument(
        "--record-only", action="store_true", help="stop after stage 1 (with --record-cache)"
    )
    ap.add_argument("--limit-conversations", type=int, default=None, help="per data file")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=0, help="hidden units per head (0: logistic)")
    ap.add_argument("--l2", type=float, default=1e-3)
    ap.add_argument("--epochs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--members",
        type=int,
        default=1,
        help="scoring heads fitted from successive seeds and averaged (one merged head)",
    )
    ap.add_argument("--loss", choices=("listwise", "pointwise"), default="listwise")
    ap.add_argument(
        "--ship-all",
        action="store_true",
        help="write every head, also those the hand rules beat held out (experiments, tests)",
    )
    ap.add_argument(
        "--speakerless",
        action="store_true",
        help="also fit heads for candidates without a speaker (the features without speaker signals)",
    )
    ap.add_argument(
        "--monotone",
        action="store_true",
        help="keep the relevance head non-decreasing in the match signals (MATCH_FEATURES)",
    )
    ap.add_argument(
        "--styles",
        type=comma_list,
        default=["turns"],
        help="comma-separated, from turns,messages,blocks: each conversation is also "
        "trained on in these restyled forms (jevmem.evaluation.as_messages, as_blocks), "
        "each a data set of its own",
    )
    ap.add_argument(
        "--speakerless-styles",
        type=comma_list,
        default=[],
        help="comma-separated restyles only the speakerless heads are also fitted on (with "
        "--speakerless): memories whose nodes have no speaker, as those heads serve",
    )
    ap.add_argument(
        "--judge-styles",
        type=comma_list,
        default=[],
        help="comma-separated restyles the heads are judged on, never fitted on: full-mode "
        "recall@10 held out by conversation (the speakerless heads ship only where they "
        "win on every one)",
    )
    ap.add_argument(
        "--windows",
        type=lambda v: [int(x) for x in comma_list(v)],
        default=[],
        help="comma-separated sizes: the sufficiency head is also fitted and judged on "
        "young memories, each question in a window of that many consecutive turns that "
        "holds its evidence (jevmem.evaluation.windows)",
    )
    ap.add_argument(
        "--scoring-from",
        type=Path,
        default=None,
        help="keep this model file's scoring heads and fit only the sufficiency head",
    )
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--version", default="1")
    args = ap.parse_args(argv)
    # each refused here, not in a traceback after stage 1 has run for minutes
    if args.folds < 2:
        ap.error("--folds must be at least 2: each fold is held out while the others fit")
    if args.hidden < 0:
        ap.error("--hidden must be >= 0 (0: a logistic head)")
    if args.members < 1:
        ap.error("--members must be >= 1")
    if args.epochs < 1:
        ap.error("--epochs must be >= 1")
    if not (math.isfinite(args.l2) and args.l2 >= 0):
        ap.error(f"--l2 must be a finite number >= 0, got {args.l2}")
    if any(z < 1 for z in args.windows):
        ap.error("--windows sizes must be >= 1")
    for style in [*args.styles, *args.speakerless_styles, *args.judge_styles]:
        if style not in RESTYLES:
            ap.error(f"unknown style {style!r}; expected some of {','.join(RESTYLES)}")
    if args.speakerless_styles and not args.speakerless:
        ap.error("--speakerless-styles fits the speakerless heads: add --speakerless")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    print(json.dumps(report, indent=2))
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Pure-Python reference of jevmem's bounded beam traversal (stdlib only).

This is the same algorithm as ``rust/core/src/traversal.rs`` (and its helpers
in ``budget.rs``), written plainly so that a test can check that both give
identical results (``tests/test_traversal.py``, its oracle) and a benchmark can
time it against the Rust one (``bench/bench_traversal.py``);
``bench/check_traversal_reference.py`` replays cases the Rust tests write.

Protocol (identical to Rust)::

    t = Traversal.start(config, routing, unit_query, now, anchors, calls_used,
                        elapsed_before, graph)
    while not t.done:
        if t.phase == "assess":  t.assess(Assessment(...))       # one controller call
        elif t.phase == "expand": cands = t.expand(graph)        # no controller
        elif t.phase == "score":  t.score(graph, [CandidateScores(...)] * len(cands))
    t.result(k), t.trace()

Numerics. The Rust side receives every score as f32 and computes in f64, so
this module rounds every score, routing value and float config value to f32
first (``f32()``), then computes in Python floats (IEEE doubles). The combined
scores then agree bit for bit, except for embedding similarity: Rust's graph
returns an f32 cosine, ``Graph.similarity`` here computes the dot product in
doubles and rounds it to f32, so z can differ in the last f32 bit (about 1e-7).
Budget apportionment is exact integer arithmetic on both sides; view weights
p**gamma agree exactly for gamma = 1 (Rust uses powf, which may differ from
Python's ** in the last bit for other gammas).

Graph format (``Graph``):
  nodes       set of node ids
  edges       edges[view][node] -> list of (neighbor, weight, src, dst), every
              edge listed at both ends; view is 0..3 (semantic, temporal,
              causal, entity)
  embeddings  node -> list of floats (unit length), optional per node
  timestamps  node -> int unix seconds, optional per node
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Literal, TypedDict, cast

VIEWS = ("semantic", "temporal", "causal", "entity")
SECONDS_PER_DAY = 86_400.0
WEIGHT_BITS = 41  # fixed-point bits of the largest weight in largest_remainder

Phase = Literal["assess", "expand", "score", "done"]
StopReason = Literal[
    "sufficient",
    "not_useful",
    "depth_limit",
    "visited_limit",
    "edge_limit",
    "controller_call_limit",
    "time_limit",
    "budget_exhausted",
    "frontier_exhausted",
]
Views = tuple[float, float, float, float]
Lambdas = tuple[float, float, float, float, float]

STOP_REASONS: tuple[StopReason, ...] = (
    "sufficient",
    "not_useful",
    "depth_limit",
    "visited_limit",
    "edge_limit",
    "controller_call_limit",
    "time_limit",
    "budget_exhausted",
    "frontier_exhausted",
)


# ---------------------------------------------------------------- errors


class TraversalError(Exception):
    """Base class; every error leaves the traversal unchanged."""


class InvalidInput(TraversalError, ValueError):
    pass


class InvalidScore(TraversalError, ValueError):
    pass


class InvalidConfig(TraversalError, ValueError):
    pass


class InvalidState(TraversalError):
    pass


class NodeNotFound(TraversalError, KeyError):
    pass


# ---------------------------------------------------------------- numbers


def f32(x: float) -> float:
    """Round a Python float to the nearest f32, as the Rust API receives it."""
    (v,) = struct.unpack("f", struct.pack("f", x))
    return float(v)


def is_unit(x: float) -> bool:
    return math.isfinite(x) and 0.0 <= x <= 1.0


def check_unit(what: str, x: float) -> float:
    """Round to f32 and check it is a finite number in [0, 1]."""
    try:
        v = f32(x)
    except (OverflowError, TypeError, struct.error):
        raise InvalidScore(f"{what} must be a finite number in [0, 1], got {x!r}") from None
    if not is_unit(v):
        raise InvalidScore(f"{what} must be a finite number in [0, 1], got {x!r}")
    return v


# ---------------------------------------------------------------- budgets


def largest_remainder(weights: Sequence[float], total: int, minimum: int) -> list[int]:
    """Every entry gets ``minimum``; R = total - minimum*n is split by the
    weights: floors first, the leftover units to the largest remainders
    (ties to the smaller index). Exact: weights are scaled by a power of two
    so the largest lands in [2^40, 2^41) and truncated to integers, exactly as
    the Rust code does."""
    if not weights:
        raise InvalidInput("largest_remainder needs at least one weight")
    for w in weights:
        if not math.isfinite(w) or w < 0:
            raise InvalidInput(f"weights must be finite and >= 0, got {w}")
    if all(w == 0 for w in weights):
        raise InvalidInput("weights are all zero")
    n = len(weights)
    if total < minimum * n:
        raise InvalidConfig(f"total {total} is below minimum {minimum} times {n} entries")
    rest = total - minimum * n
    # Top set bit of the largest weight: w = m * 2^e with m in [0.5, 1) -> 2^(e-1).
    top = max(math.frexp(w)[1] - 1 for w in weights if w > 0)
    scale = Fraction(2) ** (WEIGHT_BITS - 1 - top)
    q = [math.floor(Fraction(w) * scale) for w in weights]
    q_sum = sum(q)
    out: list[int] = []
    rems: list[int] = []
    for qi in q:
        share, rem = divmod(rest * qi, q_sum)
        out.append(minimum + share)
        rems.append(rem)
    leftover = rest - sum(o - minimum for o in out)
    for i in sorted(range(n), key=lambda i: (-rems[i], i))[:leftover]:
        out[i] += 1
    return out


def view_budgets(
    probs: Sequence[float], theta_act: float, total: int, minimum: int, gamma: float
) -> tuple[list[bool], list[int], bool]:
    """Returns (active[4], budgets[4], fallback)."""
    probs = [check_unit(f"routing probability of view {VIEWS[i]}", p) for i, p in enumerate(probs)]
    theta_act, gamma = f32(theta_act), f32(gamma)
    if not is_unit(theta_act):
        raise InvalidConfig(f"theta_act must be in [0, 1], got {theta_act}")
    if not (math.isfinite(gamma) and gamma > 0):
        raise InvalidConfig(f"gamma must be finite and > 0, got {gamma}")
    active = [p >= theta_act for p in probs]
    fallback = not any(active)
    if fallback:
        best = 0
        for i in range(1, 4):
            if probs[i] > probs[best]:
                best = i
        active[best] = True
    idx = [i for i in range(4) if active[i]]
    weights: list[float] = [probs[i] ** gamma for i in idx]
    if all(w == 0 for w in weights):
        weights = [1.0] * len(idx)  # all-zero routing: equal shares
    shares = largest_remainder(weights, total, minimum)
    budgets = [0] * 4
    for i, b in zip(idx, shares, strict=True):
        budgets[i] = b
    return active, budgets, fallback


def depth_limit(multi_hop: float, depth_max: int) -> int:
    """D(q) = min(D_max, max(1, ceil(D_max * h)))."""
    raw = depth_max * f32(multi_hop)
    d = math.ceil(raw) if raw >= 1.0 else 1
    return min(d, depth_max)


def rrf(lists: Sequence[Sequence[int]], kappa: float = 60.0) -> list[tuple[int, float]]:
    """Reciprocal rank fusion; duplicates count at their first position."""
    if not (math.isfinite(kappa) and kappa > 0):
        raise InvalidConfig(f"rrf kappa must be finite and > 0, got {kappa}")
    scores: dict[int, float] = {}
    for lst in lists:
        seen: set[int] = set()
        for pos, node in enumerate(lst):
            if node not in seen:
                seen.add(node)
                scores[node] = scores.get(node, 0.0) + 1.0 / (kappa + (pos + 1))
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


# ---------------------------------------------------------------- data


@dataclass
class TraversalConfig:
    total_budget: int = 80
    min_per_view: int = 1
    gamma: float = 1.0
    theta_act: float = 0.10
    depth_max: int = 8
    beam_width: int = 10
    max_visited: int = 60
    max_edges: int = 2400
    max_controller_calls: int = 16
    max_wall: float = 15.0  # seconds
    theta_suff: float = 0.95
    theta_missing: float = 0.15
    theta_contradiction: float = 0.15
    theta_useful: float = 0.15
    lambdas: Lambdas = (1.0, 1.0, 1.0, 1.0, 1.0)
    recency_weight: float = 0.1
    min_admit_score: float = 0.25

    def validated(self) -> TraversalConfig:
        """A copy with float fields rounded to f32 (as Rust stores them), or InvalidConfig."""
        for name in (
            "total_budget",
            "depth_max",
            "beam_width",
            "max_visited",
            "max_edges",
            "max_controller_calls",
        ):
            if getattr(self, name) < 1:
                raise InvalidConfig(f"{name} must be >= 1")
        if self.total_budget < 4 * self.min_per_view or self.min_per_view < 0:
            raise InvalidConfig("total_budget cannot give min_per_view to all four views")
        c = replace(
            self,
            gamma=f32(self.gamma),
            theta_act=f32(self.theta_act),
            theta_suff=f32(self.theta_suff),
            theta_missing=f32(self.theta_missing),
            theta_contradiction=f32(self.theta_contradiction),
            theta_useful=f32(self.theta_useful),
            # Any length is rounded here; a wrong one is rejected below.
            lambdas=cast(Lambdas, tuple(f32(x) for x in self.lambdas)),
            recency_weight=f32(self.recency_weight),
            min_admit_score=f32(self.min_admit_score),
        )
        if not (math.isfinite(c.gamma) and c.gamma > 0):
            raise InvalidConfig("gamma must be finite and > 0")
        for name in (
            "theta_act",
            "theta_suff",
            "theta_missing",
            "theta_contradiction",
            "theta_useful",
            "min_admit_score",
        ):
            if not is_unit(getattr(c, name)):
                raise InvalidConfig(f"{name} must be in [0, 1]")
        if len(c.lambdas) != 5 or any(not math.isfinite(x) or x < 0 for x in c.lambdas):
            raise InvalidConfig("lambdas must be five finite numbers >= 0")
        if sum(c.lambdas) <= 0:
            raise InvalidConfig("lambdas must not all be zero")
        if not (math.isfinite(c.recency_weight) and c.recency_weight >= 0):
            raise InvalidConfig("recency_weight must be finite and >= 0")
        if not c.max_wall > 0:
            raise InvalidConfig("max_wall must be > 0")
        return c


@dataclass(frozen=True)
class Routing:
    views: Views  # p_g(q) by view index
    multi_hop: float  # h(q)
    recency: float  # r(q)


@dataclass(frozen=True)
class Assessment:
    sufficiency: float
    usefulness: float
    missing: float
    contradiction: float


@dataclass(frozen=True)
class CandidateScores:
    relevance: float  # a_v
    relation_usefulness: float  # l_v
    novelty: float  # n_v
    support: float  # c_v


@dataclass(frozen=True)
class Candidate:
    node: int
    view: int
    edge_weight: float
    src: int
    dst: int
    from_: int  # the frontier node it was reached from


@dataclass(frozen=True)
class EvidenceItem:
    node: int
    score: float
    depth: int
    via: Candidate | None


@dataclass
class Graph:
    nodes: set[int]
    edges: dict[int, dict[int, list[tuple[int, float, int, int]]]] = field(default_factory=dict)
    embeddings: dict[int, list[float]] = field(default_factory=dict)
    timestamps: dict[int, int] = field(default_factory=dict)

    def contains(self, node: int) -> bool:
        return node in self.nodes

    def edges_of(self, node: int, view: int) -> list[tuple[int, float, int, int]]:
        return self.edges.get(view, {}).get(node, [])

    def similarity(self, unit_query: Sequence[float], node: int) -> float | None:
        emb = self.embeddings.get(node)
        if emb is None:
            return None
        return f32(sum(q * e for q, e in zip(unit_query, emb, strict=False)))

    def timestamp(self, node: int) -> int | None:
        return self.timestamps.get(node)


def _sane_weight(w: float) -> float:
    """Graph weights are trusted but a broken one must not poison ordering."""
    w = f32(w)
    return min(w, 1.0) if w > 0 else 0.0  # NaN and -0.0 -> 0.0


# ---------------------------------------------------------------- traversal


class RoundTrace(TypedDict):
    """Round d: the assessment of the evidence after d expansions, and what
    expansion d produced (round 0: no candidates, the anchors as admitted)."""

    depth: int
    assessment: Assessment | None
    candidates: int
    admitted: int


class Trace(TypedDict):
    routing: Routing
    active: list[bool]
    budgets: list[int]
    spent: list[int]
    fallback: bool
    depth_limit: int
    rounds: list[RoundTrace]
    stop: StopReason | None
    visited: int
    edges_examined: int
    controller_calls: int
    elapsed: float


class Traversal:
    """One query's traversal. ``phase`` is "assess", "expand", "score" or "done";
    ``stop`` holds the stop reason once done."""

    def __init__(
        self,
        *,
        config: TraversalConfig,
        routing: Routing,
        query: list[float] | None,
        now: int | None,
        active: list[bool],
        budgets: list[int],
        fallback: bool,
        view_order: list[int],
        depth_limit: int,
        seeded: list[tuple[int, float]],
        calls_used: int,
        elapsed_before: float,
        clock: Callable[[], float],
    ) -> None:  # use Traversal.start, which validates the inputs
        self.phase: Phase = "assess"
        self.stop: StopReason | None = None
        self.config = config
        self.routing = routing
        self.query = query
        self.now = now
        self.active = active
        self.budgets = budgets
        self.spent = [0, 0, 0, 0]
        self.fallback = fallback
        # Active views by routing probability desc, ties by view index.
        self.view_order = view_order
        self.depth_limit = depth_limit
        self.visited: set[int] = {node for node, _ in seeded}
        self.evidence: list[EvidenceItem] = [
            EvidenceItem(node, score, 0, None) for node, score in seeded
        ]
        self.frontier: list[int] = [
            node for node, _ in sorted(seeded, key=lambda a: (-a[1], a[0]))
        ][: config.beam_width]
        self.candidates: list[Candidate] = []
        self.rounds: list[RoundTrace] = [
            {"depth": 0, "assessment": None, "candidates": 0, "admitted": len(seeded)}
        ]
        self.completed_rounds = 0
        self.edges_examined = 0
        self.controller_calls = calls_used
        # A limit reached during the last expansion; ends the traversal after scoring.
        self.pending_limit: StopReason | None = None
        self.clock = clock
        self.origin = clock()
        self.elapsed_before = elapsed_before
        # Elapsed time frozen when the traversal finished.
        self.finished_after: float | None = None

    # --- construction

    @classmethod
    def start(
        cls,
        config: TraversalConfig,
        routing: Routing,
        unit_query: Sequence[float] | None,
        now: int | None,
        anchors: Sequence[tuple[int, float]],
        calls_used: int,
        elapsed_before: float,
        graph: Graph,
        clock: Callable[[], float] = time.monotonic,
    ) -> Traversal:
        cfg = config.validated()
        views: Views = (
            check_unit(f"routing {VIEWS[0]}", routing.views[0]),
            check_unit(f"routing {VIEWS[1]}", routing.views[1]),
            check_unit(f"routing {VIEWS[2]}", routing.views[2]),
            check_unit(f"routing {VIEWS[3]}", routing.views[3]),
        )
        routing = Routing(
            views,
            check_unit("routing multi_hop", routing.multi_hop),
            check_unit("routing recency", routing.recency),
        )
        query: list[float] | None = None
        if unit_query is not None:
            query = [f32(x) for x in unit_query]
            if not query or not all(math.isfinite(x) for x in query):
                raise InvalidInput("query embedding must be non-empty and finite")
        if calls_used > cfg.max_controller_calls:
            raise InvalidInput("more controller calls already used than the limit")
        seen: set[int] = set()
        clean: list[tuple[int, float]] = []
        for i, (node, score) in enumerate(anchors):
            unit_score = check_unit(f"anchor {i} score", score)
            if not graph.contains(node):
                raise NodeNotFound(node)
            if node in seen:
                raise InvalidInput(f"anchor {node} given twice")
            seen.add(node)
            clean.append((node, unit_score))
        active, budgets, fallback = view_budgets(
            routing.views, cfg.theta_act, cfg.total_budget, cfg.min_per_view, cfg.gamma
        )
        t = cls(
            config=cfg,
            routing=routing,
            query=query,
            now=now,
            active=active,
            budgets=budgets,
            fallback=fallback,
            view_order=sorted(
                (i for i in range(4) if active[i]), key=lambda i: (-routing.views[i], i)
            ),
            depth_limit=depth_limit(routing.multi_hop, cfg.depth_max),
            # Anchors beyond max_visited are dropped in the given (ranked) order.
            seeded=clean[: cfg.max_visited],
            calls_used=calls_used,
            elapsed_before=elapsed_before,
            clock=clock,
        )
        if t._over_time():
            t._finish("time_limit")
        elif not t.frontier:
            t._finish("frontier_exhausted")
        elif t.calls_left() == 0:
            t._finish("controller_call_limit")
        return t

    # --- bookkeeping

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def calls_left(self) -> int:
        return max(0, self.config.max_controller_calls - self.controller_calls)

    def elapsed(self) -> float:
        if self.finished_after is not None:
            return self.finished_after
        return self.elapsed_before + max(0.0, self.clock() - self.origin)

    def _over_time(self) -> bool:
        return self.elapsed() >= self.config.max_wall

    def _finish(self, reason: StopReason) -> None:
        self.finished_after = self.elapsed()
        self.phase, self.stop = "done", reason

    def _expect(self, phase: Phase, step: str) -> None:
        if self.phase != phase:
            raise InvalidState(f"{step} called in phase {self.phase}, expected {phase}")

    def check_time(self) -> Phase:
        if not self.done and self._over_time():
            self._finish("time_limit")
        return self.phase

    # --- steps

    def assess(self, a: Assessment) -> Phase:
        """One controller call. Stop order: sufficient, not_useful, depth_limit,
        controller_call_limit (no call left for scoring), time_limit."""
        self._expect("assess", "assess")
        a = Assessment(
            check_unit("assessment sufficiency", a.sufficiency),
            check_unit("assessment usefulness", a.usefulness),
            check_unit("assessment missing", a.missing),
            check_unit("assessment contradiction", a.contradiction),
        )
        c = self.config
        self.controller_calls += 1
        self.rounds[-1]["assessment"] = a
        if (
            a.sufficiency >= c.theta_suff
            and a.missing < c.theta_missing
            and a.contradiction < c.theta_contradiction
        ):
            self._finish("sufficient")
        elif a.usefulness < c.theta_useful:
            self._finish("not_useful")
        elif self.completed_rounds >= self.depth_limit:
            self._finish("depth_limit")
        elif self.calls_left() == 0:
            self._finish("controller_call_limit")
        elif self._over_time():
            self._finish("time_limit")
        else:
            self.phase = "expand"
        return self.phase

    def _limit_reached(self) -> StopReason | None:
        """A hard expansion limit that is reached: edges, then visited, then budgets."""
        if self.edges_examined >= self.config.max_edges:
            return "edge_limit"
        if len(self.visited) >= self.config.max_visited:
            return "visited_limit"
        if all(self.spent[v] >= self.budgets[v] for v in self.view_order):
            return "budget_exhausted"
        return None

    def expand(self, graph: Graph) -> list[Candidate]:
        """Frontier in beam order; per node the active views by p desc; per view
        the edges by weight desc, neighbour id asc. Each examined edge counts;
        an edge to an unvisited, existing node spends one unit of its view's
        budget and yields a candidate. Limits end expansion when reached."""
        self._expect("expand", "expand")
        self.candidates = []
        if self._over_time():
            self._finish("time_limit")
            return []
        limit = self._limit_reached()
        for frm in self.frontier:
            if limit is not None:
                break
            for v in self.view_order:
                if self.spent[v] >= self.budgets[v]:
                    continue
                es = [(nb, _sane_weight(w), s, d) for nb, w, s, d in graph.edges_of(frm, v)]
                es.sort(key=lambda e: (-e[1], e[0], e[2], e[3]))
                for nb, w, s, d in es:
                    self.edges_examined += 1
                    if nb not in self.visited and graph.contains(nb):
                        self.visited.add(nb)
                        self.spent[v] += 1
                        self.candidates.append(Candidate(nb, v, w, s, d, frm))
                    limit = self._limit_reached()
                    if limit is not None or self.spent[v] >= self.budgets[v]:
                        break
                if limit is not None:
                    break
        if not self.candidates:
            self._finish(limit or "frontier_exhausted")
        else:
            self.pending_limit = limit
            self.rounds.append(
                {
                    "depth": self.completed_rounds + 1,
                    "assessment": None,
                    "candidates": len(self.candidates),
                    "admitted": 0,
                }
            )
            self.phase = "score"
        return list(self.candidates)

    def combined_score(self, graph: Graph, cand: Candidate, sc: CandidateScores) -> float:
        """s = (l1 z + l2 a + l3 p_g l + l4 n + l5 (pi + c)/2) / sum(l), then the
        recency blend s~ = (s + w r rho) / (1 + w r) when both times are known."""
        c, r = self.config, self.routing
        z = 0.0
        if self.query is not None:
            sim = graph.similarity(self.query, cand.node)
            if sim is not None and math.isfinite(sim):
                z = min(max(sim, 0.0), 1.0)
        l1, l2, l3, l4, l5 = c.lambdas
        s = (
            l1 * z
            + l2 * sc.relevance
            + l3 * r.views[cand.view] * sc.relation_usefulness
            + l4 * sc.novelty
            + l5 * (cand.edge_weight + sc.support) / 2.0
        ) / sum(c.lambdas)
        tau = graph.timestamp(cand.node)
        if self.now is not None and tau is not None:
            rho = 1.0 / (1.0 + max(0, self.now - tau) / SECONDS_PER_DAY)
            wr = c.recency_weight * r.recency
            s = (s + wr * rho) / (1.0 + wr)
        return s

    def score(self, graph: Graph, scores: Sequence[CandidateScores]) -> Phase:
        """One controller call. The top beam_width candidates with combined score
        >= min_admit_score become the frontier and join the evidence."""
        self._expect("score", "score")
        if len(scores) != len(self.candidates):
            raise InvalidInput(
                f"got {len(scores)} candidate scores for {len(self.candidates)} candidates"
            )
        clean = [
            CandidateScores(
                check_unit(f"candidate {i} relevance", s.relevance),
                check_unit(f"candidate {i} relation_usefulness", s.relation_usefulness),
                check_unit(f"candidate {i} novelty", s.novelty),
                check_unit(f"candidate {i} support", s.support),
            )
            for i, s in enumerate(scores)
        ]
        self.controller_calls += 1
        ranked = sorted(
            (
                (self.combined_score(graph, cand, sc), cand)
                for cand, sc in zip(self.candidates, clean, strict=True)
            ),
            key=lambda x: (-x[0], x[1].node),
        )
        depth = self.completed_rounds + 1
        self.frontier = []
        for s, cand in ranked[: self.config.beam_width]:
            if s < self.config.min_admit_score:
                break
            self.frontier.append(cand.node)
            self.evidence.append(EvidenceItem(cand.node, s, depth, cand))
        self.completed_rounds = depth
        self.rounds[-1]["admitted"] = len(self.frontier)
        if self.pending_limit is not None:
            limit, self.pending_limit = self.pending_limit, None
            self._finish(limit)
        elif not self.frontier:
            self._finish("frontier_exhausted")
        elif self.calls_left() == 0:
            self._finish("controller_call_limit")
        elif self._over_time():
            self._finish("time_limit")
        else:
            self.phase = "assess"
        return self.phase

    # --- results

    def result(self, k: int) -> list[EvidenceItem]:
        """Top-k evidence by score desc, id asc."""
        return sorted(self.evidence, key=lambda e: (-e.score, e.node))[:k]

    def trace(self) -> Trace:
        return {
            "routing": self.routing,
            "active": list(self.active),
            "budgets": list(self.budgets),
            "spent": list(self.spent),
            "fallback": self.fallback,
            "depth_limit": self.depth_limit,
            "rounds": [RoundTrace(**r) for r in self.rounds],
            "stop": self.stop,
            "visited": len(self.visited),
            "edges_examined": self.edges_examined,
            "controller_calls": self.controller_calls,
            "elapsed": self.elapsed(),
        }


if __name__ == "__main__":
    # Tiny smoke run: 1 -semantic- 2 -semantic- 3.
    g = Graph(
        nodes={1, 2, 3},
        edges={0: {1: [(2, 0.5, 1, 2)], 2: [(1, 0.5, 1, 2), (3, 0.9, 2, 3)], 3: [(2, 0.9, 2, 3)]}},
    )
    t = Traversal.start(
        TraversalConfig(),
        Routing((1.0, 0.0, 0.0, 0.0), 1.0, 0.0),
        None,
        None,
        [(1, 0.9)],
        1,
        0.0,
        g,
    )
    go_on = Assessment(0.0, 1.0, 1.0, 0.0)
    while not t.done:
        if t.phase == "assess":
            t.assess(go_on)
        elif t.phase == "expand":
            t.expand(g)
        else:
            t.score(g, [CandidateScores(1.0, 1.0, 1.0, 1.0)] * len(t.candidates))
    print(t.stop, [(e.node, round(e.score, 4), e.depth) for e in t.result(10)])

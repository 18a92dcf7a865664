"""Check tests/support/traversal_reference.py against the Rust traversal.

The Rust test suite writes random cases with its own outcomes:

    JEVMEM_TRAVERSAL_CASES=/tmp/cases.jsonl \\
        cargo test -p jevmem-core dump_cases -- --ignored
    python3 bench/check_traversal_reference.py /tmp/cases.jsonl

Each case is replayed here with a port of the Rust test oracle; evidence ids,
depths, stop reason and counters must be identical and scores equal to 1e-9.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

# the pure-Python reference lives with the tests (their oracle)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.traversal_reference import (
    Assessment,
    CandidateScores,
    Graph,
    Routing,
    StopReason,
    Traversal,
    TraversalConfig,
    f32,
)

MASK = (1 << 64) - 1


class CaseConfig(TypedDict):
    total_budget: int
    min_per_view: int
    gamma: float
    theta_act: float
    depth_max: int
    beam_width: int
    max_visited: int
    max_edges: int
    max_controller_calls: int
    max_wall: float
    theta_suff: float
    theta_missing: float
    theta_contradiction: float
    theta_useful: float
    lambdas: list[float]
    recency_weight: float
    min_admit_score: float


class CaseRouting(TypedDict):
    views: list[float]
    multi_hop: float
    recency: float


class Outcome(TypedDict):
    evidence: list[tuple[int, float, int]]  # (node, score, depth) in admission order
    stop: StopReason
    visited: int
    edges_examined: int
    controller_calls: int
    rounds: int
    spent: list[int]


class Case(TypedDict):
    """One line of the file the Rust test `dump_cases_for_the_python_reference` writes."""

    nodes: list[int]
    edges: list[tuple[int, int, int, float]]  # (src, dst, view index, weight)
    embeddings: list[tuple[int, list[float]]]
    timestamps: list[tuple[int, int]]
    config: CaseConfig
    routing: CaseRouting
    query: list[float] | None
    now: int | None
    anchors: list[tuple[int, float]]
    calls_used: int
    mode: str
    seed: int
    outcome: Outcome


def mix(x: int) -> int:
    """splitmix64 finaliser, as in the Rust tests."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


class Oracle:
    def __init__(self, mode: str, seed: int) -> None:
        self.mode, self.seed = mode, seed

    def draw(self, rnd: int, node: int, k: int) -> float:
        h = mix(self.seed ^ mix(rnd ^ mix(node ^ mix(k))))
        return (h >> 40) / float(1 << 24)

    def assessment(self, rnd: int) -> Assessment:
        if self.mode == "ones":
            return Assessment(1.0, 1.0, 1.0, 1.0)
        if self.mode == "zeros":
            return Assessment(0.0, 0.0, 0.0, 0.0)
        if self.mode == "random":
            return Assessment(*(self.draw(rnd, MASK, k) for k in (1, 2, 3, 4)))
        return Assessment(0.0, 1.0, 1.0, 0.0)

    def scores(self, rnd: int, node: int) -> CandidateScores:
        if self.mode == "ones":
            return CandidateScores(1.0, 1.0, 1.0, 1.0)
        if self.mode == "zeros":
            return CandidateScores(0.0, 0.0, 0.0, 0.0)
        return CandidateScores(*(self.draw(rnd, node, k) for k in (5, 6, 7, 8)))


class F32Graph(Graph):
    """The Rust test graph accumulates the dot product in f32; emulate it exactly."""

    def similarity(self, unit_query: Sequence[float], node: int) -> float | None:
        emb = self.embeddings.get(node)
        if emb is None:
            return None
        s = 0.0
        for q, e in zip(unit_query, emb, strict=False):
            s = f32(s + f32(q * e))
        return s


def config_of(c: CaseConfig) -> TraversalConfig:
    l1, l2, l3, l4, l5 = c["lambdas"]
    return TraversalConfig(
        total_budget=c["total_budget"],
        min_per_view=c["min_per_view"],
        gamma=c["gamma"],
        theta_act=c["theta_act"],
        depth_max=c["depth_max"],
        beam_width=c["beam_width"],
        max_visited=c["max_visited"],
        max_edges=c["max_edges"],
        max_controller_calls=c["max_controller_calls"],
        max_wall=c["max_wall"],
        theta_suff=c["theta_suff"],
        theta_missing=c["theta_missing"],
        theta_contradiction=c["theta_contradiction"],
        theta_useful=c["theta_useful"],
        lambdas=(l1, l2, l3, l4, l5),
        recency_weight=c["recency_weight"],
        min_admit_score=c["min_admit_score"],
    )


def run_case(case: Case) -> list[str]:
    g = F32Graph(nodes=set(case["nodes"]))
    for s, d, v, w in case["edges"]:
        g.edges.setdefault(v, {}).setdefault(s, []).append((d, w, s, d))
        g.edges.setdefault(v, {}).setdefault(d, []).append((s, w, s, d))
    g.embeddings = {n: [f32(x) for x in e] for n, e in case["embeddings"]}
    g.timestamps = {n: ts for n, ts in case["timestamps"]}
    cfg = config_of(case["config"])
    r = case["routing"]
    v0, v1, v2, v3 = r["views"]
    routing = Routing((v0, v1, v2, v3), r["multi_hop"], r["recency"])
    anchors = [(node, score) for node, score in case["anchors"]]
    oracle = Oracle(case["mode"], case["seed"])
    t = Traversal.start(
        cfg,
        routing,
        case["query"],
        case["now"],
        anchors,
        case["calls_used"],
        0.0,
        g,
        clock=lambda: 0.0,
    )
    while not t.done:
        rnd = len(t.rounds) - 1
        if t.phase == "assess":
            t.assess(oracle.assessment(rnd))
        elif t.phase == "expand":
            t.expand(g)
        else:
            t.score(g, [oracle.scores(rnd, c.node) for c in t.candidates])
    want = case["outcome"]
    tr = t.trace()
    problems: list[str] = []
    got_counts = (
        tr["stop"],
        tr["visited"],
        tr["edges_examined"],
        tr["controller_calls"],
        len(t.rounds) - 1,
        tr["spent"],
    )
    want_counts = (
        want["stop"],
        want["visited"],
        want["edges_examined"],
        want["controller_calls"],
        want["rounds"],
        want["spent"],
    )
    if got_counts != want_counts:
        problems.append(f"counters {got_counts} != {want_counts}")
    got_ev = [(e.node, e.depth) for e in t.evidence]
    want_ev = [(n, d) for n, _, d in want["evidence"]]
    if got_ev != want_ev:
        problems.append(f"evidence {got_ev} != {want_ev}")
    else:
        for e, (_node, want_score, _depth) in zip(t.evidence, want["evidence"], strict=True):
            if abs(e.score - want_score) > 1e-9:
                problems.append(f"score of {e.node}: {e.score} != {want_score}")
    return problems


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/cases.jsonl"
    bad = 0
    with open(path) as f:
        cases: list[Case] = [json.loads(line) for line in f if line.strip()]
    for i, case in enumerate(cases):
        problems = run_case(case)
        if problems:
            bad += 1
            print(f"case {i}: " + "; ".join(problems))
    print(f"{len(cases) - bad}/{len(cases)} cases identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Check bench/traversal_reference.py against the Rust traversal.

The Rust test suite writes random cases with its own outcomes:

    JEVMEM_TRAVERSAL_CASES=/tmp/cases.jsonl \\
        cargo test -p jevmem-core dump_cases -- --ignored
    python3 bench/check_traversal_reference.py /tmp/cases.jsonl

Each case is replayed here with a port of the Rust test oracle; evidence ids,
depths, stop reason and counters must be identical and scores equal to 1e-9.
"""

import json
import sys

from traversal_reference import (
    Assessment,
    CandidateScores,
    Graph,
    Routing,
    Traversal,
    TraversalConfig,
    f32,
)

MASK = (1 << 64) - 1


def mix(x: int) -> int:
    """splitmix64 finaliser, as in the Rust tests."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


class Oracle:
    def __init__(self, mode: str, seed: int):
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

    def similarity(self, unit_query, node):
        emb = self.embeddings.get(node)
        if emb is None:
            return None
        s = 0.0
        for q, e in zip(unit_query, emb):
            s = f32(s + f32(q * e))
        return s


def run_case(case: dict) -> list:
    g = F32Graph(nodes=set(case["nodes"]))
    for s, d, v, w in case["edges"]:
        g.edges.setdefault(v, {}).setdefault(s, []).append((d, w, s, d))
        g.edges.setdefault(v, {}).setdefault(d, []).append((s, w, s, d))
    g.embeddings = {n: [f32(x) for x in e] for n, e in case["embeddings"]}
    g.timestamps = {n: ts for n, ts in case["timestamps"]}
    cfg = TraversalConfig(**{**case["config"], "lambdas": tuple(case["config"]["lambdas"])})
    r = case["routing"]
    routing = Routing(tuple(r["views"]), r["multi_hop"], r["recency"])
    anchors = [tuple(a) for a in case["anchors"]]
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
    problems = []
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
        for e, (_, s, _) in zip(t.evidence, want["evidence"]):
            if abs(e.score - s) > 1e-9:
                problems.append(f"score of {e.node}: {e.score} != {s}")
    return problems


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/cases.jsonl"
    bad = 0
    with open(path) as f:
        cases = [json.loads(line) for line in f if line.strip()]
    for i, case in enumerate(cases):
        problems = run_case(case)
        if problems:
            bad += 1
            print(f"case {i}: " + "; ".join(problems))
    print(f"{len(cases) - bad}/{len(cases)} cases identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

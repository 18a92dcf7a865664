"""``python -m jevmem demo``: build a small memory and query it, end to end.

Until the System-One controller lands, the demo steers the traversal with a
transparent stand-in that answers from embedding similarity alone (it is
printed as such in the output); everything else is the real memory plane:
canonical nodes, rule edges, fused anchors, budgets and the bounded loop.
"""

from __future__ import annotations

import itertools
import sys
import time
from datetime import datetime, timezone

import numpy as np
import numpy.typing as npt

from jevmem import HashEmbedder, MemoryStore, Traversal

DAY = 86_400

# (day, speaker, text, entities): an agent's log over two weeks.
LOG: list[tuple[int, str, str, list[str]]] = [
    (
        0,
        "Maya",
        "I started learning the cello this week, my teacher is called Ines.",
        ["Ines", "cello"],
    ),
    (0, "Agent", "Noted: Maya takes cello lessons with Ines on Tuesdays.", ["Ines", "cello"]),
    (1, "Maya", "My sister Lena is moving to Lisbon next month for a new job.", ["Lena", "Lisbon"]),
    (
        2,
        "Maya",
        "The build server ran out of disk again, I cleared the docker cache.",
        ["build server"],
    ),
    (
        2,
        "Agent",
        "Procedure: when the build server disk fills, prune docker images first.",
        ["build server"],
    ),
    (
        3,
        "Maya",
        "Ines said my bowing is too tense, so I practise slow scales now.",
        ["Ines", "cello"],
    ),
    (4, "Maya", "I prefer oat milk in coffee, dairy upsets my stomach.", ["coffee"]),
    (5, "Maya", "Lena found an apartment near the river in Lisbon.", ["Lena", "Lisbon"]),
    (
        6,
        "Maya",
        "Because the deploy failed on Friday, we postponed the release to Monday.",
        ["release"],
    ),
    (7, "Maya", "The release went out on Monday without problems.", ["release"]),
    (8, "Maya", "I booked flights to visit Lena in Lisbon in June.", ["Lena", "Lisbon"]),
    (9, "Maya", "My cello recital is on the 20th, Ines picked a Bach suite.", ["Ines", "cello"]),
    (
        10,
        "Maya",
        "The build server disk is full again; pruning docker fixed it in a minute.",
        ["build server"],
    ),
    (11, "Maya", "I switched from oat milk to soy, oat got too sweet.", ["coffee"]),
    (12, "Maya", "Practised the Bach prelude for two hours, the slow scales helped.", ["cello"]),
    (13, "Maya", "Lena's new job in Lisbon is at a marine research lab.", ["Lena", "Lisbon"]),
]

QUERIES = [
    "Who teaches Maya the cello?",
    "Why was the release postponed?",
    "What should I do when the build server disk is full?",
    "What milk does Maya take in her coffee now?",
    "Where does Lena work?",
]


def unit(v: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    out: npt.NDArray[np.float32] = v / max(float(np.linalg.norm(v)), 1e-12)
    return out


def build(emb: HashEmbedder) -> tuple[MemoryStore, int]:
    start = int(datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc).timestamp())
    m = MemoryStore(emb.dim)
    texts = [f"{speaker}: {text}" for _, speaker, text, _ in LOG]
    ids = m.add_batch(
        texts,
        emb.embed(texts),
        timestamps=[start + day * DAY + i * 60 for i, (day, *_) in enumerate(LOG)],
        provenances=[{"speaker": s, "turn": str(i)} for i, (_, s, _, _) in enumerate(LOG)],
        entities=[[s, *ents] for _, s, _, ents in LOG],
    )
    # Deterministic edges, no controller needed: time order and exact entity ids.
    edges: list[tuple[object, ...]] = []
    for a, b in itertools.pairwise(ids):
        edges.append((a, b, "temporal", 1.0, "rule", "before"))
    for i in ids:
        for ent in m.get(i).entities:
            earlier = [j for j in m.nodes_with_entity(ent) if j < i and ent != "maya"]
            if earlier:
                edges.append((earlier[-1], i, "entity", 1.0, "rule"))
    m.add_edges(edges)
    return m, start + 14 * DAY


def similarity_controller(m: MemoryStore, t: Traversal, q: npt.NDArray[np.float32]) -> None:
    """Stand-in controller: answers every question from cosine similarity."""
    while t.phase != "done":
        if t.phase == "assess":
            best = max((float(m.embedding(e.node) @ q) for e in t.result(3)), default=0.0)
            t.assess(
                sufficiency=min(1.0, max(0.0, best)), usefulness=0.6, missing=0.5, contradiction=0.0
            )
        elif t.phase == "expand":
            cands = t.expand()
            if not cands:
                continue
            evidence = np.stack([m.embedding(e.node) for e in t.result()])
            rows = []
            for c in cands:
                v = m.embedding(c.node)
                rel = max(0.0, float(v @ q))
                novelty = 1.0 - max(0.0, float((evidence @ v).max()))
                rows.append((rel, c.edge_weight, novelty, 0.5))
            t.score(np.asarray(rows, dtype=np.float32))


def demo() -> None:
    emb = HashEmbedder(256)
    t0 = time.perf_counter()
    m, now = build(emb)
    s = m.stats()
    print(
        f"memory: {len(m)} observations, {s['edges_temporal']} temporal and "
        f"{s['edges_entity']} entity edges, built in {1e3 * (time.perf_counter() - t0):.1f} ms"
    )
    print("controller: similarity stand-in (the System-One controller is not wired in yet)\n")
    for query in QUERIES:
        t1 = time.perf_counter()
        q = unit(emb.embed_one(query))
        ids, fused = m.fused_anchors(query, q, 5)
        top = float(fused[0]) if len(fused) else 1.0
        anchors = [(int(i), float(f) / top) for i, f in zip(ids, fused, strict=True)]
        t = m.traverse(
            (0.8, 0.4, 0.5, 0.7), anchors, multi_hop=0.3, recency=0.3, query_vector=q, now=now
        )
        similarity_controller(m, t, q)
        ms = 1e3 * (time.perf_counter() - t1)
        tr = t.trace()
        print(f"Q: {query}")
        for ev in t.result(3):
            how = "anchor" if ev.via is None else f"via {ev.via.view} edge from {ev.via.from_node}"
            print(f"   {ev.score:.3f}  [{how}]  {m.get(ev.node).text}")
        print(
            f"   stop={tr['stop_reason']} rounds={len(tr['rounds'])} visited={tr['visited']} "
            f"edges={tr['edges_examined']} calls={tr['controller_calls']} {ms:.2f} ms\n"
        )


def main(argv: list[str] | None = None) -> int:
    from jevmem.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())

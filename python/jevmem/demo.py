"""``jevmem demo`` (``make demo``): an agent's log remembered and queried end to end.

The default embedder (ONNX MiniLM when the ``onnx`` extra is installed, else
the hashing embedder) and the local System-One controller: no LLM, no
network. ``python -m jevmem --help`` lists the other commands.
"""

from __future__ import annotations

import time
import warnings
from datetime import datetime, timezone

from jevmem._explain import STOP_RULE_NOTE, sufficiency_line
from jevmem.embed import default_embedder
from jevmem.memory import Memory

DAY = 86_400

# (day, speaker, text): an assistant's notes on two weeks with its user.
LOG: list[tuple[int, str, str]] = [
    (0, "Maya", "I started learning the cello this week, my teacher is called Ines."),
    (0, "Agent", "Noted: Maya takes cello lessons with Ines on Tuesdays."),
    (1, "Maya", "My sister Lena is moving to Lisbon next month for a new job."),
    (2, "Maya", "The build server ran out of disk again, I cleared the docker cache."),
    (2, "Agent", "Procedure: when the build server disk fills, prune docker images first."),
    (3, "Maya", "Ines said my bowing is too tense, so I practise slow scales now."),
    (4, "Maya", "I prefer oat milk in coffee, dairy upsets my stomach."),
    (5, "Maya", "Lena found an apartment near the river in Lisbon."),
    (6, "Maya", "Because the deploy failed on Friday, we postponed the release to Monday."),
    (7, "Maya", "The release went out on Monday without problems."),
    (8, "Maya", "I booked flights to visit Lena in Lisbon in June."),
    (9, "Maya", "My cello recital is on the 20th, Ines picked a Bach suite."),
    (10, "Maya", "The build server disk is full again; pruning docker fixed it in a minute."),
    (11, "Maya", "I switched from oat milk to soy yesterday, oat got too sweet."),
    (12, "Maya", "Practised the Bach prelude for two hours, the slow scales helped."),
    (13, "Maya", "Lena's new job in Lisbon is at a marine research lab."),
]

QUERIES = [
    "Who teaches Maya the cello?",
    "Why was the release postponed?",
    "What should I do when the build server disk is full?",
    "What milk does Maya take in her coffee now?",
    "Where does Lena work?",
    "When did Maya switch to soy milk?",
]


def demo() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        embedder = default_embedder()
    start = int(datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc).timestamp())
    t0 = time.perf_counter()
    memory = Memory(embedder)
    memory.add_batch(
        [text for _, _, text in LOG],
        timestamps=[start + day * DAY + i * 60 for i, (day, _, _) in enumerate(LOG)],
        speakers=[speaker for _, speaker, _ in LOG],
    )
    s = memory.stats()
    edges = {k.removeprefix("edges_"): v for k, v in s.items() if k.startswith("edges_")}
    print(f"embedder: {embedder!r}; controller: {s['controller']}")
    print(
        f"memory: {s['nodes']} observations, edges {edges}, built in "
        f"{1e3 * (time.perf_counter() - t0):.0f} ms with {s['controller_calls_write']} controller calls\n"
    )
    now = start + 14 * DAY
    results = memory.search_batch(QUERIES, 3, now=now)
    for query, r in zip(QUERIES, results, strict=True):
        print(f"Q: {query}")
        for e in r.evidence:
            how = "anchor" if e.via is None else f"via {e.via.view} edge"
            print(f"   {e.score:.3f}  [{how}]  {e.provenance.get('speaker')}: {e.text}")
            for ref in e.time_refs:
                print(f"          '{ref['text']}' -> {ref['resolved']}")
        tr = r.trace
        print(
            f"   {sufficiency_line(r)}\n   stop={tr['stop_reason']}, rounds={len(tr['rounds'])}, "
            f"visited={tr['visited']}, controller calls={tr['controller_calls']}\n"
        )
    print(
        f"{len(QUERIES)} queries ran in lockstep: {memory.calls['query']} controller calls for all of them"
    )
    print(f"\n{STOP_RULE_NOTE}")

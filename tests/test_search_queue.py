"""Searches from several threads on one memory run together (jevmem.plane.search_queue)."""

from __future__ import annotations

import threading
import time
from collections.abc import MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, LearnedController, Memory
from jevmem.controller import Answer, DecisionRequest
from jevmem.errors import InvalidInputError

TEXTS = [
    "Maya started cello lessons with Ines in March",
    "Lena travelled to Lisbon for the conference",
    "Tom deployed the release on Friday night",
    "Ines likes her coffee with oat milk",
    "Maya said the cello teacher moved to Porto",
    "Tom rolled the release back on Monday",
]
QUERIES = [
    "what does Maya play?",
    "where did Lena travel?",
    "why did Tom deploy the release?",
    "what coffee does Ines like?",
]


class Slow(LearnedController):
    """The default controller, 20 ms slower a call (the sleep releases the
    GIL, as a remote controller's wait does): searches overlap."""

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        time.sleep(0.02)
        return super().decide(requests)


def filled(**kw: Any) -> Memory:
    m = Memory(kw.pop("embedder", HashEmbedder(64)), **kw)
    m.add_batch(TEXTS, timestamps=[1_700_000_000 + i * 3600 for i in range(len(TEXTS))])
    return m


def evidence(results: Sequence[Any]) -> list[list[tuple[int, float]]]:
    return [[(e.id, e.score) for e in r.evidence] for r in results]


def at_once(fn: Any, args: Sequence[Any]) -> list[Any]:
    """``fn(arg)`` for every arg, each on its own thread, all released together."""
    start = threading.Barrier(len(args))

    def one(a: Any) -> Any:
        start.wait()
        try:
            return fn(a)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(one, args))


def test_threads_searching_one_memory_run_together() -> None:
    queries = [f"{q} ({i})" for i in range(4) for q in QUERIES]
    m = filled(controller=Slow())
    alone = [filled().search(q, k=5) for q in queries]
    together = at_once(lambda q: m.search(q, k=5), queries)
    assert evidence(together) == evidence(alone)
    assert [r.query for r in together] == queries
    # fewer controller rounds than the searches one at a time take
    reference = filled()
    for q in queries:
        reference.search(q, k=5)
    assert m.calls["query"] < reference.calls["query"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from([*QUERIES, "Maya", "cello lessons in March"]),
            st.integers(1, 8),
            st.sampled_from(["full", "traversal", "anchors", "lexical"]),
            st.sampled_from([None, {"speaker": "Maya"}]),
        ),
        min_size=1,
        max_size=8,
    )
)
@settings(max_examples=10, deadline=None)
def test_concurrent_searches_equal_single_searches(
    calls: list[tuple[str, int, str, dict[str, Any] | None]],
) -> None:
    # mixed options (a filter among them) share the queue; each search gets
    # what it gets alone
    m = filled(controller=Slow())
    reference = filled()
    got = at_once(lambda c: m.search(c[0], k=c[1], mode=c[2], filter=c[3]), calls)
    want = [reference.search(q, k=k, mode=mode, filter=f) for q, k, mode, f in calls]  # type: ignore[arg-type]
    assert evidence(got) == evidence(want)
    assert [r.sufficient for r in got] == [r.sufficient for r in want]


def test_a_failing_embedding_fails_its_own_search_alone() -> None:
    class Fussy(HashEmbedder):
        """Refuses any batch holding "boom"; takes 5 ms a call without the GIL."""

        def embed(self, texts: Sequence[str]) -> Any:
            time.sleep(0.005)
            if any("boom" in t for t in texts):
                raise RuntimeError("boom")
            return super().embed(texts)

    m = filled(controller=Slow(), embedder=Fussy(64))
    queries = [q if i % 3 else f"{q} boom" for i, q in enumerate(QUERIES * 3)]
    got = at_once(lambda q: m.search(q, k=3), queries)
    reference = filled()
    for q, r in zip(queries, got, strict=True):
        if "boom" in q:
            assert isinstance(r, RuntimeError)
        else:
            assert evidence([r]) == evidence([reference.search(q, k=3)])
    # bad input fails in its caller's thread, before the queue
    got = at_once(lambda k: m.search("cello", k=k), [3, 0, 3])
    assert isinstance(got[1], InvalidInputError) and evidence([got[0]]) == evidence([got[2]])


def test_a_controller_may_search_the_memory_it_answers() -> None:
    # a search from inside a round runs there (the run lock is re-entrant),
    # it does not wait for the round that waits for it
    inner: list[Any] = []

    class Curious(LearnedController):
        def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
            if not inner and any(r.purpose == "routing" for r in requests):
                inner.append(None)
                inner[0] = memory.search("who likes coffee?", k=2)
            return super().decide(requests)

    memory = filled(controller=Curious())
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(memory.search("cello", k=3)), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "a search from inside a round deadlocked"
    reference = filled()
    assert evidence(done) == evidence([reference.search("cello", k=3)])
    assert evidence(inner) == evidence([reference.search("who likes coffee?", k=2)])


def test_the_queue_refuses_a_batch_limit_below_one() -> None:
    from jevmem.plane.search_queue import SearchQueue

    with pytest.raises(ValueError, match="max_batch"):
        SearchQueue(0)

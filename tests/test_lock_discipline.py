"""The store's lock discipline from Python: every read takes the store lock
with the GIL released, so readers on many threads, a writer and the
background graph builder run together without deadlock, and what each
reader sees is a state some serial order of the writes produced."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

from jevmem import MemoryStore

DIM = 16


def _vectors(n: int, seed: int) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    out: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def _text(i: int) -> str:
    return f"note {i} about topic {i % 7}"


def test_readers_writer_and_graph_builder_never_deadlock(tmp_path: Path) -> None:
    # past the exact tier, reopened: the background builder holds the write
    # lock in short steps while the threads below read and write
    n0, batches, batch = 600, 12, 50
    store = MemoryStore(DIM, exact_threshold=64)
    store.add_batch([_text(i) for i in range(n0)], _vectors(n0, 0))
    store.save(tmp_path / "m.jvm")
    store = MemoryStore.load(tmp_path / "m.jvm")
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for b in range(batches):
                start = n0 + b * batch
                ids = range(start, start + batch)
                store.add_batch([_text(i) for i in ids], _vectors(batch, b + 1))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            done.set()

    def reader(seed: int) -> None:
        rng = np.random.default_rng(seed)
        q = _vectors(1, 100 + seed)[0]
        seen = 0
        try:
            while not done.is_set() or seen < 3:
                seen += 1
                n = len(store)
                # ids are the insertion sequence: everything below len is stored
                assert store.next_id >= n >= n0
                i = int(rng.integers(0, n))
                assert i in store
                assert store.get(i).text == _text(i)
                assert store.tokenize(_text(i))
                store.neighbors(i)
                assert store.stats()["nodes"] >= n
                ids, _ = store.search_vector(q, 5)
                assert all(int(j) < store.next_id for j in ids)
                store.pending_graph  # noqa: B018 - a read of the lock-guarded count
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(s,)) for s in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not [t for t in threads if t.is_alive()], "a thread is stuck: deadlock"
    assert errors == []
    store.finish_graph()
    assert len(store) == n0 + batches * batch
    # the same writes one by one, serially, give the same memory
    serial = MemoryStore(DIM, exact_threshold=64)
    serial.add_batch([_text(i) for i in range(n0)], _vectors(n0, 0))
    for b in range(batches):
        start = n0 + b * batch
        serial.add_batch([_text(i) for i in range(start, start + batch)], _vectors(batch, b + 1))
    assert store.to_bytes() == serial.to_bytes()


def test_memory_writers_and_searchers_together() -> None:
    # Store reads release the GIL, so a Memory's own bookkeeping must not
    # read the store's counters apart (a concurrent add looked like a
    # removal) or iterate its dicts while a writer grows them.
    from jevmem import HashEmbedder, Memory
    from jevmem.controller import LocalController

    m = Memory(HashEmbedder(DIM), LocalController())
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(t: int) -> None:
        try:
            for i in range(25):
                m.add(f"writer {t} note {i} about topic {i % 5}")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def searcher() -> None:
        try:
            while not done.is_set():
                m.search("which topic did the writer note?", k=5)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    writers = [threading.Thread(target=writer, args=(t,)) for t in range(6)]
    searchers = [threading.Thread(target=searcher) for _ in range(2)]
    for t in writers + searchers:
        t.start()
    for t in writers:
        t.join(120)
    done.set()
    for t in searchers:
        t.join(120)
    assert not [t for t in writers + searchers if t.is_alive()], "a thread is stuck"
    assert errors == []
    assert len(m) == 150 and m.store.removed_count == 0
    texts = sorted(m.store.get(i).text for i in range(m.store.next_id))
    assert texts == sorted(
        f"writer {t} note {i} about topic {i % 5}" for t in range(6) for i in range(25)
    )


def test_searches_never_see_a_node_go_in_the_middle() -> None:
    # a search reads the store call by call; a forget on another thread
    # waits for it, so no search fails on a node it found a call earlier
    from jevmem import HashEmbedder, Memory

    m = Memory(HashEmbedder(DIM))
    m.add_batch(
        [f"Maya talked about milk and the snack budget, note {i}" for i in range(60)],
        timestamps=[1_700_000_000 + 60 * i for i in range(60)],
    )
    errors: list[BaseException] = []
    done = threading.Event()
    churned = [0]

    def churn() -> None:
        try:
            i = 0
            while not done.is_set() and i < 300:
                new = m.add(
                    f"Maya said something about milk again {i}", timestamp=1_700_100_000 + i
                )
                m.forget(new)
                i += 1
            churned[0] = i
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def searcher() -> None:
        try:
            while not done.is_set():
                for batch in (False, True):
                    if batch:
                        m.search_batch(["what did Maya say about milk?"] * 2, k=10)
                    else:
                        m.search("what did Maya say about milk?", k=10)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=churn)] + [
        threading.Thread(target=searcher) for _ in range(2)
    ]
    for t in threads:
        t.start()
    threads[0].join(120)
    done.set()
    for t in threads:
        t.join(120)
    assert not [t for t in threads if t.is_alive()], "a thread is stuck"
    assert errors == []
    assert churned[0] == 300 and len(m) == 60


def test_a_forget_from_inside_a_search_is_refused_and_a_search_inside_a_write_passes() -> None:
    from typing import Any

    from jevmem import HashEmbedder, InvalidInputError, Memory
    from jevmem.controller import LocalController

    class Forgetful(LocalController):
        # forgets inside a search's round: it would wait for itself
        def decide(self, requests: Any) -> Any:
            if any(r.purpose == "routing" for r in requests):
                m.forget(victim)
            return super().decide(requests)

    m = Memory(HashEmbedder(DIM), Forgetful())
    victim = m.add("a note to keep")
    try:
        m.search("note", k=3)
    except InvalidInputError as e:
        assert "inside a search" in str(e)
    else:  # pragma: no cover - the assertion's message
        raise AssertionError("forget inside a search's round was not refused")
    assert victim in m

    class Searching(LocalController):
        # searches inside a write's round while a forget waits for the gate
        def decide(self, requests: Any) -> Any:
            if any(r.purpose == "relations" for r in requests) and not searched:
                searched.append(None)
                forgetting.start()
                time_waited = 0.0
                while not forgetting_started.is_set() and time_waited < 5:
                    time_waited += 0.01
                    forgetting_started.wait(0.01)
                searched[0] = m2.search("note", k=3)
            return super().decide(requests)

    searched: list[Any] = []
    forgetting_started = threading.Event()
    m2 = Memory(HashEmbedder(DIM), Searching())
    first = m2.add("a first note")

    def forget_first() -> None:
        forgetting_started.set()
        m2.forget(first)

    forgetting = threading.Thread(target=forget_first, daemon=True)
    writer = threading.Thread(target=lambda: m2.add("a second note about the first"), daemon=True)
    writer.start()
    writer.join(30)
    forgetting.join(30)
    assert not writer.is_alive() and not forgetting.is_alive(), "deadlocked"
    assert searched and searched[0] is not None
    assert first not in m2


def test_a_failing_write_and_a_forget_and_a_search_never_deadlock() -> None:
    # a write whose controller fails takes its nodes back holding the write
    # lock; a forget on another thread and a search on a third must finish
    import time
    from typing import Any

    from jevmem import HashEmbedder, Memory
    from jevmem.controller import LocalController

    started = threading.Event()

    class FailsOnce(LocalController):
        def decide(self, requests: Any) -> Any:
            if armed and any(r.purpose == "relations" for r in requests):
                armed.clear()
                started.set()
                time.sleep(0.3)  # the forget and the search are waiting now
                raise RuntimeError("controller down")
            return super().decide(requests)

    armed: list[bool] = []
    m = Memory(HashEmbedder(DIM), FailsOnce())
    first = m.add("a first note about apples")
    m.add("a second note about apples")
    armed.append(True)
    done: dict[str, Any] = {}

    def write() -> None:
        try:
            m.add("a third note about apples and pears")
        except RuntimeError as e:
            done["write"] = e

    def forget() -> None:
        started.wait(10)
        done["forget"] = m.forget(first)

    def search() -> None:
        started.wait(10)
        done["search"] = m.search("apples", k=3)

    threads = [threading.Thread(target=f, daemon=True) for f in (write, forget, search)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not [t for t in threads if t.is_alive()], "deadlocked"
    assert isinstance(done["write"], RuntimeError) and done["forget"] == 1
    assert len(m) == 1 and first not in m


def test_a_search_inside_a_write_round_with_a_forget_and_a_queued_search() -> None:
    # the write's controller searches (it passes the gate) while a forget
    # waits and another thread's search holds or waits for the queue
    import time
    from typing import Any

    from jevmem import HashEmbedder, Memory
    from jevmem.controller import LocalController

    in_round = threading.Event()

    class Searches(LocalController):
        def decide(self, requests: Any) -> Any:
            if armed and threading.current_thread().name == "W":
                if any(r.purpose == "relations" for r in requests):
                    armed.clear()
                    in_round.set()
                    time.sleep(0.3)
                    found.append(m.search("apples", k=3))
            return super().decide(requests)

    armed: list[bool] = []
    found: list[Any] = []
    m = Memory(HashEmbedder(DIM), Searches())
    ids = m.add_batch([f"note {i} about apples" for i in range(10)])
    armed.append(True)
    done: dict[str, Any] = {}

    def w() -> None:
        done["W"] = m.add("a new note about apples and pears")

    def f() -> None:
        in_round.wait(10)
        done["F"] = m.forget(ids[0])

    def b() -> None:
        in_round.wait(10)
        time.sleep(0.1)
        done["B"] = m.search("pears", k=3)

    threads = [threading.Thread(target=t, name=t.__name__.upper(), daemon=True) for t in (w, f, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not [t for t in threads if t.is_alive()], "deadlocked"
    assert sorted(done) == ["B", "F", "W"] and found and done["F"] == 1


def test_writes_from_inside_a_search_round_are_refused() -> None:
    # a controller that writes while it answers a search could wait for a
    # writer that waits for that search: refused, the memory unchanged
    from typing import Any

    from jevmem import HashEmbedder, InvalidInputError, Memory
    from jevmem.controller import LocalController

    refused: list[str] = []

    class Writes(LocalController):
        def decide(self, requests: Any) -> Any:
            if any(r.purpose == "routing" for r in requests):
                for call in (lambda: m.add("written mid-search"), lambda: m.save("/nonexistent/x")):
                    try:
                        call()
                    except InvalidInputError as e:
                        refused.append(str(e))
            return super().decide(requests)

    m = Memory(HashEmbedder(DIM), Writes())
    m.add("a note about apples")
    m.search("apples", k=3)
    assert len(refused) == 2 and all("inside a search" in r for r in refused)
    assert len(m) == 1


def test_list_pages_never_fail_while_another_thread_forgets() -> None:
    from jevmem import HashEmbedder, Memory
    from jevmem.controller import LocalController

    m = Memory(HashEmbedder(DIM), LocalController())
    m.add_batch([f"kept note {i}" for i in range(40)])
    errors: list[BaseException] = []
    done = threading.Event()

    def churn() -> None:
        try:
            for i in range(150):
                m.forget(m.add(f"passing note {i}"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    pages = 0
    while not done.is_set():
        try:
            cursor: str | None = None
            while True:  # every page of the memory, as a reader pages it
                _, cursor = m.list(limit=7, cursor=cursor)
                pages += 1
                if cursor is None:
                    break
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    t.join(60)
    assert not t.is_alive() and errors == [] and pages > 0 and len(m) == 40

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

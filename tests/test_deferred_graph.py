"""A memory loaded or recovered past the exact tier answers before its HNSW
graph is rebuilt: vectors wait in a pending list (scanned exactly) while a
background thread moves them into the graph."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from jevmem import MemoryStore

DIM = 16
N = 1500


def _store(n: int = N, threshold: int = 256) -> tuple[MemoryStore, np.ndarray]:
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    store = MemoryStore(DIM, exact_threshold=threshold)
    for i in range(n):
        store.add(f"observation {i}", vecs[i])
    return store, vecs


def _exact_top(vecs: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    sims = unit @ (query / np.linalg.norm(query))
    return [int(i) for i in np.argsort(-sims, kind="stable")[:k]]


def _wait_built(store: MemoryStore, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while store.pending_graph and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store.pending_graph == 0, "the background builder did not finish"


def test_a_loaded_memory_answers_while_its_graph_builds(tmp_path: Path) -> None:
    store, vecs = _store()
    assert store.pending_graph == 0  # written one by one: built as it grew
    store.save(tmp_path / "m.jvm")
    loaded = MemoryStore.load(tmp_path / "m.jvm")
    queries = np.random.default_rng(9).standard_normal((30, DIM)).astype(np.float32)
    # however far the builder is, every search ranks real scores of stored nodes
    # (that loading defers at all is checked deterministically in the core tests)
    overlap = 0
    for q in queries:
        ids, scores = loaded.search_vector(q, 10)
        assert len(ids) == 10
        assert list(scores) == sorted(scores, reverse=True)
        overlap += len(set(map(int, ids)) & set(_exact_top(vecs, q, 10)))
    assert overlap / (10 * len(queries)) >= 0.95
    _wait_built(loaded)
    assert loaded.to_bytes() == store.to_bytes()


def test_writes_and_removals_during_the_build(tmp_path: Path) -> None:
    store, vecs = _store()
    store.save(tmp_path / "m.jvm")
    loaded = MemoryStore.load(tmp_path / "m.jvm")
    extra = np.ones(DIM, dtype=np.float32)
    new_id = loaded.add("written while the graph builds", extra)
    loaded.remove(7)
    assert 7 not in loaded
    ids, _ = loaded.search_vector(extra, 1)
    assert int(ids[0]) == new_id
    loaded.finish_graph()
    assert loaded.pending_graph == 0
    ids, _ = loaded.search_vector(vecs[7], 5)
    assert 7 not in set(map(int, ids))
    ids, _ = loaded.search_vector(extra, 1)
    assert int(ids[0]) == new_id


def test_a_recovered_durable_memory_builds_in_the_background(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((600, DIM)).astype(np.float32)
    store = MemoryStore.open(tmp_path / "d", DIM, embedder="t", exact_threshold=64)[0]
    for i, v in enumerate(vecs):
        store.add(f"obs {i}", v)
    store.flush()
    del store  # no close: the log is replayed on open, as after a crash
    reopened, _, _, report = MemoryStore.open(tmp_path / "d", DIM, embedder="t")
    assert report["replayed_records"] == 600
    q = vecs[123]
    ids, _ = reopened.search_vector(q, 1)
    assert int(ids[0]) == 123
    _wait_built(reopened)
    ids, _ = reopened.search_vector(q, 1)
    assert int(ids[0]) == 123
    reopened.close()


def test_a_memory_that_forgot_many_nodes_loads_with_max_absent_ids(tmp_path: Path) -> None:
    """The absent-id bound stops a small crafted file from claiming billions
    of ids; a real memory that forgot more than it allows is refused with an
    error naming ``max_absent_ids``, and loads when the caller passes it."""
    import jevmem

    n = 120_000
    store = MemoryStore(8, exact_threshold=1 << 30)  # the ids matter here, not the graph
    vecs = np.random.default_rng(1).standard_normal((n, 8)).astype(np.float32)
    ids = store.add_batch([f"note {i}" for i in range(n)], vecs)
    store.forget(list(ids[:-3]))
    assert len(store) == 3
    path = tmp_path / "churned.jvm"
    store.save(path)
    try:
        MemoryStore.load(path)
    except jevmem.SnapshotError as exc:
        assert "max_absent_ids=" in str(exc)
    else:
        raise AssertionError("the default bound should refuse 119,997 absent ids in a small file")
    loaded = MemoryStore.load(path, max_absent_ids=n)
    assert len(loaded) == 3 and loaded.next_id == n
    assert loaded.to_bytes() == store.to_bytes()
    mem = jevmem.Memory.load(path, embedder=jevmem.HashEmbedder(8), max_absent_ids=n)
    assert len(mem.store) == 3


def test_a_durable_memory_that_forgot_many_nodes_reopens_with_max_absent_ids(
    tmp_path: Path,
) -> None:
    import jevmem

    n = 110_000
    store = MemoryStore.open(tmp_path / "d", 8, embedder="t", exact_threshold=1 << 30)[0]
    vecs = np.random.default_rng(2).standard_normal((n, 8)).astype(np.float32)
    ids = store.add_batch([f"note {i}" for i in range(n)], vecs)
    store.forget(list(ids[:-2]))
    store.checkpoint(b"")  # the checkpoint claims n ids, 2 stored
    store.close()
    try:
        MemoryStore.open(tmp_path / "d", 8, embedder="t")
    except jevmem.SnapshotError as exc:
        assert "max_absent_ids=" in str(exc)
    else:
        raise AssertionError("the default bound should refuse this checkpoint")
    reopened = MemoryStore.open(tmp_path / "d", 8, embedder="t", max_absent_ids=n)[0]
    assert len(reopened) == 2 and reopened.next_id == n
    reopened.close()

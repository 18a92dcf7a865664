"""Durable memories: Memory.open, the write-ahead log, checkpoints, recovery,
one-file exports, and a kill loop that SIGKILLs writers at random points."""

from __future__ import annotations

import gc
import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jevmem import Memory
from jevmem._core import MemoryStore, _set_failpoint
from jevmem.controller import LocalController
from jevmem.embed import EmbedderSubclassWarning, HashEmbedder
from jevmem.errors import DurabilityError, InvalidConfigError, InvalidInputError, SnapshotError

DIM = 32


def _open(path: Path, **kw: Any) -> Memory:
    return Memory.open(path, HashEmbedder(DIM), LocalController(), **kw)


def _texts(m: Memory) -> list[str]:
    return [m.store.get(i).text for i in range(m.store.next_id) if i in m.store]


def _segments(path: Path) -> list[Path]:
    return sorted(path.glob("wal-*.log"))


@pytest.fixture
def failpoints() -> Iterator[Callable[[str, str], None]]:
    touched: list[str] = []

    def set_(name: str, action: str) -> None:
        touched.append(name)
        _set_failpoint(name, action)

    yield set_
    for name in touched:
        _set_failpoint(name, "off")


def test_writes_survive_reopen_with_the_memorys_own_state(tmp_path: Path) -> None:
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    assert m.durable and m.recovery is not None and m.recovery["created"]
    for i in range(25):  # past one consolidation period, so decisions are logged
        m.add(f"Maya practised cello for {i} minutes", timestamp=1_700_000_000 + 60 * i)
    before = (_texts(m), m.stats()["writes"], len(m.decisions), m.store.to_bytes())
    hits = [e.id for e in m.search("how long did Maya practise?").evidence]
    del m
    gc.collect()  # dropped without close: what a crash leaves, bar the OS buffers
    m = Memory.open(d, controller=LocalController())  # the embedder comes from the MANIFEST
    assert isinstance(m.embedder, HashEmbedder) and m.embedder.dim == DIM
    assert m.recovery is not None and m.recovery["replayed_records"] == 25
    assert (_texts(m), m.stats()["writes"], len(m.decisions), m.store.to_bytes()) == before
    assert [e.id for e in m.search("how long did Maya practise?").evidence] == hits
    m.close()


def test_checkpoints_cover_the_log_and_close_checkpoints(tmp_path: Path) -> None:
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=10)
    for i in range(35):
        m.add(f"note {i}")
    assert m.stats()["checkpoint_seq"] == 30  # automatic, every 10 records
    m.close()
    assert len(_segments(d)) == 1
    assert sorted(p.name for p in d.glob("checkpoint-*")) == ["checkpoint-0000000005.jvc"]
    m = _open(d)
    assert m.recovery is not None
    assert (m.recovery["checkpoint_seq"], m.recovery["replayed_records"]) == (35, 0)
    assert m.stats()["checkpoint_seq"] == 35
    assert "checkpoint_seq" not in Memory(embedder=HashEmbedder(8)).stats()  # in memory: none
    assert len(m) == 35
    with pytest.raises(DurabilityError):
        _open(d)  # LOCK is held while open
    m.close()
    with pytest.raises(DurabilityError, match="closed"):
        m.add("after close")
    assert len(m) == 35  # reads still work


def test_a_batch_is_one_record(tmp_path: Path) -> None:
    m = _open(tmp_path / "m")
    m.add_batch(["one", "two", "three"])
    m.add("four")
    assert m.store.last_seq == 2
    m.close()


def test_another_embedder_is_refused_naming_both(tmp_path: Path) -> None:
    d = tmp_path / "m"
    _open(d).close()
    with pytest.raises(InvalidConfigError, match="hash-32"):
        Memory.open(d, HashEmbedder(48), LocalController())


class _Reversed(HashEmbedder):
    """A user's own model on HashEmbedder's plumbing: another vector space."""

    def embed(self, texts: Any) -> Any:
        return np.ascontiguousarray(super().embed(texts)[:, ::-1])

    def embed_one(self, text: str) -> Any:
        return self.embed([text])[0]


def test_a_subclass_of_a_built_in_embedder_is_recorded_as_custom(tmp_path: Path) -> None:
    """It was recorded as the built-in: reopening without it silently made
    the base class, and the base class was accepted in its place."""
    d = tmp_path / "m"
    with Memory.open(d, _Reversed(DIM), LocalController()) as m:
        m.add("Ines teaches Maya the cello")
        m.save(tmp_path / "m.jvm")
    for load, path in ((Memory.open, d), (Memory.load, tmp_path / "m.jvm")):
        with pytest.raises(InvalidConfigError, match=r"custom embedder .*_Reversed"):
            load(path)
        with pytest.raises(InvalidConfigError, match="_Reversed"):
            load(path, HashEmbedder(DIM), LocalController())
        back = load(path, _Reversed(DIM), LocalController())
        assert [e.text for e in back.search("who teaches the cello?").evidence] == [
            "Ines teaches Maya the cello"
        ]
        back.close()


class _Other:
    """An embedder of the same dimension that is no HashEmbedder."""

    def __init__(self, dim: int) -> None:
        self.dim, self.inner = dim, HashEmbedder(dim)

    def embed(self, texts: Any) -> Any:
        return self.inner.embed(texts)

    def embed_one(self, text: str) -> Any:
        return self.inner.embed_one(text)


def test_load_refuses_another_embedder_as_open_does(tmp_path: Path) -> None:
    m = Memory(HashEmbedder(DIM), LocalController())
    m.add("a note")
    m.save(tmp_path / "m.jvm")
    with pytest.raises(InvalidConfigError, match=f'made with embedder "hash-{DIM}"'):
        Memory.load(tmp_path / "m.jvm", _Other(DIM))
    with pytest.raises(InvalidConfigError, match=f'made with embedder "hash-{DIM}"'):
        Memory.load(tmp_path / "m.jvm", HashEmbedder(DIM * 2))
    # the embedder the file names, given or not, loads it
    assert len(Memory.load(tmp_path / "m.jvm", HashEmbedder(DIM))) == 1
    assert len(Memory.load(tmp_path / "m.jvm")) == 1


def test_every_mode_recovers_what_it_acknowledged(tmp_path: Path) -> None:
    for mode in ("sync", "interval:5", "none"):
        d = tmp_path / mode.replace(":", "_")
        m = _open(d, durability=mode)
        assert m.store.durability == mode
        m.add_batch([f"{mode} {i}" for i in range(5)])
        del m
        gc.collect()
        m = _open(d, durability=mode)
        assert _texts(m) == [f"{mode} {i}" for i in range(5)]
        m.close()
    with pytest.raises(InvalidConfigError):
        _open(tmp_path / "bad", durability="sometimes")


def test_a_failed_fsync_makes_the_memory_read_only(tmp_path: Path, failpoints: Any) -> None:
    d = tmp_path / "m"
    m = _open(d)
    m.add("kept")
    failpoints("wal.fsync", "eio")
    with pytest.raises(DurabilityError, match="read-only"):
        m.add("not acknowledged")
    failpoints("wal.fsync", "off")
    assert m.store.failure is not None
    with pytest.raises(DurabilityError):
        m.add("refused: never a retried fsync")
    with pytest.raises(DurabilityError):
        m.checkpoint()
    m.close()
    m = _open(d)
    assert _texts(m)[0] == "kept"
    assert "refused: never a retried fsync" not in _texts(m)
    m.close()


def test_a_failed_checkpoint_or_close_is_a_durability_error(
    tmp_path: Path, failpoints: Any
) -> None:
    """A full disk during a checkpoint or close raises DurabilityError (still
    an OSError with the errno); the memory stays open and reopening recovers."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    m.add("kept")
    failpoints("checkpoint.write", "enospc")
    with pytest.raises(DurabilityError) as info:
        m.checkpoint()
    assert isinstance(info.value, OSError) and info.value.errno == 28
    assert isinstance(info.value.__cause__, OSError)
    m.add("written after the failed checkpoint")
    with pytest.raises(DurabilityError) as info:
        m.close()
    assert info.value.errno == 28
    failpoints("checkpoint.write", "off")
    m.close()  # a second close works once the disk has room
    with pytest.raises(DurabilityError, match="closed"):
        m.add("after close")
    m = _open(d)
    assert _texts(m) == ["kept", "written after the failed checkpoint"]
    m.close()


def test_a_torn_tail_is_cut_and_a_bad_record_mid_log_needs_salvage(tmp_path: Path) -> None:
    d = tmp_path / "m"
    m = _open(d)
    for i in range(6):
        m.add(f"record {i}")
    m.store.flush()
    del m
    gc.collect()
    seg = _segments(d)[-1]
    whole = seg.read_bytes()
    seg.write_bytes(whole[:-7])  # the last record half written
    m = _open(d)
    assert m.recovery is not None and m.recovery["torn_tail_bytes"] > 0
    assert _texts(m) == [f"record {i}" for i in range(5)]
    m.add("after the cut")
    m.close()
    m = _open(d)
    assert _texts(m)[-1] == "after the cut"
    m.close()

    d2 = tmp_path / "m2"
    m = _open(d2)
    for i in range(6):
        m.add(f"record {i}")
    m.store.flush()
    del m
    gc.collect()
    seg = _segments(d2)[-1]
    raw = bytearray(seg.read_bytes())
    at = raw.find(b"record 2")
    raw[at] ^= 0x20
    seg.write_bytes(bytes(raw))
    with pytest.raises(SnapshotError, match="salvage"):
        _open(d2)
    m = _open(d2, salvage=True)
    assert m.recovery is not None
    assert m.recovery["dropped_records"] >= 3 and m.recovery["dropped_reason"]
    assert _texts(m) == ["record 0", "record 1"]
    m.close()


def test_an_empty_or_garbled_manifest_is_a_snapshot_error(tmp_path: Path) -> None:
    d = tmp_path / "m"
    _open(d).close()
    (d / "MANIFEST").write_text("")
    with pytest.raises(SnapshotError):
        _open(d)
    (d / "MANIFEST").write_text("{not json")
    with pytest.raises(SnapshotError):
        Memory.open(d)


def test_concurrent_writers_are_one_record_each_and_all_land(tmp_path: Path) -> None:
    d = tmp_path / "m"
    m = _open(d)
    vec = np.ones((1, DIM), np.float32) / np.sqrt(DIM)

    def writer(t: int) -> None:
        for i in range(15):
            m.add(f"writer {t} note {i}", embedding=vec[0])

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert m.store.last_seq == 120
    expect = sorted(_texts(m))
    del m
    gc.collect()
    m = _open(d)
    assert sorted(_texts(m)) == expect and len(expect) == 120
    m.close()


def test_save_is_one_file_and_names_its_embedder(tmp_path: Path, failpoints: Any) -> None:
    m = Memory(HashEmbedder(DIM), LocalController())
    for i in range(22):
        m.add(f"fact {i}")
    path = tmp_path / "x.jvm"
    m.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jvm"]
    back = Memory.load(path, controller=LocalController())
    assert isinstance(back.embedder, HashEmbedder) and back.embedder.dim == DIM
    assert back.decisions == m.decisions and back.stats()["writes"] == 22
    # a save that fails half way leaves the previous file whole, and no temp file
    m.add("one more")
    failpoints("checkpoint.rename", "eio")
    with pytest.raises(OSError):
        m.save(path)
    failpoints("checkpoint.rename", "off")
    assert len(Memory.load(path, controller=LocalController())) == 22
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jvm"]


def test_concurrent_saves_never_mix(tmp_path: Path) -> None:
    a = Memory(HashEmbedder(DIM), LocalController())
    b = Memory(HashEmbedder(DIM), LocalController())
    a.add_batch([f"a {i}" for i in range(30)])
    b.add_batch([f"b {i}" for i in range(40)])
    errors: list[BaseException] = []

    def save(m: Memory, p: Path) -> None:
        try:
            for _ in range(10):
                m.save(p)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [
        threading.Thread(target=save, args=(a, tmp_path / "x.jvm")),
        threading.Thread(target=save, args=(b, tmp_path / "x.bak")),
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert len(Memory.load(tmp_path / "x.jvm", controller=LocalController())) == 30
    assert len(Memory.load(tmp_path / "x.bak", controller=LocalController())) == 40


def test_a_save_does_not_follow_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    m = Memory(HashEmbedder(DIM), LocalController())
    m.add("hello")
    # plant links at every temp name this process could pick next: none is used
    for n in range(4):
        (tmp_path / f".x.jvm.tmp-{os.getpid()}-{n}-00000000").symlink_to(victim)
    m.save(tmp_path / "x.jvm")
    assert victim.read_text() == "untouched"
    assert not (tmp_path / "x.jvm").is_symlink()


def test_old_exports_with_side_files_still_load(tmp_path: Path) -> None:
    m = Memory(HashEmbedder(DIM), LocalController())
    m.add_batch([f"old {i}" for i in range(21)])
    path = tmp_path / "old.jvm"
    m.store.save(path)  # a bare snapshot, as builds before this one wrote
    (tmp_path / "old.jvm.decisions.json").write_text(
        json.dumps({"writes": 21, "decisions": m.decisions})
    )
    (tmp_path / "old.jvm.meta.json").write_text(json.dumps({"embedder": f"hash-{DIM}"}))
    back = Memory.load(path, controller=LocalController())
    assert back.embedder.dim == DIM and back.decisions == m.decisions
    (tmp_path / "old.jvm.decisions.json").write_text("")
    with pytest.raises(SnapshotError):
        Memory.load(path, controller=LocalController())


# ---- a plain model of the visible memory, under any interleaving ------------

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 3)),
        st.tuples(st.just("update"), st.integers(0, 50)),
        st.tuples(st.just("forget"), st.integers(0, 50)),
        st.just(("checkpoint", 0)),
        st.just(("crash", 0)),
        st.just(("reopen", 0)),
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_ops)
def test_any_interleaving_matches_a_plain_model(tmp_path: Path, ops: list[tuple[str, int]]) -> None:
    d = tmp_path / f"h{os.urandom(6).hex()}"
    model: dict[int, str] = {}  # live id -> text
    history: dict[int, list[int]] = {}
    m = _open(d, checkpoint_every=4)
    n = 0
    for op, k in ops:
        if op == "add":
            batch = [f"item {n + j}" for j in range(k)]
            n += k
            for i, t in zip(m.add_batch(batch), batch, strict=True):
                model[i] = t
                history[i] = [i]
        elif op in ("update", "forget") and model:
            target = sorted(model)[k % len(model)]
            if op == "update":
                new = m.update(target, f"item {n} (was {model[target]})")
                n += 1
                model[new] = f"item {n - 1} (was {model[target]})"
                history[new] = [new, *history[target]]
            else:
                assert m.forget([target]) == 1
                del model[target]
                history = {
                    i: [h for h in hs if h != target] for i, hs in history.items() if i != target
                }
        elif op == "checkpoint":
            m.checkpoint()
        elif op == "crash":
            del m
            gc.collect()
            m = _open(d, checkpoint_every=4)
        elif op == "reopen":
            m.close()
            m = _open(d, checkpoint_every=4)
        assert {i: m.store.get(i).text for i in range(m.store.next_id) if i in m.store} == model
        for i in model:
            assert m.history(i) == history[i]
    m.close()
    assert sorted(_texts(_reopened(d))) == sorted(model.values())


def _reopened(d: Path) -> Memory:
    m = _open(d)
    m.close()
    return m


# ---- the kill loop ------------------------------------------------------------


def _writer(path: Path, cycle: int, out: int) -> None:
    """Child: open (recovering), then write acknowledged batches until killed."""
    try:
        m = _open(path, checkpoint_every=5)
        i = 0
        while True:
            batch = [f"c{cycle}-w{i}-{j}" for j in range(3)]
            m.add_batch(batch)
            os.write(out, f"{cycle} {i}\n".encode())
            i += 1
    except BaseException:  # pragma: no cover - a child never returns
        os._exit(3)


def _kill_cycles(path: Path, cycles: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    acked: set[tuple[int, int]] = set()
    counts = {"cycles": 0, "acknowledged": 0, "lost": 0, "duplicated": 0, "partial": 0}
    for cycle in range(cycles):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(r)
            _writer(path, cycle, w)
        os.close(w)
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        for line in data.decode().splitlines():
            c, i = line.split()
            acked.add((int(c), int(i)))
        counts["cycles"] += 1
    m = _open(path)
    texts = _texts(m)
    m.close()
    seen: dict[tuple[int, int], list[int]] = {}
    for t in texts:
        c, i, j = t[1:].split("-")
        seen.setdefault((int(c), int(i[1:])), []).append(int(j))
    counts["acknowledged"] = len(acked)
    counts["lost"] = sum(1 for a in acked if a not in seen)
    counts["duplicated"] = sum(1 for js in seen.values() if len(js) != len(set(js)))
    counts["partial"] = sum(1 for js in seen.values() if sorted(set(js)) != [0, 1, 2])
    return counts


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_kill_loop_loses_no_acknowledged_write(tmp_path: Path) -> None:
    cycles = int(os.environ.get("JEVMEM_KILL_CYCLES", "200"))
    counts = _kill_cycles(tmp_path / "m", cycles, seed=12)
    assert counts["cycles"] == cycles
    assert counts["acknowledged"] > cycles  # the loop did write
    assert (counts["lost"], counts["duplicated"], counts["partial"]) == (0, 0, 0), counts


def test_a_store_opened_directly_logs_each_call(tmp_path: Path) -> None:
    d = tmp_path / "s"
    store, state, deltas, report = MemoryStore.open(d, 4, embedder="raw", state=b"hello")
    assert report["created"] and state == b"hello" and deltas == []
    v = np.array([1, 0, 0, 0], np.float32)
    store.add("first", v)
    store.add("second", v)
    store.add_edge(0, 1, "semantic", 0.9)
    assert store.last_seq == 3
    store.close()
    store, state, deltas, report = MemoryStore.open(d, 4, embedder="raw")
    assert report["replayed_records"] == 3 and len(store) == 2
    assert [e.dst for e in store.neighbors(0)] == [1]
    store.close()


def test_forget_is_logged_and_gone_from_disk_after_a_checkpoint(tmp_path: Path) -> None:
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    ids = m.add_batch([f"ordinary note {i}" for i in range(21)] + ["the code is xqvorbik-7731"])
    canary = b"xqvorbik-7731"
    m.store.flush()
    assert any(canary in p.read_bytes() for p in d.iterdir() if p.is_file())
    assert m.forget(ids[-1]) == 1
    new = m.update(ids[0], "ordinary note 0, revised")
    decisions = list(m.decisions)
    del m
    gc.collect()  # a crash before any checkpoint: the forget is replayed from the log
    m = _open(d, checkpoint_every=0)
    assert "the code is xqvorbik-7731" not in _texts(m)
    assert m.history(new) == [new, ids[0]]
    assert m.decisions == decisions
    # the text is still in the log's older records until a checkpoint drops them
    m.checkpoint()
    for p in d.iterdir():
        if p.is_file():
            assert canary not in p.read_bytes(), p.name
    m.close()
    m = _open(d)
    assert len(m) == 22 and "the code is xqvorbik-7731" not in _texts(m)
    m.close()


def test_forget_by_scope_and_filter(tmp_path: Path) -> None:
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    m.add_batch(
        [f"u1 note {i}" for i in range(5)] + [f"u2 note {i}" for i in range(5)],
        scopes=[{"user": "u1"}] * 5 + [{"user": "u2"}] * 5,
        metadatas=[{"n": i} for i in range(10)],
    )
    m.add("u2 secret zqxmorp", scope={"user": "u2"}, metadata={"n": 99})
    with pytest.raises(InvalidInputError):
        m.forget()  # not read as "everything"
    with pytest.raises(InvalidInputError):
        m.forget([0], scope={"user": "u1"})
    assert m.forget(filter={"n": {"$gte": 99}}) == 1
    assert m.forget(scope={"user": "u1"}) == 5
    assert m.forget(scope={"user": "nobody"}) == 0
    left = _texts(m)
    assert left == [f"u2 note {i}" for i in range(5)]
    del m
    gc.collect()
    m = _open(d)
    assert _texts(m) == left
    m.checkpoint()
    assert not any(b"zqxmorp" in p.read_bytes() for p in d.iterdir() if p.is_file())
    m.close()


def test_a_direct_store_forget_is_logged(tmp_path: Path) -> None:
    """`MemoryStore.forget` on a durable store is one log record like every
    other mutation: it survives a crash, and a checkpoint after it works."""
    from jevmem import MemoryStore

    vecs = np.random.default_rng(4).standard_normal((6, 8)).astype(np.float32)
    store = MemoryStore.open(tmp_path / "f", 8, embedder="t")[0]
    ids = store.add_batch([f"note {i}" for i in range(6)], vecs)
    store.forget([ids[1], ids[4]])
    store.flush()
    del store  # no close: reopening replays the log
    reopened = MemoryStore.open(tmp_path / "f", 8, embedder="t")[0]
    assert sorted(i for i in ids if i in reopened) == [ids[0], ids[2], ids[3], ids[5]]
    reopened.checkpoint(b"")
    reopened.close()


def test_a_memory_named_for_a_built_in_opens_with_a_subclass_of_it_with_a_warning(
    tmp_path: Path,
) -> None:
    # memories made before subclasses were recorded as custom name the
    # built-in: their own embedder (a subclass) still opens them, said aloud
    m = Memory(HashEmbedder(DIM), LocalController())
    m.add("Ines teaches Maya the cello")
    m.save(tmp_path / "m.jvm")
    with Memory.open(tmp_path / "d", HashEmbedder(DIM), LocalController()) as d:
        d.add("Ines teaches Maya the cello")
    for load, path in ((Memory.load, tmp_path / "m.jvm"), (Memory.open, tmp_path / "d")):
        with pytest.warns(EmbedderSubclassWarning, match=f'"hash-{DIM}"'):
            back = load(path, _Reversed(DIM), LocalController())
        assert len(back) == 1
        back.close()

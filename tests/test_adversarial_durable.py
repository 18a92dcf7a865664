"""Durable memories and exports under a demanding user: crashes between the
steps of a checkpoint, damaged and crafted files, bad arguments, and saves
aimed at a memory's own files. Each test names the fault it guards."""

from __future__ import annotations

import gc
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jevmem import Memory
from jevmem._core import _set_failpoint
from jevmem.controller import LocalController
from jevmem.embed import HashEmbedder
from jevmem.errors import (
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    SnapshotError,
)

DIM = 32
CANARY = "the vault code is qzvorbik-5531"


def _open(path: Path, **kw: Any) -> Memory:
    return Memory.open(path, HashEmbedder(DIM), LocalController(), **kw)


def _texts(m: Memory) -> list[str]:
    return [m.get(i).text for i in m.matching_ids()]


def _holding(d: Path, needle: str) -> list[str]:
    """The files under ``d`` (salvaged copies aside) whose bytes hold ``needle``."""
    return sorted(p.name for p in d.iterdir() if p.is_file() and needle.encode() in p.read_bytes())


@pytest.fixture
def failpoint() -> Any:
    touched: list[str] = []

    def set_(name: str, action: str) -> None:
        touched.append(name)
        _set_failpoint(name, action)

    yield set_
    for name in touched:
        _set_failpoint(name, "off")


# ---- a forgotten text does not outlive the next checkpoint -----------------------


def test_a_checkpoint_whose_cleanup_failed_leaves_no_forgotten_text(
    tmp_path: Path, failpoint: Any
) -> None:
    """The core deletes the old checkpoint after the new MANIFEST; when that
    step fails (or the process dies there) the old file, with the text of
    everything forgotten since, stayed on disk for good. It goes at the
    next checkpoint."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    ids = m.add_batch(["an ordinary note", CANARY])
    m.checkpoint()
    assert m.forget(ids[1]) == 1
    failpoint("checkpoint.cleanup", "eio")
    m.checkpoint()
    assert _holding(d, "qzvorbik")  # the cleanup failed: the old file stays...
    failpoint("checkpoint.cleanup", "off")
    m.checkpoint()
    assert _holding(d, "qzvorbik") == []  # ...until the next checkpoint
    assert len(list(d.glob("checkpoint-*.jvc"))) == 1
    m.close()


def test_a_kill_after_the_manifest_leaves_no_forgotten_text(tmp_path: Path) -> None:
    """The same, with the process killed between the MANIFEST and the
    cleanup: the next open removes what it left."""
    d = tmp_path / "m"
    child = f"""
from jevmem import Memory
from jevmem._core import _set_failpoint
from jevmem.controller import LocalController
from jevmem.embed import HashEmbedder
m = Memory.open({str(d)!r}, HashEmbedder({DIM}), LocalController(), checkpoint_every=0)
ids = m.add_batch(["an ordinary note", {CANARY!r}])
m.checkpoint()
m.forget(ids[1])
_set_failpoint("checkpoint.cleanup", "abort")
m.checkpoint()
"""
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=120)
    assert r.returncode != 0  # it died at the failpoint
    assert _holding(d, "qzvorbik")  # the old checkpoint is still there...
    m = _open(d)
    assert _texts(m) == ["an ordinary note"]
    assert _holding(d, "qzvorbik") == []  # ...until the next open
    m.close()


def test_temporary_files_of_a_crashed_checkpoint_go(tmp_path: Path) -> None:
    """A checkpoint killed mid-write leaves its temporary file (here planted
    as such a crash leaves it), holding texts a later forget removes."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    ids = m.add_batch(["an ordinary note", CANARY])
    m.checkpoint()
    (current,) = d.glob("checkpoint-*.jvc")
    with_canary = current.read_bytes()
    leftover = d / f".{current.name}.tmp-{os.getpid() + 1}-0-0badf00d"
    leftover.write_bytes(with_canary)
    (d / "checkpoint-0000000001.jvc").write_bytes(with_canary)
    m.forget(ids[1])
    m.checkpoint()
    assert _holding(d, "qzvorbik") == []
    m.close()
    # at open too: what a crash left before it
    leftover.write_bytes(with_canary)
    m = _open(d)
    assert not leftover.exists() and len(list(d.glob("checkpoint-*.jvc"))) == 1
    assert _texts(m) == ["an ordinary note"]
    m.close()


# ---- an acknowledged write is not reported as failed -------------------------------


def test_a_failed_automatic_checkpoint_does_not_fail_the_write(
    tmp_path: Path, failpoint: Any
) -> None:
    """The write's record was durable, yet add() raised when the checkpoint
    it triggered failed: a caller retrying it wrote it twice."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=2)
    m.add("one")
    failpoint("checkpoint.write", "enospc")
    with pytest.warns(RuntimeWarning, match="automatic checkpoint failed"):
        m.add("two")
    m.add("three")  # not retried on every write while the disk is full
    failpoint("checkpoint.write", "off")
    m.add("four")  # two records later: the checkpoint is taken again
    assert m.stats()["checkpoint_seq"] == 4
    m.close()
    m = _open(d)
    assert _texts(m) == ["one", "two", "three", "four"]
    m.close()


def test_write_controller_calls_survive_a_crash(tmp_path: Path) -> None:
    """The controller calls of the write path were counted only at
    checkpoints: a crash reset them."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    for i in range(5):
        m.add(f"Maya practised cello for {i} minutes")
    calls = m.stats()["controller_calls_write"]
    assert calls > 0
    del m
    gc.collect()
    m = _open(d)
    assert m.stats()["controller_calls_write"] == calls
    m.close()


# ---- damaged and crafted files ---------------------------------------------------


def test_a_damaged_segment_header_is_refused_not_dropped(tmp_path: Path) -> None:
    """One flipped bit in the last log segment's magic made the core read the
    segment as torn at creation and delete it, acknowledged records and all."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    m.add("kept in the checkpoint")
    m.checkpoint()
    m.add_batch(["logged one", "logged two"])
    del m
    gc.collect()
    (seg,) = d.glob("wal-*.log")
    damaged = bytearray(seg.read_bytes())
    damaged[0] ^= 0x02
    seg.write_bytes(bytes(damaged))
    with pytest.raises(SnapshotError, match=seg.name):
        _open(d)
    assert seg.read_bytes() == bytes(damaged)  # refused without touching it
    m = _open(d, salvage=True)  # salvage drops it, keeping a copy aside
    assert _texts(m) == ["kept in the checkpoint"]
    assert m.recovery is not None and seg.name in str(m.recovery["dropped_reason"])
    (copy,) = d.glob(f"salvaged-*/{seg.name}")
    assert copy.read_bytes() == bytes(damaged)
    m.close()


@pytest.mark.parametrize("byte", range(16, 24))
def test_a_segment_header_naming_another_first_record_is_refused_not_dropped(
    tmp_path: Path, byte: int
) -> None:
    """One flipped bit in the header's first record number made every record
    after it look out of sequence: read as a torn tail, dropped without a
    word, and the file cut to its header."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    m.add_batch([f"acknowledged note {i}" for i in range(5)])
    del m
    gc.collect()
    (seg,) = d.glob("wal-*.log")
    damaged = bytearray(seg.read_bytes())
    damaged[byte] ^= 0x01
    seg.write_bytes(bytes(damaged))
    with pytest.raises(SnapshotError, match="first"):
        _open(d)
    assert seg.read_bytes() == bytes(damaged)  # refused without touching it
    m = _open(d, salvage=True)
    assert _texts(m) == [] and m.recovery is not None
    (copy,) = d.glob(f"salvaged-*/{seg.name}")
    assert copy.read_bytes() == bytes(damaged)
    m.close()


def test_two_salvages_keep_both_their_drops(tmp_path: Path) -> None:
    """Both salvages of one second wrote to salvaged-<seconds>/: the second
    overwrote the first's copy of the segment."""
    d = tmp_path / "m"
    kept: list[bytes] = []
    for round_ in range(2):
        m = _open(d, checkpoint_every=0, **({"salvage": True} if round_ else {}))
        for i in range(4):
            m.add(f"round {round_} note {i}")  # a record each
        del m
        gc.collect()
        seg = sorted(d.glob("wal-*.log"))[-1]
        damaged = bytearray(seg.read_bytes())
        starts, at = [], 24  # the records' starts: a 24-byte header, then length-prefixed
        while at + 16 <= len(damaged):
            starts.append(at)
            at += 16 + struct.unpack_from("<I", damaged, at)[0]
        damaged[starts[-2] + 20] ^= 0xFF  # a record with a good one after it: damage
        seg.write_bytes(bytes(damaged))
        kept.append(bytes(damaged))
    m = _open(d, salvage=True)
    m.close()
    copies = [p.read_bytes() for p in d.glob("salvaged-*/*")]
    assert len(list(d.glob("salvaged-*"))) == 2 and len(copies) == 2
    # each salvage's copy is the tail of the segment it cut: both rounds kept
    rounds = {i for c in copies for i, whole in enumerate(kept) if whole.endswith(c)}
    assert rounds == {0, 1}


def test_a_request_larger_than_one_log_record_is_refused_before_it_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch past the log's record limit went into the memory, was refused
    by the log, and left the memory ahead of it: the next open failed."""
    import jevmem.plane.writing as writing

    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    m.add("before")
    monkeypatch.setattr(writing, "MAX_LOG_RECORD_BYTES", 16 * 1024)
    with pytest.raises(InvalidInputError, match="smaller batches"):
        m.add_batch(["x" * 2000] * 5)
    assert len(m) == 1
    m.add_batch(["after one", "after two"])  # still takes writes
    m.close()
    m = _open(d)
    assert _texts(m) == ["before", "after one", "after two"]
    m.close()


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def _with_state(export: bytes, state: bytes) -> bytes:
    """An export (the checkpoint layout) with another state, checksum redone:
    a crafted file, which a checksum does not stop."""
    _, _, _, seq, state_len, snap_len = struct.unpack_from("<8sIIQQQ", export)
    snap = export[40 + state_len : 40 + state_len + snap_len]
    body = struct.pack("<8sIIQQQ", b"JEVMEMCK", 1, 0, seq, len(state), len(snap)) + state + snap
    return body + struct.pack("<I", _crc32c(body))


BAD_STATES = [
    {"writes": "many"},
    {"writes": -3},
    {"writes": [1]},
    {"decisions": 5},
    {"decisions": "abc"},
    {"decisions": [{"focus": "x", "neighbours": 3}]},
    {"calls": {"write": "x"}},
    {"embedder": 5},
    {"format": 99},
]


@pytest.mark.parametrize("bad", BAD_STATES, ids=[json.dumps(b) for b in BAD_STATES])
def test_a_crafted_state_is_a_snapshot_error(tmp_path: Path, bad: dict[str, Any]) -> None:
    """Fields of the wrong shape raised ValueError or TypeError, or loaded and
    broke a later forget with an AttributeError."""
    m = Memory(HashEmbedder(DIM), LocalController())
    m.add_batch([f"note {i}" for i in range(3)])
    m.save(tmp_path / "a.jvm")
    good = {"format": 1, "embedder": f"hash-{DIM}", "writes": 3}
    crafted = tmp_path / "b.jvm"
    crafted.write_bytes(
        _with_state((tmp_path / "a.jvm").read_bytes(), json.dumps({**good, **bad}).encode())
    )
    with pytest.raises(SnapshotError, match=str(crafted)):
        Memory.load(crafted, HashEmbedder(DIM), LocalController())


def test_a_crafted_log_delta_is_a_snapshot_error(tmp_path: Path) -> None:
    """The same for a log record's state delta (a record of no ops)."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    m.add("a note")
    last = m.store.last_seq
    assert last is not None
    m.close()  # checkpoints; the log is one empty segment
    (seg,) = d.glob("wal-*.log")
    delta = json.dumps({"writes": "many"}).encode()
    payload = struct.pack("<II", 0, len(delta)) + delta
    seq = last + 1
    crc = _crc32c(struct.pack("<Q", seq) + payload)
    with seg.open("ab") as f:
        f.write(struct.pack("<IIQ", len(payload), crc, seq) + payload)
    with pytest.raises(SnapshotError, match="log record 1"):
        _open(d)
    # refused cleanly: the LOCK is free; without the record it opens again
    with seg.open("r+b") as f:
        f.truncate(24)
    m = _open(d)
    assert _texts(m) == ["a note"]
    m.close()


def test_snapshot_errors_name_the_path(tmp_path: Path) -> None:
    """Errors from the core named no file ("not a jevmem snapshot") or only a
    name inside the memory's directory."""
    junk = tmp_path / "notes.jvm"
    junk.write_bytes(b"not a memory at all")
    with pytest.raises(SnapshotError, match=str(junk)):
        Memory.load(junk)
    d = tmp_path / "m"
    m = _open(d)
    m.add("a note")
    m.close()
    (ck,) = d.glob("checkpoint-*.jvc")
    ck.write_bytes(ck.read_bytes()[:-1] + b"\x00")
    with pytest.raises(SnapshotError, match=str(d)):
        _open(d)


# ---- arguments -----------------------------------------------------------------------


def test_open_refuses_bad_arguments_with_typed_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError, match="empty"):
        _open("")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # the working directory was made a memory
    for path in (None, 3, b"m"):
        with pytest.raises(InvalidTypeError):
            _open(path)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        _open(tmp_path / "m", durability=None)
    with pytest.raises(InvalidTypeError):
        _open(tmp_path / "m", salvage="yes")
    with pytest.raises(InvalidConfigError):
        _open(tmp_path / "m", max_absent_ids=-1)
    with pytest.raises(InvalidConfigError):
        Memory.load(tmp_path / "x.jvm", max_absent_ids=-1)
    with pytest.raises(InvalidInputError):
        Memory(HashEmbedder(DIM)).save("")
    assert list(tmp_path.iterdir()) == []
    export = tmp_path / "a.jvm"
    Memory(HashEmbedder(DIM)).save(export)
    with pytest.raises(NotADirectoryError) as info:
        Memory.open(export)  # a file: said as such, not "MANIFEST is not readable"
    assert info.value.filename == str(export)


def test_save_refuses_the_files_of_a_durable_memory(tmp_path: Path) -> None:
    """Saving over the current checkpoint (or the MANIFEST) left a memory that
    no longer opened."""
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    m.add("a note")
    m.checkpoint()
    m.add("another")
    (ck,) = d.glob("checkpoint-*.jvc")
    (seg,) = d.glob("wal-*.log")
    for target in (ck, d / "MANIFEST", seg, d / "LOCK", d / "checkpoint-0000000099.jvc"):
        with pytest.raises(InvalidInputError, match="durable memory"):
            m.save(target)
        with pytest.raises(InvalidInputError, match="durable memory"):
            m.store.save(target)  # the store's own export, in the core
    m.save(d / "export.jvm")  # any other name in the directory is fine
    del m
    gc.collect()
    m = _open(d)
    assert _texts(m) == ["a note", "another"]
    m.close()
    assert _texts(Memory.load(d / "export.jvm", HashEmbedder(DIM))) == ["a note", "another"]


# ---- what a search reads, across every way back ------------------------------------


def _build(m: Memory) -> None:
    t0 = 1_700_000_000
    ids = m.add_batch(
        [
            "Maya said the budget for project Apollo is 50 dollars",
            "Lena said the budget for project Borealis is 70 dollars",
            "Omar said the budget for project Apollo is 20 dollars",
        ],
        timestamps=[t0, t0 + 86400, None],
        speakers=["Maya", "Lena", "Omar"],
        scopes=[{"user": "u1"}, {"user": "u2"}, {"user": "u1", "session": "s2"}],
        metadatas=[{"kind": "budget", "n": 1}, {"kind": "budget", "n": 2}, {"ok": True}],
        keys=["k1", "k2", None],
    )
    a = m.update(ids[0], "Maya said the Apollo budget is now 75 dollars", timestamp=t0 + 5 * 86400)
    m.update(a, "Maya said the Apollo budget was cut to 60 dollars", timestamp=t0 + 9 * 86400)
    long = " ".join(f"Filler sentence {i} about gardens and rivers." for i in range(300))
    m.add(f"Lena moved to Berlin. {long} The password is pumpernickel.", speaker="Lena")
    for i in range(22):
        m.add(f"Omar practised cello for {i} minutes", timestamp=t0 + 3600 * i, speaker="Omar")
    m.forget(m.add("a note to forget about Apollo", scope={"user": "u1"}))
    m.forget(ids[2])


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("what is the Apollo budget?", {}),
    ("Apollo budget", {"scope": {"user": "u1"}}),
    ("what is the password?", {}),
    ("budget", {"filter": {"kind": "budget"}}),
    ("how long did Omar practise cello?", {"now": 1_700_000_000 + 30 * 86400}),
]


def _reads(m: Memory) -> list[Any]:
    out: list[Any] = []
    for q, kw in QUERIES:
        r = m.search(q, 6, **kw)
        out.append([(e.id, round(e.score, 6), e.passage, e.timestamp) for e in r.evidence])
    out.append([m.history(i) for i in m.matching_ids()])
    out.append([m.validity(i) for i in m.matching_ids()])
    out.append([(n.id, n.text, n.scope, n.metadata, n.key) for n in m.list(limit=100)[0]])
    out.append((m.stats()["writes"], m.stats()["controller_calls_write"]))
    return out


def test_searches_read_the_same_after_every_way_back(tmp_path: Path) -> None:
    ref = Memory(HashEmbedder(DIM), LocalController())
    _build(ref)
    expected = _reads(ref)
    ref.save(tmp_path / "a.jvm")
    assert _reads(Memory.load(tmp_path / "a.jvm", controller=LocalController())) == expected
    d = tmp_path / "m"
    m = _open(d, checkpoint_every=0)
    _build(m)
    assert _reads(m) == expected
    del m
    gc.collect()  # a crash: the log is replayed
    m = Memory.open(d, controller=LocalController())
    assert _reads(m) == expected
    m.close()  # a checkpoint: read back from it
    m = Memory.open(d, controller=LocalController())
    assert _reads(m) == expected
    m.close()


# ---- kill -9 while adding, forgetting and checkpointing -------------------------------


def _churn(path: Path, cycle: int, out: int) -> None:
    """Child: add, forget and checkpoint, reporting each acknowledged step."""
    try:
        m = _open(path, checkpoint_every=3)
        rng = random.Random(cycle)
        for i in range(10_000):
            live = m.matching_ids()
            if live and rng.random() < 0.35:
                victim = rng.choice(live)
                text = m.get(victim).text
                os.write(out, f"? {text}\n".encode())
                m.forget(victim)
                os.write(out, f"F {text}\n".encode())
            else:
                text = f"<c{cycle}-{i}>"  # delimited: no text is inside another
                m.add(text)
                os.write(out, f"A {text}\n".encode())
            if rng.random() < 0.1:
                m.checkpoint()
    finally:
        os._exit(3)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_kill_loop_with_forgets(tmp_path: Path) -> None:
    """No acknowledged write lost, no acknowledged forget undone, and after a
    checkpoint no forgotten text on disk, over kills at random points."""
    d = tmp_path / "m"
    rng = random.Random(5)
    alive: set[str] = set()
    forgotten: set[str] = set()
    for cycle in range(12):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(r)
            _churn(d, cycle, w)
        os.close(w)
        time.sleep(rng.uniform(0.05, 0.3))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        os.close(r)
        unsure: set[str] = set()  # a forget begun, not acknowledged
        for line in data.decode().splitlines():
            tag, _, text = line.partition(" ")
            if tag == "A":
                alive.add(text)
            elif tag == "?":
                unsure.add(text)
            else:
                alive.discard(text)
                forgotten.add(text)
                unsure.discard(text)
        m = _open(d)
        held = set(_texts(m))
        m.close()
        assert alive - unsure <= held, f"cycle {cycle}: acknowledged writes lost"
        assert not forgotten & held, f"cycle {cycle}: forgotten observations came back"
        for text in unsure - held:  # that forget did happen
            alive.discard(text)
            forgotten.add(text)
    assert forgotten and alive
    m = _open(d)
    m.checkpoint()
    m.close()
    blobs = [p.read_bytes() for p in d.iterdir() if p.is_file()]
    assert [t for t in forgotten if any(t.encode() in b for b in blobs)] == []

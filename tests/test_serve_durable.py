"""`jevmem serve --data-dir`: acknowledged gRPC writes survive SIGKILL."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("grpc")

from jevmem import Memory
from jevmem.controller import LocalController
from jevmem.embed import HashEmbedder
from jevmem.remote import MemoryClient

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def _server(data: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jevmem", "serve", "--port", "0", "--embedder", "hash-64",
         "--data-dir", str(data), "--grace", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "jevmem serve did not start within 30 s"
        yield proc, proc.stdout.readline().rsplit(" ", 1)[1].strip()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _texts(path: Path) -> list[str]:
    m = Memory.open(path, HashEmbedder(64), LocalController())
    try:
        return [m.store.get(i).text for i in range(m.store.next_id) if i in m.store]
    finally:
        m.close()


def test_a_memory_made_by_its_first_write_survives_sigkill(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with _server(data) as (proc, address):
        with MemoryClient(address, timeout_s=10) as c:
            c.add("fresh", "Maya plays the cello")
            c.add("fresh", "Ines teaches her")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert _texts(data / "fresh") == ["Maya plays the cello", "Ines teaches her"]
    # restarted, the server hosts it again; a clean shutdown checkpoints it
    with _server(data) as (proc, address):
        with MemoryClient(address, timeout_s=10) as c:
            assert c.stats("fresh")["nodes"] == 2
            c.add("fresh", "a third")
        proc.terminate()
        assert proc.wait(20) == 0
    assert len(list((data / "fresh").glob("wal-*.log"))) == 1
    assert _texts(data / "fresh")[-1] == "a third"


def test_kill_loop_through_the_server(tmp_path: Path) -> None:
    # each cycle starts a server process (~1.3 s); the 200-cycle soak is
    # JEVMEM_SERVE_KILL_CYCLES=200 (BENCHMARKS.md, section 10)
    cycles = int(os.environ.get("JEVMEM_SERVE_KILL_CYCLES", "25"))
    data = tmp_path / "data"
    rng = random.Random(7)
    acked: list[str] = []
    for cycle in range(cycles):
        with _server(data) as (proc, address):
            stop = threading.Event()

            def write(
                address: str = address, cycle: int = cycle, stop: threading.Event = stop
            ) -> None:
                with MemoryClient(address, timeout_s=5) as c:
                    i = 0
                    while not stop.is_set():
                        text = f"cycle {cycle} write {i}"
                        try:
                            c.add("m", text)
                        except Exception:
                            return  # the server is gone: this write was not acknowledged
                        acked.append(text)
                        i += 1

            t = threading.Thread(target=write)
            t.start()
            time.sleep(rng.uniform(0.0, 0.4))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            stop.set()
            t.join(30)
    texts = _texts(data / "m")
    print(
        f"{cycles} kill cycles through jevmem serve: {len(acked)} acknowledged writes, {len(texts)} stored"
    )
    assert len(acked) > cycles // 2
    missing = [a for a in acked if a not in set(texts)]
    assert missing == []
    assert len(texts) == len(set(texts))  # none twice

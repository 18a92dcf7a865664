"""``jevmem serve`` hardening over real gRPC on loopback: per-memory tokens,
size limits checked before any work, and a busy memory that cannot hold the
worker threads other memories need."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt
import pytest

from jevmem import HashEmbedder, LocalController, Memory
from jevmem._proto.jevmem.v1 import memory_pb2 as mpb
from jevmem.remote import MemoryClient, ServerOptions, serve_memory
from jevmem.remote.memory_service import MAX_REQUEST_BYTES, MAX_TEXT_BYTES
from jevmem.remote.server import TokenAccess


def _code(fn: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        fn()
    err = info.value
    assert isinstance(err, grpc.Call)
    return err.code(), err.details() or ""


def _memory() -> Memory:
    return Memory(HashEmbedder(32), controller=LocalController())


# ---- per-memory tokens ---------------------------------------------------------------


@pytest.fixture()
def tenant_server() -> Iterator[str]:
    opts = ServerOptions(token="admin-tok", tokens={"tok-a": ["alpha"], "tok-b": ["beta", "gamma"]})
    server, _ = serve_memory(opts=opts, factory=lambda _: _memory())
    with server:
        yield server.address


def test_a_token_opens_only_its_memories(tenant_server: str) -> None:
    with (
        MemoryClient(tenant_server, token="tok-a", timeout_s=10) as a,
        MemoryClient(tenant_server, token="tok-b", timeout_s=10) as b,
        MemoryClient(tenant_server, token="admin-tok", timeout_s=10) as admin,
        MemoryClient(tenant_server, token="nope", timeout_s=10) as stranger,
        MemoryClient(tenant_server, timeout_s=10) as anonymous,
    ):
        a.add("alpha", "alpha canary: the vault code is 1111")
        b.add("beta", "beta canary: the vault code is 2222")
        # A cannot read or write B's memory, nor create one it was not given
        calls: list[Callable[[], object]] = [
            lambda: a.search("beta", "vault code"),
            lambda: a.search_batch("beta", ["vault code"]),
            lambda: a.add("beta", "planted by a"),
            lambda: a.add_batch("beta", [a.observation("planted by a")]),
            lambda: a.get("beta", 0),
            lambda: a.stats("beta"),
            lambda: a.health("beta"),
            lambda: a.add("delta", "a new memory of a's choosing"),
            lambda: b.search("alpha", "vault code"),
            lambda: b.add("alpha", "planted by b"),
        ]
        for call in calls:
            code, details = _code(call)
            assert code == grpc.StatusCode.PERMISSION_DENIED, details
        # unknown or missing tokens never reach a handler
        for client in (stranger, anonymous):
            assert _code(lambda c=client: c.search("alpha", "vault"))[0] == (  # type: ignore[misc]
                grpc.StatusCode.UNAUTHENTICATED
            )
        # nothing was planted; each tenant sees its own; the admin token sees all
        assert admin.stats("beta")["nodes"] == 1
        assert admin.stats("alpha")["nodes"] == 1
        assert [e.text for e in a.search("alpha", "vault code").evidence] == [
            "alpha canary: the vault code is 1111"
        ]
        assert b.add("gamma", "gamma is b's too") == 0
        # "delta" was never created
        assert admin.health("delta").status == mpb.MemoryHealthResponse.UNKNOWN_MEMORY


def test_tokens_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"t1": ["a"], "root": ["*"]}))
    table = TokenAccess.load(path)
    access = TokenAccess(table)
    assert access.allows(b"Bearer t1", "a") and not access.allows(b"Bearer t1", "b")
    assert access.allows(b"Bearer root", "anything")
    assert not access.allows(b"Bearer t2", "a") and not access.allows(b"t1", "a")
    assert access.known(b"Bearer t1") and not access.known(b"Bearer t")
    for bad in ('["t1"]', '{"t1": "a"}', "not json", '{"": ["a"]}'):
        path.write_text(bad)
        with pytest.raises(ValueError, match="token"):
            TokenAccess(TokenAccess.load(path))


def test_serve_cli_tokens_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-a": ["a"], "tok-b": ["b"]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jevmem", "serve", "--port", "0", "--embedder", "hash-64",
         "--tokens-file", str(tokens), "--token-env", "JEVMEM_TEST_ADMIN", "--grace", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "JEVMEM_TEST_ADMIN": "admin"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "jevmem serve did not start within 30 s"
        address = proc.stdout.readline().rsplit(" ", 1)[1].strip()
        with (
            MemoryClient(address, token="tok-a", timeout_s=10) as a,
            MemoryClient(address, token="admin", timeout_s=10) as admin,
        ):
            assert a.add("a", "Maya plays the cello") == 0
            assert _code(lambda: a.add("b", "planted"))[0] == grpc.StatusCode.PERMISSION_DENIED
            assert admin.add("b", "b's own") == 0
            assert _code(lambda: a.search("b", "own"))[0] == grpc.StatusCode.PERMISSION_DENIED
            assert admin.stats("b")["nodes"] == 1
    finally:
        proc.kill()
        proc.wait(5)


# ---- size limits ---------------------------------------------------------------------


def test_oversized_requests_are_refused_before_any_work() -> None:
    served = _memory()
    opts = ServerOptions()
    server, _ = serve_memory({"m": served}, opts, max_text_bytes=1024, max_request_bytes=8 * 1024)
    with server, MemoryClient(server.address, timeout_s=10) as c:
        before = served.stats()
        big = "word " * 300  # 1500 bytes: over the per-text limit
        for call in (
            lambda: c.add("m", big),
            lambda: c.add_batch("m", [c.observation("fine"), c.observation(big)]),
            lambda: c.search("m", big),
            lambda: c.search_batch("m", ["fine", big]),
        ):
            code, details = _code(call)
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert "1024" in details
        # a request over the whole-request cap is refused by gRPC unread
        many = [c.observation("small text " * 50) for _ in range(40)]  # ~22 KB
        code, _ = _code(lambda: c.add_batch("m", many))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert served.stats() == before
        assert len(served) == 0
        assert c.add("m", "a text within the limits") == 0


def test_default_limits_are_documented_and_sized() -> None:
    # the receive cap of a default server is the request limit, which holds
    # four observations at the text limit
    assert MAX_TEXT_BYTES == _memory().store.max_text_bytes
    assert MAX_REQUEST_BYTES > 4 * MAX_TEXT_BYTES
    server, servicer = serve_memory({"m": _memory()})
    with server, MemoryClient(server.address, timeout_s=30) as c:
        over = "x" * (MAX_TEXT_BYTES + 1)
        code, details = _code(lambda: c.add("m", over))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and str(MAX_TEXT_BYTES) in details
        code, _ = _code(lambda: c.add_batch("m", [c.observation("y" * MAX_TEXT_BYTES)] * 5))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert servicer.memories["m"].stats()["nodes"] == 0


# ---- a busy memory does not starve the others ----------------------------------------


class _GatedEmbedder(HashEmbedder):
    """A hash embedder whose embed calls, once armed, wait for ``release``."""

    def __init__(self) -> None:
        super().__init__(32)
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.armed:
            self.entered.set()
            assert self.release.wait(30), "the test never released the embedder"
        return super().embed(texts)


def test_a_busy_memory_does_not_hold_the_threads_other_memories_need() -> None:
    gated = _GatedEmbedder()
    busy = Memory(gated, controller=LocalController())
    busy.add("an observation on the busy memory")
    other = _memory()
    other.add("tea with Bob on Friday")
    gated.armed = True
    # 4 threads in the old server; 3 calls at once per memory
    opts = ServerOptions(max_workers=3, max_concurrent_rpcs=8)
    server, _ = serve_memory({"busy": busy, "other": other}, opts, max_calls_per_memory=3)
    with server, MemoryClient(server.address, timeout_s=20) as c:

        def on_busy(i: int) -> Any:
            try:
                return c.search("busy", f"busy query {i}")
            except grpc.RpcError as exc:
                return exc

        pool = ThreadPoolExecutor(8)
        try:
            pending = [pool.submit(on_busy, i) for i in range(8)]
            assert gated.entered.wait(10)
            # the calls beyond its admissions come back at once
            deadline = time.monotonic() + 10
            while sum(p.done() for p in pending) < 5 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert sum(p.done() for p in pending) == 5
            # the busy memory is stuck in its embedder; a search elsewhere still runs
            r = c.search("other", "tea with Bob", k=3)
            assert r.evidence and r.evidence[0].text == "tea with Bob on Friday"
            assert not gated.release.is_set() and not all(p.done() for p in pending)
        finally:
            gated.release.set()
            got = [p.result(timeout=30) for p in pending]
            pool.shutdown()
    refused = [g for g in got if isinstance(g, grpc.Call)]
    # beyond its 3 admissions the busy memory refused at once, never queued
    assert refused and all(g.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for g in refused)
    assert "busy" in (refused[0].details() or "")
    answered = [g for g in got if not isinstance(g, grpc.Call)]
    assert 1 <= len(answered) <= 3

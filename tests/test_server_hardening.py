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
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt
import pytest
from support.gated import GatedEmbedder

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


def test_a_busy_memory_does_not_hold_the_threads_other_memories_need() -> None:
    gated = GatedEmbedder()
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


# ---- refused writes, failing handlers, client encoding ------------------------------


def test_a_refused_write_to_a_new_name_creates_nothing() -> None:
    made: list[str] = []

    def factory(name: str) -> Memory:
        made.append(name)
        return _memory()

    server, servicer = serve_memory(opts=ServerOptions(), factory=factory, max_memories=2)
    with server, MemoryClient(server.address, timeout_s=10) as c:
        o = c.observation
        refused: list[Callable[[], object]] = [
            lambda: c.add("typo1", "hello", timestamp="soonish"),
            # (the client refuses these itself, as in-process: sent as built)
            lambda: c.add_batch(
                "typo2",
                [mpb.Observation(text="hello", metadata={"x": mpb.MetaValue(number=float("nan"))})],
            ),
            lambda: c.add_batch("typo3", [mpb.Observation(text="hello", scope={"user": ""})]),
            lambda: c.add_batch(
                "typo4", [mpb.Observation(text="hello", provenance={"src": "a\x00b"})]
            ),
            lambda: c.add("typo5", "nul\x00here"),
            lambda: c.add_batch("typo6", [o("fine"), o("bad", timestamp="soonish")]),
            lambda: c.add_batch("typo7", [o("fine"), mpb.Observation(text="bad", scope={"": "x"})]),
        ]
        for call in refused:
            code, details = _code(call)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        # no memory was made, none counts against max_memories
        assert made == [] and servicer.memories == {}
        for i in range(1, 8):
            assert c.health(f"typo{i}").status == mpb.MemoryHealthResponse.UNKNOWN_MEMORY
        assert c.add("real1", "a real first write") == 0
        assert c.add_batch("real2", [o("one"), o("two")]) == [0, 1]
        assert made == ["real1", "real2"]
        # an existing memory refuses the same rows the same way, unchanged
        unscoped = mpb.Observation(text="x", scope={"user": ""})
        code, _ = _code(lambda: c.add_batch("real1", [o("fine"), unscoped]))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert c.stats("real1")["nodes"] == 1


def test_a_refused_write_to_a_new_name_makes_no_directory(tmp_path: Path) -> None:
    def factory(name: str) -> Memory:
        return Memory.open(tmp_path / name, HashEmbedder(32), LocalController())

    server, servicer = serve_memory(opts=ServerOptions(), factory=factory)
    try:
        with server, MemoryClient(server.address, timeout_s=10) as c:
            code, _ = _code(lambda: c.add("typo", "hello", timestamp="soonish"))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert not (tmp_path / "typo").exists()
            assert c.add("good", "Maya plays cello", timestamp=1_700_000_000) == 0
            assert (tmp_path / "good" / "MANIFEST").exists()
    finally:
        for m in servicer.memories.values():
            m.close()


class _FailingEmbedder(HashEmbedder):
    """Fails while ``failing`` is set; ``entered`` is set on each call and
    ``release``, when given, is waited for before failing."""

    def __init__(self, release: threading.Event | None = None) -> None:
        super().__init__(32)
        self.failing = True
        self.entered = threading.Event()
        self.release = release

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.entered.set()
        if self.failing:
            if self.release is not None:
                self.release.wait(10)
            raise RuntimeError("the embedder broke")
        return super().embed(texts)


def test_a_failed_first_write_leaves_no_memory_behind() -> None:
    embedder = _FailingEmbedder()
    made: list[Memory] = []

    def factory(name: str) -> Memory:
        made.append(Memory(embedder, controller=LocalController()))
        return made[-1]

    server, servicer = serve_memory(opts=ServerOptions(), factory=factory, max_memories=1)
    with server, MemoryClient(server.address, timeout_s=10) as c:
        o = c.observation
        for call in (lambda: c.add("m", "hello"), lambda: c.add_batch("m", [o("a"), o("b")])):
            code, details = _code(call)
            assert code == grpc.StatusCode.INTERNAL and "the embedder broke" in details
            # nothing is hosted, and no slot of max_memories is taken
            assert servicer.memories == {}
            assert c.health("m").status == mpb.MemoryHealthResponse.UNKNOWN_MEMORY
        assert len(made) == 2
        embedder.failing = False
        assert c.add("m", "hello") == 0
        assert servicer.memories == {"m": made[2]}
        # a failed write to a memory that exists changes nothing and keeps it
        embedder.failing = True
        code, _ = _code(lambda: c.add("m", "again"))
        assert code == grpc.StatusCode.INTERNAL
        assert servicer.memories == {"m": made[2]} and c.stats("m")["nodes"] == 1


def test_a_write_waiting_on_a_failed_first_write_makes_the_memory_anew() -> None:
    release = threading.Event()
    embedder = _FailingEmbedder(release)
    made: list[Memory] = []

    def factory(name: str) -> Memory:
        made.append(Memory(embedder, controller=LocalController()))
        return made[-1]

    server, servicer = serve_memory(opts=ServerOptions(), factory=factory)
    with (
        server,
        MemoryClient(server.address, timeout_s=20) as first,
        MemoryClient(server.address, timeout_s=20) as second,
        ThreadPoolExecutor(2) as pool,
    ):
        failing = pool.submit(_code, lambda: first.add("m", "hello"))
        assert embedder.entered.wait(10)  # the first write holds the new memory
        # the second write finds that memory and waits for it (or, if it
        # comes late, finds none): either way it must not write into a
        # memory that was taken away
        later = pool.submit(second.add, "m", "world")
        time.sleep(0.3)
        embedder.failing = False
        release.set()
        code, _ = failing.result(20)
        assert code == grpc.StatusCode.INTERNAL
        assert later.result(20) == 0
        assert len(made) == 2 and servicer.memories == {"m": made[1]}
        assert [e.text for e in second.search("m", "world", 5).evidence] == ["world"]


def test_serve_removes_the_directory_a_failed_first_write_made(tmp_path: Path) -> None:
    from jevmem.remote.cli import MemoryFactory

    embedder = _FailingEmbedder()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("the user's own file")

    def make(name: str) -> Memory:
        return Memory.open(tmp_path / name, embedder, LocalController())

    factory = MemoryFactory(make, tmp_path)
    server, servicer = serve_memory(opts=ServerOptions(), factory=factory, discard=factory.discard)
    try:
        with server, MemoryClient(server.address, timeout_s=10) as c:
            for name in ("new", "kept"):
                code, _ = _code(partial(c.add, name, "hello"))
                assert code == grpc.StatusCode.INTERNAL
            assert servicer.memories == {}
            # the directory it made is gone; one that was there stays, as it was
            assert not (tmp_path / "new").exists()
            assert (tmp_path / "kept" / "notes.txt").read_text() == "the user's own file"
            embedder.failing = False
            assert c.add("new", "Maya plays cello", timestamp=1_700_000_000) == 0
            assert (tmp_path / "new" / "MANIFEST").exists()
    finally:
        for m in servicer.memories.values():
            m.close()
    # the directory names its embedder, a HashEmbedder subclass: that one reopens it
    assert len(Memory.open(tmp_path / "new", embedder)) == 1


def test_serve_removes_what_a_failed_open_left(tmp_path: Path) -> None:
    """An open that fails part way (out of file descriptors, say) left a lock
    and a log without a MANIFEST: the name failed on every write after, a
    restart too."""
    from jevmem.remote.cli import MemoryFactory

    def make(name: str) -> Memory:
        (tmp_path / name).mkdir()
        (tmp_path / name / "LOCK").write_text("")
        raise OSError(24, "Too many open files", str(tmp_path / name))

    factory = MemoryFactory(make, tmp_path)
    with pytest.raises(OSError):
        factory("m")
    assert not (tmp_path / "m").exists()
    (tmp_path / "mine").mkdir()
    with pytest.raises(OSError):
        MemoryFactory(lambda name: make(name + "x"), tmp_path)("mine")
    assert (tmp_path / "mine").is_dir()  # not made by this call: left alone


def test_a_controller_request_nested_too_deep_is_invalid_argument() -> None:
    from jevmem._proto.jevmem.v1 import controller_pb2 as pb
    from jevmem._proto.jevmem.v1 import controller_pb2_grpc as pbg
    from jevmem.remote import serve_controller

    server = serve_controller(LocalController(), ServerOptions(port=0))
    try:
        stub = pbg.SystemOneStub(grpc.insecure_channel(server.address))
        template = pb.QuestionTemplate(
            kind="assess.sufficiency", instruction="x", noul=pb.NoulSpec()
        )
        deep = '{"a":' + "[" * 5000 + "]" * 5000 + "}"
        req = pb.DecideRequest(
            requests=[
                pb.DecisionRequest(
                    purpose="assessment",
                    state_json=deep,
                    question_ids=["q"],
                    question_templates=[0],
                )
            ],
            templates=[template],
        )
        for call in (
            lambda: stub.Decide(req, timeout=10),
            lambda: list(stub.DecideStream(iter([req]), timeout=10)),
        ):
            code, details = _code(call)
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "too deep" in details
    finally:
        server.stop(0)


def test_an_exception_escaping_a_handler_ends_the_call() -> None:
    # `embedder_named` refuses a bad spec with SystemExit: the call must not
    # hang to its deadline, for that nor for any other exception
    def exits(name: str) -> Memory:
        raise SystemExit(f"unknown embedder for {name}")

    def breaks(name: str) -> Memory:
        raise RuntimeError("the factory broke")

    for factory, text in ((exits, "unknown embedder for m"), (breaks, "the factory broke")):
        server, servicer = serve_memory(opts=ServerOptions(), factory=factory)
        with server, MemoryClient(server.address, timeout_s=20) as c:
            t0 = time.monotonic()
            code, details = _code(lambda: c.add("m", "hello"))
            assert time.monotonic() - t0 < 10
            assert code == grpc.StatusCode.INTERNAL and text in details
            assert servicer.memories == {}
            assert c.health("m").status == mpb.MemoryHealthResponse.UNKNOWN_MEMORY


def test_the_client_encodes_what_the_in_process_api_accepts() -> None:
    import datetime as dt

    from jevmem.errors import InvalidInputError, InvalidTypeError

    served, local = _memory(), _memory()
    server, _ = serve_memory({"m": served})
    with server, MemoryClient(server.address, timeout_s=10) as c:
        times: list[object] = [
            np.int64(1_700_000_000),
            np.int32(1_700_000_001),
            1_700_000_002.9,
            np.float32(1_700_000_128.0),  # numpy's float32 is a float too
            dt.datetime(2023, 11, 14, 22, 13, 23, tzinfo=dt.timezone.utc),
            dt.date(2023, 11, 15),
            "2023-11-16T10:00:00Z",
        ]
        for i, ts in enumerate(times):
            rid = c.add("m", f"remote note {i}", timestamp=ts, entities=("Ines",))
            lid = local.add(f"local note {i}", timestamp=ts, entities=("Ines",))
            node = c.get("m", rid)
            assert node.timestamp is not None and node.timestamp == local.get(lid).timestamp
            assert list(node.entities) == local.get(lid).entities
        before = served.stats()
        # refused here as in-process, with the same typed errors, and nothing sent
        refused: list[tuple[dict[str, Any], type[Exception]]] = [
            ({"timestamp": True}, InvalidTypeError),
            ({"timestamp": np.float32("nan")}, InvalidInputError),
            ({"timestamp": float("nan")}, InvalidInputError),
            ({"timestamp": 10**15}, InvalidInputError),
            ({"entities": "Ines"}, InvalidTypeError),
            ({"metadata": {"n": np.int64(3)}}, InvalidInputError),
            ({"metadata": {"n": np.float32(0.5)}}, InvalidInputError),
            ({"scope": {"user": 3}}, InvalidInputError),
        ]
        for kw, error in refused:
            with pytest.raises(error):
                local.add("x", **kw)
            with pytest.raises(error):
                c.add("m", "x", **kw)
        for k in (-1, 0, True, 10**6):
            with pytest.raises(InvalidInputError):
                local.search("note", k=k)
            with pytest.raises(InvalidInputError):
                c.search("m", "note", k=k)
            with pytest.raises(InvalidInputError):
                c.search_batch("m", ["note"], k=k)
        with pytest.raises(InvalidTypeError):
            c.search_batch("m", "note")  # a string, not a list of queries
        with pytest.raises(InvalidTypeError):
            c.search("m", "note", now=True)
        assert served.stats() == before


def _milk(m: Memory) -> None:
    m.add_batch(
        [
            "I prefer oat milk in my coffee.",
            "I switched from oat milk to soy milk.",
            "Maya's cello teacher is Ines.",
        ],
        timestamps=[1_700_000_000, 1_700_172_800, 1_700_200_000],
        speakers=["Maya"] * 3,
    )


def test_remote_now_equals_in_process_now() -> None:
    import datetime as dt

    from jevmem.errors import InvalidInputError
    from jevmem.remote import MemoryServiceError

    served, local = _memory(), _memory()
    _milk(served)
    _milk(local)
    query = "what milk does Maya drink now?"
    server, _ = serve_memory({"m": served})
    with server, MemoryClient(server.address, timeout_s=10) as c:

        def ids(r: Any) -> list[tuple[int, float]]:
            return [(e.id, round(e.score, 5)) for e in r.evidence]

        nows: list[object] = [
            None,
            1_700_100_000,
            np.int64(1_700_100_000),
            1_700_100_000.5,
            "2023-11-15",
            dt.datetime(2023, 11, 15, tzinfo=dt.timezone.utc),
            1_800_000_000,
        ]
        tops = set()
        for now in nows:
            want = local.search(query, k=3, now=now)
            got = c.search("m", query, k=3, now=now)
            assert ids(got) == ids(want), now
            assert ids(c.search_batch("m", [query, "cello"], k=3, now=now)[0]) == ids(want)
            tops.add(got.evidence[0].id)
        assert tops == {0, 1}  # the time asked for changes which fact is current
        # refused as in-process: a time out of range here, a text the server cannot read there
        with pytest.raises(InvalidInputError):
            local.search(query, now=10**15)
        with pytest.raises(InvalidInputError):
            c.search("m", query, now=10**15)
        with pytest.raises(InvalidInputError):
            local.search(query, now="garbage")
        # (the server reads the text: refused there, with the same type)
        with pytest.raises(InvalidInputError) as bad:
            c.search("m", query, now="garbage")
        assert isinstance(bad.value, MemoryServiceError)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "garbage" in bad.value.details()


# ---- server addresses ----------------------------------------------------------------


def test_server_options_are_checked_and_the_bound_address_reported() -> None:
    import socket

    from jevmem.errors import InvalidConfigError

    for bad in (
        ServerOptions(port=70000),
        ServerOptions(port=-1),
        ServerOptions(max_workers=0),
    ):
        with pytest.raises(InvalidConfigError):
            serve_memory({"m": _memory()}, bad)
    with pytest.raises(OSError, match="resolve"):
        serve_memory({"m": _memory()}, ServerOptions(host="nonexistent.invalid"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="in use"):
            serve_memory({"m": _memory()}, ServerOptions(port=port))
    hosts = ["127.0.0.1", "localhost"]
    try:
        with socket.socket(socket.AF_INET6) as s6:
            s6.bind(("::1", 0))
        hosts.append("::1")
    except OSError:
        pass  # no IPv6 here
    for host in hosts:
        server, _ = serve_memory({"m": _memory()}, ServerOptions(host=host))
        with server, MemoryClient(server.address, timeout_s=10) as c:
            assert server.address.rsplit(":", 1)[0] == ("[::1]" if host == "::1" else host)
            assert c.health("m").status == mpb.MemoryHealthResponse.SERVING


# ---- `jevmem serve` refuses bad flags at start --------------------------------------


def _serve_refused(*args: str) -> str:
    p = subprocess.run(
        [sys.executable, "-m", "jevmem", "serve", "--port", "0", *args],
        capture_output=True, text=True, timeout=30, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == ""  # never said it was listening
    return lines[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--embedder", "bogus"], "unknown embedder 'bogus'"),
        (["--port", "70000"], "port must be an integer from 0 to 65535"),
        (["--port", "-1"], "port must be an integer from 0 to 65535"),
        (["--max-workers", "0"], "--max-workers must be at least 1"),
        (["--host", "nonexistent.invalid"], "cannot resolve host"),
        (
            ["--memory", "bad!name=x.jvm", "--fixed"],
            "'bad!name' is not a valid memory name: use 1-128",
        ),
        (["--memory", "_lead"], "'_lead' is not a valid memory name"),
    ],
)
def test_serve_refuses_bad_flags_at_start(args: list[str], says: str) -> None:
    embedder = [] if "--embedder" in args else ["--embedder", "hash-64"]
    assert says in _serve_refused(*embedder, *args)


def test_serve_refuses_a_bad_durability_or_a_port_in_use_before_opening_anything(
    tmp_path: Path,
) -> None:
    import socket

    data = tmp_path / "data"
    hash64 = ("--embedder", "hash-64", "--data-dir", str(data))
    assert "--durability bogus" in _serve_refused(*hash64, "--durability", "bogus")
    assert not data.exists()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        assert "in use" in _serve_refused(*hash64, "--port", port)
    assert not data.exists()


def test_serve_skips_data_dir_memories_no_call_could_reach(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import argparse

    from jevmem.remote.cli import add_commands, hosted_memories

    for name in ("good", "bad name"):
        Memory.open(tmp_path / name, HashEmbedder(32), LocalController()).close()
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    args = parser.parse_args(["serve", "--embedder", "hash-32", "--data-dir", str(tmp_path)])
    with caplog.at_level("WARNING", logger="jevmem.remote"):
        memories, _, _ = hosted_memories(args)
    try:
        assert sorted(memories) == ["good"]
        assert "'bad name' is not a valid memory name" in caplog.text
        assert (tmp_path / "bad name" / "MANIFEST").exists()  # left as it was
    finally:
        for m in memories.values():
            m.close()


# ---- refusals raise the in-process error types --------------------------------------


def test_a_refused_call_raises_the_type_the_same_call_raises_in_process() -> None:
    from jevmem.errors import InvalidInputError, NodeNotFoundError
    from jevmem.remote import MemoryServiceError

    served, local = _memory(), _memory()
    for m in (served, local):
        m.add("Lena moved to Lisbon", speaker="Maya", timestamp=1_700_000_000)
    server, _ = serve_memory({"m": served})
    calls: list[tuple[Callable[[Any], object], Callable[[Memory], object], type[Exception]]] = [
        # a time the server parses (the client sends strings as they are)
        (
            lambda c: c.add("m", "x", timestamp="not a date"),
            lambda m: m.add("x", timestamp="not a date"),
            InvalidInputError,
        ),
        (
            lambda c: c.search("m", "x", now="not a date"),
            lambda m: m.search("x", now="not a date"),
            InvalidInputError,
        ),
        (lambda c: c.get("m", 999), lambda m: m.get(999), NodeNotFoundError),
    ]
    with server, MemoryClient(server.address, timeout_s=10) as c:
        before = served.store.to_bytes()
        for remote, in_process, want in calls:
            with pytest.raises(want) as mine:
                in_process(local)
            with pytest.raises(want) as theirs:
                remote(c)
            assert isinstance(theirs.value, MemoryServiceError)
            assert type(theirs.value).__name__ == f"Remote{type(mine.value).__name__}"
            # the same error class for every call of a kind
            with pytest.raises(want) as again:
                remote(c)
            assert type(again.value) is type(theirs.value)
        assert served.store.to_bytes() == before  # nothing written
        # a refusal that is no error of the memory's own stays the service's
        with pytest.raises(MemoryServiceError) as info:
            c.search("no-such-memory", "x")
        assert type(info.value) is MemoryServiceError
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        assert not isinstance(info.value, KeyError | ValueError)


def test_the_client_reads_only_the_error_names_it_knows() -> None:
    from jevmem.errors import InvalidInputError, NodeNotFoundError
    from jevmem.remote.memory_client import ERROR_KEY, MemoryServiceError, service_error

    class Refusal(grpc.RpcError):  # what grpcio raises, made by hand
        def __init__(self, code: grpc.StatusCode, trailing: tuple[tuple[str, str], ...]) -> None:
            self._code, self._trailing = code, trailing

        def code(self) -> grpc.StatusCode:
            return self._code

        def details(self) -> str:
            return "why"

        def trailing_metadata(self) -> Any:
            return self._trailing

    grpc.Call.register(Refusal)  # read as a call, as grpcio's errors are

    def kind(code: grpc.StatusCode, *trailing: tuple[str, str]) -> type[Exception]:
        return type(service_error("Search", "t", Refusal(code, trailing)))

    named = kind(grpc.StatusCode.NOT_FOUND, (ERROR_KEY, "NodeNotFoundError"))
    assert issubclass(named, NodeNotFoundError) and issubclass(named, MemoryServiceError)
    # a name that is no error of the memory's refusals, or none: by the code
    for name in ("SystemExit", "JevmemError", "MemoryServiceError", "__class__", ""):
        assert kind(grpc.StatusCode.NOT_FOUND, (ERROR_KEY, name)) is MemoryServiceError
        assert issubclass(
            kind(grpc.StatusCode.INVALID_ARGUMENT, (ERROR_KEY, name)), InvalidInputError
        )
    assert kind(grpc.StatusCode.UNAVAILABLE) is MemoryServiceError
    assert kind(grpc.StatusCode.INVALID_ARGUMENT).__name__ == "RemoteInvalidInputError"
    # every name the server may send makes an error of both kinds
    from jevmem import errors
    from jevmem.remote.memory_client import REMOTE_ERRORS

    for name in REMOTE_ERRORS:
        refusal = Refusal(grpc.StatusCode.FAILED_PRECONDITION, ((ERROR_KEY, name),))
        got = service_error("Add", "t", refusal)
        assert isinstance(got, getattr(errors, name)) and isinstance(got, MemoryServiceError)
        assert got.code() == grpc.StatusCode.FAILED_PRECONDITION and got.details() == "why"


# ---- the client refuses and converts as in-process -------------------------------------


def test_the_client_takes_values_as_memory_add_and_search_do() -> None:
    # the wire reads "" as no value and JSON writes any key as a string: the
    # client checks and converts first, so a call refused in-process is
    # refused with the same error, and one taken is stored the same way
    from datetime import date, datetime, timezone

    import numpy as np

    from jevmem.errors import InvalidInputError, InvalidTypeError, NodeNotFoundError

    twin = _memory()
    server, _ = serve_memory(opts=ServerOptions(), factory=lambda name: _memory())
    with server, MemoryClient(server.address, timeout_s=10) as c:
        t0 = 1_700_000_000
        for kw in (
            {"speaker": "", "provenance": {"speaker": "Al"}},
            {"provenance": {"turn": 3, "score": 0.5}},
        ):
            assert c.add("m", "I play the cello", timestamp=t0, **kw) == twin.add(
                "I play the cello", timestamp=t0, **kw
            )
        got = [dict(c.get("m", i).provenance) for i in (0, 1)]
        assert got == [twin.get(0).provenance, twin.get(1).provenance]
        assert got == [{"speaker": ""}, {"turn": "3", "score": "0.5"}]
        refused: list[tuple[type[Exception], Callable[[], object], Callable[[], object]]] = [
            (InvalidInputError, lambda: c.add("m", "x", key=""), lambda: twin.add("x", key="")),
            (InvalidTypeError, lambda: c.add("m", None), lambda: twin.add(None)),  # type: ignore[arg-type]
            (
                InvalidTypeError,
                lambda: c.add("m", "x", provenance="x"),
                lambda: twin.add("x", provenance="x"),  # type: ignore[arg-type]
            ),
            (
                InvalidInputError,
                lambda: c.add("m", "x", metadata=["topic"]),
                lambda: twin.add("x", metadata=["topic"]),  # type: ignore[arg-type]
            ),
            (InvalidTypeError, lambda: c.search("m", None), lambda: twin.search(None)),  # type: ignore[arg-type]
            (
                InvalidInputError,
                lambda: c.search("m", "cello", filter={1: 1}),  # type: ignore[dict-item]
                lambda: twin.search("cello", filter={1: 1}),  # type: ignore[dict-item]
            ),
            (NodeNotFoundError, lambda: c.get("m", -1), lambda: twin.get(-1)),
            (NodeNotFoundError, lambda: c.get("m", 2**64), lambda: twin.get(2**64)),
            (InvalidInputError, lambda: c.get("m", "0"), lambda: twin.get("0")),  # type: ignore[arg-type]
            (InvalidInputError, lambda: c.get("m", True), lambda: twin.get(True)),
        ]
        for error, remote, local in refused:
            with pytest.raises(error):
                remote()
            with pytest.raises(error):
                local()
        assert c.stats("m")["nodes"] == twin.stats()["nodes"] == 2
        # times in a filter go as Unix seconds, as in-process
        for bound in (datetime(2020, 1, 1, tzinfo=timezone.utc), date(2020, 1, 1), np.int64(t0)):
            f = {"$timestamp": {"$gte": bound}}
            assert [e.id for e in c.search("m", "cello", filter=f).evidence] == [
                e.id for e in twin.search("cello", filter=f).evidence
            ]

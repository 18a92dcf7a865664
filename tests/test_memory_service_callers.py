"""A MemoryService call whose caller is gone (its deadline passed, or it
cancelled) while it waited for its memory does nothing: its write is not
applied, so a retry cannot store it twice, and it gives back its admission."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest
from support.gated import GatedEmbedder

from jevmem import HashEmbedder, LocalController, Memory
from jevmem._proto.jevmem.v1 import memory_pb2 as pb
from jevmem.remote import MemoryClient, MemoryServiceError, ServerOptions, serve_memory
from jevmem.remote.memory_service import MemoryServicer


def _memory(embedder: HashEmbedder | None = None) -> Memory:
    return Memory(embedder or HashEmbedder(32), controller=LocalController())


class _Aborted(Exception):
    pass


class _Context:
    """A servicer context whose caller is gone: its deadline passed, or it cancelled."""

    def __init__(self, *, remaining: float, active: bool) -> None:
        self.remaining, self.active = remaining, active
        self.code: grpc.StatusCode | None = None

    def time_remaining(self) -> float:
        return self.remaining

    def is_active(self) -> bool:
        return self.active

    def set_trailing_metadata(self, _: Any) -> None:
        pass

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        raise _Aborted(details)


def test_a_write_whose_deadline_passed_while_it_waited_is_not_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gated = GatedEmbedder(once=True)
    m = _memory(gated)
    ended: list[str] = []
    changed = threading.Condition()
    add = MemoryServicer.Add

    def recorded(self: MemoryServicer, request: pb.AddRequest, context: Any) -> Any:
        try:
            return add(self, request, context)
        finally:
            with changed:
                ended.append(request.observation.text)
                changed.notify_all()

    monkeypatch.setattr(MemoryServicer, "Add", recorded)
    server, _ = serve_memory({"m": m}, ServerOptions(), max_calls_per_memory=2)
    with server, MemoryClient(server.address) as c, MemoryClient(server.address) as hasty:
        hasty.timeout_s = 1.0  # long enough to reach the server on a loaded machine
        gated.armed = True
        first = threading.Thread(target=c.add, args=("m", "the first write"))
        first.start()
        try:
            assert gated.entered.wait(30)  # the first write holds the memory
            with pytest.raises(MemoryServiceError) as info:
                hasty.add("m", "a write nobody waits for")
            assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            # it ends at its deadline, while the memory is still busy
            with changed:
                assert changed.wait_for(lambda: "a write nobody waits for" in ended, 30)
            assert not gated.release.is_set()
            # and gave back its admission: one more caller is let in to wait
            with pytest.raises(MemoryServiceError) as info:
                hasty.add("m", "another write nobody waits for")
            assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        finally:
            gated.release.set()
            first.join(30)
        with changed:
            assert changed.wait_for(lambda: len(ended) == 3, 30)
        assert [m.get(i).text for i in range(len(m))] == ["the first write"]
        assert c.stats("m")["nodes"] == 1


@pytest.mark.parametrize(
    ("remaining", "active", "code"),
    [
        (0.0, False, grpc.StatusCode.DEADLINE_EXCEEDED),
        (5.0, False, grpc.StatusCode.CANCELLED),
    ],
)
def test_a_call_whose_caller_left_touches_no_memory(
    remaining: float, active: bool, code: grpc.StatusCode
) -> None:
    # the memory is free: the call takes its lock at once and must still look
    m = _memory()
    m.add("already there")
    servicer = MemoryServicer({"m": m}, factory=lambda _: _memory())
    obs = pb.Observation(text="late")
    calls: list[Any] = [
        lambda ctx: servicer.Add(pb.AddRequest(memory="m", observation=obs), ctx),
        lambda ctx: servicer.AddBatch(pb.AddBatchRequest(memory="m", observations=[obs]), ctx),
        lambda ctx: servicer.Add(pb.AddRequest(memory="new", observation=obs), ctx),
        lambda ctx: servicer.SearchBatch(pb.SearchBatchRequest(memory="m", queries=["x"]), ctx),
    ]
    before = m.store.to_bytes()
    for call in calls:
        ctx = _Context(remaining=remaining, active=active)
        with pytest.raises(_Aborted):
            call(ctx)
        assert ctx.code == code
    assert m.store.to_bytes() == before
    # the first write to a new name left no memory behind
    assert sorted(servicer.memories) == ["m"]
    # a caller still there is served
    here: Any = _Context(remaining=5, active=True)
    ok = servicer.Add(pb.AddRequest(memory="m", observation=obs), here)
    assert ok.id == 1 and len(m) == 2

"""`MemoryClient` takes and refuses what the in-process `Memory` calls do,
with the same typed errors and messages, and the server takes what the
memory takes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from jevmem import HashEmbedder, LocalController, Memory
from jevmem._validate import MAX_K
from jevmem.errors import InvalidInputError
from jevmem.remote import MemoryClient, ServerOptions, serve_memory


def _memory() -> Memory:
    return Memory(HashEmbedder(32), controller=LocalController())


@pytest.fixture()
def pair() -> Iterator[tuple[MemoryClient, Memory, Memory]]:
    """A client of a served memory, the served memory and an in-process twin."""
    served, twin = _memory(), _memory()
    for m in (served, twin):
        m.add_batch([f"note {i} about the cello" for i in range(1200)])
    server, _ = serve_memory({"m": served}, ServerOptions())
    with server, MemoryClient(server.address, timeout_s=30) as c:
        yield c, served, twin


def _refusal(fn: Callable[[], object]) -> tuple[type[Exception], str]:
    with pytest.raises(InvalidInputError) as info:
        fn()
    return type(info.value), str(info.value)


def test_k_above_1000_is_served_as_in_process(
    pair: tuple[MemoryClient, Memory, Memory],
) -> None:
    c, _, twin = pair
    for k in (1001, 1100):
        got = c.search("m", "note cello", k=k, mode="lexical")
        want = twin.search("note cello", k=k, mode="lexical")
        assert len(got.evidence) == len(want.evidence) > 1000
        assert [e.id for e in got.evidence] == [e.id for e in want.evidence]
        assert len(c.search_batch("m", ["note"], k=k, mode="lexical")[0].evidence) > 1000
    # past the limit: refused on both sides, with the same message
    _, mine = _refusal(lambda: twin.search("note", k=MAX_K + 1))
    _, theirs = _refusal(lambda: c.search("m", "note", k=MAX_K + 1))
    assert mine in theirs

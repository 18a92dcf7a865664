"""`MemoryClient` takes and refuses what the in-process `Memory` calls do,
with the same typed errors and messages, and the server takes what the
memory takes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from jevmem import HashEmbedder, LocalController, Memory
from jevmem._validate import MAX_K
from jevmem.errors import InvalidInputError
from jevmem.remote import MemoryClient, ServerOptions, serve_memory
from jevmem.remote.memory_client import RemoteNode


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


def _same_refusal(remote: Callable[[], object], local: Callable[[], object]) -> None:
    mine, theirs = _refusal(local), _refusal(remote)
    assert theirs == mine


def test_scope_metadata_and_filter_are_refused_as_in_process(
    pair: tuple[MemoryClient, Memory, Memory],
) -> None:
    c, served, twin = pair
    # a scope that is no dict: protobuf's map would take pairs and store them
    not_dicts: list[Any] = [[("user", "u1")], {"user": "u2"}.items(), "user"]
    bad_rows: list[dict[str, Any]] = [{"scope": s} for s in not_dicts] + [
        {"scope": {"user": 1}},
        {"scope": {1: "u1"}},
        {"metadata": {1: "a"}},
        {"metadata": {"n": np.int64(1)}},
        {"metadata": {"n": None}},
        {"metadata": [("n", 1)]},
        {"key": 1},
        {"key": ""},
    ]
    bad_reads: list[dict[str, Any]] = [{"scope": s} for s in not_dicts] + [
        {"scope": {"user": 1}},
        {"filter": {"n": np.int64(1)}},
        {"filter": {"n": {1, 2}}},
        {"filter": {"n": {"$in": {1, 2}}}},
        {"filter": {1: 1}},
        {"filter": {"n": float("nan")}},
    ]
    before = served.store.to_bytes()
    for kw in bad_rows:
        _same_refusal(partial(c.add, "m", "x", **kw), partial(twin.add, "x", **kw))
        _same_refusal(
            partial(c.observation, "x", **kw), partial(twin.add_batch, ["x"], **_cols(kw))
        )
    for kw in bad_reads:
        _same_refusal(partial(c.search, "m", "note", **kw), partial(twin.search, "note", **kw))
        _same_refusal(
            partial(c.search_batch, "m", ["note"], **kw), partial(twin.search_batch, ["note"], **kw)
        )
    assert served.store.to_bytes() == before
    # what in-process takes, the client takes: any Mapping, numpy times in a filter
    scope = MappingProxyType({"user": "u1"})
    assert c.add("m", "tea with Bob", scope=scope) == twin.add("tea with Bob", scope=scope)
    assert dict(served.get(1200).scope) == dict(twin.get(1200).scope) == {"user": "u1"}
    flt = {"$timestamp": {"$lte": np.int64(1_700_000_000)}}
    got = c.search("m", "tea", scope=scope, filter=flt).evidence
    assert [e.id for e in got] == [
        e.id for e in twin.search("tea", scope=scope, filter=flt).evidence
    ]


def _cols(kw: dict[str, Any]) -> dict[str, Any]:
    """`Memory.add` keywords as `add_batch` columns of one row."""
    return {
        {"scope": "scopes", "metadata": "metadatas", "key": "keys"}[k]: [v] for k, v in kw.items()
    }


def test_empty_batches_answer_empty_without_a_call() -> None:
    # no server at this address: a call would fail (UNAVAILABLE)
    twin = _memory()
    with MemoryClient("127.0.0.1:1", timeout_s=5) as c:
        assert c.add_batch("m", []) == twin.add_batch([]) == []
        assert c.add_batch("m", ()) == []
        assert c.search_batch("m", []) == twin.search_batch([]) == []
        # the options are checked all the same, as in-process
        for kw in ({"k": 0}, {"mode": None}, {"scope": [("user", "u1")]}):
            _same_refusal(
                partial(c.search_batch, "m", [], **kw), partial(twin.search_batch, [], **kw)
            )


def test_mode_none_is_refused_as_in_process(pair: tuple[MemoryClient, Memory, Memory]) -> None:
    c, _, twin = pair
    # the wire would read None as no mode and run a "full" search
    modes: list[Any] = [None, 1]
    for mode in modes:
        _same_refusal(
            partial(c.search, "m", "note", mode=mode), partial(twin.search, "note", mode=mode)
        )
        _same_refusal(
            partial(c.search_batch, "m", ["note"], mode=mode),
            partial(twin.search_batch, ["note"], mode=mode),
        )
        # (in-process, answer looks for its model first)
        assert _refusal(partial(c.answer, "m", "note", mode=mode)) == _refusal(
            partial(twin.search, "note", mode=mode)
        )


def test_get_returns_the_node_as_memory_get_does(
    pair: tuple[MemoryClient, Memory, Memory],
) -> None:
    c, _, twin = pair
    rows: list[dict[str, Any]] = [
        {},  # no time, no key, no scope, no metadata
        {
            "timestamp": 1_700_000_000,
            "speaker": "Maya",
            "entities": ["Ines"],
            "scope": {"user": "u1"},
            "metadata": {"n": 3, "w": 0.5, "ok": True, "tag": "music"},
            "key": "msg-1",
        },
    ]
    for kw in rows:
        got = c.get("m", c.add("m", "Maya plays the cello", **kw))
        want = twin.get(twin.add("Maya plays the cello", **kw))
        assert isinstance(got, RemoteNode)
        for field in dataclasses.fields(RemoteNode):
            mine, theirs = getattr(got, field.name), getattr(want, field.name)
            assert mine == theirs, field.name
            # plain values of the same types: None for no time or key, not 0 or ""
            assert type(mine) is type(theirs), field.name
        # (1 == True: the types tell a bool from an int)
        typed = {k: type(v) for k, v in got.metadata.items()}
        assert typed == {k: type(v) for k, v in want.metadata.items()}
    assert c.get("m", 1200).timestamp is None and c.get("m", 1200).key is None

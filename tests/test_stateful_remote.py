"""A model-based (stateful) test of the gRPC memory service against in-process `Memory`.

A hypothesis `RuleBasedStateMachine` starts, per example, a
``jevmem.v1.MemoryService`` (`serve_memory`, on 127.0.0.1 and a free port)
hosting one memory, ``"m"``, and builds a *twin*: an in-process `Memory`
made the same way (hash embedder, local controller, the same config). Every
step sends the same operation through `MemoryClient` and to the twin:

- ``add`` / ``add_batch`` (texts from a small vocabulary with unicode,
  timestamps in every accepted form: ints, floats, ISO strings, aware and
  naive datetimes, dates, numpy ints and floats; speakers, provenance,
  entities, scopes, metadata of every value type with edge values, and
  idempotency keys);
- ``search`` / ``search_batch`` (every mode, k, scope, filter, ``now=`` in
  every form) and ``answer`` (System Two is `jevmem.testing.FakeChatServer`
  on loopback, for both sides);
- ``get``, ``stats``, ``health``;
- ``update`` and ``forget`` (by ids, scope, filter): the service has no
  such calls, so they are applied to the served memory and the twin
  directly, between calls, and later remote reads must still agree;
- bad inputs (rejected by the client before any call, or by the server),
  and raw requests only the server can refuse.

Invariants: both sides return the same results (ids, texts, scores to
1e-6, every evidence field, the trace less its timings, nodes and their
typed metadata, stats); a bad input raises on both sides, the remote side a
jevmem error of the in-process class (a `MemoryServiceError` when the server
refused it), and changes nothing on either side; after every step the
served memory's store, derived state and stats equal the twin's.

Known differences that are the service's design are modelled (see
``DOCUMENTED``).
"""

from __future__ import annotations

import gc
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from support.stateful import (
    CONFIG,
    DIM,
    MAX_TS,
    MODES,
    SESSIONS,
    T0,
    search_scopes_of,
    ts_ints,
)

from jevmem import (
    ChatCompletionsClient,
    HashEmbedder,
    InvalidInputError,
    JevmemError,
    LocalController,
    Memory,
)
from jevmem._proto.jevmem.v1 import memory_pb2 as mpb
from jevmem.memory import Mode
from jevmem.remote import MemoryClient, MemoryServiceError, ServerOptions, serve_memory
from jevmem.remote.memory_service import MAX_K, RemoteNode
from jevmem.testing import FakeChatServer


def new_memory() -> Memory:
    return Memory(HashEmbedder(DIM), LocalController(), config=CONFIG)


# ---- vocabulary and strategies (after tests/test_stateful_memory.py) -----------------

SUBJECTS = ("Maya", "Ines", "Bob", "Zoë")
PHRASES = (
    "plays the cello",
    "drinks oat milk in coffee",
    "switched to soy milk in coffee",
    "lives in Lisbon",
    "moved to Porto",
    "likes green tea",
)
TEXTS = [f"{s} {p}" for s in SUBJECTS for p in PHRASES] + [
    "I switched to soy milk",
    "I take oat milk",
    "Zoë drinks café au lait",
    "Ines 🎻 plays the cello",
    "マヤは東京でチェロを弾く",
    "שלום, Maya lives in Lisbon",
    "  Bob likes green tea  ",
    "Maya plays the cello.\n\nBob moved to Porto.",
    "Sam\u200b likes green tea",
    "Maya moved to Porto last week",
    "Bob switched to soy milk yesterday",
    "Sam started the cello in March 2019",
]
QUERIES = (
    "who plays the cello?",
    "what milk does Maya drink now?",
    "where does Bob live",
    "green tea",
    "Zoë café",
    "チェロ",
    "when did Sam start the cello",
    "what happened last week?",
)
USERS = ("u1", "u2", "ü3")
TOPICS = ("work", "home", "música", "")
KEYS = ("k1", "k2", "é🎻")

texts = st.sampled_from(TEXTS)


def _ts_forms(t: int) -> st.SearchStrategy[Any]:
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    return st.sampled_from(
        [
            t,
            float(t) + 0.5,  # floored
            float(t) + 0.999_999,
            np.int64(t),
            np.int32(t),
            np.uint32(t),
            np.float64(t),
            dt,
            dt.replace(tzinfo=None),  # naive: converted the same on both sides
            dt.date(),
            dt.isoformat(),
            dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
            dt.strftime("%Y-%m-%d"),
            dt.astimezone(timezone(timedelta(hours=2))),
            dt.astimezone(timezone(timedelta(hours=-5, minutes=-30))).isoformat(),
        ]
    )


timestamps = st.one_of(
    st.none(),
    ts_ints.flatmap(_ts_forms),
    st.sampled_from([0, -1, -1.5, MAX_TS, -62_135_596_800 + 86_400 * 800, "1970-01-01T00:00:00Z"]),
)
# (an empty speaker travels in the provenance, where in-process keeps it)
speakers = st.one_of(st.none(), st.sampled_from([*SUBJECTS, "", " ", "Zoë 🎻"]))
provenances: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.just({}),
    st.sampled_from(
        [
            {"source": "chat"},
            {"speaker": "Al", "source": "mail"},
            {"ünï": "🎻", "x": ""},
            {"turn": 3, "score": 0.5},  # numbers kept as their text, as in-process
        ]
    ),
)
entity_lists: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.just([]), st.sampled_from([["Maya"], ["Zoë", "Lisbon"], ("Bob",)])
)
scopes = st.one_of(
    st.none(),
    st.just({}),
    st.builds(lambda u: {"user": u}, st.sampled_from(USERS)),
    st.builds(
        lambda u, s: {"user": u, "session": s}, st.sampled_from(USERS), st.sampled_from(SESSIONS)
    ),
    st.builds(
        lambda u, s: {"session": s, "user": u}, st.sampled_from(USERS), st.sampled_from(SESSIONS)
    ),
)
search_scopes = search_scopes_of(USERS)
BIG_INTS = [2**53, 2**53 + 1, 2**63 - 1, -(2**63), -1, 0]
EDGE_FLOATS = [1.0, 2.5, 0.1, -0.0, 5e-324, 1.7976931348623157e308, float(2**53), -1e-300]
meta_values = st.one_of(
    st.sampled_from((*TOPICS, "ünïcødé 🎻", "a\nb", "0", "true")),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from(BIG_INTS),
    st.sampled_from(EDGE_FLOATS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
metadatas = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "topic": st.sampled_from(TOPICS),
            "priority": st.one_of(st.integers(0, 3), st.sampled_from(BIG_INTS + EDGE_FLOATS)),
            "flag": st.booleans(),
            "note": meta_values,
            "ñ🎻": meta_values,
        },
    ),
)
keys = st.one_of(st.none(), st.sampled_from(KEYS))


def _leaf_filters() -> st.SearchStrategy[dict[str, Any]]:
    num = st.sampled_from([0, 1, 1.0, 2, 2.5, 3, 2**53, 2**53 + 1, float(2**53), 2**63 - 1])
    return st.one_of(
        st.builds(lambda t: {"topic": t}, st.sampled_from(TOPICS)),
        st.builds(lambda t: {"topic": {"$ne": t}}, st.sampled_from(TOPICS)),
        st.builds(lambda v: {"priority": v}, num),
        st.builds(lambda a, b: {"priority": {"$gte": a, "$lt": b}}, num, num),
        st.builds(lambda a: {"priority": {"$gt": a}}, num),
        st.builds(lambda xs: {"priority": {"$in": xs}}, st.lists(num, max_size=3)),
        st.builds(lambda xs: {"priority": {"$in": tuple(xs)}}, st.lists(num, max_size=3)),
        st.builds(
            lambda xs: {"topic": {"$nin": xs}}, st.lists(st.sampled_from(TOPICS), max_size=2)
        ),
        st.builds(
            lambda f, b: {f: {"$exists": b}},
            st.sampled_from(["topic", "priority", "flag", "note", "ñ🎻", "$timestamp"]),
            st.booleans(),
        ),
        st.builds(lambda b: {"flag": b}, st.booleans()),
        st.builds(lambda v: {"note": v}, meta_values),
        st.builds(lambda t: {"$timestamp": {"$gte": t}}, ts_ints),
        st.builds(
            lambda t: {
                "$timestamp": {"$lt": datetime.fromtimestamp(t, tz=timezone.utc).isoformat()}
            },
            ts_ints,
        ),
        st.builds(
            lambda t: {"$timestamp": {"$gte": datetime.fromtimestamp(t, tz=timezone.utc)}},
            ts_ints,
        ),
        st.builds(
            lambda t: {"$timestamp": {"$lt": datetime.fromtimestamp(t, tz=timezone.utc).date()}},
            ts_ints,
        ),
        st.builds(lambda t: {"$timestamp": {"$gte": np.int64(t)}}, ts_ints),
    )


filters = st.recursive(
    _leaf_filters(),
    lambda inner: st.one_of(
        st.builds(lambda f: {"$not": f}, inner),
        st.builds(lambda fs: {"$or": fs}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda fs: {"$and": fs}, st.lists(inner, min_size=1, max_size=2)),
    ),
    max_leaves=3,
)
opt_filters = st.one_of(st.none(), st.just({}), filters)
nows = st.one_of(
    st.none(),
    ts_ints,
    ts_ints.map(np.int64),
    ts_ints.map(lambda t: float(t) + 0.25),
    ts_ints.map(lambda t: datetime.fromtimestamp(t, tz=timezone.utc)),
    ts_ints.map(lambda t: datetime.fromtimestamp(t, tz=timezone.utc).replace(tzinfo=None)),
    ts_ints.map(lambda t: datetime.fromtimestamp(t, tz=timezone.utc).date()),
    ts_ints.map(lambda t: datetime.fromtimestamp(t, tz=timezone.utc).isoformat()),
)
ks = st.one_of(st.integers(1, 12), st.just(MAX_K), st.just(np.int64(3)))
row = st.fixed_dictionaries(
    {
        "text": texts,
        "timestamp": timestamps,
        "speaker": speakers,
        "provenance": provenances,
        "entities": entity_lists,
        "scope": scopes,
        "metadata": metadatas,
        "key": keys,
    }
)

#: Differences that are the service's own rules, modelled below:
#: - ``mode=""`` is the client's default and means "full" (in-process it is refused).
DOCUMENTED = ("mode ''",)


# ---- comparing results ------------------------------------------------------------


def _timing(key: str) -> bool:
    return key.endswith("_s") or "elapsed" in key


def _plain(x: Any) -> Any:
    """A trace as it should read after JSON: tuples are lists; timings dropped."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items() if not (isinstance(k, str) and _timing(k))}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def same_result(remote: Any, local: Any) -> None:
    assert remote.query == local.query
    assert [e.id for e in remote.evidence] == [e.id for e in local.evidence], (
        [(e.id, e.score) for e in remote.evidence],
        [(e.id, e.score) for e in local.evidence],
    )
    for r, w in zip(remote.evidence, local.evidence, strict=True):
        assert _close(r.score, w.score), (r, w)
        assert (r.text, r.timestamp, r.provenance, r.time_refs, r.passage) == (
            w.text,
            w.timestamp,
            w.provenance,
            w.time_refs,
            w.passage,
        ), (r, w)
        assert (r.supersedes, r.superseded_by, r.valid_from, r.valid_to) == (
            w.supersedes,
            w.superseded_by,
            w.valid_from,
            w.valid_to,
        ), (r, w)
        assert (r.via is None) == (w.via is None), (r, w)
        if r.via is not None:
            assert (r.via.view, r.via.src, r.via.dst, r.via.from_node) == (
                w.via.view,
                w.via.src,
                w.via.dst,
                w.via.from_node,
            )
            assert _close(r.via.weight, w.via.weight)
    for f in ("sufficiency", "usefulness", "missing", "contradiction"):
        assert _close(getattr(remote, f), getattr(local, f)), f
    assert remote.sufficient == local.sufficient
    assert _plain(remote.trace) == _plain(local.trace)


def _typed(v: Any) -> tuple[str, str]:
    return (type(v).__name__, repr(v))


def same_node(remote: RemoteNode, local: Any) -> None:
    got = (
        remote.id,
        remote.text,
        remote.timestamp,
        remote.provenance,
        remote.entities,
        list(remote.types),
        remote.scope,
        {k: _typed(v) for k, v in remote.metadata.items()},
        remote.key,
    )
    want = (
        local.id,
        local.text,
        local.timestamp,
        dict(local.provenance),
        list(local.entities),
        [float(t) for t in local.types],
        dict(local.scope),
        {k: _typed(v) for k, v in dict(local.metadata).items()},
        local.key,
    )
    assert got == want


def semantic(stats: dict[str, Any]) -> dict[str, Any]:
    """`stats` without sizes in bytes (allocator capacity, not content: the
    served memory's searches run as batches, which size buffers their own way)."""
    return {k: v for k, v in stats.items() if not k.endswith("_bytes")}


def _attempt(fn: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, fn()
    except Exception as exc:  # any type: compared by the caller
        return False, exc


# ---- the machine --------------------------------------------------------------------


class RemoteMachine(RuleBasedStateMachine):
    #: the fake System-Two endpoint (set by the test)
    chat_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.served = new_memory()
        self.twin = new_memory()
        self.s2_server = ChatCompletionsClient(self.chat_url, "fake", max_retries=0)
        self.s2_local = ChatCompletionsClient(self.chat_url, "fake", max_retries=0)
        # a factory too: a write to another name would make one (a refused one must not)
        self.server, self.servicer = serve_memory(
            {"m": self.served},
            ServerOptions(port=0),
            factory=lambda _: new_memory(),
            system_two=self.s2_server,
        )
        #: the server's query-controller calls minus the twin's: concurrent
        #: searches run as one batch, whose rounds are one call for all
        self.query_calls_ahead = 0
        self.client = MemoryClient(self.server.address, timeout_s=20)
        self.next_unknown = 0

    def teardown(self) -> None:
        try:
            self.client.close()
        finally:
            self.server.stop(0)
            self.s2_server.close()
            self.s2_local.close()
            self.served.close()
            self.twin.close()

    # -- helpers

    def state(self) -> Any:
        """What a refused call must leave unchanged, on both sides."""
        return (
            self.served.store.to_bytes(),
            self.twin.store.to_bytes(),
            self.served.derived_state(),
            self.twin.derived_state(),
            semantic(self.served.stats()),
            semantic(self.twin.stats()),
        )

    def both(
        self,
        remote: Callable[[], Any],
        local: Callable[[], Any],
        compare: Callable[[Any, Any], None] | None = None,
    ) -> tuple[bool, Any, Any]:
        """Run the same call through the client and on the twin: both give
        equal results, or both refuse with the same class of jevmem error and
        change nothing."""
        before = self.state()
        r_ok, r = _attempt(remote)
        l_ok, w = _attempt(local)
        if r_ok and l_ok:
            if compare is None:
                assert r == w, (r, w)
            else:
                compare(r, w)
            return True, r, w
        assert not r_ok and not l_ok, f"only one side refused: remote {r!r}, in-process {w!r}"
        self.same_refusal(r, w)
        assert self.state() == before, "a refused call changed a memory"
        return False, r, w

    @staticmethod
    def same_refusal(r: BaseException, w: BaseException) -> None:
        assert isinstance(w, JevmemError), f"in-process raised a non-jevmem error: {w!r}"
        assert isinstance(r, JevmemError), f"the client raised a non-jevmem error: {r!r}"
        assert isinstance(r, type(w)), f"remote {type(r).__mro__[:3]} is not {type(w).__name__}"
        if isinstance(r, MemoryServiceError):
            assert r.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), r

    def refused_remotely(self, remote: Callable[[], Any], cls: type[BaseException]) -> Any:
        before = self.state()
        with pytest.raises(cls) as err:
            remote()
        assert isinstance(err.value, JevmemError), err.value
        assert self.state() == before, "a refused call changed a memory"
        return err.value

    def check_node(self, node_id: Any) -> None:
        self.both(
            lambda: self.client.get("m", node_id),
            lambda: self.twin.get(node_id),
            same_node,
        )

    @staticmethod
    def _local_mode(mode: str) -> Mode:
        # DOCUMENTED: "" is the client's default, "full"
        return cast(Mode, "full" if mode == "" else mode)

    # -- writes

    @initialize(rows=st.lists(row, max_size=12))
    def fill(self, rows: list[dict[str, Any]]) -> None:
        """Start from some observations (a batch), so reads have something to find."""
        if rows:
            self.add_batch(rows)

    @rule(r=row)
    def add(self, r: dict[str, Any]) -> None:
        kw = {k: v for k, v in r.items() if k != "text"}
        ok, got, _ = self.both(
            lambda: self.client.add("m", r["text"], **kw), lambda: self.twin.add(r["text"], **kw)
        )
        if ok:
            self.check_node(got)

    @rule(rows=st.lists(row, min_size=1, max_size=5))
    def add_batch(self, rows: list[dict[str, Any]]) -> None:
        def remote() -> list[int]:
            obs = [
                self.client.observation(r["text"], **{k: v for k, v in r.items() if k != "text"})
                for r in rows
            ]
            return self.client.add_batch("m", obs)

        def local() -> list[int]:
            return self.twin.add_batch(
                [r["text"] for r in rows],
                timestamps=[r["timestamp"] for r in rows],
                speakers=[r["speaker"] for r in rows],
                provenances=[r["provenance"] for r in rows],
                entities=[r["entities"] for r in rows],
                scopes=[r["scope"] for r in rows],
                metadatas=[r["metadata"] for r in rows],
                keys=[r["key"] for r in rows],
            )

        ok, got, _ = self.both(remote, local)
        if ok:
            for i in set(got):
                self.check_node(i)

    @rule()
    def empty_batches(self) -> None:
        # the client answers these itself, as in-process
        self.both(lambda: self.client.add_batch("m", []), lambda: self.twin.add_batch([]))
        self.both(lambda: self.client.search_batch("m", []), lambda: self.twin.search_batch([]))

    @rule(data=st.data(), text=texts, ts=timestamps, speaker=speakers)
    def update_out_of_band(self, data: st.DataObject, text: str, ts: Any, speaker: Any) -> None:
        ids = self.twin.matching_ids()
        if not ids:
            return
        old = data.draw(st.sampled_from(ids))
        got = [m.update(old, text, timestamp=ts, speaker=speaker) for m in (self.served, self.twin)]
        assert got[0] == got[1]
        self.check_node(got[0])

    @rule(data=st.data(), how=st.sampled_from(["ids", "scope", "filter"]))
    def forget_out_of_band(self, data: st.DataObject, how: str) -> None:
        ids = self.twin.matching_ids()
        if how == "ids":
            if not ids:
                return
            gone = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True))
            got = [m.forget(gone) for m in (self.served, self.twin)]
        elif how == "scope":
            scope = data.draw(search_scopes.filter(bool))
            got = [m.forget(scope=scope) for m in (self.served, self.twin)]
        else:
            flt = data.draw(filters)
            got = [m.forget(filter=flt) for m in (self.served, self.twin)]
        assert got[0] == got[1]

    # -- reads

    @rule(
        query=st.sampled_from(QUERIES),
        k=ks,
        mode=st.sampled_from((*MODES, "")),
        scope=search_scopes,
        flt=opt_filters,
        now=nows,
    )
    def search(self, query: str, k: Any, mode: str, scope: Any, flt: Any, now: Any) -> None:
        self.both(
            lambda: self.client.search("m", query, k, mode=mode, scope=scope, filter=flt, now=now),
            lambda: self.twin.search(
                query, k, mode=self._local_mode(mode), scope=scope, filter=flt, now=now
            ),
            same_result,
        )

    @rule(
        queries=st.lists(st.sampled_from(QUERIES), min_size=1, max_size=4).map(tuple)
        | st.lists(st.sampled_from(QUERIES), min_size=1, max_size=4),
        k=ks,
        mode=st.sampled_from(MODES),
        scope=search_scopes,
        flt=opt_filters,
        now=nows,
    )
    def search_batch(
        self, queries: Any, k: Any, mode: Mode, scope: Any, flt: Any, now: Any
    ) -> None:
        def compare(rs: list[Any], ws: list[Any]) -> None:
            assert len(rs) == len(ws)
            for r, w in zip(rs, ws, strict=True):
                same_result(r, w)

        self.both(
            lambda: self.client.search_batch(
                "m", queries, k, mode=mode, scope=scope, filter=flt, now=now
            ),
            lambda: self.twin.search_batch(queries, k, mode=mode, scope=scope, filter=flt, now=now),
            compare,
        )

    @rule(k=st.integers(1001, MAX_K))
    def search_large_k(self, k: int) -> None:
        # the server takes every k the memory takes (an earlier cap was 1000)
        self.both(
            lambda: self.client.search("m", "cello", k, mode="lexical"),
            lambda: self.twin.search("cello", k, mode="lexical"),
            same_result,
        )

    @rule(
        query=st.sampled_from(QUERIES),
        k=st.integers(1, 8),
        mode=st.sampled_from(MODES),
        scope=search_scopes,
        flt=st.one_of(st.none(), filters),
        now=nows,
        abstain=st.sampled_from([None, True, False]),
        below=st.sampled_from([None, 0.0, 0.3, 1.0]),
    )
    def answer(
        self,
        query: str,
        k: int,
        mode: str,
        scope: Any,
        flt: Any,
        now: Any,
        abstain: bool | None,
        below: float | None,
    ) -> None:
        kw: dict[str, Any] = {"mode": mode, "scope": scope, "filter": flt, "now": now}
        local_kw = dict(kw)
        if abstain is not None:
            local_kw["abstain"] = abstain
        if below is not None:
            local_kw["abstain_below"] = below

        def compare(r: Any, w: Any) -> None:
            assert (r.text, r.cited, r.abstained) == (w.text, w.cited, w.abstained)
            same_result(r.search, w.search)
            assert _plain(r.trace) == _plain(w.trace)

        self.both(
            lambda: self.client.answer("m", query, k, abstain=abstain, abstain_below=below, **kw),
            lambda: self.twin.answer(query, k, system_two=self.s2_local, **local_kw),
            compare,
        )

    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        top = int(self.twin.stats()["next_id"])
        # every id ever given (live or forgotten) and a few never given
        node_id = data.draw(st.integers(0, top + 2))
        self.check_node(node_id)

    @rule(
        calls=st.lists(
            st.tuples(st.sampled_from(QUERIES), st.integers(1, 8), st.sampled_from(MODES),
                      search_scopes, opt_filters, nows),
            min_size=2, max_size=6,
        )
    )  # fmt: skip
    def concurrent_searches(self, calls: list[tuple[Any, ...]]) -> None:
        """Searches in flight together (the server answers them as batches)
        give what each gives alone in-process."""
        start = threading.Barrier(len(calls))

        def one(c: tuple[Any, ...]) -> Any:
            q, k, mode, scope, flt, now = c
            start.wait(10)
            return self.client.search("m", q, k, mode=mode, scope=scope, filter=flt, now=now)

        with ThreadPoolExecutor(len(calls)) as pool:
            got = list(pool.map(one, calls))
        before = self.served.stats()["controller_calls_query"]
        for (q, k, mode, scope, flt, now), r in zip(calls, got, strict=True):
            same_result(r, self.twin.search(q, k, mode=mode, scope=scope, filter=flt, now=now))
        assert self.served.stats()["controller_calls_query"] == before
        self.query_calls_ahead = (
            self.served.stats()["controller_calls_query"]
            - self.twin.stats()["controller_calls_query"]
        )

    # -- bad input

    @rule(data=st.data())
    def odd_get(self, data: st.DataObject) -> None:
        ids = self.twin.matching_ids() or [0]
        node_id = data.draw(
            st.one_of(
                st.sampled_from(ids).map(np.int64),
                st.sampled_from(ids).map(np.uint32),
                # refused by the client with the in-process errors
                st.sampled_from([-1, 2**64, "0", True, 1.0]),
            )
        )
        self.check_node(node_id)

    @rule(
        name=st.sampled_from(["fresh", "n2", "Zz.9_-"]),
        bad=st.sampled_from([
            {"text": ""}, {"text": "x", "timestamp": "not a date"},
            {"text": "x", "metadata": {"p": float("nan")}}, {"text": "x", "scope": {"": "u"}},
        ]),
    )  # fmt: skip
    def refused_first_write_makes_no_memory(self, name: str, bad: dict[str, Any]) -> None:
        bad = dict(bad)  # drawn values are shared: never change one
        text = bad.pop("text")
        with pytest.raises(InvalidInputError):
            self.client.add(name, text, **bad)
        with pytest.raises(InvalidInputError):
            self.client.add_batch(name, [self.client.observation("ok", timestamp=T0),
                                         self.client.observation(text, **bad)])  # fmt: skip
        assert self.client.health(name).status == mpb.MemoryHealthResponse.UNKNOWN_MEMORY
        assert set(self.servicer.memories) == {"m"}
        for call in (lambda: self.client.search(name, "cello"), lambda: self.client.stats(name)):
            with pytest.raises(MemoryServiceError) as err:
                call()
            assert err.value.code() == grpc.StatusCode.NOT_FOUND

    @rule(data=st.data())
    def bad_add(self, data: st.DataObject) -> None:
        case: Any = data.draw(
            st.sampled_from(
                [
                    ("", {}),
                    ("  \n", {}),
                    (12, {}),
                    (["Maya plays the cello"], {}),
                    ("Maya\0cello", {}),
                    ("Maya \ud800", {}),
                    ("x", {"timestamp": "not a date"}),
                    ("x", {"timestamp": ""}),
                    ("x", {"timestamp": float("nan")}),
                    ("x", {"timestamp": float("inf")}),
                    ("x", {"timestamp": MAX_TS + 1}),
                    ("x", {"timestamp": np.int64(MAX_TS + 1)}),
                    ("x", {"timestamp": "9999-12-31T23:59:59Z"}),
                    ("x", {"timestamp": True}),
                    ("x", {"timestamp": [T0]}),
                    ("x", {"timestamp": np.datetime64("2020-01-01")}),
                    ("x", {"speaker": 5}),
                    ("x", {"speaker": "Ma\0ya"}),
                    ("x", {"scope": "user=u1"}),
                    ("x", {"scope": {"user": 1}}),
                    ("x", {"scope": {"": "u1"}}),
                    ("x", {"scope": {"user": ""}}),
                    ("x", {"scope": {"$user": "u1"}}),
                    ("x", {"metadata": {"priority": float("nan")}}),
                    ("x", {"metadata": {"priority": float("inf")}}),
                    ("x", {"metadata": {"priority": None}}),
                    ("x", {"metadata": {"priority": [1]}}),
                    ("x", {"metadata": {"priority": 1 << 70}}),
                    ("x", {"metadata": {"priority": np.int64(1)}}),
                    ("x", {"metadata": {"": 1}}),
                    ("x", {"metadata": {"$x": 1}}),
                    ("x", {"key": 7}),
                    ("x", {"provenance": {"speaker": None}}),
                    ("x", {"entities": "Maya"}),
                    ("x", {"entities": ["Maya", 3]}),
                    ("x", {"key": ""}),
                    (None, {}),
                    ("x", {"provenance": "x"}),
                    ("x", {"metadata": ["topic"]}),
                ]
            )
        )
        text, kw = case
        self.both(
            lambda: self.client.add("m", text, **kw),
            lambda: self.twin.add(text, **kw),
        )
        # the same observation among good ones: the whole batch is refused
        good = data.draw(st.lists(row, min_size=1, max_size=2))

        def remote() -> Any:
            obs = [
                self.client.observation(r["text"], **{k: v for k, v in r.items() if k != "text"})
                for r in good
            ]
            return self.client.add_batch("m", [*obs, self.client.observation(text, **kw)])

        def local() -> Any:
            cols = ("timestamp", "speaker", "scope", "metadata", "key", "provenance", "entities")
            col = {c: [r[c] for r in good] + [kw.get(c)] for c in cols}
            return self.twin.add_batch(
                [*(r["text"] for r in good), text],
                timestamps=col["timestamp"],
                speakers=col["speaker"],
                scopes=col["scope"],
                metadatas=col["metadata"],
                keys=col["key"],
                provenances=col["provenance"],
                entities=col["entities"],
            )

        self.both(remote, local)

    @rule(data=st.data())
    def bad_search(self, data: st.DataObject) -> None:
        qcase: Any = data.draw(
            st.sampled_from(
                [
                    ("", {}),
                    ("  ", {}),
                    (None, {}),
                    (5, {}),
                    ("ce\0llo", {}),
                    ("ce\ud800llo", {}),
                    ("cello", {"k": 0}),
                    ("cello", {"k": -1}),
                    ("cello", {"k": True}),
                    ("cello", {"k": 1.5}),
                    ("cello", {"k": 10_001}),
                    ("cello", {"mode": "bogus"}),
                    ("cello", {"mode": "FULL"}),
                    ("cello", {"scope": "u1"}),
                    ("cello", {"scope": {"user": 1}}),
                    ("cello", {"filter": {"p": {"$foo": 1}}}),
                    ("cello", {"filter": []}),
                    ("cello", {"filter": "p"}),
                    ("cello", {"filter": {"p": float("nan")}}),
                    ("cello", {"filter": {"p": float("inf")}}),
                    ("cello", {"filter": {"p": 2**64}}),
                    ("cello", {"filter": {"p": {"$in": 3}}}),
                    ("cello", {"filter": {"$and": {"p": 1}}}),
                    ("cello", {"filter": {"p": np.int64(2)}}),
                    ("cello", {"filter": {"$timestamp": {"$gte": "not a time"}}}),
                    ("cello", {"now": "not a time"}),
                    ("cello", {"now": True}),
                    ("cello", {"now": float("nan")}),
                    ("cello", {"now": MAX_TS + 1}),
                    ("cello", {"now": [T0]}),
                    ("cello", {"filter": {1: 1}}),
                    ("cello", {"filter": {None: 1}}),
                    ("cello", {"filter": {"topic": {2: 3}}}),
                ]
            )
        )
        q, kw = qcase
        batch = data.draw(st.booleans())
        if batch and isinstance(q, str):
            qs = ["cello", q]
            self.both(
                lambda: self.client.search_batch("m", qs, **kw),
                lambda: self.twin.search_batch(qs, **kw),
            )
        else:
            self.both(
                lambda: self.client.search("m", q, **kw),
                lambda: self.twin.search(q, **kw),
            )

    @rule(bad=st.sampled_from([{"abstain_below": float("nan")}, {"abstain_below": 1.5},
                               {"abstain_below": -0.1}, {"k": 0}, {"now": "not a time"}]))  # fmt: skip
    def bad_answer(self, bad: dict[str, Any]) -> None:
        self.both(
            lambda: self.client.answer("m", "who plays the cello?", **bad),
            lambda: self.twin.answer("who plays the cello?", system_two=self.s2_local, **bad),
        )

    @rule(data=st.data())
    def raw_refused(self, data: st.DataObject) -> None:
        """Requests only a hand-made client can send: the server refuses them
        (INVALID_ARGUMENT, an InvalidInputError) and writes nothing."""
        good = mpb.Observation(text="Maya plays the cello", unix_seconds=T0)
        bad_obs = data.draw(
            st.sampled_from(
                [
                    mpb.Observation(text="x", metadata={"p": mpb.MetaValue()}),  # no kind
                    mpb.Observation(text="x", metadata={"p": mpb.MetaValue(number=math.nan)}),
                    mpb.Observation(text="x", time_text="yesterday-ish"),
                    mpb.Observation(text="x", unix_seconds=MAX_TS + 1),
                    mpb.Observation(text="x", unix_seconds=-(2**63)),
                    mpb.Observation(text="x\0y"),
                    mpb.Observation(text=""),
                    mpb.Observation(text="x", scope={"": "u"}),
                    mpb.Observation(text="x", speaker="a\0b"),
                    mpb.Observation(text="x", entities=[""]),
                ]
            )
        )
        stub, md = self.client.stub, self.client.metadata
        calls: list[Callable[[], Any]] = [
            lambda: stub.AddBatch(
                mpb.AddBatchRequest(memory="m", observations=[good, bad_obs]), timeout=10, metadata=md
            ),
            lambda: stub.Add(mpb.AddRequest(memory="m", observation=bad_obs), timeout=10, metadata=md),
            lambda: stub.Add(mpb.AddRequest(memory="m"), timeout=10, metadata=md),
            lambda: stub.Search(
                mpb.SearchRequest(
                    memory="m", query="cello", options=mpb.SearchOptions(filter_json="[1, 2")
                ),
                timeout=10,
                metadata=md,
            ),
            lambda: stub.Search(
                mpb.SearchRequest(
                    memory="m", query="cello", options=mpb.SearchOptions(now_text="soonish")
                ),
                timeout=10,
                metadata=md,
            ),
            lambda: stub.SearchBatch(
                mpb.SearchBatchRequest(
                    memory="m",
                    queries=["cello"],
                    options=mpb.SearchOptions(now_unix_seconds=-(2**63)),
                ),
                timeout=10,
                metadata=md,
            ),
        ]  # fmt: skip
        call = data.draw(st.sampled_from(calls))
        before = self.state()
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
        assert self.state() == before, "a refused call changed the served memory"

    # -- after every step

    @invariant()
    def served_equals_twin(self) -> None:
        assert self.served.store.to_bytes() == self.twin.store.to_bytes()
        assert self.served.derived_state() == self.twin.derived_state()
        want = semantic(json.loads(json.dumps(self.twin.stats())))
        want["controller_calls_query"] += self.query_calls_ahead
        assert semantic(self.client.stats("m")) == want
        h = self.client.health("m")
        assert h.status == mpb.MemoryHealthResponse.SERVING and h.nodes == len(self.twin)


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeChatServer]:
    with FakeChatServer() as s:
        yield s


def test_memory_service_behaves_like_the_in_process_memory(chat: FakeChatServer) -> None:
    RemoteMachine.chat_url = chat.base_url
    before = threading.active_count()
    run_state_machine_as_test(
        RemoteMachine,
        settings=settings(
            # a longer hunt: JEVMEM_STATEFUL_EXAMPLES=500 pytest tests/test_stateful_remote.py
            max_examples=int(os.environ.get("JEVMEM_STATEFUL_EXAMPLES", "40")),
            stateful_step_count=25,
            deadline=None,
            database=None,  # nothing written into the checkout
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )
    # servers, channels and their worker threads are gone once collected
    # (grpc may keep a few threads of its own)
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > before + 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before + 4, [t.name for t in threading.enumerate()]

"""A model-based (stateful) test of the public `jevmem.Memory` API.

A hypothesis `RuleBasedStateMachine` applies random sequences of adds,
batches, updates, forgets (by ids, scope and filter), bad inputs, save/load
round trips and (for a durable memory) close/reopen, and after every step
compares the memory with a plain Python model: the live ids and each node's
text, speaker, scope, metadata, key and timestamp; `list` pages and
`matching_ids`; `stats`; the supersedes links (the controller may add its
own at write time; `forget` bridges a removed version's neighbours);
`supersedes`, `superseded_by`, `history` and `validity`.

Every operation is also applied to a *twin*: an in-memory Memory that is
never saved, loaded or reopened. The two are deterministic (hash embedder,
local controller), so they must answer every search the same way; a save/load
or close/reopen that loses or changes any state shows up as a divergence.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
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

import jevmem
from jevmem import (
    DurabilityError,
    HashEmbedder,
    InvalidInputError,
    JevmemError,
    LocalController,
    Memory,
    NodeNotFoundError,
)
from jevmem.memory import Mode

SUBJECTS = ("Maya", "Ines", "Bob", "Sam")
PHRASES = (
    "plays the cello",
    "drinks oat milk in coffee",
    "switched to soy milk in coffee",
    "lives in Lisbon",
    "moved to Porto",
    "likes green tea",
    "works at the lab",
    "never drinks coffee",
)
TEXTS = [f"{s} {p}" for s in SUBJECTS for p in PHRASES] + [
    "I switched to soy milk",
    "I take oat milk",
    "the lab moved to Porto",
    "Zoë drinks café au lait",
    "Ines 🎻 plays the cello",
]
#: Texts that name a time: a node's validity starts at the time its text
#: names (its event time), not its observation time.
TIME_TEXTS = [
    "Maya moved to Porto last week",
    "Bob switched to soy milk yesterday",
    "Sam started the cello in March 2019",
]
TEXTS += TIME_TEXTS
QUERIES = (
    "who plays the cello?",
    "what milk does Maya drink?",
    "where does Sam live",
    "green tea",
    "lab Porto",
    "coffee",
)
USERS = ("u1", "u2")
TOPICS = ("work", "home", "music")
KEYS = ("k1", "k2", "k3")


class Flaky:
    """The local controller, made to fail once on a write round of one
    purpose ("typing", "relations" or "consolidation") when armed."""

    def __init__(self) -> None:
        self.inner = LocalController()
        self.name = self.inner.name
        self.fail_on: str | None = None

    def decide(self, requests: Any, **kw: Any) -> Any:
        if self.fail_on is not None and any(r.purpose == self.fail_on for r in requests):
            self.fail_on = None
            raise JevmemError("controller down (armed by the test)")
        return self.inner.decide(requests, **kw)


def new_memory() -> Memory:
    return Memory(HashEmbedder(DIM), Flaky(), config=CONFIG)


# ---- strategies -----------------------------------------------------------------

texts = st.sampled_from(TEXTS)


def _ts_forms(t: int) -> st.SearchStrategy[Any]:
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    return st.sampled_from(
        [
            t,
            float(t) + 0.5,  # floored
            dt,
            dt.isoformat(),
            dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
            dt.astimezone(timezone(timedelta(hours=2))),
        ]
    )


# (the value given, the unix seconds the model expects)
timestamps = st.one_of(
    st.just((None, None)),
    ts_ints.flatmap(lambda t: _ts_forms(t).map(lambda v: (v, t))),
)
speakers = st.one_of(st.none(), st.sampled_from(SUBJECTS), st.just(""))
scopes = st.one_of(
    st.none(),
    st.builds(lambda u: {"user": u}, st.sampled_from(USERS)),
    st.builds(
        lambda u, s: {"user": u, "session": s}, st.sampled_from(USERS), st.sampled_from(SESSIONS)
    ),
    # the same scope, its pairs in the other order (keys live in the scope, not its order)
    st.builds(
        lambda u, s: {"session": s, "user": u}, st.sampled_from(USERS), st.sampled_from(SESSIONS)
    ),
)
search_scopes = search_scopes_of(USERS)
priorities = st.one_of(
    st.integers(min_value=0, max_value=3),
    st.sampled_from([1.0, 2.5, 0.0, 2**53 + 1, float(2**53), -(2**63), 2**63 - 1]),
)
metadatas = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "topic": st.sampled_from(TOPICS),
            "priority": priorities,
            "flag": st.booleans(),
        },
    ),
)
keys = st.one_of(st.none(), st.sampled_from(KEYS))


def _leaf_filters() -> st.SearchStrategy[dict[str, Any]]:
    num = st.sampled_from([0, 1, 1.0, 2, 2.5, 3, 2**53, 2**53 + 1, float(2**53)])
    return st.one_of(
        st.builds(lambda t: {"topic": t}, st.sampled_from(TOPICS)),
        st.builds(lambda t: {"topic": {"$ne": t}}, st.sampled_from(TOPICS)),
        st.builds(lambda v: {"priority": v}, num),
        st.builds(lambda a, b: {"priority": {"$gte": a, "$lt": b}}, num, num),
        st.builds(lambda a: {"priority": {"$gt": a}}, num),
        st.builds(lambda xs: {"priority": {"$in": xs}}, st.lists(num, max_size=3)),
        st.builds(
            lambda xs: {"topic": {"$nin": xs}}, st.lists(st.sampled_from(TOPICS), max_size=2)
        ),
        st.builds(
            lambda f, b: {f: {"$exists": b}},
            st.sampled_from(["topic", "priority", "flag", "$timestamp"]),
            st.booleans(),
        ),
        st.builds(lambda b: {"flag": b}, st.booleans()),
        st.builds(lambda t: {"$timestamp": {"$gte": t}}, ts_ints),
        st.builds(
            lambda t: {
                "$timestamp": {"$lt": datetime.fromtimestamp(t, tz=timezone.utc).isoformat()}
            },
            ts_ints,
        ),
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
opt_filters = st.one_of(st.none(), filters)
row = st.fixed_dictionaries(
    {
        "text": texts,
        "ts": timestamps,
        "speaker": speakers,
        "scope": scopes,
        "metadata": metadatas,
        "key": keys,
    }
)
columns = st.sets(st.sampled_from(["timestamps", "speakers", "scopes", "metadatas", "keys"]))


def rows_strategy(lo: int, hi: int) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(row, min_size=lo, max_size=hi)


# ---- the reference model ----------------------------------------------------------


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_num(a) and _is_num(b):
        return bool(a == b)  # exact, as Python compares an int and a float
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False


def _to_ts(v: Any) -> Any:
    if isinstance(v, str):
        return int(datetime.fromisoformat(v).timestamp())
    return v


def _field_holds(present: bool, value: Any, cond: Any, is_ts: bool) -> bool:
    if isinstance(cond, dict):
        for op, arg in cond.items():
            if is_ts and op != "$exists":
                arg = [_to_ts(x) for x in arg] if isinstance(arg, list) else _to_ts(arg)
            if op == "$eq":
                ok = present and _eq(value, arg)
            elif op == "$ne":
                ok = not (present and _eq(value, arg))
            elif op == "$in":
                ok = present and any(_eq(value, x) for x in arg)
            elif op == "$nin":
                ok = not (present and any(_eq(value, x) for x in arg))
            elif op == "$exists":
                ok = present == arg
            else:
                if not (present and _is_num(value)):
                    ok = False
                else:
                    ok = {
                        "$gt": value > arg,
                        "$gte": value >= arg,
                        "$lt": value < arg,
                        "$lte": value <= arg,
                    }[op]
            if not ok:
                return False
        return True
    if is_ts:
        cond = _to_ts(cond)
    return present and _eq(value, cond)


def filter_holds(node: dict[str, Any], f: dict[str, Any]) -> bool:
    for k, v in f.items():
        if k == "$and":
            ok = all(filter_holds(node, x) for x in v)
        elif k == "$or":
            ok = any(filter_holds(node, x) for x in v)
        elif k == "$not":
            ok = not filter_holds(node, v)
        elif k == "$timestamp":
            ts = node["timestamp"]
            ok = _field_holds(ts is not None, ts, v, True)
        else:
            md = node["metadata"]
            ok = _field_holds(k in md, md.get(k), v, False)
        if not ok:
            return False
    return True


def scope_sees(search: dict[str, str] | None, node_scope: dict[str, str]) -> bool:
    if not search:
        return True
    return all(node_scope.get(k) == v for k, v in search.items())


def reachable(start: int, links: set[tuple[int, int]]) -> set[int]:
    """Every node ``start`` supersedes, transitively."""
    out: set[int] = set()
    todo = [start]
    while todo:
        x = todo.pop()
        for new, old in links:
            if new == x and old not in out:
                out.add(old)
                todo.append(old)
    return out


def bridged(links: set[tuple[int, int]], gone: set[int]) -> set[tuple[int, int]]:
    """The links after forgetting ``gone``: the survivors' own links plus,
    for each survivor, a link to every survivor it reached through removed
    nodes only (`MemoryStore.forget`)."""
    keep = {(a, b) for a, b in links if a not in gone and b not in gone}
    survivors = {x for link in links for x in link} - gone
    for s in survivors:
        seen: set[int] = set()
        todo = [b for a, b in links if a == s and b in gone]
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            for a, b in links:
                if a == x:
                    if b in gone:
                        todo.append(b)
                    else:
                        keep.add((s, b))
    return keep


def event_time_of(node: dict[str, Any]) -> int | None:
    """When a node's fact began: the latest time its text names that starts
    at or before its observation (grounded there); else that observation time."""
    from jevmem.temporal import event_time, ground

    ts = node["timestamp"]
    return event_time(ts, ground(node["text"], ts) if ts is not None else [])


def bad_add_kwargs() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("empty text", {"text": ""}),
        ("blank text", {"text": "  \n"}),
        ("None text", {"text": None}),
        ("int text", {"text": 12}),
        ("list text", {"text": ["Maya plays the cello"]}),
        ("NUL text", {"text": "Maya\0cello"}),
        ("surrogate text", {"text": "Maya \ud800"}),
        ("bad ts string", {"timestamp": "not a date"}),
        ("nan ts", {"timestamp": float("nan")}),
        ("inf ts", {"timestamp": float("inf")}),
        ("ts past range", {"timestamp": MAX_TS + 1}),
        ("bool ts", {"timestamp": True}),
        ("list ts", {"timestamp": [T0]}),
        ("int speaker", {"speaker": 5}),
        ("NUL speaker", {"speaker": "Ma\0ya"}),
        ("str scope", {"scope": "user=u1"}),
        ("int scope value", {"scope": {"user": 1}}),
        ("empty scope key", {"scope": {"": "u1"}}),
        ("empty scope value", {"scope": {"user": ""}}),
        ("$ scope key", {"scope": {"$user": "u1"}}),
        ("nan metadata", {"metadata": {"priority": float("nan")}}),
        ("None metadata", {"metadata": {"priority": None}}),
        ("list metadata", {"metadata": {"priority": [1]}}),
        ("huge int metadata", {"metadata": {"priority": 1 << 70}}),
        ("metadata list", {"metadata": ["topic"]}),
        ("empty key", {"key": ""}),
        ("int key", {"key": 7}),
        ("provenance str", {"provenance": "speaker=Maya"}),
        ("provenance int value", {"provenance": {"speaker": None}}),
        ("entities str", {"entities": "Maya"}),
        ("embedding wrong dim", {"embedding": [0.1] * (DIM - 1)}),
        ("embedding nan", {"embedding": [float("nan")] * DIM}),
        ("over-long text", {}),  # the text is made per memory (its max_text_bytes)
    ]


def semantic_stats(m: Memory) -> dict[str, Any]:
    """`stats` without sizes in bytes (allocator capacity, not content) and
    without the durable log position."""
    return {
        k: v for k, v in m.stats().items() if not k.endswith("_bytes") and k != "checkpoint_seq"
    }


# ---- the machine --------------------------------------------------------------------


class MemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="jevmem-stateful-"))
        self.m: Memory | None = None
        self.twin = new_memory()
        self.durable = False
        self.dir: Path | None = None
        # id -> dict(text, speaker, scope, metadata, key, timestamp)
        self.nodes: dict[int, dict[str, Any]] = {}
        self.links: set[tuple[int, int]] = set()
        self.max_id = -1
        self.saves = 0

    # -- setup / teardown

    @initialize(
        durable=st.booleans(),
        rows=rows_strategy(0, 12),
        columns=columns,
        checkpoint_every=st.sampled_from([0, 1, 3, 20_000]),
        durability=st.sampled_from(["sync", "none", "interval:50"]),
    )
    def start(
        self,
        durable: bool,
        rows: list[dict[str, Any]],
        columns: set[str],
        checkpoint_every: int,
        durability: str,
    ) -> None:
        self.durable = durable
        self.open_kw: dict[str, Any] = {
            "checkpoint_every": checkpoint_every,
            "durability": durability,
        }
        if durable:
            self.dir = self.tmp / "mem"
            self.m = Memory.open(
                self.dir, HashEmbedder(DIM), Flaky(), config=CONFIG, **self.open_kw
            )
        else:
            self.m = new_memory()
        self.add_batch(rows, columns)

    def teardown(self) -> None:
        try:
            if self.m is not None:
                self.m.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def mem(self) -> Memory:
        assert self.m is not None
        return self.m

    # -- helpers

    def both(self, fn: Any) -> Any:
        """Apply ``fn`` to the memory and its twin; they must agree."""
        outs: list[tuple[bool, Any]] = []
        for m in (self.mem, self.twin):
            try:
                outs.append((True, fn(m)))
            except JevmemError as exc:
                outs.append((False, exc))
        (ok, got), (twin_ok, twin) = outs
        if not ok or not twin_ok:
            assert (ok, type(got)) == (twin_ok, type(twin)), (got, twin)
            raise got
        assert got == twin, (got, twin)
        return got

    def fingerprint(self, failed_write: bool = False) -> Any:
        """What a refused call must leave unchanged. A write that failed half
        way (its controller failed) may have spent ids ("its ids are not given
        again") and counted its controller calls; nothing else."""
        m = self.mem
        ids = m.matching_ids()
        spent = ("next_id", "ops_applied", "controller_calls_write", "controller_calls_query")
        return (
            None if failed_write else self.twin.store.to_bytes(),
            m.derived_state(),
            [m.validity(i) for i in ids],
            [
                sorted((e.src, e.dst, e.view, round(e.weight, 6)) for e in m.neighbors(i))
                for i in ids
            ],
            ids,
            [
                (
                    n.id,
                    n.text,
                    n.timestamp,
                    dict(n.provenance),
                    dict(n.scope),
                    dict(n.metadata),
                    n.key,
                )
                for n in (m.get(i) for i in m.matching_ids())
            ],
            sorted((s.new, s.old, s.weight, s.origin) for s in m.store.supersedes_links()),
            {k: v for k, v in semantic_stats(m).items() if k not in spent},
        )

    def expect_error(self, call: Any, exc: type[BaseException] = JevmemError) -> None:
        before = self.fingerprint()
        for target in (self.mem, self.twin):
            with pytest.raises(exc):
                call(target)
        after = self.fingerprint()
        assert after == before

    def note_links_after_write(self, new_ids: list[int], rule: set[tuple[int, int]]) -> None:
        got = {(s.new, s.old) for s in self.mem.store.supersedes_links()}
        expected_at_least = self.links | rule
        assert expected_at_least <= got, expected_at_least - got
        for new, old in got - expected_at_least:
            # a controller link runs from a node this write made to an earlier one
            assert new in new_ids and old < new, (new, old, new_ids)
        self.links = got

    def model_ids(self, scope: Any = None, flt: Any = None) -> list[int]:
        return sorted(
            i
            for i, n in self.nodes.items()
            if scope_sees(scope, n["scope"]) and (flt is None or filter_holds(n, flt))
        )

    def record_add(self, got: list[int], rows: list[dict[str, Any]]) -> list[int]:
        """Check the ids an add_batch returned against the model and record the new nodes."""
        fresh: list[int] = []
        batch_keys: dict[tuple[frozenset[Any], str], int] = {}
        held = {
            (frozenset(n["scope"].items()), n["key"]): i
            for i, n in self.nodes.items()
            if n["key"] is not None
        }
        for gid, row in zip(got, rows, strict=True):
            k = row["key"]
            ident = None if k is None else (frozenset((row["scope"] or {}).items()), k)
            if ident is not None and ident in held:
                assert gid == held[ident], (gid, held[ident], row)
                continue
            if ident is not None and ident in batch_keys:
                assert gid == batch_keys[ident], (gid, batch_keys[ident], row)
                continue
            assert gid > self.max_id, (gid, self.max_id)
            self.max_id = gid
            fresh.append(gid)
            if ident is not None:
                batch_keys[ident] = gid
            self.nodes[gid] = {
                "text": row["text"],
                "speaker": row["speaker"],
                "scope": dict(row["scope"] or {}),
                "metadata": dict(row["metadata"] or {}),
                "key": k,
                "timestamp": row["ts"],
            }
        return fresh

    # -- writes

    @rule(
        text=texts,
        ts=timestamps,
        speaker=speakers,
        scope=scopes,
        metadata=metadatas,
        key=keys,
    )
    def add(self, text: str, ts: Any, speaker: Any, scope: Any, metadata: Any, key: Any) -> None:
        given, unix = ts
        kw = {
            "timestamp": given,
            "speaker": speaker,
            "scope": scope,
            "metadata": metadata,
            "key": key,
        }
        nid = self.both(lambda m: m.add(text, **kw))
        row = {
            "text": text,
            "speaker": speaker,
            "scope": scope,
            "metadata": metadata,
            "key": key,
            "ts": unix,
        }
        fresh = self.record_add([nid], [row])
        self.note_links_after_write(fresh, set())

    @rule(rows=rows_strategy(0, 5), columns=columns)
    def add_batch(self, rows: list[dict[str, Any]], columns: set[str]) -> None:
        # a column left out is all None
        for col, field in (
            ("timestamps", "ts"),
            ("speakers", "speaker"),
            ("scopes", "scope"),
            ("metadatas", "metadata"),
            ("keys", "key"),
        ):
            if col not in columns:
                for r in rows:
                    r[field] = (None, None) if field == "ts" else None
        kw: dict[str, Any] = {}
        if "timestamps" in columns:
            kw["timestamps"] = [r["ts"][0] for r in rows]
        if "speakers" in columns:
            kw["speakers"] = [r["speaker"] for r in rows]
        if "scopes" in columns:
            kw["scopes"] = [r["scope"] for r in rows]
        if "metadatas" in columns:
            kw["metadatas"] = [r["metadata"] for r in rows]
        if "keys" in columns:
            kw["keys"] = [r["key"] for r in rows]
        got = self.both(lambda m: m.add_batch([r["text"] for r in rows], **kw))
        assert len(got) == len(rows)
        for r in rows:
            r["ts"] = r["ts"][1]
        fresh = self.record_add(got, rows)
        self.note_links_after_write(fresh, set())

    @precondition(lambda self: bool(self.nodes))
    @rule(
        data=st.data(),
        text=texts,
        ts=timestamps,
        speaker=st.one_of(st.none(), st.sampled_from(SUBJECTS)),
    )
    def update(self, data: st.DataObject, text: str, ts: Any, speaker: Any) -> None:
        old = data.draw(st.sampled_from(sorted(self.nodes)), label="old")
        self.update_one(old, text, ts, speaker)

    def update_one(self, old: int, text: str, ts: Any, speaker: Any) -> None:
        given, unix = ts
        new = self.both(lambda m: m.update(old, text, timestamp=given, speaker=speaker))
        assert new > self.max_id
        self.max_id = new
        o = self.nodes[old]
        self.nodes[new] = {
            "text": text,
            "speaker": speaker if speaker is not None else o["speaker"],
            "scope": dict(o["scope"]),
            "metadata": dict(o["metadata"]),
            "key": None,
            "timestamp": unix,
        }
        self.note_links_after_write([new], {(new, old)})
        assert old in self.mem.supersedes(new)

    @rule(rows=rows_strategy(3, 8), columns=columns)
    def add_more(self, rows: list[dict[str, Any]], columns: set[str]) -> None:
        self.add_batch(rows, columns)

    @rule(
        rows=rows_strategy(1, 6),
        columns=columns,
        fail_on=st.sampled_from(["typing", "relations", "consolidation"]),
        data=st.data(),
    )
    def failed_write(
        self, rows: list[dict[str, Any]], columns: set[str], fail_on: str, data: st.DataObject
    ) -> None:
        """A write whose controller fails raises a jevmem error and leaves
        the memory as it was (a round that is not asked writes normally)."""
        for m in (self.mem, self.twin):
            m.controller.fail_on = fail_on  # type: ignore[attr-defined]
        update = bool(self.nodes) and data.draw(st.booleans(), label="update")
        before = self.fingerprint(failed_write=True)
        try:
            if update:
                old = data.draw(st.sampled_from(sorted(self.nodes)), label="old")
                self.update_one(old, rows[0]["text"], rows[0]["ts"], None)
            else:
                self.add_batch(rows, columns)
            event(f"failed_write on {fail_on}: round not asked")
        except JevmemError as exc:
            event(f"failed_write on {fail_on}: refused")
            assert "armed by the test" in str(exc)
            assert self.fingerprint(failed_write=True) == before
        finally:
            for m in (self.mem, self.twin):
                m.controller.fail_on = None  # type: ignore[attr-defined]

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data(), text=texts, ts=timestamps)
    def update_newest(self, data: st.DataObject, text: str, ts: Any) -> None:
        """Update the newest version of a chain (the common case: chains grow)."""
        heads = sorted(i for i in self.nodes if not any(b == i for _, b in self.links))
        self.update_one(heads[-1] if heads else max(self.nodes), text, ts, None)

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data())
    def idempotent_repeat(self, data: st.DataObject) -> None:
        """Re-adding a held key in its scope (any text) stores nothing."""
        keyed = [i for i, n in self.nodes.items() if n["key"] is not None]
        if not keyed:
            return
        i = data.draw(st.sampled_from(sorted(keyed)), label="keyed")
        n = self.nodes[i]
        text = data.draw(texts, label="text")
        before = self.fingerprint()
        got = self.both(lambda m: m.add(text, scope=n["scope"] or None, key=n["key"]))
        assert got == i
        assert self.fingerprint() == before

    # -- forget

    def do_forget(self, call: Any, gone: list[int]) -> None:
        n = self.both(call)
        assert n == len(gone), (n, gone)
        gone_set = set(gone)
        for g in gone:
            del self.nodes[g]
        self.links = bridged(self.links, gone_set)
        got = {(s.new, s.old) for s in self.mem.store.supersedes_links()}
        assert got == self.links, got ^ self.links

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data())
    def forget_ids(self, data: st.DataObject) -> None:
        ids = data.draw(
            st.lists(st.sampled_from(sorted(self.nodes)), min_size=1, max_size=4, unique=True)
        )
        form = data.draw(st.sampled_from(["int", "list", "tuple", "generator", "numpy"]))
        if form == "int" and len(ids) > 1:
            form = "list"

        def arg() -> Any:
            forms: dict[str, Callable[[], Any]] = {
                "int": lambda: ids[0],
                "list": lambda: list(ids),
                "tuple": lambda: tuple(ids),
                "generator": lambda: (i for i in ids),
                "numpy": lambda: np.array(ids, dtype=np.int64),
            }
            return forms[form]()

        self.do_forget(lambda m: m.forget(arg()), ids)

    @rule(scope=search_scopes, flt=opt_filters)
    def forget_selection(self, scope: Any, flt: Any) -> None:
        from jevmem.plane.filters import holds_no_condition

        if scope is None and flt is None:
            return
        if (not scope) and (flt is None or holds_no_condition(flt)):
            self.expect_error(lambda m: m.forget(scope=scope, filter=flt), InvalidInputError)
            return
        gone = self.model_ids(scope, flt)
        self.do_forget(lambda m: m.forget(scope=scope, filter=flt), gone)

    # -- bad inputs

    @rule(kind=st.sampled_from(["add", "batch", "update", "forget", "reads"]), data=st.data())
    def bad_input(self, kind: str, data: st.DataObject) -> None:
        """A refused call: a typed jevmem error, and the memory as it was."""
        getattr(self, f"bad_{kind}")(data)

    def bad_add(self, data: st.DataObject) -> None:
        cases = bad_add_kwargs()
        cases[-1] = ("over-long text", {"text": "x" * (self.mem.store.max_text_bytes + 1)})
        _name, bad = data.draw(st.sampled_from(cases), label="bad")
        kw = {"text": "Maya plays the cello", **bad}
        text = kw.pop("text")
        self.expect_error(lambda m: m.add(text, **kw))
        # in a batch after a good row: all or nothing
        cols = {
            "timestamp": "timestamps",
            "speaker": "speakers",
            "scope": "scopes",
            "metadata": "metadatas",
            "key": "keys",
            "provenance": "provenances",
            "entities": "entities",
        }
        if "embedding" in bad:
            return
        bkw = {cols[k]: [None, v] for k, v in kw.items()}
        self.expect_error(lambda m: m.add_batch(["Bob likes green tea", text], **bkw))
        # a held key with a bad attribute is refused too
        keyed = [(i, n) for i, n in self.nodes.items() if n["key"] is not None]
        if keyed and "key" not in bad and "scope" not in bad:
            _, n = keyed[0]
            self.expect_error(lambda m: m.add(text, scope=n["scope"] or None, key=n["key"], **kw))

    def bad_batch(self, data: st.DataObject) -> None:
        which = data.draw(st.sampled_from(["str", "lengths", "set", "scopes-length", "iterator"]))
        call = {
            "str": lambda m: m.add_batch("Maya plays the cello"),
            "lengths": lambda m: m.add_batch(["a b", "c d"], timestamps=[T0]),
            "set": lambda m: m.add_batch(["a b"], keys={"k1"}),
            "scopes-length": lambda m: m.add_batch(["a b"], scopes=[{"user": "u1"}, None]),
            "iterator": lambda m: m.add_batch(iter(["a b"])),
        }[which]
        self.expect_error(call)

    def bad_update(self, data: st.DataObject) -> None:
        live = sorted(self.nodes)
        unknown = self.max_id + 1 + data.draw(st.integers(0, 3))
        cases: list[tuple[Any, type[BaseException]]] = [
            (lambda m: m.update(unknown, "Maya plays the cello"), NodeNotFoundError),
            (lambda m: m.update(-1, "Maya plays the cello"), NodeNotFoundError),
            (lambda m: m.update("0", "Maya plays the cello"), InvalidInputError),
            (lambda m: m.update(1.0, "Maya plays the cello"), InvalidInputError),
            (lambda m: m.update(True, "Maya plays the cello"), InvalidInputError),
            (lambda m: m.update(None, "Maya plays the cello"), InvalidInputError),
        ]
        if live:
            i = data.draw(st.sampled_from(live))
            cases += [
                (lambda m: m.update(i, ""), InvalidInputError),
                (lambda m: m.update(i, None), InvalidInputError),
                (lambda m: m.update(i, "x", timestamp="never"), InvalidInputError),
                (lambda m: m.update(i, "x", speaker=3), InvalidInputError),
                (lambda m: m.update(i, "x", provenance="p"), InvalidInputError),
                (lambda m: m.update(i, "x", embedding=[1.0]), InvalidInputError),
            ]
        forgotten = [j for j in range(self.max_id + 1) if j not in self.nodes]
        if forgotten:
            j = data.draw(st.sampled_from(forgotten))
            cases.append((lambda m: m.update(j, "Maya plays the cello"), NodeNotFoundError))
        call, exc = data.draw(st.sampled_from(cases))
        self.expect_error(call, exc)

    def bad_forget(self, data: st.DataObject) -> None:
        live = sorted(self.nodes)
        unknown = self.max_id + 1
        cases: list[Any] = [
            lambda m: m.forget(),
            lambda m: m.forget([0], scope={"user": "u1"}),
            lambda m: m.forget(scope={}),
            lambda m: m.forget(filter={}),
            lambda m: m.forget(filter={"$and": []}),
            lambda m: m.forget(filter={"tag": {"$nin": []}}),
            lambda m: m.forget(scope={}, filter={"$or": [{}]}),
            lambda m: m.forget("1"),
            lambda m: m.forget(1.5),
            lambda m: m.forget(True),
            lambda m: m.forget([unknown]),
            lambda m: m.forget([None]),
            lambda m: m.forget({"a": 1}),
            lambda m: m.forget(scope="u1"),
            lambda m: m.forget(scope={"user": 1}),
            lambda m: m.forget(filter={"p": {"$foo": 1}}),
            lambda m: m.forget(filter={"$timestamp": {"$gt": "not a date"}}),
        ]
        if live:
            i = data.draw(st.sampled_from(live))
            cases += [
                lambda m: m.forget([i, i]),
                lambda m: m.forget([i, unknown]),
                lambda m: m.forget([i, "2"]),
                lambda m: m.forget([i, True]),
            ]
        forgotten = [j for j in range(self.max_id + 1) if j not in self.nodes]
        if forgotten and live:
            j = data.draw(st.sampled_from(forgotten))
            cases.append(lambda m: m.forget([live[0], j]))
        self.expect_error(data.draw(st.sampled_from(cases)))

    def bad_reads(self, data: st.DataObject) -> None:
        unknown = self.max_id + 1
        cases: list[Any] = [
            lambda m: m.search(""),
            lambda m: m.search(None),
            lambda m: m.search("cello", k=0),
            lambda m: m.search("cello", k=True),
            lambda m: m.search("cello", k=10_001),
            lambda m: m.search("cello", mode="bogus"),
            lambda m: m.search("cello", scope="u1"),
            lambda m: m.search("cello", filter={"p": {"$foo": 1}}),
            lambda m: m.search("cello", now="not a time"),
            lambda m: m.search("cello", embedding=[0.0] * (DIM + 1)),
            lambda m: m.search_batch("cello"),
            lambda m: m.search_batch(["cello", ""]),
            lambda m: m.search_batch(["cello"], embeddings=[[0.0] * DIM] * 2),
            lambda m: m.list(limit=0),
            lambda m: m.list(cursor="abc"),
            lambda m: m.list(scope={"": "x"}),
            lambda m: m.get(unknown),
            lambda m: m.get("0"),
            lambda m: m.history(unknown),
            lambda m: m.validity(-1),
            lambda m: m.superseded_by(unknown),
            lambda m: m.supersedes(None),
            lambda m: m.neighbors(unknown),
        ]
        self.expect_error(data.draw(st.sampled_from(cases)))

    # -- reads

    @rule(
        query=st.sampled_from(QUERIES),
        k=st.integers(1, 12),
        mode=st.sampled_from(MODES),
        scope=search_scopes,
        flt=opt_filters,
        now=st.one_of(st.none(), ts_ints),
    )
    def search(self, query: str, k: int, mode: Mode, scope: Any, flt: Any, now: Any) -> None:
        def ask(m: Memory) -> list[tuple[int, float]]:
            r = m.search(query, k, mode=mode, scope=scope, filter=flt, now=now)
            return [(e.id, round(e.score, 5)) for e in r.evidence]

        got = self.both(ask)
        ids = [i for i, _ in got]
        allowed = set(self.model_ids(scope, flt))
        assert len(ids) <= k
        assert len(set(ids)) == len(ids)
        assert set(ids) <= allowed, set(ids) - allowed
        if allowed and mode in ("anchors", "traversal", "full") and query:
            # the vector ranking reaches every allowed node: something comes back
            assert ids, (query, scope, flt, allowed)
        self.check_evidence(
            self.mem.search(query, k, mode=mode, scope=scope, filter=flt, now=now).evidence,
            allowed,
            unrestricted=not scope and flt is None,
        )

    def check_evidence(self, evidence: Any, allowed: set[int], unrestricted: bool) -> None:
        """Each evidence item says what the model holds: its text, time and
        speaker, the edge it was reached by, and its place in the supersedes
        chains as the search's scope sees them."""
        m = self.mem
        for e in evidence:
            n = self.nodes[e.id]
            assert e.text == n["text"]
            assert e.timestamp == n["timestamp"]
            assert e.provenance.get("speaker") == n["speaker"]
            assert 0 <= e.passage[0] <= e.passage[1] <= len(e.text)
            if e.via is not None:
                assert e.id in (e.via.src, e.via.dst), e.via
                assert e.via.from_node in allowed, (e.via, allowed)
            olds = {b for a, b in self.links if a == e.id}
            news = {a for a, b in self.links if b == e.id}
            assert set(e.supersedes) <= olds & allowed, (e.id, e.supersedes, olds)
            assert set(e.superseded_by) <= news & allowed, (e.id, e.superseded_by, news)
            if unrestricted:
                assert set(e.supersedes) == olds and set(e.superseded_by) == news, e
                if olds or news:
                    assert (e.valid_from, e.valid_to) == m.validity(e.id), e
                else:
                    assert (e.valid_from, e.valid_to) == (None, None), e

    @rule(
        queries=st.lists(st.sampled_from(QUERIES), min_size=0, max_size=4),
        k=st.integers(1, 8),
        mode=st.sampled_from(MODES),
        scope=search_scopes,
        flt=opt_filters,
    )
    def search_batch(self, queries: list[str], k: int, mode: Mode, scope: Any, flt: Any) -> None:
        m = self.mem
        batch = m.search_batch(queries, k, mode=mode, scope=scope, filter=flt)
        assert len(batch) == len(queries)
        # the queries' vectors made beforehand: the same answers
        vecs = m.embedder.embed(queries) if queries else np.zeros((0, DIM), np.float32)
        given = m.search_batch(queries, k, mode=mode, scope=scope, filter=flt, embeddings=vecs)
        assert [[e.id for e in r.evidence] for r in given] == [
            [e.id for e in r.evidence] for r in batch
        ]
        for q, r in zip(queries, batch, strict=True):
            one = m.search(q, k, mode=mode, scope=scope, filter=flt)
            assert [e.id for e in r.evidence] == [e.id for e in one.evidence], q
            assert [round(e.score, 5) for e in r.evidence] == [
                round(e.score, 5) for e in one.evidence
            ], q

    @rule(scope=search_scopes, flt=opt_filters, limit=st.integers(1, 7))
    def list_pages(self, scope: Any, flt: Any, limit: int) -> None:
        m = self.mem
        out: list[int] = []
        cursor = None
        for _ in range(100):
            items, cursor = m.list(scope=scope, filter=flt, limit=limit, cursor=cursor)
            assert len(items) <= limit
            out += [n.id for n in items]
            if cursor is None:
                break
            assert items
        assert cursor is None
        assert out == self.model_ids(scope, flt)
        assert m.matching_ids(scope, flt) == out

    @rule(
        query=st.sampled_from(QUERIES),
        k=st.integers(1, 12),
        mode=st.sampled_from(["lexical", "anchors"]),
        scope=search_scopes,
        flt=opt_filters,
    )
    def scoped_equals_isolated(self, query: str, k: int, mode: Mode, scope: Any, flt: Any) -> None:
        """README: a scoped search ranks exactly as a memory holding only that
        scope would (BM25 statistics of the allowed observations only, exact
        vector scan), and a forgotten node leaves every index. So a lexical or
        anchors search equals the same unscoped search on a fresh memory that
        holds only the selected live observations, in the same order."""
        sel = self.model_ids(scope, flt)
        iso = new_memory()
        iso.add_batch(
            [self.nodes[i]["text"] for i in sel],
            timestamps=[self.nodes[i]["timestamp"] for i in sel],
            speakers=[self.nodes[i]["speaker"] for i in sel],
        )
        got = [
            (e.id, round(e.score, 5))
            for e in self.mem.search(query, k, mode=mode, scope=scope, filter=flt).evidence
        ]
        want = [(sel[e.id], round(e.score, 5)) for e in iso.search(query, k, mode=mode).evidence]
        assert got == want, (got, want)

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data(), limit=st.integers(1, 4), text=texts)
    def list_while_writing(self, data: st.DataObject, limit: int, text: str) -> None:
        """`list` pages: each node on exactly one page, also while writes
        (and forgets) go on; new ones come last."""
        m = self.mem
        start = set(self.nodes)
        items, cursor = m.list(limit=limit)
        seen = [n.id for n in items]
        done = cursor is None  # the listing was over before the writes
        # between pages: a forget (maybe of the node the cursor names) and an add
        victim = data.draw(st.sampled_from(sorted(self.nodes)), label="victim")
        self.do_forget(lambda mm: mm.forget([victim]), [victim])
        new = self.both(lambda mm: mm.add(text))
        self.record_add(
            [new],
            [
                {
                    "text": text,
                    "speaker": None,
                    "scope": None,
                    "metadata": None,
                    "key": None,
                    "ts": None,
                }
            ],
        )
        self.note_links_after_write([new], set())
        for _ in range(1000):
            if cursor is None:
                break
            items, cursor = m.list(limit=limit, cursor=cursor)
            seen += [n.id for n in items]
        assert len(seen) == len(set(seen)), seen
        assert seen == sorted(seen)
        kept = start - {victim}
        assert kept <= set(seen), kept - set(seen)
        if not done:
            assert new in seen and seen[-1] == new
        assert set(seen) <= start | {new}

    # -- persistence

    @rule(with_embedder=st.booleans())
    def save_load(self, with_embedder: bool) -> None:
        m = self.mem
        self.saves += 1
        path = self.tmp / f"m{self.saves}.jvm"
        derived = m.derived_state()
        stats = semantic_stats(m)
        m.save(path)
        before = self.answers(m)
        if with_embedder:
            back = Memory.load(path, HashEmbedder(DIM), Flaky(), config=CONFIG)
        else:
            back = Memory.load(path, controller=Flaky(), config=CONFIG)
        assert back.derived_state() == derived
        back_stats = semantic_stats(back)
        assert back_stats == stats, (back_stats, stats)
        assert self.answers(back) == before
        if not self.durable:
            self.m = back
        else:
            back.close()

    @precondition(lambda self: self.durable)
    @rule(checkpoint=st.booleans())
    def reopen(self, checkpoint: bool) -> None:
        m = self.mem
        if checkpoint:
            m.checkpoint()
        before = self.answers(m)
        derived = m.derived_state()
        m.close()
        # reads still work after close, writes raise
        assert self.answers(m) == before
        with pytest.raises(DurabilityError):
            m.add("Maya plays the cello")
        assert self.dir is not None
        self.m = Memory.open(self.dir, controller=Flaky(), config=CONFIG, **self.open_kw)
        assert self.m.derived_state() == derived
        assert self.answers(self.m) == before

    def answers(self, m: Memory) -> Any:
        out = []
        for q in QUERIES[:3]:
            for mode in ("lexical", "full"):
                for scope in (None, {"user": "u1"}):
                    r = m.search(q, 6, mode=mode, scope=scope)
                    out.append([(e.id, round(e.score, 5)) for e in r.evidence])
        return out

    # -- invariants

    @invariant()
    def nodes_match_model(self) -> None:
        if self.m is None:
            return
        m = self.mem
        ids = sorted(self.nodes)
        assert m.matching_ids() == ids
        assert self.twin.matching_ids() == ids
        assert len(m) == len(ids)
        for i in ids:
            n, want = m.get(i), self.nodes[i]
            assert i in m
            assert n.id == i
            assert n.text == want["text"]
            assert n.provenance.get("speaker") == want["speaker"], (i, dict(n.provenance), want)
            assert dict(n.scope) == want["scope"]
            md = dict(n.metadata)
            assert md == want["metadata"]
            assert {k: type(v) for k, v in md.items()} == {
                k: type(v) for k, v in want["metadata"].items()
            }, (md, want["metadata"])
            assert n.key == want["key"]
            assert n.timestamp == want["timestamp"]
        s = m.stats()
        assert s["nodes"] == len(ids)
        assert s["next_id"] == self.max_id + 1 or (s["next_id"] > self.max_id)
        assert s["supersedes"] == len(self.links)

    @invariant()
    def chains_match_model(self) -> None:
        if self.m is None:
            return
        m = self.mem
        got = {(s.new, s.old) for s in m.store.supersedes_links()}
        assert got == self.links
        for i in self.nodes:
            olds = sorted(b for a, b in self.links if a == i)
            news = sorted(a for a, b in self.links if b == i)
            assert m.supersedes(i) == olds
            assert m.superseded_by(i) == news
            h = m.history(i)
            assert h[0] == i
            assert len(set(h)) == len(h)
            assert set(h[1:]) == reachable(i, self.links), (i, h, self.links)
            pos = {x: p for p, x in enumerate(h)}
            for a, b in self.links:
                if a in pos and b in pos:
                    assert pos[a] < pos[b], (i, h, (a, b))
            valid_from, valid_to = m.validity(i)
            # linked or not, and whatever links were made and taken back
            want_from = event_time_of(self.nodes[i])
            assert valid_from == want_from, (i, valid_from, want_from, self.nodes[i])
            starts = [t for a in news if (t := event_time_of(self.nodes[a])) is not None]
            if not news:
                assert valid_to is None, (i, valid_to)
            elif not starts:
                assert valid_to is None, (i, valid_to, news)
            else:
                end = min(starts)
                if valid_from is not None:
                    end = max(end, valid_from)
                assert valid_to == end, (i, valid_to, end, news)


MemoryMachine.TestCase.settings = settings(
    # a longer hunt: JEVMEM_STATEFUL_EXAMPLES=1000 pytest tests/test_stateful_memory.py
    max_examples=int(os.environ.get("JEVMEM_STATEFUL_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestMemoryMachine = MemoryMachine.TestCase


def test_the_model_filter_reads_numbers_exactly() -> None:
    """The reference model's own check: 1 equals 1.0, a string never equals a
    number, and big integers compare exactly (as the core does)."""
    node = {"metadata": {"p": 2**53 + 1, "t": "1"}, "timestamp": None}
    assert filter_holds(node, {"p": 2**53 + 1})
    assert not filter_holds(node, {"p": float(2**53)})
    assert not filter_holds(node, {"t": 1})
    assert filter_holds({"metadata": {"p": 1}, "timestamp": None}, {"p": 1.0})
    assert filter_holds(node, {"$timestamp": {"$exists": False}})
    assert issubclass(InvalidInputError, JevmemError) and jevmem.Memory is Memory

"""Scopes, metadata, filters, list and idempotent writes at the Python API.

Canaries planted in one scope never show up in another scope's results,
counts, traversal or trace, in every mode and under concurrent writers; a
scoped lexical / anchors search equals the same search on a memory built
from that scope's observations alone; filters match a naive evaluator;
paging covers every match exactly once; a key makes a repeated write a
no-op (also through ``jevmem ingest``); bad input raises and changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, InvalidInputError, JevmemError, LocalController, Memory
from jevmem.cli import main
from jevmem.memory import Mode

MODES: tuple[Mode, ...] = ("lexical", "anchors", "traversal", "full")
START = 1_700_000_000
USERS = ("u1", "u2", "u3")
TOPICS = ("cello lessons", "marine lab", "garden roses", "train tickets")


def fresh() -> Memory:
    return Memory(HashEmbedder(64), LocalController())


def canary(user: str) -> str:
    return f"canary{user}zebra"


def planted() -> tuple[Memory, dict[str, set[int]]]:
    """Three users talking about the same topics, each with a canary word,
    plus global observations; returns the memory and each user's ids."""
    m = fresh()
    owned: dict[str, set[int]] = {u: set() for u in USERS}
    t = START
    for round_ in range(4):
        for u in USERS:
            for topic in TOPICS:
                t += 60
                text = f"Maya talked about {topic} and the {canary(u)} on day {round_}"
                i = m.add(
                    text,
                    speaker="Maya" if u == "u1" else f"Speaker{u}",
                    timestamp=t,
                    scope={"user": u, "session": f"s{round_ % 2}"},
                    metadata={"topic": topic, "round": round_},
                )
                owned[u].add(i)
        m.add(f"a global note about {TOPICS[round_]}", timestamp=t + 1)
    return m, owned


# ---- canaries ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_canaries_stay_in_their_scope(mode: Mode) -> None:
    m, owned = planted()
    texts = {u: canary(u) for u in USERS}
    for u in USERS:
        others = [texts[o] for o in USERS if o != u]
        # a query built from the other users' canaries and shared topics
        query = f"what did Maya say about cello lessons and {' '.join(others)}?"
        r = m.search(query, k=10, mode=mode, scope={"user": u})
        assert r.evidence, "the scope's own observations match the topic words"
        for e in r.evidence:
            assert e.id in owned[u], (u, e.id, e.text)
            assert e.provenance.get("speaker", "Maya") in ("Maya", f"Speaker{u}")
        dumped = json.dumps(r.trace, default=str)
        for other in others:
            assert other not in dumped
        if mode in ("traversal", "full"):
            # the traversal's own counts: it visited only this scope's nodes
            assert r.trace["visited"] <= len(owned[u])
        # a session scope narrows further
        r = m.search(query, k=10, mode=mode, scope={"user": u, "session": "s1"})
        for e in r.evidence:
            assert e.id in owned[u] and m.get(e.id).scope["session"] == "s1"


def test_scope_with_no_match_returns_nothing() -> None:
    m, _ = planted()
    for mode in MODES:
        assert m.search("cello lessons", mode=mode, scope={"user": "nobody"}).evidence == []
        assert m.search("cello", mode=mode, filter={"round": {"$gt": 99}}).evidence == []


def test_canaries_under_concurrent_writers() -> None:
    m, owned = planted()
    errors: list[BaseException] = []

    def writer(user: str) -> None:
        try:
            for n in range(40):
                m.add(
                    f"cello lessons news {n} {canary(user)}",
                    timestamp=START + 10_000 + n,
                    scope={"user": user},
                    key=f"{user}-{n}",
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(u,)) for u in ("u2", "u3")]
    for w in writers:
        w.start()
    try:
        for i in range(12):
            mode = MODES[i % len(MODES)]
            r = m.search(
                f"cello lessons {canary('u2')} {canary('u3')}", mode=mode, scope={"user": "u1"}
            )
            for e in r.evidence:
                assert e.id in owned["u1"], (mode, e.id, e.text)
            for n in m.list(scope={"user": "u1"}, limit=1000)[0]:
                assert n.id in owned["u1"]
    finally:
        for w in writers:
            w.join()
    assert not errors, errors
    # the writers' observations are all there, in their own scopes
    for u in ("u2", "u3"):
        ids = m.matching_ids(scope={"user": u})
        assert len(ids) == len(owned[u]) + 40
        assert all(m.get(i).scope["user"] == u for i in ids)


def test_write_path_links_stay_in_scope() -> None:
    """Rule time edges, entity edges and controller edges of a scoped
    observation join it only to observations its scope sees (a global
    observation is compared with every earlier one, so it may link to a
    scoped one: only an unscoped search, which sees both, walks that edge)."""
    m, owned = planted()
    for u in USERS:
        for i in owned[u]:
            for e in m.neighbors(i):
                other = e.dst if e.src == i else e.src
                assert m.get(other).scope.get("user") in (u, None), (i, other, e)
                if not m.get(other).scope:
                    # written by the global node, which came later
                    assert other > i, (i, other, e)


# ---- equivalence with a memory of the scope alone ------------------------------

obs_strategy = st.lists(
    st.tuples(
        st.sampled_from(("u1", "u2", None)),
        st.lists(
            st.sampled_from(("tea", "cello", "paris", "train", "garden", "lab")),
            min_size=1,
            max_size=5,
        ),
        st.sampled_from(("Maya", "Ines", None)),
    ),
    min_size=1,
    max_size=18,
)


@settings(max_examples=40, deadline=None)
@given(
    obs=obs_strategy,
    query=st.lists(
        st.sampled_from(("tea", "cello", "paris", "lab", "who")), min_size=1, max_size=3
    ),
)
def test_scoped_search_equals_a_memory_of_the_scope(
    obs: list[tuple[str | None, list[str], str | None]], query: list[str]
) -> None:
    whole, alone = fresh(), fresh()
    mapping: dict[int, int] = {}
    for i, (user, words, speaker) in enumerate(obs):
        text = " ".join(words)
        scope = None if user is None else {"user": user}
        got = whole.add(text, timestamp=START + 60 * i, speaker=speaker, scope=scope)
        if user == "u1":
            mapping[alone.add(text, timestamp=START + 60 * i, speaker=speaker)] = got
    q = " ".join(query)
    for mode in ("lexical", "anchors"):
        scoped = whole.search(q, k=5, mode=mode, scope={"user": "u1"}).evidence
        plain = alone.search(q, k=5, mode=mode).evidence
        assert [e.id for e in scoped] == [mapping[e.id] for e in plain], mode
        for a, b in zip(scoped, plain, strict=True):
            assert math.isclose(a.score, b.score, rel_tol=1e-5, abs_tol=1e-9)
            assert a.text == b.text


# ---- filters ------------------------------------------------------------------

FIELD_VALUES = st.one_of(
    st.integers(-2, 3), st.sampled_from((0.5, 1.0, 2.5)), st.sampled_from(("a", "b")), st.booleans()
)


def naive(f: dict[str, Any], node: Any) -> bool:
    """The filter semantics written down plainly (see Memory.search)."""

    def get(field: str) -> Any:
        if field == "$timestamp":
            return node.timestamp
        return node.metadata.get(field)

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, bool) or isinstance(b, bool):
            return isinstance(a, bool) and isinstance(b, bool) and a == b
        if isinstance(a, str) or isinstance(b, str):
            return isinstance(a, str) and isinstance(b, str) and a == b
        return bool(a == b)

    def num(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    def cond(field: str, c: Any) -> bool:
        x = get(field)
        if not isinstance(c, dict):
            return x is not None and same(x, c)
        ok = True
        for op, v in c.items():
            if op == "$eq":
                ok &= x is not None and same(x, v)
            elif op == "$ne":
                ok &= not (x is not None and same(x, v))
            elif op == "$in":
                ok &= x is not None and any(same(x, y) for y in v)
            elif op == "$nin":
                ok &= not (x is not None and any(same(x, y) for y in v))
            elif op == "$exists":
                ok &= (x is not None) == v
            else:
                cmp = {"$gt": x > v, "$gte": x >= v, "$lt": x < v, "$lte": x <= v} if num(x) else {}
                ok &= bool(cmp.get(op, False))
        return ok

    ok = True
    for k, v in f.items():
        if k == "$and":
            ok &= all(naive(x, node) for x in v)
        elif k == "$or":
            ok &= any(naive(x, node) for x in v)
        elif k == "$not":
            ok &= not naive(v, node)
        else:
            ok &= cond(k, v)
    return ok


def conditions() -> st.SearchStrategy[Any]:
    ops = st.dictionaries(
        st.sampled_from(("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")),
        FIELD_VALUES,
        min_size=1,
        max_size=2,
    ).filter(
        # range bounds must be numbers (a string bound is refused, tested below)
        lambda d: all(
            isinstance(v, (int, float)) and not isinstance(v, bool)
            for k, v in d.items()
            if k in ("$gt", "$gte", "$lt", "$lte")
        )
    )
    return st.one_of(
        FIELD_VALUES,
        ops,
        st.fixed_dictionaries({"$in": st.lists(FIELD_VALUES, max_size=3)}),
        st.fixed_dictionaries({"$nin": st.lists(FIELD_VALUES, max_size=3)}),
        st.fixed_dictionaries({"$exists": st.booleans()}),
    )


filters = st.recursive(
    st.dictionaries(st.sampled_from(("x", "y")), conditions(), min_size=1, max_size=2),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"$and": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries({"$or": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries({"$not": inner}),
    ),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None)
@given(
    metas=st.lists(
        st.dictionaries(st.sampled_from(("x", "y")), FIELD_VALUES, max_size=2),
        min_size=1,
        max_size=12,
    ),
    f=filters,
)
def test_filters_match_a_naive_evaluator(metas: list[dict[str, Any]], f: dict[str, Any]) -> None:
    m = fresh()
    for i, md in enumerate(metas):
        m.add(f"note {i}", metadata=md, timestamp=None if i % 3 == 0 else START + i)
    want = [i for i in range(len(metas)) if naive(f, m.get(i))]
    assert m.matching_ids(filter=f) == want
    # search sees exactly the matching nodes too
    for e in m.search("note", k=20, mode="lexical", filter=f).evidence:
        assert e.id in want


def test_timestamp_filter_takes_datetimes_and_iso_strings() -> None:
    m = fresh()
    for i in range(5):
        m.add(f"day {i}", timestamp=START + i * 86_400)
    m.add("no time at all")
    t2 = dt.datetime.fromtimestamp(START + 2 * 86_400, tz=dt.timezone.utc)
    assert m.matching_ids(filter={"$timestamp": {"$gte": t2}}) == [2, 3, 4]
    assert m.matching_ids(filter={"$timestamp": {"$lt": t2.isoformat()}}) == [0, 1]
    assert m.matching_ids(filter={"$timestamp": {"$exists": False}}) == [5]
    assert m.matching_ids(filter={"$not": {"$timestamp": {"$lt": START + 86_400}}}) == [
        1,
        2,
        3,
        4,
        5,
    ]


def test_any_mapping_is_a_scope_or_metadata() -> None:
    from types import MappingProxyType

    m = fresh()
    i = m.add("x", scope=MappingProxyType({"user": "u1"}), metadata=MappingProxyType({"p": 1}))
    assert m.get(i).scope == {"user": "u1"} and m.get(i).metadata == {"p": 1}
    assert m.matching_ids(MappingProxyType({"user": "u1"}), MappingProxyType({"p": 1})) == [i]


def test_numbers_compare_as_numbers() -> None:
    m = fresh()
    m.add("a", metadata={"p": 1})
    m.add("b", metadata={"p": 1.0})
    m.add("c", metadata={"p": "1"})
    m.add("d", metadata={"p": True})
    assert m.matching_ids(filter={"p": 1}) == [0, 1]
    assert m.matching_ids(filter={"p": "1"}) == [2]
    assert m.matching_ids(filter={"p": True}) == [3]
    assert m.matching_ids(filter={"p": {"$gte": 0.5}}) == [0, 1]
    assert m.matching_ids(filter={"p": {"$in": [1, "1"]}}) == [0, 1, 2]


# ---- list ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    users=st.lists(st.sampled_from(("u1", "u2", None)), min_size=0, max_size=25),
    limit=st.integers(1, 6),
    removed=st.lists(st.integers(0, 24), max_size=4),
)
def test_list_pages_cover_every_match_once(
    users: list[str | None], limit: int, removed: list[int]
) -> None:
    m = fresh()
    for i, u in enumerate(users):
        m.add(f"note {i}", scope=None if u is None else {"user": u}, metadata={"i": i})
    for r in set(removed):
        if r in m:
            m.store.remove(r)
    for scope, flt in ((None, None), ({"user": "u1"}, None), (None, {"i": {"$lt": 10}})):
        want = m.matching_ids(scope, flt)
        got: list[int] = []
        cursor = None
        while True:
            items, cursor = m.list(scope, flt, limit=limit, cursor=cursor)
            assert len(items) <= limit
            got += [n.id for n in items]
            if cursor is None:
                break
            assert len(items) == limit
        assert got == want == sorted(set(want))


def test_list_while_writing_shows_every_old_node_once() -> None:
    m = fresh()
    for i in range(30):
        m.add(f"note {i}", scope={"user": "u1"})
    seen: list[int] = []
    items, cursor = m.list({"user": "u1"}, limit=7)
    seen += [n.id for n in items]
    while cursor is not None:
        m.add("written meanwhile", scope={"user": "u1"})
        items, cursor = m.list({"user": "u1"}, limit=7, cursor=cursor)
        seen += [n.id for n in items]
    assert len(seen) == len(set(seen))
    assert set(range(30)) <= set(seen)


# ---- idempotent writes ---------------------------------------------------------


def test_keys_make_repeated_writes_no_ops(tmp_path: Path) -> None:
    m = fresh()
    a = m.add("Maya started cello", key="msg-1", scope={"user": "u1"})
    before = m.store.to_bytes()
    assert m.add("Maya started cello", key="msg-1", scope={"user": "u1"}) == a
    assert m.add("a different text, same key", key="msg-1", scope={"user": "u1"}) == a
    assert m.store.to_bytes() == before
    ids = m.add_batch(
        ["x", "y", "x again", "z", "y again"],
        keys=["k-x", "k-y", "k-x", None, "k-y"],
    )
    assert ids[0] == ids[2] and ids[1] == ids[4] and len(set(ids)) == 3
    assert len(m) == 4
    assert m.get(ids[0]).text == "x" and m.get(ids[0]).key == "k-x"
    # a batch of only known keys stores nothing
    assert m.add_batch(["x", "y"], keys=["k-x", "msg-1"], scopes=[None, {"user": "u1"}]) == [
        ids[0],
        a,
    ]
    assert len(m) == 4
    # keys live in their scope: another user's write with the key is its own
    other = m.add("Maya started cello", key="msg-1", scope={"user": "u2"})
    assert other != a and m.get(other).scope == {"user": "u2"}
    assert m.add_batch(["r1", "r2"], keys=["msg-1", "msg-1"], scopes=[{"user": "u2"}, None]) == [
        other,
        other + 1,
    ]
    assert len(m) == 6
    # keys survive a save and load
    m.save(tmp_path / "m.jvm")
    back = Memory.load(tmp_path / "m.jvm", HashEmbedder(64), LocalController())
    assert back.add("again", key="msg-1", scope={"user": "u1"}) == a and len(back) == 6
    assert back.get(a).scope == {"user": "u1"}


def test_reingesting_a_file_adds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "obs.jsonl"
    lines = [
        {
            "text": "Maya started cello lessons",
            "timestamp": "2026-03-03T10:00:00Z",
            "scope": {"user": "u1"},
        },
        {"text": "the same line twice", "metadata": {"topic": "echo"}},
        {"text": "the same line twice", "metadata": {"topic": "echo"}},
        {"text": "with its own key", "key": "client-7"},
    ]
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    mem = tmp_path / "m.jvm"
    args = ["ingest", str(src), "--memory", str(mem), "--embedder", "hash-64"]
    assert main(args) == 0
    assert "holds 4 nodes" in capsys.readouterr().out
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "(0 new, 4 already held)" in out and "holds 4 nodes" in out
    m = Memory.load(mem, HashEmbedder(64), LocalController())
    assert m.matching_ids(scope={"user": "u1"}) == [0]
    assert m.matching_ids(filter={"topic": "echo"}) == [1, 2]
    assert m.get(3).key == "client-7"
    assert main(["search", "cello", "--memory", str(mem), "--scope", "user=u2"]) == 0
    assert "cello" not in capsys.readouterr().out.splitlines()[0]


# ---- bad input -----------------------------------------------------------------

BAD_ADDS: list[dict[str, Any]] = [
    {"scope": "user=u1"},
    {"scope": {"user": 1}},
    {"scope": {"": "u1"}},
    {"scope": {"user": ""}},
    {"scope": {"$user": "u1"}},
    {"scope": {"user": "a\0b"}},
    {"scope": {"user": "x" * 300}},
    {"scope": {f"k{i}": "v" for i in range(17)}},
    {"metadata": {"p": float("nan")}},
    {"metadata": {"p": float("inf")}},
    {"metadata": {"p": None}},
    {"metadata": {"p": [1, 2]}},
    {"metadata": {"p": 1 << 70}},
    {"metadata": {"": 1}},
    {"metadata": {"p": "\ud800"}},
    {"metadata": ["p"]},
    {"key": ""},
    {"key": 7},
    {"key": "k\0"},
    {"key": "k" * 2000},
]


@pytest.mark.parametrize("bad", BAD_ADDS, ids=[str(i) for i in range(len(BAD_ADDS))])
def test_bad_attributes_raise_and_change_nothing(bad: dict[str, Any]) -> None:
    m = fresh()
    m.add("kept", key="k-1")
    before = m.store.to_bytes()
    with pytest.raises(InvalidInputError):
        m.add("new text", **bad)
    columns = {"scope": "scopes", "metadata": "metadatas", "key": "keys"}
    with pytest.raises(InvalidInputError):
        # in a batch after a good row: all or nothing
        m.add_batch(["good", "bad"], **{columns[k]: [None, v] for k, v in bad.items()})
    if "key" not in bad:
        with pytest.raises(InvalidInputError):
            # a repeat of a stored key is a no-op, but must still be well formed
            m.add("kept", key="k-1", **bad)
    assert m.store.to_bytes() == before
    assert len(m) == 1


EVERYTHING: list[dict[str, Any]] = [
    {"scope": {}},
    {"filter": {}},
    {"filter": {"$and": []}},
    {"filter": {"$and": [{}, {"$or": [{}]}]}},
    {"filter": {"$not": {"$or": []}}},
    {"scope": {}, "filter": {"$and": []}},
]


@pytest.mark.parametrize("kw", EVERYTHING, ids=[str(i) for i in range(len(EVERYTHING))])
def test_forget_refuses_an_empty_scope_or_filter(kw: dict[str, Any]) -> None:
    """Refused as a bare forget() is, not read as "everything"."""
    m, _ = planted()
    before = m.store.to_bytes()
    with pytest.raises(InvalidInputError, match="empty scope"):
        m.forget(**kw)
    assert m.store.to_bytes() == before
    # reads still take an empty scope or filter as no restriction
    assert len(m.search("cello", k=100, mode="lexical", scope={}, filter={}).evidence) > 0
    assert m.matching_ids(scope={}, filter={}) == m.matching_ids()
    assert m.forget(filter={"$or": []}) == 0  # matches nothing: nothing to refuse
    # an empty part beside one that restricts: what that part selects
    restrictions: list[Any] = [
        {"scope": {}, "filter": {"topic": "cello lessons"}},
        {"filter": {}, "scope": {"user": "u1"}},
    ]
    for restricting in restrictions:
        chosen = m.matching_ids(**restricting)
        assert chosen and m.forget(**restricting) == len(chosen)


BAD_FILTERS: list[Any] = [
    "topic=work",
    ["topic"],
    {"p": {"$foo": 1}},
    {"$foo": 1},
    {"p": {}},
    {"p": None},
    {"p": [1, 2]},
    {"p": {"$in": 3}},
    {"p": {"$gt": "a"}},
    {"p": {"$gt": float("nan")}},
    {"p": {"$exists": 1}},
    {"p": 1 << 64},
    {"$and": {"p": 1}},
    {"$or": [1]},
    {"$not": [{"p": 1}]},
    {"$timestamp": {"$gt": "not a date"}},
    {"": 1},
    {"p": {"$in": list(range(2000))}},
]


def deep(n: int) -> dict[str, Any]:
    f: dict[str, Any] = {"p": 1}
    for _ in range(n):
        f = {"$not": f}
    return f


@pytest.mark.parametrize(
    "bad", [*BAD_FILTERS, deep(40), deep(5000)], ids=[str(i) for i in range(len(BAD_FILTERS) + 2)]
)
def test_bad_filters_raise_typed_errors(bad: Any) -> None:
    m, _ = planted()
    before = m.store.to_bytes()
    for call in (
        lambda: m.search("cello", filter=bad),
        lambda: m.search_batch(["cello", "lab"], mode="lexical", filter=bad),
        lambda: m.list(filter=bad),
        lambda: m.matching_ids(filter=bad),
    ):
        with pytest.raises(JevmemError):
            call()
    assert m.store.to_bytes() == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scope": "u1"},
        {"scope": {"user": 3}},
        {"scope": {"": "x"}},
        {"limit": 0},
        {"limit": True},
        {"limit": 10**9},
        {"cursor": "abc"},
        {"cursor": 12},
        {"cursor": "-1"},
        {"cursor": "9" * 30},
    ],
)
def test_bad_list_arguments(kwargs: dict[str, Any]) -> None:
    m, _ = planted()
    with pytest.raises(InvalidInputError):
        m.list(**kwargs)


def test_unscoped_reads_are_unchanged() -> None:
    """No scope and no filter: the plain path, the same results as a memory
    that never heard of scopes (same observations, no scope attributes)."""
    rng = np.random.default_rng(3)
    a, b = fresh(), fresh()
    for i in range(40):
        text = f"{TOPICS[i % 4]} note {int(rng.integers(0, 5))}"
        a.add(text, timestamp=START + i, scope={"user": USERS[i % 3]}, metadata={"i": i})
        b.add(text, timestamp=START + i)
    assert a.store.select() is None and a.store.select({}, {}) is None
    for mode in ("lexical", "anchors"):
        ra, rb = (
            a.search("cello lessons note 3", mode=mode),
            b.search("cello lessons note 3", mode=mode),
        )
        assert [(e.id, e.score) for e in ra.evidence] == [(e.id, e.score) for e in rb.evidence]


def _strip_times(trace: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in trace.items() if "elapsed" not in k}


@settings(max_examples=25, deadline=None)
@given(
    obs=obs_strategy,
    query=st.lists(
        st.sampled_from(("tea", "cello", "paris", "lab", "who", "Maya")), min_size=1, max_size=3
    ),
)
def test_scoped_search_equals_a_memory_of_the_scope_in_every_mode(
    obs: list[tuple[str | None, list[str], str | None]], query: list[str]
) -> None:
    """With consolidation out of the way (its cadence counts every write of
    the memory, so it would fire at other times), a scoped write sees and
    links exactly what it would in a memory of its scope alone, and a scoped
    search in any mode, with the local controller, gives the same evidence,
    scores and trace counts (routing, pool, rounds, visited, edges examined)
    as the memory of that scope alone."""
    from jevmem import MemoryConfig, default_controller

    def make() -> Memory:
        # the default (learned) controller: it reads the style features too
        return Memory(
            HashEmbedder(64), default_controller(), config=MemoryConfig(consolidation_period=10**9)
        )

    whole, alone = make(), make()
    mapping: dict[int, int] = {}
    for i, (user, words, speaker) in enumerate(obs):
        text = " ".join(words)
        scope = None if user is None else {"user": user}
        got = whole.add(text, timestamp=START + 60 * i, speaker=speaker, scope=scope)
        if user == "u1":
            mapping[alone.add(text, timestamp=START + 60 * i, speaker=speaker)] = got
    q = " ".join(query)
    for mode in MODES:
        a = whole.search(q, k=5, mode=mode, scope={"user": "u1"})
        b = alone.search(q, k=5, mode=mode)
        assert [e.id for e in a.evidence] == [mapping[e.id] for e in b.evidence], mode
        for x, y in zip(a.evidence, b.evidence, strict=True):
            assert math.isclose(x.score, y.score, rel_tol=1e-4, abs_tol=1e-9), mode
        ta, tb = _strip_times(a.trace), _strip_times(b.trace)
        assert ta == tb, mode


def test_supersedes_chains_stop_at_the_scope() -> None:
    """A global observation may replace a scoped one (a global write is
    compared with every earlier observation); a scoped search does not see
    that link, nor a validity end that only it gives."""
    m = fresh()
    old = m.add("Maya drinks oat milk", timestamp=START, scope={"user": "u1"})
    newer = m.add("Maya drinks soy milk now", timestamp=START + 100, scope={"user": "u1"})
    glob = m.add("everyone drinks almond milk now", timestamp=START + 200)
    m.store.add_supersedes(newer, old, 0.9)
    m.store.add_supersedes(glob, newer, 0.9)
    r = m.search("what milk does Maya drink now?", k=5, scope={"user": "u1"})
    by_id = {e.id: e for e in r.evidence}
    assert glob not in by_id and newer in by_id
    assert glob not in by_id[newer].superseded_by and by_id[newer].valid_to is None
    assert by_id[newer].supersedes == (old,)
    # unscoped, the link is there
    r = m.search("what milk does Maya drink now?", k=5)
    item = next(e for e in r.evidence if e.id == newer)
    assert item.superseded_by == (glob,) and item.valid_to == START + 200


junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(1 << 70), max_value=1 << 70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
        st.sampled_from(
            ("$gt", "$in", "$and", "$or", "$not", "$timestamp", "$exists", "\0", "\ud800")
        ),
        st.binary(max_size=3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(
                st.text(max_size=4),
                st.sampled_from(("$gt", "$in", "$and", "$or", "$not", "$timestamp")),
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(scope=junk, metadata=junk, key=junk, flt=junk)
def test_any_input_is_accepted_or_refused_typed(
    scope: Any, metadata: Any, key: Any, flt: Any
) -> None:
    """Whatever is passed as a scope, metadata, key or filter, the memory
    either takes it or raises a jevmem error, and a refused write changes
    nothing (no builtin TypeError / OverflowError / UnicodeError escapes)."""
    m = fresh()
    m.add("kept note", scope={"user": "u1"}, metadata={"p": 1})
    before = m.store.to_bytes()
    try:
        m.add("new note", scope=scope, metadata=metadata, key=key)
    except JevmemError:
        assert m.store.to_bytes() == before
    for call in (
        lambda: m.search("note", mode="lexical", scope=scope),
        lambda: m.search("note", mode="anchors", filter=flt),
        lambda: m.list(scope=scope, filter=flt),
        lambda: m.matching_ids(filter=flt),
    ):
        try:
            call()
        except JevmemError:
            pass


def test_an_update_stays_in_its_scope_with_its_metadata() -> None:
    m = fresh()
    old = m.add(
        "I take oat milk in my coffee",
        speaker="Maya",
        timestamp=START,
        scope={"user": "u1"},
        metadata={"topic": "diet"},
        key="milk-1",
    )
    other = m.add("I take black coffee", speaker="Sam", timestamp=START, scope={"user": "u2"})
    new = m.update(old, "I switched to soy milk in my coffee", timestamp=START + 86_400)
    node = m.get(new)
    assert dict(node.scope) == {"user": "u1"} and dict(node.metadata) == {"topic": "diet"}
    assert node.key is None and m.get(old).key == "milk-1"  # the old node keeps its key
    for mode in MODES:
        u1 = [e.id for e in m.search("what milk now?", scope={"user": "u1"}, mode=mode).evidence]
        assert sorted(u1) == [old, new], mode
        u2 = [e.id for e in m.search("what milk now?", scope={"user": "u2"}, mode=mode).evidence]
        assert set(u2) <= {other}, mode
    assert m.matching_ids(filter={"topic": "diet"}) == [old, new]
    assert m.forget(scope={"user": "u1"}) == 2 and m.matching_ids() == [other]


def test_a_float_timestamp_filters_as_add_stores_it() -> None:
    """A float is floored by `add`; a filter on that same float finds it."""
    m = fresh()
    t = 1_700_000_000.75
    i = m.add("Maya plays the cello", timestamp=t)
    at = dt.datetime.fromtimestamp(t, dt.timezone.utc)
    for f in (
        {"$timestamp": t},
        {"$timestamp": {"$gte": t}},
        {"$timestamp": {"$lte": t}},
        {"$timestamp": {"$in": [t]}},
        {"$timestamp": {"$gte": at}},
    ):
        assert [e.id for e in m.search("cello", filter=f).evidence] == [i], f
    assert m.search("cello", filter={"$timestamp": {"$gt": t}}).evidence == []
    with pytest.raises(InvalidInputError):
        m.search("cello", filter={"$timestamp": float("nan")})


def test_a_timestamp_filter_refuses_what_is_no_time() -> None:
    """A bool or a string equals no node's time, so `$ne`/`$nin` of one would
    match every node and `forget` would take them all: refused."""
    m = fresh()
    ids = m.add_batch(
        ["a note", "b note", "c note"], timestamps=[1_767_225_600, 1_769_904_000, None]
    )
    before = m.store.to_bytes()
    for f in (
        {"$timestamp": True},
        {"$timestamp": {"$eq": False}},
        {"$timestamp": {"$ne": True}},
        {"$timestamp": {"$in": [True]}},
        {"$timestamp": {"$nin": [1_767_225_600, False]}},
    ):
        with pytest.raises(InvalidInputError, match="must be a time"):
            m.matching_ids(filter=f)
        with pytest.raises(InvalidInputError, match="must be a time"):
            m.forget(filter=f)
    assert m.store.to_bytes() == before and len(m) == 3
    # a list operator given one value says it wants a list, naming what it got
    with pytest.raises(InvalidInputError, match="must be a list, got str"):
        m.matching_ids(filter={"$timestamp": {"$in": "2026-01-01"}})
    assert m.matching_ids(filter={"$timestamp": {"$nin": ["2026-01-01T00:00:00Z"]}}) == ids[1:]

"""The facts a Memory derives from texts at write time (grounded time
references, question shares) are kept by the core: a logged op on a
durable memory and part of snapshot format 4. Loading and opening take them
from there instead of deriving them again; a store whose facts came from
another derivation is derived anew; a memory saved before format 4 kept them
as JSON in its own state, which still loads, and anything stale or malformed
there is derived anew (jevmem.plane.derived)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.signals_reference import time_match

from jevmem import (
    HashEmbedder,
    InvalidInputError,
    LocalController,
    Memory,
    MemoryStore,
    NodeNotFoundError,
)
from jevmem._core import question_share
from jevmem._validate import MAX_TIMESTAMP, MIN_TIMESTAMP
from jevmem.plane import derived as derived_module
from jevmem.plane import state as plane_state
from jevmem.plane.derived import (
    DERIVED_VERSION,
    DerivedFacts,
    decode_derived,
    encode_derived,
    ref_of,
    ref_tuple,
)
from jevmem.temporal import PRECISIONS, TimeRef, ground

EMBEDDER = HashEmbedder(64)
T0 = 1_700_000_000
DAY_S = 86_400
TEXTS = [
    "I moved to Lisbon last week, do you like it?",
    "We met on 9 November 2022 at the bakery.",
    "Yesterday I started cello lessons. Tomorrow is the recital!",
    "Is the meeting next Monday or this Friday?",
    "I have been vegetarian since 2016.",
    "The build broke two days ago; the fix landed this morning.",
    "No dates here, just a plain statement.",
    "How was the trip in the summer of 2021? Was it hot?",
]


def build(m: Memory, texts: list[str] = TEXTS, start: int = T0) -> list[int]:
    return m.add_batch(
        texts,
        timestamps=[start + 3_600 * i for i in range(len(texts))],
        speakers=["Maya" if i % 2 else "Sam" for i in range(len(texts))],
    )


def derived_state(m: Memory) -> dict[str, Any]:
    """The part of `MemoryState.derived_state` the store keeps, or derives from it."""
    keys = ("time_refs", "asks", "timeline", "styles", "speakers")
    state = m.derived_state()
    return {k: state[k] for k in keys}


def from_scratch(m: Memory, tmp_path: Path) -> dict[str, Any]:
    """What deriving every node's facts from its text gives: a copy of the
    store told its facts came from another derivation, under a new Memory."""
    m.save(tmp_path / "scratch.jvm")
    store = MemoryStore.load_with_state(tmp_path / "scratch.jvm")[0]
    store.set_derived(DERIVED_VERSION + 1, [], [], [], logged=False)
    return derived_state(Memory(EMBEDDER, LocalController(), store=store))


def expected_facts(m: Memory) -> tuple[dict[int, float], dict[int, tuple[TimeRef, ...]]]:
    """Each node's question share and time references, from its text."""
    asks, refs = {}, {}
    for i in m.matching_ids():
        node = m.store.get(i)
        asks[i] = question_share(node.text)
        got = () if node.timestamp is None else tuple(ground(node.text, node.timestamp))
        if got:
            refs[i] = got
    return asks, refs


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Count the calls that derive facts from texts while indexing."""
    calls = {"ground": 0, "question_share": 0}

    def counting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any) -> Any:
            calls[name] += 1
            return fn(*args)

        return wrapped

    monkeypatch.setattr(plane_state, "ground", counting("ground", ground))
    monkeypatch.setattr(plane_state, "question_share", counting("question_share", question_share))
    yield calls


def test_the_store_keeps_what_the_texts_give() -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    state = m.derived_state()
    assert state["time_refs"], "the sample must ground something"
    assert (state["asks"], state["time_refs"]) == expected_facts(m)
    assert m.store.derived_version == DERIVED_VERSION


def test_load_takes_the_facts_from_the_snapshot(tmp_path: Path, counted: dict[str, int]) -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    m.save(tmp_path / "m.jvm")
    state = json.loads(MemoryStore.load_with_state(tmp_path / "m.jvm")[1] or b"{}")
    assert "derived" not in state  # the core keeps them, not the JSON state
    counted.update(ground=0, question_share=0)
    loaded = Memory.load(tmp_path / "m.jvm", EMBEDDER, LocalController())
    assert counted == {"ground": 0, "question_share": 0}
    assert derived_state(loaded) == derived_state(m)
    assert derived_state(loaded) == from_scratch(loaded, tmp_path)
    assert counted["ground"] == len(TEXTS)  # the oracle derived them


def test_a_node_the_store_has_no_facts_for_is_derived(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    # written past the Memory (as consolidation writes summaries): no facts kept
    m.store.add("Lunch tomorrow at noon?", EMBEDDER.embed_one("x"), timestamp=T0 + 99_999)
    m.save(tmp_path / "m.jvm")
    counted.update(ground=0, question_share=0)
    loaded = Memory.load(tmp_path / "m.jvm", EMBEDDER, LocalController())
    assert counted == {"ground": 1, "question_share": 1}
    assert derived_state(loaded) == from_scratch(loaded, tmp_path)


def test_facts_of_another_derivation_are_derived_anew(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    m.save(tmp_path / "m.jvm")
    store = MemoryStore.load_with_state(tmp_path / "m.jvm")[0]
    # as if written by a build whose derivation differs: wrong facts, another version
    ids = m.matching_ids()
    store.set_derived(DERIVED_VERSION + 1, ids, [0.5] * len(ids), [[] for _ in ids], logged=False)
    counted.update(ground=0, question_share=0)
    again = Memory(EMBEDDER, LocalController(), store=store)
    assert counted == {"ground": len(TEXTS), "question_share": len(TEXTS)}
    assert derived_state(again) == derived_state(m)
    assert store.derived_version == DERIVED_VERSION


def test_open_takes_the_facts_from_checkpoint_and_log(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    path = tmp_path / "mem"
    m = Memory.open(path, EMBEDDER, LocalController(), checkpoint_every=0, durability="none")
    build(m, TEXTS[:4])
    m.checkpoint()  # the first half in the checkpoint
    build(m, TEXTS[4:], start=T0 + 86_400)  # the rest only in log records
    m.forget([1])
    want = derived_state(m)
    m.store.close()  # no checkpoint: reopening replays the log
    counted.update(ground=0, question_share=0)
    reopened = Memory.open(path, EMBEDDER, LocalController())
    try:
        assert counted == {"ground": 0, "question_share": 0}
        assert derived_state(reopened) == want
        assert derived_state(reopened) == from_scratch(reopened, tmp_path)
    finally:
        reopened.close()


def legacy_snapshot(m: Memory, path: Path, derived: dict[str, Any]) -> None:
    """``m`` as a memory saved before format 4 kept it: a store with no
    derived facts, and ``derived`` in the JSON state."""
    store = MemoryStore(EMBEDDER.dim)
    for i in m.matching_ids():
        node = m.store.get(i)
        store.add(
            node.text,
            m.store.embedding(i),
            timestamp=node.timestamp,
            provenance=dict(node.provenance),
        )
    assert store.derived_version == 0
    store.save_with_state(path, json.dumps({"format": 1, "derived": derived}).encode())


def test_a_memory_saved_before_format_4_takes_its_json_facts(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    asks, refs = expected_facts(m)
    legacy_snapshot(m, tmp_path / "m.jvm", encode_derived(asks, refs))
    counted.update(ground=0, question_share=0)
    loaded = Memory.load(tmp_path / "m.jvm", EMBEDDER, LocalController())
    assert counted == {"ground": 0, "question_share": 0}
    assert derived_state(loaded) == derived_state(m)
    # the store keeps them now: saved again, they load from the snapshot
    loaded.save(tmp_path / "again.jvm")
    counted.update(ground=0, question_share=0)
    assert derived_state(Memory.load(tmp_path / "again.jvm", EMBEDDER, LocalController())) == (
        derived_state(m)
    )
    assert counted == {"ground": 0, "question_share": 0}


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(version=DERIVED_VERSION + 1),
        lambda d: d.update(asks=d["asks"][:-1]),
        lambda d: d.update(asks=[2.0] * len(d["asks"])),
        lambda d: d.update(ids=["0"] * len(d["ids"])),
        lambda d: d["time_refs"][0][1][0].__setitem__(3, "fortnight"),
        lambda d: d["time_refs"][0][1][0].pop(),
        lambda d: d["time_refs"].append([10_000, []]),
        lambda d: d.update(time_refs="junk"),
        lambda d: d.clear(),
    ],
)
def test_stale_or_malformed_json_facts_are_derived_anew(
    tmp_path: Path, counted: dict[str, int], change: Callable[[dict[str, Any]], None]
) -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    derived = encode_derived(*expected_facts(m))
    change(derived)
    legacy_snapshot(m, tmp_path / "m.jvm", derived)
    counted.update(ground=0, question_share=0)
    loaded = Memory.load(tmp_path / "m.jvm", EMBEDDER, LocalController())
    assert counted == {"ground": len(TEXTS), "question_share": len(TEXTS)}
    assert derived_state(loaded) == derived_state(m)


time_refs = st.builds(
    TimeRef,
    text=st.text(max_size=12),
    start=st.integers(-(2**40), 2**40),
    end=st.integers(-(2**40), 2**40),
    precision=st.sampled_from(sorted(PRECISIONS)),
    relative=st.booleans(),
    span=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
    anchor_precision=st.sampled_from(["", *sorted(PRECISIONS)]),
)


@given(
    st.dictionaries(
        st.integers(0, 10**9),
        st.tuples(st.floats(0.0, 1.0, allow_nan=False), st.lists(time_refs, max_size=3).map(tuple)),
        max_size=8,
    )
)
def test_encoding_round_trips_through_json(
    facts: dict[int, tuple[float, tuple[TimeRef, ...]]],
) -> None:
    asks = {i: a for i, (a, _) in facts.items()}
    refs = {i: r for i, (_, r) in facts.items() if r}
    back = decode_derived(json.loads(json.dumps(encode_derived(asks, refs))))
    assert back == DerivedFacts(asks, refs)
    for i in asks:
        assert back.refs_of(i) == refs.get(i, ())


@given(
    nodes=st.lists(
        st.tuples(
            # observation times the store takes: years 3 to 9997
            st.none() | st.integers(MIN_TIMESTAMP, MAX_TIMESTAMP),
            st.floats(0.0, 1.0, allow_nan=False),
            st.lists(time_refs, max_size=3).map(tuple),
        ),
        min_size=1,
        max_size=6,
    ),
    window=st.none() | st.tuples(st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40)),
    asks_when=st.booleans(),
)
def test_the_core_keeps_facts_whole_and_matches_times_as_python_did(
    nodes: list[tuple[int | None, float, tuple[TimeRef, ...]]],
    window: tuple[int, int] | None,
    asks_when: bool,
) -> None:
    store = MemoryStore(8)
    ids = [
        store.add(f"text {i}", np.ones(8, np.float32), timestamp=ts)
        for i, (ts, _, _) in enumerate(nodes)
    ]
    shares = [a for _, a, _ in nodes]
    store.set_derived(
        DERIVED_VERSION, ids, shares, [[ref_tuple(r) for r in refs] for *_, refs in nodes]
    )
    assert store.question_shares(ids).tolist() == shares
    assert store.derived_covered(ids) == [True] * len(ids)
    for i, (_, _, refs) in zip(ids, nodes, strict=True):
        assert tuple(ref_of(t) for t in store.time_refs(i)) == refs
    got = store.time_matches(ids, window, asks_when=asks_when).tolist()
    want = [time_match(refs, ts, window, asks_when) for ts, _, refs in nodes]
    assert got == want


def test_bad_derived_facts_change_nothing() -> None:
    store = MemoryStore(8)
    ids = [store.add(t, np.ones(8, np.float32), timestamp=T0) for t in ("a", "b")]
    ref = ("today", T0, T0 + DAY_S, "day", True, 0, 5, "")
    store.set_derived(DERIVED_VERSION, ids, [0.25, 0.5], [[ref], []])
    before = (store.question_shares(ids).tolist(), [store.time_refs(i) for i in ids])
    bad: list[tuple[Any, ...]] = [
        ([ids[0], 99], [0.1, 0.1], [[], []]),  # an unknown id
        ([ids[0], ids[0]], [0.1, 0.1], [[], []]),  # one node twice
        ([ids[0]], [1.5], [[]]),  # a share outside [0, 1]
        ([ids[0]], [math.nan], [[]]),
        ([ids[0]], [0.1], [[("x", 0, 1, "fortnight", False, 0, 1, "")]]),  # unknown precision
        ([ids[0]], [0.1], [[("x", 0, 1, "day", False, 0, 1, "eon")]]),
        ([ids[0]], [0.1, 0.2], [[]]),  # columns of different lengths
        ([ids[0]], [0.1], [[], []]),
    ]
    for args in bad:
        for logged in (True, False):
            with pytest.raises((InvalidInputError, NodeNotFoundError)):
                store.set_derived(DERIVED_VERSION + 1, *args, logged=logged)
            assert (
                store.question_shares(ids).tolist(),
                [store.time_refs(i) for i in ids],
            ) == before
            assert store.derived_version == DERIVED_VERSION


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=20,
)


@given(
    json_values
    | st.fixed_dictionaries(
        {"version": st.just(DERIVED_VERSION)},
        optional={"ids": json_values, "asks": json_values, "time_refs": json_values},
    )
)
def test_decoding_anything_never_raises(raw: Any) -> None:
    assert isinstance(decode_derived(raw), DerivedFacts)


#: sha256 of what `ground` and `question_share` return on SAMPLE, by
#: DERIVED_VERSION. A change to either function changes the digest: bump
#: DERIVED_VERSION (so snapshots written before derive anew) and record it.
#: (Version 2: a last sentence without an end mark can ask, "hey how have u
#: been"; version 3: counts are no dates, an amount from a day word shifts
#: it; version 4: ranges of months; version 5: ordinal weeks, weekends and
#: weekdays of a month; version 6: since a holiday, years 1000-1899 in
#: written dates, since a leap day. Their samples were added with them, so
#: the older digests are gone.)
DIGESTS = {6: "e3a8c323ce4e49085933d49df6dfdd6905548974b51aa6bed6d26ab268f3b2e4"}
SAMPLE = [
    *TEXTS,
    "Let's meet on Tuesday at 3pm.",
    "My birthday was in March 1990, three decades ago.",
    "Back in 2019 we lived in Porto; two years later we moved.",
    "The deadline is the end of next month?",
    "Last Christmas was cold. This spring has been warm.",
    "hey how have u been",
    "All 3 may attend; it cost 2000 dollars in 2019. See you a week from today.",
    "In 2019 prices rose; a crowd of 2000 fans came.",
    "In 2019: we moved twice between 2019 and 2021.",
    "See you on Dec 31, or on Feb 29.",
    "From April to July we travel; the 3 May deadline was between March and May 2023.",
    "The last week of June we moved; the first weekend in July 2023 we rested; "
    "since the first week of June it rains; the last Friday of May we met.",
    "Vegan since the fourth of July, and ever since Christmas; I love Christmas.",
    "Lincoln was born on February 12, 1809; on May 5, 1500 people came.",
    # past one piece of 16,384 characters: expressions across its cut
    "we met last Friday and two weeks ago " * 500,
    # observed on 14 March 2026, when the nearest Feb 29 (2028) lies ahead
    "We have counted leap days since Feb 29.",
]


def test_the_derivation_is_the_one_its_version_names() -> None:
    out: list[list[Any]] = []
    for i, text in enumerate(SAMPLE):
        out.append([question_share(text)])
        for r in ground(text, T0 + 86_400 * 37 * i):
            out[-1].append(
                [r.text, r.start, r.end, r.precision, r.relative, *r.span, r.anchor_precision]
            )
    digest = hashlib.sha256(json.dumps(out).encode()).hexdigest()
    assert derived_module.DERIVED_VERSION in DIGESTS
    assert digest == DIGESTS[derived_module.DERIVED_VERSION], (
        "ground or question_share changed what they return: bump DERIVED_VERSION in "
        f"jevmem/plane/derived.py and record {digest} for it here"
    )

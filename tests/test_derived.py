"""The facts a Memory derives from texts at write time (grounded time
references, question shares) ride in its snapshot and log: loading and
opening take them from there instead of deriving them again, and anything
stale or malformed is derived anew (jevmem.plane.derived)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jevmem import HashEmbedder, LocalController, Memory, MemoryStore
from jevmem.plane import derived as derived_module
from jevmem.plane import state as plane_state
from jevmem.plane.derived import (
    DERIVED_VERSION,
    DerivedFacts,
    decode_derived,
    encode_derived,
)
from jevmem.plane.text import question_share
from jevmem.temporal import PRECISIONS, TimeRef, ground

EMBEDDER = HashEmbedder(64)
T0 = 1_700_000_000
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
    """The part of `MemoryState.derived_state` the snapshot and log carry, or derive from it."""
    keys = ("time_refs", "asks", "timeline", "styles", "speakers")
    state = m.derived_state()
    return {k: state[k] for k in keys}


def from_scratch(m: Memory) -> dict[str, Any]:
    """What indexing the memory's nodes from their texts gives."""
    return derived_state(Memory(EMBEDDER, LocalController(), store=m.store))


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


def test_load_takes_the_facts_from_the_snapshot(tmp_path: Path, counted: dict[str, int]) -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    assert m.derived_state()["time_refs"], "the sample must ground something"
    m.save(tmp_path / "m.jvm")
    counted.update(ground=0, question_share=0)
    loaded = Memory.load(tmp_path / "m.jvm", EMBEDDER, LocalController())
    assert counted == {"ground": 0, "question_share": 0}
    assert derived_state(loaded) == derived_state(m)
    counted.update(ground=0, question_share=0)
    assert derived_state(loaded) == from_scratch(loaded)
    assert counted["ground"] == len(TEXTS)  # the oracle derived them


def test_a_node_the_snapshot_does_not_cover_is_derived(
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
    assert derived_state(loaded) == from_scratch(loaded)


def test_open_takes_the_facts_from_checkpoint_and_log(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    path = tmp_path / "mem"
    m = Memory.open(path, EMBEDDER, LocalController(), checkpoint_every=0, durability="none")
    build(m, TEXTS[:4])
    m.checkpoint()  # the first half in the checkpoint's state
    build(m, TEXTS[4:], start=T0 + 86_400)  # the rest only in log records
    m.forget([1])
    want = derived_state(m)
    m.store.close()  # no checkpoint: reopening replays the log
    counted.update(ground=0, question_share=0)
    reopened = Memory.open(path, EMBEDDER, LocalController())
    try:
        assert counted == {"ground": 0, "question_share": 0}
        assert derived_state(reopened) == want
        assert derived_state(reopened) == from_scratch(reopened)
    finally:
        reopened.close()


def rewrite_derived(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    store, raw = MemoryStore.load_with_state(path)
    state = json.loads(raw or b"{}")
    change(state["derived"])
    store.save_with_state(path, json.dumps(state).encode())


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
def test_stale_or_malformed_facts_are_derived_anew(
    tmp_path: Path, counted: dict[str, int], change: Callable[[dict[str, Any]], None]
) -> None:
    m = Memory(EMBEDDER, LocalController())
    build(m)
    m.save(tmp_path / "m.jvm")
    rewrite_derived(tmp_path / "m.jvm", change)
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
DIGESTS = {1: "670114956e9c14e91dfdf7bfa5d1d4e2f4d5cc2ff0e36f7cd1c2b2688f6c4890"}
SAMPLE = [
    *TEXTS,
    "Let's meet on Tuesday at 3pm.",
    "My birthday was in March 1990, three decades ago.",
    "Back in 2019 we lived in Porto; two years later we moved.",
    "The deadline is the end of next month?",
    "Last Christmas was cold. This spring has been warm.",
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

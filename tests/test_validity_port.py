"""Facts that change on the read path, in the core against their old Python form.

Which facts of a supersedes chain held at the time a query asks about, the
validity signals, the chain relatives pooled, the facts that must rank below
the one of their chain that held, and chains as a scoped search sees them
moved into the core (`jevmem._core.FactState`, `MemoryStore.fact_chains`
with ``allowed``). `tests/support/validity_reference` is the frozen Python
they replaced; on random stores of supersedes chains, scopes, query times
and batches of nodes, the two must agree exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.validity_reference import FactReference

from jevmem import InvalidInputError, MemoryStore, NodeNotFoundError
from jevmem._core import FactState

T0 = 1_700_000_000
DAY = 86_400
DIM = 8


def same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


@st.composite
def stores(draw: st.DrawFn) -> tuple[MemoryStore, list[int]]:
    n = draw(st.integers(2, 12))
    store = MemoryStore(DIM, exact_threshold=1_000)
    words = ["milk", "oat", "soy", "coffee", "tea", "dagster", "airflow", "paris", "rome"]
    ids = []
    for i in range(n):
        text = " ".join(draw(st.lists(st.sampled_from(words), min_size=1, max_size=4)))
        vec = draw(st.lists(st.floats(-1, 1), min_size=DIM, max_size=DIM))
        vec[i % DIM] += 2.0  # never all zero
        stamp = draw(st.one_of(st.none(), st.integers(T0, T0 + 30 * DAY)))
        scope = {"user": draw(st.sampled_from(["a", "b"]))}
        ids.append(store.add(f"{i} {text}", vec, timestamp=stamp, scope=scope))
    for _ in range(draw(st.integers(0, 2 * n))):
        new, old = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
        try:
            store.add_supersedes(new, old, draw(st.floats(0.1, 1.0)))
        except InvalidInputError:
            pass  # a self link or a cycle: refused, nothing changed
    for i in draw(st.lists(st.sampled_from(ids), max_size=3)):
        store.set_valid_from(i, draw(st.one_of(st.none(), st.integers(T0, T0 + 30 * DAY))))
    return store, ids


fact_times = st.one_of(
    st.just(("neutral", None, None)),
    st.just(("past", None, None)),
    st.tuples(st.just("present"), st.one_of(st.none(), st.integers(T0, T0 + 30 * DAY)), st.none()),
    st.integers(T0 - DAY, T0 + 30 * DAY).flatmap(
        lambda lo: st.tuples(st.just("dated"), st.just(lo), st.integers(lo, lo + 20 * DAY))
    ),
)


@given(
    stores(),
    fact_times,
    st.sampled_from([None, "a", "b"]),
    st.lists(st.lists(st.integers(0, 11), min_size=1, max_size=8), min_size=1, max_size=4),
    st.sampled_from(["milk", "oat milk", "tea in rome", "nothing"]),
)
@settings(max_examples=150, deadline=None)
def test_validity_equals_the_python_rules(
    built: tuple[MemoryStore, list[int]],
    time: tuple[str, int | None, int | None],
    user: str | None,
    batches: list[list[int]],
    query: str,
) -> None:
    store, ids = built
    allowed = None if user is None else store.select({"user": user})
    qvec = np.linspace(-1.0, 1.0, DIM, dtype=np.float32)
    stance, at, until = time
    ref = FactReference(store, query, qvec, 3.5, 0.8, stance, at, until, allowed)
    state = FactState(stance, at, until)
    assert store.fact_chains(ids, allowed=allowed) == ref.fact_chains(ids)
    for batch in batches:
        batch_ids = [ids[i % len(ids)] for i in batch]
        got = state.signals(
            store,
            batch_ids,
            query=query,
            vector=qvec,
            best_lexical=3.5,
            best_dense=0.8,
            allowed=allowed,
        )
        assert same(got, ref.signals(batch_ids)), (batch_ids, time)
        assert state.chain_relatives(store, batch_ids, allowed=allowed) == ref.chain_relatives(
            batch_ids
        )
    assert state.replaced() == sorted((k, sorted(v)) for k, v in ref.replaced.items())


def test_bad_fact_times_and_ids_raise_and_record_nothing() -> None:
    store = MemoryStore(DIM)
    a = store.add("oat milk", [1.0] + [0.0] * (DIM - 1), timestamp=T0)
    b = store.add("soy milk", [0.0, 1.0] + [0.0] * (DIM - 2), timestamp=T0 + DAY)
    store.add_supersedes(b, a, 0.9)
    with pytest.raises(InvalidInputError, match="stance"):
        FactState("sometime")
    with pytest.raises(InvalidInputError, match="until"):
        FactState("dated", T0)
    state = FactState("present")
    q = dict(query="milk", vector=[1.0] * DIM, best_lexical=1.0, best_dense=1.0)
    with pytest.raises(NodeNotFoundError):
        state.signals(store, [a, 99], **q)  # type: ignore[arg-type]
    assert state.replaced() == []
    with pytest.raises(InvalidInputError):
        state.signals(store, [a], query="milk", vector=[1.0], best_lexical=1.0, best_dense=1.0)
    cols = state.signals(store, [a, b], **q)  # type: ignore[arg-type]
    assert cols is not None and cols[:, 0].tolist() == [0.0, 1.0]
    assert state.replaced() == [(a, [b])]

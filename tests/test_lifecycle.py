"""Lifecycle: `Memory.forget`, `Memory.update`, `Memory.history`.

Forgotten observations leave no trace in any read path, in the snapshot's
bytes or in the Memory's derived state (which must equal what `Memory.load`
derives from the same store: the oracle); updates keep the old version in
history and rank the new one first; bad input changes nothing.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, LocalController, Memory, MemoryConfig, MemoryStore
from jevmem.controller import Choice, ChoiceAnswer, DecisionRequest, NoulAnswer, changes
from jevmem.controller import local as local_controller
from jevmem.errors import InvalidInputError, JevmemError, NodeNotFoundError
from jevmem.memory import Mode

DAY = 86_400
T0 = 1_767_225_600  # 2026-01-01 UTC
MODES: tuple[Mode, ...] = ("lexical", "anchors", "traversal", "full")
EMBEDDER = HashEmbedder()
HAND = LocalController()

FILLER = [
    ("Maya", "I started learning the cello this week, my teacher is called Ines."),
    ("Sam", "The build server ran out of disk again, I cleared the docker cache."),
    ("Maya", "My sister Lena found an apartment near the river."),
    ("Sam", "Because the deploy failed on Friday, we postponed the release to Monday."),
    ("Maya", "I booked flights for a holiday in June."),
    ("Sam", "How did the cello lesson go?"),
    ("Maya", "Ines picked a Bach suite for my recital on the 20th."),
    ("Sam", "The release went out on Monday without problems."),
]
#: Two observations that must vanish: one short, one long enough to be
#: indexed passage by passage (its canary sits in a later passage).
CANARY = "zqxvorpal"
SECRET = f"My bank PIN is {CANARY} and Qzvorpal from the bank said never to share it."
LONG_SECRET = (
    " ".join(
        f"Paragraph {i} of the diary talks about the garden, the weather and the dog."
        for i in range(40)
    )
    + f" The safe combination is {CANARY}, Maya wrote it down on a Tuesday."
)


def memory(controller: Any = None, **config: Any) -> Memory:
    return Memory(
        EMBEDDER,
        controller if controller is not None else HAND,
        config=MemoryConfig(**config) if config else None,
    )


def conversation(m: Memory, secrets: Sequence[str] = (SECRET, LONG_SECRET)) -> list[int]:
    """The filler as a timed chat with the secrets in the middle; the secrets' ids."""
    turns = [*FILLER[:4], *(("Maya", s) for s in secrets), *FILLER[4:]]
    ids = m.add_batch(
        [t for _, t in turns],
        timestamps=[T0 + i * 600 for i in range(len(turns))],
        speakers=[s for s, _ in turns],
    )
    return ids[4 : 4 + len(secrets)]


def live_ids(m: Memory) -> list[int]:
    return [i for i in range(m.store.next_id) if i in m.store]


def reloaded(m: Memory, tmp: Path | None = None) -> Memory:
    """The memory saved and loaded (`Memory.load` restores what the snapshot keeps)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d if tmp is None else tmp) / "m.jvm"
        m.save(path)
        return Memory.load(path, EMBEDDER, m.controller)


def rederived(m: Memory) -> Memory:
    """The oracle: the same store saved and loaded, every derived structure
    rebuilt from the texts (not taken from the facts the snapshot keeps)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.jvm"
        m.save(path)
        store, raw = MemoryStore.load_with_state(path)
        fresh = Memory(EMBEDDER, m.controller, store=store)
        state = json.loads(raw or b"{}")
        fresh.decisions, fresh._writes = state.get("decisions", []), state.get("writes", 0)
        return fresh


def python_state(m: Memory) -> dict[str, Any]:
    """Everything a Memory derives beside the store (`MemoryState.derived_state`)."""
    return m.derived_state()


def assert_matches_oracle(m: Memory) -> None:
    assert python_state(m) == python_state(rederived(m))


def traces_text(results: Sequence[Any]) -> str:
    """What the results say, but the queries (which may name the canary)."""
    return json.dumps(
        [{"evidence": [e.__dict__ for e in r.evidence], "trace": r.trace} for r in results],
        default=str,
    )


QUERIES = [
    f"What is {CANARY}?",
    "What is Maya's bank PIN?",
    "What is the safe combination Maya wrote down?",
    "What did Qzvorpal from the bank say?",
    "What did Maya say on 1 January 2026?",
]


def assert_no_trace(m: Memory, gone: Sequence[int]) -> None:
    """No read path returns, names or fails on a forgotten node."""
    gone_set = set(gone)
    for mode in MODES:
        results = m.search_batch(QUERIES, 10, mode=mode)
        results.append(m.search(QUERIES[0], 10, mode=mode))
        for r in results:
            assert gone_set.isdisjoint(e.id for e in r.evidence), (mode, r.query)
            for e in r.evidence:
                assert gone_set.isdisjoint(e.supersedes) and gone_set.isdisjoint(e.superseded_by)
                assert e.via is None or gone_set.isdisjoint({e.via.src, e.via.dst, e.via.from_node})
        text = traces_text(results)
        assert CANARY not in text and "Qzvorpal" not in text, mode
    for i in gone:
        assert i not in m
        for read in (m.get, m.neighbors, m.history, m.validity, m.supersedes, m.superseded_by):
            with pytest.raises(NodeNotFoundError):
                read(i)
    context = m.derived_state()["context"]
    for i in live_ids(m):
        for e in m.neighbors(i):
            assert e.src not in gone_set and e.dst not in gone_set
        assert gone_set.isdisjoint(m.history(i))
        assert gone_set.isdisjoint(m.supersedes(i)) and gone_set.isdisjoint(m.superseded_by(i))
        assert gone_set.isdisjoint(o for o, _ in context[i])
        assert CANARY not in m.get(i).text
    assert "qzvorpal" not in m.known_entities()
    s = m.stats()
    assert s["nodes"] == len(live_ids(m)) == len(m)
    for d in m.decisions:
        named = {d["focus"], *d["neighbours"], d.get("summary_id", -1)}
        assert gone_set.isdisjoint(named), d


# ---- forget ------------------------------------------------------------------------


def test_forget_leaves_no_trace_in_any_read_path(tmp_path: Path) -> None:
    m = memory(consolidation_period=3)
    gone = conversation(m)
    assert m.store.passages(gone[1]), "the long secret is indexed by passages"
    before = [e.id for e in m.search(QUERIES[0], 10, mode="lexical").evidence]
    assert set(gone) <= set(before)
    assert any(gone[0] in {d["focus"], *d["neighbours"]} for d in m.decisions)
    assert "qzvorpal" in m.known_entities()

    assert m.forget(gone) == 2
    assert_no_trace(m, gone)
    assert_matches_oracle(m)
    # real deletion: the snapshot and its side file hold none of it
    path = tmp_path / "m.jvm"
    m.save(path)
    for f in tmp_path.iterdir():
        data = f.read_bytes()
        assert CANARY.encode() not in data and b"Qzvorpal" not in data, f.name
    loaded = Memory.load(path, EMBEDDER, HAND)
    for d in loaded.decisions:  # the one file holds the decisions too
        assert not set(gone) & {d["focus"], *d["neighbours"]}
    assert live_ids(loaded) == live_ids(m)
    assert_no_trace(loaded, gone)
    # the default (learned) controller's full path too
    assert_no_trace(Memory.load(path, EMBEDDER), gone)


def test_forget_a_single_int_and_the_count() -> None:
    m = memory()
    gone = conversation(m, secrets=(SECRET,))
    n = len(m)
    assert m.forget(gone[0]) == 1
    assert len(m) == n - 1
    assert m.forget([]) == 0
    assert_no_trace(m, gone)


def test_forget_takes_any_iterable_of_ints() -> None:
    import numpy as np

    m = memory()
    ids = m.add_batch([f"note number {i}" for i in range(8)])
    assert m.forget(np.array(ids[:2])) == 2
    assert m.forget(np.int64(ids[2])) == 1
    assert m.forget({ids[3], ids[4]}) == 2
    assert m.forget(i for i in ids[5:7]) == 2
    assert m.forget((ids[7],)) == 1
    assert len(m) == 0
    assert_matches_oracle(m)


def test_forget_empties_text_keyed_caches() -> None:
    m = memory()
    gone = conversation(m)
    m.search(QUERIES[1])
    assert local_controller._count.cache_info().currsize > 0
    assert changes._own_sentences.cache_info().currsize > 0
    m.forget(gone)
    assert local_controller._count.cache_info().currsize == 0
    assert local_controller.cause_cue.cache_info().currsize == 0
    # the per-text and per-sentence reads of a change statement as well
    for cached in (
        changes._denies,
        changes._content_words,
        changes._own_sentences,
        changes._stated_values,
    ):
        assert cached.cache_info().currsize == 0


def test_forget_drops_the_rendered_time_of_a_forgotten_text() -> None:
    from jevmem.temporal import _describe

    m = memory()
    gone = m.add("I met Zorblatt on the second Tuesday of March 2025", timestamp=1_767_225_600)
    m.add("another note", timestamp=1_767_312_000)
    m.search("when did I meet Zorblatt?")
    assert _describe.describe.cache_info().currsize > 0
    m.forget(gone)
    # its key is a time reference, which holds the text's words
    assert _describe.describe.cache_info().currsize == 0


def test_forget_many_at_once_matches_the_oracle() -> None:
    m = memory(consolidation_period=4)
    speakers = ["Maya", "Sam", "Ines"]
    ids = m.add_batch(
        [f"{FILLER[i % len(FILLER)][1]} Item {i}." for i in range(90)],
        timestamps=[T0 + (i * 7919) % 90 * 300 for i in range(90)],  # out of order
        speakers=[speakers[i % 3] for i in range(90)],
    )
    m.search("cello recital", 5)
    gone = [*ids[1::2], ids[0]]  # more than the bisection path takes
    assert m.forget(gone) == len(gone)
    assert live_ids(m) == ids[2::2]
    assert_matches_oracle(m)
    # every turn of one speaker: the speaker is gone from the derived state
    sam = [i for i in live_ids(m) if m.get(i).provenance["speaker"] == "Sam"]
    m.forget(sam)
    state = m.derived_state()
    assert "sam" not in state["speakers"] and "sam" not in state["speaker_order"]
    assert "sam" not in m.store.speakers()
    assert_matches_oracle(m)


BAD_IDS: list[tuple[Any, type[JevmemError]]] = [
    ("3", InvalidInputError),
    (b"3", InvalidInputError),
    (3.0, InvalidInputError),
    (True, InvalidInputError),
    (None, InvalidInputError),
    ({0: 1}, InvalidInputError),
    ([0, "1"], InvalidInputError),
    ([0, None], InvalidInputError),
    ([0, 1.5], InvalidInputError),
    ([0, 0], InvalidInputError),
    ([1, 2, 1], InvalidInputError),
    ([0, 99], NodeNotFoundError),
    ([-1], NodeNotFoundError),
    ([2**70], NodeNotFoundError),
    (99, NodeNotFoundError),
]


@pytest.mark.parametrize(("ids", "error"), BAD_IDS, ids=[repr(b) for b, _ in BAD_IDS])
def test_bad_forget_changes_nothing(ids: Any, error: type[JevmemError]) -> None:
    m = memory(consolidation_period=3)
    conversation(m)
    m.forget([5])  # a gap, so "already forgotten" is tested too
    store_before = m.store.to_bytes()
    state_before = python_state(m)
    with pytest.raises(error):
        m.forget(ids)
    with pytest.raises(NodeNotFoundError):
        m.forget([0, 5])
    assert m.store.to_bytes() == store_before
    assert python_state(m) == state_before


def test_forgetting_versions_keeps_validity_sensible() -> None:
    m = memory()
    conversation(m, secrets=())
    a = m.add("I drink oat milk in my coffee.", speaker="Maya", timestamp=T0 + DAY)
    b = m.update(a, "I switched to soy milk in my coffee.", timestamp=T0 + 3 * DAY)
    c = m.update(b, "I switched to almond milk in my coffee.", timestamp=T0 + 5 * DAY)
    assert m.history(c) == [c, b, a]
    assert m.validity(a) == (T0 + DAY, T0 + 3 * DAY)
    # the middle version forgotten: the oldest stays replaced, by the newest
    m.forget([b])
    assert m.history(c) == [c, a]
    assert m.superseded_by(a) == [c]
    assert m.validity(a) == (T0 + DAY, T0 + 5 * DAY)
    assert_matches_oracle(m)
    # the newest forgotten: what it replaced is current again
    m.forget(c)
    assert m.history(a) == [a] and m.superseded_by(a) == []
    assert m.validity(a) == (T0 + DAY, None)
    top = m.search("What milk do I drink in my coffee now?", 5).evidence[0]
    assert top.id == a and top.superseded_by == ()
    # the oldest forgotten: the newer one keeps its own start and nothing behind it
    d = m.update(a, "I drink black coffee now, no milk.", timestamp=T0 + 9 * DAY)
    m.forget(a)
    assert m.history(d) == [d]
    assert m.validity(d) == (T0 + 9 * DAY, None)
    assert_matches_oracle(m)


class _FailsToConsolidate(LocalController):
    """The local controller, down on its consolidation round."""

    def decide(self, requests: Any) -> Any:
        requests = list(requests)
        if any(r.purpose == "consolidation" for r in requests):
            raise JevmemError("controller down")
        return super().decide(requests)


def test_a_facts_start_is_its_own_whatever_links_came_and_went() -> None:
    # a fact holds from when its text says it began, linked or not; a link
    # made and taken back (the newer version forgotten, a write whose
    # controller failed after its relation round) leaves no trace of it
    said = T0 + 9 * DAY  # Saturday 10 January 2026
    monday_before = T0 - 3 * DAY  # "last week" starts Monday 29 December
    m = memory()
    a = m.add("I moved to Porto last week", speaker="Maya", timestamp=said)
    assert m.validity(a) == (monday_before, None)
    b = m.update(a, "I moved to Lisbon", timestamp=said + 3 * DAY)
    assert m.validity(a) == (monday_before, said + 3 * DAY)
    m.forget(b)
    assert m.validity(a) == (monday_before, None)
    # the relation round links the new statement to the old, then the
    # consolidation round fails: the write is taken back, and so is the link
    f = memory(_FailsToConsolidate(), consolidation_period=2)
    old = f.add("I adjusted the snack budget to $50 last week", speaker="Maya", timestamp=said)
    before = (f.validity(old), f.store.supersedes_links(), f.derived_state())
    with pytest.raises(JevmemError, match="controller down"):
        f.add("I adjusted the snack budget to $75", speaker="Maya", timestamp=said + 3 * DAY)
    assert (f.validity(old), f.store.supersedes_links(), f.derived_state()) == before
    assert f.validity(old) == (monday_before, None)
    # one set by hand wins over the text, and None gives the text back
    f.store.set_valid_from(old, said)
    assert f.validity(old) == (said, None)
    f.store.set_valid_from(old, None)
    assert f.validity(old) == (monday_before, None)
    # a node without a time named in its text holds from its observation
    plain = m.add("I like tea", speaker="Maya", timestamp=said)
    assert m.validity(plain) == (said, None)


# ---- update and history --------------------------------------------------------------


def test_update_supersedes_and_search_prefers_the_new_text() -> None:
    m = memory()
    conversation(m, secrets=())
    old = m.add(
        "I drink oat milk in my coffee every morning.",
        speaker="Maya",
        provenance={"session": "s1", "source": "chat"},
        timestamp=T0 + DAY,
    )
    new = m.update(old, "I drink soy milk in my coffee now.", timestamp=T0 + 4 * DAY)
    assert new != old and old in m and new in m
    node = m.get(new)
    assert node.provenance == {"session": "s1", "source": "chat", "speaker": "Maya"}
    assert node.timestamp == T0 + 4 * DAY
    assert m.supersedes(new) == [old] and m.superseded_by(old) == [new]
    assert m.history(new) == [new, old]
    assert m.validity(old) == (T0 + DAY, T0 + 4 * DAY)
    assert m.validity(new) == (T0 + 4 * DAY, None)
    link = next(x for x in m.store.supersedes_links() if (x.new, x.old) == (new, old))
    assert link.weight == 1.0 and link.origin == "rule"
    for controller in (HAND, None):
        if controller is None:
            m.controller = Memory(EMBEDDER).controller  # the default (learned) one
        r = m.search("What milk does Maya drink in her coffee?", 10)
        ids = [e.id for e in r.evidence]
        assert ids[0] == new, [e.text for e in r.evidence[:3]]
        assert old in ids
        assert r.evidence[ids.index(old)].superseded_by == (new,)
    assert_matches_oracle(m)


def test_update_inherits_or_takes_speaker_and_provenance() -> None:
    m = memory()
    a = m.add("We deploy on Fridays.", speaker="Sam", provenance={"team": "ops"})
    b = m.update(a, "We deploy on Thursdays now.")
    assert m.get(b).provenance == {"team": "ops", "speaker": "Sam"}
    c = m.update(b, "Deploys moved to Wednesdays.", speaker="Maya")
    assert m.get(c).provenance == {"team": "ops", "speaker": "Maya"}
    d = m.update(c, "Deploys are on Tuesdays.", provenance={"team": "dev"})
    assert m.get(d).provenance == {"team": "dev", "speaker": "Maya"}
    e = m.update(d, "Deploys are daily.", provenance={"team": "dev", "speaker": "Ines"})
    assert m.get(e).provenance == {"team": "dev", "speaker": "Ines"}
    assert m.history(e) == [e, d, c, b, a]
    # the inherited speaker is embedded with the text, as add does
    assert m.store.embedding(b) == pytest.approx(
        EMBEDDER.embed_one("Sam: We deploy on Thursdays now.")
    )


@pytest.mark.parametrize(
    ("target", "error"),
    [
        (99, NodeNotFoundError),
        (-1, NodeNotFoundError),
        ("0", InvalidInputError),
        (None, InvalidInputError),
        (True, InvalidInputError),
    ],
)
def test_bad_update_changes_nothing(target: Any, error: type[JevmemError]) -> None:
    m = memory()
    ids = conversation(m)
    m.forget(ids[1])
    store_before = m.store.to_bytes()
    state_before = python_state(m)
    calls = dict(m.calls)
    with pytest.raises(error):
        m.update(target, "a new text")
    with pytest.raises(NodeNotFoundError):
        m.update(ids[1], "the forgotten one")
    with pytest.raises(InvalidInputError):
        m.update(ids[0], "   ")
    assert m.store.to_bytes() == store_before
    assert python_state(m) == state_before
    assert m.calls == calls


def test_history_errors() -> None:
    m = memory()
    a = m.add("first")
    with pytest.raises(NodeNotFoundError):
        m.history(a + 1)
    with pytest.raises(InvalidInputError):
        m.history("0")  # type: ignore[arg-type]
    m.forget(a)
    with pytest.raises(NodeNotFoundError):
        m.history(a)


# ---- summaries and the consolidation log -------------------------------------------------


class Merging(LocalController):
    """Every consolidation asks for a merged summary."""

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Any]]:
        out = super().decide(requests)
        for req, answers in zip(requests, out, strict=True):
            if req.purpose != "consolidation":
                continue
            for q in req.questions:
                if isinstance(q, Choice):
                    answers[q.id] = ChoiceAnswer(
                        "merge", {o: 1.0 if o == "merge" else 0.0 for o in q.options}
                    )
            answers["contradicting"] = NoulAnswer(0.0)
        return out


def test_summaries_of_a_forgotten_text_go_with_it(tmp_path: Path) -> None:
    m = Memory(
        EMBEDDER,
        Merging(),
        config=MemoryConfig(consolidation_period=2, consolidation_neighbours=3),
        summariser=lambda nodes: "Summary: " + " | ".join(n.text for n in nodes),
    )
    gone = conversation(m)
    summaries = [d["summary_id"] for d in m.decisions if "summary_id" in d]
    assert summaries, "the controller escalates every consolidation"
    leaking = [s for s in summaries if CANARY in m.get(s).text]
    assert leaking, "some summary repeats a secret"
    removed = m.forget(gone)
    assert removed >= 2 + len(leaking)
    for s in leaking:
        assert s not in m
    assert_no_trace(m, gone)
    m.save(tmp_path / "m.jvm")
    for f in tmp_path.iterdir():
        assert CANARY.encode() not in f.read_bytes(), f.name


# ---- removal behind the Memory's back ----------------------------------------------------


def test_store_level_remove_does_not_break_the_memory() -> None:
    m = memory(consolidation_period=3)
    gone = conversation(m)
    m.search(QUERIES[1])  # caches filled
    for i in gone:
        m.store.remove(i)  # not the Memory API: no bridges, no summaries
    assert_no_trace(m, gone)
    assert_matches_oracle(m)
    new = m.add("A later turn about the cello.", speaker="Maya", timestamp=T0 + 9000)
    assert new in m


# ---- random histories against a plain model ----------------------------------------------

WORDS = ["cello", "river", "docker", "release", "garden", "coffee", "flight", "recital"]


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["add", "add", "forget", "update", "bad", "reload", "remove"]))
        if kind == "add":
            ops.append(
                (
                    "add",
                    draw(st.sampled_from(["Maya", "Sam", "Ines", None])),
                    " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))),
                    draw(st.one_of(st.none(), st.integers(0, 20))),
                    draw(st.booleans()),
                )
            )
        else:
            ops.append((kind, draw(st.lists(st.integers(0, 50), min_size=1, max_size=3))))
    return ops


@settings(max_examples=50, deadline=None)
@given(operations())
def test_random_histories_match_a_plain_model(ops: list[tuple[Any, ...]]) -> None:
    m = memory(consolidation_period=3)
    model: dict[int, str] = {}  # visible id -> text
    serial = 0

    def text_of(words: str) -> str:
        nonlocal serial
        serial += 1
        return f"{words} note{serial}?" if serial % 3 == 0 else f"{words} note{serial}."

    for op in ops:
        kind = op[0]
        visible = sorted(model)
        if kind == "add":
            _, speaker, words, day, asks = op
            text = text_of(words) if not asks else text_of(words).rstrip(".") + "?"
            ts = None if day is None else T0 + day * 3600
            model[m.add(text, speaker=speaker, timestamp=ts)] = text
        elif kind == "update" and visible:
            old = visible[op[1][0] % len(visible)]
            text = text_of("updated")
            new = m.update(old, text, timestamp=T0 + 30 * 3600 + serial)
            model[new] = text
            assert m.history(new)[:2] == [new, old]
        elif kind in ("forget", "remove") and visible:
            chosen = sorted({visible[i % len(visible)] for i in op[1]})
            if kind == "forget":
                assert m.forget(chosen) == len(chosen)
            else:
                for i in chosen:
                    m.store.remove(i)
            for i in chosen:
                del model[i]
        elif kind == "bad":
            dead = max([*model, -1]) + 1 + op[1][0]
            ids = [*visible[:1], dead]
            before = m.store.to_bytes()
            with pytest.raises(NodeNotFoundError):
                m.forget(ids)
            if visible:
                with pytest.raises(InvalidInputError):
                    m.forget([visible[0], visible[0]])
            assert m.store.to_bytes() == before
        elif kind == "reload":
            m = reloaded(m)
        # the visible memory is the model's
        assert live_ids(m) == sorted(model)
        assert {i: m.get(i).text for i in model} == model
        if model:
            m.search(WORDS[serial % len(WORDS)], 5)
        assert_matches_oracle(m)
    # same answers as a memory rebuilt from the same store
    if model:
        fresh = rederived(m)
        for q in ("cello river", "coffee flight", "what is the note about docker?"):
            got = [(e.id, round(e.score, 9)) for e in m.search(q, 5).evidence]
            want = [(e.id, round(e.score, 9)) for e in fresh.search(q, 5).evidence]
            assert got == want, q


class _FailingIn(LocalController):
    """The hand rules, but one round of the write path fails when armed:
    by raising, or by answering NaN (which validation refuses)."""

    def __init__(self, purpose: str, how: str) -> None:
        super().__init__()
        self.purpose, self.how, self.armed = purpose, how, False

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Any]]:
        got = super().decide(requests)
        if self.armed and any(r.purpose == self.purpose for r in requests):
            if self.how == "raise":
                raise RuntimeError(f"backend down in the {self.purpose} round")
            return [{q.id: NoulAnswer(float("nan")) for q in r.questions} for r in requests]
        return got


@pytest.mark.parametrize("how", ["raise", "nan"])
@pytest.mark.parametrize("purpose", ["typing", "relations", "consolidation"])
def test_a_write_whose_controller_fails_leaves_what_the_memory_held(
    purpose: str, how: str, tmp_path: Path
) -> None:
    def reads(m: Memory) -> Any:
        return (
            len(m),
            m.matching_ids(),
            [(n.id, n.text) for n in m.list()[0]],
            [e.text for e in m.search("milk and cello", k=10, mode="full").evidence],
            [e.text for e in m.search("milk", k=10, mode="lexical").evidence],
            [d for d in m.decisions],
            m.stats()["nodes"],
        )

    texts = [f"Maya mentioned milk and cello, note {i}" for i in range(19)]
    m = Memory.open(tmp_path / "m", HashEmbedder(32), controller=_FailingIn(purpose, how))
    m.add_batch(texts, speakers=["Maya"] * 19)
    before = reads(m)
    m.controller.armed = True  # type: ignore[attr-defined]
    with pytest.raises(Exception, match=r"round|not in \[0, 1\]"):
        m.add_batch(["Maya switched from oat milk to soy milk", "and sold her cello"])
    assert reads(m) == before
    m.controller.armed = False  # type: ignore[attr-defined]
    new = m.add("Maya plays the cello on Sundays", speaker="Maya")
    assert new in m and len(m) == 20
    m.close()
    reopened = Memory.open(tmp_path / "m", HashEmbedder(32), controller=LocalController())
    assert sorted(n.text for n in reopened.list()[0]) == sorted(
        [*texts, "Maya plays the cello on Sundays"]
    )
    reopened.close()


def test_a_speaker_named_outright_is_the_one_kept() -> None:
    # it is the one embedded with the text; a provenance naming another
    # speaker used to be stored instead
    m = Memory(HashEmbedder(32), controller=LocalController())
    a = m.add("I moved to Lisbon", speaker="Ann", provenance={"speaker": "Bob", "dia_id": "D1:1"})
    b = m.add("I moved to Porto", provenance={"speaker": "Bob"})
    assert dict(m.get(a).provenance) == {"speaker": "Ann", "dia_id": "D1:1"}
    assert m.get(b).provenance["speaker"] == "Bob"
    assert "ann" in m.get(a).entities and "bob" not in m.get(a).entities

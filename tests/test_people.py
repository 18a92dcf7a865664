"""The people a memory knows: its speakers, and the labels that head its
speakerless texts as a transcript names who speaks ("Caroline: I ran ...").

A memory of observations without a speaker (an agent's notes of a chat, a
transcript stored line by line) says who speaks in its texts. The core
counts each label heading a speakerless text, and one that heads two or more
texts, at least half of them in the first or second person, is a person the
queries' names are checked against (`MemoryStore.people`), as a speaker is:
then the assessment can tell evidence about the person asked from evidence
about someone else.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jevmem
from jevmem.embed import HashEmbedder

NOTES = [
    "Caroline: I ran a charity race for mental health last Saturday.",
    "Melanie: That's amazing, you must be proud!",
    "Caroline: I painted a sunset over the lake with my kids.",
    "Melanie: I went camping with my family in the mountains.",
    "Caroline: we adopted a puppy named Oscar.",
    "Melanie: my daughter started piano lessons.",
]


def _notes_memory(controller: jevmem.SystemOne | None) -> jevmem.Memory:
    m = jevmem.Memory(HashEmbedder(64), controller)
    m.add_batch(NOTES, timestamps=[1_700_000_000 + 3_600 * i for i in range(len(NOTES))])
    return m


def test_transcript_labels_are_people_and_the_assessment_reads_them() -> None:
    for controller in (None, jevmem.LocalController()):  # the learned default, the hand rules
        m = _notes_memory(controller)
        assert m.store.people() == ["caroline", "melanie"]
        assert m.store.speakers() == []
        for thing in ("realize after the charity race", "paint"):
            right = m.search(f"What did Caroline {thing}?", k=3).sufficiency
            wrong = m.search(f"What did Melanie {thing}?", k=3).sufficiency
            assert right is not None and wrong is not None
            # what Caroline said answers a question about her, not about Melanie
            assert wrong < right, (controller, thing, wrong, right)


def test_labels_that_do_not_talk_are_not_people() -> None:
    m = jevmem.Memory(HashEmbedder(32), jevmem.LocalController())
    m.add_batch(
        [
            "Note: the lease ends in May",
            "Note: rent is due on the first",
            "Status: I am done with the report",
            "Sam: I moved to Lisbon",
            "Sam: you would love the food here",
            "10:30 standup with the team",
        ]
    )
    # "note" never speaks in the first or second person, "status" heads one text
    assert m.store.people() == ["sam"]
    # a speaker's text is not read for a label
    m.add("Gina: I am here too", provenance={"speaker": "Jon"})
    m.add("Gina: me as well", provenance={"speaker": "Jon"})
    assert m.store.people() == ["jon", "sam"]
    assert m.store.speakers() == ["jon"]


LABELS = ["Ana", "Bo Li", "Note", "ana"]
SAID = ["I saw the film", "you should come", "it rained all day", "the bus was late"]


@st.composite
def _observations(draw: st.DrawFn) -> list[tuple[str, str | None, str]]:
    """(text, speaker or None, scope user) per observation."""
    n = draw(st.integers(0, 14))
    out = []
    for _ in range(n):
        label = draw(st.sampled_from(LABELS))
        said = draw(st.sampled_from(SAID))
        speaker = draw(st.sampled_from([None, None, "Jon", "Pia"]))
        text = f"{label}: {said}" if draw(st.booleans()) else said
        out.append((text, speaker, draw(st.sampled_from(["u1", "u2"]))))
    return out


def _memory_of(observations: list[tuple[str, str | None, str]]) -> jevmem.Memory:
    m = jevmem.Memory(HashEmbedder(16), jevmem.LocalController())
    for text, speaker, user in observations:
        m.add(text, provenance={"speaker": speaker} if speaker else None, scope={"user": user})
    return m


@settings(max_examples=40, deadline=None)
@given(obs=_observations(), gone=st.lists(st.booleans(), min_size=14, max_size=14))
def test_people_read_as_a_memory_of_the_remaining_nodes(
    obs: list[tuple[str, str | None, str]],
    gone: list[bool],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """After forgetting, after a save and load, and within a scope, the people
    are those of a memory that only ever held the nodes left (in order)."""
    m = _memory_of(obs)
    ids = m.matching_ids()
    dropped = [i for i, g in zip(ids, gone, strict=False) if g]
    if dropped:
        m.forget(dropped)
    kept = [o for o, g in zip(obs, gone + [False] * len(obs), strict=False) if not g]
    assert m.store.people() == _memory_of(kept).store.people()
    path = tmp_path_factory.mktemp("people") / "m.jvm"
    m.save(path)
    assert jevmem.Memory.load(path, HashEmbedder(16)).store.people() == m.store.people()
    for user in ("u1", "u2"):
        allowed = m.store.select({"user": user})
        mine = [o for o in kept if o[2] == user]
        got = m.store.people(allowed=allowed) if allowed is not None else m.store.people()
        assert got == _memory_of(mine).store.people()


def test_a_note_its_person_says_ranks_as_theirs() -> None:
    """Asked about one person, what a note headed by someone else's label
    says ranks at `other_speaker_share` of its score, as another speaker's
    turn does; that person's own notes keep theirs."""
    notes = [
        "Caroline: I play the violin every evening",
        "Melanie: I play the violin every evening",
    ]

    def scores(who: str, share: float) -> dict[int, float]:
        config = jevmem.MemoryConfig(other_speaker_share=share)
        m = jevmem.Memory(HashEmbedder(64), jevmem.LocalController(), config=config)
        m.add_batch(notes * 2)  # twice each: both labels are people
        r = m.search(f"What does {who} play?", k=4)
        assert r.trace["speaker_asked"] == who.lower()
        return {e.id: e.score for e in r.evidence}

    for who, own in (("Caroline", (0, 2)), ("Melanie", (1, 3))):
        plain, shared = scores(who, 1.0), scores(who, 0.5)
        for i in range(4):
            want = plain[i] if i in own else 0.5 * plain[i]
            assert shared[i] == pytest.approx(want), (who, i)

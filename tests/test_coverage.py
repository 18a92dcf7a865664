"""Content coverage in the core against its old Python form.

A node's sentences and person marks, the names it uses other than as
address, its question share, whether a text speaks in the first person, the
query tokens the best evidence contains, and from these the content coverage
the assessment reads, moved into the core (`MemoryStore.content_coverage`,
`.text_marks`, `.tokens_present`, `jevmem._core.question_share`,
`.speaks_in_first_person`). `tests/support/coverage_reference` is the frozen
Python they replaced; the ports must give the same answers on every
development text when the data sits beside the repository, and on generated
text always.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import coverage_reference as ref

import jevmem
from jevmem import MemoryStore, NodeNotFoundError
from jevmem._core import question_share, speaks_in_first_person
from jevmem.evaluation import conversation_inputs, load
from jevmem.plane.query import QueryRun

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEV_SETS = [DATA / "locomo" / "locomo10-dev.json", DATA / "beam" / "beam-100k.json"]

# The rules' own vocabulary, and the characters Python's re folds onto it.
WORDS = [
    "I", "i'm", "I've", "me", "My", "mine", "we", "We're", "OUR", "us", "myself", "you",
    "You're", "your", "yourself", "Hey", "hi", "Thanks", "thank you", "congrats", "wow",
    "Oh", "yes", "OK", "okay", "well", "bye", "Dear", "aww", "haha", "omg", "Caroline",
    "Mel", "Melanie", "Gina", "Jon", "McDonald", "Ab", "NASA", "caroline", "went", "camping",
    "adoption", "agencies", "research", "desert", "Oregon", ",", ".", "!", "?", "...", "?!",
    "\n", "\t", "  ", "'", "_", "2", "\u0130", "\u0131", "\u017f", "\u212a", "u\u017f",
    "\u00c9mile", "Caf\u00e9", "\u00a0", "\u2019", "\u3000", "\u001c",
]  # fmt: skip
vocab_text = st.lists(st.sampled_from(WORDS), max_size=40).map(
    lambda ws: "".join(w if i % 3 == 0 else " " + w for i, w in enumerate(ws))
)
# without the characters Python 3.11's Unicode 14 leaves unassigned (the
# core cases them by a newer Unicode, a documented difference)
any_text = st.one_of(
    vocab_text, st.text(st.characters(exclude_categories=("Cn", "Cs")), max_size=120)
)
STORE = MemoryStore(4)


def marks_ref(text: str) -> tuple[list[str], list[tuple[list[str], float, bool, bool]]]:
    named, sentences = ref.text_marks(text, STORE.tokenize)
    return named, [(list(s.words), s.weight, s.first_person, s.second_person) for s in sentences]


def same_text_rules(text: str) -> None:
    assert STORE.text_marks(text) == marks_ref(text), text[:80]
    assert question_share(text) == ref.question_share(text), text[:80]
    assert speaks_in_first_person(text) == (ref.FIRST_PERSON.search(text) is not None), text[:80]


@given(any_text)
@settings(max_examples=500, deadline=None)
def test_text_rules_equal_the_python_rules(text: str) -> None:
    same_text_rules(text)


def test_forms_of_address_and_folded_letters() -> None:
    for text in (
        "Hey Gina, Caroline said so.",
        "Thanks, Mel! Bye",
        "Oh, Caroline!",
        "\n Mel!",
        "\u0130 went. U\u017f too? Ok\u212aay Gina.",
        "well,\u00a0Jon! thank  you Mel.",
        "So, Melanie? Mel.",
    ):
        same_text_rules(text)


def dialogue(rows: list[tuple[str, str | None]]) -> tuple[jevmem.Memory, list[int]]:
    m = jevmem.Memory(embedder=jevmem.HashEmbedder(64))
    ids = m.add_batch(
        [t for t, _ in rows],
        timestamps=[1_700_000_000 + 60 * i for i in range(len(rows))],
        speakers=[s for _, s in rows],
        provenances=[{"session": "1"} for _ in rows],
    )
    return m, ids


def text_label(text: str) -> str | None:
    """`jevmem_core::style::text_label`, for the ASCII texts generated here:
    the label heading a transcript line ("Caroline: I went"), lower-cased."""
    text = text.lstrip()
    line = text.split("\n", 1)[0]
    if ":" not in line:
        return None
    label, rest = text[: line.index(":")], text[line.index(":") + 1 :]
    if not label or len(label.encode()) > 40 or not rest[:1].isspace() or not rest.strip():
        return None
    words = label.split(" ")
    if len(words) > 3 or not all(words) or not words[0][0].isalpha():
        return None
    if not all(w[0].isalnum() and all(c.isalnum() or c in "'\u2019.-" for c in w) for w in words):
        return None
    return label.lower()


def transcript_segments(text: str, people: set[str]) -> list[tuple[str, str]] | None:
    """`jevmem_core::coverage::transcript_segments`: (speaker, words) per
    segment opened by a line headed by one of the people's labels."""
    out, own, start, found, at = [], "", 0, False, 0
    for line in text.splitlines(keepends=True):
        label = text_label(line)
        if label is not None and label in people:
            out.append((own, text[start:at]))
            own, start, found = label, at + line.index(":") + 1, True
        at += len(line)
    return [*out, (own, text[start:])] if found else None


def coverage_ref(
    m: jevmem.Memory, node: int, content: set[str], asked: list[str], people: set[str]
) -> tuple[float, float]:
    """The frozen rules (`support.coverage_reference`), with who speaks read
    as the core reads it now: a speakerless node's transcript segments each
    credited as its speaker's turn, token by token (a token keeps its best
    credit over the segments), and a neighbour's voice its transcript label
    where it has no speaker."""
    store = m.store

    def voice(i: int) -> str:
        spk = store.get(i).provenance.get("speaker", "").lower()
        if spk:
            return spk
        label = text_label(store.get(i).text)
        return label if label is not None and label in people else ""

    def addressees(own: str) -> set[str]:
        out = set()
        for e in store.neighbors(node, "temporal"):
            spk = voice(e.dst if e.src == node else e.src)
            if spk and spk != own:
                out.add(spk)
        return out

    text = store.get(node).text
    speaker = store.get(node).provenance.get("speaker", "").lower()
    # a text over the core's TRANSCRIPT_READ_BYTES (16 KiB) is read whole
    readable = asked and people and not speaker and len(text.encode()) <= 16 * 1024
    segments = transcript_segments(text, people) if readable else None
    if segments is None:
        named, sentences = ref.text_marks(text, store.tokenize)
        return ref.content_coverage(
            content, asked, people, speaker, named, sentences, lambda: addressees(speaker)
        )
    around = addressees("")
    credit = {t: 0.0 for t in content}
    other = {t: 0.0 for t in content}
    for own, words in segments:
        named, sentences = ref.text_marks(words, store.tokenize)
        to = {s for s, _ in segments if s and s != own} | (around - {own})

        def spoken_to(to: set[str] = to) -> set[str]:
            return to

        for t in content:
            mine, theirs = ref.content_coverage(
                {t}, asked, people, own, named, sentences, spoken_to
            )
            credit[t], other[t] = max(credit[t], mine), max(other[t], theirs)
    n = len(content)
    return (sum(credit.values()) / n, sum(other.values()) / n) if n else (0.0, 0.0)


SPEAKERS = ["Caroline", "Melanie", "Mel", "Jon", None]
# turns dense in what coverage reads: person words, names, content words, stops
TURN_WORDS = [
    "I", "my", "We", "you", "your", "Hey", "Thanks", "Caroline", "Mel", "Melanie", "Jon",
    "Gina", "went", "camping", "adoption", "research", "desert", "Oregon", ",", ".", "?", "!",
]  # fmt: skip
turn_text = st.lists(st.sampled_from(TURN_WORDS), min_size=1, max_size=24).map(" ".join)
# a transcript stored as one observation: lines headed by a speaker's label or not
transcript_line = st.tuples(
    st.sampled_from(["Caroline: ", "Mel: ", "Jon: ", "Gina: ", "Note: ", "", "  Melanie:  "]),
    turn_text,
).map("".join)
transcript = st.lists(transcript_line, min_size=1, max_size=4).map("\n".join)
turn = st.tuples(
    st.one_of(turn_text, vocab_text.filter(str.strip), transcript), st.sampled_from(SPEAKERS)
)
token = st.sampled_from(["went", "camp", "adopt", "agenc", "research", "desert", "oregon"])


@given(
    st.lists(turn, min_size=1, max_size=8),
    st.sets(token, max_size=4),
    st.lists(st.sampled_from(["caroline", "mel", "melanie smith", "jon", "oregon"]), max_size=2),
    st.sets(st.sampled_from(["caroline", "melanie", "mel", "jon", "gina", "note"]), max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_content_coverage_equals_the_python_rules(
    rows: list[tuple[str, str | None]], content: set[str], asked: list[str], people: set[str]
) -> None:
    m, ids = dialogue(rows)
    got = m.store.content_coverage(ids, sorted(content), asked, sorted(people))
    assert got.shape == (len(ids), 2)
    want = [coverage_ref(m, i, content, asked, people) for i in ids]
    assert [tuple(r) for r in got.tolist()] == want
    # a batch is the nodes one by one
    for i, row in zip(ids, got.tolist(), strict=True):
        one = m.store.content_coverage([i], sorted(content), asked, sorted(people))
        assert one.tolist() == [row]


@given(
    st.lists(
        st.tuples(transcript, st.sampled_from([None, None, None, "Jon"])), min_size=1, max_size=6
    ),
    st.sets(token, min_size=1, max_size=4),
    st.lists(st.sampled_from(["caroline", "mel", "jon", "gina"]), min_size=1, max_size=2),
    st.sets(st.sampled_from(["caroline", "mel", "jon", "gina", "note"]), min_size=1, max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_transcripts_are_read_segment_by_segment(
    rows: list[tuple[str, str | None]], content: set[str], asked: list[str], people: set[str]
) -> None:
    """Speakerless observations that hold transcripts ("Caroline: I went
    camping"), asked about people whose labels head their lines: each
    segment is its speaker's turn (`coverage_ref`)."""
    m, ids = dialogue(rows)
    got = m.store.content_coverage(ids, sorted(content), asked, sorted(people))
    assert [tuple(r) for r in got.tolist()] == [
        coverage_ref(m, i, content, asked, people) for i in ids
    ]


def test_a_long_transcript_is_read_whole() -> None:
    # over 16 KiB a transcript is read from its write-time marks, whole: a
    # query's cost stays bounded whatever a pasted log's length
    lines = ["Caroline: I went camping.", "Mel: you went to the desert?"]
    short = "\n".join(lines * 10)
    long = "\n".join(lines * 400)
    assert len(short) < 16 * 1024 < len(long)
    m, ids = dialogue([(short, None), (long, None)])
    people = {"caroline", "mel"}
    got = m.store.content_coverage(ids, ["camp", "desert"], ["mel"], sorted(people))
    want = [coverage_ref(m, i, {"camp", "desert"}, ["mel"], people) for i in ids]
    assert [tuple(r) for r in got.tolist()] == want
    # the short one read segment by segment, the long one as one text
    assert want[0] != want[1]


@given(st.lists(turn, min_size=1, max_size=6), st.lists(token, max_size=5))
@settings(max_examples=60, deadline=None)
def test_tokens_present_are_each_texts_tokens(
    rows: list[tuple[str, str | None]], tokens: list[str]
) -> None:
    m, ids = dialogue(rows)
    got = m.store.tokens_present(ids, tokens)
    assert got.shape == (len(ids), len(tokens))
    for i, row in zip(ids, got.tolist(), strict=True):
        own = set(m.store.tokenize(m.store.get(i).text))
        assert row == [t in own for t in tokens]
    assert m.store.tokens_present([], tokens).shape == (0, len(tokens))


def test_unknown_nodes_raise_and_change_nothing() -> None:
    m, ids = dialogue([("I went camping.", "Mel"), ("Did you?", "Jon")])
    before = m.derived_state()
    with pytest.raises(NodeNotFoundError):
        m.store.content_coverage([ids[0], 99], ["camp"], ["mel"], ["mel"])
    with pytest.raises(NodeNotFoundError):
        m.store.tokens_present([99], ["camp"])
    assert m.derived_state() == before


@pytest.mark.skipif(not all(p.exists() for p in DEV_SETS), reason="development sets not found")
def test_every_development_text_gets_the_python_answers() -> None:
    compared = 0
    for path in DEV_SETS:
        convs, _ = load(path)
        for conv in convs:
            texts, _, _, _ = conversation_inputs(conv)
            for text in texts + [qa.question for qa in conv.qas]:
                same_text_rules(text)
                compared += 1
    assert compared > 9_000


@pytest.mark.skipif(not DEV_SETS[0].exists(), reason="development sets not found")
def test_development_questions_get_the_python_coverage() -> None:
    # one LoCoMo conversation: every question's coverage of its 20 best lexical matches
    convs, _ = load(DEV_SETS[0])
    conv = convs[0]
    texts, stamps, speakers, provs = conversation_inputs(conv)
    m = jevmem.Memory(embedder=jevmem.HashEmbedder(64))
    m.add_batch(texts, timestamps=stamps, speakers=speakers, provenances=provs)
    compared = 0
    for qa in conv.qas:
        q = qa.question
        run = QueryRun(m, q, m.embedder.embed([q])[0], 10, None, "full", 0.0)
        content = run.session.inputs()["content_tokens"]
        found, _ = m.store.search_lexical(q, 20)
        ids = [int(i) for i in found]
        got = run.coverages(ids)
        want = [coverage_ref(m, i, set(content), list(run.asked_people), run.speakers) for i in ids]
        assert got == want, q
        compared += len(ids)
    assert compared > 1_000
    assert np.isfinite(np.array(got)).all()

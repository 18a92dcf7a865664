"""Related words: a rare query word also matches the words close to it in
meaning ("job" for "work"), and any query word its other spelling
("colour" for "color"), in the anchors' lexical ranking and in every
lexical signal of the search; a common word, a word the table lacks and a
memory configured without them search the query's own terms only."""

from __future__ import annotations

import re
import struct
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, InvalidConfigError, Memory, MemoryConfig
from jevmem._core import MemoryStore

LENA = [
    "Lena found an apartment near the river in Lisbon.",
    "Lena's new job in Lisbon is at a marine research lab.",
    "I booked flights to visit Lena in Lisbon in June.",
    "The build server ran out of disk again.",
]


def memory(**config: object) -> Memory:
    # the hashing embedder: the dense match is noise, so the lexical
    # ranking decides what leads the anchors
    m = Memory(HashEmbedder(64), config=MemoryConfig(**config))  # type: ignore[arg-type]
    m.add_batch(LENA, speakers=["Maya"] * len(LENA))
    return m


def test_a_rare_word_brings_its_related_words_the_memory_holds() -> None:
    m = memory()
    related = dict(m.store.related_terms("Where does Lena work?"))
    assert "job" in related and 0.3 < related["job"] <= 0.5
    # the query's own terms are never among them, nor a word nobody said
    assert "work" not in related and "lena" not in related
    assert all(m.store.search_lexical(t, 1)[0].size for t in related)


def test_the_turn_that_says_job_answers_where_lena_works() -> None:
    job = 1
    got = memory().search("Where does Lena work?", 4, mode="anchors")
    assert got.evidence[0].id == job
    # BM25 alone reads the query's own terms: "work" matches nothing
    ids, _ = memory().store.search_lexical("Where does Lena work?", 4)
    assert job not in ids[:1]


def test_a_common_word_is_not_widened() -> None:
    m = memory()
    m.add_batch([f"I work late on day {i}." for i in range(4)])
    assert m.store.related_terms("Where does Lena work?") == []


def test_a_memory_configured_without_them_reads_its_own_terms() -> None:
    on, off = memory(), memory(related_words=False)
    q = "Where does Lena work?"
    assert [e.id for e in off.search(q, 4, mode="anchors").evidence] != [
        e.id for e in on.search(q, 4, mode="anchors").evidence
    ]
    with pytest.raises(InvalidConfigError):
        MemoryConfig(related_words="yes")  # type: ignore[arg-type]


WORDS = ["lena", "lisbon", "river", "job", "work", "flights", "disk", "server", "zzqx", "where"]


@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join))
@settings(max_examples=40, deadline=None)
def test_without_related_terms_a_search_is_the_plain_one(query: str) -> None:
    on, off = memory(), memory(related_words=False)
    if on.store.related_terms(query):
        return
    for mode in ("anchors", "full"):
        a = on.search(query, 4, mode=mode)
        b = off.search(query, 4, mode=mode)
        assert [(e.id, e.score) for e in a.evidence] == [(e.id, e.score) for e in b.evidence]


#: (British, American) spellings of one word
SPELLINGS = [
    ("colour", "color"),
    ("favourite", "favorite"),
    ("organised", "organized"),
    ("analyse", "analyze"),
    ("centre", "center"),
    ("travelled", "traveled"),
    ("practise", "practice"),
    ("catalogue", "catalog"),
    ("grey", "gray"),
    ("licence", "license"),
]


@given(
    st.sampled_from(SPELLINGS),
    st.booleans(),
    st.integers(min_value=0, max_value=5),
)
@settings(max_examples=40, deadline=None)
def test_a_word_finds_the_turn_written_in_its_other_spelling(
    pair: tuple[str, str], british_written: bool, others: int
) -> None:
    written, asked = pair if british_written else pair[::-1]
    m = Memory(HashEmbedder(64))
    ids = m.add_batch([f"Filler note number {i}." for i in range(others)] + [f"The {written} one."])
    query = f"Which {asked}?"
    related = dict(m.store.related_terms(query))
    # the other spelling at a query term's weight (none where the two share
    # a stem already: "travelled" and "traveled")
    assert list(related.values()) in ([1.0], [])
    assert m.search(query, 3, mode="anchors").evidence[0].id == ids[-1]
    # the spelling asked, written too: both turns found, each by its own
    both = m.add(f"Another {asked} one.")
    got = {e.id for e in m.search(query, 2, mode="anchors").evidence}
    assert got == {ids[-1], both}


def test_related_terms_of_an_empty_store_are_none() -> None:
    assert MemoryStore(8).related_terms("Where does Lena work?") == []


TABLE = Path(__file__).resolve().parents[1] / "rust" / "core" / "data" / "related_words.bin"


def read_table() -> dict[str, list[tuple[str, float]]]:
    """The table as `scripts/build_related_words.py` wrote it."""
    b = TABLE.read_bytes()
    assert b[:6] == b"JVRW1\n"
    n, length = struct.unpack_from("<II", b, 6)
    words = b[14 : 14 + length].decode("ascii").split("\n")
    at = 14 + length
    offsets = struct.unpack_from(f"<{n + 1}I", b, at)
    at += 4 * (n + 1)
    out = {}
    for i, w in enumerate(words):
        entries = [
            struct.unpack_from("<HB", b, at + 3 * k) for k in range(offsets[i], offsets[i + 1])
        ]
        out[w] = [(words[j], s / 255.0) for j, s in entries]
    return out


def related_reference(
    store: MemoryStore, texts: list[str], query: str, table: dict[str, list[tuple[str, float]]]
) -> list[tuple[str, float]]:
    """`MemoryStore.related_terms` written out in Python (default settings:
    a word at most 1 % of the nodes hold, related words at least 0.6 alike,
    three per word, each weighing half its similarity)."""
    time_words = {"now", "nowadays", "anymore"}
    own = set(store.tokenize(" ".join(w for w in query.split() if w.lower() not in time_words)))
    df = Counter(t for text in texts for t in set(store.tokenize(text)))
    out: dict[str, float] = {}
    seen: set[str] = set()
    for word in re.findall(r"[A-Za-z0-9]+", query):
        lower = word.lower()
        if lower in time_words or lower in seen:
            continue
        seen.add(lower)
        stem = store.tokenize(lower)
        if not stem or df[stem[0]] > 0.01 * len(texts):
            continue
        taken = 0
        for related, similarity in table.get(lower, []):
            if taken == 3 or similarity < 0.6:
                break
            term = store.tokenize(related)
            if not term or term[0] in own or term[0] == stem[0] or df[term[0]] == 0:
                continue
            if term[0] in out:
                out[term[0]] = max(out[term[0]], 0.5 * similarity)
            else:
                out[term[0]] = 0.5 * similarity
                taken += 1
    return sorted(out.items())


VOCAB = [
    "work", "job", "jobs", "employment", "kids", "children", "child", "family", "parents",
    "movies", "film", "films", "cinema", "city", "cities", "town", "urban", "recipes", "cooking",
    "baking", "colleagues", "associates", "friends", "garden", "river", "the", "now", "lena",
]  # fmt: skip


@given(
    st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join), max_size=12),
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=5).map(" ".join),
)
@settings(max_examples=150, deadline=None)
def test_related_terms_are_the_python_rule(texts: list[str], query: str) -> None:
    store = MemoryStore(4)
    for i, text in enumerate(texts):
        store.add(text, [1.0, float(i), 0.0, 0.0])
    assert store.related_terms(query) == related_reference(store, texts, query, _TABLE)


_TABLE = read_table()

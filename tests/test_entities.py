"""Rule-based entity extraction and query mentions (jevmem.entities)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jevmem.entities import extract_entities, mentions, normalise


def test_normalise() -> None:
    assert normalise("  New   York ") == "new york"
    assert normalise("Caroline\u2019s") == "caroline"
    assert normalise("James'") == "james"
    assert normalise("LGBTQ") == "lgbtq"
    assert normalise("") == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to a LGBTQ support group in New York with Mel.", ["lgbtq", "new york", "mel"]),
        ("Hey Caroline! Good to see you! I'm swamped with the kids & work.", ["caroline"]),
        (
            "Yesterday I watched Lord of the Rings with Dr. Smith and Caroline's mom.",
            ["lord of the rings", "smith", "caroline"],
        ),
        ("Thanks, Melanie! This necklace is from Sweden.", ["melanie", "sweden"]),
        ("I love the LGBTQ+ community and #Pride, ping @mel_r.", ["lgbtq", "#pride", "@mel_r"]),
        ("We went to Bank of America on Monday in May.", ["bank of america"]),
        ("My new iPhone from Barnes & Noble", ["iphone", "barnes & noble"]),
        (
            "Caroline and Melanie met John in Paris, France.",
            ["caroline", "melanie", "john", "paris", "france"],
        ),
        ("Wow, that's awesome! Seeing you happy makes me happy.", []),
        ("I LOVE THIS SO MUCH #yay", ["#yay"]),
        ("OMG lol, BTW I met Tim", ["tim"]),
        ("The Beatles played in Hamburg.", ["beatles", "hamburg"]),
        ("On Friday we visited the Grand Canyon. It was huge.", ["grand canyon"]),
        ("I'm reading Patrick Rothfuss's book.", ["patrick rothfuss"]),
        ("Painting is fun. I paint every day, painting is my life.", []),
        ("", []),
        ("   ", []),
    ],
)
def test_extract_from_text(text: str, expected: list[str]) -> None:
    assert extract_entities(text) == expected


def test_speaker_provenance_extra_order_and_dedupe() -> None:
    got = extract_entities(
        "Hey Mel, Caroline here. Caroline loves Sweden.",
        speaker=" Caroline ",
        provenance={
            "session": "3",
            "dia_id": "D1:3",
            "Author": "Caroline",
            "participants": "Mel; Jon ,  Gina",
            "source": "Chat Log",
        },
        extra=["Support Group", "mel", 3],  # type: ignore[list-item]
    )
    assert got == ["caroline", "mel", "sweden", "jon", "gina", "support group"]


def test_extra_only() -> None:
    assert extract_entities("nothing here", extra=["  A  B "]) == ["a b"]


def test_stable_and_idempotent() -> None:
    text = "John met Maria at Nike in NYC; Maria met John."
    assert extract_entities(text) == extract_entities(text) == ["john", "maria", "nike", "nyc"]


def test_mentions() -> None:
    known = ["caroline", "New York", "york", "mel", "LGBTQ", "@mel_r", "lord of the rings"]
    assert mentions("When did Caroline's friend visit New   York?", known) == [
        "caroline",
        "new york",
    ]
    assert mentions("Does York have a team?", known) == ["york"]
    assert mentions("What did Melanie say?", known) == []  # whole words only
    assert mentions("Is mel into the LGBTQ+ scene?", known) == ["mel", "lgbtq"]
    assert mentions("Did @mel_r post?", known) == ["@mel_r"]
    assert mentions("Who likes Lord of the Rings?", known) == ["lord of the rings"]
    assert mentions("", known) == []
    assert mentions("Caroline", []) == []
    assert mentions("CAROLINE\u2019S plan", ["Caroline"]) == ["caroline"]


@given(st.text(max_size=300))
def test_extract_never_raises_and_ids_are_normal(text: str) -> None:
    ids = extract_entities(text)
    assert len(ids) == len(set(ids))
    for i in ids:
        assert i and i == normalise(i)


@given(st.text(max_size=100), st.lists(st.text(max_size=20), max_size=10))
def test_mentions_never_raises(query: str, known: list[str]) -> None:
    got = mentions(query, known)
    assert len(got) == len(set(got))
    assert set(got) <= {normalise(k) for k in known}


@given(
    st.lists(
        st.sampled_from(["Caroline", "Mel", "New York", "Sweden", "Jon"]), min_size=1, max_size=4
    )
)
def test_extracted_names_are_mentioned(names: list[str]) -> None:
    text = "I talked to " + " and ".join(names) + " today."
    ids = extract_entities(text)
    assert set(mentions(text, ids)) == {normalise(n) for n in names}

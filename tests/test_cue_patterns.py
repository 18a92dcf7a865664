"""The local controller's cue patterns in the core (`jevmem._core.PatternCounter`,
behind `controller.cues.Cue`), held to Python's `re` with IGNORECASE over
every development text and generated ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem._core import PatternCounter
from jevmem.controller import cues
from jevmem.errors import InvalidInputError
from jevmem.evaluation import conversation_inputs, load

DEV_SETS = (
    Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo10-dev.json",
    Path(__file__).resolve().parents[2] / "shared/data/beam/beam-100k.json",
)
CUES = [c for c in vars(cues).values() if isinstance(c, cues.Cue)]
PYTHON = [re.compile(c.pattern, re.IGNORECASE) for c in CUES]

WORDS = [
    "I", "i'm", "my", "we", "our", "us", "now", "nowadays", "switched", "from", "oat", "to",
    "soy", "instead", "of", "not", "any", "more", "anymore", "because", "so", "also", "since",
    "increased", "by", "went", "yesterday", "last", "monday", "prefer", "preferred", "like",
    "don't", "can't", "stand", "used", "when", "it", "breaks,", "restart", "the", "new",
    "gave up on", "quit", "rather than", "using", "well-known", "\u2003", "\t",
    "\u0130", "\u0131", "\u017fo", "K\u212a", "caf\u00e9", "na\u0308ive", "x\u00b2", "_so",
    "so_", "-so-", "\u039f\u0394\u039f\u03a3", "\u03a3\u03a3s", "STRASSE", "\u1e9e",
    "'", ".", ",", "!", "?", "\n", "\u00a0", "  ",
    "$600", "65%", "3", "PM", "p.m.", "4:30", "April", "Apr.", "5th", "2024", "1,200,", "v2.5",
    "adjusted", "rescheduled", "percent", "\u00a3", "\u0663",
]  # fmt: skip
text = st.one_of(
    st.lists(st.sampled_from(WORDS), max_size=24).map(" ".join),
    st.lists(st.sampled_from(WORDS), max_size=24).map("".join),
    st.text(st.characters(exclude_categories=("Cn", "Cs")), max_size=80),
)


def content_words(text: str) -> frozenset[str]:
    """The Python rule the local controller's content words were before they moved to the core."""
    words = (x.lower() for x in re.findall(cues.WORD.pattern, text))
    return frozenset(
        w[:-1] if w.endswith("s") and len(w) > 3 else w
        for w in words
        if w not in cues.FUNCTION_WORDS
    )


#: How the local controller cut a text into sentences before the core did.
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


#: What a change statement says was given up, as `re` read it before the
#: core did: the cue's pattern with its final word as a group.
_VALUE = r"[\w'-]{3,}"
assert cues.REPLACED_VALUE.pattern.endswith(_VALUE)
REPLACED_BY_RE = re.compile(
    cues.REPLACED_VALUE.pattern[: -len(_VALUE)] + f"({_VALUE})", re.IGNORECASE
)


def agree(text: str) -> None:
    assert cues.WORD.word_set(text) == content_words(text), text
    replaced = [m.group(1) for m in REPLACED_BY_RE.finditer(text)]
    assert cues.replaced_values(text) == replaced, text
    for most in (0, 3, 24):
        pieces = SENTENCE_SPLIT.split(text, maxsplit=most)[:most]
        for cue in (cues.OWN, cues.NEGATION, cues.WORD):
            py = PYTHON[CUES.index(cue)]
            want = [p for p in pieces if py.search(p)]
            assert cue.sentences_with(text, most) == want, (cue.pattern[:40], most, text)
    for cue, py in zip(CUES, PYTHON, strict=True):
        # one `re` pass per pattern (the slow side): findall's matches say
        # the count, and whether search finds one (no cue matches empty)
        want = py.findall(text) if py.groups == 0 else [m.group(0) for m in py.finditer(text)]
        assert cue.count(text) == len(want), (cue.pattern[:40], text)
        assert cue.found(text) == bool(want), (cue.pattern[:40], text)
        assert cue.findall(text) == want, (cue.pattern[:40], text)


@given(text, text)
@settings(max_examples=200, deadline=None)
def test_word_sets_kept_in_the_core_answer_as_frozensets(a: str, b: str) -> None:
    wa, wb = cues.WORD.words(a), cues.WORD.words(b)
    fa, fb = content_words(a), content_words(b)
    assert wa.as_frozenset() == fa
    assert len(wa) == len(fa) and bool(wa) == bool(fa)
    assert wa.shared(wb) == wb.shared(wa) == len(fa & fb)
    assert wa.shared(wa) == len(fa)
    for w in fb | {"", "zzz"}:
        assert (w in wa) == (w in fa)


@given(text)
@settings(max_examples=300, deadline=None)
def test_cues_match_as_re_does(text: str) -> None:
    agree(text)


@pytest.mark.parametrize("path", DEV_SETS, ids=["locomo", "beam"])
def test_every_development_text_gets_the_re_matches(path: Path) -> None:
    if not path.exists():
        pytest.skip("development set not found")
    convs, _ = load(path)
    texts = [t for conv in convs for t in conversation_inputs(conv)[0]]
    texts += [qa.question for conv in convs for qa in conv.qas]
    assert texts
    for t in texts:
        agree(t)


def test_a_pattern_is_named_by_its_position() -> None:
    counter = PatternCounter([r"\bso\b", r"[\w'-]{3,}"])
    assert len(counter) == 2
    assert counter.count(0, "So so, also so.") == 3
    assert counter.find_all(1, "I can't go") == ["can't"]
    with pytest.raises(InvalidInputError, match="no pattern 2"):
        counter.count(2, "so")
    with pytest.raises(InvalidInputError, match="pattern"):
        PatternCounter([r"\b(?:unclosed"])

"""Content coverage as the read path computed it in Python before the core
did (`MemoryStore.content_coverage`, `.text_marks`, `.tokens_present`,
`jevmem._core.speaks_in_first_person`): the tests' oracle for the ported
rules. Frozen: change the core, not this."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

SENTENCES = re.compile(r"[^.!?]+[.!?]*")
FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|ours|us)\b", re.IGNORECASE
)
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|yourself)\b", re.IGNORECASE)
CAPITALISED = re.compile(r"\b([A-Z][a-z]{2,})\b")
GREETING = re.compile(
    r"(?:^|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|wow|oh|yes|yeah|yep|sure|ok|okay|well|great|bye|dear|aww|haha|omg)[\s,!]*)$",
    re.IGNORECASE,
)


class Sentence(NamedTuple):
    words: tuple[str, ...]
    weight: float
    first_person: bool
    second_person: bool


def is_vocative(text: str, m: re.Match[str]) -> bool:
    after = text[m.end() : m.end() + 2]
    before = text[max(0, m.start() - 24) : m.start()]
    if not after or after[0] not in ",!?.":
        return False
    return bool(GREETING.search(before.rstrip(" ,")) or before.rstrip().endswith(","))


def is_alias(entity: str, name: str) -> bool:
    if not name or not entity:
        return False
    first = entity.split()[0]
    if entity == name or first == name:
        return True
    short, long_ = sorted((first, name), key=len)
    return len(short) >= 3 and long_.startswith(short)


def text_marks(
    text: str, tokenize: Callable[[str], Iterable[str]]
) -> tuple[list[str], list[Sentence]]:
    """The names a text uses other than as address (in order, each once) and its sentences."""
    named: dict[str, None] = {}
    for m in CAPITALISED.finditer(text):
        if not is_vocative(text, m):
            named[m.group(1).lower()] = None
    sentences = [
        Sentence(
            tuple(tokenize(sentence)),
            0.5 if is_question(sentence) else 1.0,
            FIRST_PERSON.search(sentence) is not None,
            SECOND_PERSON.search(sentence) is not None,
        )
        for sentence in SENTENCES.findall(text)
    ]
    return list(named), sentences


def content_coverage(
    content_tokens: set[str],
    asked: list[str],
    people: set[str],
    speaker: str,
    named: Iterable[str],
    sentences: Iterable[Sentence],
    addressees: Callable[[], set[str]],
) -> tuple[float, float]:
    """The share of the content tokens asserted about the asked people, and about others."""
    if not content_tokens:
        return 0.0, 0.0
    named = frozenset(named)
    found: set[str] | None = None
    named_mine: bool | None = None
    named_others = False
    credit: dict[str, float] = {}
    other: dict[str, float] = {}
    for words, weight, first, second in sentences:
        hits = content_tokens.intersection(words)
        if not hits:
            continue
        if not asked:
            for h in hits:
                credit[h] = max(credit.get(h, 0.0), weight)
            continue
        if named_mine is None:
            named_mine = any(is_alias(q, a) for q in asked for a in named)
            named_others = any(
                a in people and not any(is_alias(q, a) for q in asked) for a in named
            )
        about: set[str] = set()
        if first:
            about.add(speaker)
        if second:
            if found is None:
                found = addressees()
            about |= found
        unmarked = not first and not second
        mine = weight if named_mine or any(is_alias(q, a) for q in asked for a in about) else 0.0
        if not mine and unmarked and any(is_alias(q, speaker) for q in asked):
            mine = 0.5 * weight
        others = named_others or any(
            a in people and not any(is_alias(q, a) for q in asked) for a in about
        )
        theirs = weight if others else 0.0
        if (
            not theirs
            and unmarked
            and speaker in people
            and not any(is_alias(q, speaker) for q in asked)
        ):
            theirs = 0.5 * weight
        for h in hits:
            credit[h] = max(credit.get(h, 0.0), mine)
            other[h] = max(other.get(h, 0.0), theirs)
    n = len(content_tokens)
    return sum(credit.values()) / n, sum(other.values()) / n


_AUX = {"are", "did", "do", "does", "have", "r", "were"}
_YOU = {"u", "ya", "you"}
_NOT_AFTER = {"he", "i", "it", "she", "that", "they", "to", "we", "who"}


def is_question(sentence: str) -> bool:
    """Ends in "?", or has no end mark and an auxiliary of state or
    experience right before "you" (not after "to" or a subject)."""
    s = sentence.rstrip()
    if s.endswith("?"):
        return True
    if s.endswith((".", "!")):
        return False
    words = "".join(c if c.isalnum() or c == "'" else " " for c in s.lower()).split()
    return any(
        a in _AUX and b in _YOU and (k == 0 or words[k - 1] not in _NOT_AFTER)
        for k, (a, b) in enumerate(itertools.pairwise(words))
    )


def question_share(text: str) -> float:
    """Share of a text's sentences that are questions."""
    sentences = [x for x in SENTENCES.findall(text) if x.strip()]
    if not sentences:
        return 0.0
    return float(sum(is_question(x) for x in sentences) / len(sentences))

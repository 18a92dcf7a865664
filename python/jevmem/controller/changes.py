"""What a text says changed: the local controller's reading of a change
statement (`change_statements`, which ``relation.supersedes`` weighs) and
the text rules it reads with, each text read once and cached (a new text's
own sentences, an earlier text's values and denials)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from jevmem._core import WordSet
from jevmem.controller.cues import (
    CHANGE,
    DENIAL,
    NEGATION,
    OWN,
    VALUE,
    VALUE_CHANGED_TO,
    WORD,
    replaced_values,
)

__all__ = ["change_statements", "clear_caches", "denials"]


#: At most this many sentences of a new text are read for a change statement.
_CHANGE_SENTENCES = 24


@lru_cache(maxsize=16384)
def _content_words(text: str) -> WordSet:
    """Lower-cased words that say what a text is about (no function word),
    plural -s dropped: ``{w[:-1] if w.endswith("s") and len(w) > 3 else w}``
    over the lower-cased ``WORD`` matches not in `FUNCTION_WORDS`, read and
    kept in the core (`WORD.word_set` gives them as strings)."""
    return WORD.words(text)


@lru_cache(maxsize=4096)
def _own_sentences(
    new_text: str,
) -> tuple[tuple[str, int, WordSet, bool, tuple[WordSet, ...], _Values], ...]:
    """The sentences of a text that may state a change of the speaker's own
    facts: their own ("I", "we", "my", "our"), with content words, and with a
    change cue or a denial (without either a sentence states no change, so
    its words are never read). Each comes with its count of change cues, its
    content words, whether it denies, the words it names as given up and
    the values it states (`_values`).
    Read once per new text, whatever the candidates it is compared with."""
    out = []
    # the core stops after the sentences read (a long text has thousands)
    for sentence in OWN.sentences_with(new_text, _CHANGE_SENTENCES):
        cues = CHANGE.count(sentence)
        denies = NEGATION.found(sentence)
        if not cues and not denies:
            continue
        words = _content_words(sentence)
        if not words:
            continue
        given_up = tuple(_content_words(value) for value in replaced_values(sentence))
        out.append((sentence, cues, words, denies, given_up, _values(sentence)))
    return tuple(out)


@lru_cache(maxsize=4096)
def _value_changes(new_text: str) -> tuple[tuple[int, _Values], ...]:
    """The sentences of a text that state a changed value but are nobody's
    own ("the sync is rescheduled to 4:30 PM", "rent went up to $1,500"):
    `VALUE_CHANGED_TO`, no "I", "we", "my", "our" (those are
    `_own_sentences`). Each comes with its count of change cues and its
    values. Without a speaker to say whose fact it is, such a sentence
    replaces only an earlier statement of another value of that kind with
    the same words around it."""
    out = []
    for sentence in VALUE_CHANGED_TO.sentences_with(new_text, _CHANGE_SENTENCES):
        if OWN.found(sentence):
            continue
        values = _values(sentence)
        if values:
            out.append((max(1, CHANGE.count(sentence)), values))
    return tuple(out)


#: A sentence's values by kind ("money", "percent", "time", "date",
#: "number"): each value normalised ("$1,200" and "1200 dollars" are
#: "1200"; "April 5" and "5th of April" are "apr 5") with the content words
#: around it, which say what it is the value of.
_Values = Mapping[str, Mapping[str, WordSet]]

#: At most this many sentences of an earlier text are read for the values it states.
_VALUE_SENTENCES = 64

#: The characters either side of a value read for what it is the value of.
_VALUE_CONTEXT = 60

#: A sentence's values are read from its first this many characters, at
#: most this many values (a sentence of a pasted table or log holds
#: thousands of numbers, and every value read is compared).
_VALUE_SENTENCE_CHARS = 2048
_VALUES_READ = 16

#: A value's words and another value's: the share in common from which the
#: two are one slot (below it: other things), and the share at which that
#: is certain.
_SLOT_LEAST = 0.3
_SLOT_FULL = 0.5

#: How far a change statement that names a value counts against an earlier
#: text that states no value of that kind about the same thing: a topical
#: neighbour, most likely not the statement it replaces.
_UNMATCHED_VALUE = 0.75


def _values(sentence: str) -> _Values:
    """The values a sentence states (`VALUE` matches, the first
    `_VALUES_READ` of its first `_VALUE_SENTENCE_CHARS` characters), by
    kind, each with the content words within `_VALUE_CONTEXT` characters of
    it. A year alone ("2024", not "2,024") is no count: it dates something,
    and dates are compared as dates."""
    got: dict[str, dict[str, WordSet]] = {}
    at = 0
    # (a match cut at the end is read as cut: a number's first digits)
    sentence = sentence[:_VALUE_SENTENCE_CHARS]
    for match in VALUE.findall(sentence)[:_VALUES_READ]:
        start = sentence.find(match, at)
        end = start + len(match)
        at = end
        kind, value = _value_of(match.lower(), sentence[:start].rstrip()[-1:] in _CURRENCY)
        if kind == "number" and len(match) == 4 and match[:2] in ("19", "20"):
            continue
        # (its words without digits: the values are compared apart)
        around = sentence[max(0, start - _VALUE_CONTEXT) : end + _VALUE_CONTEXT]
        got.setdefault(kind, {}).setdefault(value, _content_words(_DIGITS.sub(" ", around)))
    return got


_CURRENCY = "$\u20ac\u00a3"
_DIGITS = re.compile(r"\d+")


def _value_of(match: str, after_currency: bool) -> tuple[str, str]:
    """A lower-cased `VALUE` match's kind and normalised value (a number
    right after a currency sign is an amount of money)."""
    digits = match.replace(",", "")
    if after_currency or match.endswith(("dollars", "euros", "pounds")):
        return "money", "".join(c for c in digits if c.isdigit() or c == ".")
    if match.endswith(("%", "percent")):
        return "percent", "".join(c for c in digits if c.isdigit() or c == ".")
    if match.endswith(("am", "pm", "a.m.", "p.m.")) or ":" in match:
        hour, _, rest = digits.partition(":")
        hour = "".join(c for c in hour if c.isdigit())
        minutes = "".join(c for c in rest if c.isdigit()) or "00"
        half = "pm" if "p" in match else "am" if "a" in match else ""
        return "time", f"{int(hour or 0)}:{minutes}{half}"
    if any(c.isalpha() for c in match):
        words = match.replace(".", " ").split()
        month = next(w[:3] for w in words if w[0].isalpha() and w != "of")
        day = next(int("".join(c for c in w if c.isdigit())) for w in words if w[0].isdigit())
        return "date", f"{month} {day}"
    return "number", digits


def _value_slot(new: _Values, old: Sequence[_Values]) -> float:
    """How much an earlier text's statement of a value is the one a change
    statement's values replace: the largest share of the words around one
    of the statement's values that are also around another value of the
    same kind in the earlier text (0 when it states none)."""
    best = 0.0
    for old_values in old:
        for kind, values in new.items():
            others = old_values.get(kind)
            if not others:
                continue
            for value, words in values.items():
                if not words:
                    continue
                for other, old_words in others.items():
                    if other != value:
                        best = max(best, words.shared(old_words) / len(words))
    return best


@lru_cache(maxsize=4096)
def _stated_values(text: str) -> tuple[_Values, ...]:
    """The values each sentence of an earlier text states (`_values`), for
    the sentences that state one: what a change statement that names a
    value may replace."""
    out = []
    for sentence in VALUE.sentences_with(text, _VALUE_SENTENCES):
        values = _values(sentence)
        if values:
            out.append(values)
    return tuple(out)


def _topical(words: WordSet, old_words: WordSet) -> float:
    """How much a sentence (its content words) is about an earlier text, as
    the scale a change it states counts at: 0 where under 0.15 of its words
    are the earlier text's, full from 0.2."""
    about = words.shared(old_words) / len(words)
    return 0.0 if about < 0.15 else min(1.0, about / 0.2)


def change_statements(new_text: str, old_texts: Sequence[str]) -> list[float]:
    """How clearly the new text states, in one sentence, that something each
    old text speaks of changed, in [0, 1].

    Sentence by sentence, so a cue word elsewhere in a long text (code, an
    explanation that says "now let's ...") does not count: the sentence must
    carry a change cue, be the speaker's own ("I", "we", "my", "our") and be
    about the old text's subject (a share of its content words occur there).
    Naming the old value as given up ("from oat", "instead of Airflow")
    counts extra; a denial where the old text asserted counts half. A
    sentence that states a value (an amount, a percentage, a time, a date, a
    count: "raised my budget to $650") counts in full against an old text
    that states another value of the same kind with the same words around
    it ("my $600 budget"), and at `_UNMATCHED_VALUE` of the topical measure
    against one that does not: a long agent's log says much about one
    topic, and the statement a change replaces is the one that gave the old
    value.
    """
    own = _own_sentences(new_text)
    impersonal = _value_changes(new_text)
    if not own and not impersonal:
        # without a sentence that could state a change there is nothing to
        # compare (the old texts' words are not read)
        return [0.0] * len(old_texts)
    out = []
    for old_text in old_texts:
        old_words = _content_words(old_text)
        best = 0.0
        for cues, values in impersonal if old_words else ():
            slot = _value_slot(values, _stated_values(old_text))
            if slot >= _SLOT_LEAST:
                change = 1.0 - math.exp(-cues / 0.6)
                best = max(best, change * min(1.0, slot / _SLOT_FULL))
        for _, cues, words, denies, given_up, values in own if old_words else ():
            scale = _topical(words, old_words)
            if not scale:
                continue
            change = 1.0 - math.exp(-cues / 0.6)
            if denies and not _denies(old_text):
                change = max(change, 0.5)
            if any(g.shared(old_words) for g in given_up):
                change = min(1.0, change + 0.3) if change > 0 else 0.0
            if values:
                # a value changed: the statement it replaces gave another
                # value of that kind, with the same words around it
                slot = _value_slot(values, _stated_values(old_text))
                if slot >= _SLOT_LEAST:
                    scale = max(scale, min(1.0, slot / _SLOT_FULL))
                else:
                    scale *= _UNMATCHED_VALUE
            best = max(best, change * scale)
        out.append(best)
    return out


#: The characters after a denial read as what it denies.
_DENIAL_SCOPE = 60

#: At most this many denials of a text are read.
_DENIALS_READ = 64

#: The share of a denial's words that an earlier text holds from which the
#: denial contradicts it, and the share past that at which it does in full.
_DENIED_LEAST = 0.5
_DENIED_SPAN = 0.3


@lru_cache(maxsize=4096)
def _denial_scopes(text: str) -> tuple[WordSet, ...]:
    """What a text denies: for each `DENIAL` in it (the first
    `_DENIALS_READ`), the content words of the `_DENIAL_SCOPE` characters
    after it, up to the end of its clause (a stop, a comma, "but", "so")."""
    out = []
    at = 0
    for match in DENIAL.findall(text)[:_DENIALS_READ]:
        at = text.find(match, at) + len(match)
        # a negation's scope ends with its clause
        scope = _CLAUSE_END.split(text[at : at + _DENIAL_SCOPE], maxsplit=1)[0]
        out.append(_content_words(scope))
    return tuple(out)


_CLAUSE_END = re.compile(r"[,;:.!?()\n]|\s(?:but|and then|so|because)\s")


def denials(new_text: str, old_texts: Sequence[str]) -> list[float]:
    """How clearly the new text denies, in one of its own sentences, what
    each old text asserted, in [0, 0.9] ("I've never met Kyle" after "I met
    Kyle at an expo"): the sentence is about the old text (as in
    `change_statements`), a denial in it ("never", "don't", "I'm not"; not a
    hedge such as "I'm not sure") is followed by words at least
    `_DENIED_LEAST` of which the old text holds, and no denial of the old
    text is followed by any of them (then the two deny the same thing and
    agree). Half a change at that share, up to 0.9 `_DENIED_SPAN` past it.
    The relation rule counts it only between two texts of one speaker: a
    person contradicts what they said themselves."""
    # the own sentences that deny something (without one, no old text is read)
    own = [
        (words, scopes)
        for sentence, _, words, denies, _, _ in _own_sentences(new_text)
        if denies and (scopes := [d for d in _denial_scopes(sentence) if d])
    ]
    if not own:
        return [0.0] * len(old_texts)
    out = []
    for old_text in old_texts:
        old_words = _content_words(old_text)
        best = 0.0
        for words, scopes in own if old_words else ():
            scale = _topical(words, old_words)
            if not scale:
                continue
            if any(d.shared(o) for d in scopes for o in _denial_scopes(old_text)):
                continue
            # two words at least: "never give up", "won't be easy" deny nothing said
            denied = max(
                (d.shared(old_words) / len(d) for d in scopes if d.shared(old_words) >= 2),
                default=0.0,
            )
            if denied >= _DENIED_LEAST:
                strength = 0.5 + 0.4 * min(1.0, (denied - _DENIED_LEAST) / _DENIED_SPAN)
                best = max(best, strength * scale)
        out.append(best)
    return out


@lru_cache(maxsize=4096)
def _denies(text: str) -> bool:
    # an earlier text is compared with every later one that finds it
    return NEGATION.found(text)


def clear_caches() -> None:
    """Empty the caches keyed by texts (`local.clear_text_caches` calls this)."""
    for cached in (
        _content_words,
        _own_sentences,
        _value_changes,
        _stated_values,
        _denial_scopes,
        _denies,
    ):
        cached.cache_clear()

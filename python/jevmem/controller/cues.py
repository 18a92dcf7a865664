"""The local controller's cue lexicons: Python `re` patterns, matched in the
core (`jevmem._core.PatternCounter`), and the word lists they read with."""

from __future__ import annotations

from jevmem._core import PatternCounter, WordSet

__all__ = [
    "CAUSE",
    "CHANGE",
    "DENIAL",
    "EPISODIC",
    "FUNCTION_WORDS",
    "MULTI",
    "NEGATION",
    "OWN",
    "PREFERENCE",
    "PROCEDURAL",
    "RECENT",
    "REPLACED_VALUE",
    "SEMANTIC",
    "VALUE",
    "WHY",
    "WORD",
    "Cue",
    "cue_words",
    "replaced_values",
]

#: Every cue pattern of this module, in `re` syntax, by `Cue.index`.
_PATTERNS: list[str] = []


class Cue:
    """A pattern in Python `re` syntax, matched ignoring case by the core
    (`jevmem._core.PatternCounter`: the same matches as `re` with
    ``re.IGNORECASE``, held to it over every development text by
    tests/test_cue_patterns.py). `re` took 100-400 us on one long turn per
    pattern, most of a write of an agent's log."""

    __slots__ = ("index", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.index = len(_PATTERNS)
        _PATTERNS.append(pattern)

    def count(self, text: str) -> int:
        """``len(re.findall(pattern, text, re.IGNORECASE))``."""
        return _COUNTER.count(self.index, text)

    def found(self, text: str) -> bool:
        """``re.search(pattern, text, re.IGNORECASE) is not None``."""
        return _COUNTER.found(self.index, text)

    def findall(self, text: str) -> list[str]:
        """``re.findall(pattern, text, re.IGNORECASE)`` (a pattern without groups)."""
        return _COUNTER.find_all(self.index, text)

    def sentences_with(self, text: str, max_sentences: int) -> list[str]:
        """The text's first ``max_sentences`` sentences that hold a match, in
        order. A sentence ends at whitespace after ".", "!" or "?", or at a
        run of newlines: the pieces of
        ``re.split(r"(?<=[.!?])\\s+|\\n+", text, maxsplit=max_sentences)``."""
        return _COUNTER.sentences_with(self.index, text, max_sentences)

    def word_set(self, text: str) -> frozenset[str]:
        """The distinct matches lower-cased, without `FUNCTION_WORDS`, a final
        "s" dropped from those over three characters (`changes._content_words`)."""
        return _COUNTER.word_set(self.index, text, 3)

    def words(self, text: str) -> WordSet:
        """`word_set` kept in the core: only its size and what it shares
        with another set are read, so no word becomes a Python string."""
        return _COUNTER.words(self.index, text, 3)


def cue_words(*words: str) -> Cue:
    return Cue(r"\b(?:" + "|".join(words) + r")\b")


EPISODIC = cue_words(
    r"yesterday", r"today", r"tonight", r"last (?:week|night|month|year|weekend|\w+day)",
    r"went", r"visited", r"met", r"saw", r"took", r"made", r"did", r"got", r"had", r"just",
    r"ago", r"this (?:morning|afternoon|evening|week)", r"on (?:mon|tues|wednes|thurs|fri|satur|sun)day",
)  # fmt: skip
SEMANTIC = cue_words(
    r"is", r"are", r"works? (?:at|as|for)", r"lives? in", r"born", r"my (?:\w+ )?(?:sister|brother|mother|father|son|daughter|wife|husband|partner|friend|job|name)",
    r"always", r"usually", r"means", r"consists?", r"every",
)  # fmt: skip
PROCEDURAL = cue_words(
    r"how to", r"step", r"first", r"then", r"next", r"finally", r"make sure", r"remember to",
    r"use", r"run", r"install", r"recipe", r"procedure", r"when .{1,40}, (?:do|use|try|run|prune|restart)",
    r"should", r"need to", r"in order to",
)  # fmt: skip
PREFERENCE = cue_words(
    r"prefer\w*", r"like", r"likes", r"love\w*", r"enjoy\w*", r"hate\w*", r"dislike\w*",
    r"favou?rite", r"fan of", r"into", r"wish", r"want\w*", r"rather", r"can't stand",
    r"passionate", r"my go-to",
)  # fmt: skip
CAUSE = cue_words(
    r"because", r"so", r"therefore", r"since", r"due to", r"as a result", r"led to",
    r"caused?", r"thanks to", r"which is why", r"that's why", r"resulted", r"made me", r"inspired",
)  # fmt: skip
WHY = cue_words(
    r"why",
    r"reason",
    r"cause[sd]?",
    r"led to",
    r"result(?:ed)? in",
    r"how come",
    r"motivat\w+",
    r"inspired?",
)
RECENT = cue_words(
    r"now",
    r"currently",
    r"current",
    r"latest",
    r"recent(?:ly)?",
    r"still",
    r"these days",
    r"anymore",
    r"most recent",
)
MULTI = cue_words(
    r"and",
    r"both",
    r"after",
    r"before",
    r"while",
    r"between",
    r"also",
    r"which .* and",
    r"how many",
    r"what (?:kinds?|things|activities|events)",
)
NEGATION = cue_words(
    r"not", r"never", r"no longer", r"don't", r"doesn't", r"didn't", r"isn't", r"wasn't", r"won't"
)
# A negation that denies a fact ("I've never met Kyle", "we don't use
# Airflow", "I'm not vegan"), not one that hedges ("I'm not sure", "I don't
# know"); what it denies are the words after it. (Every alternative starts
# with \b, as the core reads a leading one.)
_HEDGES = (
    r"(?!\s+(?:sure|certain|know|think|remember|understand|mind|care|worry|see|get|quite"
    r"|really|too|that|so)\b)"
)
DENIAL = Cue(
    r"\b(?:never|no longer|not any ?more)\b"
    r"|\b(?:do|does|did|have|has|had|is|are|was|were|ca|wo|could|would|should)n't\b"
    + _HEDGES
    + r"|\b(?:am|is|are|was|were|do|does|did|have|has|had|can|could|will|would"
    r"|i'm|we're|you're|they're|it's|he's|she's|that's)\s+not\b" + _HEDGES
)
# Words with which a speaker says a value changed: an update, a switch, a
# move, a correction (relation.supersedes reads them off the newer text).
CHANGE = cue_words(
    r"now", r"nowadays", r"these days", r"from now on", r"no longer", r"any ?more",
    r"not .{1,40}? any ?more", r"instead(?: of)?", r"rather than", r"switch(?:ed|ing)?",
    r"mov(?:ed|ing) (?:to|from|over|on)", r"chang(?:ed|ing|e) (?:to|from|over|my|our|the)",
    r"changed", r"from [\w'-]+(?: [\w'-]+)? to", r"actually", r"updat(?:e|ed|ing)",
    r"replac(?:e|ed|ing)", r"stopped", r"quit", r"gave up", r"went from", r"turned out",
    r"correction", r"upgraded", r"downgraded", r"migrat(?:ed|ing|e) (?:to|from)",
    r"(?:increased|decreased|dropped|raised|reduced|grew|fell|rose|improved|reached) (?:to|from|by)?",
    r"(?:is|are|am) now", r"(?:my|our|the) new", r"not anymore", r"used to",
    r"adjust(?:ed|ing)? (?:to|it|the|my|our)", r"extend(?:ed|ing)? (?:to|by|it|the|my|our)",
    r"reschedul(?:e|ed|ing)", r"postpon(?:e|ed|ing)", r"push(?:ed|ing)? back",
    r"revis(?:e|ed|ing) (?:to|it|the|my|our)", r"bump(?:ed|ing)? (?:up|to)",
    r"expand(?:ed|ing)? (?:to|by)", r"moved up",
)  # fmt: skip
# A value a sentence states: an amount of money, a percentage, a time of
# day, a date, a count. A statement that a value changed replaces the
# earlier statement of a value of the same kind about the same thing.
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
# (every alternative starts with \b, as the core reads a leading one; an
# amount of money is a number after a currency sign, read off the text)
VALUE = Cue(
    r"\b\d[\d,]*(?:\.\d+)?\s?(?:%|percent\b|dollars\b|euros\b|pounds\b)"
    r"|\b\d{1,2}(?::\d{2})?\s?(?:am\b|pm\b|a\.m\.|p\.m\.)"
    r"|\b\d{1,2}:\d{2}\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}"
    r"|\b\d[\d,]*(?:\.\d+)?\b"
)
# A value said to have changed to another with nobody's "I" or "we": a verb
# of changing and "to" right before the new value ("the sync was
# rescheduled to 4:30 PM", "rent increased to $1,350"). Ranges ("from 7 PM
# to 9 PM"), headings ("Update the config") and "there are now 51 cards"
# state no change of a value.
VALUE_CHANGED_TO = Cue(
    r"\b(?:rescheduled|moved|changed|raised|increased|decreased|reduced|lowered|cut"
    r"|bumped(?: up)?|pushed(?: back)?|postponed|updated|switched|shifted|extended"
    r"|went (?:up|down)|dropped|rose|fell|grew) to\s+[$\u20ac\u00a3]?\d"
)
# What a change statement says was given up: the word after these names the
# old value ("switched from oat", "instead of Airflow", "no longer in Paris");
# `replaced_values` reads it off each match.
REPLACED_VALUE = Cue(
    r"\b(?:from|instead of|rather than|no longer|replaced|replacing|quit|stopped|"
    r"gave up(?: on)?)\s+(?:(?:the|a|an|my|our|using|drinking|at|in|with)\s+)?"
    r"[\w'-]{3,}"
)
# (its one class is matched as written: case does not change what \w holds)
WORD = Cue(r"[\w'-]{3,}")
# A speaker stating a change of their own facts ("I switched", "we moved our").
OWN = cue_words(
    r"i", r"i'm", r"i've", r"i'd", r"my", r"me", r"we", r"we're", r"we've", r"our", r"us"
)
# Too common to say what a sentence is about.
FUNCTION_WORDS = frozenset(
    "the and for with that this have has had was were are but not you your from they them "
    "their there what which when where how can could would should will just also very some "
    "any all into about than then its it's i'm i've don't can't been being our out".split()
)


_COUNTER = PatternCounter(_PATTERNS, skip=sorted(FUNCTION_WORDS))


def replaced_values(sentence: str) -> list[str]:
    """The values ``sentence`` says were given up, in order: each
    `REPLACED_VALUE` match's last word (the pattern ends in a run of
    ``[\\w'-]`` after white space, so the match's text after its last white
    space is that run)."""
    return [match.split()[-1] for match in REPLACED_VALUE.findall(sentence)]

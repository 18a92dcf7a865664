"""The default System-One controller: in-process, deterministic, no model.

It answers every question kind from fast signals: the similarities, overlaps
and time gaps the memory plane puts in each request's ``signals``, plus cue
lexicons read off the texts. Each answer is a smooth function of its inputs
(never a constant), so a model-backed controller can replace it question by
question without changing the memory code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem._core import WordSet
from jevmem.controller.catalogue import REPRESENTATION_OPTIONS, TEMPORAL_LABELS
from jevmem.controller.cues import (
    CAUSE,
    CHANGE,
    EPISODIC,
    MULTI,
    NEGATION,
    OWN,
    PREFERENCE,
    PROCEDURAL,
    RECENT,
    SEMANTIC,
    VALUE,
    WHY,
    WORD,
    Cue,
    replaced_values,
)
from jevmem.controller.scoring import clip_columns, clip_value, score_columns, score_rounds
from jevmem.controller.types import (
    PAIR_NOULS,
    Answer,
    CandidateQuestions,
    CandidateTable,
    Choice,
    ChoiceAnswer,
    DecisionRequest,
    Noul,
    NoulAnswer,
    PairAnswers,
    PairQuestions,
)
from jevmem.temporal import query_time_cues

__all__ = ["LocalController", "clear_text_caches", "question_index", "relation_arrays"]


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
        cues = _count(CHANGE, sentence)
        denies = NEGATION.found(sentence)
        if not cues and not denies:
            continue
        words = _content_words(sentence)
        if not words:
            continue
        given_up = tuple(_content_words(value) for value in replaced_values(sentence))
        out.append((sentence, cues, words, denies, given_up, _values(sentence)))
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
    if not own:
        # without a sentence that could state a change there is nothing to
        # compare (the old texts' words are not read)
        return [0.0] * len(old_texts)
    out = []
    for old_text in old_texts:
        old_words = _content_words(old_text)
        best = 0.0
        for _, cues, words, denies, given_up, values in own if old_words else ():
            about = words.shared(old_words) / len(words)
            if about < 0.15:
                continue
            change = 1.0 - math.exp(-cues / 0.6)
            if denies and not _denies(old_text):
                change = max(change, 0.5)
            if any(g.shared(old_words) for g in given_up):
                change = min(1.0, change + 0.3) if change > 0 else 0.0
            scale = min(1.0, about / 0.2)
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


@lru_cache(maxsize=4096)
def _denies(text: str) -> bool:
    # an earlier text is compared with every later one that finds it
    return NEGATION.found(text)


def clear_text_caches() -> None:
    """Empty the caches keyed by observation texts (see `jevmem.Memory.forget`)."""
    for cached in (
        _content_words,
        _own_sentences,
        _stated_values,
        _denies,
        _count,
        cause_cue,
    ):
        cached.cache_clear()


def _squash(x: float, mid: float = 0.5, steep: float = 8.0) -> float:
    """Logistic map of a raw signal onto (0, 1), centred on ``mid``."""
    return 1.0 / (1.0 + math.exp(-steep * (x - mid)))


def _density(pattern: Cue, text: str, per: float = 2.0) -> float:
    """Saturating count of cue matches: 0 -> 0, `per` matches -> ~0.63, many -> 1."""
    return 1.0 - math.exp(-_count(pattern, text) / per)


@lru_cache(maxsize=8192)
def _count(pattern: Cue, text: str) -> int:
    # A write asks several questions about the same texts; count each cue once.
    return pattern.count(text)


def _sig(item: Mapping[str, Any], name: str, default: float = 0.0) -> float:
    v = item.get("signals", {}).get(name, default)
    return default if v is None else float(v)


class LocalController:
    """Answers every question kind from signals and cue lexicons, in microseconds."""

    name = "local"

    def __init__(self) -> None:
        self._handlers: dict[
            str, Callable[[DecisionRequest, Noul | Choice, int | None], Answer]
        ] = {
            "type.episodic": self._typing,
            "type.semantic": self._typing,
            "type.procedural": self._typing,
            "type.preference": self._typing,
            "relation.semantic": self._relation,
            "relation.causal_candidate_to_new": self._relation,
            "relation.causal_new_to_candidate": self._relation,
            "relation.same_episode": self._relation,
            "relation.entity_alias": self._relation,
            "relation.supersedes": self._relation,
            "relation.temporal": self._temporal_choice,
            "consolidate.redundant": self._consolidation,
            "consolidate.contradicting": self._consolidation,
            "consolidate.obsolete": self._consolidation,
            "consolidate.extra_link": self._consolidation,
            "consolidate.representation": self._representation,
            "route.semantic": self._routing,
            "route.temporal": self._routing,
            "route.causal": self._routing,
            "route.entity": self._routing,
            "route.multi_hop": self._routing,
            "route.recency": self._routing,
            "score.relevance": self._scoring,
            "score.relation_usefulness": self._scoring,
            "score.novelty": self._scoring,
            "score.support": self._scoring,
            "assess.sufficiency": self._assessment,
            "assess.usefulness": self._assessment,
            "assess.missing": self._assessment,
            "assess.contradiction": self._assessment,
        }

    @staticmethod
    def kinds() -> tuple[str, ...]:
        return tuple(LocalController()._handlers)

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        out: list[MutableMapping[str, Answer]] = []
        handlers = self._handlers
        # every relation round of the batch as one set of columns
        rounds = [k for k, req in enumerate(requests) if type(req.questions) is PairQuestions]
        paired = (
            dict(zip(rounds, _pair_rounds([requests[k] for k in rounds]), strict=True))
            if rounds
            else {}
        )
        # whole scoring rounds: answered as columns, a batch's together (see
        # `scoring`), and put in their places after the loop
        scored: list[int] = []
        for k, req in enumerate(requests):
            qs = req.questions
            if type(qs) is CandidateQuestions and _SCORING_KINDS.issuperset(qs.kinds):
                scored.append(k)
                out.append({})
                continue
            if k in paired:
                out.append(paired[k])
                continue
            answers: dict[str, Answer] = {}
            # the request's relation answers, every pair and kind at once
            relations: npt.NDArray[np.float64] | None = None
            # an assessment's four answers from one reading of its evidence,
            # an observation's four types from one reading of its text
            assessed: dict[str, float] | None = None
            typed: dict[str, float] | None = None
            for q in qs:
                kind = q.kind
                if kind in _TYPING_KINDS:
                    if typed is None:
                        typed = _typing_values(req.state)
                    answers[q.id] = NoulAnswer(typed[kind])
                    continue
                if kind in _ASSESSMENT_KINDS:
                    if assessed is None:
                        assessed = _assessment_values(req.state)
                    answers[q.id] = NoulAnswer(assessed[kind])
                    continue
                if kind in _RELATION_COLUMN:
                    i = question_index(q.id)
                    assert i is not None
                    if relations is None:
                        relations = relation_arrays([req.state])[0]
                    answers[q.id] = NoulAnswer(float(relations[i, _RELATION_COLUMN[kind]]))
                    continue
                if kind in _SCORING_KINDS:
                    # most of a query's questions: answered without the
                    # handler table (same arithmetic as _scoring)
                    i = question_index(q.id)
                    assert i is not None
                    answers[q.id] = NoulAnswer(_score(req.state, kind, i))
                    continue
                handler = handlers.get(kind)
                if handler is None:
                    raise KeyError(f"the local controller has no answer for question kind {kind!r}")
                answers[q.id] = handler(req, q, question_index(q.id))
            out.append(answers)
        if scored:
            asked: list[tuple[Mapping[str, Any], CandidateQuestions]] = []
            for k in scored:
                qs = requests[k].questions
                assert type(qs) is CandidateQuestions
                asked.append((requests[k].state, qs))
            answered = score_rounds(asked) if len(asked) > 1 else [score_columns(*asked[0])]
            for k, got in zip(scored, answered, strict=True):
                out[k] = got
        return out

    # ---- typing ------------------------------------------------------------

    def _typing(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        return NoulAnswer(_typing_values(req.state)[q.kind])

    # ---- relations ---------------------------------------------------------

    def _relation(self, req: DecisionRequest, q: Noul | Choice, i: int | None) -> Answer:
        assert i is not None
        return NoulAnswer(float(relation_arrays([req.state])[0][i, _RELATION_COLUMN[q.kind]]))

    def _temporal_choice(self, req: DecisionRequest, q: Noul | Choice, i: int | None) -> Answer:
        assert i is not None and isinstance(q, Choice)
        return _temporal_of(req.state, i)

    # ---- consolidation -----------------------------------------------------

    def _consolidation(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        focus = req.state["focus"]
        nbrs: list[Mapping[str, Any]] = list(req.state.get("neighbours", []))
        if not nbrs:
            return NoulAnswer(0.0)
        best = max(nbrs, key=lambda n: _sig(n, "vector") + _sig(n, "lexical"))
        sim = 0.6 * _sig(best, "vector") + 0.4 * _sig(best, "lexical")
        if q.kind == "consolidate.redundant":
            return NoulAnswer(clip_value(_squash(sim, mid=0.85, steep=14.0)))
        focus_neg = NEGATION.found(str(focus["text"]))
        if q.kind == "consolidate.contradicting":
            flips = [
                0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical")
                for n in nbrs
                if NEGATION.found(str(n["text"])) != focus_neg
            ]
            return NoulAnswer(
                clip_value(_squash(max(flips, default=0.0), mid=0.7, steep=10.0) * 0.8)
            )
        if q.kind == "consolidate.obsolete":
            newer = [
                0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical")
                for n in nbrs
                if _sig(n, "newer") > 0
            ]
            return NoulAnswer(
                clip_value(_squash(max(newer, default=0.0), mid=0.75, steep=10.0) * 0.7)
            )
        # extra_link: a close neighbour not yet connected
        unlinked = [
            0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical")
            for n in nbrs
            if not _sig(n, "linked")
        ]
        return NoulAnswer(clip_value(_squash(max(unlinked, default=0.0), mid=0.6, steep=10.0)))

    def _representation(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        nbrs: list[Mapping[str, Any]] = list(req.state.get("neighbours", []))
        sims = sorted(
            (0.6 * _sig(n, "vector") + 0.4 * _sig(n, "lexical") for n in nbrs), reverse=True
        )
        tight = sum(sims[:3]) / 3 if sims else 0.0
        merge = _squash(tight, mid=0.85, steep=14.0)
        promote = _squash(tight, mid=0.7, steep=10.0) * 0.5 * (1.0 - merge)
        uncertain = 0.15
        keep = max(0.05, 1.0 - merge - promote - uncertain)
        raw = dict(zip(REPRESENTATION_OPTIONS, (keep, merge, promote, uncertain), strict=True))
        total = sum(raw.values())
        dist = {k: v / total for k, v in raw.items()}
        return ChoiceAnswer(max(dist, key=lambda k: dist[k]), dist)

    # ---- routing -----------------------------------------------------------

    def _routing(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        query = req.state["query"]
        text = str(query["text"])
        which = q.kind.split(".", 1)[1]
        if which == "semantic":
            # topical context helps unless the query is a pure date or list lookup
            return NoulAnswer(clip_value(0.6 + 0.3 * min(1.0, len(text.split()) / 12.0)))
        if which == "temporal":
            cues = query.get("time") or query_time_cues(text)
            return NoulAnswer(clip_value(0.15 + 0.85 * float(cues["score"])))
        if which == "causal":
            return NoulAnswer(clip_value(0.1 + 0.85 * _density(WHY, text, per=1.0)))
        if which == "entity":
            n = len(query.get("entities", []))
            return NoulAnswer(clip_value(0.2 + 0.35 * n))
        if which == "multi_hop":
            n = len(query.get("entities", []))
            return NoulAnswer(
                clip_value(0.15 + 0.5 * _density(MULTI, text, per=2.0) + 0.15 * max(0, n - 1))
            )
        return NoulAnswer(clip_value(0.05 + 0.9 * _density(RECENT, text, per=1.0)))

    # ---- candidate scoring -------------------------------------------------

    def _scoring(self, req: DecisionRequest, q: Noul | Choice, i: int | None) -> Answer:
        assert i is not None
        return NoulAnswer(_score(req.state, q.kind, i))

    # ---- assessment --------------------------------------------------------

    def _assessment(self, req: DecisionRequest, q: Noul | Choice, _: int | None) -> Answer:
        return NoulAnswer(_assessment_values(req.state)[q.kind])


def _temporal_of(state: Mapping[str, Any], i: int) -> ChoiceAnswer:
    """``relation.temporal`` for pair ``i`` of a relation round."""
    sig, _, _ = _pair_signals([{"candidates": [state["candidates"][i]]}])
    return _temporal_answer(float(sig["inserted_before"][0]), float(sig["same_session"][0]))


def _temporal_answer(inserted_before: float, same_session: float) -> ChoiceAnswer:
    """``relation.temporal`` from a pair's two signals (read as `_pair_signals` reads them)."""
    # Without timestamps, insertion order is the only evidence: earlier ids
    # were observed first, which weakly suggests "before".
    # clipped: a signal outside [0, 1] must not make a weight negative
    order = clip_value(inserted_before)
    same = clip_value(same_session)
    weights = {label: 0.05 for label in TEMPORAL_LABELS}
    weights["before"] += 0.35 * order
    weights["after"] += 0.35 * (1.0 - order)
    weights["same_time"] += 0.2 * same
    weights["unknown"] += 0.3
    total = sum(weights.values())
    dist = {k: v / total for k, v in weights.items()}
    return ChoiceAnswer(max(dist, key=lambda k: dist[k]), dist)


def _assessment_values(state: Mapping[str, Any]) -> dict[str, float]:
    """The answers to the four ``assess.*`` kinds, from one reading of the evidence."""
    evidence: list[Mapping[str, Any]] = list(state.get("evidence", []))
    coverage = float(state.get("coverage", 0.0))
    # weighed by how well each item ranks as evidence (its score)
    weights = [0.6 + 0.4 * clip_value(float(e.get("score", 0.0))) for e in evidence]

    # An item answers the query only if it covers what is asked AND is
    # about whom it is asked: a strong topical match about someone else
    # (the usual unanswerable question) must not count, and evidence that
    # asserts the same content about another person counts against.
    def strength(name: str) -> float:
        return max((_sig(e, name) * w for e, w in zip(evidence, weights, strict=True)), default=0.0)

    grounded = strength("content_coverage")
    against = strength("other_coverage")
    if grounded + against > 0:
        # 1: asserted about whom it asks, nobody else; 0.5: as much about
        # someone else; 0: only about someone else
        sufficiency = clip_value(0.5 + 0.5 * (grounded - against))
    else:
        # nothing asserts the content either way: topical match alone never
        # gets past undecided
        best = max((clip_value(float(e.get("score", 0.0))) for e in evidence), default=0.0)
        sufficiency = clip_value(0.5 * best)
    top = sorted(evidence, key=lambda e: -_sig(e, "relevance"))[:5]
    negs = [NEGATION.found(str(e.get("text", ""))) for e in top]
    mixed = 0.0 if not negs else min(sum(negs), len(negs) - sum(negs)) / len(negs)
    frontier = float(state.get("frontier_best", 0.0))
    # What is missing is the part of the query no item states about whom it
    # asks: read off the best item's coverage as it stands. How well that
    # item ranks is the sufficiency's business; weighed by it here, an item
    # that states the whole answer at an evidence score below 0.63 left
    # "missing" at 0.15 or more and the early stop out of reach.
    said = max((_sig(e, "content_coverage") for e in evidence), default=0.0)
    return {
        "assess.sufficiency": sufficiency,
        "assess.missing": clip_value(1.0 - max(said, 0.5 * coverage)),
        "assess.contradiction": clip_value(0.4 * mixed),
        "assess.usefulness": clip_value((1.0 - grounded) * (0.3 + 0.7 * frontier)),
    }


_TYPING_CUES = {
    "type.episodic": EPISODIC,
    "type.semantic": SEMANTIC,
    "type.procedural": PROCEDURAL,
    "type.preference": PREFERENCE,
}
_TYPING_KINDS = frozenset(_TYPING_CUES)


def _typing_values(state: Mapping[str, Any]) -> dict[str, float]:
    """The answers to the four ``type.*`` kinds: how densely the text carries
    each type's cue words."""
    text = str(state["observation"]["text"])
    got = {kind: _density(cue, text) for kind, cue in _TYPING_CUES.items()}
    if state["observation"].get("time_refs"):
        # a grounded time reference dates a happening
        got["type.episodic"] = max(got["type.episodic"], 0.8)
    return {kind: clip_value(v) for kind, v in got.items()}


#: Each ``relation.*`` Noul's column in `relation_arrays` (`PAIR_NOULS` order).
_RELATION_COLUMN = {f"relation.{name}": j for j, name in enumerate(PAIR_NOULS)}
_ALIAS_COLUMN = PAIR_NOULS.index("entity_alias")


def _pair_rounds(requests: Sequence[DecisionRequest]) -> list[PairAnswers]:
    """Relation rounds (`PairQuestions`) as arrays, every pair of every
    round read at once; an entity alias not asked is 0, a temporal Choice
    is answered where asked."""
    states = [req.state for req in requests]
    sig, texts, sizes = _pair_signals(states)
    arrays = _relation_columns(states, sig, texts, sizes)
    # the temporal Choice's two signals, read off the same columns
    order, same = sig["inserted_before"].tolist(), sig["same_session"].tolist()
    out = []
    at = 0
    for req, values, size in zip(requests, arrays, sizes, strict=True):
        qs = req.questions
        assert isinstance(qs, PairQuestions)
        if len(values) < qs.n_pairs:
            raise IndexError(f"{qs.n_pairs} pairs asked about, {len(values)} given")
        values = values[: qs.n_pairs]
        values[:, _ALIAS_COLUMN] *= qs.alias
        temporal: list[ChoiceAnswer | None] = [None] * qs.n_pairs
        for i in np.flatnonzero(qs.temporal).tolist():
            temporal[i] = _temporal_answer(order[at + i], same[at + i])
        out.append(PairAnswers(qs, values, temporal))
        at += size
    return out


def relation_arrays(states: Sequence[Mapping[str, Any]]) -> list[npt.NDArray[np.float64]]:
    """The relation Nouls of every (new observation, candidate) pair of
    each state, an (n_candidates, 6) array per state in `PAIR_NOULS` order:
    from the pairs' signals (a `PairTable`'s columns or each candidate's
    mapping; NaN reads as absent) and the cue words of the two texts, all
    states' pairs as one set of columns."""
    return _relation_columns(states, *_pair_signals(states))


def _relation_columns(
    states: Sequence[Mapping[str, Any]],
    sig: Mapping[str, npt.NDArray[np.float64]],
    texts: Sequence[Sequence[str]],
    sizes: Sequence[int],
) -> list[npt.NDArray[np.float64]]:
    """`relation_arrays` of states whose pairs' signals are read already (`_pair_signals`)."""
    cue_new: list[float] = []
    cue_old: list[float] = []
    change: list[float] = []
    for state, olds in zip(states, texts, strict=True):
        new_text = str(state["observation"]["text"])
        cue_new.extend([cause_cue(new_text)] * len(olds))
        cue_old.extend([cause_cue(t) for t in olds])
        change.extend(change_statements(new_text, olds))
    vec, ent, tmp, alias = sig["vector"], sig["entity"], sig["temporal"], sig["alias"]
    out = np.empty((len(vec), len(PAIR_NOULS)))
    with np.errstate(all="ignore"):  # NaN and infinities are clipped to 0, as clip_value does
        match = 0.6 * vec + 0.4 * sig["lexical"]
        # Causal: the cause comes first; the explaining text carries the cue word.
        topical = _squash_column(match, 0.45, 10.0)
        about = 0.6 + 0.4 * np.maximum(ent, tmp)
        # Supersedes: four things must hold together, so the answer is their
        # product: the two are on one topic (vector and lexical match), about
        # one subject (same speaker, a shared entity or an alias), the
        # candidate is the older statement, and the new text says something
        # changed (change words, the old value named as given up, or a flip
        # between asserting and denying).
        on_topic = _squash_column(match, 0.4, 10.0)
        subject = np.maximum(np.maximum(sig["same_speaker"], np.minimum(1.0, 2.0 * ent)), alias)
        on = {
            "semantic": _squash_column(match, 0.55, 10.0),
            "causal_candidate_to_new": topical * (0.25 + 0.75 * np.array(cue_new)) * about,
            "causal_new_to_candidate": topical * (0.25 + 0.75 * (np.array(cue_old) * 0.8)) * about,
            "same_episode": 0.55 * sig["same_session"] + 0.35 * tmp + 0.1 * vec,
            "supersedes": on_topic
            * (0.4 + 0.6 * subject)
            * sig["older"]
            * (0.1 + 0.9 * np.array(change)),
            "entity_alias": alias * (0.5 + 0.5 * vec),
        }
        for j, name in enumerate(PAIR_NOULS):
            out[:, j] = clip_columns(on[name])
    return np.split(out, np.cumsum(sizes)[:-1]) if sizes else []


def _pair_signals(
    states: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, npt.NDArray[np.float64]], list[list[str]], list[int]]:
    """The `_PAIR_SIGNALS` of every pair of ``states`` as columns (absent
    and NaN read as the default), each state's candidate texts, and how
    many pairs each state has."""
    cols: dict[str, list[npt.NDArray[np.float64]]] = {name: [] for name in _PAIR_SIGNALS}
    texts: list[list[str]] = []
    for state in states:
        cands: Sequence[Mapping[str, Any]] = state["candidates"]
        if isinstance(cands, CandidateTable):
            texts.append(cands.texts)
            for name, parts in cols.items():
                col = cands.columns.get(name)
                parts.append(np.full(len(cands), np.nan) if col is None else col)
        else:
            texts.append([str(c["text"]) for c in cands])
            sigs = [c.get("signals") or {} for c in cands]
            for name, parts in cols.items():
                got = [s.get(name) for s in sigs]
                parts.append(np.array([np.nan if v is None else v for v in got], dtype=np.float64))
    sig = {}
    for name, parts in cols.items():
        col = np.concatenate(parts) if parts else np.zeros(0)
        sig[name] = np.where(np.isnan(col), _PAIR_SIGNALS[name], col)
    return sig, texts, [len(t) for t in texts]


#: The pair signals `relation_arrays` reads, with the value of an absent one.
_PAIR_SIGNALS = {
    "vector": 0.0,
    "lexical": 0.0,
    "entity": 0.0,
    "temporal": 0.0,
    "alias": 0.0,
    "same_speaker": 0.0,
    "same_session": 0.0,
    "older": 1.0,
    "inserted_before": 1.0,
}


def _squash_column(x: npt.NDArray[np.float64], mid: float, steep: float) -> npt.NDArray[np.float64]:
    """`_squash` of every element."""
    return 1.0 / (1.0 + np.exp(-steep * (x - mid)))


@lru_cache(maxsize=8192)
def cause_cue(text: str) -> float:
    """How densely a text uses cause words ("because", "due to", "led to"), in [0, 1]."""
    # a text is read as a new observation once and as a candidate many times
    return _density(CAUSE, text, per=1.0)


_ASSESSMENT_KINDS = frozenset(
    ("assess.sufficiency", "assess.usefulness", "assess.missing", "assess.contradiction")
)

_SCORING_KINDS = frozenset(
    ("score.relevance", "score.relation_usefulness", "score.novelty", "score.support")
)


def _score(state: Mapping[str, Any], kind: str, i: int) -> float:
    """The answer to a ``score.*`` question about candidate ``i``."""
    cand = state["candidates"][i]
    if kind == "score.relevance":
        return relevance(cand)
    sig = cand.get("signals", {})
    if kind == "score.relation_usefulness":
        route = state["query"].get("routing", {})
        p = float(route.get(cand.get("view", "semantic"), 0.5))
        return clip_value(
            0.5 * p + 0.3 * _num(sig, "edge_weight", 0.0) + 0.2 * _num(sig, "same_session", 0.0)
        )
    if kind == "score.novelty":
        return clip_value(1.0 - _num(sig, "max_evidence_similarity", 0.0))
    # Support from the temporal neighbours, and from the whole episode when
    # the memory plane measured it (two thirds / one third).
    near = _num(sig, "support", 0.0)
    return clip_value((2.0 * near + _num(sig, "episode_support", near)) / 3.0)


def _num(signals: Mapping[str, Any], name: str, default: float) -> float:
    """`_sig` on an item's signals already in hand."""
    v = signals.get(name, default)
    return default if v is None else float(v)


def relevance(item: Mapping[str, Any]) -> float:
    """How much a node is about the query, from its retrieval signals.

    BM25 and embedding similarity (each normalised by the query's best) carry
    the topic; agreement with the people the query names and a match with the
    time it names add to it; a node that is mostly a question asserts little
    and loses some. Clipped to [0, 1].
    """
    sig = item.get("signals") or {}
    get = sig.get
    base = clip_value(
        0.45 * float(get("lexical") or 0.0)
        + 0.35 * float(get("dense") or 0.0)
        + 0.2 * float(get("entity_match") or 0.0)
        + 0.3 * float(get("time_match") or 0.0)
        - 0.1 * float(get("asks") or 0.0)
    )
    if "valid_at_query_time" not in sig:  # not in a supersedes chain
        return base
    return validity_adjusted(base, sig)


# ---- facts that change: the validity adjustment -----------------------------


def validity_adjusted(base: float, sig: Mapping[str, Any]) -> float:
    """Relevance of a node in a supersedes chain: a fact valid at the query's
    time answers what its chain is about, so it is at least as relevant as the
    best match in its chain (``chain_match``, 0 when it did not hold then).

    A fact that did not hold then (``superseded`` / ``not_yet_valid``) keeps
    its own relevance: the memory plane ranks the fact that held in its
    place when it ranked higher, and it right below (`ReadSession.rank` in
    the core), so the history stays next to the answer. Discounting it here as well measured worse on BEAM, where an
    update question's gold evidence is both facts (0.15 off: recall@10 down
    0.02 to 0.05 on four question types, BENCHMARKS.md section 7)."""
    return clip_value(max(base, _num(sig, "chain_match", 0.0)))


@lru_cache(maxsize=4096)
def question_index(question_id: str) -> int | None:
    """The i of a pair_{i}_ / candidate_{i}_ id."""
    for prefix in ("pair_", "candidate_"):
        if question_id.startswith(prefix):
            rest = question_id[len(prefix) :]
            head = rest.split("_", 1)[0]
            if head.isdigit():
                return int(head)
    return None

"""A relation round answered as arrays (`PairQuestions` / `PairAnswers`)
gives exactly the answers of the same round asked question by question, and
reads back the same way (`pair_values`) from either form."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem.controller import (
    ChoiceAnswer,
    ControllerError,
    DecisionRequest,
    LearnedController,
    LocalController,
    NoulAnswer,
    PairAnswers,
    PairQuestions,
    PairTable,
    catalogue,
    validate_answers,
)
from jevmem.controller.local import relation_arrays
from jevmem.controller.types import PAIR_NOULS, pair_values
from jevmem.plane.writing import judged_links

SIGNALS = (
    "vector",
    "lexical",
    "entity",
    "temporal",
    "same_session",
    "alias",
    "inserted_before",
    "same_speaker",
    "older",
)
WORDS = ["I", "we", "now", "switched", "because", "not", "oat", "milk", "from", "instead", "of"]

value = st.one_of(
    st.floats(0.0, 1.0), st.floats(-2.0, 3.0), st.sampled_from([0.0, 1.0, None, math.nan])
)
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=9).map(" ".join)
pair = st.fixed_dictionaries(
    {
        "id": st.integers(0, 99),
        "text": text,
        "signals": st.dictionaries(st.sampled_from(SIGNALS), value, max_size=len(SIGNALS)),
    }
)


def request(cands: list[dict[str, Any]], alias: list[bool], temporal: list[bool], new: str) -> Any:
    qs = PairQuestions(catalogue.relation_questions, alias, temporal)
    state = {"observation": {"id": 100, "text": new}, "candidates": cands}
    return DecisionRequest("relations", state, qs)


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=150, deadline=None)
@given(st.data(), st.lists(pair, min_size=1, max_size=6), text)
def test_arrays_equal_question_by_question(
    data: Any, cands: list[dict[str, Any]], new: str
) -> None:
    n = len(cands)
    alias = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    temporal = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    for controller in (LocalController(), LearnedController()):
        req = request(cands, alias, temporal, new)
        assert tuple(req.questions) == tuple(
            q
            for i in range(n)
            for q in catalogue.relation_questions(i, ask_alias=alias[i], ask_temporal=temporal[i])
        )
        by_array = controller.decide([req])[0]
        assert type(by_array) is PairAnswers
        one_by_one = controller.decide(
            [DecisionRequest(req.purpose, req.state, tuple(req.questions))]
        )[0]
        assert type(one_by_one) is dict
        assert list(by_array) == list(one_by_one)
        for qid, answer in one_by_one.items():
            got = by_array[qid]
            if isinstance(answer, NoulAnswer):
                assert isinstance(got, NoulAnswer) and same(got.value, answer.value), qid
            else:
                assert got == answer, qid
        validate_answers([req], [by_array])
        validate_answers([req], [one_by_one])
        a_values, a_temporal = pair_values(by_array, n)
        d_values, d_temporal = pair_values(one_by_one, n)
        assert np.array_equal(a_values, d_values, equal_nan=True)
        assert a_temporal == d_temporal
        assert [t is not None for t in a_temporal] == temporal
        # an alias that was not asked reads as 0 either way
        assert all(
            a_values[i, PAIR_NOULS.index("entity_alias")] == 0 for i in range(n) if not alias[i]
        )


def test_pair_answers_as_a_mapping() -> None:
    req = request(
        [{"id": 1, "text": "oat milk", "signals": {"vector": 0.9}}] * 2,
        [True, False],
        [False, True],
        "I switched to soy milk",
    )
    got = LocalController().decide([req])[0]
    assert isinstance(got, PairAnswers) and len(got) == len(req.questions)
    assert "pair_1_entity_alias" not in got and "pair_0_temporal" not in got
    assert "pair_0_entity_alias" in got and isinstance(got["pair_1_temporal"], ChoiceAnswer)
    got["pair_0_semantic"] = NoulAnswer(0.25)
    assert got["pair_0_semantic"] == NoulAnswer(0.25)
    with pytest.raises(KeyError):
        got["pair_2_semantic"]
    with pytest.raises(TypeError):
        got["pair_0_semantic"] = ChoiceAnswer("before", {"before": 1.0})


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf])
def test_a_bad_array_answer_is_refused(bad: float) -> None:
    req = request([{"id": 1, "text": "a", "signals": {}}] * 3, [True] * 3, [False] * 3, "b")
    got = LocalController().decide([req])[0]
    assert isinstance(got, PairAnswers)
    got.array[2, PAIR_NOULS.index("supersedes")] = bad
    with pytest.raises(ControllerError, match="pair_2_supersedes"):
        validate_answers([req], [got])


def test_an_unanswered_temporal_choice_is_refused() -> None:
    req = request([{"id": 1, "text": "a", "signals": {}}], [True], [True], "b")
    got = LocalController().decide([req])[0]
    assert isinstance(got, PairAnswers)
    got.temporal[0] = None
    with pytest.raises(ControllerError, match="pair_0_temporal"):
        validate_answers([req], [got])


def test_a_relation_round_keeps_its_form_over_the_wire() -> None:
    pytest.importorskip("grpc")
    from jevmem._proto.jevmem.v1 import controller_pb2 as cpb
    from jevmem.remote.convert import (
        answers_from_proto,
        answers_to_proto,
        requests_from_proto,
        requests_to_proto,
    )

    cands = [
        {"id": i, "text": f"I moved to city {i}", "signals": {"vector": i / 5}} for i in range(4)
    ]
    sent = [request(cands, [True, False, True, False], [False, False, True, True], "we moved")]
    # the same questions with one reworded: a plain tuple on the other side
    reworded = tuple(
        type(q)(
            *(
                ("changed?" if f == "instruction" and k == 0 else getattr(q, f))
                for f in q.__dataclass_fields__
            )
        )
        for k, q in enumerate(sent[0].questions)
    )
    sent.append(DecisionRequest("relations", sent[0].state, reworded))
    wire = cpb.DecideRequest.FromString(requests_to_proto(sent).SerializeToString())
    received = requests_from_proto(wire)
    assert received == sent
    # the write path's form, a PairTable, travels as the mappings it stands for
    full: list[dict[str, Any]] = [dict(c, speaker="ann", timestamp=None) for c in cands]
    table = PairTable(
        [c["id"] for c in full],
        [c["text"] for c in full],
        {"vector": [c["signals"]["vector"] for c in full]},
        ["ann"] * len(full),
        [None] * len(full),
    )
    as_table = [
        DecisionRequest("relations", {**sent[0].state, "candidates": table}, sent[0].questions)
    ]
    as_dicts = [
        DecisionRequest("relations", {**sent[0].state, "candidates": full}, sent[0].questions)
    ]
    assert requests_to_proto(as_table).SerializeToString() == (
        requests_to_proto(as_dicts).SerializeToString()
    )
    assert type(received[0].questions) is PairQuestions
    assert received[0].questions.alias == [True, False, True, False]
    assert received[0].questions.temporal == [False, False, True, True]
    assert type(received[1].questions) is tuple
    served = LocalController().decide(received)
    assert type(served[0]) is PairAnswers and type(served[1]) is dict
    back = cpb.DecideResponse.FromString(
        answers_to_proto(received, served, "local").SerializeToString()
    )
    got = answers_from_proto(back, sent)
    local = LocalController().decide(sent)
    assert dict(got[0]) == dict(local[0])
    validate_answers(sent, got)


# ---- the relation rule over columns -------------------------------------------


def _squash(x: float, mid: float, steep: float) -> float:
    return 1.0 / (1.0 + math.exp(-steep * (x - mid)))


def _clip(x: float) -> float:
    return x if 0.0 < x < 1.0 else (1.0 if 1.0 <= x < math.inf else 0.0)


def relation_reference(new: str, cand: dict[str, Any]) -> list[float]:
    """The local controller's relation rule for one pair, as it read each
    pair's signals one by one before it read columns (the oracle). The
    texts' cue values come from the controller's own text rules, which the
    move to columns did not change (a deliberate white-box read)."""
    from jevmem.controller.changes import change_statements, denials
    from jevmem.controller.local import cause_cue

    sig = cand["signals"]

    def read(name: str, default: float = 0.0) -> float:
        v = sig.get(name)
        return default if v is None or v != v else float(v)

    vec, lex, ent, tmp = read("vector"), read("lexical"), read("entity"), read("temporal")
    alias, speaker, session = read("alias"), read("same_speaker"), read("same_session")
    # the one said later states the change (a candidate said after the new
    # text: a log written out of order)
    later = read("older", 1.0) < 0.5
    match = 0.6 * vec + 0.4 * lex
    topical = _squash(match, 0.45, 10.0)
    about = 0.6 + 0.4 * max(ent, tmp)
    old = str(cand["text"])
    subject = max(speaker, min(1.0, 2.0 * ent), alias)
    changer, changed = (old, new) if later else (new, old)
    got = {
        "semantic": _squash(match, 0.55, 10.0),
        "causal_candidate_to_new": topical * (0.25 + 0.75 * cause_cue(new)) * about,
        "causal_new_to_candidate": topical * (0.25 + 0.75 * (cause_cue(old) * 0.8)) * about,
        "same_episode": 0.55 * session + 0.35 * tmp + 0.1 * vec,
        "supersedes": _squash(match, 0.4, 10.0)
        * (0.4 + 0.6 * subject)
        * (
            0.1
            + 0.9
            * max(
                change_statements(changer, [changed])[0],
                denials(changer, [changed])[0] * speaker,
            )
        ),
        "entity_alias": alias * (0.5 + 0.5 * vec),
    }
    return [_clip(got[name]) for name in PAIR_NOULS]


states = st.lists(st.tuples(text, st.lists(pair, min_size=0, max_size=5)), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(states)
def test_relation_columns_follow_the_rule_pair_by_pair(batch: list[Any]) -> None:
    got = relation_arrays(
        [{"observation": {"text": new}, "candidates": cands} for new, cands in batch]
    )
    assert [a.shape for a in got] == [(len(cands), len(PAIR_NOULS)) for _, cands in batch]
    for (new, cands), values in zip(batch, got, strict=True):
        for cand, row in zip(cands, values.tolist(), strict=True):
            # numpy's exp may differ from libm's in the last bit
            assert row == pytest.approx(relation_reference(new, cand), rel=1e-12, abs=1e-15)


def table_of(cands: list[dict[str, Any]]) -> PairTable:
    """``cands`` as the columns the write path sends (NaN: absent)."""
    return PairTable(
        [c["id"] for c in cands],
        [c["text"] for c in cands],
        {
            name: [math.nan if (v := c["signals"].get(name)) is None else v for c in cands]
            for name in SIGNALS
        },
        [c.get("speaker") for c in cands],
        [c.get("timestamp") for c in cands],
    )


@settings(max_examples=100, deadline=None)
@given(st.data(), states)
def test_a_batch_of_pair_tables_answers_as_each_list_alone(data: Any, batch: list[Any]) -> None:
    """Rounds answered together from `PairTable`s equal each round answered
    alone from its plain candidate mappings."""
    reqs, plain = [], []
    for new, cands in batch:
        n = len(cands)
        alias = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        temporal = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        reqs.append(request(table_of(cands), alias, temporal, new))  # type: ignore[arg-type]
        plain.append(request(cands, alias, temporal, new))
    together = LocalController().decide(reqs)
    for req, got in zip(plain, together, strict=True):
        one = LocalController().decide([req])[0]
        a, b = pair_values(got, req.questions.n_pairs), pair_values(one, req.questions.n_pairs)
        assert np.array_equal(a[0], b[0]) and a[1] == b[1]


def test_a_pair_table_reads_as_its_mappings() -> None:
    table = PairTable([4, 7], ["a", "b"], {"vector": [0.5, math.nan]}, ["Ann", None], [10, None])
    assert list(table) == [
        {"id": 4, "text": "a", "speaker": "Ann", "timestamp": 10, "signals": {"vector": 0.5}},
        {"id": 7, "text": "b", "speaker": None, "timestamp": None, "signals": {}},
    ]
    assert table[1]["id"] == 7 and len(table) == 2
    with pytest.raises(ValueError, match="speakers"):
        PairTable([1], ["a"], {}, [], [None])


# ---- the edges a round calls for ----------------------------------------------

VIEWS_OF = {
    "semantic": ("semantic", None, False),
    "causal_candidate_to_new": ("causal", None, False),
    "causal_new_to_candidate": ("causal", None, True),
    "same_episode": ("temporal", "overlaps", False),
    "entity_alias": ("entity", None, False),
}


def links_reference(
    pair_index: list[tuple[int, list[int]]], answers: list[Any], theta: float
) -> tuple[list[tuple[object, ...]], list[tuple[int, int, float]]]:
    """The write path's edge rule pair by pair, as it ran before it read arrays."""
    edges: list[tuple[object, ...]] = []
    supersedes: list[tuple[int, int, float]] = []
    for (node, cands), got in zip(pair_index, answers, strict=True):
        replaced = []
        values, temporal = pair_values(got, len(cands))
        for cid, row, choice in zip(cands, values.tolist(), temporal, strict=True):
            v = dict(zip(PAIR_NOULS, row, strict=True))
            for name, (view, label, outward) in VIEWS_OF.items():
                src, dst = (node, cid) if outward else (cid, node)
                if v[name] >= theta:
                    edges.append(
                        (src, dst, view, v[name])
                        if label is None
                        else (src, dst, view, v[name], "controller", label)
                    )
            if v["supersedes"] >= theta:
                replaced.append((node, cid, v["supersedes"]))
            if choice is not None and choice.label != "unknown":
                prob = choice.distribution[choice.label]
                if prob >= theta:
                    edges.append((cid, node, "temporal", prob, "controller", choice.label))
        if replaced:
            top = max(w for _, _, w in replaced)
            supersedes.extend(link for link in replaced if link[2] == top)
    return edges, supersedes


@settings(max_examples=200, deadline=None)
@given(st.data(), st.lists(st.integers(0, 4), max_size=5), st.sampled_from([0.3, 0.5, 0.7]))
def test_judged_links_follow_the_rule_pair_by_pair(
    data: Any, sizes: list[int], theta: float
) -> None:
    cell = st.sampled_from([0.0, 0.3, 0.5, 0.69, 0.7, 0.9, 1.0])
    pair_index, answers = [], []
    for r, n in enumerate(sizes):
        qs = PairQuestions(catalogue.relation_questions, [True] * n, [True] * n)
        values = data.draw(st.lists(st.lists(cell, min_size=6, max_size=6), min_size=n, max_size=n))
        labels = data.draw(
            st.lists(st.sampled_from(catalogue.TEMPORAL_LABELS), min_size=n, max_size=n)
        )
        probs = data.draw(st.lists(cell, min_size=n, max_size=n))
        temporal = [
            None if k % 3 == 2 else ChoiceAnswer(label, {label: p})
            for k, (label, p) in enumerate(zip(labels, probs, strict=True))
        ]
        answers.append(PairAnswers(qs, np.array(values).reshape(n, 6), temporal))
        pair_index.append((100 + r, list(range(10 * r, 10 * r + n))))
    assert judged_links(pair_index, answers, theta) == links_reference(pair_index, answers, theta)


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40))
def test_clipping_a_column_equals_clipping_each_value(values: list[float]) -> None:
    from jevmem.controller.scoring import clip_columns, clip_value

    with np.errstate(all="ignore"):
        got = clip_columns(np.array(values, dtype=np.float64)).tolist()
    want = [clip_value(v) for v in values]
    assert got == want
    # zero is +0.0 either way (a NaN, an infinity or -0.0 in, 0.0 out)
    assert [math.copysign(1.0, v) for v in got] == [math.copysign(1.0, v) for v in want]


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40))
def test_unit_of_a_column_equals_unit_of_each_value(values: list[float]) -> None:
    from jevmem.controller.head_answers import unit_columns, unit_value

    got = unit_columns(np.array(values, dtype=np.float64)).tolist()
    want = [unit_value(v) for v in values]
    # equal values; a zero's sign is not kept (fmax may give either zero)
    assert got == want
    assert all(
        math.copysign(1.0, g) == math.copysign(1.0, w) for g, w in zip(got, want, strict=True) if g
    )


SENTENCE_PARTS = [
    "I moved to Oslo.", "We now use Dagster!", "my cat", "Really?", "\n", " ",
    "I do not eat meat.", "Our team likes tea.", "I switched from oat to soy milk.",
    "We use Airflow instead of cron", "It is now late.", "We never used Airflow.",
    "I raised my sneaker budget to $650.", "my budget", "We moved the call to 4:30 PM",
    "I now have 52 sources in my Zotero library.", "our deadline is now April 5, 2024.",
    "I bought sneakers for $250", "coverage now at 78%!", "In 2024 I ran 5 km.",
    "I've never met Kyle or been to a sneaker expo, can you help?", "I'm not sure about Kyle.",
    "I won't give up.", "We don't use Airflow for the ETL pipelines",
]  # fmt: skip


@given(st.lists(st.sampled_from(SENTENCE_PARTS), min_size=20, max_size=80))
def test_own_sentences_read_the_first_sentences_of_the_whole_split(parts: list[str]) -> None:
    # the core stops early; the sentences read are those of splitting the
    # whole text, each the speaker's own with a change cue or a denial
    from jevmem.controller import changes
    from jevmem.controller.cues import CHANGE, NEGATION, OWN

    text = " ".join(parts)
    changes._own_sentences.cache_clear()
    got = [s for s, *_ in changes._own_sentences(text)]
    whole = re.split(r"(?<=[.!?])\s+|\n+", text)[: changes._CHANGE_SENTENCES]
    assert got == [
        s
        for s in whole
        if OWN.found(s) and (CHANGE.count(s) or NEGATION.found(s)) and changes._content_words(s)
    ]


def change_statements_reference(new_text: str, old_texts: list[str]) -> list[float]:
    """`change_statements` as it read every own sentence of the new text
    (the oracle for reading only those with a change cue or a denial)."""
    from jevmem.controller import changes
    from jevmem.controller.cues import CHANGE, NEGATION, OWN, VALUE, WORD, replaced_values

    split = re.compile(r"(?<=[.!?])\s+|\n+")
    own = []
    for sentence in split.split(new_text)[: changes._CHANGE_SENTENCES]:
        # the words as Python strings (`change_statements` keeps them in the core)
        words = WORD.word_set(sentence)
        if OWN.found(sentence) and words:
            given_up = [WORD.word_set(v) for v in replaced_values(sentence)]
            own.append((sentence, words, NEGATION.found(sentence), given_up))
    out = []
    for old in old_texts:
        old_words = WORD.word_set(old)
        stated = [
            values_reference(s)
            for s in split.split(old)
            if re.search(VALUE.pattern, s, re.IGNORECASE)
        ][: changes._VALUE_SENTENCES]
        best = 0.0
        for sentence, words, denies, given_up in own if old_words else []:
            about = len(words & old_words) / len(words)
            if about < 0.15:
                continue
            change = 1.0 - math.exp(-CHANGE.count(sentence) / 0.6)
            if denies and not NEGATION.found(old):
                change = max(change, 0.5)
            if any(g & old_words for g in given_up):
                change = min(1.0, change + 0.3) if change > 0 else 0.0
            scale = min(1.0, about / 0.2)
            values = values_reference(sentence)
            if values:
                # the share of a value's words around another value of its
                # kind in the old text, the best over every pair
                slot = max(
                    (
                        len(words_at & other_words) / len(words_at)
                        for (kind, value), words_at in values.items()
                        for o in stated
                        for (other_kind, other), other_words in o.items()
                        if words_at and other_kind == kind and other != value
                    ),
                    default=0.0,
                )
                if slot >= changes._SLOT_LEAST:
                    scale = max(scale, min(1.0, slot / changes._SLOT_FULL))
                else:
                    scale = scale * changes._UNMATCHED_VALUE
            best = max(best, change * scale)
        out.append(best)
    return out


MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()


def values_reference(sentence: str) -> dict[tuple[str, str], set[str]]:
    """The values a sentence states, as `changes._values` reads them, with
    Python's `re` and plain sets: (kind, value) -> the words of the 60
    characters either side of its first occurrence (the oracle)."""
    from jevmem.controller import changes
    from jevmem.controller.cues import VALUE, WORD

    out: dict[tuple[str, str], set[str]] = {}
    sentence = sentence[: changes._VALUE_SENTENCE_CHARS]
    found = list(re.finditer(VALUE.pattern, sentence, re.IGNORECASE))[: changes._VALUES_READ]
    for m in found:
        text = m.group(0).lower()
        plain = text.replace(",", "")
        number = "".join(c for c in plain if c.isdigit() or c == ".")
        if re.search(r"[$\u20ac\u00a3]\s*$", sentence[: m.start()]) or text.endswith(
            ("dollars", "euros", "pounds")
        ):
            key = ("money", number)
        elif text.endswith(("%", "percent")):
            key = ("percent", number)
        elif re.search(r"(am|pm|a\.m\.|p\.m\.)$", text) or ":" in text:
            hour, _, minute = plain.partition(":")
            h = int("".join(c for c in hour if c.isdigit()) or 0)
            mins = "".join(c for c in minute if c.isdigit()) or "00"
            key = ("time", f"{h}:{mins}" + ("pm" if "p" in text else "am" if "a" in text else ""))
        elif re.search("[a-z]", text):
            month = next(m for m in MONTHS if re.search(rf"\b{m}", text))
            day = re.search(r"\d+", text)
            assert day is not None
            key = ("date", f"{month} {int(day.group(0))}")
        elif len(text) == 4 and text[:2] in ("19", "20"):
            continue  # a year
        else:
            key = ("number", plain)
        if key not in out:
            around = sentence[max(0, m.start() - 60) : m.end() + 60]
            out[key] = set(WORD.word_set(re.sub(r"\d+", " ", around)))
    return out


OLD_FACTS = [
    "I drink oat milk.", "Our pipelines run on Airflow.", "I live in Oslo.", "We use cron.",
    "My cat is called Tom.", "I do not eat meat.", "I eat meat on Sundays.", "Tea is nice.", "",
    "My annual sneaker budget is $600.", "I spent 600 dollars on sneakers.",
    "The call is at 3 PM. It is with Kyle.", "My Zotero library has 45 sources.",
    "Our deadline is the 1st of April.", "Test coverage reached 65%. I ran 5 km.",
    "I met Kyle at a sneaker expo in Bridgetown.", "I've never met Kyle, but I like tea.",
    "Our ETL pipelines run on Airflow.", "I never give up.",
]  # fmt: skip


def denials_reference(new_text: str, old_texts: list[str]) -> list[float]:
    """`changes.denials` with Python's `re` and plain sets (the oracle): every
    own sentence of the new text that holds a denial, its scopes (the words
    after each denial up to 60 characters or the clause's end), against each
    old text's words and scopes."""
    from jevmem.controller import changes
    from jevmem.controller.cues import DENIAL, NEGATION, OWN, WORD

    split = re.compile(r"(?<=[.!?])\s+|\n+")
    clause = re.compile(r"[,;:.!?()\n]|\s(?:but|and then|so|because)\s")

    def scopes(text: str) -> list[set[str]]:
        found = list(re.finditer(DENIAL.pattern, text, re.IGNORECASE))[: changes._DENIALS_READ]
        return [
            set(WORD.word_set(clause.split(text[m.end() : m.end() + 60], maxsplit=1)[0]))
            for m in found
        ]

    own = []
    for sentence in split.split(new_text)[: changes._CHANGE_SENTENCES]:
        words = set(WORD.word_set(sentence))
        if OWN.found(sentence) and words and NEGATION.found(sentence):
            own.append((words, [d for d in scopes(sentence) if d]))
    out = []
    for old in old_texts:
        old_words = set(WORD.word_set(old))
        old_scopes = scopes(old)
        best = 0.0
        for words, denied_scopes in own if old_words else []:
            about = len(words & old_words) / len(words)
            if about < 0.15 or not denied_scopes:
                continue
            if any(d & o for d in denied_scopes for o in old_scopes):
                continue
            shares = [len(d & old_words) / len(d) for d in denied_scopes if len(d & old_words) >= 2]
            denied = max(shares, default=0.0)
            if denied >= changes._DENIED_LEAST:
                strength = 0.5 + 0.4 * min(
                    1.0, (denied - changes._DENIED_LEAST) / changes._DENIED_SPAN
                )
                best = max(best, strength * min(1.0, about / 0.2))
        out.append(best)
    return out


@given(
    st.lists(st.sampled_from(SENTENCE_PARTS), max_size=30).map(" ".join),
    st.lists(st.sampled_from(OLD_FACTS), max_size=4),
)
def test_denials_follow_the_rule(new: str, olds: list[str]) -> None:
    from jevmem.controller.changes import denials

    assert denials(new, olds) == denials_reference(new, olds)


def test_a_denial_contradicts_what_was_asserted_not_what_was_denied_too() -> None:
    from jevmem.controller import changes

    new = "I've never met Kyle or been to a sneaker expo, can you help?"
    olds = [
        "I met Kyle at a sneaker expo in Bridgetown.",  # asserted: contradicted
        "I've never met Kyle or seen a sneaker expo.",  # denied too: they agree
        "Kyle likes tea and the sneaker expo.",  # one denied word ("met") missing
        "The weather was nice.",  # about something else
    ]
    changes.clear_caches()
    got = changes.denials(new, olds)
    assert got == denials_reference(new, olds)
    assert got[0] > 0.5 and got[1] == 0.0 and got[3] == 0.0
    assert got[2] < got[0]
    # a hedge denies nothing; a denial of one word ("won't give up") neither
    assert changes.denials("I'm not sure I met Kyle at the expo.", olds[:1]) == [0.0]
    assert changes.denials("I met Kyle and I won't give up.", ["I give up on Kyle."]) == [0.0]


@given(
    st.lists(st.sampled_from(SENTENCE_PARTS), max_size=30).map(" ".join),
    st.lists(st.sampled_from(OLD_FACTS), max_size=4),
)
def test_change_statements_read_only_sentences_that_can_state_a_change(
    new: str, olds: list[str]
) -> None:
    from jevmem.controller.changes import change_statements

    assert change_statements(new, olds) == change_statements_reference(new, olds)


def test_a_changed_value_replaces_the_statement_that_gave_it() -> None:
    # a change that names a value replaces the earlier statement of a value
    # of that kind with the same words around it, over a topical neighbour
    # that gives no such value, gives one about something else, or gives
    # one far from the words it shares
    from jevmem.controller import changes, local
    from jevmem.controller.changes import change_statements

    new = "I raised my sneaker budget to $650."
    olds = [
        "My annual sneaker budget is $600.",
        "My sneaker budget was 600 dollars.",  # the same kind, written out
        "I love sneakers and I plan my sneaker budget every spring.",  # no value
        "The sneaker budget meeting is at 3 PM.",  # a value of another kind
        "My annual sneaker budget matters a lot to me, and I think about it "
        "often when shopping around town; in other news I paid $600 for repairs.",
        "My sneaker budget is $650.",  # the same value: not the one replaced
    ]
    local.clear_text_caches()
    got = change_statements(new, olds)
    assert got == change_statements_reference(new, olds)
    full = 1.0 - math.exp(-1 / 0.6)  # one change cue ("raised ... to")
    assert got[0] == got[1] == pytest.approx(full)
    unmatched = changes._UNMATCHED_VALUE * full
    assert got[2] == pytest.approx(unmatched)
    assert got[3] == got[4] == got[5] == pytest.approx(unmatched)
    # a change that names no value reads the earlier text as before
    plain = change_statements("I switched my sneaker brand now.", olds[:1])
    assert plain == change_statements_reference("I switched my sneaker brand now.", olds[:1])


def test_a_long_sentence_gives_only_its_first_values() -> None:
    # a pasted table or log is one sentence of thousands of numbers: its
    # values are read from its first characters only, the first few of them
    from jevmem.controller import changes, local
    from jevmem.controller.changes import change_statements

    new = "I raised my sneaker budget to $650."
    statement = "My annual sneaker budget is $600"
    filler = " ".join(["sneaker row"] * 400)  # no stop: one sentence
    numbers = " ".join(str(i) for i in range(40))
    olds = [
        f"{statement} and {filler}",
        f"{filler} and {statement}",  # past the characters read
        f"{numbers} then {statement}",  # past the values read
    ]
    local.clear_text_caches()
    got = change_statements(new, olds)
    assert got == change_statements_reference(new, olds)
    full = 1.0 - math.exp(-1 / 0.6)
    assert got[0] == pytest.approx(full)
    assert got[1] == got[2] == pytest.approx(changes._UNMATCHED_VALUE * full)

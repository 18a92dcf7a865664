"""A relation round answered as arrays (`PairQuestions` / `PairAnswers`)
gives exactly the answers of the same round asked question by question, and
reads back the same way (`pair_values`) from either form."""

from __future__ import annotations

import math
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
    catalogue,
    validate_answers,
)
from jevmem.controller.types import PAIR_NOULS, pair_values

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

"""The typed controller interface: catalogue, validation, local answers by kind."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jevmem.controller import (
    Answer,
    Choice,
    ChoiceAnswer,
    ControllerError,
    DecisionRequest,
    LocalController,
    Noul,
    NoulAnswer,
    catalogue,
    validate_answers,
)


def all_questions() -> list[Noul | Choice]:
    qs: list[Noul | Choice] = []
    qs += catalogue.typing_questions()
    qs += catalogue.relation_questions(0, ask_alias=True, ask_temporal=True)
    qs += catalogue.consolidation_questions()
    qs += catalogue.routing_questions()
    qs += catalogue.scoring_questions(0)
    qs += catalogue.assessment_questions()
    return qs


def test_catalogue_is_complete_and_answered_locally() -> None:
    qs = all_questions()
    kinds = {q.kind for q in qs}
    assert len(kinds) == 4 + 7 + 5 + 6 + 4 + 4
    assert kinds <= set(LocalController.kinds())
    # wording is distinct and every Noul states both criteria
    assert len({q.instruction for q in qs}) == len(qs)
    for q in qs:
        if isinstance(q, Noul):
            assert q.true_if and q.false_if and q.true_if != q.false_if
        else:
            assert len(q.options) == len(q.option_meanings) >= 2
    assert {q.id for q in catalogue.relation_questions(3, ask_alias=False, ask_temporal=False)} == {
        "pair_3_semantic",
        "pair_3_causal_candidate_to_new",
        "pair_3_causal_new_to_candidate",
        "pair_3_same_episode",
        "pair_3_supersedes",
    }
    assert all(q.id.startswith("candidate_7_") for q in catalogue.scoring_questions(7))


def request(purpose: str, state: dict[str, Any], qs: Any) -> DecisionRequest:
    return DecisionRequest(purpose, state, tuple(qs))


def one(purpose: str, state: dict[str, Any], qs: Any) -> Mapping[str, Any]:
    req = request(purpose, state, qs)
    got = LocalController().decide([req])
    validate_answers([req], got)
    return got[0]


def obs(text: str) -> dict[str, Any]:
    return {"observation": {"text": text, "speaker": "Maya", "timestamp": None}}


def test_typing_answers_follow_the_text() -> None:
    q = catalogue.typing_questions()
    pref = one("typing", obs("I prefer oat milk and I love jazz, my favourite is Coltrane"), q)
    proc = one("typing", obs("How to fix it: first prune docker, then restart the runner"), q)
    epi = one("typing", obs("Yesterday we went hiking and met Ines at the lake"), q)
    val = {k: {n: a.value for n, a in d.items()} for k, d in (("p", pref), ("r", proc), ("e", epi))}
    assert val["p"]["preference"] > max(val["r"]["preference"], val["e"]["preference"])
    assert val["r"]["procedural"] > max(val["p"]["procedural"], val["e"]["procedural"])
    assert val["e"]["episodic"] > val["r"]["episodic"]


def test_routing_reads_the_query() -> None:
    q = catalogue.routing_questions()

    def route(text: str, entities: list[str]) -> dict[str, float]:
        got = one("routing", {"query": {"text": text, "entities": entities}}, q)
        return {k: a.value for k, a in got.items()}

    when = route("When did Caroline go to the support group?", ["caroline"])
    why = route("Why did the release get postponed?", [])
    now = route("What milk does Maya currently take?", ["maya"])
    assert when["temporal"] > why["temporal"]
    assert why["causal"] > when["causal"]
    assert now["recency"] > why["recency"]
    assert when["entity"] > why["entity"]


def cand(**signals: float) -> dict[str, Any]:
    return {"id": 1, "text": "t", "view": "temporal", "signals": signals}


def test_scoring_and_assessment_follow_signals() -> None:
    q = catalogue.scoring_questions(0)
    strong = one("scoring", {"query": {"routing": {"temporal": 0.9}}, "candidates": [cand(lexical=1.0, dense=0.9, entity_match=1.0, edge_weight=1.0, support=0.8)]}, q)  # fmt: skip
    weak = one("scoring", {"query": {"routing": {"temporal": 0.1}}, "candidates": [cand(lexical=0.1, dense=0.2, max_evidence_similarity=0.9)]}, q)  # fmt: skip
    for name in ("relevance", "relation_usefulness", "support"):
        assert strong[f"candidate_0_{name}"].value > weak[f"candidate_0_{name}"].value
    assert weak["candidate_0_novelty"].value < strong["candidate_0_novelty"].value

    aq = catalogue.assessment_questions()

    def assess(rel: float, grounded: float, coverage: float) -> dict[str, float]:
        # content_coverage: what the item asserts about the entity asked about
        ev = [{"id": 1, "text": "x", "signals": {"relevance": rel, "content_coverage": grounded}}]
        got = one("assessment", {"evidence": ev, "coverage": coverage, "frontier_best": 0.5}, aq)
        return {k: a.value for k, a in got.items()}

    good, wrong_person = assess(0.9, 1.0, 1.0), assess(0.9, 0.0, 1.0)
    assert good["sufficiency"] > wrong_person["sufficiency"]
    assert wrong_person["missing"] > good["missing"]
    assert wrong_person["usefulness"] > good["usefulness"]


def test_sufficiency_weighs_evidence_about_someone_else_against() -> None:
    aq = catalogue.assessment_questions()

    def sufficiency(mine: float, theirs: float, score: float = 0.8) -> float:
        sig = {"relevance": 0.8, "content_coverage": mine, "other_coverage": theirs}
        ev = [{"id": 1, "text": "x", "score": score, "signals": sig}]
        got = one("assessment", {"evidence": ev, "coverage": 1.0, "frontier_best": 0.1}, aq)
        return float(got["sufficiency"].value)

    only_mine, both, only_theirs = (
        sufficiency(1.0, 0.0),
        sufficiency(1.0, 1.0),
        sufficiency(0.0, 1.0),
    )
    assert only_mine > both > only_theirs
    assert both == pytest.approx(0.5)
    assert sufficiency(0.5, 0.0) < only_mine  # ordered by the margin, not clipped
    assert sufficiency(0.2, 0.6) < sufficiency(0.2, 0.3) < 0.5
    # nothing asserted either way: the topical match alone stays below undecided
    assert sufficiency(0.0, 0.0, score=1.0) <= 0.5
    assert sufficiency(0.0, 0.0, score=0.2) < sufficiency(0.0, 0.0, score=0.9)


_unit = st.floats(0.0, 1.0)


@given(
    items=st.lists(st.tuples(_unit, _unit, _unit), min_size=1, max_size=6),
    scores=st.lists(_unit, min_size=6, max_size=6),
    coverage=_unit,
)
def test_missing_is_what_the_best_item_leaves_unsaid_however_it_ranks(
    items: list[tuple[float, float, float]], scores: list[float], coverage: float
) -> None:
    """``assess.missing`` reads the evidence's coverage of the query about
    whom it asks, not how well the items rank: the same items at any scores
    give the same answer, 1 less the best item's coverage (or half the
    query coverage, if larger). An item that states the whole answer leaves
    nothing missing, so the early stop can hold when it ranks modestly."""
    aq = catalogue.assessment_questions()

    def missing(with_scores: list[float]) -> float:
        ev = [
            {
                "id": i,
                "text": "x",
                "score": score,
                "signals": {"relevance": rel, "content_coverage": mine, "other_coverage": theirs},
            }
            for i, ((rel, mine, theirs), score) in enumerate(zip(items, with_scores, strict=False))
        ]
        state = {"evidence": ev, "coverage": coverage, "frontier_best": 0.5}
        return float(one("assessment", state, aq)["missing"].value)

    got = missing(scores)
    assert got == missing([1.0] * 6) == missing([0.0] * 6)
    best = max(mine for _, mine, _ in items)
    assert got == pytest.approx(min(1.0, max(0.0, 1.0 - max(best, 0.5 * coverage))))
    if best == 1.0:
        assert got == 0.0


def test_relations_and_choices() -> None:
    qs = catalogue.relation_questions(0, ask_alias=True, ask_temporal=True)
    base = {"observation": {"text": "So we postponed the release because the deploy failed"}}
    close = dict(base, candidates=[{"text": "the deploy failed", "signals": {"vector": 0.8, "lexical": 0.7, "temporal": 0.9, "same_session": 1.0}}])  # fmt: skip
    far = dict(
        base, candidates=[{"text": "I like jazz", "signals": {"vector": 0.1, "lexical": 0.0}}]
    )
    a, b = one("relations", close, qs), one("relations", far, qs)
    for name in ("semantic", "causal_candidate_to_new", "same_episode"):
        assert a[f"pair_0_{name}"].value > b[f"pair_0_{name}"].value
    t = a["pair_0_temporal"]
    assert isinstance(t, ChoiceAnswer) and math.isclose(sum(t.distribution.values()), 1.0)


unit = st.floats(0.0, 1.0)


@given(st.lists(st.tuples(unit, unit, unit, unit, unit, unit), min_size=1, max_size=6))
def test_local_answers_are_valid_for_any_signals(rows: list[tuple[float, ...]]) -> None:
    cands = [
        cand(lexical=r[0], dense=r[1], entity_match=r[2], edge_weight=r[3], support=r[4], max_evidence_similarity=r[5])
        for r in rows
    ]  # fmt: skip
    qs = [q for i in range(len(cands)) for q in catalogue.scoring_questions(i)]
    req = request("scoring", {"query": {"routing": {"temporal": 0.5}}, "candidates": cands}, qs)
    got = LocalController().decide([req])
    validate_answers([req], got)


def test_validation_rejects_bad_answers() -> None:
    qs = catalogue.assessment_questions()
    req = request("assessment", {}, qs)
    good: dict[str, Answer] = {q.id: NoulAnswer(0.5) for q in qs}
    validate_answers([req], [good])
    bads: list[dict[str, Answer]] = [
        {**good, "sufficiency": NoulAnswer(float("nan"))},
        {**good, "sufficiency": NoulAnswer(1.5)},
        {k: v for k, v in good.items() if k != "missing"},
        {**good, "extra": NoulAnswer(0.1)},
        {**good, "usefulness": ChoiceAnswer("x", {"x": 1.0})},
    ]
    for bad in bads:
        with pytest.raises(ControllerError):
            validate_answers([req], [bad])
    with pytest.raises(ControllerError):
        validate_answers([req], [])
    choice_req = request("consolidation", {}, [catalogue.consolidation_questions()[-1]])
    opts = catalogue.REPRESENTATION_OPTIONS
    with pytest.raises(ControllerError, match="sum"):
        validate_answers(
            [choice_req], [{"representation": ChoiceAnswer("merge", dict.fromkeys(opts, 0.5))}]
        )
    with pytest.raises(ControllerError, match="label"):
        validate_answers(
            [choice_req], [{"representation": ChoiceAnswer("delete", dict.fromkeys(opts, 0.25))}]
        )


def nbr(text: str, vector: float, lexical: float, **extra: float) -> dict[str, Any]:
    return {"id": 1, "text": text, "signals": {"vector": vector, "lexical": lexical, **extra}}


def test_consolidation_answers_follow_the_neighbourhood() -> None:
    qs = catalogue.consolidation_questions()

    def ask(
        neighbours: list[dict[str, Any]], focus: str = "I take oat milk in coffee"
    ) -> Mapping[str, Any]:
        return one("consolidation", {"focus": {"text": focus}, "neighbours": neighbours}, qs)

    dup = ask([nbr("I take oat milk in coffee", 0.98, 0.95, linked=1.0)] * 3)
    far = ask([nbr("the deploy failed", 0.1, 0.0, linked=1.0)])
    flip = ask([nbr("I do not take oat milk in coffee", 0.9, 0.8, linked=1.0)])
    newer = ask([nbr("I switched to soy milk in coffee", 0.85, 0.7, newer=1.0, linked=1.0)])
    unlinked = ask([nbr("oat milk and coffee again", 0.8, 0.6, linked=0.0)])
    v = {name: {k: (a.value if isinstance(a, NoulAnswer) else a) for k, a in d.items()} for name, d in (("dup", dup), ("far", far), ("flip", flip), ("newer", newer), ("unlinked", unlinked))}  # fmt: skip
    assert v["dup"]["redundant"] > 0.5 > v["far"]["redundant"]
    assert v["flip"]["contradicting"] > v["dup"]["contradicting"]
    assert v["newer"]["obsolete"] > v["dup"]["obsolete"]
    assert v["unlinked"]["extra_link"] > v["dup"]["extra_link"]
    rep_dup, rep_far = dup["representation"], far["representation"]
    assert isinstance(rep_dup, ChoiceAnswer) and isinstance(rep_far, ChoiceAnswer)
    assert rep_dup.label == "merge" and rep_far.label == "keep_separate"
    assert rep_dup.distribution["merge"] > rep_far.distribution["merge"]
    assert ask([])["redundant"].value == 0.0  # nothing to compare with


class _StopsEarly:
    """A streaming controller that reads only the first request of a round;
    with ``search_in_write`` its write rounds search the memory first."""

    name = "stops-early"

    def __init__(self) -> None:
        self.inner = LocalController()
        self.memory: Any = None
        self.search_in_write = False

    def decide(self, requests: list[DecisionRequest]) -> list[Mapping[str, Answer]]:
        if self.search_in_write and self.memory is not None:
            self.memory.search("Who teaches Maya?")
        return list(self.inner.decide(requests))

    def decide_stream(
        self, requests: Any, budget_s: float | None = None
    ) -> list[Mapping[str, Answer]]:
        first = [next(iter(requests))]  # stops pulling after one request
        return list(self.inner.decide(first))


def test_a_stream_left_unread_fails_the_round_and_changes_nothing() -> None:
    from jevmem import HashEmbedder, Memory

    ctl = _StopsEarly()
    m = Memory(HashEmbedder(32), controller=ctl)  # type: ignore[arg-type]
    for t in ["Maya takes cello with Ines", "Lena works at a marine lab", "Ines moved to Lisbon"]:
        m.add(t, speaker="Maya")
    ctl.memory = m
    before, n_before = m.derived_state(), len(m)
    with pytest.raises(ControllerError, match=r"answered 1 requests and left some unread"):
        m.search_batch(["Who teaches Maya?", "Where does Lena work?"])
    assert m.derived_state() == before and len(m) == n_before
    # a write whose round searches through the same controller is rolled back
    ctl.search_in_write = True
    with pytest.raises(ControllerError, match="left some unread"):
        m.add("Maya met Ines in Porto", speaker="Maya")
    assert m.derived_state() == before and len(m) == n_before

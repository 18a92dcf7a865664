"""A candidate round answered as columns (`CandidateQuestions` / `CandidateAnswers`)
gives exactly the answers of the same round asked question by question."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem.controller import (
    CandidateAnswers,
    CandidateQuestions,
    CandidateTable,
    ControllerError,
    DecisionRequest,
    LearnedController,
    LocalController,
    NoulAnswer,
    catalogue,
    validate_answers,
)
from jevmem.plane.signals import neutral_answers, round_questions, round_values

SIGNALS = (
    "lexical",
    "dense",
    "dense_passage",
    "entity_match",
    "time_match",
    "asks",
    "dense_raw",
    "lexical_rank",
    "dense_rank",
    "length",
    "speaker_asks",
    "speaker_length",
    "support",
    "episode_support",
    "prev_match",
    "next_match",
    "edge_weight",
    "same_session",
    "max_evidence_similarity",
    "novelty",
    "valid_at_query_time",
    "superseded",
    "not_yet_valid",
    "chain_match",
    "type_episodic",
    "query_self",
    "query_summary",
    "query_answerer",
)

# what a signal may hold: shares, but also the values a careless plug-in
# plane could put there (None, NaN, infinities, out of range)
value = st.one_of(
    st.floats(0.0, 1.0),
    st.floats(-2.0, 3.0),
    st.sampled_from([0.0, 1.0, None, math.nan, math.inf, -math.inf]),
)
signals = st.dictionaries(st.sampled_from(SIGNALS), value, max_size=len(SIGNALS))
candidate = st.fixed_dictionaries(
    {"id": st.integers(0, 99), "text": st.just("t"), "signals": signals},
    optional={"view": st.sampled_from(["semantic", "temporal", "causal", "entity", "other"])},
)
routing = st.dictionaries(
    st.sampled_from(["semantic", "temporal", "causal", "entity"]), st.floats(0.0, 1.0)
)


def plain(questions: CandidateQuestions) -> tuple[Any, ...]:
    """The same questions as a plain tuple: the controller answers them one by one."""
    return tuple(questions)


def request(cands: list[dict[str, Any]], per_candidate: Any, route: dict[str, float]) -> Any:
    qs = round_questions(per_candidate, len(cands))
    return DecisionRequest("scoring", {"query": {"routing": route}, "candidates": cands}, qs)


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(candidate, min_size=1, max_size=8),
    st.sampled_from([catalogue.scoring_questions, catalogue.anchor_questions]),
    routing,
)
def test_columns_equal_question_by_question(
    cands: list[dict[str, Any]], per_candidate: Any, route: dict[str, float]
) -> None:
    for controller in (LocalController(), LearnedController()):
        req = request(cands, per_candidate, route)
        by_column = controller.decide([req])[0]
        assert type(by_column) is CandidateAnswers
        one_by_one = controller.decide(
            [DecisionRequest(req.purpose, req.state, plain(req.questions))]
        )[0]
        assert type(one_by_one) is dict
        assert list(by_column) == list(one_by_one)
        for qid, answer in one_by_one.items():
            got = by_column[qid]
            assert isinstance(got, NoulAnswer) and isinstance(answer, NoulAnswer)
            assert same(got.value, answer.value), (controller.name, qid, got, answer)
        validate_answers([req], [by_column])
        values = round_values(by_column, req.questions)
        assert values.shape == (len(cands), len(req.questions.template))
        assert ((values >= 0) & (values <= 1)).all()


def test_candidate_questions_are_a_plain_tuple_with_a_template() -> None:
    qs = round_questions(catalogue.scoring_questions, 3)
    assert qs is round_questions(catalogue.scoring_questions, 3)  # cached per count
    assert qs == tuple(q for i in range(3) for q in catalogue.scoring_questions(i))
    assert qs.n_candidates == 3 and qs.template == catalogue.scoring_questions(0)
    assert qs.names == ("relevance", "relation_usefulness", "novelty", "support")
    empty = round_questions(catalogue.anchor_questions, 0)
    assert empty.n_candidates == 0 and empty == ()
    with pytest.raises(ValueError, match="template"):
        CandidateQuestions(lambda i: catalogue.routing_questions(), 2)


def test_candidate_answers_as_a_mapping() -> None:
    qs = round_questions(catalogue.anchor_questions, 2)
    answers = CandidateAnswers(qs, [[0.1, 0.2], [0.3, 0.4]])
    assert list(answers) == [q.id for q in qs] and len(answers) == 4
    assert answers["candidate_1_support"] == NoulAnswer(0.4)
    assert dict(answers) == {q.id: answers[q.id] for q in qs}
    answers["candidate_0_relevance"] = NoulAnswer(0.9)
    assert answers.column("score.relevance").tolist() == [0.9, 0.3]
    for missing in ("candidate_2_relevance", "candidate_0_novelty", "candidate_x_support", "r"):
        with pytest.raises(KeyError):
            answers[missing]
        assert missing not in answers
    with pytest.raises(TypeError):
        del answers["candidate_0_relevance"]
    with pytest.raises(TypeError):
        answers["candidate_0_relevance"] = "high"  # type: ignore[assignment]


@pytest.mark.parametrize("bad", [math.nan, -0.01, 1.5, math.inf])
def test_validation_rejects_a_bad_cell_by_its_question(bad: float) -> None:
    qs = round_questions(catalogue.scoring_questions, 3)
    req = DecisionRequest("scoring", {"candidates": [{}] * 3}, qs)
    answers = CandidateAnswers(qs, np.full((3, 4), 0.5))
    validate_answers([req], [answers])
    answers.array[2, 1] = bad
    with pytest.raises(ControllerError, match="candidate_2_relation_usefulness"):
        validate_answers([req], [answers])
    # answers to another round's questions are checked as any mapping is
    other = CandidateAnswers(round_questions(catalogue.scoring_questions, 2))
    with pytest.raises(ControllerError, match="missing answers"):
        validate_answers([req], [other])


def test_a_round_with_too_few_candidates_is_refused() -> None:
    qs = round_questions(catalogue.scoring_questions, 3)
    req = DecisionRequest("scoring", {"query": {}, "candidates": [{"signals": {}}] * 2}, qs)
    with pytest.raises(IndexError):
        LocalController().decide([req])


def test_round_values_reads_any_mapping() -> None:
    qs = round_questions(catalogue.anchor_questions, 2)
    answers = {q.id: NoulAnswer(0.25 * k) for k, q in enumerate(qs)}
    assert round_values(answers, qs).tolist() == [[0.0, 0.25], [0.5, 0.75]]


finite_or_nan = st.one_of(st.floats(-2.0, 3.0), st.sampled_from([math.nan, math.inf, -math.inf]))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["dense", "edge_weight", "novelty", "support", "lexical"]),
            finite_or_nan,
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([catalogue.scoring_questions, catalogue.anchor_questions]),
)
def test_neutral_answers_by_column_equal_one_by_one(
    sigs: list[dict[str, float]], per_candidate: Any
) -> None:
    cands = [{"id": i, "text": "t", "signals": s} for i, s in enumerate(sigs)]
    req = request(cands, per_candidate, {})
    (by_column,) = neutral_answers([req])
    assert type(by_column) is CandidateAnswers
    (one_by_one,) = neutral_answers([DecisionRequest(req.purpose, req.state, plain(req.questions))])
    assert type(one_by_one) is dict and list(by_column) == list(one_by_one)
    for qid, answer in one_by_one.items():
        assert by_column[qid] == answer, qid


def test_a_round_keeps_its_form_over_the_wire() -> None:
    pytest.importorskip("grpc")
    from jevmem._proto.jevmem.v1 import controller_pb2 as cpb
    from jevmem.remote.convert import (
        answers_from_proto,
        answers_to_proto,
        requests_from_proto,
        requests_to_proto,
    )

    cands = [
        {"id": i, "text": f"turn {i}", "signals": {"lexical": i / 7, "dense": 0.5, "support": 0.2}}
        for i in range(7)
    ]
    sent = [
        request(cands, catalogue.scoring_questions, {"semantic": 0.7}),
        DecisionRequest("routing", {"query": {"text": "q"}}, catalogue.routing_questions()),
    ]
    wire = cpb.DecideRequest.FromString(requests_to_proto(sent).SerializeToString())
    received = requests_from_proto(wire)
    assert received == sent
    assert type(received[0].questions) is CandidateQuestions
    assert received[0].questions.n_candidates == 7
    assert type(received[1].questions) is tuple  # not a candidate round
    served = LocalController().decide(received)
    assert type(served[0]) is CandidateAnswers
    back = cpb.DecideResponse.FromString(
        answers_to_proto(received, served, "local").SerializeToString()
    )
    got = answers_from_proto(back, sent)
    assert type(got[0]) is CandidateAnswers and got[0].questions is sent[0].questions
    local = LocalController().decide(sent)
    assert got[0] == local[0] and got[1] == local[1]
    validate_answers(sent, got)
    # a table goes as the mappings it stands for and comes back a table;
    # candidates with other keys come back as mappings
    table = table_of([{**c, "view": "semantic"} for c in cands])
    by_table = [DecisionRequest("scoring", {"query": {}, "candidates": table}, sent[0].questions)]
    back_table = requests_from_proto(
        cpb.DecideRequest.FromString(requests_to_proto(by_table).SerializeToString())
    )[0].state["candidates"]
    assert type(back_table) is CandidateTable and back_table == table
    assert type(received[0].state["candidates"]) is list
    # a round some question breaks is a plain tuple again
    broken = tuple(received[0].questions)[:-1]
    assert CandidateQuestions.recognise(broken) is None
    assert CandidateQuestions.recognise(tuple(reversed(received[0].questions))) is None


def table_of(cands: list[dict[str, Any]]) -> CandidateTable:
    names = sorted({name for c in cands for name in c["signals"]})
    return CandidateTable(
        [c["id"] for c in cands],
        [c["text"] for c in cands],
        {name: [c["signals"].get(name, math.nan) for c in cands] for name in names},
        views=[c.get("view", "semantic") for c in cands],
    )


present_value = st.one_of(st.floats(0.0, 1.0), st.floats(-2.0, 3.0), st.sampled_from([0.0, 1.0]))
table_candidate = st.fixed_dictionaries(
    {
        "id": st.integers(0, 99),
        "text": st.just("t"),
        "signals": st.dictionaries(st.sampled_from(SIGNALS), present_value, max_size=len(SIGNALS)),
    },
    optional={"view": st.sampled_from(["semantic", "temporal", "causal", "entity", "other"])},
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(table_candidate, min_size=0, max_size=8),
    st.sampled_from([catalogue.scoring_questions, catalogue.anchor_questions]),
    routing,
)
def test_a_candidate_table_is_read_as_its_mappings(
    cands: list[dict[str, Any]], per_candidate: Any, route: dict[str, float]
) -> None:
    table = table_of(cands)
    assert len(table) == len(cands)
    # the mappings it stands for: the same items, a signal it lacks (NaN) absent
    assert (
        table.as_dicts()
        == list(table)
        == table[:]
        == [{**c, "view": c.get("view", "semantic")} for c in cands]
    )
    for i in range(-len(cands), len(cands)):
        assert table[i] == table.as_dicts()[i]
    with pytest.raises(IndexError):
        table[len(cands)]
    for controller in (LocalController(), LearnedController(), None):
        req = request(cands, per_candidate, route)
        by_table = DecisionRequest(req.purpose, {**req.state, "candidates": table}, req.questions)
        if controller is None:
            got, want = neutral_answers([by_table])[0], neutral_answers([req])[0]
        else:
            got, want = controller.decide([by_table])[0], controller.decide([req])[0]
        assert type(got) is CandidateAnswers
        assert got == want


def test_a_candidate_table_checks_its_shape() -> None:
    with pytest.raises(ValueError, match="texts"):
        CandidateTable([1, 2], ["a"], {})
    with pytest.raises(ValueError, match="shape"):
        CandidateTable([1, 2], ["a", "b"], {"dense": [0.5]})
    t = CandidateTable([1, 2], ["a", "b"], {"dense": [0.5, math.nan]})
    assert t.signal("dense", 0.25).tolist() == [0.5, 0.25]
    assert t.signal("lexical").tolist() == [0.0, 0.0]
    assert t.present("dense").tolist() == [True, False]
    assert t[1] == {"id": 2, "text": "b", "view": "semantic", "signals": {}}


def test_a_candidate_table_reads_texts_given_as_a_function_once_and_when_asked() -> None:
    calls: list[int] = []

    def read() -> list[str]:
        calls.append(1)
        return ["a", "b"]

    t = CandidateTable([1, 2], read, {"dense": [0.5, 0.25]})
    assert t.signal("dense").tolist() == [0.5, 0.25] and not calls
    assert t[0]["text"] == "a" and t.texts == ["a", "b"] and len(calls) == 1
    short = CandidateTable([1, 2], lambda: ["a"], {})
    with pytest.raises(ValueError, match="texts"):
        short.texts  # noqa: B018 (the read is the check)


@given(st.lists(st.tuples(finite_or_nan, finite_or_nan), max_size=20))
def test_evidence_scores_by_column_equal_one_by_one(pairs: list[tuple[float, float]]) -> None:
    from jevmem.plane.signals import evidence_score, evidence_scores

    rel = np.array([r for r, _ in pairs], dtype=np.float64)
    sup = np.array([s for _, s in pairs], dtype=np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as in Python
        got = evidence_scores(rel, sup).tolist()
    for value, (r, s) in zip(got, pairs, strict=True):
        assert same(value, evidence_score(r, s)), (r, s)


def test_the_core_context_refuses_bad_input_and_changes_nothing() -> None:
    from jevmem import JevmemError, Memory
    from jevmem.embed import HashEmbedder

    m = Memory(embedder=HashEmbedder(dim=32), controller=LocalController())
    ids = m.add_batch(
        ["Did you see the match?", "Yes, we won"], timestamps=[100, 200], speakers=["A", "B"]
    )
    store = m.store
    assert store.question_shares(ids).tolist() == [1.0, 0.0]
    assert store.temporal_context(ids[1]) == [(ids[0], 2.0)]  # a reply to a question
    version = store.derived_version
    for bad_ids, shares in (([ids[0], 99], [0.5, 0.5]), ([ids[0]], [1.5]), ([ids[0]], [])):
        with pytest.raises(JevmemError):
            store.set_derived(version + 1, bad_ids, shares, [[] for _ in bad_ids])
        assert store.question_shares(ids).tolist() == [1.0, 0.0]  # all or nothing
        assert store.derived_version == version
    with pytest.raises(ValueError, match="topical"):
        store.context_matches(ids, [ids[0]], [])
    with pytest.raises(ValueError, match="own"):
        store.context_matches(ids, [], [], [0.5])
    got = store.context_matches(ids, [ids[0]], [0.5])
    assert got.shape == (2, 3) and got[1].tolist() == [1.0, 0.5, 0.0]
    assert store.timeline_window(150, 100).tolist() == []
    assert store.timeline_window(0, 1000).tolist() == ids
    # half-open: a window ending where a node sits leaves it out
    assert store.timeline_window(100, 200).tolist() == ids[:1]
    assert store.timeline_window(200, 200).tolist() == []


def test_a_log_kept_without_times_reads_its_write_order_as_context() -> None:
    # a chat handed over without its times, its sessions kept: the turns
    # written before and after a turn in its session are its context, as
    # the timeline is for timestamped ones
    from jevmem import Memory
    from jevmem.embed import HashEmbedder

    m = Memory(embedder=HashEmbedder(dim=32), controller=LocalController())
    s1 = {"session": "s1"}
    ask, reply, more = m.add_batch(
        ["What did you bring to the fair?", "Lemon bars, all gone by noon", "And bread"],
        speakers=["Jo", "Nate", "Nate"],
        provenances=[s1, s1, s1],
    )
    timed = m.add("A note with a time", timestamp=500, speaker="Jo", provenance=s1)
    last = m.add("Plum tarts next time", speaker="Nate", provenance=s1)
    # neither a time nor a session: nothing says which notes go together
    loose = m.add("A loose note", speaker="Jo")
    assert m.store.temporal_context(loose) == []
    store = m.store
    assert store.temporal_context(reply) == [(ask, 2.0), (more, 1.0), (last, 0.7)]
    # the timestamped note is on the timeline, not among the untimed turns
    assert store.temporal_context(more) == [(reply, 1.0), (last, 1.0), (ask, 0.7)]
    assert store.temporal_context(timed) == []
    # a forgotten turn is stepped over; a snapshot keeps the order
    m.forget(more)
    assert store.temporal_context(reply) == [(ask, 2.0), (last, 1.0)]
    loaded = Memory(embedder=HashEmbedder(dim=32), store=type(store).from_bytes(store.to_bytes()))
    assert loaded.store.temporal_context(reply) == [(ask, 2.0), (last, 1.0)]
    # support reaches the reply through the question it answers
    got = store.context_matches([reply], [ask], [0.8])
    assert got[0].tolist() == [1.0, 0.8, 0.0]


def test_threads_kept_at_once_each_read_their_own_turns_as_context() -> None:
    # two chats with one agent at the same time, as histories keep them (the
    # session in the scope) or as a log names them (in the provenance): the
    # turn before a turn on the timeline is the other chat's, and its context
    # is its own chat's, on the read path and on the temporal view
    from jevmem import Memory
    from jevmem.embed import HashEmbedder

    m = Memory(embedder=HashEmbedder(dim=32), controller=LocalController())
    a, b = {"session": "a"}, {"session": "b"}
    texts = ["Where is the key?", "Any news on the lease?", "Under the mat", "Signed today", "Ok"]
    ids = m.add_batch(
        texts,
        timestamps=[1_000 + 10 * i for i in range(5)],
        speakers=["Jo", "Ann", "Nate", "Bo", "Jo"],
        scopes=[a, b, a, b, a],
    )
    store = m.store
    # Nate's turn answers Jo's question two turns back: 1 + reply_link
    assert store.temporal_context(ids[2]) == [(ids[0], 2.0), (ids[4], 1.0)]
    assert store.temporal_context(ids[3]) == [(ids[1], 2.0)]
    # (a scoped turn sees only its own scope's turns: none before b's first)
    assert store.time_neighbours_seen(ids[3]) == ((ids[1], 1_010), None)
    assert store.time_neighbours_seen(ids[1]) == (None, (ids[3], 1_030))
    # the same chats named in the provenance
    p = Memory(embedder=HashEmbedder(dim=32), controller=LocalController())
    pids = p.add_batch(
        texts,
        timestamps=[1_000 + 10 * i for i in range(5)],
        speakers=["Jo", "Ann", "Nate", "Bo", "Jo"],
        provenances=[a, b, a, b, a],
    )
    assert p.store.temporal_context(pids[2]) == [(pids[0], 2.0), (pids[4], 1.0)]
    assert p.store.time_neighbours_seen(pids[2]) == ((pids[0], 1_000), (pids[4], 1_040))
    # a thread's first turn links to the turn before it, whoever's it is
    assert p.store.time_neighbours_seen(pids[1]) == ((pids[0], 1_000), (pids[3], 1_030))
    # a note without a session between the turns is stepped over
    note = p.add("Reminder: water the plants", timestamp=1_025)
    assert p.store.temporal_context(pids[2]) == [(pids[0], 2.0), (pids[4], 1.0)]
    assert p.store.temporal_context(note) == []


def test_the_planes_tables_are_what_the_constructor_makes_of_their_parts() -> None:
    # the plane builds its tables without the constructor's checks
    # (`CandidateTable.of_plane`); every table of a search must be one the
    # constructor accepts, and equal to what it makes of the same parts
    import jevmem

    tables: list[CandidateTable] = []

    class Recorder(LocalController):
        def decide(self, requests: Any) -> Any:
            for r in requests:
                table = r.state.get("candidates")
                if isinstance(table, CandidateTable):
                    tables.append(table)
            return super().decide(requests)

    rng = np.random.default_rng(7)
    words = "cello lisbon milk oat soy moved dagster airflow lake coffee march 2023".split()
    m = jevmem.Memory(jevmem.HashEmbedder(64), controller=Recorder())
    n = 60
    m.add_batch(
        [
            ("now I prefer " if i % 9 == 0 else "")
            + " ".join(rng.choice(words, size=int(rng.integers(3, 10))))
            + ("?" if i % 5 == 0 else ".")
            for i in range(n)
        ],
        timestamps=[1_700_000_000 + 3_600 * i for i in range(n)],
        speakers=[("Maya", "Tom")[i % 2] for i in range(n)],
        provenances=[{"session": str(i // 10)} for i in range(n)],
    )
    for q in ("what does Maya prefer now?", "when did Tom talk about the lake?", "oat milk"):
        m.search(q, k=10)
    assert len(tables) >= 6
    for table in tables:
        rebuilt = CandidateTable(table.ids, table.texts, table.columns, table.views)
        assert rebuilt.ids == table.ids and all(type(i) is int for i in table.ids)
        assert rebuilt.views == table.views and rebuilt.texts == table.texts
        assert rebuilt.columns.keys() == table.columns.keys()
        for name, col in table.columns.items():
            assert type(col) is np.ndarray and col.dtype == np.float64, name
            assert col.shape == (len(table),), name
            assert rebuilt.columns[name].tobytes() == col.tobytes(), name

"""Read-path signals: time windows, temporal context, episodes, question turns."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jevmem import (
    HashEmbedder,
    InvalidConfigError,
    LocalController,
    Memory,
    MemoryConfig,
    MemoryStore,
)
from jevmem._core import names_a_speaker, question_share
from jevmem.controller import catalogue
from jevmem.plane.query import QueryRun
from jevmem.temporal import to_timestamp

DAY = 86_400
T0 = 1_700_000_000


def memory(**cfg: Any) -> Memory:
    return Memory(HashEmbedder(64), config=MemoryConfig(**cfg))


def plain_match_columns(sigs: dict[str, Any]) -> Any:
    """A node's plain topical match: the mean of its lexical and dense shares."""
    return 0.5 * sigs["lexical"] + 0.5 * sigs["dense"]


def pool(m: Memory, query: str, sources: dict[str, int] | None = None) -> list[int]:
    """The nodes the controller ranks before the traversal (no expansion yet);
    ``sources`` receives their count by source, as the trace reports it."""
    run = QueryRun(m, query, m.embedder.embed([query])[0], 1, None, "full", 0.0)
    ids = run.pool()[0]
    if sources is not None:
        sources.update(run.pool_sources)
    return ids


def dialogue(m: Memory, turns: list[tuple[str, str, int, str]]) -> list[int]:
    """(speaker, text, timestamp, session) rows, one node each."""
    return m.add_batch(
        [t[1] for t in turns],
        speakers=[t[0] for t in turns],
        timestamps=[t[2] for t in turns],
        provenances=[{"session": t[3]} for t in turns],
    )


def test_question_share_counts_question_sentences() -> None:
    assert question_share("How was it?") == 1.0
    assert question_share("Great pic! Is that recent? Looks fun!") == 1 / 3
    assert question_share("I made ice cream.") == 0.0
    assert question_share("") == 0.0


def test_episode_prefers_the_session_then_the_day() -> None:
    m = memory()
    a, b, c = dialogue(m, [("Ana", "one", T0, "s1"), ("Bo", "two", T0 + 5, "s1"), ("Ana", "three", T0 + 9, "s2")])  # fmt: skip
    day = T0 + 3 * DAY - (T0 + 3 * DAY) % DAY  # midnight UTC
    d, d2, d3 = (m.add(t, timestamp=ts) for t, ts in [("no session", day + 5), ("later that day", day + DAY - 1), ("the next day", day + DAY)])  # fmt: skip
    e = m.add("no time, no session")
    f = m.add("no time, a session", provenance={"session": "s1"})
    ka, kb, kc, kd, kd2, kd3, ke, kf = m.store.episode_keys([a, b, c, d, d2, d3, e, f]).tolist()
    assert ka == kb == kf != kc  # the session, whatever the time
    assert kd == kd2 != kd3  # else the UTC day
    assert ke == 0 and 0 not in (ka, kc, kd, kd3)  # else none
    assert m.store.episode_keys([10_000]).tolist() == [0]  # an id not stored


def test_a_named_date_pulls_in_what_was_said_that_day() -> None:
    # Two identical reports on different days: only the date tells them apart.
    nov9 = to_timestamp("2022-11-09T12:00:00")
    m = memory()
    filler = [("Ana", f"Ana chatted about weather number {i}", T0 + i * DAY, f"f{i}") for i in range(40)]  # fmt: skip
    ids = dialogue(m, [*filler, ("Ana", "Ana cooked a new dish for the family", nov9 - 30 * DAY, "a"), ("Ana", "Ana cooked a new dish for the family", nov9, "b")])  # fmt: skip
    r = m.search("What dish did Ana cook on 9 November, 2022?", 3)
    assert r.evidence[0].id == ids[-1]
    # and it reaches the pool from the timeline even when the fused lists miss it
    narrow = memory(anchor_depth=1, anchor_pool=1, anchors=1, context_seeds=0)
    ids = dialogue(narrow, [*filler, ("Ana", "Ana cooked a new dish for the family", nov9 - 30 * DAY, "a"), ("Ana", "something else entirely", nov9, "b")])  # fmt: skip
    query = "What dish did Ana cook on 9 November, 2022?"
    found = narrow.search(query, 5)
    assert ids[-1] in [e.id for e in found.evidence]
    assert found.trace["pool"]["time_window"] >= 1
    assert ids[-1] in pool(narrow, query)
    blind = memory(anchor_depth=1, anchor_pool=1, anchors=1, context_seeds=0, time_window_nodes=0)
    ids = dialogue(blind, [*filler, ("Ana", "Ana cooked a new dish for the family", nov9 - 30 * DAY, "a"), ("Ana", "something else entirely", nov9, "b")])  # fmt: skip
    assert ids[-1] not in pool(blind, query)


def test_the_reply_to_a_matching_turn_joins_the_pool() -> None:
    turns = [("Bo", f"Bo mentioned unrelated topic {i}", T0 + i * DAY, f"x{i}") for i in range(30)]
    turns += [
        ("Nate", "I made coconut milk ice cream yesterday", T0 + 100 * DAY, "s"),
        ("Jo", "Oh nice, how did it turn out?", T0 + 100 * DAY + 5, "s"),
        ("Nate", "Super good! Rich and creamy, maybe my new favourite", T0 + 100 * DAY + 10, "s"),
    ]
    query = "What did Nate think of the coconut milk ice cream?"
    with_context = memory(anchor_depth=1, anchor_pool=1, anchors=1)
    ids = dialogue(with_context, turns)
    assert ids[-1] in [e.id for e in with_context.search(query, 5).evidence]
    sources: dict[str, int] = {}
    assert ids[-1] in pool(with_context, query, sources)
    assert sources["context"] >= 1 and sources["fused"] == 1
    without = memory(anchor_depth=1, anchor_pool=1, anchors=1, context_seeds=0)
    ids = dialogue(without, turns)
    assert ids[-1] not in pool(without, query)


def test_support_counts_the_neighbours_and_the_episode() -> None:
    ctl = LocalController()
    q = catalogue.anchor_questions(0)
    assert [x.kind for x in q] == ["score.relevance", "score.support"]

    def support(sig: dict[str, float]) -> float:
        req = catalogue_request(sig)
        return float(ctl.decide([req])[0]["candidate_0_support"].value)  # type: ignore[union-attr]

    base = {"lexical": 0.2, "dense": 0.2, "entity_match": 0.0, "time_match": 0.0, "asks": 0.0}
    lone = support({**base, "support": 0.0, "episode_support": 0.0})
    near = support({**base, "support": 0.9, "episode_support": 0.0})
    both = support({**base, "support": 0.9, "episode_support": 0.9})
    assert lone == 0.0 < near < both


def test_a_fact_that_did_not_hold_then_lends_no_support() -> None:
    # oat milk from day 0, soy milk from day 10; on day 10, right after the
    # change, an unrelated turn: its neighbour (the change) did not hold on
    # day 5, so a query about day 5 gives it no support from it; a query
    # about day 10 (the change began that day) does
    m = Memory(HashEmbedder(64), LocalController())
    day0 = T0 - T0 % DAY
    old, new, other = m.add_batch(
        [
            "Every morning I drink oat milk with breakfast.",
            "I switched from oat milk to soy milk with breakfast now.",
            "Ines said my bowing is too tense.",
        ],
        timestamps=[day0 + 9 * 3600, day0 + 10 * DAY + 9 * 3600, day0 + 10 * DAY + 9 * 3600 + 60],
        speakers=["Maya"] * 3,
    )
    assert m.superseded_by(old) == [new]

    def support_of_other(date: str) -> tuple[float, float, float]:
        query = f"What did Maya drink with breakfast on {date}?"
        run = QueryRun(m, query, m.embedder.embed([query])[0], 5, None, "full", 0.0)
        ids, sigs = run.pool()
        held = float(sigs["valid_at_query_time"][ids.index(new)])
        run.topical = dict(zip(ids, plain_match_columns(sigs).tolist(), strict=True))
        plain = run.near_support(other)
        # the pool's supporting matches (a fact that did not hold lends none)
        run.session.anchor_context(
            second_step_decay=m.config.second_step_decay, reply_link=m.config.reply_link
        )
        return held, run.near_support(other), plain

    def date_of(day: int) -> str:
        from datetime import datetime, timezone

        d = datetime.fromtimestamp(day0 + day * DAY, tz=timezone.utc)
        return f"{d.day} {d.strftime('%B %Y')}"

    held_before, before, plain_before = support_of_other(date_of(5))
    held_on, on_the_day, plain_on = support_of_other(date_of(10))
    assert held_before == 0.0 and before == 0.0 < plain_before
    # held for part of the day: all of its match, not a share of it
    assert 0.0 < held_on < 1.0 and on_the_day == plain_on > 0.0


def test_relevance_rewards_the_named_person_and_time_and_discounts_questions() -> None:
    ctl = LocalController()
    base = {"lexical": 0.5, "dense": 0.5, "entity_match": 0.0, "time_match": 0.0, "asks": 0.0}

    def rel(**over: float) -> float:
        return float(ctl.decide([catalogue_request({**base, **over})])[0]["candidate_0_relevance"].value)  # type: ignore[union-attr]  # fmt: skip

    plain = rel()
    assert rel(entity_match=1.0) > plain
    assert rel(time_match=1.0) > plain
    assert rel(asks=1.0) < plain


def catalogue_request(sig: dict[str, float]) -> Any:
    from jevmem.controller import DecisionRequest

    state = {"query": {"text": "q", "entities": [], "time": {}, "routing": {}}, "candidates": [{"id": 0, "text": "t", "view": "semantic", "signals": sig}]}  # fmt: skip
    return DecisionRequest("scoring", state, catalogue.anchor_questions(0))


def test_coverage_tells_whom_the_content_is_about() -> None:
    m = memory()
    ids = dialogue(m, [
        ("Caroline", "I researched adoption agencies last week.", T0, "s"),
        ("Melanie", "That's wonderful! Did the research help you?", T0 + 5, "s"),
        ("Melanie", "I went camping with my kids.", T0 + 10, "s"),
    ])  # fmt: skip

    def shares(query: str, node: int) -> tuple[float, float]:
        run = QueryRun(m, query, m.embedder.embed([query])[0], 5, None, "full", 0.0)
        return run.coverage_of(node)

    mine, theirs = shares("What did Caroline research?", ids[0])
    assert mine > 0.0 and theirs == 0.0
    mine, theirs = shares("What did Melanie research?", ids[0])
    assert mine == 0.0 and theirs > 0.0
    # Melanie's question about "you" is about Caroline, at half weight
    mine, theirs = shares("What did Melanie research?", ids[1])
    assert mine == 0.0 and 0.0 < theirs
    mine, theirs = shares("Where did Melanie go camping?", ids[2])
    assert mine > 0.0 and theirs == 0.0
    r = m.search("What did Melanie research?", 3)
    s = m.search("What did Caroline research?", 3)
    assert (s.sufficiency or 0.0) > (r.sufficiency or 0.0)


def test_places_and_things_a_query_names_are_what_it_asks_not_whom() -> None:
    m = memory()
    trip, desert = dialogue(m, [
        ("Maria", "We went to Oregon to see the desert.", T0, "s"),
        ("John", "I want to see the desert too!", T0 + 5, "s"),
    ])  # fmt: skip

    def run(query: str) -> QueryRun:
        return QueryRun(m, query, m.embedder.embed([query])[0], 5, None, "full", 0.0)

    asked = run("What did Maria see in Oregon?")
    assert asked.query_entities == ["maria", "oregon"]
    assert asked.asked_people == ["maria"]  # Oregon is no speaker
    content = asked.session.inputs()["content_tokens"]
    assert "oregon" in content and "maria" not in content
    # a turn that says it about Maria, place included, covers all of it; one
    # about the same place by someone else counts against
    assert asked.coverage_of(trip) == (1.0, 0.0)
    other = run("What did John see in Oregon?")
    mine, theirs = other.coverage_of(trip)
    assert mine == 0.0 and theirs > 0.0
    # John's own turn, not naming the place, covers only part of what is asked
    assert other.coverage_of(desert) == (0.5, 0.0)
    # a memory that knows no speakers cannot tell people from places: all names count
    bare = memory()
    bare.add("We went to Oregon to see the desert.", entities=["Maria"])
    q = "What did Maria see in Oregon?"
    blind = QueryRun(bare, q, bare.embedder.embed([q])[0], 5, None, "full", 0.0)
    assert sorted(blind.asked_people) == sorted(blind.query_entities)


def test_names_that_run_together_in_a_query_are_still_found() -> None:
    m = memory()
    dialogue(m, [
        ("Melanie", "Our dog Oscar loves the beach.", T0, "s"),
        ("Caroline", "We loved New York City, so loud!", T0 + 5, "s"),
    ])  # fmt: skip

    def entities(query: str) -> list[str]:
        return QueryRun(m, query, m.embedder.embed([query])[0], 5, None, "full", 0.0).query_entities

    # "Oscar Melanie" reads as one capitalised run; both names are known
    assert entities("Is Oscar Melanie's pet?") == ["oscar", "melanie"]
    # a longer known name still wins over the shorter names inside it
    assert entities("Did Caroline like New York City?") == ["caroline", "new york city"]


def test_feedback_moves_the_query_towards_its_best_matches() -> None:
    import numpy as np

    from jevmem import InvalidConfigError

    texts = [
        f"Ana talked about {w} today" for w in ("cello", "lisbon", "coffee", "hiking", "the lab")
    ]
    for cfg in ({"feedback_weight": 0.0}, {"feedback_weight": 0.5}):
        m = memory(**cfg)
        dialogue(m, [("Ana", t, T0 + i, "s") for i, t in enumerate(texts)])
        query = "what did Ana say about cello?"
        run = QueryRun(m, query, m.embedder.embed([query])[0], 1, None, "full", 0.0)
        before = run.qvec.copy()
        ids, sigs = run.pool()
        best = max(ids, key=lambda n: sigs["lexical"][ids.index(n)])
        moved = float(run.qvec @ m.store.embedding(best)) - float(before @ m.store.embedding(best))
        if cfg["feedback_weight"] == 0.0:
            assert np.array_equal(run.qvec, before)
        else:
            assert moved > 0.0
            assert abs(float(np.linalg.norm(run.qvec)) - 1.0) < 1e-5
    with pytest.raises(InvalidConfigError):
        MemoryConfig(feedback_weight=-0.1)
    with pytest.raises(InvalidConfigError):
        MemoryConfig(feedback_weight=float("nan"))


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["Ana", "Bo", "Cy"]), st.integers(0, 60), st.integers(0, 4)), min_size=1, max_size=60),
    st.sampled_from(["what did Ana cook on 20 November 2023?", "Bo hiking in November 2023", "why coffee?", "when did Cy move?"]),
    st.integers(1, 20), st.integers(0, 10), st.integers(0, 8),
)  # fmt: skip
def test_the_pool_stays_within_its_bounds(
    rows: list[tuple[str, int, int]], query: str, pool_size: int, seeds: int, window: int
) -> None:
    m = memory(
        anchor_depth=pool_size,
        anchor_pool=pool_size,
        anchors=1,
        context_seeds=seeds,
        time_window_nodes=window,
    )
    words = ["cooked", "hiking", "coffee", "moved", "lisbon"]
    dialogue(m, [(who, f"{who} {words[day % 5]} on day {day}", T0 + day * DAY + i, str(s)) for i, (who, day, s) in enumerate(rows)])  # fmt: skip
    run = QueryRun(m, query, m.embedder.embed([query])[0], 1, None, "full", 0.0)
    ids, sigs = run.pool()
    assert len(ids) == len(set(ids))
    assert all(col.shape == (len(ids),) for col in sigs.values())
    assert len(ids) <= pool_size + window + 4 * seeds
    assert all(i in m for i in ids)
    for name, col in sigs.items():  # NaN: a node without the signal
        assert all(0.0 <= v <= 1.0 for v in col[~np.isnan(col)]), name


def test_a_crowded_time_window_gives_the_pool_its_best_matches() -> None:
    # 100 observations on one day; two mention cooking, both late in the day.
    day = to_timestamp("2023-11-20T08:00:00")
    turns = [("Ana", f"Ana chatted about the weather, part {i}", day + 60 * i, "d") for i in range(100)]  # fmt: skip
    turns[70] = ("Ana", "Ana cooked a pumpkin soup", day + 60 * 70, "d")
    turns[90] = ("Ana", "Ana cooked fresh pasta", day + 60 * 90, "d")
    m = memory(anchor_depth=1, anchor_pool=1, anchors=1, context_seeds=0, time_window_nodes=10)
    ids = dialogue(m, turns)
    sources: dict[str, int] = {}
    got = pool(m, "What did Ana cook on 20 November 2023?", sources)
    assert sources["time_window"] == 10
    assert ids[70] in got and ids[90] in got  # one fused, the other chosen from the window


def test_a_question_lifts_its_reply_more_than_a_statement_lifts_its_neighbour() -> None:
    m = memory()
    ask, reply, own_next, said, after_said = dialogue(
        m,
        [
            ("Jo", "What did you bring to the fair?", T0, "s1"),
            ("Nate", "A tray of lemon bars, all gone by noon", T0 + 5, "s1"),
            ("Nate", "Also some bread for home", T0 + 10, "s1"),
            ("Jo", "I heard Nate baked for the fair.", T0 + DAY, "s2"),
            ("Nate", "A tray of plum tarts, all gone by noon", T0 + DAY + 5, "s2"),
        ],
    )
    weights = dict(m._temporal_context(reply))
    assert weights[ask] == 2.0  # a whole question, asked by someone else: 1 + REPLY_LINK
    assert weights[own_next] == 1.0  # the turn after: a plain neighbour
    # the asker's own next turn does not answer its question; a statement lifts
    # its neighbour with the plain weight; second steps decay
    assert dict(m._temporal_context(own_next))[reply] == 1.0
    assert dict(m._temporal_context(own_next))[ask] == 0.7
    assert dict(m._temporal_context(after_said))[said] == 1.0

    query = "What did Nate bake for the fair?"
    run = QueryRun(m, query, m.embedder.embed([query])[0], 5, None, "full", 0.0)
    ids, sigs = run.pool()
    run.topical = dict(zip(ids, plain_match_columns(sigs).tolist(), strict=True))
    # the statement matches the query better than the question does...
    assert run.topical[said] > run.topical[ask] > 0
    # ...yet the reply to the question gets the stronger support
    assert run.near_support(reply) > run.near_support(after_said)
    assert 0.0 <= run.near_support(reply) <= 1.0
    # without the reply link, the better-matching statement would win
    m.config = dataclasses.replace(m.config, reply_link=0.0)
    assert run.near_support(reply) < run.near_support(after_said)


@given(
    speakers=st.lists(
        st.text("abcm ", min_size=1, max_size=9).map(str.strip).filter(bool), max_size=8
    ),
    entity=st.text("abcm ", min_size=1, max_size=9).map(str.strip).filter(bool),
)
def test_naming_a_speaker_agrees_with_the_alias_rule(speakers: list[str], entity: str) -> None:
    from support.coverage_reference import is_alias

    known = {s.lower() for s in speakers}
    assert names_a_speaker(entity, sorted(known)) == any(is_alias(entity, s) for s in known)


#: how far each node's entity list is read (`pair_signals::ALIAS_SCAN` in the core)
ALIAS_SCAN = 64


def reference_alias_signal(a: list[str], b: list[str]) -> float:
    """The alias signal as it was first written: every pair compared."""
    best = 0.0
    for x in a[:ALIAS_SCAN]:
        for y in b[:ALIAS_SCAN]:
            if x == y or len(x) < 3 or len(y) < 3:
                continue
            short, long_ = sorted((x, y), key=len)
            if long_.startswith(short) or f" {short}" in f" {long_}":
                best = max(best, len(short) / len(long_) + 0.3)
    return min(1.0, best)


entity_ids = st.lists(
    st.text("abm ", min_size=1, max_size=9).map(lambda s: " ".join(s.split())).filter(bool),
    max_size=80,
)


def alias_signal(new: list[str], earlier: list[str]) -> float:
    """The core's alias signal for a node carrying ``new`` and an earlier one
    carrying ``earlier`` (`WriteCandidate.alias`)."""
    store = MemoryStore(2, exact_threshold=1_000)
    store.add("earlier", [1.0, 0.0], entities=earlier)
    store.add("new", [1.0, 0.0], entities=new)
    (pair,) = [c for c in store.write_candidates(1) if c.id == 0]
    return pair.alias


@given(a=entity_ids, b=entity_ids)
def test_alias_signal_matches_comparing_every_pair(a: list[str], b: list[str]) -> None:
    assert alias_signal(a, b) == reference_alias_signal(a, b)
    assert alias_signal(b, a) == reference_alias_signal(b, a)


SIGNAL_TEXTS = [
    ("Ana", "I moved to Lisbon last week and the flat is lovely."),
    ("Ben", "Yesterday I started cello lessons with Ines."),
    ("Ana", "Do you still play the cello on Sundays?"),
    (None, "The build broke on 9 November 2022; the fix landed a day later."),
    ("Cleo", "We are moving to Porto in March 2023, a little scared."),
    ("Ben", "Lisbon in the summer of 2021 was far too hot for me."),
    (
        "Cleo",
        " ".join(
            f"Step {i}: water the garden beds, check the tomatoes and the basil near Lisbon."
            for i in range(60)
        ),
    ),
]


@settings(max_examples=40, deadline=None)
@given(
    picks=st.lists(st.integers(0, len(SIGNAL_TEXTS) - 1), min_size=1, max_size=8),
    scoped=st.lists(st.booleans(), min_size=8, max_size=8),
    query=st.sampled_from(
        [
            "What did Ana say about Lisbon?",
            "When did Ben start the cello?",
            "Where is Cleo moving in March 2023?",
            "how do I water the garden",
        ]
    ),
    named=st.lists(st.sampled_from(["ana", "ben", "lisbon", "cello", "porto"]), max_size=3),
    window=st.none()
    | st.tuples(st.integers(-40, 40), st.integers(0, 30)).map(
        lambda w: (T0 + w[0] * DAY, T0 + (w[0] + w[1]) * DAY)
    ),
    asks_when=st.booleans(),
    scale=st.sampled_from([None, 0.0, -1.0, 0.5]),
    use_scope=st.booleans(),
    order=st.randoms(use_true_random=False),
)
def test_the_core_signals_equal_the_python_rules_they_replace(
    picks: list[int],
    scoped: list[bool],
    query: str,
    named: list[str],
    window: tuple[int, int] | None,
    asks_when: bool,
    scale: float | None,
    use_scope: bool,
    order: Any,
) -> None:
    from support import signals_reference as ref

    from jevmem._core import SIGNAL_COLUMNS

    m = Memory(HashEmbedder(32), LocalController(), config=MemoryConfig(passage_tokens=64))
    rows = [SIGNAL_TEXTS[p] for p in picks]
    ids = m.add_batch(
        [t for _, t in rows],
        speakers=[s for s, _ in rows],
        timestamps=[T0 + k * DAY for k in range(len(rows))],
        scopes=[{"user": "u1"} if scoped[k] else None for k in range(len(rows))],
    )
    store = m.store
    allowed = store.select(scope={"user": "u1"}) if use_scope else None
    qvec = m.embedder.embed([query])[0]
    lex_ids, lex_scores = store.search_lexical(query, 5, allowed=allowed)
    vec_ids, vec_sims = store.search_vector(qvec, 5, allowed=allowed)
    best = {
        "best_lexical": float(lex_scores[0]) if len(lex_scores) else 0.0,
        "best_dense": float(vec_sims[0]) if len(vec_sims) else 0.0,
        "best_passage": float(vec_sims[0]) if len(vec_sims) else 0.0,
    }
    if scale is not None:  # scales the query did not reach, 0 and below too
        best = {k: scale for k in best}
    asked = list(ids) + order.sample(ids, k=min(2, len(ids)))
    order.shuffle(asked)
    kw: dict[str, Any] = dict(
        lexical_ranked=lex_ids.tolist(),
        vector_ranked=vec_ids.tolist(),
        named=named,
        window=window,
        asks_when=asks_when,
        allowed=allowed,
        **best,
    )
    got, passages = store.read_signals(query, qvec, asked, **kw)
    want, want_passages = ref.signals(store, query, qvec, asked, **kw)
    assert got.shape == (len(asked), len(SIGNAL_COLUMNS))
    assert list(want) == list(SIGNAL_COLUMNS)
    for j, name in enumerate(SIGNAL_COLUMNS):
        np.testing.assert_array_equal(got[:, j], want[name], err_msg=name)
    assert passages.tolist() == want_passages


def test_signals_of_an_unknown_node_raise_and_name_it() -> None:
    from jevmem import NodeNotFoundError

    m = memory()
    ids = m.add_batch(["one", "two"])
    qvec = m.embedder.embed(["one"])[0]
    with pytest.raises(NodeNotFoundError):
        m.store.read_signals(
            "one", qvec, [ids[0], 99], lexical_ranked=[], vector_ranked=[], best_lexical=1.0,
            best_dense=1.0, best_passage=1.0, named=[],
        )  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(
    picks=st.lists(st.integers(0, len(SIGNAL_TEXTS) - 1), min_size=1, max_size=7),
    order=st.randoms(use_true_random=False),
)
def test_the_mean_embedding_is_numpys_mean(picks: list[int], order: Any) -> None:
    m = Memory(HashEmbedder(32), LocalController())
    ids = m.add_batch([SIGNAL_TEXTS[p][1] for p in picks])
    chosen = order.sample(ids, k=order.randint(1, len(ids)))
    want = np.mean([m.store.embedding(i) for i in chosen], axis=0)
    np.testing.assert_array_equal(m.store.mean_embedding(chosen), want)
    assert want.dtype == np.float32
    for bad in ([], [*chosen, 10_000]):
        with pytest.raises((ValueError, KeyError)):
            m.store.mean_embedding(bad)


@settings(max_examples=25, deadline=None)
@given(
    texts=st.lists(
        st.text(
            st.characters(exclude_categories=("Cn", "Cs"), exclude_characters="\0"),
            min_size=1,
            max_size=300,
        ).filter(str.strip),
        min_size=1,
        max_size=8,
    ),
    scoped=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_memory_length_is_the_mean_log_length_on_a_fixed_scale(
    texts: list[str], scoped: list[bool]
) -> None:
    import math

    m = Memory(HashEmbedder(16), LocalController())
    assert m.store.typical_length() == 0.0  # an empty memory has no length
    m.add_batch(texts, scopes=[{"user": "u1"} if s else None for s in scoped[: len(texts)]])

    def want(ts: list[str]) -> float:
        if not ts:
            return 0.0
        return min(1.0, sum(math.log1p(len(t)) for t in ts) / len(ts) / 10.0)

    assert m.store.typical_length() == pytest.approx(want(texts), abs=1e-12)
    inside = [t for t, s in zip(texts, scoped, strict=False) if s]
    allowed = m.store.select(scope={"user": "u1"})
    assert m.store.typical_length(allowed=allowed) == pytest.approx(want(inside), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.sampled_from(["Ana", "Ben", "cleo"]),
            st.sampled_from(["1", "2"]),
            st.lists(
                st.tuples(
                    st.text(st.sampled_from("ab c?é."), min_size=1, max_size=40).filter(str.strip),
                    st.sampled_from([0.0, 0.5, 1.0]),
                ),
                min_size=1,
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=10,
    ),
)
def test_a_burst_of_messages_reads_as_the_turn_it_makes(
    turns: list[tuple[str, str, list[tuple[str, float]]]],
) -> None:
    """A memory that keeps each turn as a burst of messages (the turn's text
    in pieces, each with its own question share) reads every speaker as one
    that keeps the turn whole with the messages' mean share: the speaker
    columns of `MemoryStore.styles` agree to the bit. Consecutive turns of
    one speaker in one session are one turn either way."""
    vec = np.ones(4, dtype=np.float32)

    def build(nodes: list[tuple[str, str, str, float]]) -> tuple[MemoryStore, list[int]]:
        store = MemoryStore(4)
        ids = [
            store.add(text, vec, provenance={"speaker": speaker, "session": session})
            for speaker, session, text, _ in nodes
        ]
        shares = [share for *_, share in nodes]
        store.set_derived(1, ids, shares, [[] for _ in ids])
        return store, ids

    whole, whole_ids = build(
        [
            (speaker, session, "".join(t for t, _ in msgs), sum(s for _, s in msgs) / len(msgs))
            for speaker, session, msgs in turns
        ]
    )
    burst, burst_ids = build(
        [
            (speaker, session, text, share)
            for speaker, session, msgs in turns
            for text, share in msgs
        ]
    )
    # two turns in a row of one speaker in one session are one turn in both
    # memories, but its share is then a mean over different parts: compare
    # where every turn stands alone
    if all(a[:2] != b[:2] for a, b in itertools.pairwise(turns)):
        first_of_turn = np.cumsum([0] + [len(m) for _, _, m in turns])[:-1]
        got_whole = whole.styles(whole_ids)[:, 1:]
        got_burst = burst.styles(burst_ids)[first_of_turn, 1:]
        np.testing.assert_array_equal(got_whole, got_burst)
    # every message of a turn reads its speaker alike
    styles = burst.styles(burst_ids)
    at = 0
    for _, _, msgs in turns:
        np.testing.assert_array_equal(styles[at : at + len(msgs), 1:], styles[[at] * len(msgs), 1:])
        at += len(msgs)


def _scores(m: Memory, query: str, share: float) -> tuple[dict[int, float], Any]:
    m.config = dataclasses.replace(m.config, other_speaker_share=share)
    r = m.search(query, k=50)
    return {e.id: e.score for e in r.evidence}, r.trace["speaker_asked"]


@settings(max_examples=25, deadline=None)
@given(
    said=st.lists(
        st.tuples(
            st.sampled_from(["Ana", "Bo", "Cy", None]),
            st.sampled_from(["plays the cello", "went hiking", "likes coffee", "moved to Lisbon"]),
        ),
        min_size=2,
        max_size=12,
    ),
    asked=st.sampled_from([["Ana"], ["Bo"], [], ["Ana", "Bo"]]),
)
def test_a_query_about_one_speaker_lowers_what_the_others_said(
    said: list[tuple[str | None, str]], asked: list[str]
) -> None:
    m = memory()
    speaker: dict[int, str | None] = {}
    for i, (who, what) in enumerate(said):
        text = f"{who or 'Someone'} {what}, Ana and Bo said"
        if who is None:
            speaker[m.add(text, timestamp=T0 + i)] = None
        else:
            (node,) = dialogue(m, [(who, text, T0 + i, "s1")])
            speaker[node] = who
    query = f"What did {' and '.join(asked) or 'everyone'} do?"
    (full, asked_full), (half, asked_half) = _scores(m, query, 1.0), _scores(m, query, 0.5)
    shared = full.keys() & half.keys()
    assert shared
    # the rule holds when the query names exactly one person who speaks here
    speaking = [a for a in asked if a in speaker.values()]
    one = speaking[0] if len(speaking) == 1 else None
    assert asked_full == asked_half == (one.lower() if one else None)
    for node in shared:
        who = speaker[node]
        lowered = one is not None and who is not None and who != one
        # the same evidence score, halved exactly for what another said
        assert half[node] == (full[node] * 0.5 if lowered else full[node])
    with pytest.raises(InvalidConfigError):
        MemoryConfig(other_speaker_share=1.5)


def test_a_ranking_share_outside_the_unit_interval_is_refused() -> None:
    from jevmem import InvalidInputError

    m = memory()
    dialogue(m, [("Ana", "Ana plays the cello", T0, "s"), ("Bo", "Bo hikes", T0 + 1, "s")])
    query = "What does Ana play?"
    run = QueryRun(m, query, m.embedder.embed([query])[0], 5, None, "full", 0.0)
    steps = run.steps()
    first = next(steps)
    try:  # the anchors scored: the traversal starts
        steps.send(m.controller.decide(first))
    except StopIteration:
        pass
    assert run.traversal is not None
    ranked = run.session.rank(run.traversal, replaced_below=0.999, other_speaker_share=0.5)
    assert ranked
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(InvalidInputError, match="other_speaker_share"):
            run.session.rank(run.traversal, replaced_below=0.999, other_speaker_share=bad)
    with pytest.raises(InvalidInputError, match="replaced_below"):
        run.session.rank(run.traversal, replaced_below=2.0)
    # a refused call changes nothing
    assert run.session.rank(run.traversal, replaced_below=0.999, other_speaker_share=0.5) == ranked


@settings(max_examples=25, deadline=None)
@given(
    said=st.lists(
        st.tuples(
            st.sampled_from(["Ana", "Bo", "Mark", None]),
            st.sampled_from(
                ["plays the cello", "went hiking", "left a mark in Lisbon", "likes tea"]
            ),
        ),
        min_size=2,
        max_size=12,
    ),
    asked=st.sampled_from([["Ana"], ["Bo"], ["Mark"], [], ["Ana", "Bo"]]),
)
def test_a_speakers_name_in_lower_case_reads_as_the_name(
    said: list[tuple[str | None, str]], asked: list[str]
) -> None:
    """A query that writes a speaker's name in lower case ("what did ana
    do") is the capitalised query where the memory's texts write the name
    capitalised inside a sentence: the same speaker asked about and the same
    evidence (the test's embedder lower-cases); so is a name the memory
    knows that nobody speaks under ("Bo" in a memory where only Ana talks).
    The texts write "Mark" only where a sentence opens (which says nothing
    about a word) and "mark" as a word: in lower case it names nobody."""
    m = memory()
    speakers = set()
    for i, (who, what) in enumerate(said):
        text = f"{who or 'Someone'} {what}, said Ana to Bo"
        if who is None:
            m.add(text, timestamp=T0 + i)
        else:
            dialogue(m, [(who, text, T0 + i, "s1")])
            speakers.add(who)
    named = " and ".join(asked) or "everyone"
    upper, lower = (m.search(f"What did {n} do?", k=50) for n in (named, named.lower()))
    speaking = [a for a in asked if a in speakers]
    one = speaking[0].lower() if len(speaking) == 1 else None
    assert upper.trace["speaker_asked"] == one
    if asked == ["Mark"]:
        assert lower.trace["speaker_asked"] is None
        return
    assert lower.trace["speaker_asked"] == one
    assert lower.trace["query_entities"] == upper.trace["query_entities"]
    assert [(e.id, e.score) for e in lower.evidence] == [(e.id, e.score) for e in upper.evidence]


@settings(max_examples=25, deadline=None)
@given(
    said=st.lists(
        st.tuples(
            st.sampled_from(["Ana", "Bo", "Cy"]),
            st.sampled_from(["ana", "bo", "cy"]),
            st.sampled_from(["played the cello", "went hiking", "drank tea with the user"]),
        ),
        min_size=2,
        max_size=12,
    ),
    asked=st.sampled_from([["Ana"], ["Bo"], ["User"], [], ["Ana", "Bo"]]),
)
@example(said=[("Ana", "bo", "went hiking"), ("Bo", "bo", "went hiking")], asked=["Ana"])
def test_a_name_in_lower_case_reads_as_the_name_in_texts_typed_without_capitals(
    said: list[tuple[str, str, str]], asked: list[str]
) -> None:
    """In a memory typed without capitals ("hey bo, i went hiking") a
    speaker spoken to reads as a name in a lower-case query, as in the
    capitalised one: the same speaker asked about and the same evidence.
    "user", a word these texts use but never address, names nobody, nor
    does a speaker nobody speaks to."""
    m = memory()
    for i, (who, to, what) in enumerate(said):
        dialogue(m, [(who, f"hey {to}, i {what}.", T0 + i, "s1")])
    spoken_to = {to for _, to, _ in said}
    named = " and ".join(asked) or "everyone"
    upper, lower = (m.search(f"What did {n} do?", k=50) for n in (named, named.lower()))
    assert upper.trace["speaker_asked"] in (None, *(a.lower() for a in asked))
    if asked == ["User"]:
        assert lower.trace["speaker_asked"] is None
        assert "user" not in lower.trace["query_entities"]
    elif all(a.lower() in spoken_to for a in asked):
        assert lower.trace["speaker_asked"] == upper.trace["speaker_asked"]
        assert [(e.id, e.score) for e in lower.evidence] == [
            (e.id, e.score) for e in upper.evidence
        ]
    elif len(asked) == 1:
        # nobody speaks to them: in lower case the texts show no name
        assert lower.trace["speaker_asked"] is None

"""The learned System-One controller: model files, answers, and the training script."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jevmem
from jevmem.controller import DecisionRequest, NoulAnswer, catalogue, validate_answers
from jevmem.controller.features import memory_youth
from jevmem.controller.learned import (
    ASSESSMENT_BASE,
    ASSESSMENT_FEATURES,
    CONTEXT_FEATURES,
    MATCH_FEATURES,
    OWN_FEATURES,
    SPEAKERLESS,
    SPEAKERLESS_CONTEXT_FEATURES,
    SPEAKERLESS_OWN_FEATURES,
    Head,
    LearnedController,
    SystemOneModel,
    assessment_features,
    assessment_row,
    candidate_matrix,
    candidate_rows,
    feature_matrix,
    hand_answers,
    without_speakers,
)
from jevmem.controller.types import CandidateAnswers, CandidateQuestions, CandidateTable
from jevmem.embed import HashEmbedder
from jevmem.errors import InvalidConfigError

ROOT = Path(__file__).resolve().parent.parent


def random_head(names: tuple[str, ...], hidden: int, seed: int) -> Head:
    rng = np.random.default_rng(seed)
    sizes = [len(names), *([hidden] if hidden else []), 1]
    layers = tuple(
        (rng.normal(size=(a, b)) * 3, rng.normal(size=b)) for a, b in itertools.pairwise(sizes)
    )
    return Head(names, rng.normal(size=len(names)), rng.uniform(0.1, 2, size=len(names)), layers)


def random_model(seed: int, hidden: int = 4, speakerless: bool = False) -> SystemOneModel:
    heads = {
        "score.relevance": random_head(OWN_FEATURES, hidden, seed),
        "score.support": random_head(CONTEXT_FEATURES, 0, seed + 1),
        "assess.sufficiency": random_head(ASSESSMENT_FEATURES, 0, seed + 2),
    }
    if speakerless:
        heads["score.relevance" + SPEAKERLESS] = random_head(
            SPEAKERLESS_OWN_FEATURES, hidden, seed + 3
        )
        heads["score.support" + SPEAKERLESS] = random_head(
            SPEAKERLESS_CONTEXT_FEATURES, 0, seed + 4
        )
    return SystemOneModel(heads, {"version": "test"})


signal_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.integers(-(10**6), 10**6),
)
signal_names = st.sampled_from(
    sorted(
        {n for f in OWN_FEATURES + CONTEXT_FEATURES for n in f.split("*")}
        | {"novelty", "has_speaker"}
    )
)


@given(
    cands=st.lists(st.dictionaries(signal_names, signal_value, max_size=12), max_size=12),
    seed=st.integers(0, 2**16),
    hidden=st.sampled_from([0, 3]),
)
def test_learned_answers_are_valid_for_any_features(
    cands: list[dict[str, Any]], seed: int, hidden: int
) -> None:
    model = random_model(seed, hidden, speakerless=seed % 2 == 1)
    ctl = LearnedController(model)
    candidates = [{"id": i, "text": "x", "signals": s} for i, s in enumerate(cands)]
    qs = tuple(q for i in range(len(candidates)) for q in catalogue.scoring_questions(i))
    scoring = DecisionRequest(
        "scoring", {"query": {"text": "q", "routing": {}}, "candidates": candidates}, qs
    )
    # the memory's evidence scores are numbers; their signals may be anything
    evidence = [
        {"id": i, "text": "x", "score": (i % 5) / 4, "signals": s} for i, s in enumerate(cands)
    ]
    assess = DecisionRequest(
        "assessment",
        {"query": {"text": "q"}, "evidence": evidence, "coverage": 0.5, "frontier_best": 0.1},
        catalogue.assessment_questions(),
    )
    answers = ctl.decide([scoring, assess])
    validate_answers([scoring, assess], answers)  # range, shape, every question answered
    for got in answers:
        for a in got.values():
            assert isinstance(a, NoulAnswer)
            assert 0.0 <= a.value <= 1.0 and math.isfinite(a.value)
    # the matrices have one row per candidate and one column per feature,
    # and the fast path equals the rows the training script keeps
    hand = {"hand_relevance": [0.5] * len(cands), "hand_support": [0.25] * len(cands)}
    for names in (OWN_FEATURES, CONTEXT_FEATURES):
        fast = candidate_matrix(candidates, names, hand)
        assert fast.shape == (len(cands), len(names))
        assert np.array_equal(fast, feature_matrix(candidate_rows(candidates, hand), names))
        assert np.isfinite(fast).all()
    feats = assessment_features(assess.state, 0.5)
    assert set(feats) == set(ASSESSMENT_BASE)
    assert all(math.isfinite(v) for v in feats.values())


@given(
    seeds=st.lists(st.integers(0, 2**16), min_size=1, max_size=5),
    hidden=st.sampled_from([(), (3,), (4, 2)]),
    rows=st.integers(0, 6),
)
def test_an_averaged_head_answers_the_mean_of_its_members_logits(
    seeds: list[int], hidden: tuple[int, ...], rows: int
) -> None:
    names = OWN_FEATURES[:5]
    rng = np.random.default_rng(seeds[0])
    mean, scale = rng.normal(size=len(names)), rng.uniform(0.1, 2, size=len(names))
    sizes = [len(names), *hidden, 1]
    members = []
    for seed in seeds:
        r = np.random.default_rng(seed + 1)
        layers = tuple(
            (r.normal(size=(a, b)), r.normal(size=b)) for a, b in itertools.pairwise(sizes)
        )
        members.append(Head(names, mean, scale, layers))
    merged = Head.averaged(members)
    # an ordinary head: it survives the model file
    merged = Head.from_json(json.loads(json.dumps(merged.to_json())))
    x = np.random.default_rng(seeds[-1]).normal(scale=3, size=(rows, len(names)))
    want = np.mean([h.logits(x) for h in members], axis=0) if rows else np.zeros(0)
    np.testing.assert_allclose(merged.logits(x), want, rtol=1e-9, atol=1e-9)
    assert merged(x).shape == (rows,)


def test_heads_that_differ_cannot_be_averaged() -> None:
    a = random_head(OWN_FEATURES, 3, 1)
    with pytest.raises(InvalidConfigError):
        Head.averaged([])
    with pytest.raises(InvalidConfigError):
        Head.averaged([a, random_head(OWN_FEATURES, 3, 2)])  # other standardisation
    with pytest.raises(InvalidConfigError):
        Head.averaged(
            [
                a,
                Head(
                    a.features,
                    a.mean,
                    a.scale,
                    a.layers[1:] and ((np.ones((len(a.features), 1)), np.zeros(1)),),
                ),
            ]
        )  # other depth


def test_heads_answer_their_kinds_and_the_rest_is_the_hand_rules() -> None:
    model = random_model(7)
    learned, hand = LearnedController(model), jevmem.LocalController()
    cands = [
        {"id": i, "text": "t", "signals": {"lexical": i / 4, "dense": 1 - i / 4, "support": 0.3}}
        for i in range(4)
    ]
    qs = tuple(q for i in range(4) for q in catalogue.scoring_questions(i))
    req = DecisionRequest(
        "scoring", {"query": {"text": "q", "routing": {}}, "candidates": cands}, qs
    )
    got, base = learned.decide([req])[0], hand.decide([req])[0]
    x = candidate_matrix(cands, OWN_FEATURES, hand_answers(base, 4))
    expect = model.heads["score.relevance"](x)
    for i in range(4):
        assert got[f"candidate_{i}_relevance"].value == pytest.approx(expect[i])  # type: ignore[union-attr]
        # usefulness and novelty have no head: the hand rule answers
        assert got[f"candidate_{i}_novelty"] == base[f"candidate_{i}_novelty"]
        assert (
            got[f"candidate_{i}_relation_usefulness"] == base[f"candidate_{i}_relation_usefulness"]
        )


def test_model_file_round_trip_and_bad_files(tmp_path: Path) -> None:
    model = random_model(3)
    path = tmp_path / "m.json"
    model.save(path)
    again = SystemOneModel.load(path)
    x = np.random.default_rng(0).normal(size=(5, len(OWN_FEATURES)))
    assert np.array_equal(model.heads["score.relevance"](x), again.heads["score.relevance"](x))
    bad = json.loads(path.read_text())
    bad["format"] = 99
    path.write_text(json.dumps(bad))
    with pytest.raises(InvalidConfigError, match="format"):
        SystemOneModel.load(path)
    bad["format"] = 1
    bad["heads"]["score.relevance"]["mean"] = [0.0]  # wrong width
    path.write_text(json.dumps(bad))
    with pytest.raises(InvalidConfigError):
        SystemOneModel.load(path)
    path.write_text("{not json")
    with pytest.raises(InvalidConfigError, match="cannot read"):
        SystemOneModel.load(path)
    with pytest.raises(InvalidConfigError, match="cannot answer"):
        SystemOneModel({"route.semantic": model.heads["score.support"]})


def test_the_shipped_model_loads_and_a_memory_uses_it() -> None:
    model = SystemOneModel.shipped()
    assert set(model.heads) <= set(SystemOneModel.KINDS)
    assert model.meta.get("training", {}).get("command")  # says how it was made
    m = jevmem.Memory(HashEmbedder(64), LearnedController(model))
    m.add_batch(
        ["I adopted a beagle called Toby.", "Work was busy today.", "Toby loves the beach."],
        timestamps=["2024-01-01T10:00:00Z", "2024-01-02T10:00:00Z", "2024-01-03T10:00:00Z"],
        speakers=["Ann", "Ann", "Ann"],
    )
    res = m.search("What is the name of Ann's dog?", k=3)
    assert res.trace["controller"] == "learned"
    assert res.evidence and res.sufficiency is not None and 0 <= res.sufficiency <= 1


def synthetic_conversation(sample: str, seed: int) -> dict[str, Any]:
    """A small LoCoMo-layout conversation with known evidence and unanswerable questions."""
    rng = np.random.default_rng(seed)
    pets = ["Toby", "Milo", "Luna", "Rex", "Nala", "Coco"]
    cities = ["Lisbon", "Oslo", "Quito", "Hanoi", "Perth", "Tunis"]
    hobbies = ["pottery", "climbing", "chess", "rowing", "baking", "sketching"]
    fillers = [
        "How was your week?",
        "Pretty good, thanks for asking!",
        "The weather has been lovely lately.",
        "I watched a film last night.",
        "That sounds fun, tell me more.",
    ]
    sessions: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bo"}
    qa: list[dict[str, Any]] = []
    turn = 0
    for s in range(1, 4):
        sessions[f"session_{s}_date_time"] = f"10:00 am on {s} May, 2023"
        turns = []
        for k in range(8):
            speaker = "Ann" if k % 2 == 0 else "Bo"
            turn += 1
            dia = f"D{s}:{k + 1}"
            if k in (2, 5):
                i = int(rng.integers(len(pets)))
                fact = [
                    (f"My dog is called {pets[i]}.", f"What is the name of {speaker}'s dog?"),
                    (f"I moved to {cities[i]} last month.", f"Where did {speaker} move to?"),
                    (f"I took up {hobbies[i]} recently.", f"Which hobby did {speaker} take up?"),
                ][(s + k) % 3]
                turns.append({"speaker": speaker, "dia_id": dia, "text": fact[0]})
                qa.append({"question": fact[1], "answer": "x", "evidence": [dia], "category": 4})
            else:
                turns.append(
                    {"speaker": speaker, "dia_id": dia, "text": fillers[turn % len(fillers)]}
                )
        sessions[f"session_{s}"] = turns
    qa.append({"question": "What did Ann say about her trip to Mars?", "adversarial_answer": "x",
               "evidence": [], "category": 5})  # fmt: skip
    qa.append({"question": "Which violin did Bo buy?", "adversarial_answer": "x", "evidence": [],
               "category": 5})  # fmt: skip
    return {"sample_id": sample, "conversation": sessions, "qa": qa}


@pytest.mark.parametrize("monotone", [False, True])
def test_training_script_runs_on_a_small_synthetic_set(tmp_path: Path, monotone: bool) -> None:
    for name, seed in (("chats-a", 1), ("chats-b", 2)):
        data = [synthetic_conversation(f"{name}-{i}", seed * 10 + i) for i in range(2)]
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    out, report = tmp_path / "model.json", tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "train_controller.py"),
            "--data",
            str(tmp_path / "chats-a.json"),
            "--data",
            str(tmp_path / "chats-b.json"),
            "--embedder",
            "hash",
            "--folds",
            "2",
            "--epochs",
            "40",
            "--hidden",
            "3",
            "--members",
            "2",
            "--out",
            str(out),
            "--report",
            str(report),
            *(
                [
                    "--monotone",
                    "--ship-all",
                    "--speakerless",
                    "--speakerless-styles",
                    "notes",
                    "--judge-styles",
                    "blocks",
                    "--windows",
                    "6",
                ]
                if monotone
                else []
            ),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(report.read_text())
    assert rep["datasets"] == ["chats-a", "chats-b"]
    assert rep["questions"] == {"chats-a": 16, "chats-b": 16}
    # the speakerless heads' own style is reported on its own, in the pool only
    bare = {"chats-a+notes", "chats-b+notes"} if monotone else set()
    assert set(rep["held_out_pool_recall@10"]) == {"chats-a", "chats-b"} | bare
    for d in bare:
        assert set(rep["held_out_pool_recall@10"][d]) == {"hand", "speakerless_by_conversation"}
    assert rep["speakerless_styles"] == (["notes"] if monotone else [])
    for table in ("held_out_pool_recall@10", "held_out_full_recall@10", "held_out_abstain_auroc"):
        assert set(rep[table]) - bare == {"chats-a", "chats-b"}
        for row in rep[table].values():
            for v in row.values():
                assert v is None or 0.0 <= v <= 1.0
    model = SystemOneModel.load(out)
    assert sorted(model.heads) == rep["shipped_heads"]
    assert model.meta["training"]["held_out_full_recall@10"] == rep["held_out_full_recall@10"]
    assert model.meta["training"]["settings"]["monotone"] is monotone
    assert model.meta["training"]["speakerless"] is monotone
    if monotone:
        assert rep["shipped_heads"] == [
            "assess.sufficiency",
            "score.relevance",
            "score.relevance.speakerless",
            "score.support",
            "score.support.speakerless",
        ]
        for row in rep["held_out_pool_recall@10"].values():
            assert 0.0 <= row["speakerless_by_conversation"] <= 1.0
        # judged on blocks, never fitted on them: the three rankings, held out
        judged = rep["held_out_full_recall@10_judged"]
        assert set(judged) == {"chats-a+blocks", "chats-b+blocks"}
        for row in judged.values():
            assert set(row) == {"hand", "learned", "learned_speakerless"}
            assert all(0.0 <= v <= 1.0 for v in row.values())
        assert head_rises_in(model.heads["score.relevance"], MATCH_FEATURES)
        # the sufficiency head also judged on windows of six turns, held out
        assert set(rep["held_out_abstain_auroc_windows"]) == {"6", "all"}
        assert set(rep["held_out_abstain_auroc_windows"]["6"]) == {"chats-a", "chats-b"}
    else:
        assert rep["held_out_full_recall@10_judged"] == {}
        assert rep["held_out_abstain_auroc_windows"] == {} and rep["windows"] == []


def test_training_script_trains_on_restyled_conversations(tmp_path: Path) -> None:
    data = [synthetic_conversation(f"chats-{i}", 30 + i) for i in range(2)]
    (tmp_path / "chats.json").write_text(json.dumps(data))
    report = tmp_path / "report.json"
    data_arg = ("--data", str(tmp_path / "chats.json"))
    proc = train_script(
        *data_arg, "--embedder", "hash", "--styles", "turns,messages,blocks",
        *("--folds", "2", "--epochs", "20", "--report", str(report)),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(report.read_text())
    # each style a data set of its own, with the same questions
    assert rep["datasets"] == ["chats", "chats+blocks", "chats+messages"]
    assert rep["questions"] == {"chats": 16, "chats+blocks": 16, "chats+messages": 16}
    for row in rep["held_out_full_recall@10"].values():
        assert row["hand"] is not None and 0.0 <= row["hand"] <= 1.0
    bad = train_script(*data_arg, "--styles", "turns,scrolls")
    assert bad.returncode == 2 and "unknown style 'scrolls'" in bad.stderr
    bare = train_script(*data_arg, "--speakerless-styles", "blocks")
    assert bare.returncode == 2 and "add --speakerless" in bare.stderr


def test_training_script_fits_sufficiency_on_windows_keeping_the_scoring_heads(
    tmp_path: Path,
) -> None:
    for name, seed in (("chats-a", 1), ("chats-b", 2)):
        data = [synthetic_conversation(f"{name}-{i}", seed * 10 + i) for i in range(2)]
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    data_args = ("--data", str(tmp_path / "chats-a.json"), "--data", str(tmp_path / "chats-b.json"))
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    report = tmp_path / "report.json"
    common = ("--embedder", "hash", "--folds", "2", "--epochs", "30", "--ship-all")
    proc = train_script(*data_args, *common, "--out", str(first))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = train_script(
        *data_args, *common, "--scoring-from", str(first), "--windows", "4,9",
        *("--out", str(second), "--report", str(report)),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(report.read_text())
    was, now = SystemOneModel.load(first), SystemOneModel.load(second)
    # the scoring heads as they were, to the bit; a sufficiency head fitted anew
    scoring = sorted(k for k in was.heads if k.startswith("score."))
    assert scoring and sorted(k for k in now.heads if k.startswith("score.")) == scoring
    for kind in scoring:
        assert now.heads[kind].to_json() == was.heads[kind].to_json()
    assert rep["shipped_heads"] == sorted(now.heads) and "assess.sufficiency" in now.heads
    assert now.heads["assess.sufficiency"].features == ASSESSMENT_FEATURES
    assert rep["scoring_from"]["path"] == str(first) and rep["windows"] == [4, 9]
    # judged on full memories and on each window size, held out by conversation
    windows = rep["held_out_abstain_auroc_windows"]
    assert set(windows) == {"4", "9", "all"}
    for table in (rep["held_out_abstain_auroc"], *windows.values()):
        assert set(table) == {"chats-a", "chats-b"}
        for row in table.values():
            assert set(row) == {"hand", "learned"}
            assert all(v is None or 0.0 <= v <= 1.0 for v in row.values())
    bad = train_script(*data_args, "--windows", "0,5")
    assert bad.returncode == 2 and "--windows sizes must be >= 1" in bad.stderr


@given(st.floats(-10.0, 1e7), st.floats(0.0, 1e7))
def test_memory_youth_falls_with_size_and_is_zero_past_a_few_hundred_nodes(
    a: float, b: float
) -> None:
    lo, hi = sorted((a, b))
    assert 0.0 <= memory_youth(hi) <= memory_youth(lo) <= 1.0
    assert memory_youth(hi) == 0.0 or hi < 10**2.5 - 1  # 315.2
    assert memory_youth(0.0) == 1.0 and memory_youth(-3.0) == 1.0


def test_an_assessment_says_how_many_nodes_the_search_could_read() -> None:
    rec = CallRecorder(LearnedController(SystemOneModel.shipped()))
    m = jevmem.Memory(HashEmbedder(64), rec)
    texts = [f"note {i} about the garden and the roses" for i in range(12)]
    scopes = [{"user": "ann" if i < 5 else "bo"} for i in range(12)]
    m.add_batch(texts, scopes=scopes)

    def assessed(**kw: Any) -> list[float]:
        rec.calls.clear()
        m.search("what about the roses?", k=3, **kw)
        states = [r.state for call in rec.calls for r in call if r.purpose == "assessment"]
        assert states
        return [s["memory_nodes"] for s in states]

    assert set(assessed()) == {12}
    assert set(assessed(scope={"user": "ann"})) == {5}
    # the summary a head reads: the memory's youth at that size
    got = assessment_features({"evidence": [], "memory_nodes": 5}, 0.5)
    assert got["memory_youth"] == memory_youth(5.0)
    assert assessment_features({"evidence": []}, 0.5)["memory_youth"] == 1.0


def train_script(*args: str) -> subprocess.CompletedProcess[str]:
    """`bench/train_controller.py` run with ``args``, its output captured."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "train_controller.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def head_rises_in(head: Head, names: Sequence[str], seed: int = 0) -> bool:
    """Whether raising any one of ``names`` in random feature rows never
    lowers the head's logit (the rest held)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.5, 1.5, size=(400, len(head.features)))
    base = head.logits(x.copy())
    for name in names:
        up = x.copy()
        up[:, head.features.index(name)] += rng.uniform(0.0, 2.0, size=len(x))
        if (head.logits(up) < base - 1e-12).any():
            return False
    return True


def test_a_free_head_can_fall_where_a_monotone_one_cannot() -> None:
    # the check above can fail: a head with a negative path from "dense"
    features = ("lexical", "dense")
    falls = Head(
        features,
        np.zeros(2),
        np.ones(2),
        (
            (np.array([[1.0, 0.5], [-1.0, 0.5]]), np.zeros(2)),
            (np.array([[1.0], [1.0]]), np.zeros(1)),
        ),
    )
    assert not head_rises_in(falls, ["dense"])
    assert head_rises_in(falls, ["lexical"])


cell = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1e7, -1e7, 0.5])
)


@given(st.lists(st.fixed_dictionaries({"a": cell, "b": cell, "c": cell}), min_size=1, max_size=6))
def test_feature_columns_are_the_plain_bounded_products(rows: list[dict[str, float]]) -> None:
    """The feature matrix is each row's values made finite (non-finite: 0),
    bounded to 1e6 either way, then multiplied left to right (the plain
    reading, as a head's features were trained)."""
    names = ["a", "c", "a*b", "b*c*a", "c*c"]

    def plain(v: float) -> float:
        return min(1e6, max(-1e6, v)) if math.isfinite(v) else 0.0

    want = [
        [
            math.prod([plain(r[f]) for f in name.split("*")], start=1.0)
            if "*" in name
            else plain(r[name])
            for name in names
        ]
        for r in rows
    ]
    got = feature_matrix(rows, names)
    assert got.tolist() == want
    # a head reads them as its plain formula does
    head = Head(
        tuple(names),
        np.full(len(names), 0.5),
        np.full(len(names), 2.0),
        ((np.full((len(names), 3), 0.25), np.zeros(3)), (np.ones((3, 1)), np.array([0.1]))),
    )
    h = np.clip((np.array(want) - 0.5) / 2.0, -8.0, 8.0)
    z = np.clip(
        (np.tanh(h @ np.full((len(names), 3), 0.25)) @ np.ones((3, 1)) + 0.1)[:, 0], -60, 60
    )
    assert np.array_equal(head(got), 1.0 / (1.0 + np.exp(-z)))


def _assessment_reference(evidence: list[dict[str, Any]]) -> dict[str, float]:
    """The evidence summary read feature by feature, each its own pass (the
    form `assessment_features` had before it read the evidence once)."""

    def finite(v: object) -> float:
        try:
            x = float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return 0.0
        return x if math.isfinite(x) else 0.0

    def weighed(name: str) -> float:
        return max(
            (
                finite((e.get("signals") or {}).get(name))
                * (0.6 + 0.4 * min(1.0, max(0.0, finite(e.get("score")))))
                for e in evidence
            ),
            default=0.0,
        )

    def best(name: str) -> float:
        return max((finite((e.get("signals") or {}).get(name)) for e in evidence), default=0.0)

    scores = sorted((finite(e.get("score")) for e in evidence), reverse=True)
    return {
        "top_score": scores[0] if scores else 0.0,
        "second_score": scores[1] if len(scores) > 1 else 0.0,
        "top3_score": sum(scores[:3]) / 3.0,
        "top_relevance": best("relevance"),
        "grounded": weighed("content_coverage"),
        "against": weighed("other_coverage"),
        "top_dense_raw": best("dense_raw"),
    }


evidence_signal = st.one_of(signal_value, st.floats(-2.0, 2.0), st.sampled_from([0.0, -0.0, "x"]))


@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "score": evidence_signal,
                "signals": st.dictionaries(
                    st.sampled_from(
                        ["relevance", "content_coverage", "other_coverage", "dense_raw"]
                    ),
                    evidence_signal,
                ),
            },
        ),
        max_size=8,
    )
)
def test_the_evidence_summary_in_one_pass_equals_it_read_feature_by_feature(
    evidence: list[dict[str, Any]],
) -> None:
    got = assessment_features({"evidence": evidence}, 0.5)
    for name, want in _assessment_reference(evidence).items():
        # the same value, sign of zero included (a raw similarity may be negative)
        assert got[name] == want and math.copysign(1.0, got[name]) == math.copysign(1.0, want), name


def _same_answers(a: Any, b: Any) -> bool:
    """Equal to the bit: columns (their bytes) or each answer."""
    if hasattr(a, "array") and hasattr(b, "array"):
        return bool(a.array.tobytes() == b.array.tobytes())
    return dict(a) == dict(b)


class CallRecorder:
    """A controller that keeps every batch of requests it is asked and lets
    ``inner`` answer them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.answers_validated = getattr(inner, "answers_validated", False)
        self.calls: list[list[DecisionRequest]] = []

    def decide(self, requests: Any) -> Any:
        self.calls.append(list(requests))
        return self.inner.decide(requests)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rounds_answered_together_equal_each_answered_alone(seed: int) -> None:
    # a lockstep batch's scoring rounds share the heads' elementwise steps;
    # each must still get, to the bit, the answers it gets alone
    rng = np.random.default_rng(seed)
    words = "cello lisbon milk oat soy release hiking lake coffee garden piano trip".split()
    people = ["Maya", "Tom", "Lena"]
    recorder = CallRecorder(LearnedController())
    m = jevmem.Memory(HashEmbedder(64), controller=recorder)
    n = 80
    m.add_batch(
        [" ".join(rng.choice(words, size=int(rng.integers(3, 12)))) for _ in range(n)],
        timestamps=[1_700_000_000 + 600 * i for i in range(n)],
        speakers=[people[int(rng.integers(0, 3))] for _ in range(n)],
        provenances=[{"session": str(i // 12)} for i in range(n)],
    )
    recorder.calls.clear()
    queries = [f"what did {p} say about {w}?" for p in people for w in words[:4]]
    m.search_batch(queries, k=10)
    together_rounds = 0
    # the hand rules' columns stacked too (`controller.scoring.score_rounds`)
    for model in (LearnedController(), jevmem.LocalController()):
        for requests in recorder.calls:
            scoring = [r for r in requests if r.purpose == "scoring"]
            together_rounds += len(scoring) > 1
            together = model.decide(requests)
            for req, got in zip(requests, together, strict=True):
                assert _same_answers(got, model.decide([req])[0])
    assert together_rounds > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_candidates_without_a_speaker_get_the_speakerless_heads(seed: int) -> None:
    # a memory of spoken turns and speakerless notes: each candidate is
    # answered by the heads for its kind of node, to the bit, together or alone
    rng = np.random.default_rng(seed)
    words = "cello lisbon milk oat soy release hiking lake coffee garden piano trip".split()
    recorder = CallRecorder(jevmem.LocalController())
    m = jevmem.Memory(HashEmbedder(64), controller=recorder)
    n = 60
    m.add_batch(
        [" ".join(rng.choice(words, size=int(rng.integers(3, 12)))) for _ in range(n)],
        speakers=[["Maya", "Tom", None][int(rng.integers(0, 3))] for _ in range(n)],
    )
    recorder.calls.clear()
    m.search_batch([f"what about the {w}?" for w in words[:6]], k=10)
    model = random_model(seed, speakerless=True)
    heads = model.heads
    mixed = LearnedController(model)
    spoken = LearnedController(SystemOneModel({k: heads[k] for k in heads if SPEAKERLESS not in k}))
    unspoken = LearnedController(
        SystemOneModel(
            {k.removesuffix(SPEAKERLESS): h for k, h in heads.items() if SPEAKERLESS in k}
        )
    )
    rows = {0.0: 0, 1.0: 0}
    for requests in recorder.calls:
        got = mixed.decide(requests)
        by_spoken, by_unspoken = spoken.decide(requests), unspoken.decide(requests)
        for i, req in enumerate(requests):
            assert _same_answers(got[i], mixed.decide([req])[0])
            if req.purpose != "scoring":
                assert _same_answers(got[i], by_spoken[i])
                continue
            has = req.state["candidates"].columns["has_speaker"]
            answers, answers_spoken, answers_unspoken = got[i], by_spoken[i], by_unspoken[i]
            assert isinstance(answers, CandidateAnswers)
            assert isinstance(answers_spoken, CandidateAnswers)
            assert isinstance(answers_unspoken, CandidateAnswers)
            for kind in answers.questions.kinds:
                for j, flag in enumerate(has.tolist()):
                    want = (answers_spoken if flag == 1.0 else answers_unspoken).column(kind)[j]
                    assert answers.column(kind)[j] == want
                    rows[flag] += 1
    assert rows[0.0] > 0 and rows[1.0] > 0


def test_a_memory_without_speakers_is_answered_by_the_speakerless_heads_alone() -> None:
    # every candidate speakerless: the other heads are not run, and the
    # answers are the speakerless heads', together and alone
    rng = np.random.default_rng(5)
    words = "cello lisbon milk oat soy release hiking lake coffee garden piano trip".split()
    recorder = CallRecorder(jevmem.LocalController())
    m = jevmem.Memory(HashEmbedder(64), controller=recorder)
    m.add_batch([" ".join(rng.choice(words, size=int(rng.integers(3, 12)))) for _ in range(40)])
    recorder.calls.clear()
    m.search_batch([f"what about the {w}?" for w in words[:5]], k=10)
    heads = random_model(3, speakerless=True).heads
    mixed = LearnedController(SystemOneModel(heads))
    unspoken = LearnedController(
        SystemOneModel(
            {k.removesuffix(SPEAKERLESS): h for k, h in heads.items() if SPEAKERLESS in k}
        )
    )
    scored = 0
    for requests in recorder.calls:
        got, want = mixed.decide(requests), unspoken.decide(requests)
        for i, req in enumerate(requests):
            if req.purpose == "scoring":
                scored += 1
                assert _same_answers(got[i], want[i])
                assert _same_answers(got[i], mixed.decide([req])[0])
    assert scored > 0


def test_a_speakerless_head_must_not_read_a_speaker() -> None:
    head = random_head(("lexical", "speaker_asks"), 0, 0)
    with pytest.raises(InvalidConfigError, match="reads a speaker signal"):
        SystemOneModel({"score.relevance" + SPEAKERLESS: head})
    with pytest.raises(InvalidConfigError, match="cannot answer"):
        SystemOneModel({"score.novelty" + SPEAKERLESS: head})
    # the speakerless features: none reads a speaker, and they read how long
    # the memory's nodes are instead
    for names, full in (
        (SPEAKERLESS_OWN_FEATURES, OWN_FEATURES),
        (SPEAKERLESS_CONTEXT_FEATURES, CONTEXT_FEATURES),
    ):
        assert names == (*without_speakers(full), "memory_length")
        SystemOneModel({"score.relevance" + SPEAKERLESS: random_head(names, 2, 1)})


def _deep_head(names: tuple[str, ...], hidden: tuple[int, ...], seed: int, scale: float) -> Head:
    rng = np.random.default_rng(seed)
    sizes = [len(names), *hidden, 1]
    layers = tuple(
        (np.clip(rng.normal(size=(a, b)), -1.7, 1.7) * scale, rng.normal(size=b))
        for a, b in itertools.pairwise(sizes)
    )
    return Head(names, rng.normal(size=len(names)), rng.uniform(0.1, 2, size=len(names)), layers)


column_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-2.0, 2.0),
)


@given(
    data=st.data(),
    sizes=st.lists(st.integers(0, 9), min_size=1, max_size=3),
    hidden=st.sampled_from([((), ()), ((5,), (3,)), ((4, 2), (2, 6)), ((3,), ()), ((), (2,))]),
    weight_scale=st.sampled_from([1.0, 1e200, 1e308]),
    seed=st.integers(0, 2**16),
    anchors=st.booleans(),
)
def test_scoring_heads_read_together_answer_as_each_head_alone(
    data: st.DataObject,
    sizes: list[int],
    hidden: tuple[tuple[int, ...], tuple[int, ...]],
    weight_scale: float,
    seed: int,
    anchors: bool,
) -> None:
    # the controller evaluates a round's relevance and support heads as one
    # stacked computation (and a lockstep batch's rounds as one set of
    # rows); every answer must be, to the bit, what the head gives alone
    # through its public form (`candidate_matrix`, `Head.__call__`), for any
    # signals (NaN, infinities, absent columns) and any weights (the largest
    # overflow into NaN; heads of different depths are read one by one)
    relevance = _deep_head(OWN_FEATURES, hidden[0], seed, weight_scale)
    support = _deep_head(CONTEXT_FEATURES, hidden[1], seed + 1, weight_scale)
    model = SystemOneModel({"score.relevance": relevance, "score.support": support})
    learned, hand = LearnedController(model), jevmem.LocalController()
    names = sorted({n for f in OWN_FEATURES + CONTEXT_FEATURES for n in f.split("*")} | {"novelty"})
    names = [n for n in names if not n.startswith("hand_") and n != "expanded"]
    per_candidate = catalogue.anchor_questions if anchors else catalogue.scoring_questions
    requests = []
    for n in sizes:
        present = data.draw(st.lists(st.sampled_from(names), unique=True))
        columns = {
            name: data.draw(st.lists(column_value, min_size=n, max_size=n)) for name in present
        }
        table = CandidateTable(list(range(n)), ["x"] * n, columns)
        state = {"query": {"text": "q", "routing": {"semantic": 0.7}}, "candidates": table}
        requests.append(DecisionRequest("scoring", state, CandidateQuestions(per_candidate, n)))
    with np.errstate(all="ignore"):  # the largest weights overflow, as meant
        check_heads_together(requests, learned, hand, relevance, support)


def check_heads_together(
    requests: list[DecisionRequest],
    learned: LearnedController,
    hand: jevmem.LocalController,
    relevance: Head,
    support: Head,
) -> None:
    together = learned.decide(requests)
    for req, got in zip(requests, together, strict=True):
        alone = learned.decide([req])[0]
        assert _same_answers(got, alone)
        table = req.state["candidates"]
        rule = hand.decide([req])[0]
        assert isinstance(got, CandidateAnswers) and isinstance(rule, CandidateAnswers)
        hand_columns = hand_answers(rule, len(table))
        for kind, head in (("score.relevance", relevance), ("score.support", support)):
            want = head(candidate_matrix(table, head.features, hand_columns))
            want = np.where(np.isnan(want), 0.0, np.clip(want, 0.0, 1.0))
            assert got.column(kind).tobytes() == want.tobytes(), kind
        for kind in got.questions.kinds:
            if kind not in ("score.relevance", "score.support"):
                assert got.column(kind).tobytes() == rule.column(kind).tobytes(), kind


summary_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-2.0, 2.0),
    st.sampled_from([0.0, -0.0, 1.0, 1e7, -1e7]),
)


@given(
    summaries=st.lists(
        st.fixed_dictionaries({name: summary_value for name in ASSESSMENT_BASE}),
        min_size=1,
        max_size=4,
    ),
    features=st.sampled_from(
        [
            ASSESSMENT_FEATURES,
            ASSESSMENT_BASE,
            ("grounded*against", "coverage", "top_score*top_score"),
            ("grounded*against*coverage", "unnamed"),  # three factors
        ]
    ),
    hidden=st.sampled_from([(), (3,)]),
    seed=st.integers(0, 2**16),
)
def test_sufficiency_rows_built_as_floats_equal_the_head_on_its_matrix(
    summaries: list[dict[str, float]],
    features: tuple[str, ...],
    hidden: tuple[int, ...],
    seed: int,
) -> None:
    # the controller builds an assessment's features and standardises them
    # as Python floats; every answer must be, to the bit, the head's own
    # answer on the public feature row (`assessment_row`), alone or with
    # other assessments in the same call
    head = _deep_head(features, hidden, seed, 1.0)
    model = SystemOneModel({"assess.sufficiency": head})
    ctl = LearnedController(model)
    hand = jevmem.LocalController()
    requests = []
    for summary in summaries:
        # a state whose evidence and measures carry the drawn values
        evidence = [
            {
                "id": i,
                "text": "x",
                "score": summary[score],
                "signals": {
                    "relevance": summary["top_relevance"],
                    "content_coverage": summary["grounded"],
                    "other_coverage": summary["against"],
                    "dense_raw": summary["top_dense_raw"],
                },
            }
            for i, score in enumerate(("top_score", "second_score", "top3_score"))
        ]
        state = {
            "evidence": evidence,
            **{k: summary[k] for k in ("coverage", "known_terms", "covered_terms")},
            "frontier_best": summary["frontier_best"],
            "names_speaker": summary["names_speaker"],
        }
        requests.append(DecisionRequest("assessment", state, catalogue.assessment_questions()))
    (qid,) = [q.id for q in catalogue.assessment_questions() if q.kind == "assess.sufficiency"]
    together = ctl.decide(requests)
    for req, got in zip(requests, together, strict=True):
        alone = ctl.decide([req])[0]
        rule = hand.decide([req])[0][qid]
        assert isinstance(rule, NoulAnswer)
        x = assessment_row(req.state, rule.value, head.features)
        want = float(head(x)[0])
        want = 0.0 if math.isnan(want) else min(max(want, 0.0), 1.0)
        for answers in (got, alone):
            value = answers[qid]
            assert isinstance(value, NoulAnswer)
            assert value.value == want and math.copysign(1.0, value.value) == 1.0

"""A user's own controller giving wrong answers, bad model files and
degenerate training data: every case ends in a typed error (or the
documented fallback), and a memory whose controller failed holds what it
held before."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, Memory
from jevmem.controller import (
    Answer,
    Choice,
    ChoiceAnswer,
    ControllerError,
    DecisionRequest,
    LocalController,
    NoulAnswer,
    catalogue,
    default_controller,
    validate_answers,
)
from jevmem.controller.features import SCORING_SIGNALS
from jevmem.controller.learned import LearnedController, SystemOneModel
from jevmem.controller.types import (
    PAIR_NOULS,
    CandidateAnswers,
    CandidateQuestions,
    CandidateTable,
    PairAnswers,
)
from jevmem.errors import InvalidConfigError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_learned import synthetic_conversation  # noqa: E402

# ---- validate_answers: wrong types are a ControllerError, never another error --------


def _assessment() -> tuple[DecisionRequest, dict[str, Answer]]:
    qs = tuple(catalogue.assessment_questions())
    return DecisionRequest("assessment", {}, qs), {q.id: NoulAnswer(0.5) for q in qs}


def _with(value: Any) -> Callable[[], tuple[list[DecisionRequest], Any]]:
    def make() -> tuple[list[DecisionRequest], Any]:
        req, good = _assessment()
        return [req], [{**good, "sufficiency": NoulAnswer(value)}]

    return make


def _choice(dist: Any, label: Any = "merge") -> Callable[[], tuple[list[DecisionRequest], Any]]:
    def make() -> tuple[list[DecisionRequest], Any]:
        q = catalogue.consolidation_questions()[-1]
        return [DecisionRequest("consolidation", {}, (q,))], [{q.id: ChoiceAnswer(label, dist)}]

    return make


def _candidates(change: Callable[[CandidateAnswers], None]) -> Any:
    def make() -> tuple[list[DecisionRequest], Any]:
        qs = CandidateQuestions(catalogue.scoring_questions, 3)
        req = DecisionRequest("scoring", {"candidates": []}, qs)
        got = CandidateAnswers(qs, np.full((3, len(qs.template)), 0.5))
        change(got)
        return [req], [got]

    return make


def _pairs(change: Callable[[PairAnswers], None]) -> Any:
    def make() -> tuple[list[DecisionRequest], Any]:
        # a relation round as the local controller answers it, from a real write
        seen: list[tuple[DecisionRequest, Any]] = []

        class Spy:
            name = "spy"

            def decide(self, requests: Sequence[DecisionRequest]) -> Any:
                out = LocalController().decide(requests)
                seen.extend(
                    (r, a) for r, a in zip(requests, out, strict=True) if r.purpose == "relations"
                )
                return out

        m = Memory(HashEmbedder(16), controller=Spy())
        m.add("Maya takes cello lessons with Ines", speaker="Maya")
        m.add("Ines moved to Lisbon", speaker="Ines")
        r, a = seen[-1]
        assert type(a) is PairAnswers
        change(a)
        return [r], [a]

    return make


def _set(attr: str, value: Any) -> Callable[[Any], None]:
    return lambda a: setattr(a, attr, value)


def _object_cell(a: Any) -> None:
    a.array = a.array.astype(object)
    a.array[0, 0] = "0.5"


def _masked(a: Any) -> None:
    mask = np.zeros(a.array.shape, dtype=bool)
    mask[0, 0] = True
    a.array = np.ma.masked_array(a.array, mask=mask)


WRONG: dict[str, Callable[[], tuple[list[DecisionRequest], Any]]] = {
    "a generator": lambda: ([_assessment()[0]], (x for x in [_assessment()[1]])),
    "None": lambda: ([_assessment()[0]], None),
    "a dict of answers by index": lambda: ([_assessment()[0]], {0: _assessment()[1]}),
    "a list per request": lambda: ([_assessment()[0]], [list(_assessment()[1].values())]),
    "None per request": lambda: ([_assessment()[0]], [None]),
    "a string value": _with("0.5"),
    "a None value": _with(None),
    "a complex value": _with(0.5j),
    "an int too large for a float": _with(10**400),
    "an array of two values": _with(np.array([0.5, 0.5])),
    "a distribution that is None": _choice(None),
    "a distribution of strings": _choice(dict.fromkeys(catalogue.REPRESENTATION_OPTIONS, "0.2")),
    "a distribution as a list": _choice(list(catalogue.REPRESENTATION_OPTIONS)),
    "candidate cells of strings": _candidates(_object_cell),
    "candidate answers as a list": _candidates(_set("array", [[0.5] * 4] * 3)),
    "pair answers reshaped": _pairs(_set("array", np.zeros((1, 1)))),
    "pair temporal answers cut short": _pairs(_set("temporal", [])),
    "pair cells of strings": _pairs(_object_cell),
    "candidate cells complex": _candidates(lambda a: setattr(a, "array", a.array + 0j)),
    "pair cells complex": _pairs(lambda a: setattr(a, "array", a.array + 0j)),
    # what a mask hides is neither checked nor used: refused
    "candidate cells masked": _candidates(_masked),
    "pair cells masked": _pairs(_masked),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_wrongly_typed_answers_are_a_controller_error(case: str) -> None:
    requests, answers = WRONG[case]()
    with pytest.raises(ControllerError):
        validate_answers(requests, answers)


def test_the_first_bad_cell_is_still_named() -> None:
    requests, answers = _candidates(lambda a: a.array.__setitem__((2, 1), float("nan")))()
    name = requests[0].questions.names[1]
    with pytest.raises(ControllerError, match=f"candidate_2_{name}: value nan"):
        validate_answers(requests, answers)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix itself
@pytest.mark.parametrize("round_kind", ["candidates", "pairs"])
def test_answers_as_a_matrix_are_read_as_a_plain_array(round_kind: str) -> None:
    make = _candidates if round_kind == "candidates" else _pairs
    requests, answers = make(lambda a: setattr(a, "array", np.asmatrix(a.array)))()
    (got,) = validate_answers(requests, answers)
    assert type(got.array) is np.ndarray and got.array.dtype == np.float64  # type: ignore[attr-defined]


class AliasEverywhere:
    """The local controller, with a model that writes the whole entity_alias
    column of a relation round, the pairs it was not asked of too."""

    name = "alias-everywhere"

    def __init__(self, value: float) -> None:
        self.inner = LocalController()
        self.value = value

    def decide(self, requests: Sequence[DecisionRequest]) -> Any:
        out = self.inner.decide(requests)
        for a in out:
            if type(a) is PairAnswers:
                a.array[:, PAIR_NOULS.index("entity_alias")] = self.value
        return out


@pytest.mark.parametrize("value", [7.5, float("inf"), -3.0])
def test_a_relation_answer_nobody_asked_is_not_used(value: float) -> None:
    """Only the asked cells were checked, but every cell of the alias column
    was read: 7.5 there failed in the core with InvalidScoreError."""

    def graph(controller: Any) -> list[str]:
        m = Memory(HashEmbedder(32), controller=LocalController())
        m.add("Ines teaches the cello on Mondays.", speaker="Maya")
        m.controller = controller
        new = m.add("Ines moved the lesson to Tuesday.", speaker="Maya")
        return [repr(e) for e in m.neighbors(new)]

    asked: list[bool] = []

    class Spy(AliasEverywhere):
        def decide(self, requests: Sequence[DecisionRequest]) -> Any:
            out = super().decide(requests)
            asked.extend(a for r in out if type(r) is PairAnswers for a in r.questions.alias)
            return out

    assert graph(Spy(value)) == graph(LocalController())
    assert asked and not any(asked)  # the round did not ask for an alias


# ---- a memory whose controller answers wrongly is left as it was ------------------


COUNTERS = {
    "next_id",
    "ops_applied",
    "vector_bytes",
    "bm25_bytes",
    "graph_bytes",
    "controller_calls_write",
    "controller_calls_query",
}


def snapshot(m: Memory) -> dict[str, Any]:
    """What a memory holds (counters, byte sizes and spent ids aside: a failed
    write does not give its ids again)."""
    items, _ = m.list(limit=1000)
    return {
        "stats": sorted((k, v) for k, v in m.stats().items() if k not in COUNTERS),
        "nodes": [repr(n) for n in items],
        "edges": [repr(m.neighbors(n.id)) for n in items],
        "derived": repr(sorted(m.derived_state().items())),
    }


class Wrong:
    """The default controller, whose answers to a call that holds a request
    of ``purpose`` are what ``how`` makes of them."""

    name = "wrong"

    def __init__(self) -> None:
        self.inner = default_controller()
        self.purpose: str | None = None
        self.how: Callable[[list[Any]], Any] = lambda out: out

    def decide(self, requests: Sequence[DecisionRequest]) -> Any:
        out = list(self.inner.decide(requests))
        return self.how(out) if self.purpose in {r.purpose for r in requests} else out


BAD_OUTPUTS: dict[str, Callable[[list[Any]], Any]] = {
    "generator": lambda out: (x for x in out),
    "none": lambda out: None,
    "string value": lambda out: [
        {**{k: a[k] for k in a}, next(iter(a)): NoulAnswer("0.5")}  # type: ignore[arg-type]
        for a in out
    ],
    "int too large": lambda out: [
        {**{k: a[k] for k in a}, next(iter(a)): NoulAnswer(10**400)} for a in out
    ],
}


@pytest.fixture(scope="module")
def seeded() -> tuple[Memory, Wrong]:
    ctl = Wrong()
    m = Memory(HashEmbedder(32), controller=ctl)
    for i, (t, s) in enumerate(
        [
            ("Maya takes cello lessons with Ines", "Maya"),
            ("I take oat milk in my coffee", "Maya"),
            ("Ines moved to Lisbon last year", "Ines"),
            ("Lena works at a marine lab", "Lena"),
        ]
    ):
        m.add(t, speaker=s, timestamp=1_700_000_000 + 60 * i)
    return m, ctl


@pytest.mark.parametrize("bad", sorted(BAD_OUTPUTS))
@pytest.mark.parametrize(
    ("purpose", "op"),
    [
        ("typing", lambda m: m.add("Ines teaches violin too", speaker="Ines")),
        (
            "relations",
            lambda m: m.add_batch(
                ["I take almond milk now", "Lena moved"], speakers=["Maya", "Lena"]
            ),
        ),
        ("scoring", lambda m: m.search("Who teaches Maya?")),
        ("assessment", lambda m: m.search_batch(["Where does Lena work?", "What milk?"])),
    ],
)
def test_a_wrongly_typed_answer_fails_the_call_and_changes_nothing(
    seeded: tuple[Memory, Wrong], bad: str, purpose: str, op: Callable[[Memory], Any]
) -> None:
    m, ctl = seeded
    before = snapshot(m)
    ctl.purpose, ctl.how = purpose, BAD_OUTPUTS[bad]
    try:
        with pytest.raises(ControllerError):
            op(m)
    finally:
        ctl.purpose = None
    assert snapshot(m) == before


# ---- numbers a model hands over: numpy scalars, Decimals, 0-d arrays ----------------


NUMBERS: dict[str, Callable[[float], Any]] = {
    "numpy float32": np.float32,
    "Decimal": Decimal,
    "Fraction": Fraction,
    "0-d array": np.array,
}


class Converting:
    """The default controller, every number it answers handed over as
    ``convert`` makes it (a torch or numpy model's float32 scalars...)."""

    name = "converting"

    def __init__(self, convert: Callable[[float], Any]) -> None:
        self.inner = default_controller()
        self.convert = convert

    def _answer(self, a: Any) -> Any:
        if isinstance(a, NoulAnswer):
            return NoulAnswer(self.convert(a.value))
        if isinstance(a, ChoiceAnswer):
            return ChoiceAnswer(a.label, {k: self.convert(p) for k, p in a.distribution.items()})
        return a

    def decide(self, requests: Sequence[DecisionRequest]) -> Any:
        out: list[Any] = []
        got: Any
        for got in self.inner.decide(requests):
            if type(got) in (CandidateAnswers, PairAnswers):
                got.array = got.array.astype(np.float32)
                if type(got) is PairAnswers:
                    got.temporal = [c and self._answer(c) for c in got.temporal]
                out.append(got)
            else:
                out.append({k: self._answer(a) for k, a in got.items()})
        return out


CHAT = [f"note {i}: cello practice with Ines on Monday {i}" for i in range(20)]


def _all_plain(x: Any) -> bool:
    """Whether ``x`` is made only of what JSON writes (a float is a Python float)."""
    if isinstance(x, dict):
        return all(type(k) is str and _all_plain(v) for k, v in x.items())
    if isinstance(x, list | tuple):
        return all(_all_plain(v) for v in x)
    return x is None or type(x) in (str, int, float, bool)


@pytest.mark.parametrize("number", sorted(NUMBERS))
def test_answers_as_other_numbers_are_used_as_floats(tmp_path: Path, number: str) -> None:
    """Answers that pass the check but are not Python floats were kept as
    given: the consolidation record and a search's sufficiency held them, and
    saving failed (a durable write left its log record open)."""
    m = Memory(HashEmbedder(32), controller=Converting(NUMBERS[number]))
    m.add_batch(CHAT, speakers=["Maya"] * len(CHAT))  # one consolidation round
    assert m.decisions and _all_plain(m.decisions)
    r = m.search("When does Maya practise the cello?")
    assert type(r.sufficiency) is float
    m.save(tmp_path / "m.jvm")

    d = Memory.open(tmp_path / "d", HashEmbedder(32), Converting(NUMBERS[number]))
    d.add_batch(CHAT, speakers=["Maya"] * len(CHAT))
    d.add("one more note")
    decisions = list(d.decisions)
    assert decisions and _all_plain(decisions)
    d.close()
    again = Memory.open(tmp_path / "d", HashEmbedder(32), LocalController())
    assert len(again) == len(CHAT) + 1 and again.decisions == decisions


def test_validated_answers_are_python_floats() -> None:
    req, good = _assessment()
    q = catalogue.consolidation_questions()[-1]
    assert isinstance(q, Choice)
    choice = DecisionRequest("consolidation", {}, (q,))
    dist: Any = {o: np.float32(1 / len(q.options)) for o in q.options}
    given: list[Any] = [
        {k: NoulAnswer(Decimal("0.25")) for k in good},  # type: ignore[arg-type]
        {q.id: ChoiceAnswer(q.options[0], dist)},
    ]
    got = validate_answers([req, choice], given)
    assert all(type(a.value) is float for a in got[0].values())  # type: ignore[union-attr]
    (c,) = got[1].values()
    assert isinstance(c, ChoiceAnswer)
    assert all(type(p) is float for p in c.distribution.values())
    requests, answers = _candidates(lambda a: setattr(a, "array", a.array.astype(np.float32)))()
    (cand,) = validate_answers(requests, answers)
    assert isinstance(cand, CandidateAnswers) and cand.array.dtype == np.float64


def test_a_write_whose_record_cannot_be_encoded_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The durable log record was built after the log write was opened; a
    record JSON could not encode left it open: the batch stayed visible
    unlogged, every later write failed, and reopening lost the batch."""
    import jevmem.plane.state as plane_state

    d = Memory.open(tmp_path / "d", HashEmbedder(32), Converting(np.float32))
    d.add_batch(CHAT[:5], speakers=["Maya"] * 5)
    before = snapshot(d)
    # answers checked but kept as given: the record holds float32 numbers
    monkeypatch.setattr(
        plane_state, "validate_answers", lambda req, got: (validate_answers(req, got), got)[1]
    )
    with pytest.raises(ControllerError, match="could not be encoded"):
        d.add_batch(CHAT, speakers=["Maya"] * len(CHAT))
    assert snapshot(d) == before
    monkeypatch.undo()
    d.add("one more note")  # the memory still writes
    held = {**snapshot(d), "stats": len(d)}  # (the checkpoint's number moves on)
    d.close()
    again = Memory.open(tmp_path / "d", HashEmbedder(32), Converting(np.float32))
    assert {**snapshot(again), "stats": len(again)} == held


# ---- the controller server names a wrongly typed answer --------------------------


def test_the_server_refuses_wrongly_typed_answers_as_invalid() -> None:
    grpc_remote = pytest.importorskip("jevmem.remote")
    ctl = Wrong()
    server = grpc_remote.serve_controller(ctl, grpc_remote.ServerOptions(port=0))
    client = grpc_remote.GrpcController(
        server.address, use_fallback=False, timeout_s=5.0, breaker_failures=100
    )
    try:
        req, _ = _assessment()
        for bad in ("generator", "string value", "int too large"):
            ctl.purpose, ctl.how = "assessment", BAD_OUTPUTS[bad]
            # INTERNAL with the reason, where an unchecked TypeError was UNKNOWN
            with pytest.raises(grpc_remote.RemoteControllerError, match="gave invalid answers"):
                client.decide([req])
        ctl.purpose = None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (got,) = client.decide([req])
        assert set(got) == {q.id for q in req.questions}
    finally:
        client.close()
        server.stop(0)


# ---- model files -----------------------------------------------------------------


def _shipped_json() -> dict[str, Any]:
    return SystemOneModel.shipped().to_json()


def _edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    d = _shipped_json()
    change(d)
    return d


def _relevance(d: dict[str, Any]) -> dict[str, Any]:
    head: dict[str, Any] = d["heads"]["score.relevance"]
    return head


BAD_MODELS: dict[str, Any] = {
    "a list": [1, 2],
    "a string": "model",
    "meta a list": _edit(lambda d: d.__setitem__("meta", [1, 2])),
    "meta a string": _edit(lambda d: d.__setitem__("meta", "abc")),
    "a weight too large for a float": _edit(
        lambda d: _relevance(d)["layers"][0]["weights"][0].__setitem__(0, 10**400)
    ),
    "an infinite scale": _edit(lambda d: _relevance(d)["scale"].__setitem__(0, float("inf"))),
}


@pytest.mark.parametrize("case", sorted(BAD_MODELS))
def test_malformed_models_are_a_config_error(case: str) -> None:
    with pytest.raises(InvalidConfigError):
        SystemOneModel.from_json(BAD_MODELS[case])


@pytest.mark.parametrize(
    "content", [b"\xff\xfe not utf-8", b"[" * 100_000 + b"]" * 100_000], ids=["binary", "deep"]
)
def test_unreadable_model_files_are_a_config_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model.json"
    path.write_bytes(content)
    with pytest.raises(InvalidConfigError, match="cannot read the model file"):
        SystemOneModel.load(path)


@pytest.mark.parametrize("kind", ["score.relevance", "score.support.speakerless"])
@pytest.mark.parametrize("feature", ["bogus", "dense*bogus"])
def test_a_scoring_head_reading_an_unknown_feature_is_refused(kind: str, feature: str) -> None:
    d = _shipped_json()
    head = d["heads"][kind]
    head["features"] = [feature, *head["features"][1:]]
    model = SystemOneModel.from_json(d)
    with pytest.raises(InvalidConfigError, match="unknown features"):
        LearnedController(model)
    # the shipped model reads only what rounds carry
    LearnedController(SystemOneModel.from_json(_shipped_json()))


def test_every_column_a_scoring_round_carries_is_a_known_signal() -> None:
    seen: set[str] = set()

    class Columns:
        name = "columns"

        def __init__(self) -> None:
            self.inner = default_controller()

        def decide(self, requests: Sequence[DecisionRequest]) -> Any:
            for r in requests:
                table = r.state.get("candidates")
                if r.purpose == "scoring" and isinstance(table, CandidateTable):
                    seen.update(table.columns)
            return self.inner.decide(requests)

    m = Memory(HashEmbedder(32), controller=Columns())
    m.add("I lived in Lisbon until 2021", speaker="Maya", timestamp=1_600_000_000)
    m.update(0, "I live in Porto now", timestamp=1_700_000_000)
    m.add("Ines teaches me cello on Mondays", speaker="Maya", timestamp=1_700_000_100)
    m.add("Where did you say you lived?", speaker="Ines", timestamp=1_700_000_200)
    for q in ("Where did Maya live in 2020?", "Who teaches Maya?", "Summarise the chat"):
        m.search(q)
    assert seen and seen <= SCORING_SIGNALS


# ---- learned answers for any features ----------------------------------------------


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1e308, -1e308])
)


@settings(max_examples=30)
@given(st.lists(st.lists(values, min_size=4, max_size=4), min_size=1, max_size=5), values)
def test_learned_answers_lie_in_the_unit_interval_for_any_features(
    rows: list[list[float]], coverage: float
) -> None:
    names = ("dense", "lexical", "support", "speaker_asks")
    table = CandidateTable(
        list(range(len(rows))),
        ["x"] * len(rows),
        {n: [r[j] for r in rows] for j, n in enumerate(names)},
    )
    qs = CandidateQuestions(catalogue.scoring_questions, len(rows))
    evidence = [{"id": 0, "text": "x", "score": r[0], "signals": dict(zip(names, r, strict=True))} for r in rows]  # fmt: skip
    requests = [
        DecisionRequest("scoring", {"query": {}, "candidates": table}, qs),
        DecisionRequest("scoring", {"query": {}, "candidates": table.as_dicts()}, tuple(qs)),
        DecisionRequest(
            "assessment",
            {"evidence": evidence, "coverage": coverage, "memory_nodes": coverage},
            tuple(catalogue.assessment_questions()),
        ),
    ]
    answers = LearnedController().decide(requests)
    validate_answers(requests, answers)


# ---- the training script on degenerate data -------------------------------------------


def _train(
    tmp_path: Path, files: Mapping[str, list[dict[str, Any]]]
) -> subprocess.CompletedProcess[str]:
    args: list[str] = []
    for name, convs in files.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(convs))
        args += ["--data", str(path)]
    return subprocess.run(
        [
            *(sys.executable, str(ROOT / "bench" / "train_controller.py"), *args),
            *("--embedder", "hash", "--folds", "2", "--epochs", "5"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _no_questions(c: dict[str, Any]) -> dict[str, Any]:
    return {**c, "qa": []}


def _null_text(c: dict[str, Any]) -> dict[str, Any]:
    """``c`` with its first turn's text null."""
    conv = json.loads(json.dumps(c["conversation"]))
    conv["session_1"][0]["text"] = None
    return {**c, "conversation": conv}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a": [synthetic_conversation("a-0", 1)]}, "cannot hold out by conversation"),
        (
            {"a": [synthetic_conversation("a-0", 1)], "b": [synthetic_conversation("b-0", 2)]},
            "cannot hold out by conversation",
        ),
        (
            {"a": [_no_questions(synthetic_conversation(f"a-{i}", i)) for i in range(2)]},
            "no questions to fit on",
        ),
        (
            # it was skipped: the model fitted on the other files alone
            {"a": [synthetic_conversation(f"a-{i}", i) for i in range(2)], "empty": []},
            "empty.json holds no conversations",
        ),
        (
            {"a": [_null_text(synthetic_conversation(f"a-{i}", i)) for i in range(2)]},
            "text must be a str, got null",
        ),
    ],
    ids=[
        "one conversation",
        "one conversation per file",
        "no questions",
        "a file of no conversations",
        "a null text",
    ],
)
def test_training_on_degenerate_data_says_why(
    tmp_path: Path, files: Mapping[str, list[dict[str, Any]]], message: str
) -> None:
    proc = _train(tmp_path, files)
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr


def _script() -> Any:
    """The training script as a module (it imports its neighbours in bench/)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "train_controller", ROOT / "bench" / "train_controller.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--folds", "0", "--folds must be at least 2"),  # was a ZeroDivisionError
        ("--folds", "1", "--folds must be at least 2"),
        ("--hidden", "-1", "--hidden must be >= 0"),
        ("--members", "0", "--members must be >= 1"),
        ("--epochs", "0", "--epochs must be >= 1"),  # was accepted
        ("--epochs", "-3", "--epochs must be >= 1"),
        ("--l2", "-1", "--l2 must be a finite number >= 0"),
        ("--l2", "nan", "--l2 must be a finite number >= 0"),
        ("--l2", "inf", "--l2 must be a finite number >= 0"),
    ],
)
def test_training_settings_out_of_range_are_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    parse = _script().parse_args
    with pytest.raises(SystemExit) as exited:
        parse(["--data", "x.json", flag, value])
    assert exited.value.code == 2 and message in capsys.readouterr().err
    # the smallest accepted values
    args = parse(["--data", "x.json", "--folds", "2", "--hidden", "0", "--members", "1",
                  "--epochs", "1", "--l2", "0"])  # fmt: skip
    assert (args.folds, args.hidden, args.members, args.epochs, args.l2) == (2, 0, 1, 1, 0.0)


def test_a_head_nothing_judged_does_not_beat_the_hand_rule() -> None:
    beats = _script().beats
    # only unanswerable questions, or evidence no turn carries: no figures
    assert not beats({"a": {"hand": None, "learned": None}, "b": {"hand": None, "learned": 0.9}})
    assert not beats({})
    assert beats({"a": {"hand": 0.5, "learned": 0.6}, "b": {"hand": None, "learned": None}})
    assert not beats({"a": {"hand": 0.5, "learned": 0.5}})

"""gRPC: remote controllers (equivalence, faults, breaker), the servers' limits, the memory service.

Every server runs on 127.0.0.1 with a port picked at run time and is stopped
by its fixture; every remote call in here has a deadline.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import HashEmbedder, LearnedController, LocalController, Memory, default_controller
from jevmem._proto.jevmem.v1 import controller_pb2 as cpb
from jevmem._proto.jevmem.v1 import controller_pb2_grpc as cpb_grpc
from jevmem._proto.jevmem.v1 import memory_pb2 as mpb
from jevmem.controller import (
    Answer,
    Choice,
    ChoiceAnswer,
    ControllerError,
    DecisionRequest,
    Noul,
    NoulAnswer,
    Question,
)
from jevmem.controller.catalogue import (
    relation_questions,
    routing_questions,
    scoring_questions,
)
from jevmem.errors import InvalidInputError
from jevmem.remote import (
    GrpcController,
    MemoryClient,
    RemoteControllerError,
    RunningServer,
    ServerOptions,
    load_controller,
    serve_controller,
    serve_memory,
)
from jevmem.remote.convert import (
    BadRequest,
    answers_from_proto,
    answers_to_proto,
    requests_from_proto,
    requests_to_proto,
)
from jevmem.remote.server import start_server

REPO = Path(__file__).resolve().parents[1]
NAMES = ["Maya", "Lena", "Ines", "Tom"]
TOPICS = ["cello lessons", "a trip to Lisbon", "the release deploy", "oat milk coffee", "hiking"]
TEXTS = [f"{n} talked about {t} with friends" for n in NAMES for t in TOPICS]
STAMPS = [1_700_000_000 + i * 3_600 for i in range(len(TEXTS))]
QUERIES = [
    "what does Maya play?",
    "where did Lena travel?",
    "why did Tom deploy the release?",
    "what coffee does Ines like?",
]

#: the name the in-process default controller reports (a remote one is grpc:<it>)
DEFAULT_NAME = getattr(default_controller(), "name", "custom")


def fill(m: Memory) -> None:
    m.add_batch(TEXTS, timestamps=STAMPS, speakers=[t.split()[0] for t in TEXTS])


def local_memory() -> Memory:
    m = Memory(HashEmbedder(64))
    fill(m)
    return m


def evidence(rs: Sequence[Any]) -> list[list[tuple[int, float]]]:
    return [[(e.id, e.score) for e in r.evidence] for r in rs]


def health_status(address: str, service: str = "") -> int:
    with grpc.insecure_channel(address) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=2
        )
    return int(r.status)


@pytest.fixture(scope="module")
def local_server() -> Iterator[RunningServer]:
    with serve_controller() as s:
        yield s


class RawServicer(cpb_grpc.SystemOneServicer):
    """Answers through ``respond`` with full control of the wire: garbage, delays, errors."""

    def __init__(
        self, respond: Callable[[cpb.DecideRequest, grpc.ServicerContext], cpb.DecideResponse]
    ) -> None:
        self.respond = respond
        self.calls = 0

    def Decide(
        self, request: cpb.DecideRequest, context: grpc.ServicerContext
    ) -> cpb.DecideResponse:
        self.calls += 1
        return self.respond(request, context)

    def DecideStream(
        self, request_iterator: Iterator[cpb.DecideRequest], context: grpc.ServicerContext
    ) -> Iterator[cpb.DecideResponse]:
        # a backend with Decide only, as the generated base class behaves
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")


def raw_server(
    respond: Callable[[cpb.DecideRequest, grpc.ServicerContext], cpb.DecideResponse],
    **opts: Any,
) -> tuple[RunningServer, RawServicer]:
    servicer = RawServicer(respond)

    def register(server: grpc.Server) -> list[str]:
        cpb_grpc.add_SystemOneServicer_to_server(servicer, server)
        return ["jevmem.v1.SystemOne"]

    return start_server(register, ServerOptions(**opts)), servicer


def local_answers(request: cpb.DecideRequest) -> cpb.DecideResponse:
    """The local controller's answers, as the real server would send them."""
    requests = requests_from_proto(request)
    # the in-process default, so raw servers answer as local_memory() decides
    return answers_to_proto(requests, default_controller().decide(requests), "raw")


def routing_request() -> list[DecisionRequest]:
    return [
        DecisionRequest(
            "routing",
            {"query": {"text": "why did Tom deploy?", "entities": ["Tom"]}},
            routing_questions(),
        )
    ]


# ---- equivalence and RPC counts ----------------------------------------------------------


def test_remote_local_controller_gives_the_same_evidence(local_server: RunningServer) -> None:
    base = local_memory()
    with GrpcController(local_server.address, use_fallback=False) as g:
        remote = Memory(HashEmbedder(64), controller=g)
        fill(remote)
        assert g.counters["rpcs"] == remote.calls["write"]  # one RPC per add_batch phase
        rs = remote.search_batch(QUERIES)
        assert evidence(rs) == evidence(base.search_batch(QUERIES))
        for a, b in zip(rs, base.search_batch(QUERIES), strict=True):
            assert a.sufficiency == b.sufficiency
            assert a.trace["controller"] == f"grpc:{DEFAULT_NAME}"
            assert a.trace["stop_reason"] == b.trace["stop_reason"]
        # one RPC per lockstep round, not per query
        assert g.counters["rpcs"] == remote.calls["write"] + remote.calls["query"]
        assert remote.calls["query"] < len(QUERIES) * max(r.trace["controller_calls"] for r in rs)
        assert g.counters["fallbacks"] == 0


def test_search_batch_makes_one_rpc_per_round(local_server: RunningServer) -> None:
    with GrpcController(local_server.address, use_fallback=False) as g:
        m = Memory(HashEmbedder(64), controller=g)
        fill(m)
        before = g.counters["rpcs"]
        rs = m.search_batch(QUERIES * 8)
        rounds = max(r.trace["controller_calls"] for r in rs)
        assert g.counters["rpcs"] - before == rounds


# ---- the wire format ---------------------------------------------------------------------

_text = st.text(max_size=12)
_name = st.text(min_size=1, max_size=12)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _template(draw: st.DrawFn) -> Callable[[str], Question]:
    kind, instruction = draw(_name), draw(_text)
    if draw(st.booleans()):
        t, f = draw(_text), draw(_text)
        return lambda qid: Noul(qid, kind, instruction, t, f)
    labels = tuple(draw(st.lists(_name, min_size=2, max_size=4, unique=True)))
    meanings = tuple(draw(st.lists(_text, min_size=len(labels), max_size=len(labels))))
    return lambda qid: Choice(qid, kind, instruction, labels, meanings)


@st.composite
def decision_requests(draw: st.DrawFn) -> list[DecisionRequest]:
    pool = draw(st.lists(_template(), min_size=1, max_size=4))
    out = []
    for _ in range(draw(st.integers(0, 3))):
        ids = draw(st.lists(_name, max_size=6, unique=True))
        qs = tuple(draw(st.sampled_from(pool))(qid) for qid in ids)
        state = draw(st.dictionaries(_text, _json, max_size=3))
        out.append(DecisionRequest(draw(_name), state, qs))
    return out


@st.composite
def requests_and_answers(
    draw: st.DrawFn,
) -> tuple[list[DecisionRequest], list[dict[str, Answer]]]:
    requests = draw(decision_requests())
    unit = st.floats(0.0, 1.0)
    answers: list[dict[str, Answer]] = []
    for r in requests:
        got: dict[str, Answer] = {}
        for q in r.questions:
            if isinstance(q, Noul):
                got[q.id] = NoulAnswer(draw(unit))
            else:
                dist = {label: draw(unit) for label in q.options}
                got[q.id] = ChoiceAnswer(draw(st.sampled_from(q.options)), dist)
        answers.append(got)
    return requests, answers


@given(decision_requests())
def test_requests_round_trip_exactly(requests: list[DecisionRequest]) -> None:
    msg = requests_to_proto(requests)
    assert requests_from_proto(msg) == requests
    assert requests_from_proto(cpb.DecideRequest.FromString(msg.SerializeToString())) == requests
    # every distinct question text is sent once
    assert len(msg.templates) == len(
        {
            (type(q), *(getattr(q, f) for f in q.__slots__[1:]))
            for r in requests
            for q in r.questions
        }
    )


@given(requests_and_answers())
def test_answers_round_trip_exactly(
    pair: tuple[list[DecisionRequest], list[dict[str, Answer]]],
) -> None:
    requests, answers = pair
    msg = answers_to_proto(requests, answers, "x")
    wire = cpb.DecideResponse.FromString(msg.SerializeToString())
    assert answers_from_proto(wire, requests) == answers
    assert wire.controller == "x"


def scoring_round(n: int = 50) -> list[DecisionRequest]:
    cands = [{"id": i, "text": f"turn {i}", "signals": {"dense": 0.5}} for i in range(n)]
    return [
        DecisionRequest("routing", {"query": {"text": "q"}}, routing_questions()),
        DecisionRequest(
            "scoring",
            {"query": {"text": "q"}, "candidates": cands},
            tuple(q for i in range(n) for q in scoring_questions(i)),
        ),
        DecisionRequest(
            "relations",
            {"candidates": cands[:2]},
            relation_questions(0, ask_alias=True, ask_temporal=True)
            + relation_questions(1, ask_alias=False, ask_temporal=True),
        ),
    ]


def plain_answers(requests: Sequence[DecisionRequest]) -> list[dict[str, Answer]]:
    """Valid answers of the right shape: 0.25 for every Noul, the first label of every Choice."""
    return [
        {
            q.id: NoulAnswer(0.25)
            if isinstance(q, Noul)
            else ChoiceAnswer(q.options[0], {o: 1.0 / len(q.options) for o in q.options})
            for q in r.questions
        }
        for r in requests
    ]


def test_question_text_is_sent_once_per_call() -> None:
    requests = scoring_round()
    msg = requests_to_proto(requests)
    kinds = {q.kind for r in requests for q in r.questions}
    assert sorted(t.kind for t in msg.templates) == sorted(kinds)  # 16 templates, 218 questions
    wire = msg.SerializeToString()
    for r in requests:
        for q in r.questions:
            assert wire.count(q.instruction.encode()) == 1
    assert list(msg.requests[1].question_ids) == [q.id for q in requests[1].questions]
    assert requests_from_proto(msg) == requests
    answers = plain_answers(requests)
    back = answers_to_proto(requests, answers, "local")
    assert [len(r.choices) for r in back.results] == [0, 0, 2]
    assert answers_from_proto(back, requests) == answers


def test_answers_that_do_not_fit_are_refused_both_ways() -> None:
    requests = scoring_round(3)
    answers = plain_answers(requests)
    short = [dict(a) for a in answers]
    short[1].pop(next(iter(short[1])))
    with pytest.raises(ControllerError, match="answers for"):
        answers_to_proto(requests, short, "x")
    mistyped = [dict(a) for a in answers]
    mistyped[0]["semantic"] = ChoiceAnswer("a", {"a": 1.0})
    with pytest.raises(ControllerError, match="cannot take"):
        answers_to_proto(requests, mistyped, "x")
    good = answers_to_proto(requests, answers, "x")
    with pytest.raises(ControllerError, match="requests"):
        answers_from_proto(good, requests[:2])
    good.results[2].choices.add(label="before")
    with pytest.raises(ControllerError, match="choices"):
        answers_from_proto(good, requests)
    with pytest.raises(BadRequest, match="does not exist"):
        msg = requests_to_proto(requests)
        del msg.templates[-1]
        requests_from_proto(msg)


_signal_value = (
    st.floats(allow_nan=False, allow_infinity=False) | st.integers(-3, 3) | st.booleans()
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "id": st.integers(0, 9),
                "signals": st.dictionaries(st.sampled_from("abc"), _signal_value, max_size=3),
            }
        ),
        max_size=5,
    )
)
def test_signals_round_trip_exactly_with_their_types(items: list[dict[str, Any]]) -> None:
    requests = [DecisionRequest("scoring", {"query": {"text": "q"}, "candidates": items}, ())]
    msg = requests_to_proto(requests)
    back = requests_from_proto(cpb.DecideRequest.FromString(msg.SerializeToString()))
    assert back == requests
    for got, sent in zip(back[0].state["candidates"], items, strict=True):
        assert list(got["signals"]) == list(sent["signals"])  # names in their order
        assert [type(v) for v in got["signals"].values()] == [
            type(v) for v in sent["signals"].values()
        ]


def test_float_signals_travel_as_numbers() -> None:
    requests = scoring_round()
    requests[1].state["candidates"][0]["signals"]["dense"] = 0.1 + 0.2  # not short in decimal
    evidence_items = [{"id": 1, "text": "t", "signals": {"relevance": 0.5, "ok": True}}]
    requests.append(DecisionRequest("assessment", {"evidence": evidence_items}, ()))
    msg = requests_to_proto(requests)
    scoring = msg.requests[1]
    assert [(t.list, list(t.names)) for t in scoring.signal_tables] == [("candidates", ["dense"])]
    assert scoring.signal_tables[0].values[0] == 0.1 + 0.2  # exact, not rounded
    assert '"signals"' not in scoring.state_json
    # a bool among the signals keeps the whole list in JSON
    assert not msg.requests[-1].signal_tables and '"signals"' in msg.requests[-1].state_json
    assert requests_from_proto(msg) == requests
    assert "signals" in requests[1].state["candidates"][0]  # the caller's state is untouched


def test_bad_signal_tables_are_refused() -> None:
    requests = scoring_round(3)

    def broken(change: Callable[[cpb.DecisionRequest], None]) -> cpb.DecideRequest:
        msg = requests_to_proto(requests)
        change(msg.requests[1])
        return msg

    def add_signals(r: cpb.DecisionRequest) -> None:
        r.state_json = r.state_json.replace('"id":0,', '"id":0,"signals":{},', 1)

    def wrong_list(r: cpb.DecisionRequest) -> None:
        r.signal_tables[0].list = "nope"

    cases: list[tuple[Callable[[cpb.DecisionRequest], None], str]] = [
        (lambda r: r.signal_tables[0].values.append(0.5), "values for 3 items"),
        (lambda r: r.signal_tables[0].names.append("dense"), "distinct"),
        (lambda r: r.signal_tables.append(r.signal_tables[0]), "second table"),
        (wrong_list, "no list 'nope'"),
        (add_signals, "without their own signals"),
    ]
    for change, message in cases:
        with pytest.raises(BadRequest, match=message):
            requests_from_proto(broken(change))

    def nan(r: cpb.DecisionRequest) -> None:
        r.signal_tables[0].values[1] = math.nan

    with pytest.raises(BadRequest, match="finite"):
        requests_from_proto(broken(nan))
    # NaN is refused before anything is sent, as JSON refuses it
    requests[1].state["candidates"][2]["signals"]["dense"] = math.inf
    with pytest.raises(ValueError, match="JSON"):
        requests_to_proto(requests)


def test_query_time_expressions_reach_the_remote(local_server: RunningServer) -> None:
    # the query state carries grounded time references (dataclasses), sent as JSON objects
    queries = ["what did Maya do on 8 May 2023?", "where was Lena in November 2023?"]
    base = local_memory()
    with GrpcController(local_server.address, use_fallback=False) as g:
        remote = Memory(HashEmbedder(64), controller=g)
        fill(remote)
        assert evidence(remote.search_batch(queries)) == evidence(base.search_batch(queries))
        assert g.counters["fallbacks"] == 0


# ---- faults ------------------------------------------------------------------------------


def _spawn_controller() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jevmem", "serve-controller", "--port", "0", "--grace", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready:
        proc.kill()
        pytest.fail("serve-controller did not start within 20 s")
    line = proc.stdout.readline()
    assert "listening on 127.0.0.1:" in line, line
    return proc, line.rsplit(" ", 1)[1].strip()


class KillOnCall:
    """Delegates to ``inner``; kills ``proc`` just before call number ``n``."""

    def __init__(self, inner: GrpcController, proc: subprocess.Popen[str], n: int) -> None:
        self.inner, self.proc, self.n, self.calls = inner, proc, n, 0

    @property
    def name(self) -> str:
        return self.inner.name

    @name.setter
    def name(self, value: str) -> None:
        self.inner.name = value

    def decide(self, requests: Sequence[DecisionRequest]) -> Sequence[Mapping[str, Answer]]:
        self.calls += 1
        if self.calls == self.n:
            self.proc.kill()
            self.proc.wait(5)
        return self.inner.decide(requests)


def test_controller_killed_mid_search_batch_falls_back_and_marks_the_trace() -> None:
    proc, address = _spawn_controller()
    try:
        g = GrpcController(address, timeout_s=1.0, backoff_s=0.01, breaker_failures=2)
        g.wait_ready(10)
        m = Memory(HashEmbedder(64), controller=LocalController())
        fill(m)
        killer = KillOnCall(g, proc, n=2)
        m.controller = killer
        t0 = time.monotonic()
        rs = m.search_batch(QUERIES)
        elapsed = time.monotonic() - t0
        assert elapsed < 5.0
        assert all(r.trace["controller"] == "local-fallback" for r in rs)
        assert g.counters["fallbacks"] >= 1
        assert g.outcomes[0].source == "remote"
        assert {o.reason for o in g.outcomes if o.source == "fallback"} <= {
            "UNAVAILABLE",
            "breaker_open",
            "CANCELLED",
        }
        # the fallback is the local controller: same evidence as in-process
        assert evidence(rs) == evidence(local_memory().search_batch(QUERIES))
        g.close()
    finally:
        proc.kill()
        proc.wait(5)


def test_slow_controller_past_deadline_falls_back_in_time_and_the_breaker_opens() -> None:
    def slow(request: cpb.DecideRequest, context: grpc.ServicerContext) -> cpb.DecideResponse:
        time.sleep(1.0)
        return local_answers(request)

    server, servicer = raw_server(slow)
    with server, GrpcController(server.address, timeout_s=0.15, breaker_failures=2) as g:
        m = Memory(HashEmbedder(64), controller=g)
        t0 = time.monotonic()
        fill(m)
        rs = m.search_batch(QUERIES)
        elapsed = time.monotonic() - t0
        # two timed-out calls open the breaker; every later call is answered locally at once
        assert elapsed < 1.5
        assert servicer.calls == 2
        assert [o.reason for o in g.outcomes][:2] == ["DEADLINE_EXCEEDED"] * 2
        assert g.breaker.state == "open"
        assert all(r.trace["controller"] == "local-fallback" for r in rs)
        assert evidence(rs) == evidence(local_memory().search_batch(QUERIES))


def _garbage(kind: str) -> Callable[[cpb.DecideRequest, grpc.ServicerContext], cpb.DecideResponse]:
    def respond(request: cpb.DecideRequest, context: grpc.ServicerContext) -> cpb.DecideResponse:
        good = local_answers(request)
        first = good.results[0]
        if kind == "nan":
            first.noul_values[0] = math.nan
        elif kind == "out_of_range":
            first.noul_values[0] = 1.5
        elif kind == "negative":
            first.noul_values[0] = -0.1
        elif kind == "missing":
            del first.question_ids[0]
            del first.noul_values[0]
        elif kind == "extra":
            first.question_ids.append("nope")
            first.noul_values.append(0.5)
        elif kind == "duplicate":
            first.question_ids.append(first.question_ids[0])
            first.noul_values.append(first.noul_values[0])
        elif kind == "reordered":
            first.question_ids[0], first.question_ids[1] = (
                first.question_ids[1],
                first.question_ids[0],
            )
        elif kind == "wrong_type":
            del first.noul_values[0]
            first.choices.add(label="yes", distribution={"yes": 1.0})
        elif kind == "no_value":
            del first.noul_values[0]
        elif kind == "too_few_results":
            del good.results[-1]
        elif kind == "too_many_results":
            good.results.add()
        return good

    return respond


GARBAGE = [
    "nan",
    "out_of_range",
    "negative",
    "missing",
    "extra",
    "duplicate",
    "reordered",
    "wrong_type",
    "no_value",
    "too_few_results",
    "too_many_results",
]


@pytest.mark.parametrize("kind", GARBAGE)
def test_garbage_answers_are_never_trusted(kind: str) -> None:
    server, _ = raw_server(_garbage(kind))
    with server:
        with GrpcController(server.address, timeout_s=2.0) as g:
            got = g.decide(routing_request())
            assert got == LocalController().decide(routing_request())
            assert g.last_outcome is not None
            assert (g.last_outcome.source, g.last_outcome.reason) == ("fallback", "invalid_answers")
            assert g.name == "local-fallback"
        with GrpcController(server.address, use_fallback=False) as strict:
            with pytest.raises(RemoteControllerError, match="invalid_answers"):
                strict.decide(routing_request())


def test_garbage_search_batch_finishes_with_marked_fallback() -> None:
    server, _ = raw_server(_garbage("nan"))
    with server, GrpcController(server.address) as g:
        m = Memory(HashEmbedder(64), controller=g)
        fill(m)
        rs = m.search_batch(QUERIES)
        assert all(r.trace["controller"] == "local-fallback" for r in rs)
        assert evidence(rs) == evidence(local_memory().search_batch(QUERIES))


def test_only_unavailable_is_retried() -> None:
    def flaky(request: cpb.DecideRequest, context: grpc.ServicerContext) -> cpb.DecideResponse:
        if servicer.calls <= 2:
            context.abort(grpc.StatusCode.UNAVAILABLE, "warming up")
        return local_answers(request)

    server, servicer = raw_server(flaky)
    with server, GrpcController(server.address, retries=2, backoff_s=0.01) as g:
        g.decide(routing_request())
        assert g.last_outcome is not None
        assert (g.last_outcome.source, g.last_outcome.attempts) == ("remote", 3)
        assert g.counters["retries"] == 2

    def broken(request: cpb.DecideRequest, context: grpc.ServicerContext) -> cpb.DecideResponse:
        context.abort(grpc.StatusCode.INTERNAL, "boom")

    server, servicer = raw_server(broken)
    with server, GrpcController(server.address, retries=3) as g:
        g.decide(routing_request())
        assert servicer.calls == 1
        assert g.last_outcome is not None
        assert (g.last_outcome.reason, g.last_outcome.attempts) == ("INTERNAL", 1)


def test_unreachable_server_fails_fast() -> None:
    server = serve_controller()
    address = server.address
    server.stop()
    with GrpcController(address, timeout_s=0.5, retries=2, backoff_s=0.01) as g:
        t0 = time.monotonic()
        g.decide(routing_request())
        assert time.monotonic() - t0 < 2.0
        assert g.last_outcome is not None and g.last_outcome.reason == "UNAVAILABLE"
        with GrpcController(address, use_fallback=False, timeout_s=0.3) as strict:
            with pytest.raises(RemoteControllerError, match="UNAVAILABLE"):
                strict.decide(routing_request())


def test_breaker_half_opens_and_recovers() -> None:
    healthy = threading.Event()

    def respond(request: cpb.DecideRequest, context: grpc.ServicerContext) -> cpb.DecideResponse:
        if not healthy.is_set():
            context.abort(grpc.StatusCode.INTERNAL, "down")
        return local_answers(request)

    server, servicer = raw_server(respond)
    with server, GrpcController(server.address, breaker_failures=2, breaker_reset_s=0.2) as g:
        for _ in range(4):
            g.decide(routing_request())
        assert servicer.calls == 2 and g.breaker.state == "open"
        healthy.set()
        time.sleep(0.25)
        assert g.breaker.state == "half-open"
        g.decide(routing_request())
        assert g.breaker.state == "closed"
        assert g.last_outcome is not None and g.last_outcome.source == "remote"


def test_remaining_budget_bounds_the_call() -> None:
    def slow(request: cpb.DecideRequest, context: grpc.ServicerContext) -> cpb.DecideResponse:
        time.sleep(0.5)
        return local_answers(request)

    server, servicer = raw_server(slow)
    with server, GrpcController(server.address, timeout_s=5.0, reserve_s=0.05) as g:
        g.decide(routing_request(), budget_s=0.01)  # nothing left: no RPC at all
        assert g.last_outcome is not None and g.last_outcome.reason == "no_budget"
        assert servicer.calls == 0
        t0 = time.monotonic()
        g.decide(routing_request(), budget_s=0.2)  # the deadline is the budget, not timeout_s
        assert time.monotonic() - t0 < 0.4
        assert g.last_outcome is not None and g.last_outcome.reason == "DEADLINE_EXCEEDED"


def test_the_fallback_mark_is_per_batch(local_server: RunningServer) -> None:
    with GrpcController(local_server.address) as g:
        m = Memory(HashEmbedder(64), controller=g)
        fill(m)
        assert all(r.trace["controller"] == f"grpc:{DEFAULT_NAME}" for r in m.search_batch(QUERIES))
        for _ in range(3):  # force it open
            g.breaker.failure()
        assert all(r.trace["controller"] == "local-fallback" for r in m.search_batch(QUERIES))
        g.breaker.success()
        assert all(r.trace["controller"] == f"grpc:{DEFAULT_NAME}" for r in m.search_batch(QUERIES))


# ---- streamed calls (DecideStream) ---------------------------------------------------------


def test_streamed_rounds_give_the_same_evidence(local_server: RunningServer) -> None:
    """Any chunk size (one question a chunk, boundaries inside a query's requests,
    one chunk for everything) gives what unary calls and in-process give."""
    queries = QUERIES * 3
    base = local_memory()
    want = base.search_batch(queries)
    for chunk in (1, 5, 64, 10**9):
        for stream in (True, False):
            with GrpcController(
                local_server.address, use_fallback=False, chunk_questions=chunk, stream=stream
            ) as g:
                m = Memory(HashEmbedder(64), controller=g)
                fill(m)
                rs = m.search_batch(queries)
                assert evidence(rs) == evidence(want), (chunk, stream)
                for a, b in zip(rs, want, strict=True):
                    assert (a.sufficiency, a.usefulness) == (b.sufficiency, b.usefulness)
                    assert a.trace["controller_calls"] == b.trace["controller_calls"]
                    assert a.trace["controller"] == f"grpc:{DEFAULT_NAME}"
                # still one RPC per round and per add_batch phase
                assert m.calls == base.calls
                assert g.counters["rpcs"] == m.calls["write"] + m.calls["query"]
                streamed = stream and chunk < 10**9
                assert bool(g.counters["streams"]) == streamed
                assert g.counters["fallbacks"] == 0
    assert evidence(base.search_batch(queries)) == evidence(want)


def test_a_call_that_fits_one_chunk_is_unary(local_server: RunningServer) -> None:
    with GrpcController(local_server.address, use_fallback=False, chunk_questions=4) as g:
        one = routing_request()  # 4 questions: exactly one chunk
        assert g.decide(one) == LocalController().decide(one)
        assert (g.counters["rpcs"], g.counters["streams"]) == (1, 0)
        assert g.decide([]) == [] and g.counters["rpcs"] == 1
        two = one * 2
        assert g.decide(two) == LocalController().decide(two)
        assert (g.counters["streams"], g.counters["chunks"]) == (1, 2)
        # lazily produced requests: pulled as the chunks go out, each once
        pulled: list[int] = []

        def lazy() -> Iterator[DecisionRequest]:
            for i in range(5):
                pulled.append(i)
                yield from routing_request()

        assert g.decide_stream(lazy()) == LocalController().decide(one * 5)
        assert pulled == list(range(5))
        assert g.counters["chunks"] == 2 + 5


def test_streams_fall_back_to_decide_on_unimplemented() -> None:
    def respond(request: cpb.DecideRequest, context: grpc.ServicerContext) -> cpb.DecideResponse:
        return local_answers(request)

    server, servicer = raw_server(respond)  # RawServicer has Decide only
    with server, GrpcController(server.address, chunk_questions=8) as g:
        m = Memory(HashEmbedder(64), controller=g)
        fill(m)
        rs = m.search_batch(QUERIES * 2)
        assert evidence(rs) == evidence(local_memory().search_batch(QUERIES * 2))
        assert all(r.trace["controller"] == "grpc:raw" for r in rs)
        assert g.counters["stream_unimplemented"] == 1 and not g.stream
        assert g.counters["fallbacks"] == 0 and g.breaker.state == "closed"
        assert servicer.calls == m.calls["write"] + m.calls["query"]

    # a server that does not know the method at all (an older build)
    def register(server: grpc.Server) -> list[str]:
        handler = grpc.unary_unary_rpc_method_handler(
            lambda req, ctx: local_answers(req),
            request_deserializer=cpb.DecideRequest.FromString,
            response_serializer=cpb.DecideResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("jevmem.v1.SystemOne", {"Decide": handler}),)
        )
        return ["jevmem.v1.SystemOne"]

    with start_server(register, ServerOptions()) as old:
        with GrpcController(old.address, use_fallback=False, chunk_questions=4) as g:
            two = routing_request() * 2
            assert g.decide(two) == LocalController().decide(two)
            assert g.counters["stream_unimplemented"] == 1 and not g.stream


class StreamServicer(RawServicer):
    """Streams answers through ``chunk(i, request, context)``; None ends the stream (OK)."""

    def __init__(
        self,
        chunk: Callable[[int, cpb.DecideRequest, grpc.ServicerContext], cpb.DecideResponse | None],
    ) -> None:
        super().__init__(lambda request, context: local_answers(request))
        self.chunk = chunk
        self.streams = 0

    def DecideStream(
        self, request_iterator: Iterator[cpb.DecideRequest], context: grpc.ServicerContext
    ) -> Iterator[cpb.DecideResponse]:
        self.streams += 1
        for i, request in enumerate(request_iterator):
            out = self.chunk(i, request, context)
            if out is None:
                return
            yield out


def stream_server(
    chunk: Callable[[int, cpb.DecideRequest, grpc.ServicerContext], cpb.DecideResponse | None],
) -> tuple[RunningServer, StreamServicer]:
    servicer = StreamServicer(chunk)

    def register(server: grpc.Server) -> list[str]:
        cpb_grpc.add_SystemOneServicer_to_server(servicer, server)
        return ["jevmem.v1.SystemOne"]

    return start_server(register, ServerOptions()), servicer


def _dies_after_first(
    i: int, request: cpb.DecideRequest, context: grpc.ServicerContext
) -> cpb.DecideResponse:
    if i >= 1:
        context.abort(grpc.StatusCode.UNAVAILABLE, "going away")
    return local_answers(request)


def _slow_after_first(
    i: int, request: cpb.DecideRequest, context: grpc.ServicerContext
) -> cpb.DecideResponse:
    if i >= 1:
        time.sleep(1.0)
    return local_answers(request)


def _nan_in_second(
    i: int, request: cpb.DecideRequest, context: grpc.ServicerContext
) -> cpb.DecideResponse:
    out = local_answers(request)
    if i == 1:
        out.results[0].noul_values[0] = math.nan
    return out


def _stops_after_first(
    i: int, request: cpb.DecideRequest, context: grpc.ServicerContext
) -> cpb.DecideResponse | None:
    return local_answers(request) if i == 0 else None


def _too_few_results(
    i: int, request: cpb.DecideRequest, context: grpc.ServicerContext
) -> cpb.DecideResponse:
    out = local_answers(request)
    if i == 1:
        del out.results[-1]
    return out


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (_dies_after_first, "UNAVAILABLE"),
        (_slow_after_first, "DEADLINE_EXCEEDED"),
        (_nan_in_second, "invalid_answers"),
        (_stops_after_first, "invalid_answers"),
        (_too_few_results, "invalid_answers"),
    ],
)
def test_a_fault_mid_stream_fails_the_whole_round_over(
    fault: Callable[[int, cpb.DecideRequest, grpc.ServicerContext], cpb.DecideResponse | None],
    reason: str,
) -> None:
    server, servicer = stream_server(fault)
    with server:
        with GrpcController(
            server.address, chunk_questions=4, timeout_s=0.2, retries=1, backoff_s=0.01
        ) as g:
            calls = routing_request() * 3
            t0 = time.monotonic()
            assert g.decide(calls) == LocalController().decide(calls)  # all from the fallback
            assert time.monotonic() - t0 < 1.0
            assert g.last_outcome is not None
            assert (g.last_outcome.source, g.last_outcome.reason) == ("fallback", reason)
            assert g.name == "local-fallback"
            assert servicer.streams == (2 if reason == "UNAVAILABLE" else 1)  # one retry
        with GrpcController(
            server.address, use_fallback=False, chunk_questions=4, timeout_s=0.2, retries=0
        ) as strict:
            with pytest.raises(RemoteControllerError, match=reason):
                strict.decide(routing_request() * 3)


def test_search_batch_with_a_stream_dying_mid_round_finishes_marked() -> None:
    server, servicer = stream_server(_dies_after_first)
    with server, GrpcController(server.address, chunk_questions=64, timeout_s=0.5) as g:
        m = Memory(HashEmbedder(64), controller=LocalController())
        fill(m)
        m.controller = g
        t0 = time.monotonic()
        rs = m.search_batch(QUERIES * 4)
        assert time.monotonic() - t0 < 5.0
        assert servicer.streams >= 1
        assert all(r.trace["controller"] == "local-fallback" for r in rs)
        assert evidence(rs) == evidence(local_memory().search_batch(QUERIES * 4))


def test_stream_survives_a_retry_after_unavailable() -> None:
    def flaky(
        i: int, request: cpb.DecideRequest, context: grpc.ServicerContext
    ) -> cpb.DecideResponse:
        if servicer.streams == 1 and i == 1:
            context.abort(grpc.StatusCode.UNAVAILABLE, "hiccup")
        return local_answers(request)

    server, servicer = stream_server(flaky)
    with server, GrpcController(server.address, chunk_questions=4, backoff_s=0.01) as g:
        calls = routing_request() * 3
        assert g.decide(calls) == LocalController().decide(calls)
        assert g.last_outcome is not None
        assert (g.last_outcome.source, g.last_outcome.attempts) == ("remote", 2)
        assert servicer.streams == 2 and g.counters["retries"] == 1


def test_an_error_producing_the_requests_is_raised_not_blamed_on_the_remote(
    local_server: RunningServer,
) -> None:
    def broken() -> Iterator[DecisionRequest]:
        yield from routing_request() * 3
        raise RuntimeError("bug in the caller")

    with GrpcController(local_server.address, chunk_questions=4) as g:
        with pytest.raises(RuntimeError, match="bug in the caller"):
            g.decide_stream(broken())
        assert g.counters["fallbacks"] == 0 and g.breaker.state == "closed"
        assert g.decide(routing_request() * 2) == LocalController().decide(routing_request() * 2)


def test_bad_chunk_mid_stream_gets_invalid_argument(local_server: RunningServer) -> None:
    good = requests_to_proto(routing_request())
    with grpc.insecure_channel(local_server.address) as ch:
        stub = cpb_grpc.SystemOneStub(ch)
        call = stub.DecideStream(iter([good, _bad_request("bad_json"), good]), timeout=5)
        got = []
        with pytest.raises(grpc.RpcError) as info:
            for response in call:
                got.append(response)
        assert len(got) == 1  # the good chunk before it was answered
        err = info.value
        assert isinstance(err, grpc.Call)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "requests[0].state_json is not valid JSON" in (err.details() or "")


def test_streams_need_the_bearer_token() -> None:
    with serve_controller(opts=ServerOptions(token="s3cret")) as server:
        calls = routing_request() * 2
        with GrpcController(server.address, use_fallback=False, chunk_questions=4) as anon:
            with pytest.raises(RemoteControllerError, match="UNAUTHENTICATED"):
                anon.decide(calls)
            assert anon.counters["streams"] == 1
        with GrpcController(
            server.address, use_fallback=False, chunk_questions=4, token="s3cret"
        ) as ok:
            assert ok.decide(calls) == LocalController().decide(calls)
            assert ok.counters["streams"] == 1


# ---- server limits: auth, bad requests, load shedding, health ----------------------------


def test_bearer_token_is_required() -> None:
    with serve_controller(opts=ServerOptions(token="s3cret")) as server:
        with GrpcController(server.address, use_fallback=False) as anon:
            with pytest.raises(RemoteControllerError, match="UNAUTHENTICATED"):
                anon.decide(routing_request())
        with GrpcController(server.address, use_fallback=False, token="wrong") as bad:
            with pytest.raises(RemoteControllerError, match="UNAUTHENTICATED"):
                bad.decide(routing_request())
        with GrpcController(server.address, use_fallback=False, token="s3cret") as ok:
            assert ok.decide(routing_request()) == LocalController().decide(routing_request())
        # health probes need no token
        assert health_status(server.address) == health_pb2.HealthCheckResponse.SERVING


def _raw_decide(address: str, request: cpb.DecideRequest) -> grpc.RpcError:
    with grpc.insecure_channel(address) as ch:
        with pytest.raises(grpc.RpcError) as info:
            cpb_grpc.SystemOneStub(ch).Decide(request, timeout=2)
    return info.value


def _bad_request(kind: str) -> cpb.DecideRequest:
    msg = requests_to_proto(routing_request())
    r, t = msg.requests[0], msg.templates[0]
    if kind == "empty_id":
        r.question_ids[0] = ""
    elif kind == "duplicate_id":
        r.question_ids.append(r.question_ids[0])
        r.question_templates.append(r.question_templates[0])
    elif kind == "bad_json":
        r.state_json = "{not json"
    elif kind == "not_object":
        r.state_json = "[1, 2]"
    elif kind == "no_spec":
        t.ClearField("noul")
    elif kind == "one_option":
        t.choice.options.add(label="only")
    elif kind == "unknown_kind":
        t.kind = "route.astrology"
    elif kind == "empty_kind":
        t.kind = ""
    elif kind == "empty_purpose":
        r.purpose = ""
    elif kind == "no_template":
        r.question_templates[0] = len(msg.templates)
    elif kind == "id_without_template":
        r.question_ids.append("orphan")
    elif kind == "template_without_id":
        r.question_templates.append(0)
    return msg


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("empty_id", "id is empty"),
        ("duplicate_id", "repeated"),
        ("bad_json", "not valid JSON"),
        ("not_object", "JSON object"),
        ("no_spec", "exactly one of noul or choice"),
        ("one_option", "at least two"),
        ("unknown_kind", "route.astrology"),
        ("empty_purpose", "purpose is empty"),
        ("empty_kind", "kind is empty"),
        ("no_template", "does not exist"),
        ("id_without_template", "exactly one template"),
        ("template_without_id", "exactly one template"),
    ],
)
def test_bad_requests_get_invalid_argument(
    local_server: RunningServer, kind: str, message: str
) -> None:
    err = _raw_decide(local_server.address, _bad_request(kind))
    assert isinstance(err, grpc.Call)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (err.details() or "")
    # the server (a thread of this process) holds the collector off while it
    # answers, and gives it back when the call is refused
    assert gc.isenabled()


class SlowLocal(LocalController):
    name = "slow-local"

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        time.sleep(0.3)
        return super().decide(requests)


def test_overload_is_shed_with_resource_exhausted() -> None:
    opts = ServerOptions(max_concurrent_rpcs=2, max_workers=4)
    with serve_controller(SlowLocal(), opts) as server:
        msg = requests_to_proto(routing_request())
        with grpc.insecure_channel(server.address) as ch:
            stub = cpb_grpc.SystemOneStub(ch)

            def call(_: int) -> str:
                try:
                    stub.Decide(msg, timeout=5)
                    return "OK"
                except grpc.RpcError as exc:
                    assert isinstance(exc, grpc.Call)
                    return exc.code().name

            with ThreadPoolExecutor(6) as pool:
                codes = list(pool.map(call, range(6)))
        assert codes.count("OK") >= 2
        assert "RESOURCE_EXHAUSTED" in codes
        assert set(codes) <= {"OK", "RESOURCE_EXHAUSTED"}


def test_server_validates_its_own_controller() -> None:
    class Broken:
        name = "broken"

        def decide(self, requests: Sequence[DecisionRequest]) -> list[dict[str, Answer]]:
            return [{q.id: NoulAnswer(2.0) for q in r.questions} for r in requests]

    with serve_controller(Broken()) as server:
        err = _raw_decide(server.address, requests_to_proto(routing_request()))
        assert isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.INTERNAL
        assert "invalid answers" in (err.details() or "")


def test_graceful_stop_turns_health_not_serving() -> None:
    server = serve_controller()
    assert health_status(server.address, "jevmem.v1.SystemOne") == 1
    server.health.enter_graceful_shutdown()
    assert health_status(server.address, "jevmem.v1.SystemOne") == 2  # NOT_SERVING
    server.stop(0.5)


def test_load_controller_specs() -> None:
    assert isinstance(load_controller("local"), LocalController)
    assert load_controller(f"{__name__}:SlowLocal").name == "slow-local"
    with pytest.raises(ValueError, match="module:Class"):
        load_controller("nonsense")
    with pytest.raises(TypeError, match="not a SystemOne"):
        load_controller("json:JSONDecoder")


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A throw-away certificate for localhost and 127.0.0.1, and its key."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@needs_openssl
def test_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    opts = ServerOptions(tls_cert=cert.read_bytes(), tls_key=key.read_bytes(), token="t")
    with serve_controller(opts=opts) as server:
        with GrpcController(
            f"localhost:{server.port}",
            use_fallback=False,
            root_certificates=cert.read_bytes(),
            token="t",
        ) as g:
            assert g.decide(routing_request()) == LocalController().decide(routing_request())
        with GrpcController(server.address, use_fallback=False, timeout_s=0.5) as plain:
            with pytest.raises(RemoteControllerError):
                plain.decide(routing_request())


# ---- the memory service ------------------------------------------------------------------


@pytest.fixture()
def memory_server() -> Iterator[tuple[RunningServer, MemoryClient]]:
    server, _ = serve_memory(
        opts=ServerOptions(token="tok"), factory=lambda _: Memory(HashEmbedder(64))
    )
    with server, MemoryClient(server.address, token="tok", timeout_s=10) as client:
        yield server, client


def test_memory_names_are_separate_namespaces(
    memory_server: tuple[RunningServer, MemoryClient],
) -> None:
    _, c = memory_server
    canary = {"alpha": "zebracanary alpha secret 1111", "beta": "quokkacanary beta secret 2222"}
    for name, text in canary.items():
        obs = [c.observation(t, timestamp=s) for t, s in zip(TEXTS, STAMPS, strict=True)]
        c.add_batch(name, [*obs, c.observation(text, speaker="Maya")])
    for name, text in canary.items():
        other = next(t for n, t in canary.items() if n != name)
        for query in (text, other):
            for mode in ("full", "lexical"):
                got = [e.text for e in c.search(name, query, k=50, mode=mode).evidence]
                assert text in got or query == other
                assert other not in got
        assert c.stats(name)["nodes"] == len(TEXTS) + 1
    for r in c.search_batch("alpha", ["zebracanary", "quokkacanary"], k=50):
        assert canary["beta"] not in [e.text for e in r.evidence]


def test_memory_service_round_trip(memory_server: tuple[RunningServer, MemoryClient]) -> None:
    _, c = memory_server
    i = c.add("m1", "Maya started cello lessons with Ines", speaker="Maya", timestamp=1_700_000_000)
    j = c.add("m1", "Lena flew to Lisbon last week", timestamp="2023-05-08")
    assert (i, j) == (0, 1)
    node = c.get("m1", i)
    assert node.text.startswith("Maya") and node.timestamp == 1_700_000_000
    assert node.provenance["speaker"] == "Maya" and len(node.types) == 4
    r = c.search("m1", "who teaches Maya cello?", k=5)
    assert r.evidence and r.evidence[0].id == i
    assert "stop_reason" in r.trace
    assert c.health("m1").status == mpb.MemoryHealthResponse.SERVING
    assert c.health("m1").nodes == 2
    assert c.health("nobody").status == mpb.MemoryHealthResponse.UNKNOWN_MEMORY
    # the service equals the library
    m = Memory(HashEmbedder(64))
    m.add("Maya started cello lessons with Ines", speaker="Maya", timestamp=1_700_000_000)
    m.add("Lena flew to Lisbon last week", timestamp="2023-05-08")
    assert evidence([m.search("who teaches Maya cello?", k=5)]) == evidence([r])


def test_scopes_filters_and_keys_through_the_memory_service(
    memory_server: tuple[RunningServer, MemoryClient],
) -> None:
    _, c = memory_server
    obs = [
        c.observation(
            f"Maya talked about cello lessons, canary{u}",
            timestamp=1_700_000_000 + i,
            scope={"user": u},
            metadata={"round": i, "weight": 0.5 * i, "odd": bool(i % 2), "who": u},
            key=f"msg-{i}",
        )
        for i, u in enumerate(["u1", "u2", "u1", "u2"])
    ]
    ids = c.add_batch("s", obs)
    assert c.add_batch("s", obs[:2]) == ids[:2]  # a retried batch stores nothing
    assert c.add("s", "a retry, another text", key="msg-3", scope={"user": "u2"}) == ids[3]
    assert c.stats("s")["nodes"] == 4
    # keys live in their scope: the same key unscoped is a write of its own
    assert c.add("s", "a global note", key="msg-3") == 4
    node = c.get("s", ids[1])
    assert dict(node.scope) == {"user": "u2"} and node.key == "msg-1"
    assert node.metadata == {"round": 1, "weight": 0.5, "odd": True, "who": "u2"}
    for mode in ("full", "lexical"):
        r = c.search("s", "cello lessons canaryu2", k=10, mode=mode, scope={"user": "u1"})
        assert {e.id for e in r.evidence} <= {ids[0], ids[2]} and r.evidence
        r = c.search("s", "cello lessons", k=10, mode=mode, filter={"round": {"$gte": 2}})
        assert {e.id for e in r.evidence} <= {ids[2], ids[3]} and r.evidence
    rs = c.search_batch("s", ["cello", "lessons"], mode="lexical", filter={"odd": True})
    assert all({e.id for e in r.evidence} <= {ids[1], ids[3]} for r in rs)
    # a bad filter: the client refuses it as in-process, the server too
    with pytest.raises(InvalidInputError, match="bogus"):
        c.search("s", "cello", filter={"round": {"$bogus": 1}})
    bogus = mpb.SearchOptions(filter_json='{"round": {"$bogus": 1}}')
    with pytest.raises(grpc.RpcError) as err:
        c.stub.Search(
            mpb.SearchRequest(memory="s", query="cello", options=bogus),
            timeout=5,
            metadata=c.metadata,
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    bad = mpb.SearchRequest(
        memory="s", query="cello", options=mpb.SearchOptions(filter_json="[1, 2")
    )
    with pytest.raises(grpc.RpcError) as err:
        c.stub.Search(bad, timeout=5, metadata=c.metadata)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


UPDATES = [
    ("I prefer oat milk in my coffee.", 1_700_000_000),
    ("The release went out on Monday without problems.", 1_700_086_400),
    ("I switched from oat milk to soy milk, oat got too sweet.", 1_700_172_800),
]


def test_supersedes_travels_through_the_remote_controller_and_the_memory_service(
    local_server: RunningServer, memory_server: tuple[RunningServer, MemoryClient]
) -> None:
    # the new question kind is one more string on the wire: a remote local
    # controller links the update as the in-process one does
    base = Memory(HashEmbedder(64))
    base.add_batch(
        [t for t, _ in UPDATES], timestamps=[s for _, s in UPDATES], speakers=["Maya"] * 3
    )
    assert base.superseded_by(0) == [2]
    with GrpcController(local_server.address, use_fallback=False) as g:
        remote = Memory(HashEmbedder(64), controller=g)
        remote.add_batch([t for t, _ in UPDATES], timestamps=[s for _, s in UPDATES], speakers=["Maya"] * 3)  # fmt: skip
        assert remote.store.to_bytes() == base.store.to_bytes()
        assert g.counters["fallbacks"] == 0
    # the memory service carries the links on its evidence
    _, c = memory_server
    for text, stamp in UPDATES:
        c.add("facts", text, speaker="Maya", timestamp=stamp)
    q = "What milk does Maya take now?"
    r = c.search("facts", q, k=5)
    want = base.search(q, k=5)
    assert [
        (e.id, e.supersedes, e.superseded_by, e.valid_from, e.valid_to) for e in r.evidence
    ] == [(e.id, e.supersedes, e.superseded_by, e.valid_from, e.valid_to) for e in want.evidence]
    assert r.evidence[0].id == 2 and r.evidence[0].supersedes == (0,)


class _SlowLocal(LearnedController):
    """The default (learned) controller, 20 ms slower per call: searches on one memory
    overlap, so concurrent calls find it busy and queue."""

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        time.sleep(0.02)
        return super().decide(requests)


def searched_at_once(served: Memory, queries: list[str]) -> list[Any]:
    """Each query searched on ``served`` through a server, all calls at once."""
    server, _ = serve_memory({"m": served})
    with server, MemoryClient(server.address, timeout_s=30) as c:
        start = threading.Barrier(len(queries))

        def one(q: str) -> Any:
            start.wait()
            return c.search("m", q, k=5)

        with ThreadPoolExecutor(len(queries)) as pool:
            return list(pool.map(one, queries))


def test_concurrent_searches_on_one_memory_run_together() -> None:
    queries = [f"{q} ({i})" for i in range(4) for q in QUERIES]  # 16 distinct queries
    served = Memory(HashEmbedder(64), controller=_SlowLocal())
    fill(served)
    reference = local_memory()
    alone = [reference.search(q, k=5) for q in queries]
    together = searched_at_once(served, queries)
    # the results of single searches, each to its own caller...
    assert evidence(together) == evidence(alone)
    assert [r.query for r in together] == queries
    # ...from fewer controller rounds than one search at a time needs
    assert served.calls["query"] < reference.calls["query"]


def test_searches_are_embedded_while_the_memory_answers_others() -> None:
    # the two stages of a memory's search queue overlap: queries that arrive
    # while the memory runs controller rounds are embedded meanwhile, and
    # together (one embedder call for all of them)
    deciding = threading.Event()
    decisions = [0]  # controller calls begun
    embedded: list[tuple[int, bool]] = []

    class Deciding(_SlowLocal):
        def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
            decisions[0] += 1
            deciding.set()
            try:
                return super().decide(requests)
            finally:
                deciding.clear()

    class Recording(HashEmbedder):
        """Takes 5 ms a call without the GIL, as a model's run does; notes
        whether a controller call ran meanwhile."""

        def embed(self, texts: Sequence[str]) -> Any:
            before = decisions[0], deciding.is_set()
            time.sleep(0.005)
            after = decisions[0], deciding.is_set()
            embedded.append((len(texts), before[1] or after[1] or before[0] != after[0]))
            return super().embed(texts)

    queries = [f"{q} ({i})" for i in range(4) for q in QUERIES]  # 16 distinct queries
    served = Memory(Recording(64), controller=Deciding())
    fill(served)
    alone = [local_memory().search(q, k=5) for q in queries]
    embedded.clear()
    together = searched_at_once(served, queries)
    assert evidence(together) == evidence(alone)
    assert sum(n for n, _ in embedded) == len(queries)  # each query embedded once
    assert len(embedded) < len(queries)  # in batches
    assert any(during for _, during in embedded)  # while the memory answered others


@pytest.fixture(scope="module")
def queued_server() -> Iterator[tuple[MemoryClient, Memory]]:
    """A served memory whose searches overlap (slow controller), and its in-process twin."""
    served = Memory(HashEmbedder(64), controller=_SlowLocal())
    fill(served)
    server, _ = serve_memory({"m": served})
    with server, MemoryClient(server.address, timeout_s=30) as c:
        yield c, local_memory()


@given(
    st.lists(
        st.tuples(
            st.sampled_from([*QUERIES, "Maya", "cello lessons in March"]),
            st.integers(1, 12),
            st.sampled_from(["", "full", "traversal", "anchors", "lexical"]),
        ),
        min_size=1,
        max_size=10,
    )
)
@settings(max_examples=15, deadline=None)
def test_queued_searches_equal_single_searches(
    queued_server: tuple[MemoryClient, Memory], calls: list[tuple[str, int, str]]
) -> None:
    # concurrent calls with mixed options share a queue; each gets what a
    # single in-process search with its own options gives
    c, reference = queued_server
    start = threading.Barrier(len(calls))

    def one(call: tuple[str, int, str]) -> Any:
        start.wait()
        q, k, mode = call
        return c.search("m", q, k=k, mode=mode)

    with ThreadPoolExecutor(len(calls)) as pool:
        got = list(pool.map(one, calls))
    want = [
        reference.search(q, k=k, mode=mode or "full")  # type: ignore[arg-type]
        for q, k, mode in calls
    ]
    assert evidence(got) == evidence(want)
    assert [r.sufficient for r in got] == [r.sufficient for r in want]


def test_a_bad_search_in_a_queue_fails_alone() -> None:
    served = Memory(HashEmbedder(64), controller=_SlowLocal())
    fill(served)
    server, _ = serve_memory({"m": served})
    with server, MemoryClient(server.address, timeout_s=30) as c:
        start = threading.Barrier(8)

        def one(i: int) -> Any:
            start.wait()
            mode = "psychic" if i % 2 else ""
            try:
                return c.search("m", QUERIES[i % len(QUERIES)], k=5, mode=mode)
            except grpc.RpcError as exc:
                return exc

        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(one, range(8)))
    reference = local_memory()
    for i, r in enumerate(got):
        if i % 2:
            assert isinstance(r, grpc.Call) and r.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "mode" in (r.details() or "")
        else:
            assert evidence([r]) == evidence([reference.search(QUERIES[i % len(QUERIES)], k=5)])


def _code(fn: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        fn()
    err = info.value
    assert isinstance(err, grpc.Call)
    return err.code(), err.details() or ""


def test_memory_service_bad_requests(memory_server: tuple[RunningServer, MemoryClient]) -> None:
    server, c = memory_server
    c.add("m", "Maya plays the cello")
    bad = grpc.StatusCode.INVALID_ARGUMENT
    no_rows, no_queries = mpb.AddBatchRequest(memory="m"), mpb.SearchBatchRequest(memory="m")
    over_k = mpb.SearchRequest(memory="m", query="cello", options=mpb.SearchOptions(k=10_001))
    cases: list[tuple[Callable[[], object], grpc.StatusCode, str]] = [
        (lambda: c.add("m", "   "), bad, "non-empty"),
        (lambda: c.add("bad name!", "x"), bad, "invalid"),
        (lambda: c.add("", "x"), bad, "invalid"),
        (lambda: c.add("m", "x", timestamp="not a date at all"), bad, "timestamp"),
        # empty batches, sent as built (the client answers [] itself)
        (lambda: c.stub.AddBatch(no_rows, timeout=5, metadata=c.metadata), bad, "at least one"),
        (lambda: c.stub.SearchBatch(no_queries, timeout=5, metadata=c.metadata), bad, "at least"),
        (lambda: c.search("m", ""), bad, "non-empty"),
        # past the in-process limit, sent as built (the client refuses it itself)
        (lambda: c.stub.Search(over_k, timeout=5, metadata=c.metadata), bad, "at most 10000"),
        (lambda: c.search("m", "cello", mode="psychic"), bad, "mode"),
        (lambda: c.search_batch("m", ["ok", " "]), bad, "queries[1]"),
        (lambda: c.search("nobody", "cello"), grpc.StatusCode.NOT_FOUND, "no memory"),
        (lambda: c.get("m", 99), grpc.StatusCode.NOT_FOUND, "no node 99"),
        (lambda: c.stats("nobody"), grpc.StatusCode.NOT_FOUND, "no memory"),
    ]
    for fn, code, text in cases:
        got_code, details = _code(fn)
        assert got_code == code, (text, details)
        assert text in details, (text, details)
    assert c.stats("m")["nodes"] == 1  # nothing bad was written
    with MemoryClient(server.address, timeout_s=5) as anon:
        code, _ = _code(lambda: anon.search("m", "cello"))
        assert code == grpc.StatusCode.UNAUTHENTICATED


def test_fixed_memory_server_never_creates() -> None:
    server, _ = serve_memory({"only": Memory(HashEmbedder(64))})
    with server, MemoryClient(server.address, timeout_s=5) as c:
        assert c.add("only", "Maya plays the cello") == 0
        code, details = _code(lambda: c.add("other", "x"))
        assert code == grpc.StatusCode.NOT_FOUND and "other" in details


@contextmanager
def serve_cli(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``jevmem serve --port 0 --embedder hash-64 ARGS`` in a process; its address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jevmem", "serve", "--port", "0", "--embedder", "hash-64", *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "jevmem serve did not start within 20 s"
        yield proc, proc.stdout.readline().rsplit(" ", 1)[1].strip()
    finally:
        proc.kill()
        proc.wait(5)


def test_serve_cli_memories_share_one_embedder(tmp_path: Path) -> None:
    # one ONNX session per memory cost ~75 MB and two threads each
    from jevmem.remote.cli import add_commands, hosted_memories

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    snap = tmp_path / "s.jvm"
    Memory(HashEmbedder(64)).save(snap)
    args = parser.parse_args(
        [
            "serve",
            "--embedder",
            "hash-64",
            "--memory",
            "a",
            "--memory",
            "b",
            "--memory",
            f"s={snap}",
        ]
    )
    memories, snapshots, factory = hosted_memories(args)
    assert factory is not None and snapshots == {"s": snap}
    made = factory("c")
    assert len({id(m.embedder) for m in [*memories.values(), made]}) == 1
    # separate memories all the same: nothing written to one is in another
    memories["a"].add("Maya plays the cello")
    assert len(memories["a"]) == 1 and len(memories["b"]) == 0 and len(made) == 0
    fixed = parser.parse_args(["serve", "--embedder", "hash-64", "--memory", "a", "--fixed"])
    assert hosted_memories(fixed)[2] is None
    with pytest.raises(SystemExit, match="max-search-batch"):
        hosted_memories(parser.parse_args(["serve", "--max-search-batch", "0"]))
    with pytest.raises(ValueError, match="max_search_batch"):
        serve_memory({}, max_search_batch=0)


def test_serve_cli_hosts_named_memories(tmp_path: Path) -> None:
    snap = tmp_path / "a.jvm"
    with serve_cli(
        "--memory", f"a={snap}", "--fixed", "--token-env", "JEVMEM_TEST_TOKEN", "--grace", "1",
        env={"JEVMEM_TEST_TOKEN": "tok"},
    ) as (proc, address):  # fmt: skip
        with MemoryClient(address, token="tok", timeout_s=10) as c:
            c.add("a", "Maya plays the cello")
            assert json.loads(json.dumps(c.stats("a")))["nodes"] == 1
            assert _code(lambda: c.add("b", "x"))[0] == grpc.StatusCode.NOT_FOUND
        proc.terminate()
        assert proc.wait(10) == 0
        assert snap.exists()  # saved on graceful shutdown


@needs_openssl
def test_memory_client_over_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    with serve_cli(
        "--tls-cert", str(cert), "--tls-key", str(key), "--token-env", "JEVMEM_TEST_TOKEN",
        "--grace", "0", env={"JEVMEM_TEST_TOKEN": "tok"},
    ) as (_, address):  # fmt: skip
        port = address.rsplit(":", 1)[1]
        for target in (address, f"localhost:{port}"):  # the certificate names both
            with MemoryClient(
                target, token="tok", timeout_s=10, root_certificates=cert.read_bytes()
            ) as c:
                c.add_batch("m", [c.observation(t, timestamp=s) for t, s in zip(TEXTS, STAMPS, strict=True)])  # fmt: skip
                assert c.search("m", "what does Maya play?", k=3).evidence
        with MemoryClient(
            f"127.0.0.1:{port}",
            token="tok",
            timeout_s=10,
            root_certificates=cert.read_bytes(),
            server_name="localhost",
        ) as c:
            assert c.stats("m")["nodes"] == 2 * len(TEXTS)
        with MemoryClient(address, token="tok", timeout_s=2) as plain:  # no TLS: refused
            code, _ = _code(lambda: plain.stats("m"))
            assert code == grpc.StatusCode.UNAVAILABLE


def test_serve_cli_with_a_remote_controller() -> None:
    with serve_controller() as controller:
        with serve_cli(
            "--controller", controller.address, "--memory", "a", "--grace", "0"
        ) as (_, address), MemoryClient(address, timeout_s=20) as c:  # fmt: skip
            obs = [
                c.observation(t, timestamp=s, speaker=t.split()[0])
                for t, s in zip(TEXTS, STAMPS, strict=True)
            ]
            c.add_batch("a", obs)
            c.add_batch("b", obs)  # created on first write, with its own remote controller
            for name in ("a", "b"):
                rs = c.search_batch(name, QUERIES)
                assert evidence(rs) == evidence(local_memory().search_batch(QUERIES))
                assert {r.trace["controller"] for r in rs} == {f"grpc:{DEFAULT_NAME}"}
                assert c.stats(name)["controller_calls_write"] > 0
            controller.stop()
            # the controller is gone: each query still finishes, answered locally and marked
            t0 = time.monotonic()
            r = c.search("a", QUERIES[0])
            assert time.monotonic() - t0 < 5.0
            assert r.trace["controller"] == "local-fallback"
            assert evidence([r]) == evidence([local_memory().search(QUERIES[0])])


def test_only_the_grpc_controllers_own_decide_is_trusted_to_have_checked_its_answers() -> None:
    from jevmem.remote import GrpcController

    class Custom(GrpcController):
        def decide(self, requests, *, budget_s=None):  # type: ignore[no-untyped-def]
            return super().decide(requests, budget_s=budget_s)

    plain = GrpcController.__new__(GrpcController)
    custom = Custom.__new__(Custom)
    assert plain.answers_validated is True
    assert custom.answers_validated is False


class ExitingLocal(LocalController):
    name = "exiting"

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Answer]]:
        raise SystemExit("the controller's backend went away")


def test_a_controller_that_exits_ends_the_call_with_internal() -> None:
    # grpcio answers nothing for an exception that is not an Exception: the
    # caller would wait to its deadline
    with serve_controller(ExitingLocal()) as server:
        msg = requests_to_proto(routing_request())
        with grpc.insecure_channel(server.address) as ch:
            stub = cpb_grpc.SystemOneStub(ch)
            t0 = time.monotonic()
            with pytest.raises(grpc.RpcError) as got:
                stub.Decide(msg, timeout=20)
            assert time.monotonic() - t0 < 10
            assert isinstance(got.value, grpc.Call)
            assert got.value.code() == grpc.StatusCode.INTERNAL
            assert "went away" in (got.value.details() or "")


class MisbehavingLocal(LocalController):
    """Answers of the wrong type, or its own KeyError, as ``fault`` says."""

    name = "misbehaving"
    fault = "generator"

    def decide(self, requests: Sequence[DecisionRequest]) -> Any:
        answers = super().decide(requests)
        if self.fault == "key_error":
            raise KeyError("its own bug")
        if self.fault == "generator":
            return (a for a in answers)
        # a value float() cannot take
        return [{qid: NoulAnswer("high") for qid in a} for a in answers]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("generator", "gave invalid answers"),
        ("not_a_number", "gave invalid answers"),
        ("key_error", "failed: KeyError"),
    ],
)
def test_unvalidated_bad_answers_and_controller_bugs_get_internal(fault: str, message: str) -> None:
    # only the local controller's "no answer for this kind" blames the caller
    # (test_bad_requests_get_invalid_argument); the controller's own faults,
    # and answers the encoding cannot take, are the server's
    from jevmem.errors import JevmemError, UnknownQuestionKindError

    assert issubclass(UnknownQuestionKindError, KeyError)  # caught as before
    assert issubclass(UnknownQuestionKindError, JevmemError)
    controller = MisbehavingLocal()
    controller.fault = fault
    with serve_controller(controller, ServerOptions(port=0), validate=False) as server:
        err = _raw_decide(server.address, requests_to_proto(routing_request()))
    assert isinstance(err, grpc.Call)
    assert err.code() == grpc.StatusCode.INTERNAL, err.details()
    assert message in (err.details() or "")

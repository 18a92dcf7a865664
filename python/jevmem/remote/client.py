"""``GrpcController``: a System-One controller that answers over gRPC.

Each ``decide`` is one RPC, so a ``search_batch`` round or an ``add_batch``
phase costs exactly one round trip. A call whose requests fit in one chunk
(``chunk_questions`` questions) is a unary ``SystemOne.Decide``; a larger one
is one ``DecideStream`` that sends its requests in chunks, so the server
decodes and answers chunk k while this side builds chunk k + 1 (and, through
``decide_stream``, while the caller is still producing the requests of the
later chunks). A server without ``DecideStream`` (UNIMPLEMENTED) is then
called with ``Decide`` only. The remote is never trusted:

* every call has a deadline, derived from the caller's remaining time budget
  when the caller passes one (``decide(requests, budget_s=...)``), else from
  ``timeout_s`` / ``call_budget_s``;
* only UNAVAILABLE is retried, with capped exponential backoff and jitter,
  and never past the deadline;
* answers are decoded strictly and checked with ``validate_answers``: a
  wrong-shaped, NaN or out-of-range answer is a failure, never used;
* a streamed call is all or nothing: a failure anywhere in it (a chunk's
  answers, the stream's status, fewer or more answer chunks than were sent)
  fails the whole call, which then falls back exactly as a unary call does;
  partial answers are never used;
* a failed call is answered by the fallback controller (the local one by
  default) and marked: while any call of the current batch fell back,
  :attr:`GrpcController.name` reads ``"local-fallback"``, which is what the
  memory writes into each query's trace;
* after ``breaker_failures`` consecutive failures a circuit breaker opens and
  calls go straight to the fallback for ``breaker_reset_s``; then one probe
  call is let through (half-open) and its outcome closes or reopens it.

With ``fallback=None`` a failure raises :class:`RemoteControllerError`
instead: an error, never a silent or hung call.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from jevmem._proto.jevmem.v1 import controller_pb2 as pb
from jevmem._proto.jevmem.v1 import controller_pb2_grpc as pb_grpc
from jevmem.controller import default_controller
from jevmem.controller.types import (
    Answer,
    ControllerError,
    DecisionRequest,
    SystemOne,
    validate_answers,
)
from jevmem.remote.convert import answers_from_proto, requests_to_proto

__all__ = ["CallOutcome", "CircuitBreaker", "GrpcController", "RemoteControllerError"]

FALLBACK_NAME = "local-fallback"
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class RemoteControllerError(ControllerError):
    """The remote controller failed (unreachable, too slow, bad answers) and no
    fallback was configured."""


class RemoteControllerWarning(RuntimeWarning):
    """The remote controller failed and the fallback answered instead."""


@dataclass(frozen=True)
class CallOutcome:
    """What happened to one ``decide`` call."""

    #: "remote" (answered by the server) or "fallback".
    source: str
    #: Why the remote was not used: "breaker_open", "no_budget", a gRPC status
    #: name ("UNAVAILABLE", "DEADLINE_EXCEEDED"...) or "invalid_answers".
    reason: str | None
    attempts: int
    elapsed_s: float
    detail: str = ""


class CircuitBreaker:
    """Consecutive-failure breaker: closed -> open -> half-open (one probe)."""

    def __init__(self, failures: int = 3, reset_s: float = 5.0) -> None:
        if failures < 1 or not reset_s > 0:
            raise ValueError("breaker_failures must be >= 1 and breaker_reset_s > 0")
        self.failures, self.reset_s = failures, reset_s
        self._lock = threading.Lock()
        self._consecutive = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        with self._lock:
            if self._opened_at is None:
                return "closed"
            if time.monotonic() - self._opened_at >= self.reset_s:
                return "half-open"
            return "open"

    def allow(self) -> bool:
        """May a call go to the remote now? (Claims the probe when half-open.)"""
        with self._lock:
            if self._opened_at is None:
                return True
            if time.monotonic() - self._opened_at < self.reset_s or self._probing:
                return False
            self._probing = True
            return True

    def success(self) -> None:
        with self._lock:
            self._consecutive, self._opened_at, self._probing = 0, None, False

    def failure(self) -> None:
        with self._lock:
            self._consecutive += 1
            if self._probing or self._consecutive >= self.failures:
                self._opened_at = time.monotonic()
            self._probing = False


class _Failure(Exception):
    def __init__(self, reason: str, detail: str, attempts: int = 0) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail, self.attempts = reason, detail, attempts


class _Unimplemented(Exception):
    """The server has no ``DecideStream``."""


class _Chunks:
    """A call's requests, pulled from ``source`` one chunk at a time.

    gRPC pulls the chunks of a stream from its own thread while the caller
    reads the answers, so everything here happens under one lock. Every
    request pulled is kept (:attr:`built`, so a failed call can be answered
    in full by the fallback), and every chunk keeps its encoded message (so a
    retried stream resends them without building them again). An exception
    from ``source`` on gRPC's thread is kept in :attr:`error` and raised in
    the caller's thread by :meth:`check`.
    """

    def __init__(self, source: Iterator[DecisionRequest], chunk_questions: int) -> None:
        self._source = source
        self._chunk_questions = chunk_questions
        self._lock = threading.Lock()
        self._ahead: DecisionRequest | None = None
        self.exhausted = False
        self.error: Exception | None = None
        self.built: list[DecisionRequest] = []
        self.chunks: list[list[DecisionRequest]] = []
        self.messages: list[pb.DecideRequest] = []
        #: seconds spent pulling requests from ``source`` and encoding chunks
        self.produce_s = self.encode_s = 0.0

    def _pull(self) -> DecisionRequest | None:
        if self._ahead is not None:
            r, self._ahead = self._ahead, None
            return r
        if self.exhausted:
            return None
        t0 = time.perf_counter()
        try:
            r = next(self._source)
        except StopIteration:
            self.exhausted = True
            return None
        finally:
            self.produce_s += time.perf_counter() - t0
        self.built.append(r)
        return r

    def _next_chunk(self) -> bool:
        chunk: list[DecisionRequest] = []
        n = 0
        while n < self._chunk_questions:
            r = self._pull()
            if r is None:
                break
            chunk.append(r)
            n += len(r.questions)
        if not chunk:
            return False
        t0 = time.perf_counter()
        self.messages.append(requests_to_proto(chunk))
        self.encode_s += time.perf_counter() - t0
        self.chunks.append(chunk)
        return True

    def first(self) -> bool:
        """Build the first chunk (False: there are no requests at all)."""
        with self._lock:
            return self._next_chunk()

    def more(self) -> bool:
        """Is there a request beyond the chunks built so far? (Pulls it ahead.)"""
        with self._lock:
            if self._ahead is None and not self.exhausted:
                self._ahead = self._pull()
            return self._ahead is not None

    def stream(self, on_end: Callable[[], None]) -> Iterator[pb.DecideRequest]:
        """The messages of one attempt: the chunks built so far, then new ones."""
        i = 0
        while True:
            with self._lock:
                if i == len(self.messages):
                    try:
                        if not self._next_chunk():
                            break
                    except Exception as exc:  # the caller's bug, not the remote's
                        self.error = exc
                        break
                msg = self.messages[i]
            i += 1
            yield msg
        on_end()

    def check(self) -> None:
        """Raise the exception ``source`` raised on gRPC's thread, if any."""
        if self.error is not None:
            raise self.error

    def drain(self) -> list[DecisionRequest]:
        """Every request of the call (pulling the rest of ``source``)."""
        self.check()
        with self._lock:
            while self._pull() is not None:
                pass
            return self.built


class GrpcController:
    """A :class:`~jevmem.controller.types.SystemOne` served by a remote ``SystemOne`` service.

    ``target`` is ``host:port``. ``token`` sends ``authorization: Bearer
    <token>``; ``root_certificates`` (PEM bytes) switches to TLS.
    """

    #: ``decide`` takes ``budget_s`` (the caller's remaining time) to derive its deadline.
    accepts_budget = True

    @property
    def answers_validated(self) -> bool:
        """Every answer ``decide`` returns, remote or fallback, has passed
        ``validate_answers`` against the same requests, so the memory need not
        check again; true only of this class's own ``decide`` methods (a
        subclass that overrides them is checked by the memory as usual)."""
        cls = type(self)
        return (
            cls.decide is GrpcController.decide
            and cls.decide_stream is GrpcController.decide_stream
        )

    def __init__(
        self,
        target: str,
        *,
        fallback: SystemOne | None = None,
        use_fallback: bool = True,
        timeout_s: float = 2.0,
        call_budget_s: float = 5.0,
        reserve_s: float = 0.25,
        retries: int = 2,
        backoff_s: float = 0.02,
        backoff_max_s: float = 0.5,
        breaker_failures: int = 3,
        breaker_reset_s: float = 5.0,
        token: str | None = None,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        history: int = 256,
        chunk_questions: int = 2048,
        stream: bool = True,
    ) -> None:
        for name, v in (
            ("timeout_s", timeout_s),
            ("call_budget_s", call_budget_s),
            ("backoff_max_s", backoff_max_s),
        ):
            if not v > 0:
                raise ValueError(f"{name} must be positive, got {v!r}")
        if retries < 0 or backoff_s < 0 or reserve_s < 0:
            raise ValueError("retries, backoff_s and reserve_s must be >= 0")
        if chunk_questions < 1:
            raise ValueError(f"chunk_questions must be >= 1, got {chunk_questions!r}")
        #: A chunk of a streamed call closes once it holds this many questions.
        self.chunk_questions = chunk_questions
        #: Send calls larger than one chunk as a ``DecideStream``; turned off
        #: for good when the server answers it with UNIMPLEMENTED.
        self.stream = stream
        self.target = target
        self.fallback: SystemOne | None = (
            (fallback if fallback is not None else default_controller()) if use_fallback else None
        )
        self.timeout_s, self.call_budget_s, self.reserve_s = timeout_s, call_budget_s, reserve_s
        self.retries, self.backoff_s, self.backoff_max_s = retries, backoff_s, backoff_max_s
        self.breaker = CircuitBreaker(breaker_failures, breaker_reset_s)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            # fail fast when the server is gone instead of waiting to reconnect
            ("grpc.initial_reconnect_backoff_ms", 50),
            ("grpc.min_reconnect_backoff_ms", 50),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        if root_certificates is not None:
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(target, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = pb_grpc.SystemOneStub(self._channel)
        self._lock = threading.Lock()
        self._batch_fell_back = False
        self._name_read = False
        self.remote_name: str | None = None
        self._label: str | None = None
        self.outcomes: deque[CallOutcome] = deque(maxlen=history)
        self._warned_fallback = False
        self.counters: Counter[str] = Counter()
        #: Seconds spent by remote calls, summed: "encode" (building the
        #: request), "call" (the RPC: network and the server's work, retries
        #: included; for a stream, its whole wall time, which overlaps the
        #: encoding and reading of its chunks and the caller producing its
        #: requests) and "decode" (reading and checking the answers).
        self.seconds: dict[str, float] = {"encode": 0.0, "call": 0.0, "decode": 0.0}

    # ---- the trace label ----------------------------------------------------

    @property
    def name(self) -> str:
        """``"local-fallback"`` if a call of the current batch fell back.

        A batch starts with the first ``decide`` after this name was read:
        ``Memory.search_batch`` reads it once per query after its last round,
        so every query of a batch that needed the fallback is marked.
        """
        with self._lock:
            self._name_read = True
            if self._batch_fell_back:
                return FALLBACK_NAME
        if self._label is not None:
            return self._label
        return f"grpc:{self.remote_name}" if self.remote_name else "grpc"

    @name.setter
    def name(self, value: str) -> None:
        """Override the label used while calls go to the remote (the fallback mark stays)."""
        self._label = value

    @property
    def last_outcome(self) -> CallOutcome | None:
        return self.outcomes[-1] if self.outcomes else None

    def stats(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "breaker": self.breaker.state,
            **dict(self.counters),
        }

    # ---- the protocol -------------------------------------------------------

    def decide(
        self, requests: Sequence[DecisionRequest], *, budget_s: float | None = None
    ) -> Sequence[Mapping[str, Answer]]:
        """Answer ``requests`` remotely, or by the fallback when that fails.

        ``budget_s`` is the caller's remaining time (e.g. the query's wall
        budget minus its elapsed time): the call, retries included, ends
        ``reserve_s`` before it, leaving time to fall back and finish.
        """
        return self.decide_stream(requests, budget_s=budget_s)

    def decide_stream(
        self, requests: Iterable[DecisionRequest], *, budget_s: float | None = None
    ) -> Sequence[Mapping[str, Answer]]:
        """``decide`` for requests that may be produced lazily, as the call sends them.

        ``requests`` is consumed as the chunks of the stream go out (on a gRPC
        thread, never concurrently), so the server answers the first chunks
        while the caller is still producing the later ones. The call is still
        all or nothing: every request is answered remotely or, when anything
        fails, every request by the fallback. An exception raised by
        ``requests`` propagates to the caller.
        """
        with self._lock:
            if self._name_read:
                self._name_read, self._batch_fell_back = False, False
        t0 = time.monotonic()
        chunks = _Chunks(iter(requests), self.chunk_questions if self.stream else 2**62)
        # The first chunk is built here: a call without requests costs nothing,
        # and one that fits in a chunk goes as a unary Decide.
        if not chunks.first():
            return []
        if budget_s is None:
            end = t0 + self.call_budget_s
        else:
            end = t0 + min(self.call_budget_s, budget_s - self.reserve_s)
        attempts = 0
        try:
            if end - t0 < 0.005:
                raise _Failure("no_budget", f"{max(0.0, end - t0) * 1000:.1f} ms left for the call")
            if not self.breaker.allow():
                raise _Failure("breaker_open", f"after repeated failures of {self.target}")
            try:
                answers: Sequence[Mapping[str, Answer]] | None = None
                if self.stream and chunks.more():
                    try:
                        answers, controller, attempts = self._stream_call(chunks, end)
                    except _Unimplemented:
                        self.stream = False
                        self.counters["stream_unimplemented"] += 1
                if answers is None:
                    answers, controller, attempts = self._unary(chunks, end, attempts)
            except _Failure:
                self.breaker.failure()
                raise
            except ControllerError as exc:
                self.breaker.failure()
                raise _Failure("invalid_answers", str(exc)) from None
            self.breaker.success()
            self.remote_name = controller or self.remote_name
            self._record(CallOutcome("remote", None, attempts, time.monotonic() - t0))
            return answers
        except _Failure as f:
            return self._fall_back(chunks.drain(), f, max(attempts, f.attempts), t0)

    def _unary(
        self, chunks: _Chunks, end: float, attempts_before: int
    ) -> tuple[Sequence[Mapping[str, Answer]], str, int]:
        """One ``Decide`` for every request (built in full here if not yet)."""
        t1 = time.perf_counter()
        requests = chunks.drain()
        message = (
            chunks.messages[0]
            if len(chunks.chunks[0]) == len(requests)
            else requests_to_proto(requests)
        )
        t2 = time.perf_counter()
        try:
            response, attempts = self._call(message, end)
        except _Failure as f:
            f.attempts += attempts_before
            raise
        t3 = time.perf_counter()
        answers = validate_answers(requests, answers_from_proto(response, requests))
        seconds = self.seconds
        seconds["encode"] += chunks.encode_s + t2 - t1
        seconds["call"] += t3 - t2
        seconds["decode"] += time.perf_counter() - t3
        return answers, response.controller, attempts_before + attempts

    def _stream_call(
        self, chunks: _Chunks, end: float
    ) -> tuple[Sequence[Mapping[str, Answer]], str, int]:
        """One ``DecideStream`` for the chunks of ``chunks``; retried on UNAVAILABLE only.

        Raises :class:`_Unimplemented` when the server has no such method,
        :class:`_Failure` or :class:`ControllerError` when the call fails.
        The stream's deadline is the call's end; besides, the server must
        have answered every chunk ``timeout_s`` after the last one was sent.
        """
        t_start = time.perf_counter()
        decode_s = 0.0
        attempt = 0
        while True:
            attempt += 1
            self.counters["rpcs"] += 1
            self.counters["streams"] += 1
            timeout = end - time.monotonic()
            if timeout <= 0.001:
                raise _Failure(
                    "DEADLINE_EXCEEDED", "the time budget ran out between retries", attempt - 1
                )
            expired = threading.Event()
            calls: list[grpc.RpcContext] = []

            def expire(
                expired: threading.Event = expired, calls: list[grpc.RpcContext] = calls
            ) -> None:
                expired.set()
                for c in calls:
                    c.cancel()

            timer = threading.Timer(self.timeout_s, expire)
            timer.daemon = True

            def on_end(
                timer: threading.Timer = timer, calls: list[grpc.RpcContext] = calls
            ) -> None:
                if chunks.error is not None:
                    for c in calls:
                        c.cancel()
                else:
                    timer.start()

            call = self._stub.DecideStream(
                chunks.stream(on_end),
                timeout=timeout,
                metadata=self._metadata,
                wait_for_ready=False,
            )
            calls.append(call)
            if expired.is_set() or chunks.error is not None:
                call.cancel()
            answers: list[Mapping[str, Answer]] = []
            controller = ""
            try:
                for i, response in enumerate(call):
                    if i >= len(chunks.chunks):
                        raise ControllerError(
                            f"more answer chunks than the {len(chunks.chunks)} chunks sent"
                        )
                    requests = chunks.chunks[i]
                    t0 = time.perf_counter()
                    got = validate_answers(requests, answers_from_proto(response, requests))
                    decode_s += time.perf_counter() - t0
                    answers.extend(got)
                    controller = response.controller or controller
            except grpc.RpcError as exc:
                timer.cancel()
                chunks.check()  # the caller's requests failed: raise that, not a remote failure
                code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
                detail = (exc.details() if isinstance(exc, grpc.Call) else str(exc)) or ""
                if expired.is_set():
                    code = grpc.StatusCode.DEADLINE_EXCEEDED
                    detail = f"no answer {self.timeout_s:.3g} s after the last chunk"
                if code == grpc.StatusCode.UNIMPLEMENTED:
                    raise _Unimplemented(detail) from None
                if code != grpc.StatusCode.UNAVAILABLE or attempt > self.retries:
                    raise _Failure(code.name, detail, attempt) from None
                pause = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
                pause *= 0.5 + random.random() / 2
                if time.monotonic() + pause >= end:
                    raise _Failure(code.name, detail, attempt) from None
                self.counters["retries"] += 1
                time.sleep(pause)
                continue
            except BaseException:
                call.cancel()
                raise
            finally:
                timer.cancel()
            chunks.check()
            if not chunks.exhausted or len(answers) != len(chunks.built):
                raise ControllerError(
                    f"the stream ended with answers to {len(answers)} of "
                    f"{len(chunks.built)}{'' if chunks.exhausted else '+'} requests"
                )
            self.counters["chunks"] += len(chunks.chunks)
            seconds = self.seconds
            seconds["encode"] += chunks.encode_s
            seconds["call"] += time.perf_counter() - t_start
            seconds["decode"] += decode_s
            return answers, controller, attempt

    def _call(self, message: pb.DecideRequest, end: float) -> tuple[pb.DecideResponse, int]:
        attempt = 0
        while True:
            attempt += 1
            self.counters["rpcs"] += 1
            timeout = min(self.timeout_s, end - time.monotonic())
            if timeout <= 0.001:
                raise _Failure(
                    "DEADLINE_EXCEEDED", "the time budget ran out between retries", attempt - 1
                )
            try:
                response: pb.DecideResponse = self._stub.Decide(
                    message, timeout=timeout, metadata=self._metadata, wait_for_ready=False
                )
                return response, attempt
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
                detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                if code != grpc.StatusCode.UNAVAILABLE or attempt > self.retries:
                    raise _Failure(code.name, detail or "", attempt) from None
                pause = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
                pause *= 0.5 + random.random() / 2
                if time.monotonic() + pause >= end:
                    raise _Failure(code.name, detail or "", attempt) from None
                self.counters["retries"] += 1
                time.sleep(pause)

    def _fall_back(
        self, requests: Sequence[DecisionRequest], f: _Failure, attempts: int, t0: float
    ) -> Sequence[Mapping[str, Answer]]:
        self.counters[f"failed_{f.reason}"] += 1
        if self.fallback is None:
            self._record(CallOutcome("error", f.reason, attempts, time.monotonic() - t0, f.detail))
            raise RemoteControllerError(
                f"remote controller {self.target} failed ({f.reason}): {f.detail}"
            )
        with self._lock:
            self._batch_fell_back = True
        answers = validate_answers(
            requests, self.fallback.decide(requests)
        )  # see answers_validated
        self.counters["fallbacks"] += 1
        self._record(CallOutcome("fallback", f.reason, attempts, time.monotonic() - t0, f.detail))
        return answers

    def _record(self, outcome: CallOutcome) -> None:
        self.outcomes.append(outcome)
        # A trace mark alone goes unseen: say at most once per outage, on stderr, that
        # the local controller is answering (again after the remote recovered).
        if outcome.source == "remote":
            self._warned_fallback = False
        elif outcome.source == "fallback" and not self._warned_fallback:
            self._warned_fallback = True
            warnings.warn(
                f"remote controller {self.target} failed ({outcome.reason}"
                f"{': ' + outcome.detail if outcome.detail else ''}); the local controller "
                "answers until it is back (traces say controller 'local-fallback')",
                RemoteControllerWarning,
                stacklevel=2,
            )

    # ---- lifetime -------------------------------------------------------------

    def wait_ready(self, timeout_s: float = 5.0) -> None:
        """Block until the channel is connected (raises ``grpc.FutureTimeoutError``)."""
        ready = grpc.channel_ready_future(self._channel)
        try:
            ready.result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            # unsubscribe its connectivity watch: one left on a channel that is
            # then closed can stall the process (grpc/grpc#25136)
            ready.cancel()
            raise

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> GrpcController:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

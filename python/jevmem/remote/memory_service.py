"""``jevmem.v1.MemoryService``: named memories over gRPC, and a thin client.

Each name is its own :class:`~jevmem.memory.Memory`: separate store, indexes
and controller counters, so nothing written under one name can be found
under another. Calls on one memory are serialised by its own lock; calls on
different memories run in parallel (up to the server's concurrency cap).
Search calls go through the memory's two-stage queue
(`jevmem.plane.search_queue`): the queries that arrived are embedded
together while the memory answers earlier ones (outside its lock), and the
next call to get the memory runs all the embedded ones as one
``search_batch``.

Admission. A waiting call holds a worker thread (the sync gRPC server has
no other way to wait), so a busy memory could hold every thread and leave
calls on other memories queued behind it. Two rules stop that: each memory
admits at most ``max_calls_per_memory`` calls at a time (running or
waiting; one more is refused at once with RESOURCE_EXHAUSTED, never
queued), and `serve_memory` gives the server one thread per call it admits
(``max_concurrent_rpcs``), so an admitted call never waits for a thread,
only for its own memory.

Limits, checked first in every handler, before any other work: an
observation's text (and a query) at most ``max_text_bytes`` UTF-8 bytes
(default :data:`MAX_TEXT_BYTES`, the memory's own default limit), a whole
request at most ``max_request_bytes`` serialised (default
:data:`MAX_REQUEST_BYTES`); the server's receive cap is set to the latter,
so gRPC refuses a larger message (RESOURCE_EXHAUSTED) before decoding it.

Access. With tokens (`TokenAccess`), a call may touch only the memories
its token names (PERMISSION_DENIED otherwise, before the name is looked up,
so a denied caller cannot learn which memories exist).

The client (`MemoryClient`, `MemoryServiceError`, `RemoteAnswer`) lives in
:mod:`jevmem.remote.memory_client` and the proto conversions in
:mod:`jevmem.remote.memory_convert`; the client's names are re-exported here.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

import grpc
import numpy as np
import numpy.typing as npt

from jevmem import _validate, answering, errors
from jevmem._core import DEFAULT_MAX_TEXT_BYTES, MemoryStore
from jevmem._proto.jevmem.v1 import memory_pb2 as pb
from jevmem._proto.jevmem.v1 import memory_pb2_grpc as pb_grpc
from jevmem.embed import embed_checked
from jevmem.errors import InvalidConfigError, JevmemError, SystemTwoError, SystemTwoHTTPError
from jevmem.memory import Memory, SearchResult
from jevmem.plane.search_queue import Pending, SearchQueue
from jevmem.remote.memory_client import ERROR_KEY, REMOTE_ERRORS, MemoryClient, RemoteAnswer
from jevmem.remote.memory_client import MemoryServiceError as MemoryServiceError  # re-export
from jevmem.remote.memory_client import RemoteNode as RemoteNode  # re-export
from jevmem.remote.memory_convert import meta_to_proto, result_to_proto
from jevmem.remote.server import RunningServer, ServerOptions, TokenAccess, start_server
from jevmem.system_two import SystemTwo

__all__ = [
    "MAX_REQUEST_BYTES",
    "MAX_TEXT_BYTES",
    "MEMORY_SERVICE",
    "NAME_RULE",
    "MemoryClient",
    "MemoryServicer",
    "RemoteAnswer",
    "RemoteNode",
    "serve_memory",
    "valid_memory_name",
]

MEMORY_SERVICE = "jevmem.v1.MemoryService"
log = logging.getLogger("jevmem.remote")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: The rule every memory name follows (it is also a safe directory name under --data-dir).
NAME_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
#: Largest ``k`` a search may ask for: the in-process limit.
MAX_K = _validate.MAX_K
#: How often a call waiting for its memory looks whether it was cancelled, in seconds.
_CALLER_CHECK_S = 0.5
#: Largest observation text (and query) a call may carry, in UTF-8 bytes.
MAX_TEXT_BYTES = DEFAULT_MAX_TEXT_BYTES
#: Largest request, serialised: four observations at the text limit, plus room for metadata.
MAX_REQUEST_BYTES = 4 * MAX_TEXT_BYTES + (1 << 20)


def valid_memory_name(name: str) -> bool:
    """Whether ``name`` follows :data:`NAME_RULE`, as every call's memory name must."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _name_error(context: grpc.ServicerContext, exc: BaseException) -> None:
    """Name the memory's own error a call ends with in the trailing metadata
    (`ERROR_KEY`), so `MemoryClient` raises one of that type too."""
    name = type(exc).__name__
    if name in REMOTE_ERRORS and type(exc) is getattr(errors, name):
        context.set_trailing_metadata(((ERROR_KEY, name),))


def _bad(message: str) -> NoReturn:
    raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, message)


def _check_text(text: str, where: str, limit: int) -> None:
    """Refuse a text over ``limit`` UTF-8 bytes without reading more of it than needed."""
    # a character is 1 to 4 bytes: the length alone often decides
    if len(text) > limit or (len(text) * 4 > limit and len(text.encode("utf-8")) > limit):
        _bad(f"{where} is over {limit} UTF-8 bytes, the limit per text")


def _obs_kwargs(o: pb.Observation, where: str) -> dict[str, Any]:
    if not o.text.strip():
        _bad(f"{where}.text must be non-empty")
    which = o.WhichOneof("time")
    ts: int | str | None = (
        o.unix_seconds if which == "unix_seconds" else o.time_text if which == "time_text" else None
    )
    return {
        "text": o.text,
        "timestamp": ts,
        "speaker": o.speaker or None,
        "provenance": dict(o.provenance),
        "entities": list(o.entities) or None,
        "scope": dict(o.scope) or None,
        "metadata": {k: _meta_value(v, f"{where}.metadata[{k!r}]") for k, v in o.metadata.items()}
        or None,
        "key": o.key or None,
    }


def _meta_value(v: pb.MetaValue, where: str) -> str | int | float | bool:
    which = v.WhichOneof("kind")
    if which is None:
        _bad(f"{where} has no value")
    out: str | int | float | bool = getattr(v, which)
    return out


def _check_caller(context: grpc.ServicerContext) -> None:
    """Refuse a call whose deadline has passed or whose caller cancelled it."""
    if context.time_remaining() <= 0:
        raise _Abort(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            "the deadline passed while the call waited for the memory: nothing was done",
        )
    if not context.is_active():
        raise _Abort(grpc.StatusCode.CANCELLED, "the caller went away: nothing was done")


@contextmanager
def _turn(lock: threading.Lock, context: grpc.ServicerContext) -> Iterator[None]:
    """Hold a memory's lock. The wait ends at the caller's deadline, and
    looks every `_CALLER_CHECK_S` whether the caller cancelled, so a call
    nobody waits for gives back its admission instead of holding it."""
    while not lock.acquire(timeout=min(max(context.time_remaining(), 0.0), _CALLER_CHECK_S)):
        _check_caller(context)
    try:
        yield
    finally:
        lock.release()


def _to_ts(now: int | str) -> int | None:
    return _validate.timestamp(now, "now")


class _SearchQueue:
    """Concurrent Search calls on one memory, answered together: the two
    overlapping stages of `jevmem.plane.search_queue` (queries embedded
    together while the memory answers earlier ones, then each options group
    run as one ``search_batch`` on those vectors), under the memory's lock.
    A call whose client has gone is dropped before it costs anything."""

    def __init__(self, max_batch: int) -> None:
        self._queue = SearchQueue(max_batch)

    def search(
        self,
        memory: Memory,
        memory_lock: threading.Lock,
        query: str,
        opts: Mapping[str, Any],
        context: grpc.ServicerContext,
    ) -> SearchResult:
        k, now, mode = opts["k"], opts["now"], opts["mode"]
        scope = dict(opts["scope_key"]) or None
        filter_json = opts["filter_json"]

        def run(queries: list[str], vectors: npt.NDArray[np.float32]) -> list[SearchResult]:
            return memory.search_batch(
                queries,
                k,
                now=now,
                mode=mode,
                scope=scope,
                filter=None if not filter_json else json.loads(filter_json),
                embeddings=vectors,
            )

        me = Pending(
            query,
            (k, now, mode, opts["scope_key"], filter_json),
            run,
            alive=context.is_active,
            gone=lambda: _Abort(grpc.StatusCode.CANCELLED, "the caller went away"),
        )
        return self._queue.search(
            lambda texts: embed_checked(memory.embedder, texts, memory.store.dim), memory_lock, me
        )


class MemoryServicer(pb_grpc.MemoryServiceServicer):
    """Hosts named memories; ``factory(name)`` makes a new one on first write.

    A first write that fails after its checks (the embedder or the disk
    failing, say) leaves no memory behind: the memory made for it, still
    empty, is taken away again and handed to ``discard(name, memory)``
    (default: ``memory.close()``), which may also remove what the factory
    made on disk.
    """

    def __init__(
        self,
        memories: Mapping[str, Memory] | None = None,
        *,
        factory: Callable[[str], Memory] | None = None,
        discard: Callable[[str, Memory], None] | None = None,
        max_memories: int = 1024,
        max_search_batch: int = 256,
        max_calls_per_memory: int = 16,
        max_text_bytes: int = MAX_TEXT_BYTES,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        access: TokenAccess | None = None,
        system_two: SystemTwo | None = None,
    ) -> None:
        if max_search_batch < 1:
            raise InvalidConfigError(f"max_search_batch must be >= 1, got {max_search_batch}")
        if max_calls_per_memory < 1 or max_text_bytes < 1 or max_request_bytes < 1024:
            raise InvalidConfigError(
                "max_calls_per_memory (default: max_workers) and max_text_bytes must be >= 1, "
                "max_request_bytes >= 1024"
            )
        self.max_calls_per_memory = max_calls_per_memory
        self.max_text_bytes = max_text_bytes
        # an empty store (no nodes, no files) that checks every write's
        # scopes, metadata and keys as each memory's own store does
        self._attribute_checks = MemoryStore(1, max_text_bytes=max_text_bytes)
        self.max_request_bytes = max_request_bytes
        self._access = access
        self._admission: dict[str, threading.BoundedSemaphore] = {}
        self._max_search_batch = max_search_batch
        self._memories: dict[str, Memory] = dict(memories or {})
        self._locks: dict[str, threading.Lock] = {n: threading.Lock() for n in self._memories}
        self._queues: dict[str, _SearchQueue] = {}
        self._factory = factory
        self._discard = discard
        self._max = max_memories
        self._registry = threading.Lock()
        #: the model of Answer calls (None: the memory's own, else one from
        #: the environment, made on the first Answer)
        self.system_two = system_two

    @property
    def memories(self) -> dict[str, Memory]:
        return dict(self._memories)

    @contextmanager
    def _memory(
        self, name: str, context: grpc.ServicerContext, *, create: bool = False
    ) -> Iterator[Memory]:
        """The memory ``name``, under its lock; a call that made it and fails
        while it is still empty takes it away again (`_unmake`)."""
        while True:
            with self._admitted(name, context, create=create) as (m, lock, _, made):
                with _turn(lock, context):
                    if self._memories.get(name) is not m:
                        continue  # taken away after a failed first write: look again
                    try:
                        # a caller gone while this call waited must not find
                        # its write applied (its retry would store it again)
                        _check_caller(context)
                        yield m
                    except BaseException:
                        if made and len(m) == 0:
                            self._unmake(name, m)
                        raise
                    return

    def _unmake(self, name: str, m: Memory) -> None:
        """Take away a memory its first write failed on (calls waiting for it
        look the name up again), and discard it."""
        with self._registry:
            if self._memories.get(name) is m:
                del self._memories[name]
                self._queues.pop(name, None)
        try:
            if self._discard is not None:
                self._discard(name, m)
            else:
                m.close()
        except Exception:  # the write's own error is the one the caller gets
            log.exception("discarding memory %r after its first write failed", name)

    def _check_request(self, request: Any) -> None:
        """The whole-request size limit, for calls that did not come through a capped server."""
        size = request.ByteSize()
        if size > self.max_request_bytes:
            raise _Abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"request is {size} bytes, the limit is {self.max_request_bytes}",
            )

    def _authorize(self, name: str, context: grpc.ServicerContext) -> None:
        if self._access is not None and not self._access.allows(TokenAccess.header(context), name):
            raise _Abort(
                grpc.StatusCode.PERMISSION_DENIED, f"this token does not open memory {name!r:.140}"
            )

    @contextmanager
    def _admitted(
        self, name: str, context: grpc.ServicerContext, *, create: bool = False
    ) -> Iterator[tuple[Memory, threading.Lock, _SearchQueue, bool]]:
        """The memory, its lock and queue, and whether this call made it,
        while this call holds one of its admissions."""
        self._authorize(name, context)
        m, lock, queue, made = self._lookup(name, create=create)
        with self._registry:
            gate = self._admission.get(name)
            if gate is None:
                gate = self._admission[name] = threading.BoundedSemaphore(self.max_calls_per_memory)
        if not gate.acquire(blocking=False):
            raise _Abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"memory {name!r} is busy: it already has {self.max_calls_per_memory} calls "
                "running or waiting, the limit; retry later",
            )
        try:
            yield m, lock, queue, made
        finally:
            gate.release()

    def _lookup(
        self, name: str, *, create: bool = False
    ) -> tuple[Memory, threading.Lock, _SearchQueue, bool]:
        """The memory called ``name``, its lock, its queue of searches and
        whether it was made now."""
        if not valid_memory_name(name):
            _bad(f"memory name {name!r:.140} is invalid: use {NAME_RULE}")
        made = False
        with self._registry:
            m = self._memories.get(name)
            if m is None:
                if not create or self._factory is None:
                    raise _Abort(grpc.StatusCode.NOT_FOUND, f"no memory named {name!r}")
                if len(self._memories) >= self._max:
                    raise _Abort(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"this server holds its maximum of {self._max} memories",
                    )
                m = self._memories[name] = self._factory(name)
                self._locks[name] = threading.Lock()
                made = True
            lock = self._locks[name]
            queue = self._queues.get(name)
            if queue is None:
                queue = self._queues[name] = _SearchQueue(self._max_search_batch)
        return m, lock, queue, made

    def _check_rows(self, rows: list[dict[str, Any]]) -> None:
        """Every observation of a write, checked by `Memory.add_batch`'s own
        rules before the memory is looked up: a refused write to a new name
        creates nothing (no memory, no directory, no slot of ``max_memories``).

        Run for every write, not only a first one: refusing only writes to
        names that do not exist would tell a caller without access which do.
        """
        _validate.add_batch_args(
            [r["text"] for r in rows],
            [r["timestamp"] for r in rows],
            [r["speaker"] for r in rows],
            [r["provenance"] for r in rows],
            [r["entities"] for r in rows],
            None,
            dim=1,
            max_text_bytes=self.max_text_bytes,
        )
        # scopes, metadata and keys are the core's to check
        self._attribute_checks.check_attributes(
            len(rows),
            scopes=[r["scope"] for r in rows],
            metadatas=[r["metadata"] for r in rows],
            keys=[r["key"] for r in rows],
        )

    def _run(self, context: grpc.ServicerContext, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except _Abort as exc:
            context.abort(exc.code, exc.message)
        except KeyError as exc:  # NodeNotFoundError included
            _name_error(context, exc)
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc.args[0] if exc.args else exc))
        except (ValueError, TypeError) as exc:  # InvalidInputError and friends
            _name_error(context, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{type(exc).__name__}: {exc}")
        except JevmemError as exc:
            _name_error(context, exc)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{type(exc).__name__}: {exc}")
        except BaseException as exc:  # SystemExit included: never leave a call hanging
            # grpcio answers nothing for an exception its handler lets out
            # that is not an Exception: the caller would wait to its deadline
            log.exception("a MemoryService call failed")
            what = exc.code if isinstance(exc, SystemExit) else exc
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {what}")

    # ---- writes -----------------------------------------------------------------

    def Add(self, request: pb.AddRequest, context: grpc.ServicerContext) -> pb.AddResponse:
        def go() -> pb.AddResponse:
            self._check_request(request)
            if not request.HasField("observation"):
                _bad("observation is required")
            _check_text(request.observation.text, "observation.text", self.max_text_bytes)
            kw = _obs_kwargs(request.observation, "observation")
            self._check_rows([kw])
            with self._memory(request.memory, context, create=True) as m:
                text = kw.pop("text")
                return pb.AddResponse(id=m.add(text, **kw))

        result: pb.AddResponse = self._run(context, go)
        return result

    def AddBatch(
        self, request: pb.AddBatchRequest, context: grpc.ServicerContext
    ) -> pb.AddBatchResponse:
        def go() -> pb.AddBatchResponse:
            self._check_request(request)
            if not request.observations:
                _bad("observations is empty: send at least one")
            for i, o in enumerate(request.observations):
                _check_text(o.text, f"observations[{i}].text", self.max_text_bytes)
            rows = [
                _obs_kwargs(o, f"observations[{i}]") for i, o in enumerate(request.observations)
            ]
            self._check_rows(rows)
            with self._memory(request.memory, context, create=True) as m:
                ids = m.add_batch(
                    [r["text"] for r in rows],
                    timestamps=[r["timestamp"] for r in rows],
                    speakers=[r["speaker"] for r in rows],
                    provenances=[r["provenance"] for r in rows],
                    entities=[r["entities"] for r in rows],
                    scopes=[r["scope"] for r in rows],
                    metadatas=[r["metadata"] for r in rows],
                    keys=[r["key"] for r in rows],
                )
            return pb.AddBatchResponse(ids=ids)

        result: pb.AddBatchResponse = self._run(context, go)
        return result

    # ---- reads ------------------------------------------------------------------

    @staticmethod
    def _options(o: pb.SearchOptions) -> dict[str, Any]:
        k = o.k or 10
        if k > MAX_K:
            _bad(f"options.k must be at most {MAX_K}, got {k}")
        which = o.WhichOneof("now")
        now = (
            o.now_unix_seconds
            if which == "now_unix_seconds"
            else o.now_text
            if which == "now_text"
            else None
        )
        # read now, before any other work (an Answer would otherwise look for
        # its model first): refused as in-process, INVALID_ARGUMENT
        now = None if now is None else _to_ts(now)
        flt = None
        if o.filter_json:
            try:
                flt = json.loads(o.filter_json)
            except (ValueError, RecursionError) as exc:
                _bad(f"options.filter_json is not JSON: {exc}")
            if not isinstance(flt, dict):
                _bad("options.filter_json must be a JSON object")
        return {
            "k": k,
            "mode": o.mode or "full",
            "now": now,
            "scope": dict(o.scope) or None,
            # hashable forms, to group waiting searches by
            "scope_key": tuple(sorted(o.scope.items())),
            "filter_json": o.filter_json,
            "filter": flt,
        }

    def Search(self, request: pb.SearchRequest, context: grpc.ServicerContext) -> pb.SearchResponse:
        def go() -> pb.SearchResponse:
            self._check_request(request)
            _check_text(request.query, "query", self.max_text_bytes)
            if not request.query.strip():
                _bad("query must be non-empty")
            opts = self._options(request.options)
            with self._admitted(request.memory, context) as (m, lock, queue, _):
                r = queue.search(m, lock, request.query, opts, context)
            return pb.SearchResponse(result=result_to_proto(r))

        result: pb.SearchResponse = self._run(context, go)
        return result

    def SearchBatch(
        self, request: pb.SearchBatchRequest, context: grpc.ServicerContext
    ) -> pb.SearchBatchResponse:
        def go() -> pb.SearchBatchResponse:
            self._check_request(request)
            if not request.queries:
                _bad("queries is empty: send at least one")
            for i, q in enumerate(request.queries):
                _check_text(q, f"queries[{i}]", self.max_text_bytes)
                if not q.strip():
                    _bad(f"queries[{i}] must be non-empty")
            opts = self._options(request.options)
            with self._memory(request.memory, context) as m:
                rs = m.search_batch(
                    list(request.queries),
                    opts["k"],
                    now=opts["now"],
                    mode=opts["mode"],
                    scope=opts["scope"],
                    filter=opts["filter"],
                )
            return pb.SearchBatchResponse(results=[result_to_proto(r) for r in rs])

        result: pb.SearchBatchResponse = self._run(context, go)
        return result

    def _answerer(self, m: Memory) -> SystemTwo:
        chosen = self.system_two or m.system_two
        if chosen is None:
            from jevmem.system_two import ChatCompletionsClient

            try:
                chosen = ChatCompletionsClient()
            except InvalidConfigError as exc:
                raise _Abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"this server has no System-Two model: {exc}",
                ) from None
            with self._registry:
                self.system_two = self.system_two or chosen
        return chosen

    def Answer(self, request: pb.AnswerRequest, context: grpc.ServicerContext) -> pb.AnswerResponse:
        def go() -> pb.AnswerResponse:
            self._check_request(request)
            _check_text(request.query, "query", self.max_text_bytes)
            if not request.query.strip():
                _bad("query must be non-empty")
            opts = self._options(request.options)
            abstain = request.abstain if request.HasField("abstain") else True
            below = (
                request.abstain_below
                if request.HasField("abstain_below")
                else answering.DEFAULT_ABSTAIN_BELOW
            )
            if not 0.0 <= below <= 1.0:  # NaN included
                _bad(f"abstain_below must be in [0, 1], got {below}")
            # the search takes its turn on the memory; the model call does not hold it
            with self._admitted(request.memory, context) as (m, lock, queue, _):
                client = self._answerer(m)
                r = queue.search(m, lock, request.query, opts, context)
            now_ts = None if opts["now"] is None else _to_ts(opts["now"])
            prepared = answering.prepare(r, abstain=abstain, abstain_below=below, now_ts=now_ts)
            try:
                (a,) = answering.generate([prepared], client, 1)
            except SystemTwoHTTPError as exc:
                if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
                    raise _Abort(
                        grpc.StatusCode.FAILED_PRECONDITION, f"the model refused: {exc}"
                    ) from None
                raise _Abort(grpc.StatusCode.UNAVAILABLE, f"the model failed: {exc}") from None
            except SystemTwoError as exc:
                raise _Abort(
                    grpc.StatusCode.UNAVAILABLE, f"the model failed: {type(exc).__name__}: {exc}"
                ) from None
            return pb.AnswerResponse(
                text=a.text,
                cited=a.cited,
                abstained=a.abstained,
                result=result_to_proto(a.search),
                trace_json=json.dumps(a.trace, default=str, separators=(",", ":")),
            )

        result: pb.AnswerResponse = self._run(context, go)
        return result

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetResponse:
        def go() -> pb.GetResponse:
            with self._memory(request.memory, context) as m:
                if request.id not in m:
                    # as `Memory.get` raises it (NOT_FOUND, named to the client)
                    raise errors.NodeNotFoundError(
                        f"memory {request.memory!r} has no node {request.id}"
                    )
                n = m.get(request.id)
            node = pb.Node(
                id=n.id,
                text=n.text,
                provenance=n.provenance,
                entities=n.entities,
                types=[float(t) for t in n.types],
                scope=n.scope,
                metadata={k: meta_to_proto(v) for k, v in n.metadata.items()},
                key=n.key or "",
            )
            if n.timestamp is not None:
                node.timestamp = n.timestamp
            return pb.GetResponse(node=node)

        result: pb.GetResponse = self._run(context, go)
        return result

    def Stats(self, request: pb.StatsRequest, context: grpc.ServicerContext) -> pb.StatsResponse:
        def go() -> pb.StatsResponse:
            with self._memory(request.memory, context) as m:
                s = m.stats()
            return pb.StatsResponse(stats_json=json.dumps(s, default=str))

        result: pb.StatsResponse = self._run(context, go)
        return result

    def Health(
        self, request: pb.MemoryHealthRequest, context: grpc.ServicerContext
    ) -> pb.MemoryHealthResponse:
        def go() -> pb.MemoryHealthResponse:
            if not valid_memory_name(request.memory):
                _bad(f"memory name {request.memory!r:.140} is invalid")
            self._authorize(request.memory, context)
            m = self._memories.get(request.memory)
            if m is None:
                return pb.MemoryHealthResponse(status=pb.MemoryHealthResponse.UNKNOWN_MEMORY)
            return pb.MemoryHealthResponse(status=pb.MemoryHealthResponse.SERVING, nodes=len(m))

        result: pb.MemoryHealthResponse = self._run(context, go)
        return result


def serve_memory(
    memories: Mapping[str, Memory] | None = None,
    opts: ServerOptions | None = None,
    *,
    factory: Callable[[str], Memory] | None = None,
    discard: Callable[[str, Memory], None] | None = None,
    max_memories: int = 1024,
    max_search_batch: int = 256,
    max_calls_per_memory: int | None = None,
    max_text_bytes: int = MAX_TEXT_BYTES,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    system_two: SystemTwo | None = None,
) -> tuple[RunningServer, MemoryServicer]:
    """Start a ``jevmem.v1.MemoryService``; with a ``factory``, names are created on first write
    (and handed to ``discard`` when that write fails: see `MemoryServicer`).

    Concurrent Search calls on one memory run together, as one
    ``search_batch`` of at most ``max_search_batch`` queries (1: each alone).
    One memory admits at most ``max_calls_per_memory`` calls at once
    (default ``opts.max_workers``), and the server runs one thread per call
    it admits (``opts.max_concurrent_rpcs``; see the module docs).
    Answer calls use ``system_two`` (default: each memory's own, else a
    client from the JEVMEM_S2_* environment).
    """
    opts = opts or ServerOptions()
    servicer = MemoryServicer(
        memories,
        factory=factory,
        discard=discard,
        max_memories=max_memories,
        max_search_batch=max_search_batch,
        max_calls_per_memory=max_calls_per_memory or opts.max_workers,
        max_text_bytes=max_text_bytes,
        max_request_bytes=max_request_bytes,
        access=TokenAccess.from_options(opts),
        system_two=system_two,
    )

    def register(server: grpc.Server) -> list[str]:
        pb_grpc.add_MemoryServiceServicer_to_server(servicer, server)
        return [MEMORY_SERVICE]

    server_opts = dataclasses.replace(
        opts,
        # every admitted call has a thread: it waits only for its own memory
        max_workers=max(opts.max_workers, opts.max_concurrent_rpcs),
        max_receive_message_bytes=opts.max_receive_message_bytes or max_request_bytes,
    )
    return start_server(register, server_opts), servicer

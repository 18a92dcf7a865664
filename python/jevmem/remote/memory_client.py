"""The client side of ``jevmem.v1.MemoryService``: `MemoryClient` and its results and errors.

Re-exported by :mod:`jevmem.remote.memory_service` (and :mod:`jevmem.remote`),
where these names have always been imported from.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, SupportsIndex

import grpc

from jevmem import _validate, errors
from jevmem._core import MemoryStore
from jevmem._proto.jevmem.v1 import memory_pb2 as pb
from jevmem._proto.jevmem.v1 import memory_pb2_grpc as pb_grpc
from jevmem.errors import InvalidInputError, InvalidTypeError, JevmemError, NodeNotFoundError
from jevmem.memory import SearchResult
from jevmem.plane.filters import scope_and_filter
from jevmem.remote.memory_convert import (
    RemoteNode,
    meta_to_proto,
    node_from_proto,
    result_from_proto,
)

__all__ = ["MemoryClient", "MemoryServiceError", "RemoteAnswer", "RemoteNode"]


@dataclasses.dataclass(frozen=True)
class RemoteAnswer:
    """An Answer call's result, as `MemoryClient.answer` returns it."""

    text: str
    cited: tuple[int, ...]
    abstained: bool
    search: SearchResult
    trace: dict[str, Any]


class MemoryServiceError(JevmemError, grpc.RpcError, grpc.Call):
    """A `MemoryClient` call the server refused or could not answer: the
    gRPC status (``code()``, a ``grpc.StatusCode``) and the server's message
    (``details()``). It is still a ``grpc.RpcError`` and ``grpc.Call``, so
    code written against grpcio's own errors keeps working."""

    def __init__(self, method: str, target: str, error: grpc.RpcError) -> None:
        self._error = error
        code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
        details = (error.details() if isinstance(error, grpc.Call) else None) or ""
        self._code: grpc.StatusCode = code
        self._details: str = details
        super().__init__(f"{method} on {target} failed: {code.name}: {details}")

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> Any:
        return self._error.initial_metadata() if isinstance(self._error, grpc.Call) else ()

    def trailing_metadata(self) -> Any:
        return self._error.trailing_metadata() if isinstance(self._error, grpc.Call) else ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float:
        return 0.0

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


#: The trailing metadata key in which the server names the memory's own
#: error a call ended with (one of `REMOTE_ERRORS`).
ERROR_KEY = "jevmem-error"

#: The errors a refused call is raised as, by name, as in-process: the
#: memory's refusals of what it was given or asked (`jevmem.errors`).
REMOTE_ERRORS = frozenset(
    {
        "InvalidInputError",
        "InvalidTypeError",
        "DimensionMismatchError",
        "InvalidScoreError",
        "InvalidConfigError",
        "NodeNotFoundError",
        "TraversalStateError",
        "SnapshotError",
        "DurabilityError",
    }
)


def service_error(method: str, target: str, error: grpc.RpcError) -> MemoryServiceError:
    """The `MemoryServiceError` of a refused call, of the type the same call
    in process raises as well: the error the server names (`ERROR_KEY`), or
    for another INVALID_ARGUMENT (a request it cannot read) an
    `InvalidInputError`. ``except jevmem.InvalidInputError`` (or
    ``ValueError``, ``KeyError`` for a node not found) catches it either way."""
    named = None
    if isinstance(error, grpc.Call):
        for key, value in error.trailing_metadata() or ():
            if key == ERROR_KEY and value in REMOTE_ERRORS:
                named = value
        if named is None and error.code() == grpc.StatusCode.INVALID_ARGUMENT:
            named = "InvalidInputError"
    cls = MemoryServiceError if named is None else _typed_service_error(named)
    return cls(method, target, error)


@functools.cache
def _typed_service_error(name: str) -> type[MemoryServiceError]:
    """``MemoryServiceError`` that is also the jevmem error ``name``."""
    typed = getattr(errors, name)
    return type(
        f"Remote{name}",
        (MemoryServiceError, typed),
        {"__module__": __name__, "__doc__": f"A refused call, as a `{name}`."},
    )


@contextmanager
def _encoding(what: str) -> Iterator[None]:
    """protobuf's own refusals of a value (a bare TypeError or ValueError) as
    the typed jevmem errors the in-process call raises."""
    try:
        yield
    except JevmemError:
        raise
    except TypeError as exc:
        raise InvalidTypeError(f"{what}: {exc}") from None
    except ValueError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None


def _seconds(value: Any, field: str) -> int:
    """Unix seconds of a time other than text, converted and range-checked as in-process."""
    ts = _validate.timestamp(value, field)
    if ts is None:  # never: None is not sent as a time
        raise InvalidTypeError(f"{field} is None")
    return ts


def _str(value: Any, field: str) -> str:
    """A str argument, refused as in-process when it is not one (the wire
    would send None as "")."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{field} must be a str, got {type(value).__name__}")
    return value


@functools.cache
def _checks() -> MemoryStore:
    """An empty store, to check scopes, metadata, keys and filters with the
    core's own rules (and messages), as the in-process calls do."""
    return MemoryStore(1)


def _as_dict(value: Any) -> Any:
    """A Mapping as the dict the core reads (`Memory.add_batch` does the same)."""
    return dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value


class MemoryClient:
    """A thin client of one server; results come back as :class:`SearchResult`.

    ``token`` sends ``authorization: Bearer <token>``; ``root_certificates``
    (PEM bytes) switches to TLS, with ``server_name`` overriding the name the
    server's certificate must carry.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
        max_message_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ]
        if root_certificates is not None and server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        self._channel = (
            grpc.secure_channel(
                target, grpc.ssl_channel_credentials(root_certificates), options=options
            )
            if root_certificates is not None
            else grpc.insecure_channel(target, options=options)
        )
        self.stub = pb_grpc.MemoryServiceStub(self._channel)
        self.target = target
        self.timeout_s = timeout_s
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )

    def _rpc(self, method: str, request: Any, **kw: Any) -> Any:
        """Call ``method``, turning grpcio's errors into `MemoryServiceError`."""
        try:
            return getattr(self.stub, method)(request, **kw)
        except grpc.RpcError as exc:
            raise service_error(method, self.target, exc) from None

    @staticmethod
    def observation(
        text: str,
        *,
        timestamp: Any | None = None,
        speaker: str | None = None,
        provenance: Mapping[str, str] | None = None,
        entities: Sequence[str] | None = (),
        scope: Mapping[str, str] | None = None,
        metadata: Mapping[str, str | int | float | bool] | None = None,
        key: str | None = None,
    ) -> pb.Observation:
        """One observation as `Memory.add` takes it (the same types, the same
        refusals: a string for ``entities``, a bool or a NaN timestamp, a
        numpy value in ``metadata`` raise the same typed errors here, before
        any call). A timestamp is sent as Unix seconds (an int, a numpy
        integer, a float, a datetime or a date, converted as in-process) or
        as its text (a str, which the server parses as `Memory.add` does).
        The wire reads an empty string as no value: an empty speaker travels
        in the provenance, where `Memory.add` keeps it, and an empty key is
        refused here, as in-process."""
        # checked in `Memory.add`'s order, with its checks
        _str(text, "text")
        seconds = (
            None
            if timestamp is None or isinstance(timestamp, str)
            else _seconds(timestamp, "timestamp")
        )
        if speaker is not None:
            _str(speaker, "speaker")
        prov = _validate.provenance_arg(provenance, "provenance") or {}
        if speaker == "":
            prov["speaker"] = ""
        ents = _validate.entities_arg(entities, "entities") or []
        # the wire would take a list of pairs as a scope, and protobuf's own
        # refusals name no field: the core checks these first
        scope_d, meta_d = _as_dict(scope), _as_dict(metadata)
        _checks().check_attributes(1, scopes=[scope_d], metadatas=[meta_d], keys=[key])
        with _encoding("observation"):
            o = pb.Observation(
                text=text,
                speaker=speaker or "",
                provenance=prov,
                entities=ents,
                scope=scope_d or {},
                metadata={k: meta_to_proto(v) for k, v in (meta_d or {}).items()},
                key=key or "",
            )
            if isinstance(timestamp, str):
                o.time_text = timestamp
            elif seconds is not None:
                o.unix_seconds = seconds
        return o

    def add(self, memory: str, text: str, **kw: Any) -> int:
        """`Memory.add` on the server; ``kw`` as :meth:`observation` takes them."""
        obs = self.observation(text, **kw)
        with _encoding("request"):
            req = pb.AddRequest(memory=memory, observation=obs)
        r = self._rpc("Add", req, timeout=self.timeout_s, metadata=self.metadata)
        return int(r.id)

    def add_batch(self, memory: str, observations: Sequence[pb.Observation]) -> list[int]:
        """`Memory.add_batch` on the server, of :meth:`observation` results.
        No observations: [] as in-process, without a call (the server
        refuses an empty batch)."""
        got = _validate.sequence(observations, "observations")
        if not got:
            return []
        with _encoding("request"):
            req = pb.AddBatchRequest(memory=memory, observations=got)
        r = self._rpc("AddBatch", req, timeout=self.timeout_s, metadata=self.metadata)
        return [int(i) for i in r.ids]

    @staticmethod
    def options(
        k: int,
        mode: str,
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
        *,
        now: Any | None = None,
    ) -> pb.SearchOptions:
        """Search options as `Memory.search` takes them: ``k`` an int from 1
        (refused here as in-process: the wire reads 0 as the default 10);
        ``now`` the query time, as ``now=`` in-process (Unix seconds, a
        datetime or a date sent as seconds; a str sent as text for the
        server to parse). ``scope`` and ``filter`` are checked by the
        memory's own rules, with its messages; a filter's ``$timestamp``
        bounds go as Unix seconds, converted as in-process (a datetime, a
        date, a numpy int)."""
        # the wire reads None as no mode, the default: refused as in-process
        # ("" stays the client's default, the server's "full")
        if not isinstance(mode, str):
            raise InvalidInputError(f"unknown mode {mode!r:.40}")
        k = _validate.k_arg(k)
        seconds = None if now is None or isinstance(now, str) else _seconds(now, "now")
        # as `Memory.search` checks them (the wire would take a list of
        # pairs as a scope, JSON a set or a numpy value in a filter)
        scope, filter = scope_and_filter(scope, filter)
        _checks().select(scope, filter)
        with _encoding("options"):
            o = pb.SearchOptions(
                k=k,
                mode=mode,
                scope=scope or {},
                filter_json="" if filter is None else json.dumps(filter),
            )
            if isinstance(now, str):
                o.now_text = now
            elif seconds is not None:
                o.now_unix_seconds = seconds
        return o

    def search(
        self,
        memory: str,
        query: str,
        k: int = 10,
        *,
        now: Any | None = None,
        mode: str = "",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> SearchResult:
        _str(query, "query")
        opts = self.options(k, mode, scope, filter, now=now)
        with _encoding("request"):
            req = pb.SearchRequest(memory=memory, query=query, options=opts)
        r = self._rpc("Search", req, timeout=self.timeout_s, metadata=self.metadata)
        return result_from_proto(r.result)

    def search_batch(
        self,
        memory: str,
        queries: Sequence[str],
        k: int = 10,
        *,
        now: Any | None = None,
        mode: str = "",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[SearchResult]:
        """`Memory.search_batch` on the server. No queries: [] as in-process
        (the options checked all the same), without a call (the server
        refuses an empty batch)."""
        got = _validate.sequence(queries, "queries")
        for i, q in enumerate(got):
            _str(q, f"queries[{i}]")
        opts = self.options(k, mode, scope, filter, now=now)
        if not got:
            return []
        with _encoding("request"):
            req = pb.SearchBatchRequest(memory=memory, queries=got, options=opts)
        r = self._rpc("SearchBatch", req, timeout=self.timeout_s, metadata=self.metadata)
        return [result_from_proto(x) for x in r.results]

    def answer(
        self,
        memory: str,
        query: str,
        k: int = 10,
        *,
        now: Any | None = None,
        mode: str = "",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
        abstain: bool | None = None,
        abstain_below: float | None = None,
        timeout_s: float | None = None,
    ) -> RemoteAnswer:
        """``Memory.answer`` on the server (its model); ``timeout_s``
        defaults to the client's (an answer waits for the model)."""
        _str(query, "query")
        opts = self.options(k, mode, scope, filter, now=now)
        with _encoding("request"):
            req = pb.AnswerRequest(memory=memory, query=query, options=opts)
            if abstain is not None:
                req.abstain = abstain
            if abstain_below is not None:
                req.abstain_below = abstain_below
        r = self._rpc(
            "Answer",
            req,
            timeout=self.timeout_s if timeout_s is None else timeout_s,
            metadata=self.metadata,
        )
        return RemoteAnswer(
            r.text,
            tuple(int(i) for i in r.cited),
            r.abstained,
            result_from_proto(r.result),
            json.loads(r.trace_json or "{}"),
        )

    def get(self, memory: str, node_id: int) -> RemoteNode:
        """`Memory.get` on the server: the node's fields as plain values (a
        `RemoteNode`). An id that is not an int, or that no node can have,
        is refused here with the in-process error."""
        try:
            if isinstance(node_id, bool) or not isinstance(node_id, SupportsIndex):
                raise TypeError
            wanted = operator.index(node_id)
        except TypeError:
            raise InvalidInputError(
                f"node id must be an int, got {type(node_id).__name__}"
            ) from None
        if not 0 <= wanted < 2**64:
            raise NodeNotFoundError(f"no node with id {wanted}")
        with _encoding("request"):
            req = pb.GetRequest(memory=memory, id=wanted)
        r: pb.GetResponse = self._rpc("Get", req, timeout=self.timeout_s, metadata=self.metadata)
        return node_from_proto(r.node)

    def stats(self, memory: str) -> dict[str, Any]:
        r = self._rpc(
            "Stats", pb.StatsRequest(memory=memory), timeout=self.timeout_s, metadata=self.metadata
        )
        out: dict[str, Any] = json.loads(r.stats_json)
        return out

    def health(self, memory: str) -> pb.MemoryHealthResponse:
        r: pb.MemoryHealthResponse = self._rpc(
            "Health",
            pb.MemoryHealthRequest(memory=memory),
            timeout=self.timeout_s,
            metadata=self.metadata,
        )
        return r

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

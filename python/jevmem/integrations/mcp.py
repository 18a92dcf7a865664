"""An MCP server over jevmem memories (the ``mcp`` extra).

``jevmem mcp --memory DIR`` serves one durable directory memory (or several:
``--memory NAME=DIR`` repeated) over stdio, or over streamable HTTP with
``--http HOST:PORT``. Tools: ``remember``, ``recall``, ``forget``, ``list``,
and ``answer`` where the memory can answer (a System-Two model configured);
one resource per memory, ``jevmem://memory/NAME/stats``.

A jevmem error (bad text, a malformed filter, an unknown id) comes back as a
tool error carrying its message, and the memory is left as it was; so does
input that does not match a tool's schema, which is checked strictly (no
string-to-number coercion, and an argument the tool does not take is refused
by name rather than ignored: a misspelled ``scope`` must not widen a read or
a forget).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
import socket
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from jevmem import __version__
from jevmem.errors import InvalidInputError, JevmemError
from jevmem.integrations._common import (
    evidence_dict,
    memory_lock,
    node_dict,
    short_trace,
)
from jevmem.memory import Memory

__all__ = ["MemorySpec", "build_server", "can_answer", "parse_http", "parse_memory_spec", "serve"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: the memory-name rule, as the errors state it
_NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def _check_name(name: str) -> str:
    """``name`` if it is a valid memory name (see `_NAME_RULE`), else InvalidInputError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInputError(f"memory name {name!r:.100} is invalid: use {_NAME_RULE}")
    return name


# ---- input types: every argument strict (a JSON number is not a string) ----

ScalarValue = StrictStr | StrictBool | StrictInt | StrictFloat
#: unix seconds or an ISO 8601 string
TimeValue = StrictInt | StrictFloat | StrictStr
ScopeArg = Annotated[
    dict[str, StrictStr] | None,
    Field(
        description=(
            'Whose observations these are, as string pairs: {"user": "u1", "session": "s3"}. '
            "A read with a scope sees only observations whose scope holds every pair of it; "
            "omit it for global observations (an unscoped read sees every observation)."
        )
    ),
]
FilterArg = Annotated[
    dict[str, Any] | None,
    Field(
        description=(
            "Conditions on metadata fields, all of which must hold: "
            '{"topic": "work"} (equality), {"priority": {"$gte": 1, "$lt": 3}}; operators '
            "$eq $ne $in $nin $gt $gte $lt $lte $exists, combinators $and $or (lists of "
            'filters) and $not; the field "$timestamp" is the observation time '
            "(unix seconds or an ISO 8601 string)."
        )
    ),
]
MemoryArg = Annotated[
    str | None,
    Field(
        strict=True,
        description="Which memory to use, by name; may be omitted when the server holds one.",
    ),
]


class StoredItem(BaseModel):
    """An observation as the memory holds it."""

    id: int
    text: str
    speaker: str | None
    timestamp: int | None = Field(description="observation time, unix seconds")
    time: str | None = Field(description="observation time, ISO 8601 UTC")
    provenance: dict[str, str]
    entities: list[str]
    scope: dict[str, str]
    metadata: dict[str, str | bool | int | float]
    key: str | None


class Via(BaseModel):
    view: str = Field(
        description="the graph view of the edge: semantic, temporal, causal or entity"
    )
    from_node: int = Field(description="the node the traversal came from")
    weight: float


class Evidence(BaseModel):
    """One piece of evidence, with its provenance, times and how it was reached."""

    id: int
    text: str
    score: float
    speaker: str | None
    timestamp: int | None = Field(description="observation time, unix seconds")
    time: str | None = Field(description="observation time, ISO 8601 UTC")
    provenance: dict[str, str]
    scope: dict[str, str]
    metadata: dict[str, str | bool | int | float]
    via: Via | None = Field(description="the edge that reached it; null for a direct match")
    time_refs: list[dict[str, str | int | float | bool | None]] = Field(
        description="time expressions in the text, resolved against the observation time"
    )
    passage: list[int] = Field(description="[start, end) characters of the best-matching passage")
    supersedes: list[int] = Field(description="ids of the observations this one replaced")
    superseded_by: list[int] = Field(description="ids of the observations that replaced this one")
    valid_from: int | None
    valid_to: int | None


class Round(BaseModel):
    depth: int | None
    admitted: int | None
    sufficiency: float | None


class Trace(BaseModel):
    """How the search ran, in short."""

    mode: str | None
    controller: str | None
    active_views: list[str]
    rounds: list[Round]
    stop_reason: str | None
    visited: int | None
    sufficiency: float | None
    sufficient: bool = Field(description="the evidence met the stop rule")
    missing: float | None
    contradiction: float | None
    elapsed_ms: float | None


class RememberResult(BaseModel):
    memory: str
    id: int = Field(description="the observation's id")
    stored: bool = Field(
        description="false when the memory already held this key: nothing new was stored"
    )


class RecallResult(BaseModel):
    memory: str
    query: str
    evidence: list[Evidence]
    trace: Trace
    full_trace: dict[str, Any] | None = Field(
        default=None, description="the whole trace, when asked for"
    )


class AnswerResult(BaseModel):
    memory: str
    query: str
    answer: str = Field(description="the model's answer, or the abstention text")
    abstained: bool = Field(description="no answer was given: the evidence was not there")
    cited: list[int] = Field(description="ids of the evidence the answer cites")
    cited_evidence: list[Evidence]
    search: Trace = Field(description="how the search for evidence ran")
    trace: dict[str, Any] = Field(
        description="the answer step: prompt version, tokens, time, why it abstained"
    )


class ForgetResult(BaseModel):
    memory: str
    removed: int = Field(description="how many observations were removed (with summaries of them)")


class ListResult(BaseModel):
    memory: str
    items: list[StoredItem]
    next_cursor: str | None = Field(description="pass it back for the next page; null at the end")


# ---- configuration ----------------------------------------------------------


@dataclass(frozen=True)
class MemorySpec:
    """A memory to serve: its name in tool calls and resource URIs, and its directory."""

    name: str
    path: Path


def parse_memory_spec(raw: str) -> MemorySpec:
    """``DIR`` (named after the directory) or ``NAME=DIR``. A spec with ``=``
    is ``NAME=DIR``: a NAME that breaks the memory-name rule is refused (not
    read as part of a path), and a directory whose path holds ``=`` is given
    as ``NAME=DIR``."""
    name, sep, rest = raw.partition("=")
    if sep:
        if not _NAME.match(name):
            raise InvalidInputError(
                f"--memory {raw!r:.200}: the name before '=' is invalid: use {_NAME_RULE} "
                "(a directory whose path holds '=' is given as NAME=DIR)"
            )
        if not rest:
            raise InvalidInputError(f"--memory {raw!r:.200}: NAME=DIR needs a directory")
        return MemorySpec(name, Path(rest).expanduser())
    path = Path(raw).expanduser()
    base = path.resolve().name or "memory"
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", base).lstrip("._-") or "memory"
    return MemorySpec(base[:64], path)


def parse_http(raw: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0 picks a free one)."""
    host, sep, port = raw.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidInputError(f"--http expects HOST:PORT, got {raw!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def can_answer(memory: Memory) -> bool:
    """Whether the memory can answer questions: it has ``answer`` (System
    Two) and a model, its own ``system_two`` or one the environment names
    (JEVMEM_S2_MODEL / OPENAI_MODEL, see `jevmem.system_two`)."""
    if not callable(getattr(memory, "answer", None)):
        return False
    if getattr(memory, "system_two", None) is not None:
        return True
    try:
        from jevmem.system_two import ChatCompletionsClient

        ChatCompletionsClient()  # reads the environment; sends nothing
    except (ImportError, JevmemError):
        return False
    return True


# ---- the server -------------------------------------------------------------


def _jsonable(x: Any, depth: int = 0) -> Any:
    """An arbitrary result (dataclass, pydantic model, mapping) as JSON values."""
    if depth > 32:
        return str(x)
    if x is None or isinstance(x, str | bool | int | float):
        return x
    if is_dataclass(x) and not isinstance(x, type):
        return _jsonable(asdict(x), depth + 1)
    dump = getattr(x, "model_dump", None)
    if callable(dump):
        return _jsonable(dump(), depth + 1)
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_jsonable(v, depth + 1) for v in x]
    return str(x)


class _Memories:
    """The served memories by name, each behind its lock."""

    def __init__(self, memories: Mapping[str, Memory]) -> None:
        if not memories:
            raise InvalidInputError("the MCP server needs at least one memory")
        for name in memories:
            _check_name(name)
        self.by_name = dict(memories)

    def pick(self, name: str | None) -> tuple[str, Memory]:
        if name is None:
            if len(self.by_name) == 1:
                return next(iter(self.by_name.items()))
            raise InvalidInputError(
                f"this server holds several memories; name one of {sorted(self.by_name)}"
            )
        m = self.by_name.get(name)
        if m is None:
            raise InvalidInputError(
                f"no memory named {name!r}; this server holds {sorted(self.by_name)}"
            )
        return name, m

    @contextmanager
    def use(self, name: str | None) -> Iterator[tuple[str, Memory]]:
        """The memory, locked for one call; a jevmem error becomes a tool error."""
        try:
            chosen, m = self.pick(name)
            with memory_lock(m):
                yield chosen, m
        except JevmemError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def _closed_tool(fn: Callable[..., Any], name: str, annotations: ToolAnnotations) -> Tool:
    """The tool for ``fn`` with a closed input: its schema says
    ``"additionalProperties": false`` and a call with an argument the tool does
    not take is refused (a tool error naming it, like any other bad input)
    instead of being dropped, so that a misspelled ``scope`` cannot turn a
    scoped read or forget into one over every scope."""
    tool = Tool.from_function(fn, name=name, annotations=annotations)
    base = tool.fn_metadata.arg_model
    known = frozenset(f.alias or n for n, f in base.model_fields.items())
    takes = ", ".join(sorted(known))

    def refuse_unknown(cls: Any, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(k) for k in data if k not in known)
            if unknown:
                raise ValueError(
                    f"unknown argument{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(repr, unknown))}: {name} takes {takes}"
                )
        return data

    closed: type[ArgModelBase] = type(
        base.__name__,
        (base,),
        {
            "__module__": base.__module__,
            "model_config": ConfigDict(extra="forbid"),
            "refuse_unknown_arguments": model_validator(mode="before")(refuse_unknown),
        },
    )
    tool.fn_metadata.arg_model = closed
    tool.parameters = closed.model_json_schema(by_alias=True)
    return tool


def build_server(
    memories: Mapping[str, Memory], *, answer: bool | None = None, name: str = "jevmem"
) -> MCPServer:
    """An MCP server over ``memories`` (name -> Memory). ``answer``: offer the
    answer tool (None: when every memory can answer, see `can_answer`)."""
    held = _Memories(memories)
    names = sorted(held.by_name)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)

    def remember(
        text: Annotated[
            str, Field(strict=True, min_length=1, description="What was said or observed.")
        ],
        speaker: Annotated[
            str | None, Field(strict=True, description="Who said it (a user, the agent, a tool).")
        ] = None,
        timestamp: Annotated[
            TimeValue | None,
            Field(
                description=(
                    "When it was observed: unix seconds or an ISO 8601 string "
                    '("2024-03-01T10:00:00Z"); time expressions in the text are resolved '
                    "against it."
                )
            ),
        ] = None,
        scope: ScopeArg = None,
        metadata: Annotated[
            dict[str, ScalarValue] | None,
            Field(
                description=(
                    "Fields that filters can select on later; values are strings, numbers "
                    'or booleans: {"topic": "work", "priority": 2}.'
                )
            ),
        ] = None,
        provenance: Annotated[
            dict[str, StrictStr] | None,
            Field(description="Where it came from, as string pairs returned with the evidence."),
        ] = None,
        key: Annotated[
            str | None,
            Field(
                strict=True,
                description=(
                    "An idempotency key: a second remember with a key this scope already "
                    "holds stores nothing and returns the first one's id."
                ),
            ),
        ] = None,
        memory: MemoryArg = None,
    ) -> RememberResult:
        """Store one observation in long-term memory; returns its id."""
        with held.use(memory) as (chosen, m):
            before = len(m)
            node_id = m.add(
                text,
                timestamp=timestamp,
                speaker=speaker,
                provenance=provenance,
                scope=scope,
                metadata=metadata,
                key=key,
            )
            return RememberResult(memory=chosen, id=node_id, stored=len(m) > before)

    def recall(
        query: Annotated[
            str,
            Field(
                strict=True, min_length=1, description="The question or topic to find evidence for."
            ),
        ],
        k: Annotated[
            int,
            Field(strict=True, ge=1, le=100, description="How many pieces of evidence, at most."),
        ] = 10,
        scope: ScopeArg = None,
        filter: FilterArg = None,
        now: Annotated[
            TimeValue | None,
            Field(
                description=(
                    "The time the question is asked (unix seconds or ISO 8601), for "
                    '"recently" and "last week", and the present that a question about '
                    "what holds now is read at. Without it only absolute times are read, "
                    "and the present is the latest state."
                )
            ),
        ] = None,
        mode: Annotated[
            Literal["full", "anchors", "lexical", "traversal"],
            Field(
                description=(
                    "full (the default): fused keyword and vector lists, then a graph "
                    "traversal steered by the System-One controller; traversal: the same "
                    "traversal steered by raw signals, no controller; anchors: the fused lists "
                    "only; lexical: keyword (BM25) ranking only."
                )
            ),
        ] = "full",
        include_full_trace: Annotated[
            bool, Field(strict=True, description="Also return the whole search trace.")
        ] = False,
        memory: MemoryArg = None,
    ) -> RecallResult:
        """Find evidence in memory for a question: the best matching observations with who
        said them, when, how each was reached, and a short trace of the search."""
        with held.use(memory) as (chosen, m):
            r = m.search(query, k, now=now, mode=mode, scope=scope, filter=filter)
            return RecallResult(
                memory=chosen,
                query=r.query,
                evidence=[Evidence.model_validate(evidence_dict(m, e)) for e in r.evidence],
                trace=Trace.model_validate(short_trace(r)),
                full_trace=json.loads(json.dumps(r.trace, default=str))
                if include_full_trace
                else None,
            )

    def forget(
        ids: Annotated[
            list[StrictInt] | None,
            Field(description="The ids of the observations to remove."),
        ] = None,
        scope: ScopeArg = None,
        filter: FilterArg = None,
        memory: MemoryArg = None,
    ) -> ForgetResult:
        """Delete observations for good: the ids given, or every observation a scope and/or
        filter select (give one or the other). An unknown id removes nothing."""
        with held.use(memory) as (chosen, m):
            removed = m.forget(ids, scope=scope, filter=filter)
            return ForgetResult(memory=chosen, removed=removed)

    def list_(
        scope: ScopeArg = None,
        filter: FilterArg = None,
        limit: Annotated[
            int, Field(strict=True, ge=1, le=1000, description="How many observations per page.")
        ] = 50,
        cursor: Annotated[
            str | None,
            Field(
                strict=True, description="The next_cursor of the previous page; omit for the first."
            ),
        ] = None,
        memory: MemoryArg = None,
    ) -> ListResult:
        """Browse the stored observations a scope and filter select, oldest first, a page at
        a time."""
        with held.use(memory) as (chosen, m):
            items, nxt = m.list(scope, filter, limit, cursor)
            return ListResult(
                memory=chosen,
                items=[StoredItem.model_validate(node_dict(n)) for n in items],
                next_cursor=nxt,
            )

    tools = [
        _closed_tool(
            remember,
            "remember",
            ToolAnnotations(
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=False,
                open_world_hint=False,
            ),
        ),
        _closed_tool(recall, "recall", read_only),
        _closed_tool(
            forget,
            "forget",
            ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=False,
                open_world_hint=False,
            ),
        ),
        _closed_tool(list_, "list", read_only),
    ]
    offer_answer = answer if answer is not None else all(map(can_answer, held.by_name.values()))
    if offer_answer:
        tools.append(_closed_tool(_answer_tool(held), "answer", read_only))

    server: MCPServer = MCPServer(
        name,
        version=__version__,
        instructions=(
            "Long-term memory for an agent. Call remember to store what was said or observed "
            "(with the speaker, the time and a scope such as the user), recall to find evidence "
            "for a question before answering it, list to browse, forget to delete. "
            f"Memories held: {', '.join(names)}."
        ),
        log_level="WARNING",
        tools=tools,
    )
    for mem_name in names:
        _add_stats_resource(server, held, mem_name)
    return server


def _answer_tool(held: _Memories) -> Callable[..., AnswerResult]:
    from jevmem import _validate, answering

    def answer(
        query: Annotated[
            str, Field(strict=True, min_length=1, description="The question to answer.")
        ],
        k: Annotated[
            int,
            Field(
                strict=True, ge=1, le=100, description="How many evidence items the model reads."
            ),
        ] = 10,
        scope: ScopeArg = None,
        filter: FilterArg = None,
        now: Annotated[
            TimeValue | None,
            Field(description="The time the question is asked (unix seconds or ISO 8601)."),
        ] = None,
        abstain: Annotated[
            bool,
            Field(
                strict=True,
                description=(
                    "Say that memory does not know, without asking the model, when the "
                    "evidence is missing or too weak (the default)."
                ),
            ),
        ] = True,
        memory: MemoryArg = None,
    ) -> AnswerResult:
        """Answer a question from memory with the configured System-Two model: the answer,
        the evidence it cites (ids always among what the search found), and a short trace.
        It abstains when the evidence is not there."""
        with held.use(memory) as (chosen, m):
            # the search takes its turn on the memory; the model call does not hold it
            client = answering.resolve_system_two(None, m)
            r = m.search(query, k, now=now, scope=scope, filter=filter)
            prepared = answering.prepare(r, abstain=abstain, now_ts=_validate.timestamp(now, "now"))
            found = {e.id: Evidence.model_validate(evidence_dict(m, e)) for e in r.evidence}
        try:
            (a,) = answering.generate([prepared], client, 1)
        except JevmemError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        return AnswerResult(
            memory=chosen,
            query=a.query,
            answer=a.text,
            abstained=a.abstained,
            cited=list(a.cited),
            cited_evidence=[found[i] for i in a.cited],
            search=Trace.model_validate(short_trace(r)),
            trace=_jsonable(a.trace),
        )

    return answer


def _add_stats_resource(server: MCPServer, held: _Memories, mem_name: str) -> None:
    def stats() -> str:
        with held.use(mem_name) as (_, m):
            s = _jsonable(m.stats())
            return json.dumps(
                {"memory": mem_name, "observations": len(m), "durable": m.durable, **s},
                sort_keys=True,
            )

    server.resource(
        f"jevmem://memory/{mem_name}/stats",
        name=f"{mem_name} stats",
        description=f"What memory {mem_name} holds: nodes, edges per view, passages, index "
        "sizes and controller calls.",
        mime_type="application/json",
    )(stats)


# ---- running it -------------------------------------------------------------


def open_memories(
    specs: Sequence[MemorySpec], embedder: str | None = None, durability: str = "sync"
) -> dict[str, Memory]:
    """Open (or create) every directory memory; on an error close those opened."""
    from jevmem.embed import embedder_from_spec

    seen: dict[str, Memory] = {}
    try:
        for spec in specs:
            if spec.name in seen:
                raise InvalidInputError(f"two memories are named {spec.name!r}; use NAME=DIR")
            if spec.path.exists() and not spec.path.is_dir():
                raise InvalidInputError(
                    f"{spec.path} is a file; jevmem mcp serves directory memories (Memory.open)"
                )
            chosen = embedder_from_spec(embedder) if embedder else None
            seen[spec.name] = Memory.open(spec.path, chosen, durability=durability)
    except BaseException:
        for m in seen.values():
            m.close()
        raise
    return seen


class _BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer
    <token>`` (compared in constant time); others get 401 and reach nothing."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = b'{"error": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _loopback_only(host: str) -> Any:
    """DNS-rebinding protection for a loopback bind: only requests whose Host
    (and Origin, if any) name a loopback address. The SDK turns it on by
    itself for three spellings only (127.0.0.1, localhost, ::1); a bind to
    127.0.0.2 is as local and gets the same. None for
    any other bind (which warns instead, or takes a token)."""
    if not _is_loopback(host):
        return None
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = ["127.0.0.1", "localhost", "[::1]"]
    bound = f"[{host}]" if ":" in host else host
    if bound not in hosts:
        hosts.append(bound)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts],
        allowed_origins=[f"http://{h}:*" for h in hosts],
    )


def serve(
    memories: Mapping[str, Memory],
    http: tuple[str, int] | None = None,
    *,
    path: str = "/mcp",
    token: str | None = None,
) -> None:
    """Serve until the client goes (stdio) or the process is interrupted (HTTP).
    ``token``: HTTP requests must carry it as a bearer token."""
    server = build_server(memories)
    if http is None:
        server.run("stdio")
        return
    import anyio
    import uvicorn

    host, port = http
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        # listening before the announcement: a client that connects at once
        # waits in the backlog until uvicorn accepts, instead of being refused
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InvalidInputError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    app: Any = server.streamable_http_app(
        streamable_http_path=path, host=host, transport_security=_loopback_only(host)
    )
    if token is not None:
        app = _BearerToken(app, token)
    elif not _is_loopback(host):
        print(
            f"jevmem mcp: warning: {host} is not a loopback address and no --token-env is set: "
            "anyone who reaches it can read and change these memories",
            file=sys.stderr,
            flush=True,
        )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    # stderr: announce where to connect (the port when 0 was asked for)
    print(f"jevmem mcp listening on http://{shown}:{bound}{path}", file=sys.stderr, flush=True)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))

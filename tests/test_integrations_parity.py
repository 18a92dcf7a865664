"""The agent-framework surfaces against the in-process API, as properties.

- MCP (a stateful machine): every ``remember``/``recall``/``forget``/``list``
  sent to a served memory is also done with ``Memory`` on a twin memory; the
  two accept and refuse the same calls, a refusal is a ``ToolError`` (never an
  unexpected exception) and changes nothing, ``recall`` returns what
  ``Memory.search`` returns (ids, texts, scores, times, scope, metadata) and
  the two memories hold the same observations after every step;
- LangChain history (a stateful machine): histories with different session
  ids and scopes in one memory, beside other observations in the same
  scopes, never read or clear each other's messages, and messages round-trip
  exactly, in order;
- LangChain retriever: documents are ``Memory.search``'s evidence for the
  same query, ``k``, scope, filter and mode.

The tools are called on the server object (``MCPServer.call_tool``), which
tells a jevmem or schema error (``ToolError``) from a crash
(``UnexpectedToolError``); tests/test_mcp.py covers the transports.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langchain_core")

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
)
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from mcp.server.mcpserver.exceptions import ToolError

from jevmem import HashEmbedder, InvalidInputError, LocalController, Memory
from jevmem.errors import JevmemError
from jevmem.integrations._common import iso_time
from jevmem.integrations.langchain import (
    JevmemChatMessageHistory,
    JevmemRetriever,
)
from jevmem.integrations.mcp import build_server
from jevmem.memory import Mode


def _memory() -> Memory:
    return Memory(HashEmbedder(64), LocalController())


# ---- values ------------------------------------------------------------------

WORDS = ["Maya", "cello", "Ines", "tea", "Tom", "piano", "garden", "Zürich", "日本", "🎻", "viola"]
#: text-like values, valid and not: empty, blank, NUL, a lone surrogate, unicode
odd_str = st.sampled_from(["", " ", "\u00a0", "\x00", "a\x00b", "\ud800", "\u200b", "é", "🎻"])
word_str = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
any_str = st.one_of(word_str, odd_str, st.text(max_size=6))
big_int = st.sampled_from([2**63 - 1, -(2**63), 2**63, 2**64, -(2**63) - 1, 10**20])
timestamps = st.one_of(
    st.none(),
    st.integers(-62_072_524_800 - 2, 253_339_228_799 + 2),
    big_int,
    st.floats(-1e12, 1e12, allow_nan=False),
    st.sampled_from(
        [
            "2024-03-01T10:00:00Z",
            "2024-03-01",
            "2024-03-01T10:00:00+02:00",
            "2024-03-01T10:00:00.999Z",
            "2024/03/01",
            "1709287200",
            "",
            " ",
            "yesterday",
            "0003-01-01T00:00:00Z",
            "9997-12-31T23:59:59Z",
            "9999-01-01T00:00:00Z",
        ]
    ),
)
meta_value = st.one_of(
    st.booleans(),
    st.integers(-1000, 1000),
    big_int,
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "music", "1", "日本"]),
    odd_str,
)
meta_key = st.sampled_from(["topic", "p", "", "$x", "k\x00", "é"])
scopes: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries({"user": st.sampled_from(["u1", "u2", "日本"])}),
    st.dictionaries(st.sampled_from(["user", "", "$u", "s"]), any_str, max_size=2),
)
read_scopes: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries({"user": st.sampled_from(["u1", "u2", "u3"])}),
    st.just({"user": ""}),
)
filters = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries({"topic": st.sampled_from(["music", "pets", ""])}),
    st.fixed_dictionaries({"p": st.one_of(st.integers(-3, 3), big_int, st.booleans())}),
    st.fixed_dictionaries({"p": st.fixed_dictionaries({"$gte": st.integers(-3, 3)})}),
    st.fixed_dictionaries({"p": st.fixed_dictionaries({"$in": st.lists(meta_value, max_size=3)})}),
    st.just({"$timestamp": {"$gte": "2024-01-01"}}),
    st.just({"$or": []}),
    st.just({"$bogus": 1}),
    st.just({"p": {"$exists": "yes"}}),
)


def _snapshot(m: Memory) -> list[tuple[Any, ...]]:
    nodes, cursor = m.list(None, None, 10_000)
    assert cursor is None
    return [
        (
            n.id,
            n.text,
            n.timestamp,
            dict(n.scope),
            dict(n.metadata),
            dict(n.provenance),
            n.key,
            list(n.entities),
        )
        for n in nodes
    ]


def _typed(value: Any) -> Any:
    """A JSON value with its type, so that 1 == 1.0 == True do not hide a conversion."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


# ---- MCP ------------------------------------------------------------------------


class McpParity(RuleBasedStateMachine):
    """A served memory and its in-process twin take the same calls."""

    def __init__(self) -> None:
        super().__init__()
        self.ref = _memory()
        self.served = _memory()
        self.server = build_server({"m": self.served}, answer=False)

    def _call(self, tool: str, args: dict[str, Any]) -> dict[str, Any] | ToolError:
        """The tool's structured result, or the ToolError it refused with; any
        other exception (a crash, not a refusal) fails the test."""
        try:
            r: Any = anyio.run(self.server.call_tool, tool, args)
        except ToolError as exc:
            if type(exc) is not ToolError:  # UnexpectedToolError: the tool crashed
                raise AssertionError(
                    f"{tool} crashed: {exc!r} caused by {exc.__cause__!r}"
                ) from exc
            return exc
        assert not r.is_error, r
        assert isinstance(r.structured_content, dict)
        return dict(r.structured_content)

    def _both(
        self, tool: str, args: dict[str, Any], local: Any
    ) -> tuple[Any, dict[str, Any] | None]:
        before = _snapshot(self.served)
        try:
            want = ("ok", local())
        except JevmemError as exc:
            want = ("err", exc)
        got = self._call(tool, args)
        if want[0] == "err":
            assert isinstance(got, ToolError), (tool, args, want, got)
            # the documented error (its class and message) or the schema's refusal
            msg = str(got)
            assert type(want[1]).__name__ in msg or "validation error" in msg, (msg, want[1])
            assert _snapshot(self.served) == before, "a refused call changed the memory"
            return want, None
        assert not isinstance(got, ToolError), (tool, args, want, str(got))
        return want, got

    @rule(
        text=st.one_of(word_str, word_str, any_str),
        speaker=st.one_of(st.none(), any_str),
        timestamp=timestamps,
        scope=scopes,
        metadata=st.one_of(st.none(), st.dictionaries(meta_key, meta_value, max_size=2)),
        provenance=st.one_of(st.none(), st.dictionaries(st.sampled_from(["src", ""]), any_str)),
        key=st.one_of(st.none(), st.sampled_from(["k1", "k2", "", " "])),
    )
    def remember(self, **kw: Any) -> None:
        args = {k: v for k, v in kw.items() if v is not None}
        n = len(self.ref)
        want, got = self._both("remember", args, lambda: self.ref.add(**kw))
        if got is not None:
            assert got == {"memory": "m", "id": want[1], "stored": len(self.ref) > n}

    @rule(
        query=st.one_of(word_str, odd_str),
        k=st.integers(1, 12),
        scope=read_scopes,
        filter=filters,
        mode=st.sampled_from(["full", "traversal", "anchors", "lexical"]),
        now=st.one_of(st.none(), st.sampled_from(["2024-03-02T00:00:00Z", 1_709_337_600])),
    )
    def recall(self, query: str, k: int, scope: Any, filter: Any, mode: Mode, now: Any) -> None:
        args: dict[str, Any] = {"query": query, "k": k, "mode": mode}
        for name, v in (("scope", scope), ("filter", filter), ("now", now)):
            if v is not None:
                args[name] = v
        want, got = self._both(
            "recall",
            args,
            lambda: self.ref.search(query, k, now=now, mode=mode, scope=scope, filter=filter),
        )
        if got is None:
            return
        r = want[1]
        ev = got["evidence"]
        assert [e["id"] for e in ev] == [e.id for e in r.evidence]
        for e, g in zip(r.evidence, ev, strict=True):
            node = self.served.get(e.id)
            assert g["text"] == e.text == node.text
            assert math.isclose(g["score"], e.score, rel_tol=1e-6, abs_tol=1e-9)
            assert g["timestamp"] == e.timestamp and g["time"] == iso_time(e.timestamp)
            assert _typed(g["scope"]) == _typed(dict(node.scope))
            assert _typed(g["metadata"]) == _typed(dict(node.metadata))
            assert g["provenance"] == dict(e.provenance)
            if scope:
                assert all(node.scope.get(k2) == v2 for k2, v2 in scope.items())

    @rule(
        ids=st.one_of(
            st.none(), st.lists(st.integers(-1, 8), max_size=3), st.lists(big_int, max_size=1)
        ),
        scope=read_scopes,
        filter=filters,
    )
    def forget(self, ids: Any, scope: Any, filter: Any) -> None:
        args = {
            k: v for k, v in (("ids", ids), ("scope", scope), ("filter", filter)) if v is not None
        }
        want, got = self._both(
            "forget", args, lambda: self.ref.forget(ids, scope=scope, filter=filter)
        )
        if got is not None:
            assert got == {"memory": "m", "removed": want[1]}

    @rule(scope=read_scopes, filter=filters, limit=st.integers(1, 5))
    def list_pages(self, scope: Any, filter: Any, limit: int) -> None:
        """Every page, with the cursors each side hands out."""
        cursor_ref: str | None = None
        cursor_mcp: str | None = None
        for _ in range(50):
            args: dict[str, Any] = {"limit": limit}
            for name, v in (("scope", scope), ("filter", filter), ("cursor", cursor_mcp)):
                if v is not None:
                    args[name] = v
            want, got = self._both(
                "list", args, lambda c=cursor_ref: self.ref.list(scope, filter, limit, c)
            )
            if got is None:
                return
            nodes, cursor_ref = want[1]
            assert [it["id"] for it in got["items"]] == [n.id for n in nodes]
            for it, n in zip(got["items"], nodes, strict=True):
                assert it["text"] == n.text and it["timestamp"] == n.timestamp
                assert _typed(it["metadata"]) == _typed(dict(n.metadata))
                assert it["scope"] == dict(n.scope) and it["key"] == n.key
            cursor_mcp = got["next_cursor"]
            assert (cursor_mcp is None) == (cursor_ref is None)
            if cursor_ref is None:
                return
        raise AssertionError("list never ended")

    @invariant()
    def same_observations(self) -> None:
        assert _typed(_snapshot(self.served)) == _typed(_snapshot(self.ref))


McpParity.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=14,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMcpParity = McpParity.TestCase


# ---- LangChain history ----------------------------------------------------------

#: message texts, long ones too (a reply longer than a metadata value: its
#: text is kept once, as the observation's)
msg_text = st.one_of(
    word_str,
    st.text(max_size=60).filter(lambda s: "\x00" not in s and not _has_surrogate(s)),
    st.builds(lambda c, n: c * n, st.sampled_from(["é", "a", "🎻", "日本 "]), st.integers(1, 3000)),
    st.sampled_from(["", "   ", "(no text)", '{"lc": 1}', "\n\ttab"]),
)


def _has_surrogate(s: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


@st.composite
def messages(draw: st.DrawFn) -> BaseMessage:
    kind = draw(st.sampled_from(["human", "ai", "system", "tool", "ai_tool_call"]))
    text = draw(msg_text)
    if kind == "human":
        return HumanMessage(text, id=draw(st.one_of(st.none(), st.just("m-1"))))
    if kind == "ai":
        return AIMessage(text, additional_kwargs=draw(st.just({}) | st.just({"x": [1, "é"]})))
    if kind == "system":
        return SystemMessage(text)
    if kind == "tool":
        return ToolMessage(text, tool_call_id="call-1")
    # a message's other fields (tool calls, extra kwargs) are kept in one
    # metadata value: they must fit its 4,096 bytes (a longer one is refused,
    # tested below); its text does not count
    arg = draw(st.text(max_size=60).filter(lambda s: "\x00" not in s and not _has_surrogate(s)))
    return AIMessage(
        "",
        tool_calls=[{"name": "lookup", "args": {"q": arg}, "id": "call-1", "type": "tool_call"}],
    )


#: (session_id, scope) of the histories sharing one memory: same session id
#: with and without a wider scope, other session ids, a scope_key clash
HISTORIES = [
    ("s1", None),
    ("s1", {"user": "u1"}),
    ("s1", {"user": "u2"}),
    ("s2", None),
    ("s2", {"user": "u1"}),
    ("日本 ", None),
]


class HistoryIsolation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.memory = _memory()
        self.histories = [
            JevmemChatMessageHistory(self.memory, sid, scope=scope) for sid, scope in HISTORIES
        ]
        self.model: list[list[BaseMessage]] = [[] for _ in HISTORIES]
        self.others: set[int] = set()  # observations that are no history's

    @rule(h=st.integers(0, len(HISTORIES) - 1), batch=st.lists(messages(), max_size=3))
    def add(self, h: int, batch: list[BaseMessage]) -> None:
        self.histories[h].add_messages(batch)
        self.model[h].extend(batch)

    @rule(h=st.integers(0, len(HISTORIES) - 1))
    def clear(self, h: int) -> None:
        self.histories[h].clear()
        self.model[h] = []

    @rule(h=st.integers(0, len(HISTORIES) - 1), text=word_str, fake=st.booleans())
    def other_observation(self, h: int, text: str, fake: bool) -> None:
        """An observation in a history's exact scope that is not a message (or
        one with a message-looking field of the wrong type)."""
        meta = {"lc_message": 7} if fake else {"topic": "x"}
        self.others.add(self.memory.add(text, scope=self.histories[h].scope, metadata=meta))

    @rule(h=st.integers(0, len(HISTORIES) - 1), bad=st.sampled_from(["a\x00b", "\ud800"]))
    def refused_message(self, h: int, bad: str) -> None:
        before = _snapshot(self.memory)
        with pytest.raises(InvalidInputError):
            self.histories[h].add_messages([HumanMessage("fine"), HumanMessage(bad)])
        assert _snapshot(self.memory) == before

    @invariant()
    def each_reads_its_own(self) -> None:
        for h, want in zip(self.histories, self.model, strict=True):
            got = h.messages
            assert got == want
            assert [json.dumps(m.model_dump(), sort_keys=True, default=str) for m in got] == [
                json.dumps(m.model_dump(), sort_keys=True, default=str) for m in want
            ]
        held = {n.id for n in self.memory.list(None, None, 10_000)[0]}
        assert self.others <= held


HistoryIsolation.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestHistoryIsolation = HistoryIsolation.TestCase


def test_two_histories_that_share_a_scope_dict_share_messages() -> None:
    """Scope equality is what isolates: a history whose ``scope`` names its own
    ``scope_key`` keeps the session id (the pair given is overridden)."""
    m = _memory()
    a = JevmemChatMessageHistory(m, "s1")
    b = JevmemChatMessageHistory(m, "s2", scope={"session": "s1"})
    assert b.scope == {"session": "s2"}
    a.add_user_message("hello from a")
    assert b.messages == []


def test_history_keeps_a_long_message_the_memory_takes() -> None:
    m = _memory()
    text = "é" * 1000  # 2000 UTF-8 bytes; its JSON form escapes each as \\u00e9
    m.add(text)  # the memory takes the text
    h = JevmemChatMessageHistory(m, "s")
    long_reply = "a" * 50_000
    h.add_messages([AIMessage(text), AIMessage(long_reply), HumanMessage("  padded  ")])
    assert h.messages == [AIMessage(text), AIMessage(long_reply), HumanMessage("  padded  ")]
    # other fields must fit one metadata value: a longer tool call is refused
    # with the batch, and nothing of it is stored
    call = {"name": "lookup", "args": {"q": "x" * 5000}, "id": "c", "type": "tool_call"}
    with pytest.raises(InvalidInputError, match="4096"):
        h.add_messages([AIMessage("fine"), AIMessage("", tool_calls=[call])])
    assert len(h.messages) == 3
    # a note of the history's scope that is not a message is neither read nor cleared
    note = m.add("a note", scope=h.scope, metadata={"lc_message": 7})
    h.clear()
    assert h.messages == [] and note in m


# ---- LangChain retriever --------------------------------------------------------

NOTES: list[tuple[str, dict[str, str] | None, dict[str, Any]]] = [
    ("Maya started cello lessons with Ines", {"user": "u1"}, {"topic": "music", "p": 1}),
    ("Maya drinks green tea every morning", {"user": "u1"}, {"topic": "food", "p": 2}),
    ("Tom plays piano in Zürich", {"user": "u2"}, {"topic": "music", "p": 3}),
    ("Tom's garden has 日本 maples", {"user": "u2"}, {"topic": "garden", "p": 2**63 - 1}),
    ("A global note about the viola 🎻", None, {"topic": "music", "p": True}),
]


@pytest.fixture(scope="module")
def notes_memory() -> Memory:
    m = _memory()
    for i, (text, scope, meta) in enumerate(NOTES):
        m.add(text, scope=scope, metadata=meta, timestamp=1_709_287_200 + 3600 * i)
    return m


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=word_str,
    k=st.integers(1, 6),
    scope=read_scopes,
    filter=filters,
    mode=st.sampled_from(["full", "traversal", "anchors", "lexical"]),
    per_call=st.booleans(),
)
def test_retriever_is_memory_search(
    notes_memory: Memory, query: str, k: int, scope: Any, filter: Any, mode: Mode, per_call: bool
) -> None:
    m = notes_memory
    try:
        r = m.search(query, k, mode=mode, scope=scope, filter=filter)
    except JevmemError as exc:
        with pytest.raises(type(exc)):
            if per_call:
                JevmemRetriever(memory=m).invoke(query, k=k, scope=scope, filter=filter, mode=mode)
            else:
                JevmemRetriever(memory=m, k=k, scope=scope, filter=filter, mode=mode).invoke(query)
        return
    if per_call:
        docs = JevmemRetriever(memory=m).invoke(query, k=k, scope=scope, filter=filter, mode=mode)
    else:
        docs = JevmemRetriever(memory=m, k=k, scope=scope, filter=filter, mode=mode).invoke(query)
    assert [d.metadata["id"] for d in docs] == [e.id for e in r.evidence]
    for d, e in zip(docs, r.evidence, strict=True):
        node = m.get(e.id)
        assert d.id == str(e.id) and d.page_content == e.text
        assert math.isclose(d.metadata["score"], e.score, rel_tol=1e-6, abs_tol=1e-9)
        assert d.metadata["timestamp"] == e.timestamp
        assert d.metadata["time"] == iso_time(e.timestamp)
        assert _typed(d.metadata["metadata"]) == _typed(dict(node.metadata))
        assert d.metadata["scope"] == dict(node.scope)
    if docs:
        assert docs[0].metadata["jevmem_trace"]["mode"] == mode


def test_retriever_refuses_unknown_options_and_bad_k(notes_memory: Memory) -> None:
    r = JevmemRetriever(memory=notes_memory)
    with pytest.raises(InvalidInputError, match="unknown search options"):
        r.invoke("cello", scop={"user": "u1"})
    with pytest.raises(JevmemError):
        r.invoke("cello", k=0)

"""jevmem's LangChain retriever under langchain-tests' standard retriever
suite (unmodified: this file only supplies the fixtures it asks for), and the
chat-message history."""

from __future__ import annotations

import asyncio
import calendar
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_tests.integration_tests import RetrieversIntegrationTests

from jevmem import HashEmbedder, InvalidInputError, LocalController, Memory
from jevmem.integrations.langchain import JevmemChatMessageHistory, JevmemRetriever

NOTES = [
    ("Maya started cello lessons with Ines in March", "Maya", {"user": "u1"}, {"topic": "music"}),
    (
        "Maya practises the cello every evening after work",
        "Maya",
        {"user": "u1"},
        {"topic": "music"},
    ),
    ("Ines said Maya's cello tone improved a lot", "Ines", {"user": "u1"}, {"topic": "music"}),
    ("Maya bought a new cello bow in Vienna", "Maya", {"user": "u1"}, {"topic": "shopping"}),
    ("Tom plays cello in a jazz band on Fridays", "Tom", {"user": "u2"}, {"topic": "music"}),
    ("Tom's dog is called Biscuit", "Tom", {"user": "u2"}, {"topic": "pets"}),
]


def _memory() -> Memory:
    m = Memory(HashEmbedder(64), LocalController())
    for text, speaker, scope, meta in NOTES:
        m.add(text, speaker=speaker, scope=scope, metadata=meta, timestamp=1_700_000_000)
    return m


class TestJevmemRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[JevmemRetriever]:
        return JevmemRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": _memory()}

    @property
    def retriever_query_example(self) -> str:
        return "what does Maya do with her cello?"


def test_documents_carry_evidence() -> None:
    m = _memory()
    docs = JevmemRetriever(memory=m, k=3).invoke("Maya started cello lessons with Ines")
    top = docs[0]
    assert top.page_content == NOTES[0][0] and top.id == "0"
    meta = top.metadata
    assert meta["id"] == 0 and meta["speaker"] == "Maya" and meta["scope"] == {"user": "u1"}
    assert meta["metadata"] == {"topic": "music"} and meta["timestamp"] == 1_700_000_000
    assert meta["time"] == "2023-11-14T22:13:20Z" and 0 < meta["score"] <= 1
    assert meta["jevmem_trace"]["mode"] == "full"
    assert [d.metadata["score"] for d in docs] == sorted(
        (d.metadata["score"] for d in docs), reverse=True
    )


def test_scope_filter_and_per_call_options() -> None:
    m = _memory()
    r = JevmemRetriever(memory=m, k=10, scope={"user": "u2"})
    assert {d.page_content for d in r.invoke("cello")} <= {NOTES[4][0], NOTES[5][0]}
    assert NOTES[4][0] in {d.page_content for d in r.invoke("cello")}
    u1 = r.invoke("cello", scope={"user": "u1"}, filter={"topic": "shopping"})
    assert [d.page_content for d in u1] == [NOTES[3][0]]
    lexical = r.invoke("Biscuit", mode="lexical", k=1)
    assert [d.page_content for d in lexical] == [NOTES[5][0]]


def test_async_matches_sync() -> None:
    m = _memory()
    r = JevmemRetriever(memory=m, k=4)

    async def both() -> list[list[Document]]:
        return list(await asyncio.gather(r.ainvoke("cello lessons"), r.ainvoke("cello lessons")))

    a, b = asyncio.run(both())
    sync = r.invoke("cello lessons")
    assert [d.id for d in a] == [d.id for d in b] == [d.id for d in sync]


def test_bad_options_raise_jevmem_errors_and_change_nothing() -> None:
    m = _memory()
    before = m.stats()["nodes"]
    r = JevmemRetriever(memory=m)
    with pytest.raises(InvalidInputError):
        r.invoke("cello", filter={"$bogus": 1})
    with pytest.raises(InvalidInputError):
        r.invoke("cello", top_k=3)
    with pytest.raises(InvalidInputError):
        r.invoke("")
    assert m.stats()["nodes"] == before


def test_chat_history_round_trip_and_clear() -> None:
    m = _memory()
    h = JevmemChatMessageHistory(m, "chat-1", scope={"user": "u1"})
    other = JevmemChatMessageHistory(m, "chat-2")
    sent = [
        SystemMessage("You are a music tutor."),
        HumanMessage("I switched from cello to viola last week"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "viola"}, "id": "call-1"}]),
        ToolMessage("viola: alto clef", tool_call_id="call-1"),
        AIMessage("Viola reads the alto clef."),
    ]
    h.add_messages(sent[:2])
    h.add_message(sent[2])
    asyncio.run(h.aadd_messages(sent[3:]))
    other.add_user_message("an unrelated chat")
    assert h.messages == sent
    assert asyncio.run(h.aget_messages()) == sent
    # the conversation is memory too: a scoped search finds what the user said
    found = m.search("switched from cello to viola", 3, scope={"session": "chat-1"}).evidence
    assert found[0].text == "I switched from cello to viola last week"
    assert found[0].provenance["speaker"] == "human"
    nodes_before = len(m)
    h.clear()
    assert h.messages == [] and len(m) == nodes_before - len(sent)
    assert [x.content for x in other.messages] == ["an unrelated chat"]
    assert len(m) == len(NOTES) + 1


def test_chat_history_reads_and_clears_only_its_own_scope() -> None:
    """Histories with the same session id but different scopes are different
    conversations: a scoped list selects every node whose scope holds the
    pairs asked for, so without an exact-scope check the unscoped history
    would read, and clear, the user's messages too."""
    m = _memory()
    mine = JevmemChatMessageHistory(m, "chat-1", scope={"user": "u1"})
    anon = JevmemChatMessageHistory(m, "chat-1")
    team = JevmemChatMessageHistory(m, "chat-1", scope={"user": "u1", "team": "t"})
    mine.add_user_message("u1: my PIN is 4321")
    anon.add_user_message("anon: hello")
    team.add_user_message("team: standup at nine")
    m.add("a note, not a message", scope={"session": "chat-1"})
    assert [x.content for x in anon.messages] == ["anon: hello"]
    assert [x.content for x in mine.messages] == ["u1: my PIN is 4321"]
    assert [x.content for x in asyncio.run(anon.aget_messages())] == ["anon: hello"]
    anon.clear()
    assert anon.messages == []
    assert [x.content for x in mine.messages] == ["u1: my PIN is 4321"]
    assert [x.content for x in team.messages] == ["team: standup at nine"]
    asyncio.run(mine.aclear())
    assert mine.messages == [] and [x.content for x in team.messages] == ["team: standup at nine"]
    assert len(m) == len(NOTES) + 2  # the note and the team's message


def test_documents_time_has_a_four_digit_year() -> None:
    m = Memory(HashEmbedder(64), LocalController())
    m.add("Maya tuned the cello", timestamp=int(calendar.timegm((3, 1, 1, 0, 0, 0))))
    (doc,) = JevmemRetriever(memory=m, k=1).invoke("cello")
    assert doc.metadata["time"] == "0003-01-01T00:00:00Z"


def test_chat_history_refuses_what_it_cannot_store() -> None:
    m = _memory()
    with pytest.raises(InvalidInputError):
        JevmemChatMessageHistory(m, "")
    h = JevmemChatMessageHistory(m, "s")
    with pytest.raises(InvalidInputError):
        h.add_messages([HumanMessage("fine"), "not a message"])  # type: ignore[list-item]
    assert h.messages == [] and len(m) == len(NOTES)


def test_chat_history_keeps_long_block_content_and_cjk_within_the_metadata_limit() -> None:
    """List content (Anthropic, OpenAI Responses) keeps its text as the
    observation's, as plain string content does: only the blocks' other
    parts go in the 4,096-byte metadata value, written as UTF-8."""
    m = Memory(HashEmbedder(64), LocalController())
    h = JevmemChatMessageHistory(m, "s1")
    reply = AIMessage(
        content=[
            {"type": "text", "text": "日本語の移行計画には段階がある。" * 120, "annotations": []},
            {"type": "tool_use", "id": "toolu_1", "name": "plan", "input": {"step": "二"}},
            "a plain string part, ",
            {"id": "b3", "type": "text", "text": "then the English summary. " * 60},
            {"type": "text", "text": ""},
        ],
        tool_calls=[{"name": "plan", "args": {"q": "日本" * 350}, "id": "c1", "type": "tool_call"}],
    )
    assert len(reply.text.encode()) > 4096
    h.add_messages([reply, HumanMessage(content=["only ", "strings"])])
    got = h.messages
    assert got == [reply, HumanMessage(content=["only ", "strings"])]
    assert json.dumps(got[0].content) == json.dumps(reply.content)  # key order too
    (node, _) = m.list({"session": "s1"}, limit=2)[0]
    assert node.text == reply.text
    # a lone surrogate, which UTF-8 cannot hold, is escaped instead
    odd = HumanMessage("hi", additional_kwargs={"x": "a\ud800b"})
    h.add_messages([odd])
    assert h.messages[-1] == odd


def test_chat_history_reads_forms_stored_before_list_content_was_split() -> None:
    m = Memory(HashEmbedder(64), LocalController())
    blocks = AIMessage(
        content=[{"type": "text", "text": "Viola "}, "reads alto clef", {"type": "x"}]
    )
    plain = AIMessage("Viola reads the alto clef.", tool_calls=[])
    plain_form = message_to_dict(plain)
    del plain_form["data"]["content"]
    # as the history wrote them: json.dumps, list content whole, str content left out
    for msg, form in [(blocks, message_to_dict(blocks)), (plain, plain_form)]:
        m.add(
            msg.text,
            speaker="ai",
            scope={"session": "s1"},
            metadata={"lc_message": json.dumps(form), "lc_type": "ai"},
        )
    assert JevmemChatMessageHistory(m, "s1").messages == [blocks, plain]


_WORDS = ["cello", "viola", "lesson", "Maya", "Ines", "garden", "pizza", "Friday", "band", "dog"]
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=0, max_size=40)
_MESSAGE = st.one_of(_TEXT.map(HumanMessage), _TEXT.map(AIMessage), _TEXT.map(SystemMessage))


@given(
    notes=st.lists(
        st.tuples(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6), st.integers(0, 2)),
        min_size=1,
        max_size=12,
    ),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3),
    user=st.integers(0, 2),
    k=st.integers(1, 12),
)
@settings(max_examples=50, deadline=None)
def test_property_scoped_documents_stay_in_scope(
    notes: list[tuple[list[str], int]], query: list[str], user: int, k: int
) -> None:
    m = Memory(HashEmbedder(64), LocalController())
    owner = {}
    for words, u in notes:
        owner[m.add(" ".join(words), scope={"user": f"u{u}"})] = u
    docs = JevmemRetriever(memory=m, k=k, scope={"user": f"u{user}"}).invoke(" ".join(query))
    assert len(docs) <= min(k, sum(1 for u in owner.values() if u == user))
    for d in docs:
        assert owner[d.metadata["id"]] == user and d.metadata["scope"] == {"user": f"u{user}"}
        assert d.id == str(d.metadata["id"])


@given(chunks=st.lists(st.lists(_MESSAGE, max_size=4), max_size=4), other=_MESSAGE)
@settings(max_examples=50, deadline=None)
def test_property_history_round_trips_in_order(
    chunks: list[list[BaseMessage]], other: BaseMessage
) -> None:
    m = Memory(HashEmbedder(64), LocalController())
    h = JevmemChatMessageHistory(m, "s1")
    neighbour = JevmemChatMessageHistory(m, "s2")
    neighbour.add_message(other)
    sent: list[BaseMessage] = []
    for chunk in chunks:
        h.add_messages(chunk)
        sent += chunk
    assert h.messages == sent
    h.clear()
    assert h.messages == [] and neighbour.messages == [other] and len(m) == 1


@pytest.mark.parametrize("k", [True, 0, 3.0, "3", 10_001, 2**70])
def test_a_retriever_refuses_a_bad_k_when_made(k: Any) -> None:
    # as a per-call k is: an int (not a bool) in 1 .. 10,000, checked up front
    with pytest.raises(ValueError, match="k"):
        JevmemRetriever(memory=_memory(), k=k)
    assert JevmemRetriever(memory=_memory(), k=10_000).k == 10_000
    assert JevmemRetriever(memory=_memory(), k=np.int64(3)).k == 3

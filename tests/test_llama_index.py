"""jevmem's LlamaIndex retriever, tested the way llama-index-core tests its
own retrievers: build the index (here a memory) from a few documents,
retrieve with a string and with a QueryBundle, and check the nodes, their
order and scores, and the callback events."""

from __future__ import annotations

import asyncio
import calendar

import pytest
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from jevmem import HashEmbedder, InvalidInputError, LocalController, Memory
from jevmem.integrations.llama_index import JevmemRetriever

DOC_LINES = [
    "Maya started cello lessons with Ines in March",
    "Ines said Maya's cello tone improved a lot",
    "Maya bought a new cello bow in Vienna",
    "Tom plays the drums in a jazz band on Fridays",
    "Tom's dog is called Biscuit",
]


@pytest.fixture()
def memory() -> Memory:
    m = Memory(HashEmbedder(64), LocalController())
    for i, line in enumerate(DOC_LINES):
        user = "u1" if i < 3 else "u2"
        m.add(
            line,
            speaker=line.split()[0].split("'")[0],
            timestamp=1_700_000_000 + 60 * i,
            scope={"user": user},
            metadata={"topic": "pets" if "dog" in line else "music"},
        )
    return m


def test_retrieve_default(memory: Memory) -> None:
    retriever = JevmemRetriever(memory, similarity_top_k=2)
    nodes = retriever.retrieve("Maya started cello lessons with Ines")
    assert len(nodes) == 2
    assert all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    assert nodes[0].node.get_content() == DOC_LINES[0]
    assert nodes[0].node.node_id == "jevmem:0"
    scores = [n.score for n in nodes]
    assert all(s is not None and 0 < s <= 1 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_retrieve_query_bundle(memory: Memory) -> None:
    retriever = JevmemRetriever(memory, similarity_top_k=5)
    by_str = retriever.retrieve("Biscuit the dog")
    by_bundle = retriever.retrieve(QueryBundle(query_str="Biscuit the dog"))
    assert [n.node.node_id for n in by_str] == [n.node.node_id for n in by_bundle]
    assert by_bundle[0].node.get_content() == DOC_LINES[4]


def test_node_metadata_and_llm_view(memory: Memory) -> None:
    (top,) = JevmemRetriever(memory, similarity_top_k=1).retrieve("Maya cello bow Vienna")
    meta = top.node.metadata
    assert meta["jevmem_id"] == 2 and meta["speaker"] == "Maya"
    assert meta["scope"] == {"user": "u1"} and meta["metadata"] == {"topic": "music"}
    assert meta["time"] == "2023-11-14T22:15:20Z" and meta["via"] is None
    llm_text = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "speaker: Maya" in llm_text and "time: 2023-11-14T22:15:20Z" in llm_text
    assert "jevmem_id" not in llm_text and "scope" not in llm_text


def test_retrieve_scope_and_filter(memory: Memory) -> None:
    u2 = JevmemRetriever(memory, similarity_top_k=5, scope={"user": "u2"})
    got = {n.node.get_content() for n in u2.retrieve("Maya cello lessons")}
    assert got <= set(DOC_LINES[3:])
    pets = JevmemRetriever(memory, similarity_top_k=5, filter={"topic": "pets"})
    assert [n.node.get_content() for n in pets.retrieve("jazz band drums")] == [DOC_LINES[4]]
    lexical = JevmemRetriever(memory, similarity_top_k=1, mode="lexical")
    assert [n.node.get_content() for n in lexical.retrieve("drums")] == [DOC_LINES[3]]
    assert lexical.last_trace is not None and lexical.last_trace["mode"] == "lexical"


def test_aretrieve(memory: Memory) -> None:
    retriever = JevmemRetriever(memory, similarity_top_k=3)
    sync = retriever.retrieve("cello")
    concurrent = asyncio.run(_gather(retriever, "cello", 3))
    for got in concurrent:
        assert [n.node.node_id for n in got] == [n.node.node_id for n in sync]


async def _gather(r: JevmemRetriever, q: str, n: int) -> list[list[NodeWithScore]]:
    return list(await asyncio.gather(*(r.aretrieve(q) for _ in range(n))))


def test_callback_events(memory: Memory) -> None:
    handler = LlamaDebugHandler()
    retriever = JevmemRetriever(
        memory, similarity_top_k=2, callback_manager=CallbackManager([handler])
    )
    retriever.retrieve("cello")
    (pair,) = handler.get_event_pairs(CBEventType.RETRIEVE)
    end = pair[-1].payload
    assert end is not None and len(end["nodes"]) == 2


def test_bad_arguments(memory: Memory) -> None:
    for bad in (0, -1, True, "3"):
        with pytest.raises(InvalidInputError):
            JevmemRetriever(memory, similarity_top_k=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        JevmemRetriever("not a memory")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        JevmemRetriever(memory, filter={"$bogus": 1}).retrieve("cello")
    assert len(memory) == len(DOC_LINES)


def test_node_time_has_a_four_digit_year() -> None:
    m = Memory(HashEmbedder(64), LocalController())
    for year in (3, 999, 1000, 9997):
        m.add(f"cello in year {year}", timestamp=int(calendar.timegm((year, 6, 1, 12, 0, 0))))
    nodes = JevmemRetriever(m, similarity_top_k=4, mode="lexical").retrieve("cello")
    assert sorted(n.node.metadata["time"] for n in nodes) == [
        "0003-06-01T12:00:00Z",
        "0999-06-01T12:00:00Z",
        "1000-06-01T12:00:00Z",
        "9997-06-01T12:00:00Z",
    ]


def test_what_a_node_lacks_is_not_shown_to_the_model() -> None:
    m = Memory(HashEmbedder(64), LocalController())
    m.add("the build server disk is full again")
    (top,) = JevmemRetriever(m, similarity_top_k=1).retrieve("build server disk")
    llm_text = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "None" not in llm_text and llm_text.endswith("the build server disk is full again")

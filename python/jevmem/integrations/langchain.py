"""LangChain over a jevmem memory (the ``langchain`` extra: langchain-core).

- :class:`JevmemRetriever`: a ``BaseRetriever`` whose documents are a
  memory's evidence for the query (sync and async; ``k``, ``scope``,
  ``filter`` and ``mode`` on the retriever or per call);
- :class:`JevmemChatMessageHistory`: a ``BaseChatMessageHistory`` that keeps
  a conversation's messages as observations in the memory, in its own scope,
  so what was said is also there for retrieval.

>>> from jevmem import Memory
>>> from jevmem.integrations.langchain import JevmemRetriever
>>> memory = Memory()
>>> _ = memory.add("Maya started cello lessons with Ines", speaker="Maya")
>>> JevmemRetriever(memory=memory, k=1).invoke("who teaches Maya?")[0].page_content
'Maya started cello lessons with Ines'
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator

from jevmem._core import Node
from jevmem._validate import k_arg
from jevmem.errors import InvalidInputError
from jevmem.integrations._common import evidence_dict, memory_lock, short_trace
from jevmem.memory import Memory

__all__ = ["JevmemChatMessageHistory", "JevmemRetriever"]

SearchMode = Literal["full", "traversal", "anchors", "lexical"]


class JevmemRetriever(BaseRetriever):
    """Documents from a jevmem memory's search: ``page_content`` is the
    observation's text, ``id`` its node id as a string, and ``metadata`` holds
    the score, speaker, observation time, provenance, scope, the node's own
    metadata, how it was reached (``via``), resolved time references and
    supersedes links. The first document also carries the search's short trace
    under ``metadata["jevmem_trace"]``.

    ``k``, ``scope``, ``filter`` and ``mode`` may also be passed per call:
    ``retriever.invoke("query", k=3, scope={"user": "u1"})``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Memory
    """The memory to search."""
    k: int = 4
    """How many documents, at most."""
    scope: dict[str, str] | None = None
    """Search only these observations (see `Memory.search`)."""
    filter: dict[str, Any] | None = None
    """Metadata conditions every document must meet (see `Memory.search`)."""
    mode: SearchMode = "full"
    """The read path (see `Memory.search`)."""

    @field_validator("k", mode="before")
    @classmethod
    def _k(cls, value: Any) -> int:
        # as a per-call k is: an int (numpy's too, not a bool) in 1 .. MAX_K
        return k_arg(value)

    def _search(self, query: str, kwargs: dict[str, Any]) -> list[Document]:
        unknown = set(kwargs) - {"k", "scope", "filter", "mode", "now"}
        if unknown:
            raise InvalidInputError(f"unknown search options {sorted(unknown)}")
        with memory_lock(self.memory):
            r = self.memory.search(
                query,
                kwargs.get("k", self.k),
                now=kwargs.get("now"),
                mode=kwargs.get("mode", self.mode),
                scope=kwargs.get("scope", self.scope),
                filter=kwargs.get("filter", self.filter),
            )
            items = [evidence_dict(self.memory, e) for e in r.evidence]
        docs = []
        for item in items:
            text = item.pop("text")
            node_id = item.pop("id")
            docs.append(
                Document(page_content=text, id=str(node_id), metadata={"id": node_id, **item})
            )
        if docs:
            docs[0].metadata["jevmem_trace"] = short_trace(r)
        return docs

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._search(query, kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        # the search is CPU work in Rust and the embedder: off the event loop
        return await asyncio.to_thread(self._search, query, kwargs)


# metadata fields the history writes on each message's observation:
#: the message as LangChain's dict form (JSON), for an exact round trip; its
#: content is left out where it is the observation's text
_MESSAGE = "lc_message"
_TYPE = "lc_type"  # human, ai, system, tool...
#: in a stored form whose content is a list of blocks: ``[[index, length],
#: ...]`` of its text parts (a plain string, or a text block's ``"text"``),
#: which are stored as null; the observation's text is their concatenation
_TEXT_PARTS = "jevmem_text_parts"


def _is_text_part(block: object) -> bool:
    # the parts LangChain's ``BaseMessage.text`` joins
    return isinstance(block, str) or (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _without_text(content: list[Any], text: str) -> tuple[list[Any], list[list[int]]] | None:
    """``content`` with its text parts nulled, and where they were; None when
    they do not join to ``text`` (then the content is kept whole)."""
    kept: list[Any] = []
    parts: list[list[int]] = []
    pieces: list[str] = []
    for i, block in enumerate(content):
        if not _is_text_part(block):
            kept.append(block)
            continue
        piece = block if isinstance(block, str) else block["text"]
        pieces.append(piece)
        parts.append([i, len(piece)])
        # a block keeps its key order: "text" stays where it was, as null
        kept.append(None if isinstance(block, str) else {**block, "text": None})
    return (kept, parts) if parts and "".join(pieces) == text else None


def _with_text(content: list[Any], parts: list[list[int]], text: str) -> list[Any]:
    """The content `_without_text` took apart, its text parts cut from ``text``."""
    out = list(content)
    at = 0
    for i, n in parts:
        piece, at = text[at : at + n], at + n
        out[i] = piece if out[i] is None else {**out[i], "text": piece}
    return out


def _dumps(form: dict[str, Any]) -> str:
    # UTF-8 as it is (an escaped CJK character is 6 bytes against 3), unless
    # a lone surrogate, which UTF-8 cannot hold, needs JSON's \u escape
    raw = json.dumps(form, ensure_ascii=False)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(form)
    return raw


class JevmemChatMessageHistory(BaseChatMessageHistory):
    """A conversation's messages kept as observations of a memory.

    Every message is stored in scope ``{scope_key: session_id}`` (plus any
    ``scope`` pairs given), with the message type as speaker, so it can be
    recalled later like any other observation; ``messages`` returns them in
    the order they were added, exactly as given (tool calls and additional
    fields included); ``clear`` forgets them (and only them). A history
    reads and clears only the messages stored with exactly its scope: one
    with no ``scope`` does not see those of a history with the same session
    id and ``scope={"user": "u1"}``.

    A message without text (a tool-call-only AI message) is stored with the
    text ``"(no text)"`` so that it can be kept; it round-trips unchanged.
    A message's text is its observation's, of any length the memory takes
    (with list content, the text blocks' text joined, as ``message.text``);
    its other fields (tool calls, additional kwargs, the other parts of the
    blocks) are kept in one metadata value, as UTF-8 JSON, so together they
    must fit its 4,096 bytes (a longer message is refused, with its whole
    batch).
    """

    def __init__(
        self,
        memory: Memory,
        session_id: str,
        *,
        scope_key: str = "session",
        scope: dict[str, str] | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInputError("session_id must be a non-empty string")
        self.memory = memory
        self.session_id = session_id
        self.scope = {**(scope or {}), scope_key: session_id}

    def _own(self) -> list[Node]:
        """This history's message nodes, oldest first: those stored with
        exactly its scope. A scoped list selects every node whose scope holds
        the pairs asked for, so a history with scope ``{session: s}`` would
        also reach the messages of ``{user: u1, session: s}``; those belong to
        another history and are left out. The caller holds the memory's lock."""
        own: list[Node] = []
        cursor: str | None = None
        while True:
            nodes, cursor = self.memory.list(
                self.scope, {_MESSAGE: {"$exists": True}}, 1000, cursor
            )
            # a message is what this history wrote: its form as a JSON str
            # (another note of the scope with that key is not one, and stays)
            own.extend(
                n
                for n in nodes
                if dict(n.scope) == self.scope and isinstance(n.metadata.get(_MESSAGE), str)
            )
            if cursor is None:
                return own

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        with memory_lock(self.memory):
            nodes = self._own()
        out: list[BaseMessage] = []
        for n in nodes:
            form = json.loads(str(n.metadata[_MESSAGE]))  # a str: `_own` keeps no other
            data = form.get("data")
            parts = form.pop(_TEXT_PARTS, None)
            if isinstance(data, dict) and "content" not in data:
                # kept once, as the observation's text (see add_messages)
                form["data"] = {**data, "content": n.text}
            elif isinstance(data, dict) and parts is not None:
                form["data"] = {**data, "content": _with_text(data["content"], parts, n.text)}
            out.extend(messages_from_dict([form]))
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages as one batch (on a durable memory: one log record)."""
        texts, speakers, metadatas = [], [], []
        for m in messages:
            if not isinstance(m, BaseMessage):
                raise InvalidInputError(f"expected a LangChain message, got {type(m).__name__}")
            # (as written, spaces and all: then it is the content, kept once)
            text = m.text if m.text.strip() else "(no text)"
            form = message_to_dict(m)
            data = form.get("data")
            # the text is the observation's own: not kept a second time in the
            # metadata, whose values are short (a long reply fits)
            if isinstance(data, dict) and data.get("content") == text:
                form = {**form, "data": {k: v for k, v in data.items() if k != "content"}}
            elif isinstance(data, dict) and isinstance(data.get("content"), list):
                split = _without_text(data["content"], text)
                if split is not None:
                    form = {**form, "data": {**data, "content": split[0]}, _TEXT_PARTS: split[1]}
            texts.append(text)
            speakers.append(m.type)
            metadatas.append({_MESSAGE: _dumps(form), _TYPE: m.type})
        if not texts:
            return
        now = int(time.time())  # observation time: "what did I say yesterday" can be recalled
        with memory_lock(self.memory):
            self.memory.add_batch(
                texts,
                timestamps=[now] * len(texts),
                speakers=speakers,
                scopes=[self.scope] * len(texts),
                metadatas=metadatas,
            )

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, messages)

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    def clear(self) -> None:
        """Forget this conversation's messages, those stored with exactly its
        scope (other observations, and histories of a wider scope, stay)."""
        with memory_lock(self.memory):
            ids = [n.id for n in self._own()]
            if ids:
                self.memory.forget(ids)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

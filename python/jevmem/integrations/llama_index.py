"""LlamaIndex over a jevmem memory (the ``llama-index`` extra: llama-index-core).

:class:`JevmemRetriever` is a ``BaseRetriever`` whose nodes are a memory's
evidence for the query, as ``NodeWithScore`` (sync and async), so a memory
can stand wherever LlamaIndex takes a retriever (a ``RetrieverQueryEngine``,
a router, a fusion retriever).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from jevmem.errors import InvalidInputError
from jevmem.integrations._common import evidence_dict, memory_lock, short_trace
from jevmem.memory import Memory

__all__ = ["JevmemRetriever"]

#: the node metadata an LLM prompt shows; the rest (ids, scores, links) is kept off it
_FOR_THE_MODEL = ("speaker", "time")


class JevmemRetriever(BaseRetriever):
    """Nodes from a jevmem memory's search.

    Each ``TextNode`` has the observation's text, ``id_`` ``"jevmem:<node
    id>"`` and metadata: ``jevmem_id``, ``speaker``, ``time`` (ISO 8601) and
    ``timestamp``, ``provenance``, ``scope``, the node's own ``metadata``,
    ``via`` (the edge that reached it, or None), ``time_refs``,
    ``supersedes``/``superseded_by`` and ``valid_from``/``valid_to``; only
    speaker and time go into the text an LLM sees. The score is jevmem's
    evidence score. ``last_trace`` holds the short trace of the last search.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        similarity_top_k: int = 4,
        scope: dict[str, str] | None = None,
        filter: dict[str, Any] | None = None,
        mode: Literal["full", "traversal", "anchors", "lexical"] = "full",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not isinstance(memory, Memory):
            raise InvalidInputError(f"memory must be a jevmem Memory, got {type(memory).__name__}")
        if isinstance(similarity_top_k, bool) or not isinstance(similarity_top_k, int):
            raise InvalidInputError(
                f"similarity_top_k must be an integer, got {type(similarity_top_k).__name__}"
            )
        if similarity_top_k < 1:
            raise InvalidInputError(f"similarity_top_k must be at least 1, got {similarity_top_k}")
        self.memory = memory
        self.similarity_top_k = similarity_top_k
        self.scope = scope
        self.filter = filter
        self.mode = mode
        self.last_trace: dict[str, Any] | None = None
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        with memory_lock(self.memory):
            r = self.memory.search(
                query_bundle.query_str,
                self.similarity_top_k,
                mode=self.mode,
                scope=self.scope,
                filter=self.filter,
            )
            items = [evidence_dict(self.memory, e) for e in r.evidence]
        self.last_trace = short_trace(r)
        out = []
        for item in items:
            text = item.pop("text")
            score = item.pop("score")
            node_id = item.pop("id")
            metadata = {"jevmem_id": node_id, **item}
            # (a speaker or time the node lacks is not shown as "None")
            hidden = [k for k, v in metadata.items() if k not in _FOR_THE_MODEL or v is None]
            node = TextNode(
                id_=f"jevmem:{node_id}",
                text=text,
                metadata=metadata,
                excluded_llm_metadata_keys=hidden,
                excluded_embed_metadata_keys=hidden,
            )
            out.append(NodeWithScore(node=node, score=score))
        return out

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # the search is CPU work in Rust and the embedder: off the event loop
        return await asyncio.to_thread(self._retrieve, query_bundle)

"""jevmem: a fast, embeddable memory engine for long-running LLM agents.

The memory plane (graph, BM25, vector index, fusion, budgets, bounded
traversal) is Rust, in :mod:`jevmem._core`; this package re-exports it with
the exception tree of :mod:`jevmem.errors`.
"""

from __future__ import annotations

from jevmem._core import (
    Allowed,
    Candidate,
    Edge,
    Evidence,
    MemoryStore,
    Node,
    Supersedes,
    Traversal,
    TraversalConfig,
    WriteCandidate,
    __version__,
    depth_limit,
    largest_remainder,
    rrf,
    view_budgets,
)
from jevmem.answering import Answer, AnswerPrompt, SummaryPrompt, SystemTwoSummariser
from jevmem.controller import LearnedController, LocalController, SystemOne, default_controller
from jevmem.embed import (
    Embedder,
    EmbedderUnavailableError,
    HashEmbedder,
    OnnxEmbedder,
    default_embedder,
)
from jevmem.errors import (
    DimensionMismatchError,
    DurabilityError,
    InvalidConfigError,
    InvalidInputError,
    InvalidScoreError,
    InvalidTypeError,
    JevmemError,
    MissingDependencyError,
    NodeNotFoundError,
    SnapshotError,
    SystemTwoConnectionError,
    SystemTwoError,
    SystemTwoHTTPError,
    SystemTwoResponseError,
    SystemTwoTimeoutError,
    TraversalStateError,
    UnknownQuestionKindError,
    VectorIndexError,
)
from jevmem.memory import EvidenceItem, Memory, MemoryConfig, SearchResult, Via
from jevmem.system_two import ChatCompletionsClient, Completion, SystemTwo

__all__ = [
    "Allowed",
    "Answer",
    "AnswerPrompt",
    "Candidate",
    "ChatCompletionsClient",
    "Completion",
    "DimensionMismatchError",
    "DurabilityError",
    "Edge",
    "Embedder",
    "EmbedderUnavailableError",
    "Evidence",
    "EvidenceItem",
    "HashEmbedder",
    "InvalidConfigError",
    "InvalidInputError",
    "InvalidScoreError",
    "InvalidTypeError",
    "JevmemError",
    "LearnedController",
    "LocalController",
    "Memory",
    "MemoryConfig",
    "MemoryStore",
    "MissingDependencyError",
    "Node",
    "NodeNotFoundError",
    "OnnxEmbedder",
    "SearchResult",
    "SnapshotError",
    "SummaryPrompt",
    "Supersedes",
    "SystemOne",
    "SystemTwo",
    "SystemTwoConnectionError",
    "SystemTwoError",
    "SystemTwoHTTPError",
    "SystemTwoResponseError",
    "SystemTwoSummariser",
    "SystemTwoTimeoutError",
    "Traversal",
    "TraversalConfig",
    "TraversalStateError",
    "UnknownQuestionKindError",
    "VectorIndexError",
    "Via",
    "WriteCandidate",
    "__version__",
    "default_controller",
    "default_embedder",
    "depth_limit",
    "largest_remainder",
    "rrf",
    "view_budgets",
]

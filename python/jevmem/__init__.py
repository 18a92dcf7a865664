"""jevmem: a fast, embeddable memory engine for long-running LLM agents.

The memory plane (graph, BM25, vector index, fusion, budgets, bounded
traversal) is Rust, in :mod:`jevmem._core`; this package re-exports it with
the exception tree of :mod:`jevmem.errors`.
"""

from __future__ import annotations

from jevmem._core import (
    Edge,
    MemoryStore,
    Node,
    WriteCandidate,
    __version__,
)
from jevmem.embed import HashEmbedder
from jevmem.errors import (
    DimensionMismatchError,
    InvalidConfigError,
    InvalidInputError,
    InvalidScoreError,
    JevmemError,
    NodeNotFoundError,
    SnapshotError,
    TraversalStateError,
    VectorIndexError,
)

__all__ = [
    "DimensionMismatchError",
    "Edge",
    "HashEmbedder",
    "InvalidConfigError",
    "InvalidInputError",
    "InvalidScoreError",
    "JevmemError",
    "MemoryStore",
    "Node",
    "NodeNotFoundError",
    "SnapshotError",
    "TraversalStateError",
    "VectorIndexError",
    "WriteCandidate",
    "__version__",
]

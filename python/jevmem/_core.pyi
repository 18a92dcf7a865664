"""Type stubs for the native module ``jevmem._core`` (hand-written)."""

from collections.abc import Sequence
from os import PathLike
from typing import Literal, final

import numpy as np
import numpy.typing as npt

__version__: str

ViewName = Literal["semantic", "temporal", "causal", "entity"]
TemporalLabel = Literal["before", "after", "during", "contains", "overlaps", "same_time", "unknown"]
EdgeOrigin = Literal["rule", "controller"]
Upsert = Literal["inserted", "strengthened", "unchanged"]
TypeScores = tuple[float, float, float, float]
VectorLike = npt.ArrayLike

@final
class Node:
    """A stored node, copied out of the memory."""

    @property
    def id(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def provenance(self) -> dict[str, str]: ...
    @property
    def entities(self) -> list[str]: ...
    @property
    def types(self) -> TypeScores:
        """(episodic, semantic, procedural, preference), each in [0, 1]."""

@final
class Edge:
    """A typed edge; causal edges point cause -> effect."""

    @property
    def src(self) -> int: ...
    @property
    def dst(self) -> int: ...
    @property
    def view(self) -> ViewName: ...
    @property
    def weight(self) -> float: ...
    @property
    def origin(self) -> EdgeOrigin: ...
    @property
    def temporal_label(self) -> TemporalLabel | None: ...

@final
class WriteCandidate:
    """An earlier node proposed for relation judgment with a new one."""

    @property
    def id(self) -> int: ...
    @property
    def score(self) -> float: ...
    @property
    def vector(self) -> float: ...
    @property
    def lexical(self) -> float: ...
    @property
    def entity(self) -> float: ...
    @property
    def temporal(self) -> float: ...

@final
class MemoryStore:
    """Canonical nodes in a four-view graph with BM25 and cosine vector indexes.

    Thread-safe: searches run in parallel with the GIL released; writes are
    serialised. Every error leaves the memory exactly as it was.
    """

    def __init__(
        self,
        dim: int,
        *,
        quantization: Literal["f32", "f16", "i8"] = "f32",
        exact_threshold: int | None = None,
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 64,
        bm25_k1: float = 1.2,
        bm25_b: float = 0.75,
        stem: bool = True,
        stopwords: bool = True,
        candidate_k: int = 10,
        candidate_pool: int = 32,
        max_text_bytes: int = 65536,
    ) -> None: ...
    @property
    def dim(self) -> int: ...
    @property
    def next_id(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, id: int) -> bool: ...
    def add(
        self,
        text: str,
        embedding: VectorLike,
        *,
        timestamp: int | None = None,
        provenance: dict[str, str] | None = None,
        entities: Sequence[str] | None = None,
        types: TypeScores | None = None,
    ) -> int: ...
    def add_batch(
        self,
        texts: Sequence[str],
        embeddings: VectorLike,
        *,
        timestamps: Sequence[int | None] | None = None,
        provenances: Sequence[dict[str, str] | None] | None = None,
        entities: Sequence[Sequence[str] | None] | None = None,
        types: Sequence[TypeScores | None] | None = None,
    ) -> list[int]: ...
    def add_edge(
        self,
        src: int,
        dst: int,
        view: ViewName,
        weight: float,
        *,
        origin: EdgeOrigin = "controller",
        temporal_label: TemporalLabel | None = None,
    ) -> Upsert: ...
    def add_edges(self, edges: Sequence[tuple[object, ...]]) -> list[Upsert]: ...
    def set_types(self, id: int, types: TypeScores) -> None: ...
    def remove(self, id: int) -> None: ...
    def get(self, id: int) -> Node: ...
    def embedding(self, id: int) -> npt.NDArray[np.float32]: ...
    def neighbors(self, id: int, view: ViewName | None = None) -> list[Edge]: ...
    def tokenize(self, text: str) -> list[str]: ...
    def search_lexical(
        self, query: str, k: int = 10
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]: ...
    def search_vector(
        self, query: VectorLike, k: int = 10
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]: ...
    def fused_anchors(
        self,
        text: str | None = None,
        vector: VectorLike | None = None,
        k: int = 10,
        *,
        depth: int = 50,
        kappa: float = 60.0,
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float64]]: ...
    def write_candidates(self, id: int, k: int | None = None) -> list[WriteCandidate]: ...
    def nodes_with_entity(self, entity: str) -> list[int]: ...
    def stats(self) -> dict[str, int]: ...
    def save(self, path: str | PathLike[str]) -> None: ...
    @staticmethod
    def load(path: str | PathLike[str]) -> MemoryStore: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> MemoryStore: ...

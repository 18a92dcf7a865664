"""Type stubs for the native module ``jevmem._core`` (hand-written)."""

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any, Literal, final

import numpy as np
import numpy.typing as npt

__version__: str
#: The default ``max_text_bytes``: 4 MiB.
DEFAULT_MAX_TEXT_BYTES: int
#: The largest write-ahead log record (1 GiB): one durable write request at most.
MAX_LOG_RECORD_BYTES: int
TIME_PRECISIONS: list[str]
SIGNAL_COLUMNS: list[str]
#: the validity columns of `ReadSession.signals`, in order
FACT_COLUMNS: list[str]
#: the columns `ReadSession.round` adds to a candidate's signals, in order
ROUND_COLUMNS: list[str]
ENTITY_PROVENANCE_KEYS: list[str]
LIST_PROVENANCE_KEYS: list[str]

ViewName = Literal["semantic", "temporal", "causal", "entity"]
TemporalLabel = Literal["before", "after", "during", "contains", "overlaps", "same_time", "unknown"]
EdgeOrigin = Literal["rule", "controller"]
Upsert = Literal["inserted", "strengthened", "unchanged"]
TypeScores = tuple[float, float, float, float]
VectorLike = npt.ArrayLike
Span = tuple[int, int]
#: (text, start, end, precision, relative, span_start, span_end, anchor_precision or "")
TimeRefTuple = tuple[str, int, int, str, bool, int, int, str]
# span start, span end (code points), start, end, precision, relative, anchor precision
GroundedTuple = tuple[int, int, int, int, str, bool, str]
#: `query_time_cues`: temporal, score, asks when / duration / order, recency,
#: the cues found, the grounded times, their hull
TimeCuesTuple = tuple[
    bool, float, bool, bool, bool, bool, list[str], list[GroundedTuple], tuple[int, int] | None
]
#: One node's passage vectors: an ``(m, dim)`` array and its ``m`` character spans.
Passages = tuple[VectorLike, Sequence[Span]]
MetaValue = str | int | float | bool
#: Scope pairs ({"user": "u1", "session": "s3"}); None or {}: global.
Scope = dict[str, str]
Metadata = dict[str, MetaValue]
#: A filter dict (see ``jevmem.Memory.search``).
FilterDict = dict[str, Any]

@final
class Allowed:
    """The nodes one scoped or filtered read may see (``MemoryStore.select``),
    as they were when it was made; pass it as ``allowed=`` to the searches."""

    def __len__(self) -> int: ...
    def __contains__(self, id: int, /) -> bool: ...
    def ids(self) -> list[int]:
        """The allowed ids, ascending."""

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
    @property
    def scope(self) -> Scope:
        """Scope pairs; empty for a global node."""
    @property
    def metadata(self) -> Metadata: ...
    @property
    def key(self) -> str | None:
        """The idempotency key it was written with."""

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
class Supersedes:
    """A supersedes link: ``new`` updates, replaces or contradicts what ``old`` stated."""

    @property
    def new(self) -> int: ...
    @property
    def old(self) -> int: ...
    @property
    def weight(self) -> float: ...
    @property
    def origin(self) -> EdgeOrigin: ...

#: (valid_from, valid_to, supersedes as (id, weight), superseded_by as (id, weight))
FactChain = tuple[int | None, int | None, list[tuple[int, float]], list[tuple[int, float]]]

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
    # what relation judgment reads about the pair, each 0 or 1 but alias
    @property
    def same_session(self) -> float: ...
    @property
    def same_speaker(self) -> float: ...
    @property
    def older(self) -> float: ...
    @property
    def alias(self) -> float: ...

@final
class MemoryStore:
    """Canonical nodes in a four-view graph with BM25 and cosine vector indexes.

    Thread-safe: searches run in parallel with the GIL released; writes are
    serialised. Every error leaves the memory exactly as it was.
    """

    def __new__(
        cls,
        dim: int,
        *,
        quantization: Literal["f32", "f16", "i8"] = "f32",
        exact_threshold: int | None = None,
        connectivity: int | None = None,
        expansion_add: int | None = None,
        expansion_search: int | None = None,
        bm25_k1: float | None = None,
        bm25_b: float | None = None,
        stem: bool = True,
        stopwords: bool = True,
        candidate_k: int | None = None,
        candidate_pool: int | None = None,
        max_text_bytes: int | None = None,
        lexical_fields: Sequence[str] | None = None,
    ) -> MemoryStore:
        """None takes a setting's default: ``connectivity`` 16, ``expansion_add``
        128, ``expansion_search`` growing with the index, ``bm25_k1`` 1.2,
        ``bm25_b`` 0.75, ``candidate_k`` 10, ``candidate_pool`` 32,
        ``max_text_bytes`` `DEFAULT_MAX_TEXT_BYTES` (4 MiB); ``lexical_fields``:
        provenance keys BM25 indexes with the text (default ``["speaker"]``). A
        setting of the wrong type (a bool for a number too) or out of its range
        is an InvalidConfigError naming it."""
    @property
    def dim(self) -> int: ...
    @property
    def max_text_bytes(self) -> int:
        """Texts longer than this many UTF-8 bytes are refused."""
    @property
    def next_id(self) -> int: ...
    @property
    def removed_count(self) -> int:
        """How many nodes were ever removed (``next_id`` minus the live count, under one lock)."""
    def __len__(self) -> int: ...
    def __contains__(self, id: int, /) -> bool: ...
    def add(
        self,
        text: str,
        embedding: VectorLike,
        *,
        timestamp: int | None = None,
        provenance: dict[str, str] | None = None,
        entities: Sequence[str] | None = None,
        types: TypeScores | None = None,
        passages: Passages | None = None,
        scope: Scope | None = None,
        metadata: Metadata | None = None,
        key: str | None = None,
    ) -> int:
        """``passages``: vectors of a long text's passages, spans ``[start, end)``
        in characters of ``text``, in order (each starts and ends after the
        previous one). A ``key`` a stored node carries stores nothing and
        returns that node's id."""
    def add_batch(
        self,
        texts: Sequence[str],
        embeddings: VectorLike,
        *,
        timestamps: Sequence[int | None] | None = None,
        provenances: Sequence[dict[str, str] | None] | None = None,
        entities: Sequence[Sequence[str] | None] | None = None,
        types: Sequence[TypeScores | None] | None = None,
        passages: Sequence[Passages | None] | None = None,
        scopes: Sequence[Scope | None] | None = None,
        metadatas: Sequence[Metadata | None] | None = None,
        keys: Sequence[str | None] | None = None,
    ) -> list[int]:
        """A key held by a stored node or an earlier row stores nothing; its id is that node's."""
    def check_batch(
        self,
        texts: Sequence[str],
        embeddings: VectorLike,
        *,
        timestamps: Sequence[int | None] | None = None,
        provenances: Sequence[dict[str, str] | None] | None = None,
        entities: Sequence[Sequence[str] | None] | None = None,
        types: Sequence[TypeScores | None] | None = None,
        passages: Sequence[Passages | None] | None = None,
        scopes: Sequence[Scope | None] | None = None,
        metadatas: Sequence[Metadata | None] | None = None,
        keys: Sequence[str | None] | None = None,
    ) -> None:
        """Validate a batch exactly as ``add_batch`` would, writing nothing."""
    def add_linked(
        self,
        texts: Sequence[str],
        embeddings: VectorLike,
        *,
        timestamps: Sequence[int | None] | None = None,
        provenances: Sequence[dict[str, str] | None] | None = None,
        entities: Sequence[Sequence[str] | None] | None = None,
        types: Sequence[TypeScores | None] | None = None,
        passages: Sequence[Passages | None] | None = None,
        scopes: Sequence[Scope | None] | None = None,
        metadatas: Sequence[Metadata | None] | None = None,
        keys: Sequence[str | None] | None = None,
        derived_version: int,
        question_shares: Sequence[float],
        time_refs: Sequence[Sequence[TimeRefTuple]],
        focus: Sequence[bool],
        focus_k: int,
    ) -> tuple[list[int], dict[str, Any], dict[str, Any]]:
        """Add a batch as the write path links it: per node in turn, its
        derived facts, rule edges in time and by shared entity, and its write
        candidates (a ``focus`` node's ``focus_k`` neighbourhood too).
        Returns (ids, pairs, neighbours); each pair dict holds numpy columns
        ``row`` (batch position), ``candidate``, ``vector``, ``lexical``,
        ``entity``, ``temporal``, ``same_session``, ``same_speaker``,
        ``older``, ``alias`` and lists ``text``, ``speaker``, ``timestamp``."""
    def check_attributes(
        self,
        n: int,
        *,
        scopes: Sequence[Scope | None] | None = None,
        metadatas: Sequence[Metadata | None] | None = None,
        keys: Sequence[str | None] | None = None,
    ) -> None:
        """Validate the scope, metadata and key columns of ``n`` observations."""
    def select(
        self, scope: Scope | None = None, filter: FilterDict | None = None
    ) -> Allowed | None:
        """The nodes a scope and filter select, for ``allowed=``; None when they select all."""
    def matching_ids(
        self, scope: Scope | None = None, filter: FilterDict | None = None
    ) -> list[int]:
        """Every id a scope and filter select, ascending."""
    def list_ids(
        self,
        scope: Scope | None = None,
        filter: FilterDict | None = None,
        *,
        limit: int = 100,
        after: int | None = None,
    ) -> list[int]:
        """Up to ``limit`` selected ids, ascending, after ``after``."""
    def ids_for_keys(self, keys: Sequence[tuple[Scope | None, str]]) -> list[int | None]:
        """For each (scope, key): the stored node written with that key in
        that scope, or None (keys live in their scope)."""
    def entities_known(
        self, entities: Sequence[str], *, allowed: Allowed | None = None
    ) -> list[bool]:
        """Whether some (allowed) node carries each entity."""
    def provenance_values(self, field: str, *, allowed: Allowed) -> list[str]:
        """The distinct values of a provenance field among the allowed nodes, sorted."""
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
    def remove(self, id: int) -> None:
        """Delete a node, its edges, its supersedes links and its index entries.

        A store-level call: a fact the node replaced becomes current again,
        and a ``Memory`` over this store only notices at its next call.
        ``Memory.forget`` is the user-level removal."""
    def forget(self, ids: Sequence[int]) -> list[Supersedes]:
        """Delete many nodes (all or nothing on an unknown or repeated id:
        NodeNotFoundError, InvalidInputError), keeping the survivors'
        supersedes chains: a survivor replaced through removed nodes stays
        replaced (a bridging link, origin "rule", weakest weight of the path).
        Returns the bridges between survivors."""
    def add_supersedes(
        self, new: int, old: int, weight: float, *, origin: EdgeOrigin = "controller"
    ) -> Upsert:
        """Record that ``new`` supersedes ``old`` (plus the temporal edge
        ``new -after-> old``); re-asserting keeps the larger weight. Raises
        InvalidInputError for a self-link or one that would close a cycle."""
    def add_supersedes_batch(self, links: Sequence[tuple[object, ...]]) -> list[Upsert]:
        """Links ``(new, old, weight[, origin])``, all or nothing."""
    def set_valid_from(self, id: int, valid_from: int | None) -> None:
        """When the node's fact became true, if not what its text grounds
        (the start of its first time reference) or else its observation time
        (None: back to those)."""
    def supersedes_links(self) -> list[Supersedes]:
        """Every link, sorted by (new, old)."""
    @property
    def supersedes_count(self) -> int: ...
    def supersedes(self, id: int) -> list[int]:
        """The nodes ``id`` supersedes directly, ascending."""
    def superseded_by(self, id: int) -> list[int]:
        """The nodes superseding ``id`` directly, ascending."""
    def validity(self, id: int) -> tuple[int | None, int | None]:
        """``(valid_from, valid_to)`` on the world timeline: from the event time
        (one set, else the start of the first time the text grounds, else the
        timestamp) to the earliest valid_from of a successor
        (exclusive, never before valid_from); valid_to is None while current."""
    def history(self, id: int) -> list[int]:
        """``id``, then every fact it superseded, transitively, nearest first."""
    def fact_chains(
        self, ids: Sequence[int], *, allowed: Allowed | None = None
    ) -> list[FactChain | None]:
        """Per id: its validity and links when it is in a supersedes link, else
        None; with ``allowed``, as a scoped search sees them."""
    def get(self, id: int) -> Node: ...
    def embedding(self, id: int) -> npt.NDArray[np.float32]: ...
    def mean_embedding(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """The mean of the nodes' unit embeddings (numpy's ``mean(axis=0)``, in f32)."""
    def neighbors(self, id: int, view: ViewName | None = None) -> list[Edge]: ...
    def tokenize(self, text: str) -> list[str]: ...
    def document_frequencies(
        self, query: str, *, allowed: Allowed | None = None
    ) -> tuple[list[str], list[int], int]:
        """The query's tokens, how many indexed nodes contain each, and how many
        are indexed (among the allowed ones)."""
    def search_lexical(
        self, query: str, k: int = 10, *, allowed: Allowed | None = None
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """BM25 of the query's terms (its tokens without "now", "nowadays" and
        "anymore", which say when, not what, unless nothing else is left);
        with ``allowed``, among those nodes with their statistics only."""
    def related_terms(
        self, query: str, *, allowed: Allowed | None = None
    ) -> list[tuple[str, float]]:
        """The related terms a query's rare words add to a search's lexical
        match, and every query word's other spelling ("colour" for "color",
        at weight 1): (term, weight) pairs in term order (a query term weighs 1).
        What the expansion would add, whatever `MemoryConfig.related_words`
        says: a Memory's searches read that setting, this does not."""
    def search_vector(
        self, query: VectorLike, k: int = 10, *, allowed: Allowed | None = None
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]: ...
    def lexical_scores(
        self, query: str, ids: Sequence[int], *, allowed: Allowed | None = None
    ) -> npt.NDArray[np.float32]:
        """BM25 scores of ``ids`` for the query's terms (as `search_lexical` reads them)."""
    def similarities(self, query: VectorLike, ids: Sequence[int]) -> npt.NDArray[np.float32]: ...
    def set_derived(
        self,
        version: int,
        ids: Sequence[int],
        shares: Sequence[float],
        time_refs: Sequence[Sequence[TimeRefTuple]],
        *,
        logged: bool = True,
    ) -> None:
        """What was derived from the nodes' texts (question shares in [0, 1],
        grounded time references), with derivation ``version``; all or
        nothing; logged on a durable memory unless ``logged=False``."""
    @property
    def derived_version(self) -> int: ...
    def derived_covered(self, ids: Sequence[int]) -> list[bool]: ...
    def question_shares(self, ids: Sequence[int]) -> npt.NDArray[np.float64]: ...
    def time_refs(self, id: int) -> list[TimeRefTuple]: ...
    def time_matches(
        self,
        ids: Sequence[int],
        window: tuple[int, int] | None = None,
        asks_when: bool = False,
    ) -> npt.NDArray[np.float64]: ...
    def temporal_context(
        self,
        id: int,
        *,
        allowed: Allowed | None = None,
        second_step_decay: float = 0.7,
        reply_link: float = 1.0,
    ) -> list[tuple[int, float]]:
        """(id, weight) one and two steps before and after in time order, in
        the episode (without a timestamp: among the nodes without one, in
        write order). A node in a session (its provenance's, else its
        scope's) reads its session's turns, stepping over other threads'."""
    def timeline_window(
        self, lo: int, hi: int, *, allowed: Allowed | None = None
    ) -> npt.NDArray[np.uint64]:
        """Nodes observed in [lo, hi) (half-open), in time order."""
    def time_neighbours_seen(
        self, id: int
    ) -> tuple[tuple[int, int] | None, tuple[int, int] | None] | None: ...
    def context_sides(
        self, id: int, *, allowed: Allowed | None = None, second_step_decay: float = 0.7
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]: ...
    def context_matches(
        self,
        ids: Sequence[int],
        topical_ids: Sequence[int],
        topical_values: Sequence[float],
        own: Sequence[float] | None = None,
        *,
        allowed: Allowed | None = None,
        second_step_decay: float = 0.7,
        reply_link: float = 1.0,
    ) -> npt.NDArray[np.float64]:
        """(support, previous match, next match) per node, an (n, 3) array."""
    def styles(
        self, ids: Sequence[int], *, allowed: Allowed | None = None
    ) -> npt.NDArray[np.float64]:
        """(length, speaker's question share, speaker's length) per node, an (n, 3) array:
        the node's length against the mean node, its speaker's mean question share
        per turn and mean turn length against the mean turn (a turn: one
        speaker's consecutive nodes in one session)."""
    def typical_length(self, *, allowed: Allowed | None = None) -> float:
        """The nodes' mean log length over 10, capped at 1 (0 when empty):
        the ``memory_length`` signal."""
    def read_signals(
        self,
        text: str,
        vector: VectorLike,
        ids: Sequence[int],
        *,
        lexical_ranked: Sequence[int],
        vector_ranked: Sequence[int],
        best_lexical: float,
        best_dense: float,
        best_passage: float,
        named: Sequence[str],
        window: tuple[int, int] | None = None,
        asks_when: bool = False,
        allowed: Allowed | None = None,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint32]]:
        """A query's signals of ``ids`` in one pass: (n, len(SIGNAL_COLUMNS))
        columns in that order, and each node's best passage index."""
    def content_coverage(
        self,
        ids: Sequence[int],
        content_tokens: Sequence[str],
        asked: Sequence[str],
        people: Sequence[str],
        *,
        allowed: Allowed | None = None,
    ) -> npt.NDArray[np.float64]:
        """Per node, an (n, 2) array: the share of ``content_tokens`` it asserts
        about the ``asked`` people, and the share about other known ``people``."""
    def tokens_present(self, ids: Sequence[int], tokens: Sequence[str]) -> npt.NDArray[np.bool_]:
        """Per node, which of ``tokens`` its text holds: an (n, len(tokens)) array."""
    def same_session(self, ids: Sequence[int], others: Sequence[int]) -> npt.NDArray[np.float64]:
        """1.0 for each pair of nodes that name the same session, else 0.0."""
    def max_similarities(
        self, ids: Sequence[int], against: Sequence[int]
    ) -> npt.NDArray[np.float64]:
        """Each node's best cosine similarity with ``against``, in [0, 1]."""
    def texts(self, ids: Sequence[int]) -> list[str]:
        """Each node's text, in the order of ``ids``."""
    def text_marks(self, text: str) -> tuple[list[str], list[tuple[list[str], float, bool, bool]]]:
        """The names a text uses other than as address, and its sentences as
        (tokens, weight, first person, second person)."""
    def timestamps(self, ids: Sequence[int]) -> list[int | None]:
        """Each node's observation time (None when it has none or is not stored)."""
    def episode_keys(self, ids: Sequence[int]) -> npt.NDArray[np.uint64]:
        """Each node's episode as a 64-bit key: equal within an episode (the
        session its provenance names, else its UTC day), 0 for none or an id
        not stored."""
    def speakers(self) -> list[str]:
        """The speakers of the nodes with a question share, lower-cased, sorted."""
    def people(self, *, allowed: Allowed | None = None) -> list[str]:
        """The people the memory knows, lower-cased, sorted: the speakers, and
        the labels heading speakerless texts as a transcript names its speakers
        ("Caroline: I ran ..."; at least two texts, half of them in the first or
        second person). With ``allowed``, of the nodes it lets through."""
    def passages(self, id: int) -> list[Span]:
        """Spans of the node's passage vectors; ``[]`` when its text is one passage."""
    def passage_embedding(self, id: int, index: int) -> npt.NDArray[np.float32]: ...
    def search_passages(
        self,
        query: VectorLike,
        k: int = 10,
        *,
        long_only: bool = False,
        allowed: Allowed | None = None,
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32], npt.NDArray[np.float32]]:
        """The best ``k`` nodes by their best passage: (ids, passage indexes,
        similarities), best first; a node without passage vectors counts as one
        passage, its node vector (index 0), unless ``long_only``."""
    def passage_similarities(
        self, query: VectorLike, ids: Sequence[int]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.uint32]]:
        """Each node's best passage similarity and index (node vector and 0
        without passage vectors; NaN and 0 for unknown ids)."""
    def fused_anchors(
        self,
        text: str | None = None,
        vector: VectorLike | None = None,
        k: int = 10,
        *,
        depth: int = 50,
        kappa: float = 60.0,
        allowed: Allowed | None = None,
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float64]]: ...
    def write_candidates(self, id: int, k: int | None = None) -> list[WriteCandidate]: ...
    def entity_names(self) -> list[str]:
        """Every entity some stored node carries (normalised), sorted."""
    def nodes_with_entity(self, entity: str) -> list[int]: ...
    def stats(self) -> dict[str, int]: ...
    def traverse(
        self,
        routing: tuple[float, float, float, float],
        anchors: Sequence[tuple[int, float]],
        *,
        multi_hop: float = 0.0,
        recency: float = 0.0,
        query_vector: VectorLike | None = None,
        now: int | None = None,
        config: TraversalConfig | None = None,
        calls_used: int = 1,
        elapsed_s: float = 0.0,
        allowed: Allowed | None = None,
    ) -> Traversal:
        """Start a bounded traversal (with ``allowed``: over those nodes only).

        ``routing`` is p_g for (semantic, temporal, causal, entity); ``anchors``
        the seeds as (id, score in [0, 1]), best first. ``calls_used`` and
        ``elapsed_s`` charge what the query already spent against the limits.
        """
    @property
    def pending_graph(self) -> int:
        """Vectors stored but not yet in the HNSW graph.

        A memory loaded or recovered past the exact tier opens with its
        vectors pending; a background thread moves them into the graph while
        searches scan the pending ones exactly.
        """
    @property
    def expansion_search(self) -> int:
        """The HNSW search expansion (ef) node vector searches use now."""
    @property
    def fixed_expansion_search(self) -> int | None:
        """The ef set with `set_expansion_search`, or None when it grows
        with the index (the default: 128 up to 250,000 vectors, then with the
        square root of the size, 256 at 1M)."""
    def set_expansion_search(self, expansion_search: int | None) -> None:
        """Change the HNSW search expansion (ef) of a live store: higher finds
        more of the exact nearest neighbours and costs query time; the graph
        is not rebuilt. None: grow with the index. Kept in the next snapshot.
        Out of range (0, or more than 65,536): `InvalidConfigError`, nothing
        changed."""
    def _set_exact_threshold(self, exact_threshold: int) -> None: ...
    def finish_graph(self) -> None:
        """Build the rest of the HNSW graph now (in short locked steps)."""
    def save(self, path: str | PathLike[str]) -> None: ...
    @staticmethod
    def load(path: str | PathLike[str], *, max_absent_ids: int | None = None) -> MemoryStore: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes, *, max_absent_ids: int | None = None) -> MemoryStore: ...
    def save_with_state(self, path: str | PathLike[str], state: bytes) -> None: ...
    @staticmethod
    def load_with_state(
        path: str | PathLike[str], *, max_absent_ids: int | None = None
    ) -> tuple[MemoryStore, bytes | None]: ...
    # durable memories
    @staticmethod
    def open(
        path: str | PathLike[str],
        dim: int,
        *,
        embedder: str = "",
        state: bytes | None = None,
        durability: str = "sync",
        salvage: bool = False,
        segment_bytes: int = ...,
        max_text_bytes: int = ...,
        lexical_fields: Sequence[str] | None = None,
        exact_threshold: int | None = None,
        max_absent_ids: int | None = None,
    ) -> tuple[MemoryStore, bytes, list[bytes], dict[str, Any]]: ...
    @property
    def durable(self) -> bool: ...
    @property
    def durability(self) -> str | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def last_seq(self) -> int | None: ...
    @property
    def failure(self) -> str | None: ...
    @property
    def closed(self) -> bool: ...
    def checkpoint(self, state: bytes) -> dict[str, int]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def _begin_write(self) -> None: ...
    def _log_write(self, delta: bytes) -> int | None: ...
    def _wait_durable(self, seq: int) -> None: ...

Phase = Literal["assess", "expand", "score", "done"]
StopReason = Literal[
    "sufficient",
    "not_useful",
    "depth_limit",
    "visited_limit",
    "edge_limit",
    "controller_call_limit",
    "time_limit",
    "budget_exhausted",
    "frontier_exhausted",
]

@final
class TraversalConfig:
    """Every knob of the read path; the defaults are the paper's values."""

    def __new__(
        cls,
        *,
        total_budget: int | None = None,
        min_per_view: int | None = None,
        gamma: float | None = None,
        theta_act: float | None = None,
        depth_max: int | None = None,
        beam_width: int | None = None,
        max_visited: int | None = None,
        max_edges: int | None = None,
        max_controller_calls: int | None = None,
        max_wall_s: float | None = None,
        theta_suff: float | None = None,
        theta_missing: float | None = None,
        theta_contradiction: float | None = None,
        theta_useful: float | None = None,
        lambdas: tuple[float, float, float, float, float] | None = None,
        recency_weight: float | None = None,
        min_admit_score: float | None = None,
    ) -> TraversalConfig: ...
    def as_dict(self) -> dict[str, object]: ...

@final
class Candidate:
    """A node reached by expansion, waiting for the controller's scores."""

    @property
    def node(self) -> int: ...
    @property
    def view(self) -> ViewName: ...
    @property
    def edge_weight(self) -> float: ...
    @property
    def src(self) -> int: ...
    @property
    def dst(self) -> int: ...
    @property
    def from_node(self) -> int: ...

@final
class Evidence:
    """A node in the evidence set, with the round that admitted it and the edge it came by."""

    @property
    def node(self) -> int: ...
    @property
    def score(self) -> float: ...
    @property
    def depth(self) -> int: ...
    @property
    def via(self) -> Candidate | None: ...

@final
class FactState:
    """One query's record of the facts that change, for the time it asks about."""

    def __new__(cls, stance: str, at: int | None = None, until: int | None = None) -> FactState: ...
    def signals(
        self,
        store: MemoryStore,
        ids: Sequence[int],
        *,
        query: str,
        vector: VectorLike,
        best_lexical: float,
        best_dense: float,
        allowed: Allowed | None = None,
    ) -> npt.NDArray[np.float64] | None:
        """(valid, superseded, not yet valid, chain match) per node, an (n, 4)
        array (NaN outside chains); None when nothing applies."""
    def chain_relatives(
        self, store: MemoryStore, ids: Sequence[int], *, allowed: Allowed | None = None
    ) -> list[int]:
        """The nodes one supersedes link away from any of ``ids``."""
    def replaced(self) -> list[tuple[int, list[int]]]:
        """The facts that did not hold, each with the facts of its chain that did."""

@final
class ReadSession:
    """One query's reads of one memory in the core: its signals and pool, the
    facts that held at its time, the feedback-moved query vector."""

    def __new__(
        cls,
        store: MemoryStore,
        text: str,
        vector: VectorLike,
        *,
        lexical_ranked: Sequence[int],
        vector_ranked: Sequence[int],
        best_lexical: float,
        best_dense: float,
        best_passage: float,
        named: Sequence[str],
        window: tuple[int, int] | None = None,
        asks_when: bool = False,
        fact_stance: str = "neutral",
        fact_at: int | None = None,
        fact_until: int | None = None,
        query_tokens: Sequence[str] | None = None,
        content_tokens: Sequence[str] | None = None,
        asked: Sequence[str] | None = None,
        people: Sequence[str] | None = None,
        allowed: Allowed | None = None,
    ) -> ReadSession: ...
    @staticmethod
    def plan(
        store: MemoryStore,
        text: str,
        vector: VectorLike,
        *,
        depth: int,
        pool: int,
        kappa: float,
        now: int | None = None,
        people: Sequence[str] | None = None,
        allowed: Allowed | None = None,
        related_words: bool = True,
    ) -> tuple[
        ReadSession,
        list[int],
        list[float],
        list[int],
        list[str],
        list[str],
        TimeCuesTuple,
        bool,
        bool,
        bool,
        bool,
    ]:
        """A session planned in the core: (session, fused ids, fused scores,
        passage hits, named entities, the people among them, the time cues'
        tuple, first person, asks for help, asks for a summary, asks what the
        one who answers said before)."""
    def inputs(self) -> dict[str, Any]:
        """What the session started from: lexical_ranked, vector_ranked,
        best_lexical, best_dense, best_passage, named, fact_time (stance, at,
        until), tokens, content_tokens, asked, people."""
    def signals(
        self, ids: Sequence[int]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None, npt.NDArray[np.uint32]]:
        """(signal rows over SIGNAL_COLUMNS, validity rows over FACT_COLUMNS or
        None, best passages); records which facts held."""
    def pool(
        self,
        fused: Sequence[int],
        passage_hits: Sequence[int],
        *,
        time_window_nodes: int,
        window_scan: int,
        feedback_weight: float,
        feedback_nodes: int,
        context_seeds: int,
        second_step_decay: float,
        reply_link: float,
    ) -> tuple[
        npt.NDArray[np.uint64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64] | None,
        npt.NDArray[np.uint32],
        dict[str, int],
    ]:
        """The pool before seeding: (ids, signal rows, validity rows or None,
        best passages, {source: count}); moves the vector by the feedback."""
    def anchor_context(
        self, *, second_step_decay: float, reply_link: float
    ) -> npt.NDArray[np.float64]:
        """The latest pool's (support, previous match, next match, episode
        support) rows; its topical matches become the session's."""
    def round(
        self,
        ids: Sequence[int],
        from_nodes: Sequence[int],
        evidence: Sequence[int],
        *,
        second_step_decay: float,
        reply_link: float,
    ) -> tuple[
        npt.NDArray[np.float64],
        npt.NDArray[np.float64] | None,
        npt.NDArray[np.uint32],
        npt.NDArray[np.float64],
    ]:
        """An expansion round's candidates: (signal rows, validity rows or
        None, best passages, rows over ROUND_COLUMNS)."""
    def context_matches(
        self,
        ids: Sequence[int],
        own: Sequence[float] | None = None,
        *,
        second_step_decay: float,
        reply_link: float,
    ) -> npt.NDArray[np.float64]:
        """(support, previous match, next match) of each node, from the
        session's topical matches (``own`` entered in order first)."""
    def record(
        self,
        ids: Sequence[int],
        relevance: npt.ArrayLike,
        evidence: npt.ArrayLike | None = None,
    ) -> None:
        """The controller's relevance of ``ids`` and, for an expansion's
        candidates, their evidence scores."""
    def rank(
        self, traversal: Traversal, *, replaced_below: float, other_speaker_share: float = 1.0
    ) -> list[tuple[int, float]]:
        """Everything gathered, best first, as (node, score); when the query
        asks about one speaker, what others said at ``other_speaker_share``
        of its score. A share outside [0, 1] raises InvalidInputError."""
    def assess(
        self, top: Sequence[tuple[int, float]], frontier: Sequence[int]
    ) -> tuple[
        list[tuple[int, float, float, float, float, float, float, str]], float, float, float, float
    ]:
        """([(node, score, relevance, entity_ok, content coverage, other
        coverage, dense_raw, text)], coverage, known_terms, covered_terms,
        frontier_best)."""
    def coverages(self, ids: Sequence[int]) -> npt.NDArray[np.float64]:
        """(content coverage, other coverage) per node, an (n, 2) array."""
    def evidence(
        self, ids: Sequence[int], *, chains: bool = True
    ) -> list[
        tuple[
            str,
            int | None,
            list[tuple[str, str]],
            list[TimeRefTuple],
            tuple[int, int] | None,
            FactChain | None,
        ]
    ]:
        """Per node: (text, observation time, provenance, grounded time
        references, the best passage's span or None, the supersedes chain or
        None)."""
    @property
    def topical(self) -> dict[int, float]: ...
    def set_topical(self, topical: Mapping[int, float]) -> None: ...
    @property
    def vector(self) -> npt.NDArray[np.float32]: ...
    @property
    def speaker_asked(self) -> str | None:
        """The one speaker the query asks about (lower-cased), or None."""
    @property
    def best_dense(self) -> float: ...
    @property
    def best_passage(self) -> float: ...
    def replaced(self) -> list[tuple[int, list[int]]]:
        """The facts that did not hold, each with the facts of its chain that did."""

@final
class Traversal:
    """A bounded, resumable beam traversal; enforces every hard limit itself."""

    @property
    def phase(self) -> Phase: ...
    @property
    def stop_reason(self) -> StopReason | None: ...
    @property
    def calls_left(self) -> int: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def remaining_s(self) -> float: ...
    def check_time(self) -> Phase: ...
    def assess(
        self, sufficiency: float, usefulness: float, missing: float, contradiction: float
    ) -> Phase: ...
    def expand(self) -> list[Candidate]: ...
    def score(self, scores: VectorLike) -> Phase:
        """One row (relevance, relation_usefulness, novelty, support) per candidate."""
    def candidates(self) -> list[Candidate]: ...
    def frontier(self) -> list[int]: ...
    def result(self, k: int | None = None) -> list[Evidence]: ...
    def trace(self) -> dict[str, Any]: ...

def _set_failpoint(name: str, action: str) -> None: ...
def rrf(
    lists: Sequence[Sequence[int]],
    kappa: float = ...,  # 60.0
) -> list[tuple[int, float]]: ...
def largest_remainder(weights: Sequence[float], total: int, minimum: int) -> list[int]: ...
def view_budgets(
    probs: tuple[float, float, float, float],
    theta_act: float = 0.1,
    total: int = 80,
    minimum: int = 1,
    gamma: float = 1.0,
) -> tuple[list[bool], list[int], bool]: ...
def depth_limit(multi_hop: float, depth_max: int = 8) -> int: ...

# The write path's text analysis (jevmem.entities, jevmem.temporal wrap these).

def normalise_entity(name: str) -> str: ...
def extract_entities(
    text: str,
    *,
    speaker: str | None = None,
    provenance: Sequence[tuple[str, str]] = ...,
    extra: Sequence[str] = ...,
) -> list[str]: ...
def extract_entities_batch(
    texts: Sequence[str],
    speakers: Sequence[str | None],
    provenances: Sequence[Sequence[tuple[str, str]]],
    extras: Sequence[Sequence[str]],
) -> list[list[str]]: ...
def entity_mentions(query: str, known: Sequence[str]) -> list[str]: ...
def ground_times(text: str, observed_at: int) -> list[GroundedTuple]: ...
def query_time_cues(query: str, now: int | None = None) -> TimeCuesTuple:
    """(temporal, score, asks when, asks duration, asks order, recency, cues,
    grounded times, their hull) of a query."""

def query_fact_time(
    query: str, constraint: tuple[int, int] | None = None, now: int | None = None
) -> tuple[str, int | None, int | None]:
    """The time a query wants facts to hold at: (stance, at, until)."""

def speaks_in_first_person(text: str) -> bool: ...
def names_a_speaker(entity: str, people: Sequence[str]) -> bool: ...
def question_share(text: str) -> float: ...
def ground_times_batch(
    texts: Sequence[str], observed_ats: Sequence[int | None]
) -> list[list[GroundedTuple]]: ...

@final
class PatternCounter:
    """Python `re` patterns (the grounding subset), matched ignoring case in
    the core; a pattern is named by its position."""

    def __new__(cls, patterns: Sequence[str], *, skip: Sequence[str] = ...) -> PatternCounter: ...
    def __len__(self) -> int: ...
    def count(self, i: int, text: str) -> int:
        """``len(re.findall(patterns[i], text, re.IGNORECASE))``."""
    def found(self, i: int, text: str) -> bool:
        """``re.search(patterns[i], text, re.IGNORECASE) is not None``."""
    def find_all(self, i: int, text: str) -> list[str]:
        """``re.findall(patterns[i], text, re.IGNORECASE)`` (a pattern without groups)."""
    def sentences_with(self, i: int, text: str, max_sentences: int) -> list[str]:
        """The first ``max_sentences`` pieces of
        ``re.split(r"(?<=[.!?])\\s+|\\n+", text, maxsplit=max_sentences)`` that
        hold a match of pattern ``i``, in order."""
    def word_set(self, i: int, text: str, plural_over: int) -> frozenset[str]:
        """The distinct matches of pattern ``i``, lower-cased, without the
        ``skip`` words, a final "s" dropped from those longer than
        ``plural_over`` characters."""
    def words(self, i: int, text: str, plural_over: int) -> WordSet:
        """`word_set` kept in the core."""

@final
class WordSet:
    """A text's distinct words (`PatternCounter.words`), kept in the core."""

    def __len__(self) -> int: ...
    def __contains__(self, word: str, /) -> bool: ...
    def shared(self, other: WordSet) -> int:
        """How many words the two sets share (``len(a & b)`` of `as_frozenset`)."""
    def as_frozenset(self) -> frozenset[str]: ...

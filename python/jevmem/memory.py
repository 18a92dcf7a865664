"""``jevmem.Memory``: the product API over the memory plane and a controller.

Write path (SPEC §2): admit every valid observation; ask the controller to
type it; find at most K_w earlier candidates (Rust); add the edges structure
already decides (time order, exact shared entities); ask the controller to
judge the candidate pairs and insert an edge per view whose score reaches
theta_rel; every 20 writes, consolidate a small neighbourhood.

Read path (SPEC §3): route the query, anchor by fused BM25 + vector search,
then alternate assess / expand / score inside the Rust traversal, which
enforces every hard limit, and return the top evidence with a trace.

Controller cost: a write batch makes one typing call and one relation call
(plus one consolidation call per 20 writes); a query makes one call for
routing and anchor scoring, then at most one assessment and one scoring call
per round. ``search_batch`` runs queries in lockstep, so each round is one
call for all of them.
"""

from __future__ import annotations

import bisect
import builtins
import json
import math
import operator
import re
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, NamedTuple, SupportsIndex

import numpy as np
import numpy.typing as npt

from jevmem import _validate
from jevmem import answering as _answering
from jevmem._collector import collector_paused
from jevmem._core import (
    DEFAULT_MAX_TEXT_BYTES,
    Allowed,
    MemoryStore,
    Node,
    Traversal,
    TraversalConfig,
    rrf,
)
from jevmem.controller import catalogue, default_controller
from jevmem.controller.types import (
    Answer,
    ChoiceAnswer,
    DecisionRequest,
    Noul,
    NoulAnswer,
    SystemOne,
    validate_answers,
)
from jevmem.embed import Embedder, default_embedder, embedder_from_spec, embedder_spec
from jevmem.entities import extract_entities, mentions
from jevmem.errors import (
    DurabilityError,
    InvalidConfigError,
    InvalidInputError,
    NodeNotFoundError,
    SnapshotError,
    SystemTwoError,
)
from jevmem.passages import PassagePlanner
from jevmem.system_two import SystemTwo
from jevmem.temporal import (
    FactTime,
    TimeRef,
    describe,
    event_time,
    ground,
    query_fact_time,
    query_time_cues,
    to_timestamp,
)

__all__ = ["EvidenceItem", "Memory", "MemoryConfig", "SearchResult", "Via"]

Mode = Literal["lexical", "anchors", "traversal", "full"]
VIEWS = ("semantic", "temporal", "causal", "entity")
#: Share of a seed's score that is its own relevance (the rest: support from
#: its temporal neighbours and its episode).
ANCHOR_RELEVANCE_WEIGHT = 0.6
#: Support through a second temporal step counts this much of a first (a reply
#: to a reply: "How was it?" / "Super good!").
SECOND_STEP_DECAY = 0.7
#: A reply to a question answers it: the step from a question to the next turn
#: (by someone else) weighs 1 + REPLY_LINK x the question's question share, so
#: a turn that asks what the query asks lifts its reply above plain neighbours.
REPLY_LINK = 1.0
_DAY_S = 86_400
#: At most this many nodes of a time window are scored to choose the pool's share.
WINDOW_SCAN = 4096
#: How many of the best evidence items an assessment looks at.
ASSESSED_ITEMS = 8
#: At most this many nodes of a supersedes chain are read for one node's
#: ``chain_match`` (a long history of one value: its first ones are enough).
CHAIN_NODES = 32
#: A fact ranked above the one that replaced it (at the query's time) moves
#: to just below it: this share of its score.
REPLACED_BELOW = 0.999
Summariser = Callable[[Sequence[Node]], str]
#: ``summariser=`` also takes a System Two (an object with ``complete``),
#: wrapped in `jevmem.answering.SystemTwoSummariser`.
SummariserLike = Summariser | SystemTwo
#: A query's read path: yields controller requests, receives their answers.
_Steps = Generator[list[DecisionRequest], list[dict[str, Answer]], None]


class _NodeFacts(NamedTuple):
    """What the read path reads off a node on every query, kept in Python so
    it never asks the store (each ``MemoryStore.get`` builds a whole Node)."""

    text: str
    #: the provenance's speaker, lower-cased ("" when none)
    speaker: str
    entities: frozenset[str]
    #: see `_session`
    session: str | None
    #: the typing answers (episodic, semantic, procedural, preference)
    types: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    @staticmethod
    def of(node: Node) -> _NodeFacts:
        return _NodeFacts(
            node.text,
            node.provenance.get("speaker", "").lower(),
            frozenset(node.entities),
            _session(node),
            tuple(node.types),  # type: ignore[arg-type]
        )


class _Sentence(NamedTuple):
    """One sentence of a node's text, as `_QueryRun.content_coverage` reads it."""

    words: tuple[str, ...]  # its tokens, in order
    weight: float  # 0.5 for a question (it asserts less), else 1
    first_person: bool
    second_person: bool


@dataclass(frozen=True)
class MemoryConfig:
    """Write- and read-path settings; defaults are the paper's values."""

    theta_rel: float = 0.60
    consolidation_period: int = 20
    consolidation_neighbours: int = 5
    summary_min_prob: float = 0.85
    summary_max_contradiction: float = 0.85
    #: How deep each of the lexical and vector lists is before fusion.
    anchor_depth: int = 100
    #: How many fused nodes the controller scores before seeding.
    anchor_pool: int = 100
    #: How many of the strongest pool nodes bring their temporal context (the
    #: observations up to two steps before and after, same episode) into the pool.
    context_seeds: int = 30
    #: At most this many nodes observed inside a time window the query names
    #: ("on 9 November 2022") join the pool.
    time_window_nodes: int = 64
    #: Pseudo-relevance feedback: the query vector moves towards the mean of
    #: its `feedback_nodes` best pool matches by this weight (0 turns it off).
    feedback_weight: float = 0.5
    feedback_nodes: int = 3
    #: How many of the best-scored pool nodes seed the traversal.
    anchors: int = 20
    kappa: float = 60.0
    traversal: TraversalConfig = field(default_factory=TraversalConfig)
    #: Texts longer than this (UTF-8 bytes) are refused; the limit of the
    #: store a Memory creates (a store passed in keeps its own).
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    #: The window a passage may fill, in tokens; None: the embedder's
    #: ``max_length`` (128 when it has none, at 4 characters a token). Texts
    #: longer than one window are also indexed passage by passage.
    passage_tokens: int | None = None
    #: Index long texts passage by passage (embedding every passage costs
    #: embedder time in proportion to the text's length); False: node vectors only.
    index_passages: bool = True

    def __post_init__(self) -> None:
        for name in ("theta_rel", "summary_min_prob", "summary_max_contradiction"):
            v = getattr(self, name)
            if not (isinstance(v, float | int) and 0.0 <= v <= 1.0):
                raise InvalidConfigError(f"{name} must be in [0, 1], got {v!r}")
        for name in (
            "consolidation_period",
            "consolidation_neighbours",
            "anchor_depth",
            "anchor_pool",
            "anchors",
            "max_text_bytes",
        ):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise InvalidConfigError(f"{name} must be a positive integer, got {v!r}")
        if not (
            isinstance(self.feedback_weight, float | int)
            and math.isfinite(self.feedback_weight)
            and self.feedback_weight >= 0
        ):
            raise InvalidConfigError(
                f"feedback_weight must be a non-negative number, got {self.feedback_weight!r}"
            )
        for name in ("context_seeds", "time_window_nodes", "feedback_nodes"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 0):
                raise InvalidConfigError(f"{name} must be a non-negative integer, got {v!r}")
        if self.passage_tokens is not None and not (
            isinstance(self.passage_tokens, int) and self.passage_tokens >= 4
        ):
            raise InvalidConfigError(
                f"passage_tokens must be None or an integer >= 4, got {self.passage_tokens!r}"
            )
        if not (math.isfinite(self.kappa) and self.kappa > 0):
            raise InvalidConfigError(f"kappa must be positive, got {self.kappa!r}")


@dataclass(frozen=True)
class Via:
    """The edge an evidence item was reached by."""

    view: str
    src: int
    dst: int
    weight: float
    from_node: int


@dataclass(frozen=True)
class EvidenceItem:
    id: int
    text: str
    score: float
    #: Observation time (when it was recorded), not the time of the event it describes.
    timestamp: int | None
    provenance: dict[str, str]
    via: Via | None
    #: Time expressions in the text, resolved against the observation time.
    time_refs: tuple[dict[str, Any], ...] = ()
    #: ``[start, end)`` characters of the passage of ``text`` that matched the
    #: query best (the whole text when it is one passage).
    passage: tuple[int, int] = (0, 0)
    #: Facts that change: the observations this one replaced and the ones
    #: that replaced it (supersedes links), and when its fact held on the
    #: world timeline, [valid_from, valid_to); set only for linked nodes.
    supersedes: tuple[int, ...] = ()
    superseded_by: tuple[int, ...] = ()
    valid_from: int | None = None
    valid_to: int | None = None


@dataclass
class SearchResult:
    query: str
    evidence: list[EvidenceItem]
    trace: dict[str, Any]
    sufficiency: float | None = None
    usefulness: float | None = None
    missing: float | None = None
    contradiction: float | None = None

    @property
    def sufficient(self) -> bool:
        """The last assessment met the stop rule (sufficient, nothing missing, no contradiction)."""
        cfg = self.trace.get("thresholds", {})
        return (
            self.sufficiency is not None
            and self.sufficiency >= cfg.get("theta_suff", 0.95)
            and (self.missing or 0.0) < cfg.get("theta_missing", 0.15)
            and (self.contradiction or 0.0) < cfg.get("theta_contradiction", 0.15)
        )


def _answer_value(a: Answer) -> float:
    if isinstance(a, NoulAnswer):
        return a.value
    raise TypeError("expected a Noul answer")


def _drop_text_caches() -> None:
    """Empty the process-wide caches keyed by observation texts or their
    entities (cue counts, change statements, entity patterns), so a
    forgotten text is not kept alive there; they refill on use."""
    from jevmem import entities
    from jevmem.controller import local

    for cached in (local._change_statement, local._count, entities._entity_pattern):
        cached.cache_clear()


class Memory:
    """An agent memory: add observations, search for evidence.

    >>> m = Memory()                       # default embedder and local controller
    >>> m.add("Maya started cello lessons with Ines", speaker="Maya")
    0
    >>> [e.text for e in m.search("who teaches Maya?").evidence][:1]
    ['Maya started cello lessons with Ines']
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        controller: SystemOne | None = None,
        *,
        config: MemoryConfig | None = None,
        summariser: SummariserLike | None = None,
        store: MemoryStore | None = None,
    ) -> None:
        # The measured offline default (ONNX MiniLM), or the hashing embedder
        # with a warning when the `onnx` extra is not installed.
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        self.controller: SystemOne = controller if controller is not None else default_controller()
        self.config = config or MemoryConfig()
        self.summariser: Summariser | None = (
            _answering.SystemTwoSummariser(summariser)
            if summariser is not None and not callable(summariser)
            else summariser
        )
        #: the default model of `answer` (None: one from the environment)
        self.system_two: SystemTwo | None = None
        self.store = (
            store
            if store is not None
            else MemoryStore(self.embedder.dim, max_text_bytes=self.config.max_text_bytes)
        )
        self._planner = PassagePlanner(self.embedder, self.config.passage_tokens)
        if self.store.dim != self.embedder.dim:
            raise InvalidConfigError(
                f"the store has dimension {self.store.dim}, the embedder {self.embedder.dim}"
            )
        self._timeline: list[tuple[int, int]] = []  # (timestamp, id), sorted
        self._time_refs: dict[int, tuple[TimeRef, ...]] = {}
        self._entity_counts: dict[str, int] = {}
        self._episodes: dict[int, str | None] = {}
        self._speakers: set[str] = set()
        self._speaker_order: list[str] = []  # the same, sorted: prefix lookups
        self._stamps: dict[int, int] = {}
        self._context: dict[int, list[tuple[int, float]]] = {}
        self._asks: dict[int, float] = {}
        # What the memory itself observes about its style, so that features
        # read relative to it (a long turn in a chat of short ones, a speaker
        # who mostly asks): log text length per node and its running mean,
        # and per speaker (turns, summed question share, summed log length).
        self._log_len: dict[int, float] = {}
        self._log_len_total = 0.0
        self._speaker_stats: dict[str, list[float]] = {}
        self._sides: dict[
            int, tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]
        ] = {}
        self._styles: dict[int, tuple[float, float, float]] = {}
        self._facts: dict[int, _NodeFacts] = {}
        self._frame: tuple[MemoryStore, frozenset[str]] | None = None
        self._sentences: dict[int, tuple[frozenset[str], tuple[_Sentence, ...]]] = {}
        self._tokens: dict[int, frozenset[str]] = {}
        self._writes = 0
        #: node -> its scope pairs (scoped nodes only): the write path links a
        #: node only to nodes a search in its scope sees
        self._scopes: dict[int, frozenset[tuple[str, str]]] = {}
        # writes change Python-side indexes as well as the store: one at a
        # time, so concurrent writers (and idempotency keys) stay consistent
        self._write_lock = threading.RLock()
        self.decisions: list[dict[str, Any]] = []
        self.calls = {"write": 0, "query": 0}
        # Durable memories (Memory.open): one log record per write request
        # (taken under _write_lock).
        self._write_depth = 0
        self._decisions_rewritten = False
        self._checkpoint_every = 0
        self._checkpoint_seq = 0
        #: What opening a durable memory found (see Memory.open); None in memory.
        self.recovery: dict[str, Any] | None = None
        for i in range(self.store.next_id):
            if i in self.store:
                self._index_python_side(self.store.get(i))
        #: the store's removed ids (``next_id - len``: ids are never reused)
        #: as this Memory last saw them (see `_sync_with_store`)
        self._removed_seen = self.store.removed_count

    # ---- bookkeeping ------------------------------------------------------

    def _index_python_side(self, node: Node, refs: tuple[TimeRef, ...] | None = None) -> None:
        # per-node facts the read path asks for on every query, computed once
        self._episodes[node.id] = _episode(node)
        self._facts[node.id] = _NodeFacts.of(node)
        if node.scope:
            self._scopes[node.id] = frozenset(node.scope.items())
        self._context.clear()  # time-order neighbourhoods may have changed
        if node.timestamp is not None:
            self._stamps[node.id] = node.timestamp
        speaker = node.provenance.get("speaker", "").lower()
        if speaker and speaker not in self._speakers:
            self._speakers.add(speaker)
            bisect.insort(self._speaker_order, speaker)
        asks = self._asks[node.id] = _question_share(node.text)
        log_len = math.log1p(len(node.text))
        self._log_len[node.id] = log_len
        self._log_len_total += log_len
        self._sides.clear()
        self._styles.clear()
        if speaker:
            stats = self._speaker_stats.setdefault(speaker, [0.0, 0.0, 0.0])
            stats[0] += 1
            stats[1] += asks
            stats[2] += log_len
        if node.timestamp is not None:
            bisect.insort(self._timeline, (node.timestamp, node.id))
            if refs is None:
                refs = tuple(ground(node.text, node.timestamp))
            if refs:
                self._time_refs[node.id] = refs
        for e in node.entities:
            self._entity_counts[e] = self._entity_counts.get(e, 0) + 1

    def _decide(
        self,
        requests: list[DecisionRequest] | Iterator[DecisionRequest],
        path: str,
        *,
        budget_s: float | None = None,
    ) -> list[dict[str, Answer]]:
        if isinstance(requests, list):
            if not requests:
                return []
            asked = requests
            if budget_s is not None and getattr(self.controller, "accepts_budget", False):
                # remote controllers derive their deadline from the query's time left
                answers = self.controller.decide(requests, budget_s=budget_s)  # type: ignore[call-arg]
            else:
                answers = self.controller.decide(requests)
        else:
            # A lazy round, for a controller with decide_stream (see
            # search_batch): it pulls the requests as it sends them.
            asked = []

            def kept(source: Iterator[DecisionRequest] = requests) -> Iterator[DecisionRequest]:
                for r in source:
                    asked.append(r)
                    yield r

            answers = self.controller.decide_stream(kept(), budget_s=budget_s)  # type: ignore[attr-defined]
            if not asked:
                return []
        # a controller that checks its own answers (the gRPC one must, to
        # fall back on bad ones) says so; the rest are checked here
        if not getattr(self.controller, "answers_validated", False):
            validate_answers(asked, answers)
        self.calls[path] += 1
        return answers

    def _node_facts(self, node_id: int) -> _NodeFacts:
        """A node's `_NodeFacts`; nodes written past `add_batch` (summaries)
        are read from the store once."""
        facts = self._facts.get(node_id)
        if facts is None:
            facts = self._facts[node_id] = _NodeFacts.of(self.store.get(node_id))
        return facts

    def _sentences_of(self, node_id: int) -> tuple[frozenset[str], tuple[_Sentence, ...]]:
        """What `_QueryRun.content_coverage` reads off a node's text, whatever
        the query: the names it uses other than to address someone, and its
        sentences. Computed on first use."""
        cached = self._sentences.get(node_id)
        if cached is None:
            text = self._node_facts(node_id).text
            named = frozenset(
                m.group(1).lower() for m in _CAPITALISED.finditer(text) if not _is_vocative(text, m)
            )
            sentences = tuple(
                _Sentence(
                    tuple(self.store.tokenize(sentence)),
                    0.5 if sentence.rstrip().endswith("?") else 1.0,
                    _FIRST_PERSON.search(sentence) is not None,
                    _SECOND_PERSON.search(sentence) is not None,
                )
                for sentence in _SENTENCES.findall(text)
            )
            cached = self._sentences[node_id] = (named, sentences)
        return cached

    def _token_set(self, node_id: int) -> frozenset[str]:
        """The distinct tokens of a node's text, as the lexical index sees
        them; computed on first use (a long turn is tokenized once, not at
        every assessment that shows it)."""
        got = self._tokens.get(node_id)
        if got is None:
            got = self._tokens[node_id] = frozenset(
                self.store.tokenize(self._node_facts(node_id).text)
            )
        return got

    def _frame_tokens(self) -> frozenset[str]:
        """`_QUESTION_FRAME` as the store's tokenizer sees it (fixed per store)."""
        cached = self._frame
        if cached is None or cached[0] is not self.store:
            tokens = frozenset(t for w in _QUESTION_FRAME for t in self.store.tokenize(w))
            cached = self._frame = (self.store, tokens)
        return cached[1]

    def __len__(self) -> int:
        return len(self.store)

    def __contains__(self, node_id: int) -> bool:
        return node_id in self.store

    # ---- write path -------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        timestamp: int | float | str | Any | None = None,
        speaker: str | None = None,
        provenance: Mapping[str, str] | None = None,
        entities: Sequence[str] | None = None,
        embedding: npt.ArrayLike | None = None,
        scope: Mapping[str, str] | None = None,
        metadata: Mapping[str, str | int | float | bool] | None = None,
        key: str | None = None,
    ) -> int:
        """Add one observation; returns its id. Bad input raises and changes nothing.

        ``scope`` says whom the observation belongs to ({"user": "u1",
        "session": "s3"}; none: global); a search with a scope only sees
        observations whose scope holds every pair of it. ``metadata`` holds
        str, int, float or bool values that filters read (see `search`).
        ``key`` is an idempotency key: adding an observation whose key the
        memory already holds in the same scope stores nothing and returns
        that node's id (a retried write or a re-ingested line is a no-op).
        Keys live in their scope, so one tenant's key never finds another's
        node; a forgotten node frees its key.
        """
        if embedding is not None:
            embedding = _validate.embeddings(embedding, "embedding", (self.store.dim,))
        return self.add_batch(
            [text],
            timestamps=[timestamp],
            speakers=[speaker],
            provenances=[provenance],
            entities=[entities],
            embeddings=None
            if embedding is None
            else np.asarray(embedding, dtype=np.float32)[None, :],
            scopes=[scope],
            metadatas=[metadata],
            keys=[key],
        )[0]

    def add_batch(
        self,
        texts: Sequence[str],
        *,
        timestamps: Sequence[Any] | None = None,
        speakers: Sequence[str | None] | None = None,
        provenances: Sequence[Mapping[str, str] | None] | None = None,
        entities: Sequence[Sequence[str] | None] | None = None,
        embeddings: npt.ArrayLike | None = None,
        scopes: Sequence[Mapping[str, str] | None] | None = None,
        metadatas: Sequence[Mapping[str, str | int | float | bool] | None] | None = None,
        keys: Sequence[str | None] | None = None,
    ) -> list[int]:
        """Add many observations with batched controller calls.

        On a durable memory (:meth:`open`) the whole batch is one log record:
        after a crash it is there entirely or not at all, and the call
        returns once it is as durable as the memory's sync mode promises.

        The result equals adding them one by one: each new observation only
        ever sees candidates inserted before it (and, when it has a scope,
        only those a search in its scope sees).

        A text longer than the embedder's window is kept whole and also
        indexed passage by passage (``MemoryConfig.index_passages``); with
        caller-supplied ``embeddings`` only the node vectors are stored.

        ``scopes``, ``metadatas`` and ``keys`` are columns like the others
        (see `add`). An observation whose key the memory holds, or that an
        earlier observation of the batch carries, is stored once: its id in
        the result is that node's.

        Every argument is checked before any work (`jevmem._validate` lists
        the accepted types and ranges); bad input raises a jevmem error.
        """
        texts, timestamps, speakers, provenances, entities, embeddings = _validate.add_batch_args(
            texts,
            timestamps,
            speakers,
            provenances,
            entities,
            embeddings,
            dim=self.store.dim,
            max_text_bytes=self.store.max_text_bytes,
        )
        self._sync_with_store()
        with self._durable_write():
            return self._add_batch(
                texts,
                timestamps,
                speakers,
                provenances,
                entities,
                embeddings,
                scopes,
                metadatas,
                keys,
            )

    def _add_batch(
        self,
        texts: Sequence[str],
        timestamps: Sequence[Any] | None,
        speakers: Sequence[str | None] | None,
        provenances: Sequence[Mapping[str, str] | None] | None,
        entities: Sequence[Sequence[str] | None] | None,
        embeddings: npt.ArrayLike | None,
        scopes: Sequence[Mapping[str, str] | None] | None,
        metadatas: Sequence[Mapping[str, str | int | float | bool] | None] | None,
        keys: Sequence[str | None] | None,
    ) -> list[int]:
        # texts and the other columns were checked by `_validate.add_batch_args`
        n = len(texts)

        def column(name: str, values: Sequence[Any] | None) -> list[Any]:
            if values is None:
                return [None] * n
            if isinstance(values, (str, bytes)):
                raise InvalidInputError(f"{name} must be a sequence, not one string")
            if len(values) != n:
                raise InvalidInputError(f"{name} has {len(values)} entries for {n} texts")
            return list(values)

        # any Mapping will do; the core reads plain dicts
        scope_col = [
            dict(x) if isinstance(x, Mapping) and not isinstance(x, dict) else x
            for x in column("scopes", scopes)
        ]
        meta_col = [
            dict(x) if isinstance(x, Mapping) and not isinstance(x, dict) else x
            for x in column("metadatas", metadatas)
        ]
        key_col = column("keys", keys)
        # every row is checked, a repeat too: bad input changes nothing
        self.store.check_attributes(n, scopes=scope_col, metadatas=meta_col, keys=key_col)
        with self._write_lock:
            if not any(k is not None for k in key_col):
                return self._add_fresh(
                    texts,
                    timestamps,
                    speakers,
                    provenances,
                    entities,
                    embeddings,
                    scope_col,
                    meta_col,
                    key_col,
                )
            # idempotency: a key the memory holds in the row's scope, or one
            # an earlier row of this batch carries in that scope, stores
            # nothing and answers with that id (keys live in their scope)
            ident: list[tuple[frozenset[tuple[str, str]], str] | None] = [
                None if k is None else (frozenset((sc or {}).items()), k)
                for k, sc in zip(key_col, scope_col, strict=True)
            ]
            asked = [(sc, k) for k, sc in zip(key_col, scope_col, strict=True) if k is not None]
            known = self.store.ids_for_keys(asked)
            held = dict(zip((x for x in ident if x is not None), known, strict=True))
            first_row: dict[tuple[frozenset[tuple[str, str]], str], int] = {}
            fresh: list[int] = []
            for i, x in enumerate(ident):
                if x is None or (held[x] is None and x not in first_row):
                    fresh.append(i)
                    if x is not None:
                        first_row[x] = i
            vecs = None
            if embeddings is not None:
                matrix = np.asarray(embeddings, dtype=np.float32)
                if matrix.shape != (n, self.store.dim):
                    raise InvalidInputError(
                        f"embeddings must have shape ({n}, {self.store.dim}), got {matrix.shape}"
                    )
                vecs = matrix[fresh]

            def pick(col: list[Any]) -> list[Any]:
                return [col[i] for i in fresh]

            new_ids = (
                self._add_fresh(
                    [texts[i] for i in fresh],
                    pick(column("timestamps", timestamps)),
                    pick(column("speakers", speakers)),
                    pick(column("provenances", provenances)),
                    pick(column("entities", entities)),
                    vecs,
                    pick(scope_col),
                    pick(meta_col),
                    pick(key_col),
                )
                if fresh
                else []
            )
            by_row = dict(zip(fresh, new_ids, strict=True))
            out: list[int] = []
            for i, x in enumerate(ident):
                if i in by_row:
                    out.append(by_row[i])
                else:
                    assert x is not None
                    got = held[x]
                    out.append(int(got) if got is not None else by_row[first_row[x]])
            return out

    def _add_fresh(
        self,
        texts: Sequence[str],
        timestamps: Sequence[Any] | None,
        speakers: Sequence[str | None] | None,
        provenances: Sequence[Mapping[str, str] | None] | None,
        entities: Sequence[Sequence[str] | None] | None,
        embeddings: npt.ArrayLike | None,
        scope_col: list[Any],
        meta_col: list[Any],
        key_col: list[Any],
    ) -> list[int]:
        """`add_batch` for rows whose keys (if any) are new."""
        n = len(texts)

        def column(name: str, values: Sequence[Any] | None) -> list[Any]:
            if values is None:
                return [None] * n
            if len(values) != n:
                raise InvalidInputError(f"{name} has {len(values)} entries for {n} texts")
            return list(values)

        ts_col = column("timestamps", timestamps)
        spk_col = column("speakers", speakers)
        prov_col = column("provenances", provenances)
        ent_col = column("entities", entities)
        parsed: list[int | None] = []
        for i, raw in enumerate(ts_col):
            try:
                parsed.append(None if raw is None else to_timestamp(raw))
            except (TypeError, ValueError) as exc:
                raise InvalidInputError(f"observation {i}: bad timestamp {raw!r}: {exc}") from None
        limit = self.store.max_text_bytes
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise InvalidInputError(f"observation {i}: text must be a non-empty string")
            # before any work on the text: an oversized one costs nothing
            size = len(t.encode("utf-8", "surrogatepass"))
            if size > limit:
                raise InvalidInputError(
                    f"observation {i}: text is {size} bytes, the limit is {limit}"
                )
        spans: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        passage_vecs: list[npt.NDArray[np.float32] | None] = [None] * n
        if embeddings is None:
            # Speakers are embedded with their words: queries name people, turns rarely do.
            prefixes = [f"{spk}: " if spk else "" for spk in spk_col]
            if self.config.index_passages:
                spans = [self._planner.spans(t, p) for t, p in zip(texts, prefixes, strict=True)]
            # A long text's passages go into the same embed call as the texts.
            passage_texts = [
                p + t[a:b] for t, p, sp in zip(texts, prefixes, spans, strict=True) for a, b in sp
            ]
            everything = (
                self.embedder.embed(
                    [p + t for t, p in zip(texts, prefixes, strict=True)] + passage_texts
                )
                if n
                else np.zeros((0, self.embedder.dim), np.float32)
            )
            vectors = everything[:n]
            at = n
            for i, sp in enumerate(spans):
                if sp:
                    passage_vecs[i] = everything[at : at + len(sp)]
                    at += len(sp)
        else:
            vectors = np.asarray(embeddings, dtype=np.float32)
            if vectors.shape != (n, self.store.dim):
                raise InvalidInputError(
                    f"embeddings must have shape ({n}, {self.store.dim}), got {vectors.shape}"
                )
        provs: list[dict[str, str]] = []
        ents: list[list[str]] = []
        for text, spk, prov, extra in zip(texts, spk_col, prov_col, ent_col, strict=True):
            p = {str(k): str(v) for k, v in (prov or {}).items()}
            if spk is not None:
                p.setdefault("speaker", str(spk))
            provs.append(p)
            ents.append(extract_entities(text, speaker=spk, provenance=p, extra=extra or ()))

        passages: list[tuple[npt.NDArray[np.float32], list[tuple[int, int]]] | None] = [
            None if pv is None else (pv, sp) for pv, sp in zip(passage_vecs, spans, strict=True)
        ]
        # Validate the whole batch before anything is asked or written.
        self.store.check_batch(
            list(texts),
            vectors,
            timestamps=parsed,
            provenances=provs,
            entities=ents,
            passages=passages,
            scopes=scope_col,
            metadatas=meta_col,
            keys=key_col,
        )

        grounded = [
            () if ts is None else tuple(ground(t, ts)) for t, ts in zip(texts, parsed, strict=True)
        ]

        # 1. typing: one call for the whole batch; it needs no memory state
        typing_q = catalogue.typing_questions()
        typing = self._decide(
            [
                DecisionRequest(
                    "typing",
                    {
                        "observation": {
                            "text": t,
                            "speaker": s,
                            "timestamp": ts,
                            "time_refs": bool(refs),
                        }
                    },
                    typing_q,
                )
                for t, s, ts, refs in zip(texts, spk_col, parsed, grounded, strict=True)
            ],
            "write",
        )
        types = [tuple(_answer_value(a[q.id]) for q in typing_q) for a in typing]

        # 2. insert and link one node at a time, so each sees exactly the memory
        #    that one-by-one adds would have shown it.
        ids: list[int] = []
        focus: list[tuple[int, list[Any]]] = []
        relation_requests: list[DecisionRequest] = []
        pair_index: list[tuple[int, list[int]]] = []
        rule_edges: list[tuple[object, ...]] = []
        for t, v, ts, p, e, ty, ps, sc, md, key in zip(
            texts,
            vectors,
            parsed,
            provs,
            ents,
            types,
            passages,
            scope_col,
            meta_col,
            key_col,
            strict=True,
        ):
            node_id = self.store.add(
                t,
                v,
                timestamp=ts,
                provenance=p,
                entities=e,
                types=ty,
                passages=ps,
                scope=sc,
                metadata=md,
                key=key,
            )
            ids.append(node_id)
            node = self.store.get(node_id)
            self._index_python_side(node, grounded[len(ids) - 1])
            self._writes += 1
            if self._writes % self.config.consolidation_period == 0:
                # the neighbourhood as this write saw it (later writes change BM25 statistics)
                focus.append(
                    (
                        node_id,
                        self.store.write_candidates(
                            node_id, k=self.config.consolidation_neighbours
                        ),
                    )
                )
            rule_edges.extend(self._rule_time_edges(node))
            cands = self.store.write_candidates(node_id)
            cand_state = []
            cand_ids = []
            for c in cands:
                other = self.store.get(c.id)
                if c.entity > 0:
                    rule_edges.append((c.id, node_id, "entity", float(c.entity), "rule"))
                cand_ids.append(c.id)
                cand_state.append(
                    {
                        "id": c.id,
                        "text": other.text,
                        "speaker": other.provenance.get("speaker"),
                        "timestamp": other.timestamp,
                        "signals": {
                            "vector": c.vector,
                            "lexical": c.lexical,
                            "entity": c.entity,
                            "temporal": c.temporal,
                            "same_session": _same_session(node, other),
                            "alias": _alias_signal(node.entities, other.entities),
                            "inserted_before": 1.0,
                            # for relation.supersedes: one speaker, and which is older
                            "same_speaker": _same_speaker(node, other),
                            "older": _older(other, node),
                        },
                    }
                )
            if not cand_ids:
                continue
            questions: list[Any] = []
            for i, c in enumerate(cands):
                ordered = node.timestamp is not None and self.store.get(c.id).timestamp is not None
                questions.extend(
                    catalogue.relation_questions(
                        i, ask_alias=c.entity == 0, ask_temporal=not ordered
                    )
                )
            relation_requests.append(
                DecisionRequest(
                    "relations",
                    {
                        "observation": {
                            "id": node_id,
                            "text": node.text,
                            "speaker": node.provenance.get("speaker"),
                            "timestamp": node.timestamp,
                        },
                        "candidates": cand_state,
                    },
                    tuple(questions),
                )
            )
            pair_index.append((node_id, cand_ids))
        if rule_edges:
            self.store.add_edges(rule_edges)

        # 3. relation judgment: one call for every pair of the batch
        answers = self._decide(relation_requests, "write")
        controller_edges: list[tuple[object, ...]] = []
        supersedes: list[tuple[int, int, float]] = []
        #: per new node, its best supersedes candidates: a statement of change
        #: replaces the earlier statement it is most about, not every earlier
        #: one on the topic (ties are all kept)
        theta = self.config.theta_rel
        for (node_id, cand_ids), got in zip(pair_index, answers, strict=True):
            replaced: list[tuple[int, int, float]] = []
            for i, cid in enumerate(cand_ids):
                prefix = f"pair_{i}_"

                def val(name: str, _p: str = prefix, _got: Mapping[str, Answer] = got) -> float:
                    a = _got.get(_p + name)
                    return a.value if isinstance(a, NoulAnswer) else 0.0

                if val("semantic") >= theta:
                    controller_edges.append((cid, node_id, "semantic", val("semantic")))
                if val("causal_candidate_to_new") >= theta:
                    controller_edges.append(
                        (cid, node_id, "causal", val("causal_candidate_to_new"))
                    )
                if val("causal_new_to_candidate") >= theta:
                    controller_edges.append(
                        (node_id, cid, "causal", val("causal_new_to_candidate"))
                    )
                if val("same_episode") >= theta:
                    controller_edges.append(
                        (cid, node_id, "temporal", val("same_episode"), "controller", "overlaps")
                    )
                if val("entity_alias") >= theta:
                    controller_edges.append((cid, node_id, "entity", val("entity_alias")))
                if val("supersedes") >= theta:
                    replaced.append((node_id, cid, val("supersedes")))
                choice = got.get(prefix + "temporal")
                if isinstance(choice, ChoiceAnswer) and choice.label != "unknown":
                    prob = choice.distribution[choice.label]
                    if prob >= theta:
                        controller_edges.append(
                            (cid, node_id, "temporal", prob, "controller", choice.label)
                        )
            if replaced:
                top = max(w for _, _, w in replaced)
                supersedes.extend(link for link in replaced if link[2] == top)
        if controller_edges:
            self.store.add_edges(controller_edges)
        if supersedes:
            self._record_supersedes(supersedes)

        # 4. consolidation every `consolidation_period` successful writes
        if focus:
            self._consolidate(focus)
        return ids

    def _record_supersedes(
        self, links: list[tuple[int, int, float]], origin: str = "controller"
    ) -> None:
        """Store supersedes links (new, old, weight) with both ends' event
        times, so validity is measured on the world timeline: a fact holds
        from when its text says it began (else its observation time)."""
        for node_id in sorted({n for new, old, _ in links for n in (new, old)}):
            stamp = self._stamps.get(node_id)
            start = event_time(stamp, self._time_refs.get(node_id, ()))
            if start != stamp:
                self.store.set_valid_from(node_id, start)
        self.store.add_supersedes_batch([(new, old, w, origin) for new, old, w in links])

    # facts that change: what the memory knows about replaced facts

    def validity(self, node_id: int) -> tuple[int | None, int | None]:
        """``(valid_from, valid_to)`` of a node's fact on the world timeline
        (not when it was recorded); ``valid_to`` is None while it is current."""
        return self.store.validity(node_id)

    def superseded_by(self, node_id: int) -> list[int]:
        """The observations that updated, replaced or contradicted this one."""
        return self.store.superseded_by(node_id)

    def supersedes(self, node_id: int) -> list[int]:
        """The observations this one updated, replaced or contradicted."""
        return self.store.supersedes(node_id)

    def history(self, node_id: int) -> list[int]:
        """The versions of a fact up to this node, newest first: this node,
        then every fact it replaced, transitively, nearest first (after
        ``b = update(a, ...)``, ``c = update(b, ...)``: ``history(c) == [c, b,
        a]``). The versions that replaced it are `superseded_by`. A forgotten
        version is gone from the chain (see `forget`). Raises
        NodeNotFoundError for an unknown or forgotten id, InvalidInputError
        for one that is not an int."""
        return self.store.history(self._live_id(node_id))

    # ---- lifecycle: update and forget ----------------------------------------

    def update(
        self,
        node_id: int,
        text: str,
        *,
        timestamp: int | float | str | Any | None = None,
        speaker: str | None = None,
        provenance: Mapping[str, str] | None = None,
        entities: Sequence[str] | None = None,
        embedding: npt.ArrayLike | None = None,
    ) -> int:
        """Record a new observation that replaces what ``node_id`` stated;
        returns the new id. The old one is not deleted: it stays in the new
        one's `history`, linked as superseded (weight 1, origin "rule": the
        caller said so, no controller judged it), with validity following the
        usual rules, so a search about the present ranks the new text above
        the old and marks the old ``superseded_by`` it.

        The new node keeps the old one's speaker and provenance unless
        ``speaker`` or ``provenance`` is given (a given provenance without a
        "speaker" keeps the old speaker). Its timestamp is not inherited: pass
        the time of the change, so validity can say when the old fact stopped
        holding (without one the old fact is superseded with no end time).
        Updating an older version supersedes exactly that node (the chain
        branches). The write path runs as for `add` (its controller may link
        the new text to other nodes too).

        An unknown or forgotten id raises NodeNotFoundError, a non-int
        InvalidInputError; bad text and arguments raise as `add`; an error
        changes nothing.
        """
        self._sync_with_store()
        old_id = self._live_id(node_id)
        with self._durable_write():  # the new node and its link: one log record
            return self._update(old_id, text, timestamp, speaker, provenance, entities, embedding)

    def _update(
        self,
        old_id: int,
        text: str,
        timestamp: Any,
        speaker: str | None,
        provenance: Mapping[str, str] | None,
        entities: Sequence[str] | None,
        embedding: npt.ArrayLike | None,
    ) -> int:
        old = self.store.get(old_id)
        if speaker is None:
            given = provenance.get("speaker") if isinstance(provenance, Mapping) else None
            speaker = given if given is not None else old.provenance.get("speaker")
        if provenance is None:
            # the speaker goes in as `speaker`, so it is embedded with the text as in `add`
            provenance = {k: v for k, v in old.provenance.items() if k != "speaker"}
        new_id = self.add(
            text,
            timestamp=timestamp,
            speaker=speaker,
            provenance=provenance,
            entities=entities,
            embedding=embedding,
        )
        # a fresh node supersedes nothing that could lead back to it: no cycle
        self._record_supersedes([(new_id, old_id, 1.0)], origin="rule")
        return new_id

    def forget(
        self,
        ids: int | Iterable[int] | None = None,
        *,
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> int:
        """Remove observations for real; returns how many nodes were removed.

        What goes: the ``ids`` given, or every observation a ``scope`` and/or
        ``filter`` select (as `search` and `list` read them: forgetting
        ``scope={"user": "u1"}`` removes all of u1's observations). Give one
        or the other; a bare ``forget()`` is refused rather than read as
        "everything".

        The nodes leave every index, the graph (with their edges), the
        supersedes table and every derived structure of this Memory, so no
        later search, `search_batch`, `neighbors`, timeline walk, `history`,
        `stats` or `save` sees them; the next `save` writes a snapshot without
        their text. Summaries the consolidation wrote from a forgotten node
        (``Memory(summariser=...)``) are forgotten with it (they repeat its
        text) and count in the result; consolidation decisions that name a
        forgotten node are dropped; process-wide caches keyed by texts are
        emptied.

        Supersedes chains: forgetting the newest version of a fact makes the
        one it replaced current again (as if the update had never been
        observed); forgetting the oldest leaves the newer one as it was;
        forgetting one in the middle links the versions around it directly,
        so the older ones stay superseded (`MemoryStore.forget`).

        ``ids``: an int or an iterable of ints. An id that is not an int, is
        listed twice, or names no node (never added or already forgotten)
        raises InvalidInputError or NodeNotFoundError, and nothing is removed.
        """
        self._sync_with_store()
        by_selection = scope is not None or filter is not None
        if by_selection == (ids is not None):
            raise InvalidInputError(
                "forget needs either ids or a scope/filter (not both, not neither)"
            )
        with self._write_lock:
            live = self.matching_ids(scope, filter) if by_selection else self._live_ids(ids)
            with self._durable_write():  # one log record; gone from disk at the next checkpoint
                return self._forget_ids(live) if live else 0

    def _forget_ids(self, ids: list[int]) -> int:
        """Forget validated ids (distinct, live); how a scope or filter
        removes what it matched too."""
        gone = self._with_summaries(ids)
        self.store.forget(gone)
        self._forget_python_side(gone)
        gone_set = set(gone)
        self._drop_decisions(gone_set.__contains__)
        _drop_text_caches()
        self._removed_seen = self.store.removed_count
        return len(gone)

    def _live_id(self, raw: object, what: str = "node id") -> int:
        """``raw`` as the id of a node of this memory (typed errors, no change)."""
        try:
            if isinstance(raw, bool) or not isinstance(raw, SupportsIndex):
                raise TypeError
            node_id = operator.index(raw)
        except TypeError:  # (a numpy array has __index__ and refuses it)
            raise InvalidInputError(f"{what} must be an int, got {type(raw).__name__}") from None
        if not (0 <= node_id < self.store.next_id and node_id in self.store):
            raise NodeNotFoundError(f"no node with id {node_id}")
        return int(node_id)

    def _live_ids(self, ids: object) -> list[int]:
        """``ids`` (an int or an iterable of them) as distinct live node ids, in order."""
        if isinstance(ids, str | bytes | bytearray | Mapping):
            raise InvalidInputError(
                f"ids must be an int or a sequence of ints, got {type(ids).__name__}"
            )
        if not isinstance(ids, bool) and isinstance(ids, SupportsIndex):
            try:
                one = operator.index(ids)
            except TypeError:
                pass  # an array of ids: iterated below
            else:
                return [self._live_id(one)]
        if not isinstance(ids, Iterable):
            raise InvalidInputError(
                f"ids must be an int or a sequence of ints, got {type(ids).__name__}"
            )
        out: list[int] = []
        seen: set[int] = set()
        for pos, raw in enumerate(ids):
            node_id = self._live_id(raw, f"ids[{pos}]")
            if node_id in seen:
                raise InvalidInputError(f"ids[{pos}]: node {node_id} is listed twice")
            seen.add(node_id)
            out.append(node_id)
        return out

    def _with_summaries(self, ids: list[int]) -> list[int]:
        """``ids`` and the live summaries written from any of them (or from
        such a summary, transitively): a summary repeats its sources' text."""
        gone = list(ids)
        seen = set(ids)
        grew = True
        while grew:
            grew = False
            for d in self.decisions:
                sid = d.get("summary_id")
                if sid is None or sid in seen or sid not in self.store:
                    continue
                if d.get("focus") in seen or not seen.isdisjoint(d.get("neighbours", ())):
                    gone.append(sid)
                    seen.add(sid)
                    grew = True
        return gone

    def _drop_decisions(self, gone: Callable[[int], bool]) -> None:
        """Drop the consolidation decisions that name a forgotten node (as
        focus, neighbour or summary): they judged its text."""

        def names_gone(d: Mapping[str, Any]) -> bool:
            named = [d.get("focus"), d.get("summary_id"), *d.get("neighbours", ())]
            return any(gone(n) for n in named if n is not None)

        kept = [d for d in self.decisions if not names_gone(d)]
        if len(kept) != len(self.decisions):
            self.decisions[:] = kept
            self._decisions_rewritten = True  # the log records the whole list

    def _forget_python_side(self, ids: Sequence[int]) -> None:
        """Undo `_index_python_side` (and drop the lazily cached facts) for
        nodes gone from the store, leaving exactly what indexing the
        remaining nodes from scratch would give (what `Memory.load` derives):
        per-node entries popped, counts decremented, the running sums
        recomputed in id order (so they match to the last bit), and every
        cache that may hold a gone node cleared."""
        touched: set[str] = set()
        # a few leave the timeline by bisection, many by one filtering pass
        timeline_pass = len(ids) > 32
        for node_id in ids:
            facts = self._facts.get(node_id)
            if node_id in self._episodes:
                assert facts is not None  # indexed nodes have their facts
                del self._episodes[node_id]
                stamp = self._stamps.pop(node_id, None)
                if stamp is not None and not timeline_pass:
                    at = bisect.bisect_left(self._timeline, (stamp, node_id))
                    assert self._timeline[at] == (stamp, node_id)
                    del self._timeline[at]
                self._time_refs.pop(node_id, None)
                del self._asks[node_id]
                del self._log_len[node_id]
                speaker = facts.speaker
                if speaker:
                    stats = self._speaker_stats[speaker]
                    stats[0] -= 1
                    touched.add(speaker)
                    if stats[0] <= 0:
                        del self._speaker_stats[speaker]
                        self._speakers.discard(speaker)
                        order = self._speaker_order
                        del order[bisect.bisect_left(order, speaker)]
                for e in facts.entities:
                    left = self._entity_counts[e] - 1
                    if left:
                        self._entity_counts[e] = left
                    else:
                        del self._entity_counts[e]
            self._facts.pop(node_id, None)
            self._sentences.pop(node_id, None)
            self._tokens.pop(node_id, None)
        if timeline_pass:
            gone = set(ids)
            self._timeline[:] = [entry for entry in self._timeline if entry[1] not in gone]
        # sums in the order indexing makes them (ids ascending): bit-exact
        self._log_len_total = sum(self._log_len.values(), 0.0)
        fresh = {sp: [0.0, 0.0, 0.0] for sp in touched if sp in self._speaker_stats}
        if fresh:
            for node_id, log_len in self._log_len.items():
                sums = fresh.get(self._facts[node_id].speaker)
                if sums is not None:
                    sums[0] += 1
                    sums[1] += self._asks[node_id]
                    sums[2] += log_len
            self._speaker_stats.update(fresh)
        # time-order neighbourhoods and the memory's means have changed
        self._context.clear()
        self._sides.clear()
        self._styles.clear()

    def _sync_with_store(self) -> None:
        """Notice nodes removed from the store behind this Memory's back
        (``memory.store.remove(id)``) and drop what it derived from them, so
        its reads never ask the store for a node that is gone. Free when
        nothing was removed: ids are never reused, so ``next_id - len`` counts
        every removal ever made (read under one lock: a concurrent add must
        not look like a removal)."""
        removed = self.store.removed_count
        if removed == self._removed_seen:
            return
        store = self.store
        # a copy: each membership test releases the GIL, and a concurrent
        # writer may add to the dict meanwhile
        vanished = [i for i in list(self._facts) if i not in store]
        if vanished:
            self._forget_python_side(vanished)
        self._drop_decisions(
            lambda i: not (isinstance(i, int) and 0 <= i < store.next_id and i in store)
        )
        self._removed_seen = removed

    def _rule_time_edges(self, node: Node) -> list[tuple[object, ...]]:
        """Link a node to its neighbours in time order (already in `_timeline`);
        a scoped node to its nearest neighbours among the nodes its scope
        sees (those whose scope holds its own), as if only they were stored."""
        if node.timestamp is None:
            return []
        timeline = self._timeline
        pos = bisect.bisect_left(timeline, (node.timestamp, node.id))
        own = self._scopes.get(node.id)
        scopes = self._scopes
        empty: frozenset[tuple[str, str]] = frozenset()

        def seen(at: int) -> bool:
            return own is None or own <= scopes.get(timeline[at][1], empty)

        edges: list[tuple[object, ...]] = []
        prev_at = pos - 1
        while prev_at >= 0 and not seen(prev_at):
            prev_at -= 1
        if prev_at >= 0:
            ts, prev = timeline[prev_at]
            label = "same_time" if ts == node.timestamp else "before"
            edges.append((prev, node.id, "temporal", 1.0, "rule", label))
        next_at = pos + 1
        while next_at < len(timeline) and not seen(next_at):
            next_at += 1
        if next_at < len(timeline):
            ts, nxt = timeline[next_at]
            label = "same_time" if ts == node.timestamp else "before"
            edges.append((node.id, nxt, "temporal", 1.0, "rule", label))
        return edges

    def _consolidate(self, focus: list[tuple[int, list[Any]]]) -> None:
        questions = catalogue.consolidation_questions()
        requests: list[DecisionRequest] = []
        neighbourhoods: list[list[int]] = []
        focus_ids = [fid for fid, _ in focus]
        for fid, cands in focus:
            node = self.store.get(fid)
            linked = {e.src for e in self.store.neighbors(fid)} | {
                e.dst for e in self.store.neighbors(fid)
            }
            nbrs = []
            for c in cands:
                other = self.store.get(c.id)
                nbrs.append(
                    {
                        "id": c.id,
                        "text": other.text,
                        "signals": {
                            "vector": c.vector,
                            "lexical": c.lexical,
                            "newer": 0.0,  # candidates are always earlier than the focus
                            "linked": 1.0 if c.id in linked else 0.0,
                        },
                    }
                )
            neighbourhoods.append([c.id for c in cands])
            requests.append(
                DecisionRequest(
                    "consolidation",
                    {"focus": {"id": fid, "text": node.text}, "neighbours": nbrs},
                    questions,
                )
            )
        answers = self._decide(requests, "write")
        for fid, nbr_ids, got, req in zip(
            focus_ids, neighbourhoods, answers, requests, strict=True
        ):
            rep = got["representation"]
            assert isinstance(rep, ChoiceAnswer)
            decision: dict[str, Any] = {
                "focus": fid,
                "neighbours": nbr_ids,
                **{
                    k: _answer_value(got[k])
                    for k in ("redundant", "contradicting", "obsolete", "extra_link")
                },
                "representation": rep.label,
                "distribution": dict(rep.distribution),
            }
            self.decisions.append(decision)
            if decision["extra_link"] >= self.config.theta_rel and nbr_ids:
                unlinked = [n["id"] for n in req.state["neighbours"] if not n["signals"]["linked"]]
                if unlinked:
                    self.store.add_edge(unlinked[0], fid, "semantic", decision["extra_link"])
            escalate = rep.label in ("merge", "promote") and (
                rep.distribution[rep.label] >= self.config.summary_min_prob
                and decision["contradicting"] < self.config.summary_max_contradiction
            )
            decision["escalated"] = bool(escalate and self.summariser is not None)
            if escalate and self.summariser is not None:
                sources = [self.store.get(i) for i in [fid, *nbr_ids]]
                try:
                    summary = self.summariser(sources)
                except SystemTwoError as exc:
                    # the writes stand; the approval is recorded, the summary is not written
                    decision["summary_error"] = f"{type(exc).__name__}: {exc}"[:300]
                    continue
                vec = self.embedder.embed_one(summary)
                # the pairs every source has: the summary is seen exactly
                # where all of its sources are
                shared = set(sources[0].scope.items())
                for src in sources[1:]:
                    shared &= set(src.scope.items())
                sid = self.store.add(
                    summary,
                    vec,
                    provenance={
                        "kind": "summary",
                        "summary_of": ",".join(str(s.id) for s in sources),
                    },
                    scope=dict(shared),
                )
                self.store.add_edges([(sid, s.id, "semantic", 1.0) for s in sources])
                decision["summary_id"] = sid

    # ---- read path --------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        now: Any | None = None,
        mode: Mode = "full",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Evidence for a query: the top ``k`` memories with provenance and a trace.

        ``scope`` and ``filter`` restrict the search to some observations, in
        every mode and at every step (the ranked lists, their statistics, the
        time-order context, entity and speaker lookups, supersedes chains and
        the traversal): the others are not returned, counted or traversed.

        A scope {"user": "u1"} selects the observations whose scope holds
        every pair of it ({"user": "u1", "session": "s3"} too; a global
        observation, with no scope, only in an unscoped search).

        A filter is a plain dict (JSON-friendly); every entry must hold:

        - ``{"topic": "work"}``: metadata field equals the value (str, int,
          float or bool; 1 equals 1.0; a string never equals a number);
        - ``{"priority": {"$gte": 1, "$lt": 3}}``: operators ``$eq``, ``$ne``,
          ``$in`` / ``$nin`` (a list), ``$gt``, ``$gte``, ``$lt``, ``$lte``
          (numbers; a field that is not a number never matches a range) and
          ``$exists`` (True / False), all of which must hold;
        - ``{"$and": [f, ...]}``, ``{"$or": [f, ...]}``, ``{"$not": f}``
          combine filters (``$not`` is plain negation: ``{"$not": {"topic":
          "work"}}`` also matches observations without a topic);
        - the field ``"$timestamp"`` is the observation time (unix seconds,
          or anything `add` accepts as a timestamp: a datetime, an ISO
          string); an observation without one matches no condition on it
          but ``{"$exists": False}``.

        A malformed scope or filter raises InvalidInputError naming the problem.
        """
        return self.search_batch([query], k, now=now, mode=mode, scope=scope, filter=filter)[0]

    def search_batch(
        self,
        queries: Sequence[str],
        k: int = 10,
        *,
        now: Any | None = None,
        mode: Mode = "full",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[SearchResult]:
        """Run queries in lockstep: each round is one controller call for all of them.

        ``scope`` and ``filter`` apply to every query (see `search`).

        Python's cyclic garbage collector is held off while the searches run
        and turned back on after (unless it was off already): a round keeps
        every query's requests alive, which the collector would scan for
        nothing (`jevmem._collector.collector_paused`).
        """
        if not isinstance(mode, str) or mode not in ("lexical", "anchors", "traversal", "full"):
            raise InvalidInputError(f"unknown mode {mode!r:.40}")
        queries, k, now_ts = _validate.search_args(
            queries, k, now, max_text_bytes=self.store.max_text_bytes
        )
        self._sync_with_store()
        # resolved once for the whole batch, before any work: bad input raises here
        view = _ScopedView.of(self, scope, filter)
        with collector_paused():
            return self._search_batch(queries, k, now_ts, mode, view)

    def _search_batch(
        self,
        queries: Sequence[str],
        k: int,
        now_ts: int | None,
        mode: Mode,
        view: _ScopedView | None = None,
    ) -> list[SearchResult]:
        starts = [time.perf_counter() for _ in queries]
        qvecs = self.embedder.embed(list(queries)) if queries else np.zeros((0, self.store.dim))
        runs = [
            _QueryRun(self, q, qv, k, now_ts, mode, t0, view)
            for q, qv, t0 in zip(queries, qvecs, starts, strict=True)
        ]
        if mode in ("lexical", "anchors"):
            return [r.simple_result() for r in runs]
        max_wall = float(self.config.traversal.as_dict()["max_wall_s"])  # type: ignore[arg-type]
        streams = mode == "full" and callable(getattr(self.controller, "decide_stream", None))
        # Each run is a generator of requests; one decide() per lockstep round
        # for all of them. A query's next requests are produced (its generator
        # advanced with the last round's answers) only when they are pulled: a
        # streaming controller pulls them as it sends, so a remote server
        # answers the first queries of a round while the later ones are still
        # being worked out here. Same rounds, same requests, same order.
        waiting: list[tuple[_QueryRun, _Steps, list[dict[str, Answer]] | None]] = [
            (r, r.steps(), None) for r in runs
        ]
        while waiting:
            asked: list[tuple[_QueryRun, _Steps, int]] = []

            def round_requests(
                waiting: list[tuple[_QueryRun, _Steps, list[dict[str, Answer]] | None]] = waiting,
                asked: list[tuple[_QueryRun, _Steps, int]] = asked,
            ) -> Iterator[DecisionRequest]:
                for r, gen, got in waiting:
                    try:
                        reqs = next(gen) if got is None else gen.send(got)
                    except StopIteration:
                        continue
                    asked.append((r, gen, len(reqs)))
                    yield from reqs

            if mode == "full":
                budget = min(max_wall - (time.perf_counter() - r.t0) for r, _, _ in waiting)
                lazy = round_requests()
                answers = self._decide(
                    lazy if streams else list(lazy), "query", budget_s=max(0.0, budget)
                )
            else:
                answers = _neutral(list(round_requests()))
            fell_back = getattr(self.controller, "name", "") == "local-fallback"
            waiting = []
            pos = 0
            for r, gen, n in asked:
                r.calls += 1
                if fell_back and mode == "full":
                    r.fell_back = True
                waiting.append((r, gen, answers[pos : pos + n]))
                pos += n
        return [r.result() for r in runs]

    # ---- answers (System Two) ---------------------------------------------

    def answer(
        self,
        query: str,
        k: int = 10,
        *,
        system_two: SystemTwo | None = None,
        abstain: bool = True,
        abstain_below: float = _answering.DEFAULT_ABSTAIN_BELOW,
        prompt: _answering.AnswerPrompt | None = None,
        now: Any | None = None,
        mode: Mode = "full",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> _answering.Answer:
        """Answer a query from this memory's evidence with one System-Two generation.

        Runs `search` (``k``, ``now``, ``mode``, ``scope``, ``filter`` as
        there), then, unless it abstains, asks ``system_two`` (default: this
        memory's ``system_two``, else a `jevmem.system_two.ChatCompletionsClient`
        from the environment) once over an evidence pack of the results.
        With ``abstain`` (the default) a search with no evidence, or whose
        sufficiency is below ``abstain_below``, returns the prompt's
        abstention text and the model is not called. The returned
        `jevmem.answering.Answer` holds the text, the cited node ids (always
        among the search's evidence), the search result and a trace (prompt
        version, tokens, latency). Raises `jevmem.errors.SystemTwoError`
        when the model call fails; the memory is not changed either way.
        """
        return _answering.answer_batch(
            self,
            [query],
            k,
            system_two=system_two,
            abstain=abstain,
            abstain_below=abstain_below,
            prompt=prompt,
            now=now,
            mode=mode,
            scope=scope,
            filter=filter,
            concurrency=1,
        )[0]

    def answer_batch(
        self,
        queries: Sequence[str],
        k: int = 10,
        *,
        system_two: SystemTwo | None = None,
        abstain: bool = True,
        abstain_below: float = _answering.DEFAULT_ABSTAIN_BELOW,
        prompt: _answering.AnswerPrompt | None = None,
        now: Any | None = None,
        mode: Mode = "full",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
        concurrency: int = 4,
    ) -> list[_answering.Answer]:
        """`answer` for many queries: one `search_batch` (lockstep rounds),
        then the generations, up to ``concurrency`` at a time."""
        return _answering.answer_batch(
            self,
            queries,
            k,
            system_two=system_two,
            abstain=abstain,
            abstain_below=abstain_below,
            prompt=prompt,
            now=now,
            mode=mode,
            scope=scope,
            filter=filter,
            concurrency=concurrency,
        )

    # ---- reads and persistence ---------------------------------------------

    def get(self, node_id: int) -> Node:
        return self.store.get(node_id)

    def neighbors(self, node_id: int, view: str | None = None) -> list[Any]:
        return self.store.neighbors(node_id, view)  # type: ignore[arg-type]

    def stats(self) -> dict[str, Any]:
        self._sync_with_store()
        s: dict[str, Any] = dict(self.store.stats())
        s["controller"] = getattr(self.controller, "name", type(self.controller).__name__)
        s["controller_calls_write"] = self.calls["write"]
        s["controller_calls_query"] = self.calls["query"]
        s["writes"] = self._writes
        s["consolidation_decisions"] = len(self.decisions)
        return s

    def save(self, path: str | Path) -> None:
        """Export the memory to one file (atomic): the store's snapshot with
        the memory's own state (embedder, consolidation decisions) inside."""
        self._sync_with_store()
        path = Path(path)
        with self._write_lock:
            self.store.save_with_state(path, self._state_bytes())

    @classmethod
    def load(
        cls,
        path: str | Path,
        embedder: Embedder | None = None,
        controller: SystemOne | None = None,
        *,
        config: MemoryConfig | None = None,
        max_absent_ids: int | None = None,
    ) -> Memory:
        """Import a file written by :meth:`save` (or a bare store snapshot,
        with the side files older versions wrote beside it). Without
        ``embedder`` the one the file names is made. ``max_absent_ids``:
        how many removed ids the file may claim, for a memory of yours that
        forgot more nodes than the default bound (sized from the file, so a
        crafted file cannot claim billions) admits; the refusal names it."""
        path = Path(path)
        store, raw = MemoryStore.load_with_state(path, max_absent_ids=max_absent_ids)
        state: dict[str, Any] = {}
        if raw is not None:
            state = _decode_state(raw, f"{path}")
        else:  # a bare snapshot: older builds kept this beside it
            side_path = path.with_name(path.name + ".decisions.json")
            meta_path = path.with_name(path.name + ".meta.json")
            try:
                if side_path.exists():
                    state.update(json.loads(side_path.read_text()))
                if meta_path.exists():
                    state.setdefault("embedder", json.loads(meta_path.read_text()).get("embedder"))
            except (OSError, ValueError) as exc:
                raise SnapshotError(f"{path}: unreadable side file: {exc}") from None
        if embedder is None and isinstance(state.get("embedder"), str):
            embedder = embedder_from_spec(state["embedder"])
        m = cls(embedder, controller, config=config, store=store)
        m._apply_state(state)
        return m

    # ---- durability ---------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | Path,
        embedder: Embedder | None = None,
        controller: SystemOne | None = None,
        *,
        config: MemoryConfig | None = None,
        summariser: SummariserLike | None = None,
        durability: str = "sync",
        salvage: bool = False,
        checkpoint_every: int = 20_000,
        max_absent_ids: int | None = None,
    ) -> Memory:
        """Open (or create) a durable memory in directory ``path``.

        Every acknowledged write is in the directory's write-ahead log:
        ``durability="sync"`` (default) returns from a write once its record
        is fsynced (concurrent writers share fsyncs); ``"interval:MS"`` once
        it is written to the OS, fsynced every MS milliseconds (an OS crash
        can lose the last MS); ``"none"`` fsyncs only at checkpoints and
        :meth:`close` (a process crash loses nothing, power loss can). A
        failed fsync makes the memory read-only (:class:`DurabilityError`).

        Opening replays the log after the last checkpoint and cuts a torn
        tail; a bad record followed by good ones refuses to open unless
        ``salvage=True``, which drops it and what follows (kept aside in the
        directory) and says so in :attr:`recovery`. The directory names its
        embedder: without ``embedder`` that one is made; another one is
        refused. A checkpoint is taken every ``checkpoint_every`` log records
        (0: only on :meth:`checkpoint` and :meth:`close`). ``max_absent_ids``
        as in :meth:`load`.

        A memory past the exact vector tier opens without rebuilding its
        HNSW graph: the vectors wait in a pending list that searches scan
        exactly (complete results, slower per query) while a background
        thread builds the graph; ``memory.store.pending_graph`` counts what
        is left and ``memory.store.finish_graph()`` waits for it.
        """
        path = Path(path)
        if not (isinstance(checkpoint_every, int) and checkpoint_every >= 0):
            raise InvalidConfigError(
                f"checkpoint_every must be a non-negative integer, got {checkpoint_every!r}"
            )
        if embedder is None:
            embedder = embedder_from_spec(_manifest_embedder(path) or "default")
        config = config or MemoryConfig()
        initial = json.dumps({"format": 1, "embedder": embedder_spec(embedder)}).encode()
        store, raw_state, deltas, report = MemoryStore.open(
            path,
            embedder.dim,
            embedder=embedder_spec(embedder),
            state=initial,
            durability=durability,
            salvage=salvage,
            max_text_bytes=config.max_text_bytes,
            max_absent_ids=max_absent_ids,
        )
        try:
            m = cls(embedder, controller, config=config, summariser=summariser, store=store)
            m._apply_state(_decode_state(raw_state, f"{path} checkpoint"))
            for d in deltas:
                m._apply_delta(_decode_state(d, f"{path} log record"))
        except BaseException:
            store.close()
            raise
        m._checkpoint_every = checkpoint_every
        m._checkpoint_seq = int(report["checkpoint_seq"])
        m.recovery = dict(report)
        return m

    @property
    def durable(self) -> bool:
        """Whether this memory lives in a directory (see :meth:`open`)."""
        return bool(self.store.durable)

    def checkpoint(self) -> dict[str, Any]:
        """Write a checkpoint of a durable memory now: reopening then replays
        only later writes, and the log it covers is deleted (with it, the
        text of forgotten observations)."""
        with self._write_lock:
            report = dict(self.store.checkpoint(self._state_bytes()))
            self._checkpoint_seq = int(report["seq"])
            return report

    def close(self) -> None:
        """Checkpoint (when anything was written since the last) and close a
        durable memory; reads still work, writes raise. A no-op in memory."""
        if not self.durable:
            return
        with self._write_lock:
            if self.store.failure is None and self.store.last_seq != self._checkpoint_seq:
                self.checkpoint()
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _state(self) -> dict[str, Any]:
        return {
            "format": 1,
            "embedder": embedder_spec(self.embedder),
            "writes": self._writes,
            "decisions": self.decisions,
            "calls": self.calls,
        }

    def _state_bytes(self) -> bytes:
        return json.dumps(self._state(), separators=(",", ":")).encode()

    def _apply_state(self, state: Mapping[str, Any]) -> None:
        self._writes = int(state.get("writes", 0))
        self.decisions = list(state.get("decisions", []))
        calls = state.get("calls")
        if isinstance(calls, dict):
            self.calls = {"write": int(calls.get("write", 0)), "query": int(calls.get("query", 0))}

    def _apply_delta(self, delta: Mapping[str, Any]) -> None:
        self._writes += int(delta.get("writes", 0))
        if "decisions_all" in delta:  # a forget rewrote the list
            self.decisions = list(delta["decisions_all"])
        self.decisions.extend(delta.get("decisions", []))

    @contextmanager
    def _durable_write(self) -> Iterator[None]:
        """One write request. On a durable memory its store calls become one
        log record (with the memory's own state changes); the request
        returns once that record is durable. Re-entrant: a request made of
        others (update = add + link) is still one record."""
        if not self.store.durable:
            if self.store.closed:
                raise DurabilityError("the memory is closed")
            yield
            return
        seq: int | None = None
        with self._write_lock:
            outer = self._write_depth == 0
            if outer:
                self.store._begin_write()
                writes, decided = self._writes, len(self.decisions)
            self._write_depth += 1
            try:
                yield
            finally:
                self._write_depth -= 1
                if outer:
                    # logged even when the request failed half way: the log
                    # always holds what the memory holds
                    delta: dict[str, Any] = {}
                    if self._writes != writes:
                        delta["writes"] = self._writes - writes
                    if self._decisions_rewritten:
                        delta["decisions_all"] = self.decisions
                        self._decisions_rewritten = False
                    elif len(self.decisions) != decided:
                        delta["decisions"] = self.decisions[decided:]
                    seq = self.store._log_write(
                        json.dumps(delta, separators=(",", ":")).encode() if delta else b""
                    )
        if seq is not None:
            self.store._wait_durable(seq)
            if (
                self._checkpoint_every
                and (self.store.last_seq or 0) - self._checkpoint_seq >= self._checkpoint_every
            ):
                self.checkpoint()

    def _temporal_context(self, node_id: int) -> list[tuple[int, float]]:
        """The observations one and two steps before and after a node in time
        order, in its episode, with weight 1 and SECOND_STEP_DECAY; the one
        right before weighs 1 + REPLY_LINK x its question share when someone
        else asked it (this node is then its reply).

        These are the temporal view's time-order links (the rule edges each
        write adds); read off the sorted timeline, which also stays exact when
        observations arrive out of order. Cached until the next write.
        """
        cached = self._context.get(node_id)
        if cached is not None:
            return cached
        out = self._temporal_context_in(node_id, None)
        self._context[node_id] = out
        return out

    def _temporal_context_in(
        self, node_id: int, allowed: Allowed | None
    ) -> list[tuple[int, float]]:
        """`_temporal_context` among the allowed nodes (uncached)."""
        return [
            (other, w + REPLY_LINK * self._reply_share(other, node_id) if offset == -1 else w)
            for offset, other, w in self._timeline_neighbours(node_id, allowed)
        ]

    def _timeline_neighbours(
        self, node_id: int, allowed: Allowed | None = None
    ) -> list[tuple[int, int, float]]:
        """(offset, node, weight) for the observations one and two steps
        before (offset < 0) and after a node in time order, in its episode,
        weighted 1 and SECOND_STEP_DECAY; in the order -1, +1, -2, +2. With
        ``allowed``, the time order of those nodes alone (the others are
        stepped over, as if they were not stored)."""
        out: list[tuple[int, int, float]] = []
        stamp = self._stamps.get(node_id)
        if stamp is None:
            return out
        timeline = self._timeline
        pos = bisect.bisect_left(timeline, (stamp, node_id))
        episode = self._episodes.get(node_id)
        if allowed is None:
            for step, weight in ((1, 1.0), (2, SECOND_STEP_DECAY)):
                for offset in (-step, step):
                    at = pos + offset
                    if 0 <= at < len(timeline):
                        other = timeline[at][1]
                        if self._episodes.get(other) == episode:
                            out.append((offset, other, weight))
            return out
        sides: dict[int, list[int]] = {-1: [], 1: []}
        for direction, side in sides.items():
            at = pos + direction
            while 0 <= at < len(timeline) and len(side) < 2:
                other = timeline[at][1]
                if other in allowed:
                    side.append(other)
                at += direction
        for step, weight in ((1, 1.0), (2, SECOND_STEP_DECAY)):
            for direction in (-1, 1):
                side = sides[direction]
                if len(side) >= step and self._episodes.get(side[step - 1]) == episode:
                    out.append((direction * step, side[step - 1], weight))
        return out

    def _reply_share(self, asked_by: int, answered_by: int) -> float:
        """How much ``answered_by`` is a reply to a question in ``asked_by``
        (the turn before it): the question share of that turn, unless the
        same speaker said both (a question followed by its asker's own next
        turn is not answered by it)."""
        a, b = self._node_facts(asked_by).speaker, self._node_facts(answered_by).speaker
        if a and a == b:
            return 0.0
        return self._asks.get(asked_by, 0.0)

    def _style(self, node_id: int) -> tuple[float, float, float]:
        """A node's form relative to the memory it is in, each in [0, 1]:
        its length against the memory's mean (logistic of the log ratio: 0.5
        is a typical turn), its speaker's mean question share (someone who
        mostly asks, like a user asking an assistant), and its speaker's
        typical length against the memory's (0.5 without a speaker)."""
        cached = self._styles.get(node_id)
        if cached is not None:
            return cached
        n = len(self._log_len)
        if not n:
            return 0.5, 0.0, 0.5
        mean = self._log_len_total / n
        length = _logistic(self._log_len.get(node_id, mean) - mean)
        stats = self._speaker_stats.get(self._node_facts(node_id).speaker)
        if not stats or not stats[0]:
            got = (length, 0.0, 0.5)
        else:
            got = (length, stats[1] / stats[0], _logistic(stats[2] / stats[0] - mean))
        # the memory's means move with every write: kept until the next one
        self._styles[node_id] = got
        return got

    def _context_sides(
        self, node_id: int
    ) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]:
        """The observations one and two steps before, and after, a node in
        time order within its episode, weighted 1 and SECOND_STEP_DECAY; the
        two directions apart (which one answers the other differs between a
        chat of friends and a user asking an assistant). Cached until the
        next write."""
        cached = self._sides.get(node_id)
        if cached is not None:
            return cached
        cached = self._sides[node_id] = self._context_sides_in(node_id, None)
        return cached

    def _context_sides_in(
        self, node_id: int, allowed: Allowed | None
    ) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]:
        """`_context_sides` among the allowed nodes (uncached)."""
        near = self._timeline_neighbours(node_id, allowed)
        return (
            tuple((other, w) for offset, other, w in near if offset < 0),
            tuple((other, w) for offset, other, w in near if offset > 0),
        )

    def _names_a_speaker(
        self,
        entity: str,
        speakers: set[str] | None = None,
        order: list[str] | None = None,
    ) -> bool:
        """Whether ``entity`` names a known speaker as `_alias` reads names
        ("mel" names "melanie"), without a scan of every speaker: the
        speakers it is a prefix of are a range of the sorted list, and the
        ones that are a prefix of it are among its own prefixes. ``speakers``
        and its sorted ``order``: those of a scoped search (default: all)."""
        if speakers is None or order is None:
            speakers, order = self._speakers, self._speaker_order
        first = entity.split()[0] if entity.strip() else entity
        if entity in speakers or first in speakers:
            return True
        if len(first) >= 3:
            at = bisect.bisect_left(order, first)
            if at < len(order) and order[at].startswith(first):
                return True
            return any(first[:n] in speakers for n in range(3, len(first)))
        return False

    def known_entities(self) -> list[str]:
        self._sync_with_store()
        return list(self._entity_counts)

    # `list` last: below it, `list` in the class body would name the method

    def list(
        self,
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> tuple[builtins.list[Node], str | None]:
        """The observations a scope and filter select (see `search`), in id
        (insertion) order, ``limit`` at a time: ``(items, next_cursor)``;
        pass ``next_cursor`` back for the next page, None when there is none.
        Each node is on exactly one page, also while writes go on (new ones
        come last)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidInputError(f"limit must be an integer in [1, 10000], got {limit!r}")
        after: int | None = None
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.isascii() or not cursor.isdigit():
                raise InvalidInputError(f"cursor {cursor!r} is not one this memory gave out")
            after = int(cursor)
            if after >= 1 << 63:
                raise InvalidInputError(f"cursor {cursor!r} is not one this memory gave out")
        scope_arg, filter_arg = _scope_and_filter(scope, filter)
        ids = self.store.list_ids(scope_arg, filter_arg, limit=limit + 1, after=after)
        items = [self.store.get(i) for i in ids[:limit]]
        more = len(ids) > limit
        return items, (str(ids[limit - 1]) if more else None)

    def matching_ids(
        self, scope: Mapping[str, str] | None = None, filter: Mapping[str, Any] | None = None
    ) -> builtins.list[int]:
        """Every id a scope and filter select (see `search`), ascending."""
        scope_arg, filter_arg = _scope_and_filter(scope, filter)
        return self.store.matching_ids(scope_arg, filter_arg)


#: Words that frame a question about a conversation rather than carry its content.
_QUESTION_FRAME = (
    "mention",
    "mentioned",
    "say",
    "said",
    "talk",
    "talked",
    "discuss",
    "discussed",
    "tell",
    "told",
    "share",
    "shared",
    "ask",
    "asked",
    "think",
    "thought",
)
_SENTENCES = re.compile(r"[^.!?]+[.!?]*")
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|ours|us)\b", re.IGNORECASE
)
_REQUEST = re.compile(
    r"\b(?:can you|could you|would you|will you|please|help me|show me|tell me how|"
    r"suggest|recommend|advise|should i|how (?:can|do|should) i|what (?:would|should)|"
    r"give me|walk me through|explain)\b",
    re.IGNORECASE,
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|yourself)\b", re.IGNORECASE)
_CAPITALISED = re.compile(r"\b([A-Z][a-z]{2,})\b")
_GREETING = re.compile(
    r"(?:^|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|wow|oh|yes|yeah|yep|sure|ok|okay|well|great|bye|dear|aww|haha|omg)[\s,!]*)$",
    re.IGNORECASE,
)


def _decode_state(raw: bytes, where: str) -> dict[str, Any]:
    """A memory's own state as JSON bytes (empty: nothing recorded)."""
    if not raw:
        return {}
    try:
        state = json.loads(raw)
    except ValueError as exc:
        raise SnapshotError(f"{where}: memory state is not valid JSON: {exc}") from None
    if not isinstance(state, dict):
        raise SnapshotError(f"{where}: memory state is not a JSON object")
    return state


def _manifest_embedder(path: Path) -> str | None:
    """The embedder a memory directory names, read before opening it."""
    try:
        manifest = json.loads((path / "MANIFEST").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"{path}/MANIFEST is not readable: {exc}") from None
    name = manifest.get("embedder") if isinstance(manifest, dict) else None
    return name if isinstance(name, str) else None


def _is_vocative(text: str, m: re.Match[str]) -> bool:
    """A name used to address someone: 'Hey Gina, ...', 'Thanks, Mel!', '..., Caroline!'."""
    after = text[m.end() : m.end() + 2]
    before = text[max(0, m.start() - 24) : m.start()]
    if not after or after[0] not in ",!?.":
        return False
    return bool(_GREETING.search(before.rstrip(" ,")) or before.rstrip().endswith(","))


def _alias(entity: str, name: str) -> bool:
    """'mel' and 'caro' name 'melanie' and 'caroline': equal, or a 3+ letter prefix either way."""
    if not name or not entity:
        return False
    first = entity.split()[0]
    if entity == name or first == name:
        return True
    short, long_ = sorted((first, name), key=len)
    return len(short) >= 3 and long_.startswith(short)


def _evidence_score(relevance: float, support: float) -> float:
    """A node's score as evidence: its own relevance, lifted by its support."""
    w = ANCHOR_RELEVANCE_WEIGHT
    return min(1.0, w * float(relevance) + (1 - w) * float(support))


def _raw(sig: Mapping[str, float]) -> float:
    """A pool node's plain topical match, before any controller judgment."""
    return 0.5 * sig["lexical"] + 0.5 * sig["dense"]


def _question_share(text: str) -> float:
    """Share of a text's sentences that are questions."""
    sentences = [x for x in _SENTENCES.findall(text) if x.strip()]
    if not sentences:
        return 0.0
    return float(sum(x.rstrip().endswith("?") for x in sentences) / len(sentences))


def _session(node: Node) -> str | None:
    """The session (or episode) the node's provenance names, if any."""
    prov = node.provenance
    for key in ("session", "session_id", "episode"):
        if key in prov:
            return f"{key}:{prov[key]}"
    return None


def _episode(node: Node) -> str | None:
    """The episode a node belongs to: the session its provenance names, else
    the calendar day (UTC) it was observed on, else none."""
    named = _session(node)
    if named is None and node.timestamp is not None:
        return f"day:{node.timestamp // _DAY_S}"
    return named


def _same_speaker(a: Node, b: Node) -> float:
    sa = a.provenance.get("speaker", "").lower()
    return 1.0 if sa and sa == b.provenance.get("speaker", "").lower() else 0.0


def _older(candidate: Node, new: Node) -> float:
    """1 when the candidate was observed before the new node (or at the same
    time, or either time is unknown: then insertion order says it came first), else 0."""
    if candidate.timestamp is None or new.timestamp is None:
        return 1.0
    return 1.0 if candidate.timestamp <= new.timestamp else 0.0


def _same_session(a: Node, b: Node) -> float:
    sa = _session(a)
    return 1.0 if sa is not None and sa == _session(b) else 0.0


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


def _rank_share(rank: int) -> float:
    """A 0-based list rank as a value in (0, 1]: 1 at the top, 0.5 at the tenth."""
    return 1.0 / (1.0 + rank / 9.0)


def _share_of_best(x: float, best: float) -> float:
    """A score as a share of the query's best, in [0, 1]."""
    return min(1.0, max(0.0, x) / best) if best > 0 else 0.0


#: `_alias_signal` compares at most this many entities of each node (they
#: come speaker first, then in order of appearance): every pair is compared,
#: and a long text can carry thousands.
ALIAS_SCAN = 64


def _alias_signal(a: Sequence[str], b: Sequence[str]) -> float:
    """Best prefix/containment match between differing entity ids ('mel' ~ 'melanie')."""
    best = 0.0
    for x in a[:ALIAS_SCAN]:
        for y in b[:ALIAS_SCAN]:
            if x == y or len(x) < 3 or len(y) < 3:
                continue
            short, long_ = sorted((x, y), key=len)
            if long_.startswith(short) or f" {short}" in f" {long_}":
                best = max(best, len(short) / len(long_) + 0.3)
    return min(1.0, best)


def _neutral(requests: Sequence[DecisionRequest]) -> list[dict[str, Answer]]:
    """The 'traversal' ablation: signals only, no controller judgment.

    Routing is uniform, candidates are scored by embedding similarity and
    edge weight, and the assessment never stops early.
    """
    out: list[dict[str, Answer]] = []
    for req in requests:
        ans: dict[str, Answer] = {}
        for q in req.questions:
            kind = q.kind
            if kind.startswith("route."):
                ans[q.id] = NoulAnswer(0.5)
            elif kind.startswith("assess."):
                ans[q.id] = NoulAnswer(
                    1.0 if kind in ("assess.usefulness", "assess.missing") else 0.0
                )
            else:
                i = int(q.id.split("_")[1])
                sig = req.state["candidates"][i]["signals"]
                field_ = {
                    "score.relevance": "dense",
                    "score.relation_usefulness": "edge_weight",
                    "score.novelty": "novelty",
                    "score.support": "support",
                }[kind]
                ans[q.id] = NoulAnswer(float(min(1.0, max(0.0, sig.get(field_, 0.0)))))
        out.append(ans)
    return out


#: An expansion round's answers, per candidate, as `Traversal.score` takes them.
_SCORE_ROW = ("score.relevance", "score.relation_usefulness", "score.novelty", "score.support")
assert tuple(q.kind for q in catalogue.scoring_questions(0)) == _SCORE_ROW


@lru_cache(maxsize=1024)
def _round_questions(per_candidate: Callable[[int], tuple[Noul, ...]], n: int) -> tuple[Noul, ...]:
    """The questions of a scoring round over ``n`` candidates, candidate by candidate."""
    return tuple(q for i in range(n) for q in per_candidate(i))


def _filter_times(f: Any, depth: int = 0) -> dict[str, Any]:
    """A filter dict with every ``$timestamp`` value as unix seconds (a
    datetime, a date or an ISO string is converted as `add` converts
    timestamps); everything else is left for the core to check."""
    if depth > 64:
        raise InvalidInputError("filter nests too deep")
    if not isinstance(f, Mapping):
        raise InvalidInputError(f"filter must be a dict, got {type(f).__name__}")

    def unix(x: Any) -> Any:
        if isinstance(x, (bool, int, float)):
            return x
        try:
            return to_timestamp(x)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidInputError(f"filter: bad $timestamp value {x!r}: {exc}") from None

    out: dict[str, Any] = {}
    for k, v in f.items():
        if k in ("$and", "$or") and isinstance(v, (list, tuple)):
            out[k] = [_filter_times(x, depth + 1) for x in v]
        elif k == "$not":
            out[k] = _filter_times(v, depth + 1)
        elif k == "$timestamp":
            if isinstance(v, Mapping):
                out[k] = {
                    op: [unix(x) for x in x_list]
                    if op in ("$in", "$nin") and isinstance(x_list, (list, tuple))
                    else x_list
                    if op == "$exists"
                    else unix(x_list)
                    for op, x_list in v.items()
                }
            else:
                out[k] = unix(v)
        else:
            out[k] = dict(v) if isinstance(v, Mapping) else v
    return out


def _scope_and_filter(
    scope: Mapping[str, str] | None, filter: Mapping[str, Any] | None
) -> tuple[dict[str, str] | None, dict[str, Any] | None]:
    """Scope and filter as the core takes them (plain dicts, times as unix seconds)."""
    if scope is not None and not isinstance(scope, Mapping):
        raise InvalidInputError(f"scope must be a dict of str to str, got {type(scope).__name__}")
    return (
        None if scope is None else dict(scope),
        None if filter is None else _filter_times(filter),
    )


class _ScopedView:
    """What a scoped or filtered search sees: the allowed nodes (resolved once
    per search), the speakers among them, and their time-order context."""

    def __init__(self, memory: Memory, allowed: Allowed) -> None:
        self.allowed = allowed
        spoken = memory.store.provenance_values("speaker", allowed=allowed)
        self.speakers = {s.lower() for s in spoken if s.lower()}
        self.speaker_order = sorted(self.speakers)
        self.context: dict[int, list[tuple[int, float]]] = {}
        self.sides: dict[
            int, tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]
        ] = {}
        self._memory = memory
        #: the style statistics of `Memory._style`, over the allowed nodes
        #: (mean log length; per speaker turns, question share, log length)
        self._style_stats: tuple[float, dict[str, list[float]]] | None = None
        self._styles: dict[int, tuple[float, float, float]] = {}

    def style(self, node_id: int) -> tuple[float, float, float]:
        """`Memory._style` relative to the allowed nodes only: how a turn
        reads against the scope it is in, not against other scopes' turns."""
        got = self._styles.get(node_id)
        if got is not None:
            return got
        m = self._memory
        if self._style_stats is None:
            total, n = 0.0, 0
            speakers: dict[str, list[float]] = {}
            for i in self.allowed.ids():
                log_len = m._log_len.get(i)
                if log_len is None:
                    continue  # written past add_batch (a summary): as Memory._style
                total += log_len
                n += 1
                spk = m._node_facts(i).speaker
                if spk:
                    st = speakers.setdefault(spk, [0.0, 0.0, 0.0])
                    st[0] += 1
                    st[1] += m._asks.get(i, 0.0)
                    st[2] += log_len
            self._style_stats = (total / n if n else math.nan, speakers)
        mean, speakers = self._style_stats
        if math.isnan(mean):
            return 0.5, 0.0, 0.5
        length = _logistic(m._log_len.get(node_id, mean) - mean)
        stats = speakers.get(m._node_facts(node_id).speaker)
        if not stats or not stats[0]:
            got = (length, 0.0, 0.5)
        else:
            got = (length, stats[1] / stats[0], _logistic(stats[2] / stats[0] - mean))
        self._styles[node_id] = got
        return got

    @staticmethod
    def of(
        memory: Memory, scope: Mapping[str, str] | None, filter: Mapping[str, Any] | None
    ) -> _ScopedView | None:
        """None when nothing is restricted: the unscoped path, unchanged."""
        scope_arg, filter_arg = _scope_and_filter(scope, filter)
        allowed = memory.store.select(scope_arg, filter_arg)
        return None if allowed is None else _ScopedView(memory, allowed)


class _QueryRun:
    """One query's read path as a generator of controller requests."""

    def __init__(
        self,
        memory: Memory,
        query: str,
        qvec: npt.NDArray[np.float32],
        k: int,
        now: int | None,
        mode: Mode,
        t0: float,
        view: _ScopedView | None = None,
    ) -> None:
        self.m, self.query, self.qvec, self.k, self.now, self.mode, self.t0 = (
            memory,
            query,
            qvec,
            k,
            now,
            mode,
            t0,
        )
        store = memory.store
        cfg = memory.config
        #: a scoped search's view (None: the whole memory); every lookup
        #: below goes through it, so nothing outside is ranked or counted
        self.view = view
        allowed = self.allowed = None if view is None else view.allowed
        self.speakers = memory._speakers if view is None else view.speakers
        self.speaker_order = memory._speaker_order if view is None else view.speaker_order
        self.calls = 0
        self.fell_back = False
        self.assessment: tuple[float, float, float, float] | None = None
        self.traversal: Traversal | None = None
        #: see `ranked`
        self.ranking: list[Any] | None = None
        self.routing: dict[str, float] = {}
        depth = max(cfg.anchor_depth, k)
        lex_ids, lex_scores = store.search_lexical(query, depth, allowed=allowed)
        vec_ids, vec_sims = store.search_vector(qvec, depth, allowed=allowed)
        pool = k if mode in ("lexical", "anchors") else max(cfg.anchor_pool, cfg.anchors, k)
        # the same fusion as MemoryStore.fused_anchors, on the lists already in hand
        fused = rrf([vec_ids.tolist(), lex_ids.tolist()], cfg.kappa)[:pool]
        self.fused_ids = [node for node, _ in fused]
        self.fused_scores = [score for _, score in fused]
        self.max_lex = float(lex_scores[0]) if len(lex_scores) else 0.0
        self.max_sim = float(vec_sims[0]) if len(vec_sims) else 0.0
        # Long observations by their best passage (only nodes with passage
        # vectors: the node vectors above rank every other node already).
        p_ids, _, p_sims = store.search_passages(qvec, depth, long_only=True, allowed=allowed)
        self.passage_ids = [int(i) for i in p_ids]
        #: the query's best passage similarity over all nodes (a text of one
        #: passage: its node vector), the scale of the "dense_passage" signal
        self.max_passage_sim = max(self.max_sim, float(p_sims[0]) if len(p_sims) else 0.0)
        #: node -> index of its passage that matches the query best
        self.best_passage: dict[int, int] = {}
        # each node's place in the two ranked lists (a scale-free signal)
        self.lex_rank = {int(n): r for r, n in enumerate(lex_ids.tolist())}
        self.vec_rank = {int(n): r for r, n in enumerate(vec_ids.tolist())}
        # Entities the query names as proper nouns and the memory knows (a
        # lower-case common word that happens to be an entity id elsewhere is
        # not a name here).
        named = set(extract_entities(query))
        # only the names the query itself carries can match: no scan of every
        # entity the memory knows (that grows with the memory). A run of
        # capitalised words may hold several names ("Is Oscar Melanie's
        # pet?" reads as one, "oscar melanie"): its shorter runs count too.
        for name in list(named):
            words = name.split()
            if len(words) > 1:
                named.update(
                    " ".join(words[i:j])
                    for i in range(len(words))
                    for j in range(i + 1, min(len(words), i + 4) + 1)
                )
        if allowed is None:
            known = [e for e in named if e in memory._entity_counts]
        else:
            names = sorted(named)
            flags = store.entities_known(names, allowed=allowed)
            known = [e for e, ok in zip(names, flags, strict=True) if ok]
        self.query_entities = mentions(query, known) if known else []
        # Whom the query asks about, for sufficiency: the people it names. When
        # the memory knows its speakers, a named place or thing ("Oregon", "the
        # LGBTQ workshop") is part of what is asked, not whom; without
        # speakers there is no telling, and every name counts.
        self.asked_people = (
            [
                e
                for e in self.query_entities
                if memory._names_a_speaker(e, self.speakers, self.speaker_order)
            ]
            if self.speakers
            else list(self.query_entities)
        )
        self.time_cues = query_time_cues(query, now=now)
        # who asks and what for: a query in the first person asks about the
        # one who talks to the memory; a request for help or advice is
        # answered by standing instructions and tastes as much as by facts
        self.query_self = 1.0 if _FIRST_PERSON.search(query) else 0.0
        self.query_request = 1.0 if _REQUEST.search(query) else 0.0
        #: which time the query wants facts to hold at (see `fact_signals`)
        self.fact_time: FactTime = query_fact_time(query, self.time_cues, now=now)
        self.query_tokens = set(store.tokenize(query))
        # What the query asks about, without the names of whom it asks about:
        # evidence must match both parts, separately (SPEC §3: sufficiency).
        name_tokens = {t for e in self.asked_people for t in store.tokenize(e)}
        frame = memory._frame_tokens()
        self.content_tokens = (
            self.query_tokens - name_tokens - frame or self.query_tokens - name_tokens
        )
        self.wants_time = bool(self.time_cues["asks_when"] or self.time_cues["temporal"])
        self.relevance: dict[int, float] = {}
        self.entity_ok: dict[int, float] = {}
        self.coverage: dict[int, tuple[float, float]] = {}
        #: the text of every node whose signals were measured
        self.texts: dict[int, str] = {}
        #: IDF weight and presence in the memory of the query's content tokens (see term_presence)
        self.term_idf: dict[str, tuple[float, bool]] | None = None
        #: every measured node's raw cosine similarity with the query vector
        self.dense_raw: dict[int, float] = {}
        self.evidence_score: dict[int, float] = {}
        #: the evidence scores `ranked` ranks by (evidence_score, then
        #: rank_below_replacements)
        self.final_score: dict[int, float] = {}
        #: facts not valid at the query's time -> the facts of their chain
        #: that were (see fact_signals)
        self.replaced: dict[int, set[int]] = {}
        #: chain member -> the facts valid at the query's time whose chain holds it
        self.holders: dict[int, set[int]] = {}
        #: the chain nodes whose facts did not hold at the query's time
        self.invalid: set[int] = set()
        self.assessed_top: list[int] = []
        #: the evidence the latest assessment request showed
        self.shown: list[int] = []
        self.final_assessment = False
        self.pool_sources: dict[str, int] = {}
        self.topical: dict[int, float] = {}
        self.episode_strength: dict[str | None, float] = {}

    # -- signals -------------------------------------------------------------

    def signals(self, ids: list[int]) -> list[dict[str, float]]:
        """Per-node retrieval signals, each in [0, 1]: BM25 and embedding
        similarity (normalised by the query's best), agreement with the people
        the query names, a match with the time the query names (or, for "when"
        questions, a grounded date in the node), and how much of the node is
        itself a question (a question asserts nothing)."""
        m = self.m
        lex = m.store.lexical_scores(self.query, ids, allowed=self.allowed).tolist()
        sims = m.store.similarities(self.qvec, ids).tolist()
        p_sims, p_idx = m.store.passage_similarities(self.qvec, ids)
        max_psim = self.max_passage_sim
        self.best_passage.update(zip(ids, p_idx.tolist(), strict=True))
        asks = m._asks
        facts = m._facts
        texts, entity_ok = self.texts, self.entity_ok
        named = self.query_entities
        max_lex, max_sim = self.max_lex, self.max_sim
        # a query that names no time gives every node 0 (see time_match)
        timed = self.time_cues["constraint"] is not None or self.wants_time
        out = []
        lex_rank, vec_rank = self.lex_rank, self.vec_rank
        style = m._style if self.view is None else self.view.style
        for node_id, lx, sim, psim in zip(ids, lex, sims, p_sims.tolist(), strict=True):
            f = facts.get(node_id) or m._node_facts(node_id)
            length, speaker_asks, speaker_length = style(node_id)
            lr, vr = lex_rank.get(node_id), vec_rank.get(node_id)
            episodic, semantic, procedural, preference = f.types
            if named:
                if f.speaker and f.speaker in named:
                    ent = 1.0
                elif not f.entities.isdisjoint(named):
                    ent = 0.6
                else:
                    ent = 0.0
            else:
                ent = 0.0
            out.append(
                {
                    # _share_of_best, inlined: this runs for every pool node
                    "lexical": min(1.0, max(0.0, lx) / max_lex) if max_lex > 0 else 0.0,
                    "dense": min(1.0, max(0.0, sim) / max_sim) if max_sim > 0 else 0.0,
                    # the best passage's similarity (a short text: its own)
                    "dense_passage": min(1.0, max(0.0, psim) / max_psim) if max_psim > 0 else 0.0,
                    "entity_match": ent,
                    "time_match": self.time_match(node_id) if timed else 0.0,
                    "asks": asks.get(node_id, 0.0),
                    "dense_raw": sim if 0.0 < sim < 1.0 else float(sim >= 1.0),
                    "lexical_rank": 0.0 if lr is None else _rank_share(lr),
                    "dense_rank": 0.0 if vr is None else _rank_share(vr),
                    "length": length,
                    "speaker_asks": speaker_asks,
                    "speaker_length": speaker_length,
                    # what kind of memory it is (a standing instruction or a
                    # taste bears on requests that never name it)
                    "type_episodic": episodic,
                    "type_semantic": semantic,
                    "type_procedural": procedural,
                    "type_preference": preference,
                    # what kind of query asks (the same for every node)
                    "query_self": self.query_self,
                    "query_request": self.query_request,
                }
            )
            texts[node_id] = f.text
            self.dense_raw[node_id] = out[-1]["dense_raw"]
            entity_ok[node_id] = 1.0 if not named else min(1.0, ent + 0.4 * (ent > 0))
        self.fact_signals(ids, out)
        return out

    # -- facts that change -----------------------------------------------------

    def fact_signals(self, ids: list[int], out: list[dict[str, float]]) -> None:
        """Validity signals of the nodes in a supersedes chain, each in [0, 1],
        for the time the query asks about (`query_fact_time`):

        - ``valid_at_query_time``: the share of that time the node's fact held
          (1 or 0 for a point: the present, or ``now``);
        - ``superseded``: the share of it after the fact was replaced;
        - ``not_yet_valid``: the share of it before the fact began (a
          replacement asked about before it happened);
        - ``chain_match``: for a fact that held then, the best topical match
          in its chain (the facts it replaced or was replaced by, transitively),
          times that share: the fact valid at the time answers what its chain
          is about.

        A link's weight is not applied again: it already passed theta_rel
        when it was written, which is the decision that the fact changed.

        Nodes outside any chain, and queries that name no time and no tense,
        get none of them (a controller reads absent as 0).
        """
        ft = self.fact_time
        store = self.m.store
        if ft.stance == "neutral" or not ids or not store.supersedes_count:
            return
        chains = self.fact_chains(ids)
        valid_rows: list[tuple[dict[str, float], list[int]]] = []
        for node_id, sig, chain in zip(ids, out, chains, strict=True):
            if chain is None:
                continue
            start, end, olds, news = chain
            if ft.stance == "past":
                # before a change: what was replaced held, what replaced it did not yet
                held, after, before = (1.0, 0.0, 0.0) if news else (0.0, 0.0, 1.0)
            elif ft.stance == "present":
                t = ft.at
                replaced = bool(news) and (t is None or end is None or end <= t)
                begun = start is None or t is None or start <= t
                held = 1.0 if begun and not replaced else 0.0
                after = 1.0 if replaced else 0.0
                before = 0.0 if begun else 1.0
            else:
                lo, hi = ft.at, ft.until
                assert lo is not None and hi is not None
                width = max(1, hi - lo)
                a = lo if start is None else max(lo, start)
                b = hi if end is None else min(hi, end)
                held = max(0, b - a) / width
                after = 0.0 if end is None else max(0, hi - max(lo, end)) / width
                before = 0.0 if start is None else max(0, min(hi, start) - lo) / width
            sig["valid_at_query_time"] = min(1.0, held)
            sig["superseded"] = min(1.0, after)
            sig["not_yet_valid"] = min(1.0, before)
            sig["chain_match"] = 0.0
            chain_ids = self.chain_of(olds, news)
            if held > 0:
                valid_rows.append((sig, chain_ids))
                for r in chain_ids:
                    self.holders.setdefault(r, set()).add(node_id)
                for r in self.invalid.intersection(chain_ids):
                    self.replaced.setdefault(r, set()).add(node_id)
            elif after > 0 or before > 0:
                self.invalid.add(node_id)
                if node_id in self.holders:
                    self.replaced.setdefault(node_id, set()).update(self.holders[node_id])
        relatives = sorted({r for _, rel in valid_rows for r in rel})
        if not relatives:
            return
        lex = store.lexical_scores(self.query, relatives, allowed=self.allowed).tolist()
        sims = store.similarities(self.qvec, relatives).tolist()
        match = {
            r: 0.5 * _share_of_best(lx, self.max_lex)
            + 0.5 * _share_of_best(0.0 if math.isnan(sm) else sm, self.max_sim)
            for r, lx, sm in zip(relatives, lex, sims, strict=True)
        }
        for sig, rel in valid_rows:
            best = max(match.get(r, 0.0) for r in rel)
            sig["chain_match"] = min(1.0, best * sig["valid_at_query_time"])

    def chain_of(self, olds: list[tuple[int, float]], news: list[tuple[int, float]]) -> list[int]:
        """Every node reachable through supersedes links from a node whose
        direct links are ``olds`` and ``news`` (at most CHAIN_NODES of them)."""
        found = [r for r, _ in olds + news]
        seen = set(found)
        frontier = list(found)
        while frontier and len(found) < CHAIN_NODES:
            step = []
            for chain in self.fact_chains(frontier):
                if chain is not None:
                    for r, _ in chain[2] + chain[3]:
                        if r not in seen:
                            seen.add(r)
                            step.append(r)
            found += step
            frontier = step
        return found[:CHAIN_NODES]

    def chain_relatives(self, ids: list[int]) -> list[int]:
        """The nodes one supersedes link away from any of ``ids``, when the
        query asks about a time: so the fact valid then is ranked even when its
        words match less, and the history stays in reach."""
        store = self.m.store
        if self.fact_time.stance == "neutral" or not ids or not store.supersedes_count:
            return []
        out: list[int] = []
        for chain in self.fact_chains(ids):
            if chain is not None:
                out.extend(r for r, _ in chain[2] + chain[3])
        return out

    def fact_chains(self, ids: list[int]) -> list[Any]:
        """`MemoryStore.fact_chains` as the search sees it: a scoped search
        drops the links to nodes it does not see, and a fact's end of
        validity then comes from the replacements it does see only."""
        store = self.m.store
        chains = store.fact_chains(ids)
        allowed = self.allowed
        if allowed is None:
            return chains
        out: list[Any] = []
        for chain in chains:
            if chain is None:
                out.append(None)
                continue
            start, end, olds, news = chain
            seen_olds = [(o, w) for o, w in olds if o in allowed]
            seen_news = [(n, w) for n, w in news if n in allowed]
            if not seen_olds and not seen_news:
                out.append(None)
                continue
            if len(seen_news) != len(news):
                # as `MemoryStore.validity`: the earliest start of a
                # replacement, never before this fact's own start
                starts = [s for s in (store.validity(n)[0] for n, _ in seen_news) if s is not None]
                end = min(starts) if starts else None
                if end is not None and start is not None:
                    end = max(end, start)
            out.append((start, end, seen_olds, seen_news))
        return out

    def time_match(self, node_id: int) -> float:
        """How well the node's time fits the time the query names.

        With a window in the query ("on 9 November, 2022", "in August 2023"):
        1 when the node was observed in it or refers to a time in it, decaying
        with the distance to it (scale: the window's width, at least 3 days).
        Without one, a "when" question prefers nodes that state a date (0.3:
        a hint, not a match).
        """
        window = self.time_cues["constraint"]
        if window is None:
            if not self.wants_time:
                return 0.0
            return 0.3 if node_id in self.m._time_refs else 0.0
        refs = self.m._time_refs.get(node_id, ())
        lo, hi = window
        scale = max(3 * _DAY_S, hi - lo)
        spans = [(r.start, r.end) for r in refs]
        stamp = self.m._stamps.get(node_id)
        if stamp is not None:
            spans.append((stamp, stamp))
        best = 0.0
        for start, end in spans:
            gap = max(0, lo - end, start - hi)
            best = max(best, math.exp(-gap / scale))
        return best

    def pool(self) -> tuple[list[int], list[dict[str, float]]]:
        """The nodes the controller ranks before seeding, with their signals:
        the fused lexical + vector lists, the nodes observed inside a time
        window the query names, and the temporal context (two steps each way,
        same episode) of the strongest of them: answers often sit in the reply
        to the turn that matches the query."""
        cfg = self.m.config
        ids = [int(i) for i in self.fused_ids]
        seen = set(ids)
        window = self.time_cues["constraint"]
        if window is not None and cfg.time_window_nodes:
            timeline = self.m._timeline
            lo = bisect.bisect_left(timeline, (window[0], -1))
            hi = bisect.bisect_right(timeline, (window[1], 1 << 62))
            allowed = self.allowed
            inside = [
                n for _, n in timeline[lo:hi] if n not in seen and (allowed is None or n in allowed)
            ]
            if len(inside) > cfg.time_window_nodes:
                # More than the pool takes: the best topical matches among
                # them (the window's first ones would favour its start); at
                # most WINDOW_SCAN of them are scored, evenly spread.
                step = max(1, len(inside) // WINDOW_SCAN)
                inside = inside[::step][:WINDOW_SCAN]
                lex = self.m.store.lexical_scores(self.query, inside, allowed=self.allowed).tolist()
                sims = self.m.store.similarities(self.qvec, inside).tolist()
                top_lex, top_sim = max(lex), max(sims)
                match = {
                    n: _share_of_best(a, top_lex) + _share_of_best(b, top_sim)
                    for n, a, b in zip(inside, lex, sims, strict=True)
                }
                inside = sorted(inside, key=lambda n: (-match[n], n))[: cfg.time_window_nodes]
            for node_id in inside:
                seen.add(node_id)
                ids.append(node_id)
        in_window = len(ids) - len(self.fused_ids)
        # long observations whose best passage matches, like the window's nodes
        for node_id in self.passage_ids:
            if node_id not in seen:
                seen.add(node_id)
                ids.append(node_id)
        self.pool_sources = {
            "fused": len(self.fused_ids),
            "time_window": in_window,
            "passages": len(ids) - len(self.fused_ids) - in_window,
        }
        sigs = self.signals(ids)
        raw = {n: _raw(sig) for n, sig in zip(ids, sigs, strict=True)}
        if cfg.feedback_weight > 0 and cfg.feedback_nodes > 0 and ids:
            # Pseudo-relevance feedback (Rocchio, in embedding space): move the
            # query towards its best few matches, then re-measure similarity.
            top = sorted(ids, key=lambda n: (-raw[n], n))[: cfg.feedback_nodes]
            centroid = np.mean([self.m.store.embedding(n) for n in top], axis=0)
            moved = self.qvec + cfg.feedback_weight * centroid
            norm = float(np.linalg.norm(moved))
            if norm > 0:
                self.qvec = (moved / norm).astype(np.float32)
                sims = self.m.store.similarities(self.qvec, ids)
                self.max_sim = float(sims.max())
                p_sims, p_idx = self.m.store.passage_similarities(self.qvec, ids)
                self.max_passage_sim = float(p_sims.max())
                self.best_passage.update(zip(ids, p_idx.tolist(), strict=True))
                for sig_id, sig, sim, psim in zip(
                    ids, sigs, sims.tolist(), p_sims.tolist(), strict=True
                ):
                    sig["dense"] = _share_of_best(sim, self.max_sim)
                    sig["dense_raw"] = self.dense_raw[sig_id] = min(1.0, max(0.0, sim))
                    sig["dense_passage"] = _share_of_best(psim, self.max_passage_sim)
                raw = {n: _raw(sig) for n, sig in zip(ids, sigs, strict=True)}
        strongest = sorted(ids, key=lambda n: (-raw[n], n))[: cfg.context_seeds]
        context = []
        for node_id in strongest:
            for other, _w in self.temporal_context(node_id):
                if other not in seen:
                    seen.add(other)
                    context.append(other)
        if context:
            sigs += self.signals(context)
            ids += context
        self.pool_sources["context"] = len(context)
        chained = []
        for other in self.chain_relatives(strongest):
            if other not in seen:
                seen.add(other)
                chained.append(other)
        if chained:
            sigs += self.signals(chained)
            ids += chained
        self.pool_sources["supersedes"] = len(chained)
        return ids, sigs

    def near_support(self, node_id: int) -> float:
        """How strongly the node's temporal context matches the query (the
        best neighbour's topical match times the path weight, at most 1)."""
        topical = self.topical
        if self.view is None:
            context = self.m._context.get(node_id)
            if context is None:
                context = self.m._temporal_context(node_id)
        else:
            context = self.temporal_context(node_id)
        best = 0.0  # every match is >= 0
        for other, weight in context:
            match = weight * topical.get(other, 0.0)
            if match > best:
                best = match
        # a reply link weighs up to 2 (REPLY_LINK): support stays in [0, 1]
        return best if best < 1.0 else 1.0

    def side_match(self, node_id: int) -> tuple[float, float]:
        """The best topical match among the turns before the node, and among
        those after it (path weights as in `near_support`, no reply link)."""
        topical = self.topical
        view = self.view
        if view is None:
            before, after = self.m._context_sides(node_id)
        else:
            sides = view.sides.get(node_id)
            if sides is None:
                sides = view.sides[node_id] = self.m._context_sides_in(node_id, view.allowed)
            before, after = sides
        prev = max((w * topical.get(o, 0.0) for o, w in before), default=0.0)
        nxt = max((w * topical.get(o, 0.0) for o, w in after), default=0.0)
        return prev, nxt

    def text(self, node_id: int) -> str:
        got = self.texts.get(node_id)
        return got if got is not None else self.m._node_facts(node_id).text

    def temporal_context(self, node_id: int) -> list[tuple[int, float]]:
        view = self.view
        if view is None:
            return self.m._temporal_context(node_id)
        got = view.context.get(node_id)
        if got is None:
            got = view.context[node_id] = self.m._temporal_context_in(node_id, view.allowed)
        return got

    def episode(self, node_id: int) -> str | None:
        return self.m._episodes.get(node_id)

    def content_coverage(self, node_id: int) -> tuple[float, float]:
        """Share of the query's content words the node asserts *about the
        entity the query asks about*, and the share it asserts about other
        people the memory knows (speakers the query does not name).

        Sentence by sentence: a sentence is about its speaker when it speaks
        in the first person, about the addressee (the other speaker of the
        adjacent turns) in the second person, and about whoever the turn
        names, except names used to address someone ("Thanks, Mel!"). A
        sentence that marks no person at all is credited to its speaker at
        half weight (likely, not certain); words that only occur in questions
        count half too. The second share is what tells "Caroline researched
        adoption agencies" apart from a question about what Melanie researched.
        """
        if not self.content_tokens:
            return 0.0, 0.0
        asked = self.asked_people
        people = self.speakers
        speaker = self.m._node_facts(node_id).speaker
        named, sentences = self.m._sentences_of(node_id)
        addressees: set[str] | None = None
        named_mine: bool | None = None
        named_others = False
        credit: dict[str, float] = {}
        other: dict[str, float] = {}
        for words, weight, first, second in sentences:
            hits = self.content_tokens.intersection(words)
            if not hits:
                continue
            if not asked:
                for h in hits:
                    credit[h] = max(credit.get(h, 0.0), weight)
                continue
            if named_mine is None:
                # what the names alone decide, once per node rather than per
                # sentence (a long text names many people)
                named_mine = any(_alias(q, a) for q in asked for a in named)
                named_others = any(
                    a in people and not any(_alias(q, a) for q in asked) for a in named
                )
            about: set[str] = set()
            if first:
                about.add(speaker)
            if second:
                if addressees is None:
                    addressees = self.addressees(node_id)
                about |= addressees
            unmarked = not first and not second  # probably the speaker's own, not surely
            mine = weight if named_mine or any(_alias(q, a) for q in asked for a in about) else 0.0
            if not mine and unmarked and any(_alias(q, speaker) for q in asked):
                mine = 0.5 * weight
            others = named_others or any(
                a in people and not any(_alias(q, a) for q in asked) for a in about
            )
            theirs = weight if others else 0.0
            if (
                not theirs
                and unmarked
                and speaker in people
                and not any(_alias(q, speaker) for q in asked)
            ):
                theirs = 0.5 * weight
            for h in hits:
                credit[h] = max(credit.get(h, 0.0), mine)
                other[h] = max(other.get(h, 0.0), theirs)
        n = len(self.content_tokens)
        return sum(credit.values()) / n, sum(other.values()) / n

    def coverage_of(self, node_id: int) -> tuple[float, float]:
        """`content_coverage`, computed once per node and only when assessed."""
        if node_id not in self.coverage:
            self.coverage[node_id] = self.content_coverage(node_id)
        return self.coverage[node_id]

    def addressees(self, node_id: int) -> set[str]:
        """Speakers of the turns next to this one in time, other than its own."""
        m = self.m
        own = m._node_facts(node_id).speaker
        out = set()
        allowed = self.allowed
        for e in m.store.neighbors(node_id, "temporal"):
            other = e.dst if e.src == node_id else e.src
            if allowed is not None and other not in allowed:
                continue
            spk = m._node_facts(other).speaker
            if spk and spk != own:
                out.add(spk)
        return out

    def query_state(self) -> dict[str, Any]:
        return {
            "text": self.query,
            "entities": self.query_entities,
            "time": self.time_cues,
            "routing": self.routing,
        }

    # -- the loop --------------------------------------------------------------

    def steps(self) -> _Steps:
        store = self.m.store
        cfg = self.m.config
        anchor_ids, anchor_sig = self.pool()
        # Support of a pool node: how strongly the nodes around it in time
        # (adjacent turns of a dialogue, steps of a task) match the query, and
        # how strongly its episode does (mean of the episode's best three).
        raw = self.topical = {n: _raw(sig) for n, sig in zip(anchor_ids, anchor_sig, strict=True)}
        by_episode: dict[str | None, list[float]] = {}
        for n in anchor_ids:
            by_episode.setdefault(self.episode(n), []).append(raw[n])
        episode_strength = self.episode_strength = {
            ep: sum(sorted(v, reverse=True)[:3]) / 3 for ep, v in by_episode.items() if ep
        }
        cands = []
        episodes, texts, near_support = self.m._episodes, self.texts, self.near_support
        for a, sig in zip(anchor_ids, anchor_sig, strict=True):
            sig["support"] = near_support(a)
            sig["prev_match"], sig["next_match"] = self.side_match(a)
            sig["episode_support"] = episode_strength.get(episodes.get(a), 0.0)
            sig["edge_weight"] = 1.0
            cands.append({"id": a, "text": texts[a], "view": "semantic", "signals": sig})
        scoring_q = _round_questions(catalogue.anchor_questions, len(cands))
        got = yield [
            DecisionRequest(
                "routing", {"query": self.query_state()}, catalogue.routing_questions()
            ),
            DecisionRequest(
                "scoring", {"query": self.query_state(), "candidates": cands}, scoring_q
            ),
        ]
        route = {q.id: _answer_value(got[0][q.id]) for q in catalogue.routing_questions()}
        self.routing = {v: route[v] for v in VIEWS}
        anchors = []
        scored = got[1]
        relevance = self.relevance
        # two answers per anchor, in question order: relevance, support
        pairs = iter(scoring_q)
        for anchor, rel_q, sup_q in zip(anchor_ids, pairs, pairs, strict=True):
            rel = _answer_value(scored[rel_q.id])
            relevance[anchor] = rel
            # A seed's score: its own relevance, lifted by support from its neighbours.
            anchors.append((anchor, _evidence_score(rel, _answer_value(scored[sup_q.id]))))
        # best first, ties by id: two stable sorts instead of a tuple key per anchor
        anchors.sort(key=itemgetter(0))
        anchors.sort(key=itemgetter(1), reverse=True)
        t = store.traverse(
            tuple(self.routing[v] for v in VIEWS),  # type: ignore[arg-type]
            anchors[: max(cfg.anchors, self.k)],
            multi_hop=route["multi_hop"],
            recency=route["recency"],
            query_vector=self.qvec,
            now=self.now,
            config=cfg.traversal,
            calls_used=1,
            elapsed_s=time.perf_counter() - self.t0,
            allowed=self.allowed,
        )
        self.traversal = t
        while t.phase != "done":
            if t.phase == "assess":
                got = yield [self.assessment_request(t)]
                answer = got[0]
                vals = tuple(
                    _answer_value(answer[n])
                    for n in ("sufficiency", "usefulness", "missing", "contradiction")
                )
                self.assessment = vals  # type: ignore[assignment]
                # what the request showed (the evidence has not changed since)
                self.assessed_top = self.shown
                t.assess(*vals)
                self.ranking = None
            elif t.phase == "expand":
                found = t.expand()
                self.ranking = None
                if not found:
                    continue
                request = self.scoring_request(t, found)
                got = yield [request]
                scored = got[0]
                # one row per candidate, its four questions in order (_SCORE_ROW)
                rows = np.array(
                    [_answer_value(scored[q.id]) for q in request.questions], dtype=np.float32
                ).reshape(len(found), len(_SCORE_ROW))
                for c, (rel, _, _, sup) in zip(found, rows.tolist(), strict=True):
                    relevance[c.node] = rel
                    self.evidence_score[c.node] = _evidence_score(rel, sup)
                t.score(rows)
                self.ranking = None
            else:  # "score" without candidates cannot happen; guard anyway
                break
        # A traversal that stops right after a scoring round (visited or edge
        # limit) was last assessed on less evidence than it returns: assess
        # once more, so the result's sufficiency describes its own evidence,
        # when the call budget and the time allow.
        limits = cfg.traversal.as_dict()
        if (
            [e.node for e in self.ranked(t)[:ASSESSED_ITEMS]] != self.assessed_top
            and int(t.trace()["controller_calls"]) < int(limits["max_controller_calls"])  # type: ignore[call-overload]
            and time.perf_counter() - self.t0 < float(limits["max_wall_s"])  # type: ignore[arg-type]
        ):
            got = yield [self.assessment_request(t)]
            self.assessment = tuple(  # type: ignore[assignment]
                _answer_value(got[0][n])
                for n in ("sufficiency", "usefulness", "missing", "contradiction")
            )
            self.final_assessment = True

    def assessment_request(self, t: Traversal) -> DecisionRequest:
        text = self.text
        top = self.ranked(t)[:ASSESSED_ITEMS]
        self.shown = [e.node for e in top]
        ev = []
        covered: set[str] = set()
        for e in top[:5]:
            covered.update(self.m._token_set(e.node))
        for e in top:
            ev.append(
                {
                    "id": e.node,
                    "text": text(e.node),
                    "score": self.final_score.get(e.node, e.score),
                    "signals": {
                        "relevance": self.relevance.get(e.node, 0.0),
                        "entity_ok": self.entity_ok.get(e.node, 1.0),
                        "content_coverage": self.coverage_of(e.node)[0],
                        "other_coverage": self.coverage_of(e.node)[1],
                        "dense_raw": self.dense_raw.get(e.node, 0.0),
                    },
                }
            )
        coverage = (
            len(self.query_tokens & covered) / len(self.query_tokens) if self.query_tokens else 1.0
        )
        known_terms, covered_terms = self.term_presence(covered)
        frontier = t.frontier()
        frontier_best = max((self.relevance.get(f, 0.0) for f in frontier), default=0.0)
        return DecisionRequest(
            "assessment",
            {
                "query": self.query_state(),
                "evidence": ev,
                "coverage": coverage,
                "known_terms": known_terms,
                "covered_terms": covered_terms,
                # the query names a person the memory knows as a speaker:
                # whether the evidence is about that person can be checked
                "names_speaker": 1.0 if self.asked_people and self.speakers else 0.0,
                "frontier_best": frontier_best,
            },
            catalogue.assessment_questions(),
        )

    def term_presence(self, covered: set[str]) -> tuple[float, float]:
        """How much of what the query asks the memory has words for: the
        IDF-weighted share of the query's content tokens that occur in any
        node, and the share that occur in the best evidence (``covered``). A
        query about something never discussed uses words the memory lacks,
        whatever the style of the chat."""
        idf = self.term_idf
        if idf is None:
            tokens, freqs, n = self.m.store.document_frequencies(self.query, allowed=self.allowed)
            wanted = self.content_tokens
            idf = self.term_idf = {
                t: (math.log1p(n / (f + 0.5)), f > 0)
                for t, f in zip(tokens, freqs, strict=True)
                if t in wanted
            }
        total = sum(w for w, _ in idf.values())
        if total <= 0:
            return 1.0, 1.0
        known = sum(w for w, seen in idf.values() if seen) / total
        hit = sum(w for t, (w, _) in idf.items() if t in covered) / total
        return known, hit

    def ranked(self, t: Traversal) -> list[Any]:
        """Everything gathered so far, best first. The traversal's transition
        score decides where to go next; the answer ranks every gathered node on
        one scale, the one seeds had. Kept until the traversal next moves
        (`steps` resets it), as the end of a query asks for it up to three times."""
        if self.ranking is None:
            score = self.evidence_score.get
            found = t.result()
            final = {e.node: score(e.node, e.score) for e in found}
            if self.replaced:
                self.rank_below_replacements(final)
            self.final_score = final
            self.ranking = sorted(found, key=lambda e: (-final[e.node], e.node))
        return self.ranking

    def rank_below_replacements(self, final: dict[int, float]) -> None:
        """A fact that did not hold at the time the query asks about ranks
        right below the gathered fact of its chain that did (never above it,
        and no further down: the history stays next to the answer)."""
        for node, holders in self.replaced.items():
            if node in final:
                best = max((final[h] for h in holders if h in final), default=None)
                if best is not None and final[node] >= best:
                    final[node] = best * REPLACED_BELOW

    def scoring_request(self, t: Traversal, found: list[Any]) -> DecisionRequest:
        store = self.m.store
        ids = [c.node for c in found]
        sigs = self.signals(ids)
        evidence = [e.node for e in t.result()]
        ev_vecs = np.stack([store.embedding(e) for e in evidence]) if evidence else None
        cands = []
        for c, sig in zip(found, sigs, strict=True):
            v = store.embedding(c.node)
            max_sim = float((ev_vecs @ v).max()) if ev_vecs is not None else 0.0
            src = self.m._node_facts(c.from_node)
            node = self.m._node_facts(c.node)
            self.topical[c.node] = _raw(sig)
            side = self.side_match(c.node)
            sig.update(
                {
                    "edge_weight": float(c.edge_weight),
                    "max_evidence_similarity": max(0.0, min(1.0, max_sim)),
                    "novelty": 1.0 - max(0.0, min(1.0, max_sim)),
                    # the same support as a seed's: its temporal neighbours and
                    # its episode (the edge it came by is judged by usefulness)
                    "support": self.near_support(c.node),
                    "prev_match": side[0],
                    "next_match": side[1],
                    "episode_support": self.episode_strength.get(self.episode(c.node), 0.0),
                    "same_session": 1.0
                    if node.session is not None and node.session == src.session
                    else 0.0,
                }
            )
            cands.append({"id": c.node, "text": node.text, "view": c.view, "signals": sig})
        qs = _round_questions(catalogue.scoring_questions, len(cands))
        return DecisionRequest("scoring", {"query": self.query_state(), "candidates": cands}, qs)

    # -- results ---------------------------------------------------------------

    def passage_span(self, node_id: int, text: str) -> tuple[int, int]:
        """The span of the node's passage that matches the query best."""
        spans = self.m.store.passages(node_id)
        if not spans:
            return (0, len(text))
        best = self.best_passage.get(node_id)
        if best is None:
            _, idx = self.m.store.passage_similarities(self.qvec, [node_id])
            best = self.best_passage[node_id] = int(idx[0])
        return spans[best]

    def item(self, node_id: int, score: float, via: Via | None) -> EvidenceItem:
        node = self.m.store.get(node_id)
        refs = tuple(
            {
                "text": r.text,
                "start": r.start,
                "end": r.end,
                "precision": r.precision,
                "resolved": describe(r),
                "role": "event time, resolved against the observation time",
            }
            for r in self.m._time_refs.get(node_id, ())
        )
        facts: dict[str, Any] = {}
        store = self.m.store
        if store.supersedes_count:
            chain = self.fact_chains([node_id])[0]
            if chain is not None:
                start, end, olds, news = chain
                facts = {
                    "supersedes": tuple(o for o, _ in olds),
                    "superseded_by": tuple(n for n, _ in news),
                    "valid_from": start,
                    "valid_to": end,
                }
        return EvidenceItem(
            node_id,
            node.text,
            score,
            node.timestamp,
            dict(node.provenance),
            via,
            refs,
            self.passage_span(node_id, node.text),
            **facts,
        )

    def simple_result(self) -> SearchResult:
        store = self.m.store
        if self.mode == "lexical":
            ids, scores = store.search_lexical(self.query, self.k, allowed=self.allowed)
            pairs = [(int(i), float(s)) for i, s in zip(ids, scores, strict=True)]
        else:
            pairs = [
                (int(i), float(s))
                for i, s in zip(self.fused_ids[: self.k], self.fused_scores, strict=False)
            ]
        evidence = [self.item(i, s, None) for i, s in pairs]
        trace = {
            "mode": self.mode,
            "controller": None,
            "controller_calls": 0,
            "stop_reason": None,
            "elapsed_s": time.perf_counter() - self.t0,
        }
        return SearchResult(self.query, evidence, trace)

    def result(self) -> SearchResult:
        t = self.traversal
        assert t is not None
        evidence = []
        for e in self.ranked(t)[: self.k]:
            via = None
            if e.via is not None:
                via = Via(e.via.view, e.via.src, e.via.dst, e.via.edge_weight, e.via.from_node)
            evidence.append(self.item(e.node, self.final_score.get(e.node, e.score), via))
        trace = dict(t.trace())
        cfg = self.m.config.traversal.as_dict()
        trace.update(
            {
                "mode": self.mode,
                "controller": (
                    "local-fallback"
                    if self.fell_back
                    else getattr(self.m.controller, "name", "custom")
                    if self.mode == "full"
                    else "signals"
                ),
                "query_entities": self.query_entities,
                "anchors": len(self.fused_ids),
                # where the ranked pool came from: the fused lists, a time
                # window the query names, the time-order context of the best
                "pool": dict(self.pool_sources),
                "total_elapsed_s": time.perf_counter() - self.t0,
                # one more assessment after the traversal stopped (see steps)
                "final_assessment": self.final_assessment,
                "controller_calls": int(trace["controller_calls"]) + self.final_assessment,
                "thresholds": {
                    "theta_suff": cfg["theta_suff"],
                    "theta_missing": cfg["theta_missing"],
                    "theta_contradiction": cfg["theta_contradiction"],
                },
            }
        )
        s = self.assessment
        return SearchResult(
            self.query,
            evidence,
            trace,
            *(s if s is not None else (None, None, None, None)),
        )

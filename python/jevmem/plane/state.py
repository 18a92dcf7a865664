"""The state a Memory keeps beside its store, and the per-node facts the read path asks for."""

from __future__ import annotations

import builtins
import dataclasses
import json
import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, SupportsIndex

import numpy as np
import numpy.typing as npt

from jevmem import answering as _answering
from jevmem._core import Allowed, MemoryStore, Node, question_share
from jevmem.controller import default_controller
from jevmem.controller.types import (
    Answer,
    ControllerError,
    DecisionRequest,
    SystemOne,
    validate_answers,
)
from jevmem.embed import Embedder, default_embedder, embed_checked
from jevmem.errors import (
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    NodeNotFoundError,
)
from jevmem.passages import PassagePlanner
from jevmem.plane.config import (
    MemoryConfig,
    Summariser,
    SummariserLike,
    memory_config,
)
from jevmem.plane.derived import DERIVED_VERSION, DerivedFacts, RefTuple, ref_of, ref_tuple
from jevmem.plane.filters import scope_and_filter
from jevmem.plane.removal_gate import RemovalGate
from jevmem.plane.search_queue import SearchQueue
from jevmem.system_two import SystemTwo
from jevmem.temporal import TimeRef, ground


def _kind(value: object) -> str:
    """What a refused argument is, as an error message names it."""
    if isinstance(value, type):
        return f"the class {value.__name__} (pass an instance)"
    if isinstance(value, str):
        return f"the str {value!r:.40}"
    return type(value).__name__


def check_embedder(embedder: object) -> None:
    """Refuse, when a memory is made, what cannot serve as its embedder (it
    would fail at the first write, far from the mistake): an object with
    ``embed`` and ``embed_one`` and a ``dim`` that is an int >= 1."""
    if isinstance(embedder, type) or not all(
        callable(getattr(embedder, f, None)) for f in ("embed", "embed_one")
    ):
        hint = (
            " (a named one: jevmem.embed.embedder_from_spec)" if isinstance(embedder, str) else ""
        )
        raise InvalidTypeError(
            f"embedder must have embed(texts) and embed_one(text), got {_kind(embedder)}{hint}"
        )
    dim = getattr(embedder, "dim", None)
    if isinstance(dim, bool | np.bool_) or not isinstance(dim, int | np.integer):
        raise InvalidTypeError(f"embedder.dim must be an int, got {type(dim).__name__}")
    if dim < 1:
        raise InvalidConfigError(f"embedder.dim must be at least 1, got {dim}")


def check_controller(controller: object) -> None:
    """Refuse, when a memory is made, what cannot serve as its controller:
    it needs a callable ``decide(requests)``."""
    if isinstance(controller, type) or not callable(getattr(controller, "decide", None)):
        raise InvalidTypeError(f"controller must have decide(requests), got {_kind(controller)}")


class MemoryState:
    """The state a `jevmem.Memory` keeps beside its store: per-node facts,
    the timeline, speaker statistics; and the reads that use them."""

    def __init__(
        self,
        embedder: Embedder | None = None,
        controller: SystemOne | None = None,
        *,
        config: MemoryConfig | None = None,
        summariser: SummariserLike | None = None,
        store: MemoryStore | None = None,
        _derived: DerivedFacts | None = None,
    ) -> None:
        # ``_derived`` is internal: `load` and `open` pass the facts the
        # snapshot and log kept (see jevmem.plane.derived).
        # The measured offline default (ONNX MiniLM), or the hashing embedder
        # with a warning when the `onnx` extra is not installed.
        if embedder is not None:
            check_embedder(embedder)
        if controller is not None:
            check_controller(controller)
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        self.controller: SystemOne = controller if controller is not None else default_controller()
        self.config = memory_config(config)
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
        if self.store.max_text_bytes != self.config.max_text_bytes:
            # a loaded or reopened store keeps the limit it was made with:
            # the config says the limit that holds
            self.config = dataclasses.replace(self.config, max_text_bytes=self.store.max_text_bytes)
        self._planner = PassagePlanner(self.embedder, self.config.passage_tokens)
        if self.store.dim != self.embedder.dim:
            raise InvalidConfigError(
                f"the store has dimension {self.store.dim}, the embedder {self.embedder.dim}"
            )
        #: the people the memory knows (`MemoryStore.people`), lower-cased
        self._speakers: set[str] = set()
        self._speaker_order: list[str] = []  # the same, sorted: prefix lookups
        self._writes = 0
        #: the node an `update` in progress replaces: the caller says which
        #: text replaces which, so no judged link may say the opposite
        self._update_target: int | None = None
        # writes change Python-side indexes as well as the store: one at a
        # time, so concurrent writers (and idempotency keys) stay consistent
        # (taken through `_writing`, which notes the thread holding it)
        self._write_lock = threading.RLock()
        self._writes_held = threading.local()
        # searches from several threads at once take turns and run together
        # (`jevmem.plane.search_queue`); re-entrant: a controller may search
        self._search_queue = SearchQueue()
        self._search_lock = threading.RLock()
        # a forget waits for the searches running and holds new ones back
        self._removal_gate = RemovalGate(lambda: getattr(self._writes_held, "n", 0) > 0)
        self.decisions: list[dict[str, Any]] = []
        self.calls = {"write": 0, "query": 0}
        # Durable memories (Memory.open): one log record per write request
        # (taken under _write_lock).
        self._write_depth = 0
        self._decisions_rewritten = False
        self._checkpoint_every = 0
        self._checkpoint_seq = 0
        self._checkpoint_failed_seq = 0  # an automatic checkpoint failed here
        #: What opening a durable memory found (see Memory.open); None in memory.
        self.recovery: dict[str, Any] | None = None
        self._index_stored(_derived or DerivedFacts())
        #: the store's removed ids (``next_id - len``: ids are never reused)
        #: as this Memory last saw them (see `_sync_with_store`)
        self._removed_seen = self.store.removed_count

    # ---- bookkeeping ------------------------------------------------------

    def _index_stored(self, derived: DerivedFacts) -> None:
        """Index the nodes already in the store (a loaded or opened memory).
        The store keeps what was derived from their texts; a node it has no
        facts for (or all of them, when they came from another derivation)
        takes them from ``derived`` (an older format's JSON) or derives them,
        and the store keeps them from then on."""
        store = self.store
        ids = store.matching_ids(None, None)
        covered = (
            store.derived_covered(ids)
            if store.derived_version == DERIVED_VERSION
            else [False] * len(ids)
        )
        missing = [
            self._derive(store.get(i), derived.refs_of(i), derived.asks.get(i))
            for i, have in zip(ids, covered, strict=True)
            if not have
        ]
        if missing:
            # id order, all at once (the core's style sums are in id order)
            store.set_derived(
                DERIVED_VERSION,
                *(list(col) for col in zip(*missing, strict=True)),
                logged=False,
            )
        # every node now has its derived facts, so the core counts its speaker
        self._note_people()

    @staticmethod
    def _derive(
        node: Node, refs: tuple[TimeRef, ...] | None = None, asks: float | None = None
    ) -> tuple[int, float, list[RefTuple]]:
        """A node's derived facts for the core: ``refs`` and ``asks`` where
        already known, else derived from its text."""
        text, timestamp = node.text, node.timestamp
        if asks is None:
            asks = question_share(text)
        if refs is None:
            refs = () if timestamp is None else tuple(ground(text, timestamp))
        return node.id, asks, [ref_tuple(r) for r in refs]

    def _note_people(self) -> None:
        # the people a query's names are checked against, as the core counts
        # them (`MemoryStore.people`: the speakers, and the labels heading
        # speakerless transcript lines); read again after every write
        self._speaker_order = self.store.people()
        self._speakers = set(self._speaker_order)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """The write lock, noting that this thread holds it (a search from
        inside a write's round then passes the removal gate). Refused from
        inside a search's round (a controller that writes while it answers a
        search): a writer holding the lock may be waiting for that search."""
        if self._removal_gate.searching() and not getattr(self._writes_held, "n", 0):
            raise InvalidInputError(
                "a write, forget or save was called from inside a search of the same memory "
                "(a controller's or embedder's round); make it after the search returns"
            )
        with self._write_lock:
            depth = getattr(self._writes_held, "n", 0)
            self._writes_held.n = depth + 1
            try:
                yield
            finally:
                self._writes_held.n = depth

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """The embedder's vectors of ``texts``, checked (`embed_checked`)."""
        return embed_checked(self.embedder, texts, self.store.dim)

    def _time_refs_of(self, node_id: int) -> tuple[TimeRef, ...]:
        """A node's grounded time references, as the core keeps them."""
        return tuple(ref_of(t) for t in self.store.time_refs(node_id))

    def _decide(
        self,
        requests: list[DecisionRequest] | Iterator[DecisionRequest],
        path: str,
        *,
        budget_s: float | None = None,
    ) -> Sequence[Mapping[str, Answer]]:
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

            stream = kept()
            answers = self.controller.decide_stream(stream, budget_s=budget_s)  # type: ignore[attr-defined]
            # a controller that stopped pulling early would leave queries
            # without answers (their slices come up short): refuse the round
            pulled = len(asked)
            if next(stream, None) is not None:
                raise ControllerError(
                    f"decide_stream answered {pulled} requests and left some unread"
                )
            if not asked:
                return []
        # a controller that checks its own answers (the gRPC one must, to
        # fall back on bad ones) says so; the rest are checked here
        if not getattr(self.controller, "answers_validated", False):
            answers = validate_answers(asked, answers)
        self.calls[path] += 1
        return answers

    def derived_state(self) -> dict[str, Any]:
        """Everything this memory derives beside its store, as plain values.

        An internal view for tests and debugging, not stable API: its keys
        follow the plane's structures. Lazily filled caches are read through
        the methods that fill them, after checking that no cache holds a node
        the store lacks; it first syncs with the store, as the next public
        call would (a removal behind the Memory's back is noticed there).
        Two memories that derived the same facts give equal dicts."""
        self.stats()
        ids = self.store.matching_ids(None, None)
        return {
            "timeline": sorted(
                (stamp, i)
                for i, stamp in zip(ids, self.store.timestamps(ids), strict=True)
                if stamp is not None
            ),
            "time_refs": {i: refs for i in ids if (refs := self._time_refs_of(i))},
            "entities": self.store.entity_names(),
            "episodes": self.store.episode_keys(ids).tolist(),
            "speakers": set(self._speakers),
            "speaker_order": list(self._speaker_order),
            "asks": {
                i: a
                for i, a, have in zip(
                    ids,
                    self.store.question_shares(ids).tolist(),
                    self.store.derived_covered(ids),
                    strict=True,
                )
                if have
            },
            "context": {i: self._temporal_context(i) for i in ids},
            "sides": {i: self._context_sides(i) for i in ids},
            "styles": {i: self._style(i) for i in ids},
            "decisions": json.loads(json.dumps(self.decisions)),
            "writes": self._writes,
        }

    def __len__(self) -> int:
        return len(self.store)

    def __contains__(self, node_id: object) -> bool:
        try:
            self._live_id(node_id)
        except (InvalidInputError, NodeNotFoundError):
            return False  # not an id, or no node of this memory
        return True

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

    def _forget_python_side(self) -> None:
        """Leave, for nodes gone from the store, exactly what indexing the
        remaining nodes from scratch would give (what `Memory.load`
        derives): the people still counted (the core rebuilt its style sums)."""
        self._note_people()

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
        self._forget_python_side()
        self._drop_decisions(
            lambda i: not (isinstance(i, int) and 0 <= i < store.next_id and i in store)
        )
        self._removed_seen = removed

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

    # ---- reads ----------------------------------------------------------------

    def get(self, node_id: int) -> Node:
        """The node with this id. Raises NodeNotFoundError for an unknown or
        forgotten id, InvalidInputError for one that is not an int."""
        return self.store.get(self._live_id(node_id))

    def neighbors(self, node_id: int, view: str | None = None) -> list[Any]:
        """A node's edges, of every view or of ``view``; ids as in `get`."""
        if view is not None and not isinstance(view, str):
            raise InvalidTypeError(f"view must be a str or None, got {type(view).__name__}")
        return self.store.neighbors(self._live_id(node_id), view)  # type: ignore[arg-type]

    def stats(self) -> dict[str, Any]:
        self._sync_with_store()
        s: dict[str, Any] = dict(self.store.stats())
        s["controller"] = getattr(self.controller, "name", type(self.controller).__name__)
        s["controller_calls_write"] = self.calls["write"]
        s["controller_calls_query"] = self.calls["query"]
        s["writes"] = self._writes
        s["consolidation_decisions"] = len(self.decisions)
        if self.store.durable:
            # the log record the newest checkpoint covers: recovery replays past it
            s["checkpoint_seq"] = self._checkpoint_seq
        return s

    def _temporal_context(
        self, node_id: int, allowed: Allowed | None = None
    ) -> list[tuple[int, float]]:
        """The observations one and two steps before and after a node in time
        order, in its episode, with weight 1 and `second_step_decay`; the one
        right before weighs 1 + `reply_link` x its question share when someone
        else asked it (this node is then its reply). The core reads them off
        its timeline (`MemoryStore.temporal_context`); with ``allowed``, the
        time order of those nodes alone."""
        return self.store.temporal_context(
            node_id,
            allowed=allowed,
            second_step_decay=self.config.second_step_decay,
            reply_link=self.config.reply_link,
        )

    def _style(self, node_id: int) -> tuple[float, float, float]:
        """A node's form relative to the memory it is in (`MemoryStore.styles`):
        its length against the memory's mean, its speaker's mean question
        share per turn, its speaker's typical turn length against the
        memory's (a turn: one speaker's consecutive nodes in one session)."""
        length, speaker_asks, speaker_length = self.store.styles([node_id])[0].tolist()
        return length, speaker_asks, speaker_length

    def _context_sides(
        self, node_id: int, allowed: Allowed | None = None
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """The same neighbours before, and after, a node, with their plain
        weights (which one answers the other differs between a chat of
        friends and a user asking an assistant)."""
        return self.store.context_sides(
            node_id, allowed=allowed, second_step_decay=self.config.second_step_decay
        )

    def known_entities(self) -> list[str]:
        self._sync_with_store()
        return self.store.entity_names()

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
        scope_arg, filter_arg = scope_and_filter(scope, filter)
        # two reads of the store: a forget waits for them, as for a search
        with self._removal_gate.search():
            ids = self.store.list_ids(scope_arg, filter_arg, limit=limit + 1, after=after)
            items = [self.store.get(i) for i in ids[:limit]]
        more = len(ids) > limit
        return items, (str(ids[limit - 1]) if more else None)

    def matching_ids(
        self, scope: Mapping[str, str] | None = None, filter: Mapping[str, Any] | None = None
    ) -> builtins.list[int]:
        """Every id a scope and filter select (see `search`), ascending."""
        scope_arg, filter_arg = scope_and_filter(scope, filter)
        return self.store.matching_ids(scope_arg, filter_arg)

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

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem import _validate
from jevmem import answering as _answering
from jevmem._collector import collector_paused
from jevmem.controller.types import Answer, DecisionRequest
from jevmem.errors import InvalidInputError
from jevmem.plane.config import MemoryConfig, Mode, Steps
from jevmem.plane.query import QueryRun
from jevmem.plane.results import EvidenceItem, SearchResult, Via
from jevmem.plane.scoped import ScopedView
from jevmem.plane.search_queue import Pending
from jevmem.plane.signals import neutral_answers
from jevmem.plane.writing import WritingMemory
from jevmem.system_two import SystemTwo

__all__ = ["EvidenceItem", "Memory", "MemoryConfig", "Mode", "SearchResult", "Via"]


class Memory(WritingMemory):
    """An agent memory: add observations, search for evidence.

    >>> m = Memory()                       # default embedder and local controller
    >>> m.add("Maya started cello lessons with Ines", speaker="Maya")
    0
    >>> [e.text for e in m.search("who teaches Maya?").evidence][:1]
    ['Maya started cello lessons with Ines']
    """

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
        embedding: Any | None = None,
    ) -> SearchResult:
        """Evidence for a query: the top ``k`` memories with provenance and a trace.

        ``now``: the time the query is asked at (unix seconds, a datetime or
        an ISO string). Relative times in it ("last week", "yesterday") are
        read against it, and a question about the present ("what milk does
        she take now") ranks the fact that holds at it first. Without it,
        only absolute times are read and the present is the latest state.

        ``mode``: ``"full"`` (the default) is the closed loop with the
        memory's controller. The others are its ablations, for comparison:
        ``"traversal"`` (anchors and graph expansion scored by signals alone,
        no controller), ``"anchors"`` (the reciprocal-rank fusion of the BM25
        and vector rankings) and ``"lexical"`` (BM25 only: the query's own
        terms, without the related words and other spellings the fused BM25
        list adds, see `MemoryConfig.related_words`). Every mode embeds the
        query.

        ``k`` is more than a cut: above the search's defaults (the traversal's
        seeds `MemoryConfig.anchors`, the anchor pool ``anchor_pool``, the
        depth of the ranked lists ``anchor_depth``) it widens them in every
        mode but ``"lexical"``, so ``search(q, k=101).evidence[:10]`` may
        differ from ``search(q, k=10).evidence``. Ask for the ``k`` you will read.

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
          string); an observation without one matches, as for a missing
          metadata field, only ``{"$exists": False}`` and the negations
          (``$ne``, ``$nin``, ``$not``).

        A malformed scope or filter raises InvalidInputError naming the problem.

        ``embedding``: the query's vector, made beforehand (``dim`` finite
        numbers), in place of this memory's embedder (see `search_batch`).
        """
        vector = (
            None
            if embedding is None
            else _validate.embeddings(embedding, "embedding", (self.store.dim,))
        )
        (query,), k, now_ts, view = self._search_options([query], k, now, mode, scope, filter)

        def run(queries: list[str], vectors: npt.NDArray[np.float32]) -> list[SearchResult]:
            return self._search_batch(queries, k, now_ts, mode, view, vectors)

        # Searches from other threads at the same time, with the same options
        # and no scope or filter, run together with this one as one lockstep
        # batch (each gets what it gets alone); a lone search runs at once.
        key = (k, now_ts, mode) if view is None else object()
        me = Pending(query, key, run, vector=vector)
        # the removal gate before the queue's run lock: a thread waiting at
        # the gate must not hold the lock a thread it waits for needs (a
        # search from inside a write's or a search's round)
        with self._removal_gate.search():
            return self._search_queue.search(self._embed, self._search_lock, me)

    def search_batch(
        self,
        queries: Sequence[str],
        k: int = 10,
        *,
        now: Any | None = None,
        mode: Mode = "full",
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
        embeddings: Any | None = None,
    ) -> list[SearchResult]:
        """Run queries in lockstep: each round is one controller call for all of them.

        ``scope`` and ``filter`` apply to every query (see `search`).
        ``embeddings``: the queries' vectors, made beforehand (an array of
        shape ``(len(queries), dim)``, finite; converted to float32), in
        place of this memory's embedder (a server embeds the next queries
        while the memory answers others, say); the memory's vectors must
        come from the same model. A wrong shape or a non-finite value raises
        InvalidInputError.

        Python's cyclic garbage collector is held off while the searches run
        and turned back on after (unless it was off already): a round keeps
        every query's requests alive, which the collector would scan for
        nothing (`jevmem._collector.collector_paused`).
        """
        queries, k, now_ts, view = self._search_options(queries, k, now, mode, scope, filter)
        qvecs = (
            None
            if embeddings is None
            else _validate.embeddings(embeddings, "embeddings", (len(queries), self.store.dim))
        )
        return self._search_batch(queries, k, now_ts, mode, view, qvecs)

    def _search_options(
        self,
        queries: Sequence[str],
        k: int,
        now: Any,
        mode: Mode,
        scope: Mapping[str, str] | None,
        filter: Mapping[str, Any] | None,
    ) -> tuple[list[str], int, int | None, ScopedView | None]:
        """A search's checked options (bad input raises here, before any
        work): the queries, ``k``, the time relative expressions are read
        against, and the scoped view (None: the whole memory)."""
        if not isinstance(mode, str) or mode not in ("lexical", "anchors", "traversal", "full"):
            raise InvalidInputError(f"unknown mode {mode!r:.40}")
        checked, k, now_ts = _validate.search_args(
            queries, k, now, max_text_bytes=self.store.max_text_bytes
        )
        self._sync_with_store()
        return checked, k, now_ts, ScopedView.of(self, scope, filter)

    def _search_batch(
        self,
        queries: Sequence[str],
        k: int,
        now_ts: int | None,
        mode: Mode,
        view: ScopedView | None = None,
        given: npt.NDArray[np.float32] | None = None,
    ) -> list[SearchResult]:
        # a forget waits for it (the loop reads nodes a call at a time)
        with collector_paused(), self._removal_gate.search():
            return self._search_batch_now(queries, k, now_ts, mode, view, given)

    def _search_batch_now(
        self,
        queries: Sequence[str],
        k: int,
        now_ts: int | None,
        mode: Mode,
        view: ScopedView | None,
        given: npt.NDArray[np.float32] | None,
    ) -> list[SearchResult]:
        starts = [time.perf_counter() for _ in queries]
        qvecs: npt.NDArray[np.floating[Any]]
        if given is not None:
            qvecs = given
        else:
            qvecs = self._embed(list(queries)) if queries else np.zeros((0, self.store.dim))
        runs = [
            QueryRun(self, q, qv, k, now_ts, mode, t0, view)
            for q, qv, t0 in zip(queries, qvecs, starts, strict=True)
        ]
        if mode in ("lexical", "anchors"):
            return [r.simple_result() for r in runs]
        max_wall = float(self.config.traversal_limits["max_wall_s"])  # type: ignore[arg-type]
        streams = mode == "full" and callable(getattr(self.controller, "decide_stream", None))
        # Each run is a generator of requests; one decide() per lockstep round
        # for all of them. A query's next requests are produced (its generator
        # advanced with the last round's answers) only when they are pulled: a
        # streaming controller pulls them as it sends, so a remote server
        # answers the first queries of a round while the later ones are still
        # being worked out here. Same rounds, same requests, same order.
        waiting: list[tuple[QueryRun, Steps, Sequence[Mapping[str, Answer]] | None]] = [
            (r, r.steps(), None) for r in runs
        ]
        while waiting:
            asked: list[tuple[QueryRun, Steps, int]] = []

            def round_requests(
                waiting: list[
                    tuple[QueryRun, Steps, Sequence[Mapping[str, Answer]] | None]
                ] = waiting,
                asked: list[tuple[QueryRun, Steps, int]] = asked,
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
                answers = neutral_answers(list(round_requests()))
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

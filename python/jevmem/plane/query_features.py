"""A query's features: its pool of candidates and the signals the controller reads of each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem._core import FACT_COLUMNS, SIGNAL_COLUMNS, ReadSession, Traversal
from jevmem.plane.config import WINDOW_SCAN, Mode
from jevmem.plane.scoped import ScopedView
from jevmem.plane.signals import Signals
from jevmem.plane.state import MemoryState
from jevmem.temporal import time_cues_of


class QueryFeatures:
    """One query's pool and the signals of its candidates."""

    def __init__(
        self,
        memory: MemoryState,
        query: str,
        qvec: npt.NDArray[np.float32],
        k: int,
        now: int | None,
        mode: Mode,
        t0: float,
        view: ScopedView | None = None,
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
        self.ranking: list[tuple[int, float]] | None = None
        self.routing: dict[str, float] = {}
        # The plan in the core (`jevmem_core::query_plan`): the lexical and
        # vector rankings and their fusion, long observations by their best
        # passage, the names the query carries that the memory knows and who
        # among them speaks here, the time it asks about (and the time facts
        # should hold at), whether it speaks in the first person or asks for
        # help, its tokens without the names and the words that frame a question.
        pool = k if mode in ("lexical", "anchors") else max(cfg.anchor_pool, cfg.anchors, k)
        (
            self.session,
            self.fused_ids,
            self.fused_scores,
            self.passage_ids,
            self.query_entities,
            self.asked_people,
            cues,
            first_person,
            asks_for_help,
            asks_for_summary,
            asks_what_answerer_said,
        ) = ReadSession.plan(
            store,
            query,
            qvec,
            depth=max(cfg.anchor_depth, k),
            pool=pool,
            kappa=cfg.kappa,
            now=now,
            people=self.speaker_order,
            allowed=allowed,
            related_words=cfg.related_words,
        )
        self.time_cues = time_cues_of(query, cues)
        # who asks and what for: a query in the first person asks about the
        # one who talks to the memory; a request for help or advice is
        # answered by standing instructions and tastes as much as by facts
        self.query_self = 1.0 if first_person else 0.0
        self.query_request = 1.0 if asks_for_help else 0.0
        # a summary is answered by the substance of many turns, not the one
        # that matches best
        self.query_summary = 1.0 if asks_for_summary else 0.0
        # "what did you recommend": in an agent's log, the answer is the
        # answerer's own earlier reply
        self.query_answerer = 1.0 if asks_what_answerer_said else 0.0
        self.assessed_top: list[int] = []
        #: the evidence the latest assessment request showed
        self.shown: list[int] = []
        self.final_assessment = False
        self.pool_sources: dict[str, int] = {}

    # -- signals -------------------------------------------------------------

    def columns(
        self,
        ids: list[int],
        rows: npt.NDArray[np.float64],
        facts: npt.NDArray[np.float64] | None,
    ) -> Signals:
        """A block of the session's rows (`ReadSession.signals`, `pool`,
        `round`) as named columns, each in [0, 1], with the two columns of
        what kind of query asks (the same for every node): BM25 and embedding
        similarity (normalised by the query's best), agreement with the
        people the query names, a match with the time the query names (or,
        for "when" questions, a grounded date in the node), how much of the
        node is itself a question (a question asserts nothing), its style and
        types. A query that names a time or a tense also gets, for the nodes
        in a supersedes chain, the validity signals (NaN outside a chain; a
        controller reads absent as 0): ``valid_at_query_time``,
        ``superseded``, ``not_yet_valid`` and ``chain_match`` (see
        `jevmem_core::validity`)."""
        n = len(ids)
        out: Signals = {name: rows[:, j] for j, name in enumerate(SIGNAL_COLUMNS)}
        out["query_self"] = np.full(n, self.query_self)
        out["query_request"] = np.full(n, self.query_request)
        out["query_summary"] = np.full(n, self.query_summary)
        out["query_answerer"] = np.full(n, self.query_answerer)
        if facts is not None:
            out.update({name: facts[:, j] for j, name in enumerate(FACT_COLUMNS)})
        return out

    def pool(self) -> tuple[list[int], Signals]:
        """The nodes the controller ranks before seeding, with their signals,
        gathered in the core (`ReadSession.pool`): the fused lexical + vector
        lists, the nodes observed inside a time window the query names (its
        best matches when crowded), long observations by their best passage,
        and the temporal context (two steps each way, same episode) and
        supersedes chains of the strongest of them: answers often sit in the
        reply to the turn that matches the query. On the way the query vector
        moves towards its best few matches (pseudo-relevance feedback,
        Rocchio in embedding space), and every later read uses the moved one."""
        cfg = self.m.config
        got, rows, facts, _, sources = self.session.pool(
            self.fused_ids,
            self.passage_ids,
            time_window_nodes=cfg.time_window_nodes,
            window_scan=WINDOW_SCAN,
            feedback_weight=float(cfg.feedback_weight),
            feedback_nodes=cfg.feedback_nodes,
            context_seeds=cfg.context_seeds,
            second_step_decay=cfg.second_step_decay,
            reply_link=cfg.reply_link,
        )
        self.qvec = self.session.vector
        self.pool_sources = sources
        ids: list[int] = got.tolist()
        return ids, self.columns(ids, rows, facts)

    @property
    def topical(self) -> dict[int, float]:
        """Each measured node's topical match, as its time-order neighbours
        read it (kept by the session: the pool's, then each round's)."""
        return self.session.topical

    @topical.setter
    def topical(self, matches: dict[int, float]) -> None:
        self.session.set_topical(matches)

    def context_matches(
        self, ids: list[int], own: list[float] | None = None
    ) -> npt.NDArray[np.float64]:
        """What each node's time-order context says about the query, an
        (n, 3) array: support (the best neighbour's topical match times the
        path weight, at most 1; a reply link weighs more), and the best match
        among the turns before it and among those after it (plain weights).

        ``own``: the nodes' own topical matches, entered into `topical` in
        order, each before its node is measured."""
        cfg = self.m.config
        return self.session.context_matches(
            ids, own, second_step_decay=cfg.second_step_decay, reply_link=cfg.reply_link
        )

    def near_support(self, node_id: int) -> float:
        """`context_matches`' support of one node."""
        return float(self.context_matches([node_id])[0, 0])

    def texts_of(self, ids: list[int]) -> Callable[[], list[str]]:
        """A function that reads the nodes' texts when called (a
        `CandidateTable`'s texts: only a controller that reads them pays for
        them)."""
        store = self.m.store
        return lambda: store.texts(ids)

    def coverages(self, ids: list[int]) -> list[tuple[float, float]]:
        """Each node's content coverage: the share of the query's content
        words it asserts *about whom the query asks about*, and the share it
        asserts about other people the memory knows (speakers the query does
        not name). Read sentence by sentence in the core
        (`MemoryStore.content_coverage`: person marks, names not used as
        address, the speakers of the adjacent turns); what tells "Caroline
        researched adoption agencies" apart from a question about what
        Melanie researched. Computed once per node per query (the session
        keeps it)."""
        return [(a, b) for a, b in self.session.coverages(ids).tolist()]

    def coverage_of(self, node_id: int) -> tuple[float, float]:
        """`coverages` of one node."""
        return self.coverages([node_id])[0]

    def query_state(self) -> dict[str, Any]:
        return {
            "text": self.query,
            "entities": self.query_entities,
            "time": self.time_cues,
            "routing": self.routing,
        }

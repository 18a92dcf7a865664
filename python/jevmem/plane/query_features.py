"""A query's features: its pool of candidates and the signals the controller reads of each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem._core import (
    FACT_COLUMNS,
    SIGNAL_COLUMNS,
    ReadSession,
    Traversal,
    rrf,
    speaks_in_first_person,
)
from jevmem.entities import extract_entities, mentions
from jevmem.plane.config import WINDOW_SCAN, Mode
from jevmem.plane.scoped import ScopedView
from jevmem.plane.signals import Signals
from jevmem.plane.state import MemoryState
from jevmem.plane.text import REQUEST
from jevmem.temporal import FactTime, query_fact_time, query_time_cues


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
        # each node's place in the two ranked lists (a scale-free signal)
        self.lex_list: list[int] = lex_ids.tolist()
        self.vec_list: list[int] = vec_ids.tolist()
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
        # the names some (allowed) node carries; `mentions` orders them by the query
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
        self.query_self = 1.0 if speaks_in_first_person(query) else 0.0
        self.query_request = 1.0 if REQUEST.search(query) else 0.0
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
        #: the query's reads in the core: its signals and pool, the facts
        #: that held at its time (see `signals`), the feedback-moved vector
        ft = self.fact_time
        window = self.time_cues["constraint"]
        self.session = ReadSession(
            store,
            query,
            qvec,
            lexical_ranked=self.lex_list,
            vector_ranked=self.vec_list,
            best_lexical=self.max_lex,
            best_dense=self.max_sim,
            best_passage=self.max_passage_sim,
            named=self.query_entities,
            window=None if window is None else (_clamp_i64(window[0]), _clamp_i64(window[1])),
            asks_when=self.wants_time,
            fact_stance=ft.stance,
            fact_at=_clamp_opt(ft.at),
            fact_until=_clamp_opt(ft.until),
            query_tokens=sorted(self.query_tokens),
            content_tokens=sorted(self.content_tokens),
            asked=list(self.asked_people),
            people=sorted(self.speakers),
            allowed=allowed,
        )
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
        session = self.session
        self.qvec = session.vector
        self.max_sim, self.max_passage_sim = session.best_dense, session.best_passage
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


def _clamp_i64(t: int) -> int:
    """A time as the core takes it (a window may reach past what i64 holds)."""
    return max(-(1 << 63), min(t, (1 << 63) - 1))


def _clamp_opt(t: int | None) -> int | None:
    return None if t is None else _clamp_i64(t)

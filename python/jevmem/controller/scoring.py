"""The hand rules' scoring rounds as columns: each ``score.*`` kind of every
candidate of a round computed with array operations over the candidates'
signals (`LocalController` answers a scoring round with these, the learned
heads read them as features), one round at a time or a lockstep batch's
rounds stacked into one set of rows.

Every step is elementwise, so a round stacked with others gets the values it
gets alone, to the bit, and the values `local._score` gives question by
question (the same arithmetic in the same order).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem.controller.types import CandidateAnswers, CandidateQuestions, CandidateTable

__all__ = ["clip_columns", "clip_value", "score_columns", "score_rounds"]


def clip_value(x: float) -> float:
    """``x`` clipped to [0, 1]; NaN and infinities give 0 (the hand rules'
    clip of one value; `clip_columns` is the same of every element)."""
    # min(1, max(0, x)) for finite x, in comparisons only (this runs for
    # every answer): NaN fails every comparison
    if 0.0 < x < 1.0:
        return x
    return 1.0 if 1.0 <= x < math.inf else 0.0


def clip_columns(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`clip_value` of every element: NaN and infinities give 0 (a new array)."""
    # four ufunc calls: x + (x - x) is x (a -0.0 made +0.0) where x is
    # finite and NaN where it is not, and fmax takes 0 over a NaN
    out = np.subtract(x, x)
    np.add(x, out, out=out)
    np.fmax(out, 0.0, out=out)
    return np.fmin(out, 1.0, out=out)


def score_columns(state: Mapping[str, Any], questions: CandidateQuestions) -> CandidateAnswers:
    """A scoring round's answers as columns, with the candidates' signals
    read once per name."""
    cands: Sequence[Mapping[str, Any]] = state["candidates"]
    if len(cands) < questions.n_candidates:
        raise IndexError(f"{questions.n_candidates} candidates asked about, {len(cands)} given")
    columns = _SignalColumns(
        cands if len(cands) == questions.n_candidates else cands[: questions.n_candidates]
    )
    out = CandidateAnswers(questions)

    def routes() -> npt.NDArray[np.float64]:
        return _route(state["query"].get("routing", {}), columns)

    with np.errstate(all="ignore"):  # NaN and infinities are clipped to 0, as clip_value does
        for j, kind in enumerate(questions.kinds):
            out.array[:, j] = _score_column(columns, kind, routes)
    return out


def score_rounds(
    rounds: Sequence[tuple[Mapping[str, Any], CandidateQuestions]],
) -> list[CandidateAnswers]:
    """`score_columns` of several rounds (a lockstep batch's), in order: the
    rounds whose candidates are a table of exactly the candidates asked
    about, and that ask the same kinds, are read as one set of rows, so each
    array operation runs once for all of them."""
    out: list[CandidateAnswers | None] = [None] * len(rounds)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, (state, questions) in enumerate(rounds):
        table = state["candidates"]
        if type(table) is CandidateTable and len(table) == questions.n_candidates:
            groups.setdefault(tuple(questions.kinds), []).append(i)
        else:
            out[i] = score_columns(state, questions)
    for kinds, members in groups.items():
        if len(members) == 1:  # alone: nothing to stack
            (i,) = members
            out[i] = score_columns(*rounds[i])
            continue
        tables = [rounds[i][0]["candidates"] for i in members]
        columns = _StackedColumns(tables)

        def routes(
            members: list[int] = members, columns: _StackedColumns = columns
        ) -> npt.NDArray[np.float64]:
            return np.concatenate(
                [
                    _route(rounds[i][0]["query"].get("routing", {}), _SignalColumns(t))
                    for i, t in zip(members, columns.tables, strict=True)
                ]
            )

        answers = [CandidateAnswers(rounds[i][1]) for i in members]
        with np.errstate(all="ignore"):
            for j, kind in enumerate(kinds):
                values = _score_column(columns, kind, routes)
                start = 0
                for a, t in zip(answers, tables, strict=True):
                    a.array[:, j] = values[start : start + len(t)]
                    start += len(t)
        for i, a in zip(members, answers, strict=True):
            out[i] = a
    done = [a for a in out if a is not None]
    assert len(done) == len(rounds)
    return done


def _route(routing: Mapping[str, Any], col: _SignalColumns) -> npt.NDArray[np.float64]:
    """Each candidate's view's share of the route (0.5 for a view it does not name)."""
    return np.array([float(routing.get(v, 0.5)) for v in col.views()], dtype=np.float64)


class _SignalColumns:
    """The candidates' signals read by name, one column at a time: from a
    `CandidateTable`'s columns, or from each candidate's mapping."""

    def __init__(self, cands: Sequence[Mapping[str, Any]]) -> None:
        self.cands = cands
        self.table = cands if isinstance(cands, CandidateTable) else None
        self.tables: list[CandidateTable] = [] if self.table is None else [self.table]
        self.sigs: list[Mapping[str, Any]] = (
            [] if self.table is not None else [c.get("signals") or {} for c in cands]
        )

    def __call__(self, name: str, default: float = 0.0) -> npt.NDArray[np.float64]:
        """As `_num` reads it: a missing or None value is the default."""
        if self.table is not None:
            return self.table.signal(name, default)
        return np.array(
            [default if (v := s.get(name, default)) is None else float(v) for s in self.sigs],
            dtype=np.float64,
        )

    def truthy(self, name: str) -> npt.NDArray[np.float64]:
        """As `relevance` reads it (``get(name) or 0.0``): missing, None and 0 are 0."""
        if self.table is not None:
            return self.table.signal(name, 0.0)
        return np.array([float(s.get(name) or 0.0) for s in self.sigs], dtype=np.float64)

    def present(self, name: str) -> npt.NDArray[np.bool_]:
        if self.table is not None:
            return self.table.present(name)
        return np.array([name in s for s in self.sigs], dtype=bool)

    def raw_block(self, names: Sequence[str]) -> npt.NDArray[np.float64]:
        """The named columns of a table, one row each, NaN where absent (a
        new array; tables only)."""
        assert self.table is not None
        return _table_block(self.table, names)

    def truthy_block(self, names: Sequence[str]) -> npt.NDArray[np.float64]:
        """`truthy` of each name, one row each (a new array)."""
        if self.table is None:
            return np.array([self.truthy(name) for name in names], dtype=np.float64)
        return self._zeroed_block(names)

    def block(self, names: Sequence[str]) -> npt.NDArray[np.float64]:
        """Each name as ``self(name)`` reads it (default 0), one row each (a
        new array)."""
        if self.table is None:
            return np.array([self(name) for name in names], dtype=np.float64)
        return self._zeroed_block(names)

    def _zeroed_block(self, names: Sequence[str]) -> npt.NDArray[np.float64]:
        # a table's absent value (NaN) reads as 0 either way
        out = self.raw_block(names)
        np.copyto(out, 0.0, where=np.isnan(out))
        return out

    def views(self) -> list[Any]:
        if self.table is not None:
            return self.table.views
        return [c.get("view", "semantic") for c in self.cands]


class _StackedColumns(_SignalColumns):
    """Several tables' columns read as one: each name's columns end to end."""

    def __init__(self, tables: Sequence[CandidateTable]) -> None:
        self.cands = tables[0]
        self.table = tables[0]  # read as tables (columns, not mappings)
        self.tables = list(tables)
        self.sigs = []

    def __call__(self, name: str, default: float = 0.0) -> npt.NDArray[np.float64]:
        return np.concatenate([t.signal(name, default) for t in self.tables])

    def truthy(self, name: str) -> npt.NDArray[np.float64]:
        return np.concatenate([t.signal(name, 0.0) for t in self.tables])

    def present(self, name: str) -> npt.NDArray[np.bool_]:
        return np.concatenate([t.present(name) for t in self.tables])

    def views(self) -> list[Any]:
        return [v for t in self.tables for v in t.views]

    def raw_block(self, names: Sequence[str]) -> npt.NDArray[np.float64]:
        return np.concatenate([_table_block(t, names) for t in self.tables], axis=1)


def _table_block(table: CandidateTable, names: Sequence[str]) -> npt.NDArray[np.float64]:
    """A table's named columns, one row each, NaN where absent (a new array)."""
    n = len(table)
    got = table.columns
    absent = None
    rows = []
    for name in names:
        col = got.get(name)
        if col is None:
            if absent is None:
                absent = np.full(n, np.nan)
            col = absent
        rows.append(col)
    return np.array(rows, dtype=np.float64).reshape(len(names), n)


#: the hand rule's relevance: a weighted sum of these signals (the last one
#: subtracted), added up in this order
_RELEVANCE = ("lexical", "dense", "entity_match", "time_match", "asks")
_RELEVANCE_WEIGHTS = np.array([0.45, 0.35, 0.2, 0.3, 0.1])[:, None]
_USEFULNESS_WEIGHTS = np.array([0.3, 0.2])[:, None]


def _score_column(
    col: _SignalColumns, kind: str, route: Callable[[], npt.NDArray[np.float64]]
) -> npt.NDArray[np.float64]:
    """`local._score` of every candidate for one ``score.*`` kind; ``route()``
    gives each candidate's route share (read only for relation usefulness)."""
    if kind == "score.relevance":
        # 0.45 lexical + 0.35 dense + 0.2 entity_match + 0.3 time_match
        # - 0.1 asks, summed left to right, in a few calls over all five
        terms = col.truthy_block(_RELEVANCE)
        terms *= _RELEVANCE_WEIGHTS
        total = np.add(terms[0], terms[1])
        total += terms[2]
        total += terms[3]
        total -= terms[4]
        values = clip_columns(total)
        chained = col.present("valid_at_query_time")
        if chained.any():  # validity_adjusted, for the nodes in a supersedes chain
            best = col("chain_match")[chained]
            values[chained] = clip_columns(np.where(best > values[chained], best, values[chained]))
        return values
    if kind == "score.relation_usefulness":
        # 0.5 route + 0.3 edge_weight + 0.2 same_session, left to right
        terms = col.block(("edge_weight", "same_session"))
        terms *= _USEFULNESS_WEIGHTS
        total = route()
        total *= 0.5
        total += terms[0]
        total += terms[1]
        return clip_columns(total)
    if kind == "score.novelty":
        return clip_columns(1.0 - col("max_evidence_similarity"))
    # score.support: the temporal neighbours, then the episode (default: near)
    if col.table is not None:
        # support (absent: 0), and episode_support (absent: that support)
        both = col.raw_block(("support", "episode_support"))
        missing = np.isnan(both)
        near, episode = both
        np.copyto(near, 0.0, where=missing[0])
        np.copyto(episode, near, where=missing[1])
    else:
        near = col("support")
        # a missing or None episode_support reads as near
        episode = np.array(
            [
                n if (v := s.get("episode_support", n)) is None else float(v)
                for s, n in zip(col.sigs, near.tolist(), strict=True)
            ],
            dtype=np.float64,
        )
    total = near * 2.0
    total += episode
    total /= 3.0
    return clip_columns(total)

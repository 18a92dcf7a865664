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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem.controller.types import CandidateAnswers, CandidateQuestions, CandidateTable

__all__ = ["clip_columns", "score_columns", "score_rounds"]


def clip_columns(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`local._clip` of every element: NaN and infinities give 0."""
    # four array operations where comparisons took eight: clip, then 0 where
    # x is not finite; adding 0 makes a -0.0 the +0.0 that `_clip` returns
    out = np.where(np.isfinite(x), x.clip(0.0, 1.0), 0.0)
    out += 0.0
    return out


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

    with np.errstate(all="ignore"):  # NaN and infinities are clipped to 0, as _clip does
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


def _score_column(
    col: _SignalColumns, kind: str, route: Callable[[], npt.NDArray[np.float64]]
) -> npt.NDArray[np.float64]:
    """`local._score` of every candidate for one ``score.*`` kind; ``route()``
    gives each candidate's route share (read only for relation usefulness)."""
    if kind == "score.relevance":
        values = clip_columns(
            0.45 * col.truthy("lexical")
            + 0.35 * col.truthy("dense")
            + 0.2 * col.truthy("entity_match")
            + 0.3 * col.truthy("time_match")
            - 0.1 * col.truthy("asks")
        )
        chained = col.present("valid_at_query_time")
        if chained.any():  # validity_adjusted, for the nodes in a supersedes chain
            best = col("chain_match")[chained]
            values[chained] = clip_columns(np.where(best > values[chained], best, values[chained]))
        return values
    if kind == "score.relation_usefulness":
        p = route()
        return clip_columns(0.5 * p + 0.3 * col("edge_weight") + 0.2 * col("same_session"))
    if kind == "score.novelty":
        return clip_columns(1.0 - col("max_evidence_similarity"))
    # score.support: the temporal neighbours, then the episode (default: near)
    near = col("support")
    if col.table is not None:
        episode = np.where(col.present("episode_support"), col("episode_support"), near)
    else:  # a missing or None value reads as near
        episode = np.array(
            [
                n if (v := s.get("episode_support", n)) is None else float(v)
                for s, n in zip(col.sigs, near.tolist(), strict=True)
            ],
            dtype=np.float64,
        )
    return clip_columns((2.0 * near + episode) / 3.0)

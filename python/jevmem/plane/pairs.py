"""The write path's pairs, as `MemoryStore.add_linked` returns them (a dict
of columns, one row per (new node, candidate) pair, grouped by new node),
turned into the requests a controller reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from jevmem.controller import catalogue
from jevmem.controller.types import DecisionRequest, PairQuestions, PairTable

#: The pair signals a relation request carries, in the order it lists them.
_RELATION_SIGNALS = (
    "vector",
    "lexical",
    "entity",
    "temporal",
    "same_session",
    "alias",
    "inserted_before",
    "same_speaker",  # relation.supersedes: one speaker, and which is older
    "older",
)


def split_pairs(pairs: Mapping[str, Any], rows: Sequence[int]) -> list[dict[str, list[Any]]]:
    """The pairs of each of ``rows`` (batch positions) as plain lists, in
    order; a row without pairs gets empty lists."""
    row_of = pairs["row"].tolist()
    out: dict[int, dict[str, list[Any]]] = {r: {k: [] for k in pairs} for r in rows}
    columns = {k: v if isinstance(v, list) else v.tolist() for k, v in pairs.items()}
    for at, r in enumerate(row_of):
        group = out.get(r)
        if group is not None:
            for k, col in columns.items():
                group[k].append(col[at])
    return [out[r] for r in rows]


def relation_round(
    ids: Sequence[int],
    texts: Sequence[str],
    provenances: Sequence[Mapping[str, str]],
    timestamps: Sequence[int | None],
    pairs: Mapping[str, Any],
) -> tuple[list[DecisionRequest], list[tuple[int, list[int]]]]:
    """One relation request per new node with candidates, and per request
    (node id, candidate ids): the questions about each pair, with the
    candidates as a `PairTable` (their text, speaker, time and signals, the
    signals as slices of the batch's columns)."""
    rows = np.asarray(pairs["row"])
    cand = np.asarray(pairs["candidate"]).tolist()
    n = len(rows)
    columns = {
        name: np.ones(n) if name == "inserted_before" else np.asarray(pairs[name], dtype=np.float64)
        for name in _RELATION_SIGNALS
    }
    no_entity = (columns["entity"] == 0).tolist()
    texts_c, speakers_c, stamps_c = pairs["text"], pairs["speaker"], pairs["timestamp"]
    # each new node's pairs are one run of equal rows
    bounds = [0, *(np.flatnonzero(rows[1:] != rows[:-1]) + 1).tolist(), n] if n else [0]
    requests: list[DecisionRequest] = []
    index: list[tuple[int, list[int]]] = []
    for lo, hi in pairwise(bounds):
        r = int(rows[lo])
        stamp = timestamps[r]
        questions = PairQuestions(
            catalogue.relation_questions,
            no_entity[lo:hi],
            [True] * (hi - lo) if stamp is None else [s is None for s in stamps_c[lo:hi]],
        )
        table = PairTable(
            cand[lo:hi],
            texts_c[lo:hi],
            {name: col[lo:hi] for name, col in columns.items()},
            speakers_c[lo:hi],
            stamps_c[lo:hi],
        )
        node_id = ids[r]
        requests.append(
            DecisionRequest(
                "relations",
                {
                    "observation": {
                        "id": node_id,
                        "text": texts[r],
                        "speaker": provenances[r].get("speaker"),
                        "timestamp": stamp,
                    },
                    "candidates": table,
                },
                questions,
            )
        )
        index.append((node_id, cand[lo:hi]))
    return requests, index

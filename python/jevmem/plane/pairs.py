"""The write path's pairs, as `MemoryStore.add_linked` returns them (a dict
of columns, one row per (new node, candidate) pair, grouped by new node),
turned into the requests a controller reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import groupby
from typing import Any

from jevmem.controller import catalogue
from jevmem.controller.types import DecisionRequest, PairQuestions

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
    candidate's text, speaker, time and signals."""
    rows = pairs["row"].tolist()
    cand = pairs["candidate"].tolist()
    signal = {
        name: pairs[name].tolist() if name != "inserted_before" else [1.0] * len(rows)
        for name in _RELATION_SIGNALS
    }
    texts_c, speakers_c, stamps_c = pairs["text"], pairs["speaker"], pairs["timestamp"]
    requests: list[DecisionRequest] = []
    index: list[tuple[int, list[int]]] = []
    for r, group in groupby(range(len(rows)), key=rows.__getitem__):
        at = list(group)
        stamp = timestamps[r]
        questions = PairQuestions(
            catalogue.relation_questions,
            [signal["entity"][k] == 0 for k in at],
            [stamp is None or stamps_c[k] is None for k in at],
        )
        cand_state = [
            {
                "id": cand[k],
                "text": texts_c[k],
                "speaker": speakers_c[k],
                "timestamp": stamps_c[k],
                "signals": {name: signal[name][k] for name in _RELATION_SIGNALS},
            }
            for k in at
        ]
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
                    "candidates": cand_state,
                },
                questions,
            )
        )
        index.append((node_id, [cand[k] for k in at]))
    return requests, index

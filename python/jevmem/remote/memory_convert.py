"""Search results and metadata values to and from the ``jevmem.v1.MemoryService`` protos.

Shared by the servicer (:mod:`jevmem.remote.memory_service`) and the client
(:mod:`jevmem.remote.memory_client`).
"""

from __future__ import annotations

import dataclasses
import json

from jevmem._proto.jevmem.v1 import memory_pb2 as pb
from jevmem.memory import EvidenceItem, SearchResult, Via

__all__ = ["RemoteNode", "meta_to_proto", "node_from_proto", "result_from_proto", "result_to_proto"]


@dataclasses.dataclass(frozen=True)
class RemoteNode:
    """A node as `MemoryClient.get` returns it: the fields of the node
    `Memory.get` returns, as plain Python values (no time or key: None)."""

    id: int
    text: str
    timestamp: int | None
    provenance: dict[str, str]
    entities: list[str]
    #: (episodic, semantic, procedural, preference), each in [0, 1]
    types: tuple[float, ...]
    scope: dict[str, str]
    metadata: dict[str, str | int | float | bool]
    key: str | None


def meta_to_proto(v: str | int | float | bool) -> pb.MetaValue:
    """A metadata value as the proto carries it (bool before int: a bool is an int)."""
    if isinstance(v, bool):
        return pb.MetaValue(flag=v)
    if isinstance(v, int):
        return pb.MetaValue(integer=v)
    if isinstance(v, float):
        return pb.MetaValue(number=v)
    return pb.MetaValue(text=v)


def node_from_proto(n: pb.Node) -> RemoteNode:
    # the wire reads an unset time as 0 and an unset key as ""
    return RemoteNode(
        id=n.id,
        text=n.text,
        timestamp=n.timestamp if n.HasField("timestamp") else None,
        provenance=dict(n.provenance),
        entities=list(n.entities),
        types=tuple(n.types),
        scope=dict(n.scope),
        metadata={k: getattr(v, str(v.WhichOneof("kind"))) for k, v in n.metadata.items()},
        key=n.key or None,
    )


def result_to_proto(r: SearchResult) -> pb.SearchResult:
    out = pb.SearchResult(
        query=r.query,
        sufficient=r.sufficient,
        trace_json=json.dumps(r.trace, default=str, separators=(",", ":")),
    )
    for name in ("sufficiency", "usefulness", "missing", "contradiction"):
        v = getattr(r, name)
        if v is not None:
            setattr(out, name, float(v))
    for e in r.evidence:
        item = out.evidence.add(
            id=e.id,
            text=e.text,
            score=float(e.score),
            provenance=e.provenance,
            # none is the common case: the empty field reads back as no references
            time_refs_json=json.dumps(list(e.time_refs), default=str) if e.time_refs else "",
            passage_start=e.passage[0],
            passage_end=e.passage[1],
            supersedes=e.supersedes,
            superseded_by=e.superseded_by,
        )
        if e.timestamp is not None:
            item.timestamp = e.timestamp
        if e.valid_from is not None:
            item.valid_from = e.valid_from
        if e.valid_to is not None:
            item.valid_to = e.valid_to
        if e.via is not None:
            item.via.CopyFrom(
                pb.Via(
                    view=e.via.view,
                    src=e.via.src,
                    dst=e.via.dst,
                    weight=float(e.via.weight),
                    from_node=e.via.from_node,
                )
            )
    return out


def result_from_proto(m: pb.SearchResult) -> SearchResult:
    evidence = [
        EvidenceItem(
            e.id,
            e.text,
            e.score,
            e.timestamp if e.HasField("timestamp") else None,
            dict(e.provenance),
            Via(e.via.view, e.via.src, e.via.dst, e.via.weight, e.via.from_node)
            if e.HasField("via")
            else None,
            tuple(json.loads(e.time_refs_json or "[]")),
            (e.passage_start, e.passage_end),
            tuple(e.supersedes),
            tuple(e.superseded_by),
            e.valid_from if e.HasField("valid_from") else None,
            e.valid_to if e.HasField("valid_to") else None,
        )
        for e in m.evidence
    ]
    opt = {
        n: getattr(m, n) if m.HasField(n) else None
        for n in ("sufficiency", "usefulness", "missing", "contradiction")
    }
    return SearchResult(m.query, evidence, json.loads(m.trace_json or "{}"), **opt)

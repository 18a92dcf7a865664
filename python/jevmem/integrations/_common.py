"""What the integrations share: one lock per memory and JSON views of nodes
and evidence. Imports nothing optional."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from jevmem._core import Node
from jevmem.memory import EvidenceItem, Memory, SearchResult

__all__ = ["evidence_dict", "iso_time", "memory_lock", "node_dict", "short_trace"]

_locks: weakref.WeakKeyDictionary[Memory, threading.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def memory_lock(memory: Memory) -> threading.Lock:
    """The lock that serialises integration calls on one memory (the gRPC
    service does the same): frameworks call from worker threads, and a search
    must not run while another call writes."""
    with _locks_guard:
        lock = _locks.get(memory)
        if lock is None:
            lock = _locks[memory] = threading.Lock()
        return lock


def iso_time(ts: int | None) -> str | None:
    """Unix seconds as ISO 8601 UTC (``2024-03-01T10:00:00Z``). The year has
    at least four digits (``0003-01-01T00:00:00Z``; ``%Y`` would give ``3``),
    and a sign before year 0 (ISO 8601's expanded form: ``-0001``)."""
    if ts is None:
        return None
    try:
        t = time.gmtime(ts)
    except (OverflowError, OSError, ValueError):  # outside what the platform's gmtime takes
        return None
    year = f"{t.tm_year:04d}" if t.tm_year >= 0 else f"-{-t.tm_year:04d}"
    return f"{year}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}Z"


def node_dict(node: Node) -> dict[str, Any]:
    """A stored observation as plain JSON values."""
    return {
        "id": node.id,
        "text": node.text,
        "speaker": node.provenance.get("speaker"),
        "timestamp": node.timestamp,
        "time": iso_time(node.timestamp),
        "provenance": dict(node.provenance),
        "entities": list(node.entities),
        "scope": dict(node.scope),
        "metadata": dict(node.metadata),
        "key": node.key,
    }


def evidence_dict(memory: Memory, e: EvidenceItem) -> dict[str, Any]:
    """One evidence item with where it came from, when, how it was reached
    and how its fact stands (the node's scope and metadata read from the store)."""
    node = memory.get(e.id)
    return {
        "id": e.id,
        "text": e.text,
        "score": float(e.score),
        "speaker": e.provenance.get("speaker"),
        "timestamp": e.timestamp,
        "time": iso_time(e.timestamp),
        "provenance": dict(e.provenance),
        "scope": dict(node.scope),
        "metadata": dict(node.metadata),
        "via": None
        if e.via is None
        else {"view": e.via.view, "from_node": e.via.from_node, "weight": float(e.via.weight)},
        "time_refs": [
            {k: v for k, v in ref.items() if isinstance(v, str | int | float | bool) or v is None}
            for ref in e.time_refs
        ],
        "passage": [e.passage[0], e.passage[1]],
        "supersedes": list(e.supersedes),
        "superseded_by": list(e.superseded_by),
        "valid_from": e.valid_from,
        "valid_to": e.valid_to,
    }


def short_trace(r: SearchResult) -> dict[str, Any]:
    """The part of a search trace an agent can act on: which views ran, the
    rounds and why the traversal stopped, the last assessment and the time taken."""
    t = r.trace
    elapsed = t.get("total_elapsed_s", t.get("elapsed_s"))
    rounds = []
    for rd in t.get("rounds", ()):
        a = rd.get("assessment") or {}
        rounds.append(
            {
                "depth": rd.get("depth"),
                "admitted": rd.get("admitted"),
                "sufficiency": a.get("sufficiency"),
            }
        )
    return {
        "mode": t.get("mode"),
        "controller": t.get("controller"),
        "active_views": list(t.get("active_views", ())),
        "rounds": rounds,
        "stop_reason": t.get("stop_reason"),
        "visited": t.get("visited"),
        "sufficiency": r.sufficiency,
        "sufficient": r.sufficient,
        "missing": r.missing,
        "contradiction": r.contradiction,
        "elapsed_ms": None if elapsed is None else round(float(elapsed) * 1000.0, 3),
    }

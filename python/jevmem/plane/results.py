"""What a search returns: `SearchResult`, its `EvidenceItem` list and the `Via` edge of each."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Via:
    """The edge an evidence item was reached by."""

    view: str
    src: int
    dst: int
    weight: float
    from_node: int


@dataclass(frozen=True)
class EvidenceItem:
    id: int
    text: str
    score: float
    #: Observation time (when it was recorded), not the time of the event it describes.
    timestamp: int | None
    provenance: dict[str, str]
    via: Via | None
    #: Time expressions in the text, resolved against the observation time.
    time_refs: tuple[dict[str, Any], ...] = ()
    #: ``[start, end)`` characters of the passage of ``text`` that matched the
    #: query best (the whole text when it is one passage).
    passage: tuple[int, int] = (0, 0)
    #: Facts that change: the observations this one replaced and the ones
    #: that replaced it (supersedes links), and when its fact held on the
    #: world timeline, [valid_from, valid_to); set only for linked nodes.
    supersedes: tuple[int, ...] = ()
    superseded_by: tuple[int, ...] = ()
    valid_from: int | None = None
    valid_to: int | None = None


#: `EvidenceItem`'s fields, in order (see `evidence_item`)
_EVIDENCE_FIELDS = tuple(f.name for f in fields(EvidenceItem))


def evidence_item(*values: Any) -> EvidenceItem:
    """``EvidenceItem(*values)``, every field given in order, without the
    frozen dataclass's per-field ``object.__setattr__`` (the read path makes
    one per result item): the same object, its fields set in one update."""
    item = object.__new__(EvidenceItem)
    item.__dict__.update(zip(_EVIDENCE_FIELDS, values, strict=True))
    return item


@dataclass
class SearchResult:
    query: str
    evidence: list[EvidenceItem]
    trace: dict[str, Any]
    sufficiency: float | None = None
    usefulness: float | None = None
    missing: float | None = None
    contradiction: float | None = None

    @property
    def sufficient(self) -> bool:
        """The last assessment met the stop rule (sufficient, nothing missing, no contradiction)."""
        return self.sufficiency is not None and not self.unmet_stop_rule()

    def unmet_stop_rule(self) -> list[tuple[str, float, float]]:
        """The parts of the stop rule the last assessment did not meet, as
        (name, value, threshold): ``sufficiency`` below its threshold,
        ``missing`` or ``contradiction`` at or above theirs. Compared in
        float32, as the core decides the stop (its thresholds are float32:
        in float64 a missing of 0.15000000000000002 would fail a threshold
        the core meets)."""
        cfg = self.trace.get("thresholds", {})
        unmet = []
        got = [
            ("sufficiency", self.sufficiency, cfg.get("theta_suff", 0.95)),
            ("missing", self.missing, cfg.get("theta_missing", 0.15)),
            ("contradiction", self.contradiction, cfg.get("theta_contradiction", 0.15)),
        ]
        for name, value, threshold in got:
            v, th = np.float32(value or 0.0), np.float32(threshold)
            if (v < th) if name == "sufficiency" else (v >= th):
                unmet.append((name, float(value or 0.0), float(threshold)))
        return unmet

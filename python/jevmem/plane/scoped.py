"""What a scoped or filtered search sees."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jevmem._core import Allowed
from jevmem.plane.filters import scope_and_filter
from jevmem.plane.signals import logistic
from jevmem.plane.state import MemoryState


class ScopedView:
    """What a scoped or filtered search sees: the allowed nodes (resolved once
    per search), the speakers among them, and their style statistics."""

    def __init__(self, memory: MemoryState, allowed: Allowed) -> None:
        self.allowed = allowed
        spoken = memory.store.provenance_values("speaker", allowed=allowed)
        self.speakers = {s.lower() for s in spoken if s.lower()}
        self.speaker_order = sorted(self.speakers)
        self._memory = memory
        #: the style statistics of `Memory._style`, over the allowed nodes
        #: (mean log length; per speaker turns, question share, log length)
        self._style_stats: tuple[float, dict[str, list[float]]] | None = None
        self._styles: dict[int, tuple[float, float, float]] = {}

    def style(self, node_id: int) -> tuple[float, float, float]:
        """`Memory._style` relative to the allowed nodes only: how a turn
        reads against the scope it is in, not against other scopes' turns."""
        got = self._styles.get(node_id)
        if got is not None:
            return got
        m = self._memory
        if self._style_stats is None:
            total, n = 0.0, 0
            speakers: dict[str, list[float]] = {}
            for i in self.allowed.ids():
                log_len = m._log_len.get(i)
                if log_len is None:
                    continue  # written past add_batch (a summary): as Memory._style
                total += log_len
                n += 1
                spk = m._node_facts(i).speaker
                if spk:
                    st = speakers.setdefault(spk, [0.0, 0.0, 0.0])
                    st[0] += 1
                    st[1] += m._asks.get(i, 0.0)
                    st[2] += log_len
            self._style_stats = (total / n if n else math.nan, speakers)
        mean, speakers = self._style_stats
        if math.isnan(mean):
            return 0.5, 0.0, 0.5
        length = logistic(m._log_len.get(node_id, mean) - mean)
        stats = speakers.get(m._node_facts(node_id).speaker)
        if not stats or not stats[0]:
            got = (length, 0.0, 0.5)
        else:
            got = (length, stats[1] / stats[0], logistic(stats[2] / stats[0] - mean))
        self._styles[node_id] = got
        return got

    @staticmethod
    def of(
        memory: MemoryState, scope: Mapping[str, str] | None, filter: Mapping[str, Any] | None
    ) -> ScopedView | None:
        """None when nothing is restricted: the unscoped path, unchanged."""
        scope_arg, filter_arg = scope_and_filter(scope, filter)
        allowed = memory.store.select(scope_arg, filter_arg)
        return None if allowed is None else ScopedView(memory, allowed)

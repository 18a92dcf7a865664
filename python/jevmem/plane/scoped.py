"""What a scoped or filtered search sees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jevmem._core import Allowed
from jevmem.plane.filters import scope_and_filter
from jevmem.plane.state import MemoryState


class ScopedView:
    """What a scoped or filtered search sees: the allowed nodes (resolved once
    per search) and the people among them (`MemoryStore.people`). Styles read
    against the allowed nodes only (`MemoryStore.styles` with them): how a
    turn reads against the scope it is in, not against other scopes' turns."""

    def __init__(self, memory: MemoryState, allowed: Allowed) -> None:
        self.allowed = allowed
        self.speaker_order = memory.store.people(allowed=allowed)
        self.speakers = set(self.speaker_order)

    @staticmethod
    def of(
        memory: MemoryState, scope: Mapping[str, str] | None, filter: Mapping[str, Any] | None
    ) -> ScopedView | None:
        """None when nothing is restricted: the unscoped path, unchanged."""
        scope_arg, filter_arg = scope_and_filter(scope, filter)
        allowed = memory.store.select(scope_arg, filter_arg)
        return None if allowed is None else ScopedView(memory, allowed)

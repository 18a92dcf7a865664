"""The process-wide text caches. (What a query asks is read in the core, `ReadSession.plan`: its names, times, question frame and requests for help; everything read off a node too: sentences, person marks, names used as address and question shares in `MemoryStore.content_coverage` and `jevmem._core.question_share`, texts and sessions in `MemoryStore.texts` and `.same_session`, a write candidate's pair signals in `WriteCandidate`.)"""

from __future__ import annotations


def drop_text_caches() -> None:
    """Empty the process-wide caches keyed by observation texts (cue counts,
    change statements, rendered time references), so a forgotten text is not
    kept alive there; they refill on use."""
    from jevmem.controller import local
    from jevmem.plane import derived
    from jevmem.temporal import _describe

    local.clear_text_caches()
    derived.time_ref_entry.cache_clear()
    # keyed by time references, which carry their words of the text
    _describe.describe.cache_clear()

"""What the read path reads off a query in Python: the words that frame a question and requests for help. (Everything read off a node comes from the core: sentences, person marks, names used as address and question shares in `MemoryStore.content_coverage` and `jevmem._core.question_share`, texts and sessions in `MemoryStore.texts` and `.same_session`, a write candidate's pair signals in `WriteCandidate`.)"""

from __future__ import annotations

import re


def drop_text_caches() -> None:
    """Empty the process-wide caches keyed by observation texts (cue counts,
    change statements), so a forgotten text is not kept alive there; they
    refill on use."""
    from jevmem.controller import local

    local.clear_text_caches()


#: Words that frame a question about a conversation rather than carry its content.
QUESTION_FRAME = (
    "mention",
    "mentioned",
    "say",
    "said",
    "talk",
    "talked",
    "discuss",
    "discussed",
    "tell",
    "told",
    "share",
    "shared",
    "ask",
    "asked",
    "think",
    "thought",
)
REQUEST = re.compile(
    r"\b(?:can you|could you|would you|will you|please|help me|show me|tell me how|"
    r"suggest|recommend|advise|should i|how (?:can|do|should) i|what (?:would|should)|"
    r"give me|walk me through|explain)\b",
    re.IGNORECASE,
)

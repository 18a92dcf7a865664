"""Features read off observation texts and nodes, once per node: sentences, question shares, names used as address, sessions. (A write candidate's pair signals come from the core: `WriteCandidate`.)"""

from __future__ import annotations

import re
from typing import NamedTuple

from jevmem._core import Node


class NodeFacts(NamedTuple):
    """What the read path reads off a node on every query, kept in Python so
    it never asks the store (each ``MemoryStore.get`` builds a whole Node)."""

    text: str
    #: the provenance's speaker, lower-cased ("" when none)
    speaker: str
    entities: frozenset[str]
    #: see `session_of`
    session: str | None
    #: the typing answers (episodic, semantic, procedural, preference)
    types: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    @staticmethod
    def of(node: Node) -> NodeFacts:
        # each attribute of a Node is converted anew on every access: read once
        prov = node.provenance
        return NodeFacts(
            node.text,
            prov.get("speaker", "").lower(),
            frozenset(node.entities),
            session_in(prov),
            tuple(node.types),  # type: ignore[arg-type]
        )


class Sentence(NamedTuple):
    """One sentence of a node's text, as `QueryRun.content_coverage` reads it."""

    words: tuple[str, ...]  # its tokens, in order
    weight: float  # 0.5 for a question (it asserts less), else 1
    first_person: bool
    second_person: bool


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
SENTENCES = re.compile(r"[^.!?]+[.!?]*")
FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|ours|us)\b", re.IGNORECASE
)
REQUEST = re.compile(
    r"\b(?:can you|could you|would you|will you|please|help me|show me|tell me how|"
    r"suggest|recommend|advise|should i|how (?:can|do|should) i|what (?:would|should)|"
    r"give me|walk me through|explain)\b",
    re.IGNORECASE,
)
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|yourself)\b", re.IGNORECASE)
CAPITALISED = re.compile(r"\b([A-Z][a-z]{2,})\b")
GREETING = re.compile(
    r"(?:^|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|wow|oh|yes|yeah|yep|sure|ok|okay|well|great|bye|dear|aww|haha|omg)[\s,!]*)$",
    re.IGNORECASE,
)


def is_vocative(text: str, m: re.Match[str]) -> bool:
    """A name used to address someone: 'Hey Gina, ...', 'Thanks, Mel!', '..., Caroline!'."""
    after = text[m.end() : m.end() + 2]
    before = text[max(0, m.start() - 24) : m.start()]
    if not after or after[0] not in ",!?.":
        return False
    return bool(GREETING.search(before.rstrip(" ,")) or before.rstrip().endswith(","))


def is_alias(entity: str, name: str) -> bool:
    """'mel' and 'caro' name 'melanie' and 'caroline': equal, or a 3+ letter prefix either way."""
    if not name or not entity:
        return False
    first = entity.split()[0]
    if entity == name or first == name:
        return True
    short, long_ = sorted((first, name), key=len)
    return len(short) >= 3 and long_.startswith(short)


def question_share(text: str) -> float:
    """Share of a text's sentences that are questions."""
    sentences = [x for x in SENTENCES.findall(text) if x.strip()]
    if not sentences:
        return 0.0
    return float(sum(x.rstrip().endswith("?") for x in sentences) / len(sentences))


def session_of(node: Node) -> str | None:
    """The session (or episode) the node's provenance names, if any."""
    return session_in(node.provenance)


def session_in(prov: dict[str, str]) -> str | None:
    """`session_of` over a provenance already read."""
    for key in ("session", "session_id", "episode"):
        if key in prov:
            return f"{key}:{prov[key]}"
    return None

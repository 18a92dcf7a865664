"""Every question the memory asks its controller, in our own words.

Each builder returns questions with stable ``kind`` names (what a local
controller dispatches on) and instruction/criteria text (what a model-backed
controller reads). Per-pair and per-candidate questions get ``pair_{i}_`` /
``candidate_{i}_`` id prefixes, ``i`` indexing the state's list.
"""

from __future__ import annotations

from functools import lru_cache

from jevmem.controller.types import Choice, Noul

__all__ = [
    "ASSESSMENT_KINDS",
    "CONSOLIDATION_KINDS",
    "REPRESENTATION_OPTIONS",
    "ROUTING_KINDS",
    "SCORING_KINDS",
    "TEMPORAL_LABELS",
    "TYPING_KINDS",
    "anchor_questions",
    "assessment_questions",
    "consolidation_questions",
    "relation_questions",
    "routing_questions",
    "scoring_questions",
    "typing_questions",
]

# ---- typing: four independent labels of one observation --------------------

_TYPING: dict[str, tuple[str, str, str]] = {
    "episodic": (
        "Does the observation record a specific happening: something that took place "
        "at a particular time or occasion?",
        "It reports an event, an experience or an action tied to a moment (e.g. 'went "
        "hiking on Sunday', 'the deploy failed last night').",
        "It states no particular occurrence: a general fact, a rule, a taste or a plan "
        "with no moment attached.",
    ),
    "semantic": (
        "Does the observation state a fact that stays true beyond the moment it was said?",
        "It holds durable knowledge about the world or a person (identity, relations, "
        "properties, where someone works or lives).",
        "It is only about a passing moment, a feeling right now, or chit-chat with no "
        "lasting content.",
    ),
    "procedural": (
        "Does the observation describe how to do something?",
        "It gives steps, a method, a recipe, a fix or a rule of the form 'when X, do Y'.",
        "It contains no instructions or method that someone could follow.",
    ),
    "preference": (
        "Does the observation reveal what someone likes, dislikes, wants or chooses?",
        "It expresses a taste, a wish, a favourite, an aversion or a habitual choice.",
        "It expresses no liking, disliking or choice by anyone.",
    ),
}
TYPING_KINDS = tuple(f"type.{k}" for k in _TYPING)


def _nouls(
    table: dict[str, tuple[str, str, str]], kind: str, id_prefix: str = ""
) -> tuple[Noul, ...]:
    """One Noul per (instruction, true criterion, false criterion) entry of a table."""
    return tuple(
        Noul(id=f"{id_prefix}{name}", kind=f"{kind}.{name}", instruction=i, true_if=t, false_if=f)
        for name, (i, t, f) in table.items()
    )


@lru_cache(maxsize=1)
def typing_questions() -> tuple[Noul, ...]:
    return _nouls(_TYPING, "type")


# ---- relations between a new observation and one earlier candidate ---------

TEMPORAL_LABELS = ("before", "after", "during", "contains", "overlaps", "same_time", "unknown")
_TEMPORAL_MEANINGS = (
    "the candidate's event ended before the new one started",
    "the candidate's event started after the new one ended",
    "the candidate's event lies inside the new one's time span",
    "the candidate's event spans the whole of the new one",
    "the two events share part of their time spans",
    "the two events happened at the same moment",
    "their order in time cannot be told from the texts",
)


@lru_cache(maxsize=1024)
def relation_questions(i: int, *, ask_alias: bool, ask_temporal: bool) -> tuple[Noul | Choice, ...]:
    """Questions about pair ``i`` (new observation, candidate ``i``).

    ``ask_alias`` only when no exact entity id is shared already; ``ask_temporal``
    only when timestamps do not order the pair.
    """
    p = f"pair_{i}_"
    qs: list[Noul | Choice] = [
        Noul(
            p + "semantic",
            "relation.semantic",
            "Are the new observation and this earlier one about the same subject?",
            "They concern the same topic, object, plan or person in a way that makes one "
            "useful context for the other.",
            "They share words at most, not a subject.",
        ),
        Noul(
            p + "causal_candidate_to_new",
            "relation.causal_candidate_to_new",
            "Did what the earlier observation reports bring about what the new one reports?",
            "The earlier event or state is a cause, reason or precondition of the new one.",
            "The earlier one does not help explain why the new one happened.",
        ),
        Noul(
            p + "causal_new_to_candidate",
            "relation.causal_new_to_candidate",
            "Does the new observation explain what the earlier one reports?",
            "The new text gives the cause or reason of the earlier event or state (e.g. it "
            "says why it happened).",
            "The new observation gives no reason for the earlier one.",
        ),
        Noul(
            p + "same_episode",
            "relation.same_episode",
            "Do both observations belong to one episode: the same conversation, outing or task?",
            "They are parts of one continuous occasion.",
            "They come from different occasions.",
        ),
    ]
    qs.append(
        Noul(
            p + "supersedes",
            "relation.supersedes",
            "Does the one of the two said later (the new observation, unless the log is "
            "written out of order) change what the other said about the same subject, so "
            "that the earlier statement no longer holds as it stood?",
            "Both speak of one subject (a person's habit, a setting, a tool, a place, a "
            "number) and the new one gives it a different value from now on: an update, a "
            "switch, a move, a correction, or a denial of the earlier claim.",
            "They are about different subjects, the new one agrees with or only adds to the "
            "earlier one, or both can still hold together.",
        )
    )
    if ask_alias:
        qs.append(
            Noul(
                p + "entity_alias",
                "relation.entity_alias",
                "Do the two observations refer to the same person, place or thing under "
                "different names?",
                "A name, nickname, pronoun target or description in one denotes an entity "
                "named differently in the other.",
                "No entity of one is the same as an entity of the other.",
            )
        )
    if ask_temporal:
        qs.append(
            Choice(
                p + "temporal",
                "relation.temporal",
                "How does the earlier observation's event sit in time relative to the new one's?",
                TEMPORAL_LABELS,
                _TEMPORAL_MEANINGS,
            )
        )
    return tuple(qs)


# ---- consolidation over a small neighbourhood -----------------------------

REPRESENTATION_OPTIONS = ("keep_separate", "merge", "promote", "uncertain")
CONSOLIDATION_KINDS = (
    "consolidate.redundant",
    "consolidate.contradicting",
    "consolidate.obsolete",
    "consolidate.extra_link",
    "consolidate.representation",
)


@lru_cache(maxsize=1)
def consolidation_questions() -> tuple[Noul | Choice, ...]:
    return (
        Noul(
            "redundant",
            "consolidate.redundant",
            "Does the focus observation repeat what its neighbours already say?",
            "Its content is fully covered by one or more neighbours.",
            "It adds something the neighbours lack.",
        ),
        Noul(
            "contradicting",
            "consolidate.contradicting",
            "Do the focus observation and a neighbour make claims that cannot both hold?",
            "One asserts what another denies, or they give incompatible values for the same thing.",
            "Their claims are compatible.",
        ),
        Noul(
            "obsolete",
            "consolidate.obsolete",
            "Has a newer neighbour replaced what the focus observation states?",
            "A later observation updates or supersedes it (a changed plan, a new address).",
            "It is still current.",
        ),
        Noul(
            "extra_link",
            "consolidate.extra_link",
            "Should the focus be linked to a neighbour it has no edge with yet?",
            "A neighbour is clearly related but the graph does not connect them.",
            "Every useful connection already exists.",
        ),
        Choice(
            "representation",
            "consolidate.representation",
            "How should this group of observations be represented?",
            REPRESENTATION_OPTIONS,
            (
                "leave the observations as they are",
                "write one summary node standing for the group",
                "write one general statement the group supports",
                "the evidence does not support a decision",
            ),
        ),
    )


# ---- routing a query ---------------------------------------------------------

_ROUTING: dict[str, tuple[str, str, str]] = {
    "semantic": (
        "Would observations on the same topic as the query help answer it?",
        "Topical context (related facts, the same subject) is part of a good answer.",
        "Topic similarity alone cannot contribute.",
    ),
    "temporal": (
        "Does answering need to know when things happened or in what order?",
        "The query asks when, how long, before/after, first/last, or is anchored at a time.",
        "Time plays no part in the answer.",
    ),
    "causal": (
        "Does the query ask for causes, reasons or consequences?",
        "It asks why, what led to something, or what something resulted in.",
        "No cause or effect is asked about.",
    ),
    "entity": (
        "Does the answer hinge on a particular person, place or thing named or implied?",
        "The query is about specific entities whose other mentions would help.",
        "No specific entity matters.",
    ),
    "multi_hop": (
        "Does answering take several separate observations combined?",
        "The answer joins facts from different moments or about several entities.",
        "One observation can answer it.",
    ),
    "recency": (
        "Should more recent observations count for more?",
        "The query asks about the current state, the latest value or what holds now.",
        "Older and newer observations are equally relevant.",
    ),
}
ROUTING_KINDS = tuple(f"route.{k}" for k in _ROUTING)


@lru_cache(maxsize=1)
def routing_questions() -> tuple[Noul, ...]:
    return _nouls(_ROUTING, "route")


# ---- scoring a traversal candidate -------------------------------------------

_SCORING: dict[str, tuple[str, str, str]] = {
    "relevance": (
        "Is this candidate observation about what the query asks?",
        "It mentions the query's subject, people or events, so it could be part of the answer.",
        "It is about something else.",
    ),
    "relation_usefulness": (
        "Is the edge that led to this candidate a useful path for this query?",
        "Following this kind of link (in time, cause, entity or topic) is how the answer "
        "would be found.",
        "The link is incidental to what the query asks.",
    ),
    "novelty": (
        "Does the candidate add information the current evidence does not have?",
        "It contributes a fact, time or detail absent from the evidence.",
        "It repeats what the evidence already says.",
    ),
    "support": (
        "Does the candidate back up or complete the current evidence?",
        "It confirms, dates, explains or continues an evidence item.",
        "It has no bearing on the evidence gathered so far.",
    ),
}
SCORING_KINDS = tuple(f"score.{k}" for k in _SCORING)


@lru_cache(maxsize=1024)
def scoring_questions(i: int) -> tuple[Noul, ...]:
    return _nouls(_SCORING, "score", f"candidate_{i}_")


@lru_cache(maxsize=1024)
def anchor_questions(i: int) -> tuple[Noul, ...]:
    """The scoring questions that rank the anchor pool: no edge led to an anchor
    and nothing has been gathered yet, so usefulness and novelty do not apply."""
    return tuple(q for q in scoring_questions(i) if q.kind in ("score.relevance", "score.support"))


# ---- assessing the evidence gathered so far ---------------------------------

_ASSESSMENT: dict[str, tuple[str, str, str]] = {
    "sufficiency": (
        "Can the query be answered from the evidence gathered so far?",
        "The evidence is about the entity and event the query asks about and states the answer.",
        "Something the answer needs is absent, or the evidence concerns another person or event.",
    ),
    "usefulness": (
        "Is it worth expanding the search further?",
        "Unexplored links from the evidence are likely to lead to what is still missing.",
        "Further expansion would only add noise.",
    ),
    "missing": (
        "Is a specific piece of the answer clearly still missing?",
        "The query asks for something (a date, a name, a reason) the evidence does not give.",
        "Nothing the query asks for is missing.",
    ),
    "contradiction": (
        "Does the evidence disagree with itself about the answer?",
        "Two items give incompatible answers.",
        "The evidence is consistent.",
    ),
}
ASSESSMENT_KINDS = tuple(f"assess.{k}" for k in _ASSESSMENT)


@lru_cache(maxsize=1)
def assessment_questions() -> tuple[Noul, ...]:
    return _nouls(_ASSESSMENT, "assess")

"""A query's plan, read in the core (`ReadSession.plan`), against the Python
it replaced (kept here as the oracle): the same anchors and scores, passage
hits, names, people, time cues and flags for every development question,
and the same request rule as Python's `re` on generated text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.coverage_reference import is_alias

from jevmem import HashEmbedder, LocalController, Memory, MemoryConfig, MemoryStore
from jevmem._core import ReadSession, rrf, speaks_in_first_person
from jevmem.entities import extract_entities, mentions
from jevmem.evaluation import conversation_inputs, load_samples
from jevmem.temporal import query_time_cues, time_cues_of

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = [DATA / "locomo" / "locomo10-dev.json", DATA / "beam" / "beam-100k.json"]

#: The request rule as the plane read it in Python.
REQUEST = re.compile(
    r"\b(?:can you|could you|would you|will you|please|help me|show me|tell me how|"
    r"suggest|recommend|advise|should i|how (?:can|do|should) i|what (?:would|should)|"
    r"give me|walk me through|explain)\b",
    re.IGNORECASE,
)
#: The summary rule, in Python's `re` (the core's runs the same pattern).
SUMMARY = re.compile(
    r"\b(?:summar(?:y|ies|ise|ised|ising|ize|ized|izing)|recap(?:s|ped|ping)?|overview|"
    r"rundown|round-?up)\b",
    re.IGNORECASE,
)
#: The rule for a question about what the answerer said, in Python's `re`.
ANSWERER_SAID = re.compile(
    r"\b(?:(?:did|have|had)\s+you\s+(?:\w+\s+)?(?:say|mention|tell|share|note|state|describe|"
    r"list|bring\s+up|recommend|suggest|explain|outline|propose|advise|give|provide)|"
    r"you\s+(?:\w+\s+)?(?:said|mentioned|told|shared|noted|stated|described|listed|brought\s+up|"
    r"recommended|suggested|explained|outlined|proposed|advised|gave|provided)|"
    r"your\s+(?:earlier\s+|previous\s+|last\s+)?(?:advice|recommendations?|suggestions?|"
    r"answers?|explanations?|tips))\b",
    re.IGNORECASE,
)


def python_plan(m: Memory, query: str, qvec: Any, k: int, now: int | None) -> dict[str, Any]:
    """The plan as `QueryFeatures` computed it in Python (full mode)."""
    store, cfg = m.store, m.config
    depth = max(cfg.anchor_depth, k)
    lex_ids, _ = store.search_lexical(query, depth)
    vec_ids, _ = store.search_vector(qvec, depth)
    pool = max(cfg.anchor_pool, cfg.anchors, k)
    fused = rrf([vec_ids.tolist(), lex_ids.tolist()], cfg.kappa)[:pool]
    p_ids, _, _ = store.search_passages(qvec, depth, long_only=True)
    named = set(extract_entities(query))
    for name in list(named):
        words = name.split()
        if len(words) > 1:
            named.update(
                " ".join(words[i:j])
                for i in range(len(words))
                for j in range(i + 1, min(len(words), i + 4) + 1)
            )
    names = sorted(named)
    known = [e for e, ok in zip(names, store.entities_known(names), strict=True) if ok]
    entities = mentions(query, known) if known else []
    speakers = m._speakers
    asked = (
        [e for e in entities if any(is_alias(e, s) for s in speakers)]
        if speakers
        else list(entities)
    )
    return {
        "fused": fused,
        "passages": [int(i) for i in p_ids],
        "entities": entities,
        "asked": asked,
        "cues": query_time_cues(query, now=now),
        "first_person": speaks_in_first_person(query),
        "request": bool(REQUEST.search(query)),
        "summary": bool(SUMMARY.search(query)),
        "answerer": bool(ANSWERER_SAID.search(query)),
    }


def core_plan(m: Memory, query: str, qvec: Any, k: int, now: int | None) -> dict[str, Any]:
    cfg = m.config
    (_, ids, scores, passages, entities, asked, cues, first, request, summary, answerer) = (
        ReadSession.plan(
            m.store,
            query,
            qvec,
            depth=max(cfg.anchor_depth, k),
            pool=max(cfg.anchor_pool, cfg.anchors, k),
            kappa=cfg.kappa,
            now=now,
            people=sorted(m._speakers),
            related_words=cfg.related_words,
        )
    )
    return {
        "fused": list(zip(ids, scores, strict=True)),
        "passages": passages,
        "entities": entities,
        "asked": asked,
        "cues": time_cues_of(query, cues),
        "first_person": first,
        "request": request,
        "summary": summary,
        "answerer": answerer,
    }


def without_lower_case_names(
    core: dict[str, Any], python: dict[str, Any], query: str
) -> dict[str, Any]:
    """The core's plan without the names it read from lower-case words (the
    Python plan read capitals only), after checking that each is a
    lower-case word of the query or a person such a word names."""
    lower = {w.lower() for w in re.findall(r"[A-Za-z]+", query) if w[0].islower()}
    added = [e for e in core["entities"] if e not in python["entities"]]
    assert all(e in lower or any(is_alias(w, e) for w in lower) for e in added), (query, added)
    return {
        **core,
        "entities": [e for e in core["entities"] if e not in added],
        "asked": [e for e in core["asked"] if e not in added],
    }


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.stem)
def test_the_plan_equals_the_python_one_for_every_development_question(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not present")
    emb = HashEmbedder(64)
    convs, _ = load_samples(json.loads(path.read_text()))
    checked = 0
    for conv in convs:
        texts, ts, spk, provs = conversation_inputs(conv)
        # the plan Python computed had no related words (`test_related_words.py`)
        m = Memory(
            emb,
            LocalController(),
            config=MemoryConfig(related_words=False),
            store=MemoryStore(emb.dim, max_text_bytes=4 << 20),
        )
        m.add_batch(texts, timestamps=ts, speakers=spk, provenances=provs)
        last = max((t for t in ts if t is not None), default=None)
        questions = [qa.question for qa in conv.qas]
        for q, qvec in zip(questions, emb.embed(questions), strict=True):
            for now in (None, last):
                core, python = core_plan(m, q, qvec, 10, now), python_plan(m, q, qvec, 10, now)
                assert without_lower_case_names(core, python, q) == python, q
                checked += 1
    assert checked > 100


#: Each yes/no rule of the plan: its place in `ReadSession.plan`'s tuple,
#: its Python twin, and words that make and nearly make it match.
RULES = {
    "request": (-3, REQUEST, st.sampled_from(
        ["can", "you", "Can", "YOU", "could", "please", "help", "me", "how", "do", "I", "i",
         "should", "what", "would", "explain", "explained", "walk", "through", "canyou",
         "\u017fhould", "\u212a", "\u00fcnd", "-", "'", "\u00a0", "  "]
    )),
    "summary": (-2, SUMMARY, st.sampled_from(
        ["summary", "Summarize", "SUMMARISE", "summarized", "summer", "recap", "recapped",
         "recapture", "overview", "over", "view", "round-up", "roundup", "round", "up",
         "rundown", "summar", "\u017fummary", "\u212aecap", "-", "'", "\u00a0", "  ", "a", "of"]
    )),
    "answerer": (-1, ANSWERER_SAID, st.sampled_from(
        ["did", "you", "YOU", "have", "had", "what", "recommend", "recommended", "suggest",
         "suggested", "say", "said", "bring", "up", "brought", "your", "earlier", "advice",
         "tips", "tip", "advisor", "I", "already", "\u017fay", "\u212a", "-", "'", "\u00a0", "  "]
    )),
}  # fmt: skip


@pytest.mark.parametrize("rule", sorted(RULES))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_plan_rules_are_pythons(rule: str, data: st.DataObject) -> None:
    at, pattern, words = RULES[rule]
    query = data.draw(st.lists(words, max_size=8).map(" ".join))
    m = Memory(HashEmbedder(8), LocalController())
    got = ReadSession.plan(m.store, query, np.ones(8, np.float32), depth=5, pool=5, kappa=60.0)
    assert got[at] == bool(pattern.search(query)), query


def test_an_evidence_item_made_field_by_field_equals_the_constructed_one() -> None:
    from jevmem.plane.results import EvidenceItem, Via, evidence_item

    via = Via("temporal", 1, 7, 0.9, 1)
    values: tuple[Any, ...] = (7, "text", 0.5, 1_700_000_000, {"a": "b"}, via)
    values += (({"text": "today"},), (0, 4), (3,), (9, 10), 5, None)
    made, built = evidence_item(*values), EvidenceItem(*values)
    assert made == built and repr(made) == repr(built) and vars(made) == vars(built)
    with pytest.raises(AttributeError):  # frozen as the constructed one is
        made.score = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError):  # every field, in order
        evidence_item(*values[:-1])

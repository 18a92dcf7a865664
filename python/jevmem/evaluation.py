"""LoCoMo-layout datasets and the scores used to evaluate a memory on them.

Internal, not part of the stable API: names and record shapes may change in
any release. jevmem's benchmarks (``bench/locomo_retrieval.py``,
``bench/locomo_qa.py``, ...) and tests use it; it is documented so that an
evaluation of your own on the same data can reuse the loader and the scores.

Loading. The released ``locomo10.json`` layout (see
``shared/data/locomo/README.md``; BEAM files converted to it load the same
way) is read into typed records: :class:`Conversation` (its :class:`Turn`
list in session order) and :class:`QA`. Evidence ids are normalised to
``D<s>:<t>`` and checked against the conversation's turns; every id that had
to be repaired or was dropped is counted in a :class:`DropReport`, by reason:

* ``repaired``: malformed but readable, rewritten (``"D:11:26"`` -> ``D11:26``,
  ``"D30:05"`` -> ``D30:5``);
* ``split``: one string holding several ids (``"D8:6; D9:17"``), split (counted
  once per string; each id in it is then checked on its own);
* ``unparsable``: dropped, no ``D<s>:<t>`` in it (``"D"``);
* ``dangling``: dropped, well formed but no such turn in the conversation;
* ``duplicate``: dropped, the same turn listed twice for one question;
* ``qa_no_evidence``: questions released without any evidence;
* ``qa_all_dropped``: questions whose every evidence id was dropped.

Questions are never dropped here: a question left without gold evidence keeps
``evidence == ()``; recall metrics skip it (:func:`aggregate`), abstention
metrics still use it. A ``str`` evidence is one id. Turns repeating an earlier
turn's dia_id are kept and counted (``duplicate_dia_id``; evidence names the
first). A malformed file or sample (not JSON; a missing ``conversation``,
``dia_id``, ``question`` or ``category``; a session or ``qa`` that is not a
list; a category that is not an integer) raises
:class:`~jevmem.errors.InvalidInputError` naming the sample and the field; a
missing file, :class:`FileNotFoundError`. (The loader lives in
``jevmem._evaluation_load``; import it from here.)

Into a memory. :func:`conversation_inputs` gives one conversation's node
texts, timestamps, speakers and provenances (one node per turn) for
``Memory.add_batch``; search results map back to turns by
``provenance["dia_id"]``. :func:`as_messages` and :func:`as_blocks` restyle a
conversation (each turn a burst of short messages; turns packed into long
observations) with the same questions; :func:`merged` joins several
conversations into one longer log, :func:`interleaved` holds several as one
group chat, and :func:`windows` cuts a young memory out of one for each
question.

Scoring (pure functions): retrieval, :func:`hits_at_k` and :func:`aggregate`
(recall@k, all/any-evidence@10); abstention, :func:`auroc`; answers,
:func:`token_f1` (SQuAD-style normalisation) and :func:`judge_verdict` (an
LLM judge's CORRECT / WRONG); latencies, :func:`percentile`.
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from jevmem._evaluation_load import (
    _DIA_ID,
    ADVERSARIAL,
    ANSWERABLE,
    CATEGORIES,
    QA,
    TURN_STEP_S,
    Conversation,
    DropReport,
    EvidenceIssue,
    Turn,
    canonical_dia_id,
    load,
    load_samples,
    parse_conversation,
    repair_evidence,
    session_timestamps,
)

__all__ = [
    "ADVERSARIAL",
    "ANSWERABLE",
    "CATEGORIES",
    "QA",
    "RESTYLES",
    "TURN_STEP_S",
    "UPDATE_ABILITIES",
    "Conversation",
    "DropReport",
    "EvidenceIssue",
    "Hits",
    "Turn",
    "aggregate",
    "answer_tokens",
    "as_blocks",
    "as_messages",
    "as_notes",
    "as_pages",
    "as_stream",
    "as_texting",
    "as_untimed",
    "auroc",
    "canonical_dia_id",
    "conversation_inputs",
    "hits_at_k",
    "interleaved",
    "judge_verdict",
    "load",
    "load_samples",
    "merged",
    "parse_conversation",
    "percentile",
    "repair_evidence",
    "session_timestamps",
    "token_f1",
    "turn_ids",
    "update_order",
    "update_pairs_linked",
    "windows",
]

# --- into a memory ---------------------------------------------------------------------------


def conversation_inputs(
    conv: Conversation, *, speaker_in_text: bool = False
) -> tuple[list[str], list[int | None], list[str], list[dict[str, str]]]:
    """Node texts, timestamps, speakers and provenances for one memory, one node per turn.

    Texts are :attr:`Turn.memory_text`, timestamps :attr:`Turn.timestamp`; each
    provenance is ``{"dia_id", "session", "speaker", "sample_id"}``, without
    ``session`` for a turn whose session is not known (:func:`as_stream`).
    ``speaker_in_text`` writes ``"<speaker>: <text>"`` (an experiment: the contract is
    the bare turn text, with the speaker passed separately).
    """
    texts = [
        f"{t.speaker}: {t.memory_text}" if speaker_in_text else t.memory_text for t in conv.turns
    ]
    ts = [t.timestamp for t in conv.turns]
    spk = [t.speaker for t in conv.turns]
    provs = [
        {
            "dia_id": t.dia_id,
            **({"session": str(t.session)} if t.session_known else {}),
            "speaker": t.speaker,
            "sample_id": conv.sample_id,
        }
        for t in conv.turns
    ]
    return texts, ts, spk, provs


#: Where a text may be cut into messages: after a sentence's end and its
#: spaces, or at a line break.
_MESSAGE_CUT = re.compile(r"(?<=[.!?])\s+|\n+")


def as_messages(conv: Conversation, max_chars: int = 160) -> Conversation:
    """The conversation as a messaging chat: each turn sent as a burst of
    short messages (its sentences and lines, packed in order into messages
    of at most ``max_chars`` characters; a longer sentence is one message),
    every message keeping its turn's dia_id, speaker and time, and a shared
    photo's caption on the burst's last message. The questions and their
    evidence are the same, so a message found counts for its turn: a style
    neither development set has, made from both without changing what is
    asked (``bench/locomo_retrieval.py --style messages``)."""
    if max_chars < 1:
        raise ValueError("max_chars must be >= 1")
    turns: list[Turn] = []
    for t in conv.turns:
        pieces = [p.strip() for p in _MESSAGE_CUT.split(t.text)]
        messages: list[str] = []
        for piece in pieces:
            if not piece:
                continue
            if messages and len(messages[-1]) + 1 + len(piece) <= max_chars:
                messages[-1] = f"{messages[-1]} {piece}"
            else:
                messages.append(piece)
        if not messages:
            messages = [t.text]
        for j, text in enumerate(messages):
            caption = t.blip_caption if j == len(messages) - 1 else None
            turns.append(replace(t, text=text, blip_caption=caption, position=len(turns)))
    return Conversation(conv.sample_id, conv.speaker_a, conv.speaker_b, tuple(turns), conv.qas)


def as_blocks(conv: Conversation, max_chars: int = 1200) -> Conversation:
    """The conversation as a log of long observations: each session's turns
    packed in order into blocks of at most ``max_chars`` characters (a
    longer turn is a block of its own), each turn a ``"<speaker>: <text>"``
    line, a block with no speaker of its own (``speaker == ""``) and the
    time of its first turn. A block's dia_id lists its turns' ids joined by
    commas, and :func:`hits_at_k` counts a block found for every turn in it.
    The questions are the same (``bench/locomo_retrieval.py --style blocks``)."""
    if max_chars < 1:
        raise ValueError("max_chars must be >= 1")
    turns: list[Turn] = []
    block: list[Turn] = []

    def close() -> None:
        if block:
            turns.append(
                replace(
                    block[0],
                    dia_id=",".join(t.dia_id for t in block),
                    speaker="",
                    text="\n".join(f"{t.speaker}: {t.memory_text}" for t in block),
                    blip_caption=None,
                    position=len(turns),
                )
            )
            block.clear()

    size = 0
    for t in conv.turns:
        line = len(t.speaker) + 2 + len(t.memory_text)
        if block and (t.session != block[0].session or size + 1 + line > max_chars):
            close()
            size = 0
        size = line if not block else size + 1 + line
        block.append(t)
    close()
    return Conversation(conv.sample_id, conv.speaker_a, conv.speaker_b, tuple(turns), conv.qas)


def as_notes(conv: Conversation) -> Conversation:
    """Each turn as a note with no speaker of its own, ``"<speaker>: <text>"``
    (:func:`as_blocks` with one turn per block): what an agent that stores
    what it saw as plain text keeps."""
    return as_blocks(conv, max_chars=1)


def as_pages(conv: Conversation) -> Conversation:
    """A session's turns in pages of up to 4,000 characters (:func:`as_blocks`):
    a transcript stored in long chunks."""
    return as_blocks(conv, max_chars=4000)


def as_untimed(conv: Conversation) -> Conversation:
    """The turns as released, without their times (no session date, so no
    timestamp): what a framework that keeps a chat's messages but not when
    they were sent hands a memory. The session number stays in each turn's
    provenance; a question about when something happened keeps its
    evidence, though no time in the memory answers it."""
    turns = tuple(replace(t, session_datetime="", session_timestamp=None) for t in conv.turns)
    return Conversation(conv.sample_id, conv.speaker_a, conv.speaker_b, turns, conv.qas)


#: Words as people type them in a quick chat (a fixed list, applied to
#: whole lower-cased words): shortened, or spelt as said.
_TEXTED = {
    "you": "u",
    "your": "ur",
    "youre": "ur",
    "are": "r",
    "because": "cuz",
    "though": "tho",
    "tonight": "tonite",
    "tomorrow": "tmrw",
    "thanks": "thx",
    "please": "pls",
    "probably": "prob",
    "really": "rly",
    "okay": "ok",
    "and": "n",
    "with": "w",
}
_TEXT_WORD = re.compile(r"[a-z]+")
_TEXT_DROPPED = re.compile(r"['\u2019]|[.!?,;:]+(?=\s|$)")


def texted(text: str) -> str:
    """``text`` as typed in a quick chat: lower case, no apostrophes, no
    punctuation at the end of a word, common words shortened (`_TEXTED`)."""
    plain = _TEXT_DROPPED.sub("", text.lower())
    return _TEXT_WORD.sub(lambda m: _TEXTED.get(m.group(0), m.group(0)), plain)


def as_texting(conv: Conversation) -> Conversation:
    """The conversation as a quick messaging chat: each turn a burst of
    short messages (:func:`as_messages`), each typed as :func:`texted` says
    (lower case, no final punctuation, common words shortened), a shared
    photo's caption too. The questions stay as written (a user asks the
    agent in full words)."""
    turns = tuple(
        replace(
            t,
            text=texted(t.text),
            blip_caption=None if t.blip_caption is None else texted(t.blip_caption),
        )
        for t in as_messages(conv).turns
    )
    return Conversation(conv.sample_id, conv.speaker_a, conv.speaker_b, turns, conv.qas)


#: A streamed turn is sent this many seconds after the one before it, plus
#: `_STREAM_S_PER_CHAR` for each of its characters (the time to type it),
#: at most `_STREAM_MAX_GAP_S` later.
_STREAM_GAP_S = 5
_STREAM_S_PER_CHAR = 0.25
_STREAM_MAX_GAP_S = 600


def as_stream(conv: Conversation, *, start_s: int | None = None) -> Conversation:
    """The conversation as a messaging app exports it: the turns as
    released, each with a time of its own, and no session. A session's
    first turn is sent at the session's time (or, with ``start_s``, that
    many seconds after the UTC midnight that starts its day) and each later
    one `_STREAM_GAP_S` seconds after the one before it plus the time to
    type it (`_STREAM_S_PER_CHAR` a character, at most `_STREAM_MAX_GAP_S`
    seconds in all), so a late session runs past midnight; a memory is told
    no session number (:func:`conversation_inputs`), so which turns belong
    together is for it to find. The questions are the same."""
    turns: list[Turn] = []
    sent: int | None = None
    for t in conv.turns:
        if t.session_timestamp is None:
            sent = None
        elif t.index == 0 or sent is None:
            sent = t.session_timestamp
            if start_s is not None:
                sent = sent - sent % 86_400 + start_s
        else:
            gap = _STREAM_GAP_S + _STREAM_S_PER_CHAR * len(t.memory_text)
            sent += int(min(gap, _STREAM_MAX_GAP_S))
        turns.append(replace(t, sent_at=sent, session_known=False))
    return Conversation(conv.sample_id, conv.speaker_a, conv.speaker_b, tuple(turns), conv.qas)


#: The forms a conversation can take, by name: as released (one node per
#: turn), :func:`as_messages`, :func:`as_blocks`, :func:`as_notes`,
#: :func:`as_pages`, :func:`as_untimed`, :func:`as_texting`, :func:`as_stream`
#: (``stream_late``: every session started at 23:55 UTC).
RESTYLES: dict[str, Callable[[Conversation], Conversation]] = {
    "turns": lambda conv: conv,
    "messages": as_messages,
    "blocks": as_blocks,
    "notes": as_notes,
    "pages": as_pages,
    "untimed": as_untimed,
    "texting": as_texting,
    "stream": as_stream,
    # every session started at 23:55 UTC: each runs past midnight
    "stream_late": lambda conv: as_stream(conv, start_s=86_400 - 300),
}


def _renumbered(conv: Conversation, offset: int) -> tuple[list[Turn], list[QA]]:
    """``conv``'s turns with the session part of their dia_ids moved up by
    ``offset`` (``D<session + offset>:<turn>``), and its questions with their
    evidence renumbered alike: ids that stay unique among several
    conversations (:func:`merged`, :func:`interleaved`)."""
    renamed: dict[str, str] = {}
    turns: list[Turn] = []
    for t in conv.turns:
        m = _DIA_ID.fullmatch(t.dia_id)
        if m is None:  # parse_conversation writes every dia_id in this form
            raise ValueError(f"{conv.sample_id}: dia_id {t.dia_id!r} is not D<s>:<t>")
        renamed[t.dia_id] = f"D{int(m.group(1)) + offset}:{int(m.group(2))}"
        turns.append(replace(t, dia_id=renamed[t.dia_id]))
    qas = [replace(q, evidence=tuple(renamed[e] for e in q.evidence)) for q in conv.qas]
    return turns, qas


def merged(convs: Sequence[Conversation], per_memory: int) -> list[Conversation]:
    """Consecutive groups of ``per_memory`` conversations, each group one
    longer log: a memory several times the size of any one development
    conversation, holding one user's many chats (BEAM) or many people's
    (LoCoMo). A conversation's sessions follow the previous one's,
    renumbered so that every dia_id stays unique (``D<session>:<turn>``,
    the turn part as it was), and its questions' evidence is renumbered with
    them; texts, speakers and times are unchanged (so the merged log's
    times interleave where the chats' dates overlap). The group's id joins
    its conversations' ids with ``+``; a last group may be smaller
    (``bench/locomo_retrieval.py --merge N``)."""
    if per_memory < 1:
        raise ValueError("per_memory must be >= 1")
    out: list[Conversation] = []
    for start in range(0, len(convs), per_memory):
        group = convs[start : start + per_memory]
        turns: list[Turn] = []
        qas: list[QA] = []
        offset = 0
        for conv in group:
            renamed, asked = _renumbered(conv, offset)
            start = len(turns)
            turns.extend(
                replace(t, session=t.session + offset, position=start + i)
                for i, t in enumerate(renamed)
            )
            qas.extend(asked)
            offset += max((t.session for t in conv.turns), default=0)
        first = group[0]
        out.append(
            Conversation(
                "+".join(c.sample_id for c in group),
                first.speaker_a,
                first.speaker_b,
                tuple(turns),
                tuple(qas),
            )
        )
    return out


def interleaved(
    convs: Sequence[Conversation], per_memory: int, *, threads_apart: bool = False
) -> list[Conversation]:
    """Consecutive groups of ``per_memory`` conversations, each group one
    group chat: the k-th session of every conversation in the group is held
    together, as one session on the first conversation's k-th date (a
    session past the first one's last, a day after the one before it), and
    their turns take turns (the first conversation's first turn, the
    second's first turn, ..., then each one's second turn), so that the
    turn before a node is often another thread's. dia_ids are renumbered as
    :func:`merged` does, so they stay unique and every question keeps its
    gold turns; texts and speakers are unchanged. Dates move with the
    sessions, so a text's dates may no longer fit its new date, and a
    question's dates its conversation's (``bench/locomo_retrieval.py
    --interleave N``).

    ``threads_apart``: each conversation's turns keep a session of their own
    (the session part of their new dia_id), as a chat app that keeps threads
    (or an agent serving several users at once) tells them apart; the turns
    still take turns on one timeline (``--threads-apart``)."""
    if per_memory < 1:
        raise ValueError("per_memory must be >= 1")
    out: list[Conversation] = []
    for start in range(0, len(convs), per_memory):
        group = convs[start : start + per_memory]
        first = group[0]
        dates: dict[int, tuple[str, int | None]] = {}
        for t in first.turns:
            dates.setdefault(t.session, (t.session_datetime, t.session_timestamp))
        sessions: dict[int, list[list[Turn]]] = {}
        qas: list[QA] = []
        offset = 0
        for j, conv in enumerate(group):
            renamed, asked = _renumbered(conv, offset)
            for t in renamed:
                own = t.session + offset if threads_apart else None
                sessions.setdefault(t.session, [[] for _ in group])[j].append(
                    t if own is None else replace(t, session=own)
                )
            qas.extend(asked)
            offset += max((t.session for t in conv.turns), default=0)
        turns: list[Turn] = []
        last: tuple[str, int | None] = ("", None)
        for k in sorted(sessions):
            if k in dates:
                last = dates[k]
            elif last[1] is not None:  # a session the first conversation has not
                last = ("", last[1] + 86_400)
            threads = sessions[k]
            index = 0
            for i in range(max(len(th) for th in threads)):
                for th in threads:
                    if i < len(th):
                        turns.append(
                            replace(
                                th[i],
                                session=th[i].session if threads_apart else k,
                                index=index,
                                position=len(turns),
                                session_datetime=last[0],
                                session_timestamp=last[1],
                            )
                        )
                        index += 1
        out.append(
            Conversation(
                "|".join(c.sample_id for c in group),
                first.speaker_a,
                first.speaker_b,
                tuple(turns),
                tuple(qas),
            )
        )
    return out


def windows(conv: Conversation, size: int) -> list[Conversation]:
    """Young memories: for each question, the ``size`` consecutive turns of
    ``conv`` that hold all its evidence, as a conversation of its own with
    that one question (same id, speakers and turns as they were). Where
    several windows hold the evidence, one is drawn at random; a question
    about something never said gets any ``size`` turns. Answerable questions
    with no evidence, or with evidence spread over more than ``size`` turns,
    are left out. Drawn from a generator seeded by the conversation's id and
    ``size``, so every run makes the same windows
    (``bench/locomo_retrieval.py --window N``, ``bench/train_controller.py
    --windows``): every memory starts small, and the development sets'
    memories are all hundreds of turns long."""
    if size < 1:
        raise ValueError("size must be >= 1")
    rng = random.Random(f"{conv.sample_id}/{size}")
    at = {t.dia_id: i for i, t in enumerate(conv.turns)}
    n = len(conv.turns)
    out: list[Conversation] = []
    for qa in conv.qas:
        # one draw per question, kept or not, so a window does not depend
        # on which questions before it were left out
        u = rng.random()
        if qa.category == ADVERSARIAL:
            start = int(u * (max(n - size, 0) + 1))
        else:
            held = [at[e] for e in qa.evidence if e in at]
            if not held:
                continue
            lo, hi = max(0, max(held) - size + 1), min(min(held), max(n - size, 0))
            if hi < lo:
                continue
            start = lo + int(u * (hi - lo + 1))
        turns = conv.turns[start : start + size]
        out.append(Conversation(conv.sample_id, conv.speaker_a, conv.speaker_b, turns, (qa,)))
    return out


def turn_ids(dia_id: str) -> list[str]:
    """The turns a node's dia_id stands for: itself, or each of a block's
    comma-joined ids (:func:`as_blocks`)."""
    return dia_id.split(",")


#: The abilities whose questions ask about a fact that changed (BEAM's
#: ``beam_type``): their gold turns hold the old statement and the new one.
UPDATE_ABILITIES = ("knowledge_update", "contradiction_resolution")


def update_pairs_linked(
    links: Iterable[tuple[str, str]],
    qas: Iterable[QA],
    abilities: Sequence[str] = UPDATE_ABILITIES,
) -> dict[str, tuple[int, int]]:
    """How well a memory's supersedes links find the changes a file's
    questions ask about: per ability in ``abilities``, (the questions with
    two or more gold turns, how many of them have two of their gold turns
    joined by a link, in either direction). ``links`` are (new, old) dia ids
    of linked nodes, a block's comma-joined (:func:`turn_ids`)."""
    joined: set[tuple[str, str]] = set()
    for new, old in links:
        for a in turn_ids(new):
            for b in turn_ids(old):
                if a != b:
                    joined.add((a, b))
                    joined.add((b, a))
    out = {name: (0, 0) for name in abilities}
    for qa in qas:
        if qa.ability not in out or len(qa.evidence) < 2:
            continue
        asked, linked = out[qa.ability]
        hit = any((a, b) in joined for a in qa.evidence for b in qa.evidence if a != b)
        out[qa.ability] = (asked + 1, linked + int(hit))
    return out


def update_order(
    rows: Iterable[tuple[Sequence[str | None], Sequence[str]]],
) -> dict[str, int]:
    """Whether a search ranks the fact that holds above the one it replaced:
    over (retrieved dia ids, gold dia ids) rows with two or more gold turns,
    how many rank the newest gold turn (the last in the conversation) above
    the oldest, the oldest above the newest, and the newest first. A turn
    not retrieved ranks below every retrieved one; two in one block tie
    (neither counts)."""
    out = {"questions": 0, "newest_first": 0, "oldest_first": 0, "newest_at_1": 0}
    for retrieved, evidence in rows:
        if len(evidence) < 2:
            continue
        ordered = sorted(evidence, key=_turn_key)
        rank: dict[str, int] = {}
        for i, item in enumerate(retrieved):
            for t in turn_ids(item or ""):
                rank.setdefault(t, i)
        absent = len(retrieved) + 1  # below every retrieved item
        newest = rank.get(ordered[-1], absent)
        oldest = rank.get(ordered[0], absent)
        out["questions"] += 1
        out["newest_first"] += int(newest < oldest)
        out["oldest_first"] += int(oldest < newest)
        out["newest_at_1"] += int(newest == 0)
    return out


def _turn_key(dia_id: str) -> tuple[int, int]:
    """A canonical dia id's place in its conversation: (session, turn)."""
    m = _DIA_ID.fullmatch(dia_id)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


# --- retrieval scoring -----------------------------------------------------------------------


@dataclass(frozen=True)
class Hits:
    """Gold ids found in a top-k list: ``found`` of ``gold`` (``gold == 0``: nothing to find)."""

    found: int
    gold: int

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else math.nan

    @property
    def all(self) -> bool:
        return self.gold > 0 and self.found == self.gold

    @property
    def any(self) -> bool:
        return self.found > 0


def hits_at_k(retrieved: Sequence[str | None], gold: Iterable[str], k: int) -> Hits:
    """Gold dia_ids among the first ``k`` retrieved (None: a node without a
    dia_id; ``"D1:3,D1:4"``: a node that holds both turns, see :func:`as_blocks`)."""
    g = set(gold)
    top = {d for r in retrieved[:k] if r is not None for d in turn_ids(r)}
    return Hits(len(g & top), len(g))


def aggregate(
    rows: Sequence[tuple[Sequence[str | None], Sequence[str]]], ks: Sequence[int] = (5, 10, 20)
) -> dict[str, float | int | None]:
    """Mean recall@k, all-evidence@10 and any-evidence@10 over (retrieved, gold) rows.

    Rows without gold are skipped (counted in ``no_gold``); ``n`` is the number scored.
    """
    scored = [(r, g) for r, g in rows if g]
    out: dict[str, float | int | None] = {}
    for k in ks:
        vals = [hits_at_k(r, g, k).recall for r, g in scored]
        out[f"recall@{k}"] = sum(vals) / len(vals) if vals else None
    h10 = [hits_at_k(r, g, 10) for r, g in scored]
    out["all_evidence@10"] = sum(h.all for h in h10) / len(h10) if h10 else None
    out["any_evidence@10"] = sum(h.any for h in h10) / len(h10) if h10 else None
    out["n"] = len(scored)
    out["no_gold"] = len(rows) - len(scored)
    return out


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(score of a random positive > score of a random negative), ties counted half.

    The Mann-Whitney U statistic over ``len(positives) * len(negatives)``, from
    midranks in O(n log n). None when either side is empty.
    """
    n_pos, n_neg = len(positives), len(negatives)
    if n_pos == 0 or n_neg == 0:
        return None
    labelled = sorted([(float(s), 1) for s in positives] + [(float(s), 0) for s in negatives])
    rank_sum = 0.0  # sum of the positives' 1-based midranks
    i = 0
    while i < len(labelled):
        j = i
        while j < len(labelled) and labelled[j][0] == labelled[i][0]:
            j += 1
        midrank = (i + 1 + j) / 2.0
        rank_sum += midrank * sum(lab for _, lab in labelled[i:j])
        i = j
    u = rank_sum - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


# --- answer scoring --------------------------------------------------------------------------

_VERDICT = re.compile(r"\b(CORRECT|WRONG)\b", re.I)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def judge_verdict(reply: str) -> bool | None:
    """An LLM judge's reply read as a verdict: True for CORRECT, False for WRONG
    (the first of the two words in it, any case), None when it has neither."""
    m = _VERDICT.search(reply)
    return None if m is None else m.group(1).upper() == "CORRECT"


def answer_tokens(text: str) -> list[str]:
    """SQuAD-style normalisation: lower case, no punctuation, no articles, split on spaces."""
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split()


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the :func:`answer_tokens` of a predicted and a gold answer (1.0 when both
    are empty, 0.0 when only one is)."""
    p, g = answer_tokens(prediction), answer_tokens(gold)
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


# --- latencies -------------------------------------------------------------------------------


def percentile(xs: Sequence[float], q: float) -> float | None:
    """The ``q``-quantile (0..1) by linear interpolation between order statistics."""
    if not xs:
        return None
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)

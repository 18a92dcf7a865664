"""Answers from evidence (SPEC §0, §6): search, an evidence pack, one generation, citations.

``Memory.answer`` and ``Memory.answer_batch`` delegate here. One answer is:

1. a search (any mode; the full mode's last assessment gives ``sufficiency``);
2. abstention, by default: no evidence, or ``sufficiency`` below
   ``abstain_below``, returns the prompt's abstention text without calling
   the model (the controller already said the memory does not hold it);
   modes without an assessment (lexical, anchors, and traversal, whose
   sufficiency is a neutral placeholder) always ask the model;
3. an evidence pack written for the model: one block per evidence item,
   with a short id to cite (``E1``, ``E2``...), who said it, when it was
   recorded, the time references in it resolved against that time, and the
   supersedes links between the items;
4. one generation through a :class:`~jevmem.system_two.SystemTwo`;
5. the cited ids parsed from the reply and mapped back to node ids: only ids
   of the pack are kept, so an answer's citations are always among the
   evidence it was given.

Prompts are data (:class:`AnswerPrompt`, :class:`SummaryPrompt`): versioned,
written for this project, replaceable by the caller; every answer's trace
names the prompt version and the pack format it was made with.
"""

from __future__ import annotations

import math
import re
import string
import time
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from jevmem.errors import InvalidConfigError, InvalidInputError, InvalidTypeError, SystemTwoError
from jevmem.system_two import Completion, Message, SystemTwo

if TYPE_CHECKING:
    from jevmem._core import Node
    from jevmem.memory import EvidenceItem, Memory, SearchResult

__all__ = [
    "DEFAULT_ABSTAIN_BELOW",
    "DEFAULT_ANSWER_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "PACK_VERSION",
    "Answer",
    "AnswerPrompt",
    "EvidencePack",
    "PreparedAnswer",
    "SummaryPrompt",
    "SystemTwoSummariser",
    "answer_batch",
    "estimate_tokens",
    "evidence_pack",
    "generate",
    "parse_reply",
    "prepare",
]

#: The evidence pack's layout (see `evidence_pack`); in every answer's trace.
PACK_VERSION = "pack-3"
#: Abstain when the search's sufficiency is below this. The local
#: controller's sufficiency is 0.5 when undecided and near 0 when the query's
#: content is asserted only about someone else; on LoCoMo dev, 0.2 refuses
#: 3.5% of the answerable questions and 54% of the adversarial ones (a cut
#: kept where it refuses at most ~5% of answerable ones, not the best-scoring
#: one; the held-out conversations were not looked at).
DEFAULT_ABSTAIN_BELOW = 0.2


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def _check_template(name: str, template: str, fields: Mapping[str, str]) -> set[str]:
    """The fields ``template`` really uses (``{{x}}`` is literal text, not a field).

    Only plain ``{field}`` replacement fields among ``fields`` are allowed, with
    an optional conversion and a literal format spec: attribute or index
    access (``{evidence.x}``, ``{question[0]}``), positional fields (``{}``,
    ``{0}``), unknown names and fields nested in a format spec are refused,
    so a prompt that builds formats every time."""
    if not isinstance(template, str):
        raise InvalidTypeError(f"{name} must be a string")
    allowed = ", ".join("{" + f + "}" for f in sorted(fields)) or "none"
    used: set[str] = set()
    try:
        for _text, fname, spec, _conv in string.Formatter().parse(template):
            if fname is None:
                continue
            if fname not in fields:
                raise InvalidConfigError(
                    f"{name}: {{{fname}}} is not a template field (fields: {allowed})"
                )
            if spec and ("{" in spec or "}" in spec):
                raise InvalidConfigError(f"{name}: {{{fname}}} has a field in its format spec")
            used.add(fname)
        template.format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise InvalidConfigError(
            f"{name} is not a valid template (fields: {allowed}): {exc!r}"
        ) from None
    return used


@dataclass(frozen=True)
class AnswerPrompt:
    """The answer prompt: what the model is told, as data.

    ``system`` may use ``{abstain_text}``; ``user`` must use ``{evidence}``
    and ``{question}`` and may use ``{now}`` (the query time, or "not
    given"). ``evidence_order`` lays the pack out by observation time
    (``"time"``, a conversation read in order) or by rank (``"rank"``).
    Items longer than ``max_item_chars`` are cut to that many characters
    around their best-matching passage (see `evidence_pack`). Change ``version`` whenever the wording changes: it is in
    every trace, so results stay attributable to the prompt that made them.
    """

    version: str
    system: str
    user: str
    abstain_text: str = "I don't know."
    evidence_order: Literal["time", "rank"] = "time"
    max_item_chars: int = 2000
    #: the most the answer may run to, in tokens
    max_tokens: int = 200

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not self.version.strip():
            raise InvalidConfigError("a prompt needs a non-empty version")
        if not isinstance(self.abstain_text, str) or not self.abstain_text.strip():
            raise InvalidConfigError("abstain_text must be a non-empty string")
        if not _norm(self.abstain_text):
            # a reply is an abstention when it starts with this text, compared
            # without case and punctuation: nothing left would match every reply
            raise InvalidConfigError(
                f"abstain_text must contain a letter or digit, got {self.abstain_text!r:.40}"
            )
        _check_template("system", self.system, {"abstain_text": ""})
        used = _check_template("user", self.user, {"evidence": "", "question": "", "now": ""})
        for needed in ("evidence", "question"):
            if needed not in used:
                raise InvalidConfigError(f"the user template must contain {{{needed}}}")
        if self.evidence_order not in ("time", "rank"):
            raise InvalidConfigError(
                f"evidence_order must be 'time' or 'rank', got {self.evidence_order!r}"
            )
        for name in ("max_item_chars", "max_tokens"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise InvalidConfigError(f"{name} must be a positive integer, got {v!r}")

    def messages(self, question: str, evidence: str, now: str) -> list[Message]:
        return [
            {"role": "system", "content": self.system.format(abstain_text=self.abstain_text)},
            {
                "role": "user",
                "content": self.user.format(evidence=evidence, question=question, now=now),
            },
        ]


DEFAULT_ANSWER_PROMPT = AnswerPrompt(
    version="jevmem-answer-1",
    system=(
        "You answer a question from memory notes: things said in past conversations "
        "or written down earlier, each one numbered.\n"
        "Every note says when it was recorded and, when known, who said it. Where a "
        "note mentions a time ('yesterday', 'last May', 'next Friday'), the date it "
        "stands for is worked out for you against the time the note was recorded: when "
        "the question asks when something happened, give that date, not the recording "
        "date.\n"
        "Rules:\n"
        "- Use only the notes. Do not guess and do not add what you know from elsewhere.\n"
        "- Check who the question is about: a note about somebody else does not "
        "answer it.\n"
        "- Be brief: a short phrase or one sentence, with names, dates and numbers as "
        "the notes give them.\n"
        "- If the notes do not answer the question, reply exactly: {abstain_text}\n"
        '- Finish with one last line "SOURCES:" and the ids of the notes you used, '
        'e.g. "SOURCES: E2, E5", or "SOURCES: none".'
    ),
    user="Memory notes:\n\n{evidence}\n\nCurrent time: {now}\n\nQuestion: {question}",
)


@dataclass(frozen=True)
class SummaryPrompt:
    """The prompt of approved summaries (the consolidation escalation, SPEC §2).

    ``user`` must use ``{sources}``; it gets the source observations, one per
    block, oldest first. ``system`` is a template without fields: a brace is
    written ``{{`` / ``}}``, as in the answer prompt."""

    version: str
    system: str
    user: str
    max_tokens: int = 300

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not self.version.strip():
            raise InvalidConfigError("a prompt needs a non-empty version")
        _check_template("system", self.system, {})
        if "sources" not in _check_template("user", self.user, {"sources": ""}):
            raise InvalidConfigError("the user template must contain {sources}")
        if not (
            isinstance(self.max_tokens, int)
            and not isinstance(self.max_tokens, bool)
            and self.max_tokens >= 1
        ):
            raise InvalidConfigError(
                f"max_tokens must be a positive integer, got {self.max_tokens!r}"
            )


DEFAULT_SUMMARY_PROMPT = SummaryPrompt(
    version="jevmem-summary-1",
    system=(
        "You combine a few related memory notes into one note that can stand in for "
        "them when someone searches the memory later. Keep every name, date, number "
        "and who said what. Add nothing the notes do not say; where they disagree, "
        "say so rather than choosing. Write plain sentences, no heading, no list, "
        "at most about 80 words."
    ),
    user="Notes, oldest first:\n\n{sources}\n\nThe combined note:",
)


# ---- the evidence pack ------------------------------------------------------------


def _when(ts: int | None) -> str:
    if ts is None:
        return "time unknown"
    try:
        d = datetime.fromtimestamp(ts, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "time unknown"
    return f"{d.day} {d.strftime('%B %Y')}, {d.strftime('%H:%M')} UTC ({d.strftime('%A')})"


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: about four characters a token
    (English text under GPT-style BPE vocabularies)."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class EvidencePack:
    """The evidence as the model reads it: ``text``, and each label's node id."""

    text: str
    #: label ("E1") -> node id, in the order the labels were handed out
    labels: dict[str, int]

    @property
    def tokens_estimate(self) -> int:
        return estimate_tokens(self.text)


_QUERY_WORD = re.compile(r"\w{2,}")
#: Every character `str.splitlines` breaks a line at (a model may read any as one).
_BREAK = r"[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]"
_BREAKS = re.compile(_BREAK + "+")
#: A line of stored text that starts like a block's header (``[E3]``) or
#: one of its notes (``- replaced by E4``, ``- "yesterday" = 7 May 2023``);
#: the match ends where the escaping backslash goes. (A plain bullet is left.)
_HEADER_LIKE = re.compile(
    r"(?:^|(?<=" + _BREAK + r"))[^\S\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]*"
    r"(?=\[E\d+\]|-\s*(?:replaces|replaced\s+by)\s+E\d|-\s*\"[^\"\n]*\"\s*=)",
    re.I,
)


def _one_line(value: object) -> str:
    """A header field with its line breaks folded to spaces: a speaker or
    session name cannot add a line to the pack."""
    return _BREAKS.sub(" ", str(value))


def _escape_headers(text: str, start: int, end: int) -> tuple[str, int, int]:
    """``text`` with a backslash before each line that starts like a block
    header (``\\[E1]``) or one of its notes (``\\- replaced by E2``), so stored
    text cannot forge a part of the pack; and ``[start, end)`` moved to the
    same characters."""
    at = [m.end() for m in _HEADER_LIKE.finditer(text)]
    if not at:
        return text, start, end
    pieces, prev = [], 0
    for i in at:
        pieces += [text[prev:i], "\\"]
        prev = i
    pieces.append(text[prev:])
    return "".join(pieces), start + bisect_left(at, start), end + bisect_left(at, end)


def _term_centre(text: str, start: int, end: int, width: int, query: str) -> int:
    """The middle of the ``width``-character stretch of ``text[start:end]`` that
    holds the most of the query's words (each weighted by its rarity there, so
    "the" counts for little); ``start`` when none of them occurs."""
    words = sorted({w.casefold() for w in _QUERY_WORD.findall(query)}, key=len, reverse=True)
    if not words:
        return start
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.I)
    hits = [(m.start(), m.end(), m.group().casefold()) for m in pattern.finditer(text, start, end)]
    if not hits:
        return start
    total: dict[str, int] = {}
    for _, _, w in hits:
        total[w] = total.get(w, 0) + 1
    inside: dict[str, int] = {}
    score, best, best_span, left = 0.0, -1.0, (start, start), 0
    for right, (_, h_end, w) in enumerate(hits):
        inside[w] = inside.get(w, 0) + 1
        if inside[w] == 1:
            score += 1.0 / total[w]
        while left < right and h_end - hits[left][0] > width:
            lw = hits[left][2]
            inside[lw] -= 1
            if not inside[lw]:
                score -= 1.0 / total[lw]
            left += 1
        if score > best + 1e-9:
            best, best_span = score, (hits[left][0], h_end)
    return (best_span[0] + best_span[1]) // 2


def _item_text(item: EvidenceItem, max_chars: int, query: str = "") -> str:
    """At most ``max_chars`` characters of the item's text, with "..." where it was cut."""
    start, end = item.passage
    if not 0 <= start < end <= len(item.text):
        start, end = 0, len(item.text)
    # escaped before it is cut, so the escapes count within the cap
    text, start, end = _escape_headers(item.text, start, end)
    n = len(text)
    if n <= max_chars:
        return text
    if end - start > max_chars:
        # the passage itself is over the cap (a cap below the embedder's window,
        # or a long run of few tokens): keep the part around the query's words
        centre = _term_centre(text, start, end, max_chars, query)
        lo = min(max(start, centre - max_chars // 2), end - max_chars)
    else:
        # the whole passage, widened evenly to the cap
        lo = max(0, min(start - (max_chars - (end - start)) // 2, n - max_chars))
    hi = lo + max_chars
    return ("..." if lo > 0 else "") + text[lo:hi] + ("..." if hi < n else "")


def evidence_pack(
    evidence: Sequence[EvidenceItem],
    prompt: AnswerPrompt = DEFAULT_ANSWER_PROMPT,
    query: str = "",
) -> EvidencePack:
    """Lay the evidence out for the model (format ``PACK_VERSION``).

    One block per item::

        [E1] recorded 8 May 2023, 13:56 UTC (Monday); said by Caroline; session 1
        I went to the support group yesterday.
        - "yesterday" = 7 May 2023
        - replaced by E4

    Labels follow the pack's order (``prompt.evidence_order``); a supersedes
    link is shown only between items of the pack. An item's text is at most
    ``prompt.max_item_chars`` characters, plus "..." at each end where it
    was cut: the best-matching passage widened to the cap, or, when that
    passage alone is longer, the cap's worth of it around ``query``'s words.
    Stored text cannot forge a block: header fields and time references have
    their line breaks folded to spaces, and a line of an item's text that
    starts like a header or one of its notes gets a backslash before it
    (``\\[E3]``, ``\\- replaced by E4``)."""
    items = list(evidence)
    if prompt.evidence_order == "time":
        # stable: items without a time keep their rank order, after the dated ones
        items.sort(key=lambda e: (e.timestamp is None, e.timestamp or 0))
    labels = {f"E{i}": e.id for i, e in enumerate(items, 1)}
    label_of = {nid: lab for lab, nid in labels.items()}
    blocks = []
    for lab, e in zip(labels, items, strict=True):
        head = [f"[{lab}] recorded {_when(e.timestamp)}"]
        prov = e.provenance
        if prov.get("kind") == "summary":
            head.append("a summary of earlier notes")
        if prov.get("speaker"):
            head.append(f"said by {_one_line(prov['speaker'])}")
        if prov.get("session"):
            head.append(f"session {_one_line(prov['session'])}")
        lines = ["; ".join(head), _item_text(e, prompt.max_item_chars, query)]
        for ref in e.time_refs:
            resolved = ref.get("resolved")
            if resolved:
                lines.append(f'- "{_one_line(ref.get("text", ""))}" = {_one_line(resolved)}')
        for name, ids in (("replaces", e.supersedes), ("replaced by", e.superseded_by)):
            inside = [label_of[i] for i in ids if i in label_of]
            if inside:
                lines.append(f"- {name} {', '.join(inside)}")
        blocks.append("\n".join(lines))
    return EvidencePack("\n\n".join(blocks) if blocks else "(no notes)", labels)


# ---- parsing the reply --------------------------------------------------------------

_SOURCES_LINE = re.compile(r"^[\s*_#>-]*(?:sources?|citations?|cited)[\s*_]*[:\-]", re.I | re.M)
#: A marker at the reply's end, after a sentence's punctuation or in brackets
#: ("Paris. Sources: E2", "Paris (citations: E1, E2)"): only ids, "none",
#: separators and punctuation may follow it, so a sentence about sources is kept.
_SOURCES_TAIL = re.compile(
    r"(?:(?<=[.!?])|[,;(\[])[\s*_]*(?:sources?|citations?)[\s*_]*:"
    r"(?:\s|[,;/&.!?*_()\[\]-]|E\d{1,6}\b|none\b|and\b)*\Z",
    re.I,
)
_LABEL = re.compile(r"\bE(\d{1,6})\b")
# (a match starts where a run of white space starts: tried at every space of
# a long run it read the run again each time, seconds for 20,000 spaces)
_INLINE = re.compile(r"(?<!\s)\s*[\[(]\s*(E\d{1,6}(?:\s*[,;]\s*E\d{1,6})*)\s*[\])]")
_ANSWER_PREFIX = re.compile(r"^\s*(?:\*\*)?answer(?:\*\*)?\s*:\s*", re.I)


def parse_reply(reply: str, pack: EvidencePack) -> tuple[str, tuple[int, ...], tuple[str, ...]]:
    """(answer text, cited node ids, cited labels not in the pack).

    Citations come from the last ``SOURCES:`` line, or a ``Sources:`` marker
    ending the reply (after a sentence's end or in brackets, followed only by
    ids); without either, from inline markers (``[E2]``, ``(E2, E5)``),
    which are then taken out of the text.
    Node ids are unique, in citation order, and always ids of ``pack``."""
    lines = list(_SOURCES_LINE.finditer(reply))
    tail = _SOURCES_TAIL.search(reply)
    at = max(lines[-1].start() if lines else -1, tail.start() if tail else -1)
    if at >= 0:
        body, cites = reply[:at], reply[at:]
        labels = [f"E{int(n)}" for n in _LABEL.findall(cites)]
    else:
        labels = [f"E{int(n)}" for g in _INLINE.findall(reply) for n in _LABEL.findall(g)]
        body = _INLINE.sub("", reply)
    text = _ANSWER_PREFIX.sub("", body.strip()).strip()
    cited: list[int] = []
    unknown: list[str] = []
    for lab in labels:
        nid = pack.labels.get(lab)
        if nid is None:
            if lab not in unknown:
                unknown.append(lab)
        elif nid not in cited:
            cited.append(nid)
    return text, tuple(cited), tuple(unknown)


# ---- the answer ------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What ``Memory.answer`` returns.

    ``cited`` are node ids, always among ``search.evidence``; ``abstained``
    is true when no answer was given (before the model, by the sufficiency
    rule, or by the model replying the prompt's abstention text). ``trace``
    holds the prompt and pack versions, why it abstained, the pack's size,
    the model's token counts and the time of each step."""

    query: str
    text: str
    cited: tuple[int, ...]
    abstained: bool
    search: SearchResult
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def cited_evidence(self) -> list[EvidenceItem]:
        """The cited evidence items, in citation order."""
        by_id = {e.id: e for e in self.search.evidence}
        return [by_id[i] for i in self.cited]


def _now_text(now_ts: int | None) -> str:
    return "not given" if now_ts is None else _when(now_ts)


def resolve_system_two(system_two: object, memory: Memory) -> SystemTwo:
    """The client to use: the argument, the memory's ``system_two``, else one
    built from the environment (see `jevmem.system_two`)."""
    chosen = system_two if system_two is not None else getattr(memory, "system_two", None)
    if chosen is None:
        from jevmem.system_two import ChatCompletionsClient

        chosen = ChatCompletionsClient()  # raises InvalidConfigError without a model
        memory.system_two = chosen
    if not callable(getattr(chosen, "complete", None)):
        raise InvalidTypeError(
            f"system_two must have a complete(messages) method, got {type(chosen).__name__}"
        )
    return chosen  # type: ignore[return-value]


def _check_options(
    abstain: object, abstain_below: object, prompt: object, concurrency: object
) -> None:
    if not isinstance(abstain, bool):
        raise InvalidTypeError(f"abstain must be True or False, got {abstain!r:.40}")
    if not (
        isinstance(abstain_below, int | float)
        and not isinstance(abstain_below, bool)
        and 0.0 <= abstain_below <= 1.0
    ):
        raise InvalidInputError(f"abstain_below must be in [0, 1], got {abstain_below!r:.40}")
    if not isinstance(prompt, AnswerPrompt):
        raise InvalidTypeError(f"prompt must be an AnswerPrompt, got {type(prompt).__name__}")
    if not (
        isinstance(concurrency, int) and not isinstance(concurrency, bool) and concurrency >= 1
    ):
        raise InvalidInputError(f"concurrency must be a positive integer, got {concurrency!r:.40}")


@dataclass(frozen=True)
class PreparedAnswer:
    """An answer up to the model call: the search, the abstention decision,
    the pack and the messages. `generate` (or ``finish`` with a completion
    made elsewhere) turns it into an :class:`Answer`. Kept apart so a caller
    can search under a memory's lock and call the model outside it."""

    search: SearchResult
    prompt: AnswerPrompt
    #: "no_evidence" / "sufficiency" when it abstains before the model, else None
    abstained_by: str | None
    pack: EvidencePack | None
    messages: list[Message] | None
    trace: dict[str, Any]

    @property
    def needs_model(self) -> bool:
        return self.messages is not None

    def finish(self, done: Completion | None, generate_s: float = 0.0) -> Answer:
        trace = dict(self.trace)
        res, prompt = self.search, self.prompt
        if self.messages is None or self.pack is None:
            trace.update(
                abstained_by=self.abstained_by,
                model_called=False,
                prompt_tokens=0,
                completion_tokens=0,
                generate_s=0.0,
                pack_items=0,
            )
            return Answer(res.query, prompt.abstain_text, (), True, res, trace)
        if not isinstance(done, Completion) or not isinstance(done.text, str):
            raise SystemTwoError(f"the model returned {type(done).__name__}, not a Completion")
        q0 = time.perf_counter()
        text, cited, unknown = parse_reply(done.text, self.pack)
        refusal = _norm(prompt.abstain_text)
        said = _norm(text)
        # the reply starts with the abstention's words, whole words: "No."
        # is not the start of "November 12"
        said_no = bool(refusal) and (said == refusal or said.startswith(refusal + " "))
        if said_no:
            cited = ()
        trace.update(
            abstained_by="model" if said_no else None,
            model_called=True,
            pack_items=len(self.pack.labels),
            pack_chars=len(self.pack.text),
            pack_tokens_estimate=self.pack.tokens_estimate,
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            generate_s=generate_s,
            completion=done.trace(),
            unknown_citations=list(unknown),
            labels=dict(self.pack.labels),
            reply=done.text,
            parse_s=time.perf_counter() - q0,
        )
        return Answer(res.query, text, cited, said_no, res, trace)


#: Search modes whose sufficiency is no judgement: never a reason to abstain.
_UNJUDGED = frozenset({"traversal"})


def prepare(
    result: SearchResult,
    *,
    abstain: bool = True,
    abstain_below: float = DEFAULT_ABSTAIN_BELOW,
    prompt: AnswerPrompt | None = None,
    now_ts: int | None = None,
) -> PreparedAnswer:
    """The abstention decision, pack and messages for one search result."""
    prompt = DEFAULT_ANSWER_PROMPT if prompt is None else prompt
    _check_options(abstain, abstain_below, prompt, 1)
    why: str | None = None
    # the traversal ablation's sufficiency is its neutral answer (signals
    # only, no controller judgement), not an assessment: like the modes
    # without one (lexical, anchors), it always asks the model
    judged = None if result.trace.get("mode") in _UNJUDGED else result.sufficiency
    if abstain and not result.evidence:
        why = "no_evidence"
    elif abstain and judged is not None and judged < abstain_below:
        why = "sufficiency"
    trace: dict[str, Any] = {
        "prompt_version": prompt.version,
        "pack_version": PACK_VERSION,
        "sufficiency": result.sufficiency,
        "abstain": abstain,
        "abstain_below": abstain_below,
        "search_s": result.trace.get("total_elapsed_s", result.trace.get("elapsed_s")),
        "pack_s": 0.0,
    }
    if why is not None:
        return PreparedAnswer(result, prompt, why, None, None, trace)
    p0 = time.perf_counter()
    pack = evidence_pack(result.evidence, prompt, result.query)
    msgs = prompt.messages(result.query, pack.text, _now_text(now_ts))
    trace["pack_s"] = time.perf_counter() - p0
    return PreparedAnswer(result, prompt, None, pack, msgs, trace)


def generate(
    prepared: Sequence[PreparedAnswer], system_two: SystemTwo, concurrency: int = 4
) -> list[Answer]:
    """One model call per prepared answer that needs one, up to
    ``concurrency`` at a time; answers in input order. The first
    :class:`~jevmem.errors.SystemTwoError` is raised once all calls ended."""
    if not (
        isinstance(concurrency, int) and not isinstance(concurrency, bool) and concurrency >= 1
    ):
        raise InvalidInputError(f"concurrency must be a positive integer, got {concurrency!r:.40}")

    def call(p: PreparedAnswer) -> Answer:
        assert p.messages is not None
        g0 = time.perf_counter()
        done = system_two.complete(p.messages, max_tokens=p.prompt.max_tokens)
        return p.finish(done, time.perf_counter() - g0)

    todo = [i for i, p in enumerate(prepared) if p.needs_model]
    made: dict[int, Answer] = {}
    if len(todo) <= 1 or concurrency == 1:
        for i in todo:
            made[i] = call(prepared[i])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(concurrency, len(todo))) as pool:
            futures = {i: pool.submit(call, prepared[i]) for i in todo}
        for i, f in futures.items():
            made[i] = f.result()
    return [made[i] if i in made else p.finish(None) for i, p in enumerate(prepared)]


def answer_batch(
    memory: Memory,
    queries: Sequence[str],
    k: int = 10,
    *,
    system_two: SystemTwo | None = None,
    abstain: bool = True,
    abstain_below: float = DEFAULT_ABSTAIN_BELOW,
    prompt: AnswerPrompt | None = None,
    now: Any | None = None,
    mode: str = "full",
    scope: Mapping[str, str] | None = None,
    filter: Mapping[str, Any] | None = None,
    concurrency: int = 4,
) -> list[Answer]:
    """See ``Memory.answer_batch``."""
    from jevmem import _validate

    prompt = DEFAULT_ANSWER_PROMPT if prompt is None else prompt
    _check_options(abstain, abstain_below, prompt, concurrency)
    client = resolve_system_two(system_two, memory)
    now_ts = _validate.timestamp(now, "now")  # as the search reads it
    results = memory.search_batch(
        queries,
        k,
        now=now,
        mode=mode,  # type: ignore[arg-type]
        scope=scope,
        filter=filter,
    )
    prepared = [
        prepare(r, abstain=abstain, abstain_below=abstain_below, prompt=prompt, now_ts=now_ts)
        for r in results
    ]
    return generate(prepared, client, concurrency)


# ---- approved summaries -----------------------------------------------------------


class SystemTwoSummariser:
    """The consolidation escalation's summariser (SPEC §2) on a System Two.

    ``Memory(summariser=SystemTwoSummariser(client))`` (or plainly
    ``Memory(summariser=client)``): when the controller approves a merge or
    promote (probability >= 0.85, contradiction < 0.85), the memory calls
    this with the source nodes and writes the returned text as a new node
    linked to them; the sources are never rewritten. A failed or empty
    generation raises :class:`~jevmem.errors.SystemTwoError`, and the memory
    then records the decision without a summary. ``stats()`` counts calls,
    failures and tokens."""

    def __init__(
        self, system_two: SystemTwo, prompt: SummaryPrompt = DEFAULT_SUMMARY_PROMPT
    ) -> None:
        if not callable(getattr(system_two, "complete", None)):
            raise InvalidTypeError(
                f"system_two must have a complete(messages) method, got {type(system_two).__name__}"
            )
        if not isinstance(prompt, SummaryPrompt):
            raise InvalidTypeError(f"prompt must be a SummaryPrompt, got {type(prompt).__name__}")
        self.system_two = system_two
        self.prompt = prompt
        self._stats = {"calls": 0, "failures": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def stats(self) -> dict[str, Any]:
        return {**self._stats, "prompt_version": self.prompt.version}

    def messages(self, sources: Sequence[Node]) -> list[Message]:
        ordered = sorted(sources, key=lambda n: (n.timestamp is None, n.timestamp or 0, n.id))
        blocks = []
        for n in ordered:
            head = f"recorded {_when(n.timestamp)}"
            if n.provenance.get("speaker"):
                head += f"; said by {_one_line(n.provenance['speaker'])}"
            blocks.append(f"{head}\n{n.text}")
        return [
            # checked as a template (a literal brace written {{), so formatted like one
            {"role": "system", "content": self.prompt.system.format()},
            {"role": "user", "content": self.prompt.user.format(sources="\n\n".join(blocks))},
        ]

    def __call__(self, sources: Sequence[Node]) -> str:
        self._stats["calls"] += 1
        try:
            done = self.system_two.complete(
                self.messages(sources), max_tokens=self.prompt.max_tokens
            )
            text = done.text.strip() if isinstance(done, Completion) else ""
            if not text:
                raise SystemTwoError("the model wrote an empty summary")
        except SystemTwoError:
            self._stats["failures"] += 1
            raise
        self._stats["prompt_tokens"] += done.prompt_tokens or 0
        self._stats["completion_tokens"] += done.completion_tokens or 0
        return text

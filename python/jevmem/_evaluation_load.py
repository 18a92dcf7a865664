"""Loading LoCoMo-layout files into typed records: the loader half of
:mod:`jevmem.evaluation` (internal; import these names from there, which
documents them).

Malformed input is refused with :class:`~jevmem.errors.InvalidInputError`
naming the sample (its ``sample_id``, else its position) and the field: a
missing ``conversation``, turn ``dia_id``, ``question`` or ``category``, a
session or ``qa`` that is not a list, a category that is not an integer, a
file that is not JSON. A missing file stays :class:`FileNotFoundError`. A
``str`` evidence is one id (a list of one). Turns that repeat an earlier
turn's ``dia_id`` are kept and counted in the :class:`DropReport`
(``duplicate_dia_id``); an evidence id names the first of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jevmem.errors import InvalidInputError
from jevmem.temporal import parse_timestamp

CATEGORIES = (1, 2, 3, 4, 5)
ANSWERABLE = (1, 2, 3, 4)  # multi-hop, temporal, open-domain, single-hop
ADVERSARIAL = 5  # asks about something never said: the right answer is to abstain
TURN_STEP_S = 5  # seconds added per turn index inside a session, to keep turn order

_SESSION = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)


def canonical_dia_id(m: re.Match[str]) -> str:
    """``D<session>:<turn>`` without leading zeros, from a match of the dia_id pattern."""
    return f"D{int(m.group(1))}:{int(m.group(2))}"


@dataclass(frozen=True)
class Turn:
    """One dialogue turn. ``session`` is the 1-based session number, ``index`` the
    0-based position inside the session, ``position`` the 0-based position in
    the whole conversation."""

    dia_id: str
    speaker: str
    text: str
    blip_caption: str | None
    session: int
    index: int
    position: int
    session_datetime: str
    session_timestamp: int | None  # Unix seconds of session_datetime; None if unparsable
    #: the turn's own time where the chat gives each message one (a messaging
    #: export); `timestamp` reads it before the session's
    sent_at: int | None = None
    #: whether a memory is told the turn's session (a messaging export has none)
    session_known: bool = True

    @property
    def timestamp(self) -> int | None:
        """The turn's own time (`sent_at`) where it has one, else the session's
        time plus :data:`TURN_STEP_S` per turn index (keeps turn order)."""
        if self.sent_at is not None:
            return self.sent_at
        if self.session_timestamp is None:
            return None
        return self.session_timestamp + TURN_STEP_S * self.index

    @property
    def memory_text(self) -> str:
        """The turn text, with ``" [image: <caption>]"`` appended when the turn shares a photo."""
        if self.blip_caption:
            return f"{self.text} [image: {self.blip_caption}]"
        return self.text


@dataclass(frozen=True)
class QA:
    question: str
    answer: str | None  # "answer", else "adversarial_answer", stringified; None if neither
    category: int
    evidence: tuple[str, ...]  # canonical dia_ids of existing turns, deduplicated, in order
    adversarial: bool
    raw_evidence: tuple[str, ...] = ()  # as released
    #: the question's finer ability label where the file carries one (BEAM's
    #: ``beam_type``: knowledge_update, abstention, ...), else None
    ability: str | None = None


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: tuple[Turn, ...]
    qas: tuple[QA, ...]

    def turn(self, dia_id: str) -> Turn:
        for t in self.turns:
            if t.dia_id == dia_id:
                return t
        raise KeyError(dia_id)


@dataclass(frozen=True)
class EvidenceIssue:
    sample_id: str
    question: str
    raw: str
    reason: str
    result: str | None = None  # the repaired id, when there is one


@dataclass
class DropReport:
    """Counts of every evidence id that was repaired or dropped, by reason."""

    questions: int = 0
    ids_read: int = 0  # evidence ids after splitting, duplicates and danglers included
    ids_kept: int = 0
    repaired: int = 0
    split: int = 0
    unparsable: int = 0
    dangling: int = 0
    duplicate: int = 0
    qa_no_evidence: int = 0
    qa_all_dropped: int = 0
    session_time_unparsable: int = 0
    #: turns whose dia_id repeats an earlier turn's (kept; evidence names the first)
    duplicate_dia_id: int = 0
    issues: list[EvidenceIssue] = field(default_factory=list)

    def note(self, issue: EvidenceIssue) -> None:
        setattr(self, issue.reason, getattr(self, issue.reason) + 1)
        self.issues.append(issue)

    def merge(self, other: DropReport) -> None:
        for name in self.counts():
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.issues.extend(other.issues)

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if isinstance(v, int)}

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counts())
        out["issues"] = [vars(i) for i in self.issues]
        return out

    def summary(self) -> str:
        return (
            f"evidence ids: {self.ids_read} read over {self.questions} questions, "
            f"{self.ids_kept} kept; {self.repaired} malformed ids repaired, "
            f"{self.split} strings holding several ids split; dropped: "
            f"{self.unparsable} unparsable, {self.dangling} pointing at no turn, "
            f"{self.duplicate} duplicates; {self.qa_no_evidence} questions released "
            f"without evidence, {self.qa_all_dropped} left without any after repair"
            + (
                f"; {self.duplicate_dia_id} turns repeat an earlier turn's dia_id"
                if self.duplicate_dia_id
                else ""
            )
        )


def repair_evidence(
    raw_ids: Iterable[object],
    known: Mapping[str, object] | set[str],
    *,
    sample_id: str = "",
    question: str = "",
    report: DropReport | None = None,
) -> tuple[str, ...]:
    """Canonical, existing, deduplicated dia_ids from a QA's raw evidence list.

    ``known`` holds the conversation's dia_ids. Issues go to ``report`` (one
    :class:`EvidenceIssue` per repaired or dropped id, one per split string).
    """
    rep = report if report is not None else DropReport()
    out: list[str] = []
    for item in raw_ids:
        raw = str(item)
        found = list(_DIA_ID.finditer(raw))
        if not found:
            rep.note(EvidenceIssue(sample_id, question, raw, "unparsable"))
            continue
        if len(found) > 1:
            rep.note(EvidenceIssue(sample_id, question, raw, "split"))
        for m in found:
            rep.ids_read += 1
            dia = canonical_dia_id(m)
            # one id: the whole string must be canonical; several: each piece must be
            if dia != (raw.strip() if len(found) == 1 else m.group(0)):
                rep.note(EvidenceIssue(sample_id, question, raw, "repaired", dia))
            if dia not in known:
                rep.note(EvidenceIssue(sample_id, question, raw, "dangling", dia))
            elif dia in out:
                rep.note(EvidenceIssue(sample_id, question, raw, "duplicate", dia))
            else:
                out.append(dia)
    rep.ids_kept += len(out)
    return tuple(out)


def session_timestamps(conversation: Mapping[str, Any]) -> dict[int, tuple[str, int | None]]:
    """Session number -> (date-time string, Unix seconds or None) for every session with turns."""
    out: dict[int, tuple[str, int | None]] = {}
    for key in conversation:
        m = _SESSION.fullmatch(key) if isinstance(key, str) else None
        if m is None:
            continue
        n = int(m.group(1))
        raw = str(conversation.get(f"{key}_date_time") or "")
        try:
            ts: int | None = parse_timestamp(raw)
        except (ValueError, OverflowError):
            ts = None
        out[n] = (raw, ts)
    return dict(sorted(out.items()))


def _turn_dia_id(raw: str) -> str:
    m = _DIA_ID.fullmatch(raw.strip())
    return canonical_dia_id(m) if m else raw.strip()


def _refuse(where: str, problem: str) -> InvalidInputError:
    return InvalidInputError(f"{where}: {problem}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _list(value: Any, where: str, field_name: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise _refuse(where, f"{field_name} must be a list, got {_kind(value)}")
    return list(value)


def _object(value: Any, where: str, field_name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _refuse(where, f"{field_name} must be an object, got {_kind(value)}")
    return value


def _required(obj: Mapping[str, Any], key: str, where: str, field_name: str) -> Any:
    if key not in obj:
        raise _refuse(where, f"{field_name} is missing")
    return obj[key]


def _category(value: Any, where: str, field_name: str) -> int:
    """An integer category: an int, an integral float or a string of digits."""
    if isinstance(value, bool):
        value = None
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdecimal():
        value = int(value)
    if not isinstance(value, int):
        raise _refuse(where, f"{field_name} must be an integer category, got {value!r:.40}")
    return value


def _evidence(value: Any, where: str, field_name: str) -> list[Any]:
    """A question's raw evidence: a list of ids; one str is one id; none is []."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    return _list(value, where, field_name)


def parse_conversation(
    sample: Mapping[str, Any], report: DropReport | None = None, *, position: int | None = None
) -> Conversation:
    """One ``locomo10.json`` entry as a :class:`Conversation`; evidence issues go to ``report``.

    Raises InvalidInputError naming the sample (``position``: its index in
    the file, for the message) and the field when the entry is malformed."""
    at = "" if position is None else f" #{position}"
    sample = _object(sample, f"sample{at}", "the sample")
    rep = report if report is not None else DropReport()
    sample_id = str(sample.get("sample_id", ""))
    where = f"sample {sample_id!r}{at}" if sample_id else f"sample{at}"
    c = _object(_required(sample, "conversation", where, "conversation"), where, "conversation")
    keys: dict[int, str] = {}
    for key in c:
        m = _SESSION.fullmatch(key) if isinstance(key, str) else None
        if m is not None and keys.setdefault(int(m.group(1)), key) != key:
            raise _refuse(where, f"conversation has both {keys[int(m.group(1))]} and {key}")
    turns: list[Turn] = []
    first: dict[str, Turn] = {}
    for n, (raw_dt, ts) in session_timestamps(c).items():
        if ts is None:
            rep.session_time_unparsable += 1
        name = f"conversation.{keys[n]}"
        for i, t in enumerate(_list(c[keys[n]], where, name)):
            t = _object(t, where, f"{name}[{i}]")
            dia_raw = _required(t, "dia_id", where, f"{name}[{i}].dia_id")
            if not isinstance(dia_raw, str) or not dia_raw.strip():
                raise _refuse(where, f"{name}[{i}].dia_id must be a non-empty str")
            caption = t.get("blip_caption")
            text = t.get("text", "")
            if not isinstance(text, str):  # str(None) would be trained on as the word "None"
                raise _refuse(where, f"{name}[{i}].text must be a str, got {_kind(text)}")
            turn = Turn(
                dia_id=_turn_dia_id(dia_raw),
                speaker=str(t.get("speaker", "")),
                text=text,
                blip_caption=str(caption) if caption else None,
                session=n,
                index=i,
                position=len(turns),
                session_datetime=raw_dt,
                session_timestamp=ts,
            )
            if turn.dia_id in first:  # kept: an evidence id names the first
                rep.note(EvidenceIssue(sample_id, "", dia_raw, "duplicate_dia_id", turn.dia_id))
            else:
                first[turn.dia_id] = turn
            turns.append(turn)
    qas: list[QA] = []
    for j, qa in enumerate(_list(sample.get("qa", []), where, "qa")):
        qa = _object(qa, where, f"qa[{j}]")
        question = _required(qa, "question", where, f"qa[{j}].question")
        if not isinstance(question, str):
            raise _refuse(where, f"qa[{j}].question must be a str, got {_kind(question)}")
        category = _category(
            _required(qa, "category", where, f"qa[{j}].category"), where, f"qa[{j}].category"
        )
        raw = _evidence(qa.get("evidence"), where, f"qa[{j}].evidence")
        rep.questions += 1
        evidence = repair_evidence(raw, first, sample_id=sample_id, question=question, report=rep)
        if not raw:
            rep.qa_no_evidence += 1
        elif not evidence:
            rep.qa_all_dropped += 1
        answer = qa.get("answer", qa.get("adversarial_answer"))
        qas.append(
            QA(
                question=question,
                answer=None if answer is None else str(answer),
                category=category,
                evidence=evidence,
                adversarial=category == ADVERSARIAL,
                raw_evidence=tuple(str(e) for e in raw),
                ability=None if qa.get("beam_type") is None else str(qa["beam_type"]),
            )
        )
    return Conversation(
        sample_id=sample_id,
        speaker_a=str(c.get("speaker_a", "")),
        speaker_b=str(c.get("speaker_b", "")),
        turns=tuple(turns),
        qas=tuple(qas),
    )


def load_samples(samples: Sequence[Mapping[str, Any]]) -> tuple[list[Conversation], DropReport]:
    """Every conversation of a parsed ``locomo10.json``-layout list, and the
    evidence report; InvalidInputError names a malformed sample and field."""
    if not isinstance(samples, list | tuple):
        raise InvalidInputError(f"samples must be a list of objects, got {_kind(samples)}")
    report = DropReport()
    return [parse_conversation(s, report, position=i) for i, s in enumerate(samples)], report


def load(path: Path | str) -> tuple[list[Conversation], DropReport]:
    """Every conversation of a ``locomo10.json``-layout file, and the evidence
    report. A missing file raises FileNotFoundError; a file that is not JSON,
    or not of this layout, InvalidInputError."""
    raw = Path(path).read_bytes()
    try:
        samples = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # not JSON, or not UTF-8
        raise InvalidInputError(f"{path}: not JSON: {exc}") from None
    try:
        return load_samples(samples)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}") from None

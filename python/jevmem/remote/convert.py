"""Conversion between the typed controller protocol and its protobuf form.

Decoding is strict in both directions: a server rejects a malformed request
with :class:`BadRequest` (sent as INVALID_ARGUMENT), a client rejects a
malformed response with :class:`~jevmem.controller.types.ControllerError`.

The wire form is compact: a ``DecideRequest`` carries each distinct question
text (kind, instruction, criteria or options) once, as a template, and every
question only its id and its template's index; answers are one id list and
one value list per request, in question order. Both directions cache what
repeats between calls (template messages on the way out, decoded questions
on the way in), so a scoring round of hundreds of questions builds no
per-question protobuf messages. The float signals of a state's item lists
travel as packed doubles (``SignalTable``) rather than JSON text: printing
and parsing them was most of the cost of a scoring round.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from jevmem._proto.jevmem.v1 import controller_pb2 as pb
from jevmem.controller import catalogue
from jevmem.controller.types import (
    Answer,
    CandidateAnswers,
    CandidateQuestions,
    CandidateTable,
    Choice,
    ChoiceAnswer,
    ControllerError,
    DecisionRequest,
    Noul,
    NoulAnswer,
    PairQuestions,
    Question,
)

__all__ = [
    "BadRequest",
    "answers_from_proto",
    "answers_to_proto",
    "requests_from_proto",
    "requests_to_proto",
]


class BadRequest(ValueError):
    """A request that cannot be decoded; its message tells the sender what is wrong."""


def _json_default(x: object) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, set | frozenset):
        return sorted(x, key=str)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        # e.g. the grounded time expressions (TimeRef) of a query's time cues
        return dataclasses.asdict(x)
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


_ENCODER = json.JSONEncoder(default=_json_default, separators=(",", ":"), allow_nan=False)


def dumps(state: Mapping[str, Any]) -> str:
    """The state as compact JSON; NaN/Infinity are refused (not JSON)."""
    return _ENCODER.encode(state)


# ---- signals as numbers -------------------------------------------------------
#
# Most of a scoring state is numbers: every candidate carries a dozen signals.
# Written as JSON text they cost more to print and parse than everything else
# in the state, so a list whose items all carry float signals under the same
# names travels as a SignalTable of packed doubles instead (exact, not
# rounded); the receiver puts each item's "signals" back before anyone reads
# the state. Anything else (ints, bools, differing names) stays in the JSON.


def split_signals(state: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[pb.SignalTable]]:
    """``state`` without the signals that go as tables, and the tables.

    ``state`` itself is not modified: the lists that give up their signals
    are copied item by item (shallow copies).
    """
    stripped: dict[str, list[dict[str, Any]]] = {}
    tables: list[pb.SignalTable] = []
    for key, items in state.items():
        if type(items) is CandidateTable:
            cols = list(items.columns.values())
            if items.ids and cols and not any(np.isnan(c).any() for c in cols):
                # every candidate carries every signal: the columns go as
                # they are, the rest as JSON (what the mappings would give)
                stripped[key] = [
                    {"id": i, "text": t, "view": v}
                    for i, t, v in zip(items.ids, items.texts, items.views, strict=True)
                ]
                flat = np.column_stack(cols).ravel()
                if np.isfinite(flat).all():
                    tables.append(
                        pb.SignalTable(list=key, names=list(items.columns), values=flat.tolist())
                    )
                    continue
            # the candidates as the mappings they stand for
            items = stripped[key] = items.as_dicts()
        elif isinstance(items, CandidateTable):
            # a relation round's `PairTable`: its mappings carry more than a view
            items = stripped[key] = items.as_dicts()
        if type(items) not in (list, tuple) or not items or type(items[0]) is not dict:
            continue
        first = items[0].get("signals")
        if type(first) is not dict or not first:
            continue
        names = tuple(first)
        values: list[float] = []
        extend = values.extend
        copies: list[dict[str, Any]] = []
        for item in items:
            sig = item.get("signals") if type(item) is dict else None
            if type(sig) is not dict or tuple(sig) != names:
                break
            extend(sig.values())
            copy = item.copy()
            del copy["signals"]
            copies.append(copy)
        else:
            # floats only (an int or a bool keeps its JSON type); a non-finite
            # sum sends the list through JSON, which refuses NaN and infinity
            if set(map(type, values)) == {float} and math.isfinite(sum(values)):
                stripped[key] = copies
                tables.append(pb.SignalTable(list=key, names=names, values=values))
    if not stripped:
        return state, tables
    return {**state, **stripped}, tables


_CANDIDATE_KEYS = frozenset(("id", "text", "view"))


def _plain_candidates(items: list[dict[str, Any]]) -> bool:
    """Whether every item is a scoring candidate and nothing else: an int
    id, a text and a view (a `CandidateTable` holds exactly those)."""
    return bool(items) and all(
        item.keys() == _CANDIDATE_KEYS
        and type(item["id"]) is int
        and type(item["text"]) is str
        and type(item["view"]) is str
        for item in items
    )


def _restore_signals(state: dict[str, Any], tables: Sequence[pb.SignalTable], where: str) -> None:
    """Put the tabled signals back into ``state``'s items; raises :class:`BadRequest`."""
    seen: set[str] = set()
    for t, table in enumerate(tables):
        at = f"{where}.signal_tables[{t}]"
        key = table.list
        if key in seen:
            raise BadRequest(f"{at}: a second table for the list {key!r}")
        seen.add(key)
        items = state.get(key)
        if not isinstance(items, list):
            raise BadRequest(f"{at}: the state has no list {key!r}")
        names = tuple(table.names)
        n = len(names)
        if not n or len(set(names)) != n:
            raise BadRequest(f"{at} ({key}): names must be at least one and distinct")
        values = list(table.values)
        if len(values) != n * len(items):
            raise BadRequest(
                f"{at} ({key}): {len(values)} values for {len(items)} items x {n} names"
            )
        if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):
            raise BadRequest(f"{at} ({key}): values must be finite")
        if not all(type(item) is dict and "signals" not in item for item in items):
            raise BadRequest(f"{at} ({key}): items must be JSON objects without their own signals")
        if _plain_candidates(items):
            # a round's candidates: kept as the columns they came in
            cols = np.array(values, dtype=np.float64).reshape(len(items), n)
            state[key] = CandidateTable(
                [item["id"] for item in items],
                [item["text"] for item in items],
                {name: cols[:, j] for j, name in enumerate(names)},
                views=[item["view"] for item in items],
            )
            continue
        # the lengths were checked above: plain zips (strict ones cost a third more)
        rows = zip(*[values[j::n] for j in range(n)], strict=False)
        for item, row in zip(items, rows, strict=False):
            item["signals"] = dict(zip(names, row, strict=False))


# ---- requests ---------------------------------------------------------------

# What identifies a template: the question's type and all of its text.
_TemplateKey = tuple[type, str, str, Any, Any]

_CACHE_TEMPLATES = 512  # distinct templates remembered between calls
_CACHE_IDS = 8192  # decoded questions remembered per template

# encode: template key -> its message (copied into each request)
_pb_templates: dict[_TemplateKey, pb.QuestionTemplate] = {}
# decode: template key -> {question id -> decoded question}
_decoded: dict[_TemplateKey, dict[str, Question]] = {}


def _key(q: Question) -> _TemplateKey:
    if type(q) is Noul:
        return (Noul, q.kind, q.instruction, q.true_if, q.false_if)
    if type(q) is Choice:
        return (Choice, q.kind, q.instruction, q.options, q.option_meanings)
    raise TypeError(f"not a question: {type(q).__name__}")


def _template_to_proto(key: _TemplateKey) -> pb.QuestionTemplate:
    t = _pb_templates.get(key)
    if t is None:
        cls, kind, instruction, a, b = key
        if cls is Noul:
            t = pb.QuestionTemplate(
                kind=kind, instruction=instruction, noul=pb.NoulSpec(true_if=a, false_if=b)
            )
        else:
            t = pb.QuestionTemplate(
                kind=kind,
                instruction=instruction,
                choice=pb.ChoiceSpec(
                    options=[
                        pb.ChoiceOption(label=label, meaning=meaning)
                        for label, meaning in zip(a, b, strict=True)
                    ]
                ),
            )
        if len(_pb_templates) >= _CACHE_TEMPLATES:
            _pb_templates.clear()
        _pb_templates[key] = t
    return t


def requests_to_proto(requests: Sequence[DecisionRequest]) -> pb.DecideRequest:
    index: dict[_TemplateKey, int] = {}
    templates: list[pb.QuestionTemplate] = []
    out: list[pb.DecisionRequest] = []
    # The requests of a round share question tuples (every query's scoring
    # round over n candidates asks the same questions): each distinct tuple's
    # ids and template references are worked out once per call.
    by_tuple: dict[int, tuple[list[str], list[int]]] = {}
    for r in requests:
        known = by_tuple.get(id(r.questions))
        if known is None:
            refs: list[int] = []
            qs = r.questions
            # a candidate round: its template's references, once per candidate
            per = qs.template if type(qs) is CandidateQuestions else qs
            for q in per:
                key = _key(q)
                t = index.get(key)
                if t is None:
                    t = index[key] = len(templates)
                    templates.append(_template_to_proto(key))
                refs.append(t)
            if per is not qs:
                refs *= qs.n_candidates  # type: ignore[attr-defined]
            known = by_tuple[id(r.questions)] = ([q.id for q in r.questions], refs)
        state, tables = split_signals(r.state)
        out.append(
            pb.DecisionRequest(
                purpose=r.purpose,
                state_json=dumps(state),
                question_ids=known[0],
                question_templates=known[1],
                signal_tables=tables,
            )
        )
    return pb.DecideRequest(requests=out, templates=templates)


def _template_from_proto(
    t: pb.QuestionTemplate, where: str
) -> tuple[_TemplateKey, dict[str, Question]]:
    """Check one template; its key and the cache of questions decoded with it."""
    if not t.kind:
        raise BadRequest(f"{where}: kind is empty")
    spec = t.WhichOneof("spec")
    key: _TemplateKey
    if spec == "noul":
        key = (Noul, t.kind, t.instruction, t.noul.true_if, t.noul.false_if)
    elif spec == "choice":
        labels = tuple(o.label for o in t.choice.options)
        if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
            raise BadRequest(
                f"{where} ({t.kind}): a choice needs at least two distinct non-empty labels, "
                f"got {list(labels)}"
            )
        key = (Choice, t.kind, t.instruction, labels, tuple(o.meaning for o in t.choice.options))
    else:
        raise BadRequest(f"{where} ({t.kind}): set exactly one of noul or choice")
    cache = _decoded.get(key)
    if cache is None:
        if len(_decoded) >= _CACHE_TEMPLATES:
            _decoded.clear()
        cache = _decoded[key] = {}
    return key, cache


def _question(key: _TemplateKey, cache: dict[str, Question], qid: str) -> Question:
    q = cache.get(qid)
    if q is None:
        cls, kind, instruction, a, b = key
        q = (Noul if cls is Noul else Choice)(qid, kind, instruction, a, b)
        if len(cache) >= _CACHE_IDS:
            cache.clear()
        cache[qid] = q
    return q


def requests_from_proto(msg: pb.DecideRequest) -> list[DecisionRequest]:
    """Decode and check a Decide request; raises :class:`BadRequest`."""
    templates = [_template_from_proto(t, f"templates[{i}]") for i, t in enumerate(msg.templates)]
    n_templates = len(templates)
    out: list[DecisionRequest] = []
    for r, req in enumerate(msg.requests):
        where = f"requests[{r}]"
        if not req.purpose:
            raise BadRequest(f"{where}.purpose is empty")
        try:
            state = json.loads(req.state_json) if req.state_json else {}
        except ValueError as exc:
            raise BadRequest(f"{where}.state_json is not valid JSON: {exc}") from None
        except RecursionError:
            raise BadRequest(f"{where}.state_json nests too deep") from None
        if not isinstance(state, dict):
            raise BadRequest(
                f"{where}.state_json must be a JSON object, got {type(state).__name__}"
            )
        if req.signal_tables:
            _restore_signals(state, req.signal_tables, where)
        ids = list(req.question_ids)
        refs = list(req.question_templates)
        if len(ids) != len(refs):
            raise BadRequest(
                f"{where}: {len(ids)} question_ids but {len(refs)} question_templates; "
                "every question needs exactly one template"
            )
        if len(set(ids)) != len(ids) or "" in ids:
            seen: set[str] = set()
            for i, qid in enumerate(ids):
                if not qid:
                    raise BadRequest(f"{where}.question_ids[{i}]: id is empty")
                if qid in seen:
                    raise BadRequest(
                        f"{where}.question_ids[{i}]: id {qid!r} is repeated in its request"
                    )
                seen.add(qid)
        if refs and max(refs) >= n_templates:
            i = next(i for i, t in enumerate(refs) if t >= n_templates)
            raise BadRequest(
                f"{where}.question_templates[{i}] ({ids[i]}): template {refs[i]} does not "
                f"exist (the call has {n_templates})"
            )
        questions = tuple([_question(*templates[t], qid) for qid, t in zip(ids, refs, strict=True)])
        # a scoring round's questions keep their form, so the controller
        # here can answer them as columns
        out.append(
            DecisionRequest(
                req.purpose,
                state,
                _candidate_round(ids, refs, questions) or _pair_round(ids, questions) or questions,
            )
        )
    return out


def _pair_round(ids: list[str], questions: tuple[Question, ...]) -> PairQuestions | None:
    """The questions as a `PairQuestions` when they are exactly the
    catalogue's relation round (pair by pair, ``pair_{i}_<name>``), so the
    controller here answers them as arrays; else None."""
    if not ids or not ids[0].startswith("pair_0_"):
        return None
    alias: list[bool] = []
    temporal: list[bool] = []
    for qid in ids:
        head, _, name = qid[5:].partition("_")
        if not head.isdigit():
            return None
        i = int(head)
        if i == len(alias):
            alias.append(False)
            temporal.append(False)
        elif i != len(alias) - 1:
            return None
        if name == "entity_alias":
            alias[i] = True
        elif name == "temporal":
            temporal[i] = True
    round_ = PairQuestions(catalogue.relation_questions, alias, temporal)
    return round_ if tuple(round_) == questions else None


# ---- answers ----------------------------------------------------------------


def _candidate_round(
    ids: list[str], refs: list[int], questions: tuple[Question, ...]
) -> CandidateQuestions | None:
    """`CandidateQuestions.recognise`, read off the ids and template
    references (one question object per template is compared, not every one)."""
    width = 0
    for qid in ids:
        if not qid.startswith("candidate_0_"):
            break
        width += 1
    if not width or len(ids) % width:
        return None
    count = len(ids) // width
    template = questions[:width]
    if refs != refs[:width] * count or not all(type(q) is Noul for q in template):
        return None
    names = [qid[12:] for qid in ids[:width]]
    if ids != [f"candidate_{i}_{name}" for i in range(count) for name in names]:
        return None
    return CandidateQuestions(lambda i: questions[i * width : (i + 1) * width], count)


def answers_to_proto(
    requests: Sequence[DecisionRequest],
    answers: Sequence[Mapping[str, Answer]],
    controller: str,
) -> pb.DecideResponse:
    """Encode ``answers`` in each request's question order.

    Raises :class:`ControllerError` when an answer is missing, extra or of the
    wrong type for its question (the compact form cannot carry those).
    """
    if len(answers) != len(requests):
        raise ControllerError(f"expected answers for {len(requests)} requests, got {len(answers)}")
    results: list[pb.DecisionAnswers] = []
    for r, (req, got) in enumerate(zip(requests, answers, strict=True)):
        ids = [q.id for q in req.questions]
        if (
            type(got) is CandidateAnswers
            and (got.questions is req.questions or got.questions == req.questions)
            and got.array.size == len(ids)
        ):
            # every cell a Noul's value, in question order (candidate by candidate)
            results.append(
                pb.DecisionAnswers(question_ids=ids, noul_values=got.array.ravel().tolist())
            )
            continue
        if len(got) != len(ids):
            raise ControllerError(f"request {r}: {len(got)} answers for {len(ids)} questions")
        values: list[float] = []
        choices: list[pb.ChoiceAnswer] = []
        for q in req.questions:
            a = got.get(q.id)
            if type(q) is Noul and isinstance(a, NoulAnswer):
                values.append(float(a.value))
            elif type(q) is Choice and isinstance(a, ChoiceAnswer):
                choices.append(
                    pb.ChoiceAnswer(
                        label=a.label,
                        distribution={k: float(v) for k, v in a.distribution.items()},
                    )
                )
            elif a is None:
                raise ControllerError(f"request {r}: no answer to {q.id!r}")
            else:
                raise ControllerError(
                    f"{q.id}: a {type(q).__name__} cannot take a {type(a).__name__}"
                )
        results.append(pb.DecisionAnswers(question_ids=ids, noul_values=values, choices=choices))
    return pb.DecideResponse(results=results, controller=controller)


def answers_from_proto(
    msg: pb.DecideResponse, requests: Sequence[DecisionRequest]
) -> list[MutableMapping[str, Answer]]:
    """Decode a Decide response to ``requests``; range is checked by ``validate_answers``.

    Rejected here with :class:`ControllerError`: a result count other than
    one per request, question ids other than the request's (in its order),
    and value lists that do not match the questions' types one to one.
    """
    if len(msg.results) != len(requests):
        raise ControllerError(
            f"expected answers for {len(requests)} requests, got {len(msg.results)}"
        )
    out: list[MutableMapping[str, Answer]] = []
    # ids and Choice count per distinct question tuple (shared by a round's requests)
    by_tuple: dict[int, tuple[list[str], int]] = {}
    for r, (req, res) in enumerate(zip(requests, msg.results, strict=True)):
        qs = req.questions
        known = by_tuple.get(id(qs))
        if known is None:
            known = by_tuple[id(qs)] = ([q.id for q in qs], sum(type(q) is Choice for q in qs))
        ids, n_choice = known
        got_ids = list(res.question_ids)
        if got_ids != ids:
            missing = sorted(set(ids) - set(got_ids))
            extra = sorted(set(got_ids) - set(ids))
            raise ControllerError(
                f"request {r} ({req.purpose}): answered ids do not match the questions "
                f"(missing {missing[:5]}, unexpected {extra[:5]}, "
                f"{len(got_ids)} answered for {len(ids)})"
            )
        values = list(res.noul_values)
        choices = res.choices
        if len(values) != len(qs) - n_choice or len(choices) != n_choice:
            raise ControllerError(
                f"request {r} ({req.purpose}): {len(values)} noul values and {len(choices)} "
                f"choices for {len(qs) - n_choice} Noul and {n_choice} Choice questions"
            )
        got: MutableMapping[str, Answer]
        if type(qs) is CandidateQuestions:
            got = CandidateAnswers(qs, values)
        elif not n_choice:
            got = dict(zip(ids, map(NoulAnswer, values), strict=True))
        else:
            got = {}
            vi = ci = 0
            for q in qs:
                if type(q) is Choice:
                    c = choices[ci]
                    ci += 1
                    dist = dict(c.distribution)
                    if not all(math.isfinite(v) for v in dist.values()):
                        raise ControllerError(f"{q.id}: non-finite probability")
                    got[q.id] = ChoiceAnswer(c.label, dist)
                else:
                    got[q.id] = NoulAnswer(values[vi])
                    vi += 1
        out.append(got)
    return out

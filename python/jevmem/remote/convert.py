"""Conversion between the typed controller protocol and its protobuf form.

Decoding is strict in both directions: a server rejects a malformed request
with :class:`BadRequest` (sent as INVALID_ARGUMENT), a client rejects a
malformed response with :class:`~jevmem.controller.types.ControllerError`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jevmem._proto.jevmem.v1 import controller_pb2 as pb
from jevmem.controller.types import (
    Answer,
    Choice,
    ChoiceAnswer,
    ControllerError,
    DecisionRequest,
    Noul,
    NoulAnswer,
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
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


def dumps(state: Mapping[str, Any]) -> str:
    """The state as compact JSON; NaN/Infinity are refused (not JSON)."""
    return json.dumps(state, default=_json_default, separators=(",", ":"), allow_nan=False)


# ---- requests ---------------------------------------------------------------


def _question_to_proto(q: Question) -> pb.Question:
    if isinstance(q, Noul):
        return pb.Question(
            id=q.id,
            kind=q.kind,
            instruction=q.instruction,
            noul=pb.NoulSpec(true_if=q.true_if, false_if=q.false_if),
        )
    return pb.Question(
        id=q.id,
        kind=q.kind,
        instruction=q.instruction,
        choice=pb.ChoiceSpec(
            options=[
                pb.ChoiceOption(label=label, meaning=meaning)
                for label, meaning in zip(q.options, q.option_meanings, strict=True)
            ]
        ),
    )


def requests_to_proto(requests: Sequence[DecisionRequest]) -> pb.DecideRequest:
    return pb.DecideRequest(
        requests=[
            pb.DecisionRequest(
                purpose=r.purpose,
                state_json=dumps(r.state),
                questions=[_question_to_proto(q) for q in r.questions],
            )
            for r in requests
        ]
    )


def requests_from_proto(msg: pb.DecideRequest) -> list[DecisionRequest]:
    """Decode and check a Decide request; raises :class:`BadRequest`."""
    out: list[DecisionRequest] = []
    for r, req in enumerate(msg.requests):
        where = f"requests[{r}]"
        if not req.purpose:
            raise BadRequest(f"{where}.purpose is empty")
        try:
            state = json.loads(req.state_json) if req.state_json else {}
        except ValueError as exc:
            raise BadRequest(f"{where}.state_json is not valid JSON: {exc}") from None
        if not isinstance(state, dict):
            raise BadRequest(
                f"{where}.state_json must be a JSON object, got {type(state).__name__}"
            )
        questions: list[Question] = []
        seen: set[str] = set()
        for i, q in enumerate(req.questions):
            qw = f"{where}.questions[{i}]"
            if not q.id:
                raise BadRequest(f"{qw}.id is empty")
            if q.id in seen:
                raise BadRequest(f"{qw}.id {q.id!r} is repeated in its request")
            seen.add(q.id)
            if not q.kind:
                raise BadRequest(f"{qw} ({q.id}): kind is empty")
            spec = q.WhichOneof("spec")
            if spec == "noul":
                questions.append(Noul(q.id, q.kind, q.instruction, q.noul.true_if, q.noul.false_if))
            elif spec == "choice":
                labels = tuple(o.label for o in q.choice.options)
                if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
                    raise BadRequest(
                        f"{qw} ({q.id}): a choice needs at least two distinct non-empty labels, got {list(labels)}"
                    )
                meanings = tuple(o.meaning for o in q.choice.options)
                questions.append(Choice(q.id, q.kind, q.instruction, labels, meanings))
            else:
                raise BadRequest(f"{qw} ({q.id}): set exactly one of noul or choice")
        out.append(DecisionRequest(req.purpose, state, tuple(questions)))
    return out


# ---- answers ----------------------------------------------------------------


def answers_to_proto(answers: Sequence[Mapping[str, Answer]], controller: str) -> pb.DecideResponse:
    results = []
    for got in answers:
        items = []
        for qid, a in got.items():
            if isinstance(a, NoulAnswer):
                items.append(pb.Answer(question_id=qid, noul=pb.NoulAnswer(value=float(a.value))))
            else:
                items.append(
                    pb.Answer(
                        question_id=qid,
                        choice=pb.ChoiceAnswer(
                            label=a.label,
                            distribution={k: float(v) for k, v in a.distribution.items()},
                        ),
                    )
                )
        results.append(pb.DecisionAnswers(answers=items))
    return pb.DecideResponse(results=results, controller=controller)


def answers_from_proto(msg: pb.DecideResponse) -> list[dict[str, Answer]]:
    """Decode a Decide response; shape and range are checked by ``validate_answers``.

    Only what the typed form cannot hold is rejected here: repeated ids and
    answers with no value.
    """
    out: list[dict[str, Answer]] = []
    for r, res in enumerate(msg.results):
        got: dict[str, Answer] = {}
        for a in res.answers:
            if a.question_id in got:
                raise ControllerError(f"request {r}: question {a.question_id!r} answered twice")
            which = a.WhichOneof("value")
            if which == "noul":
                got[a.question_id] = NoulAnswer(a.noul.value)
            elif which == "choice":
                dist = dict(a.choice.distribution)
                if not all(math.isfinite(v) for v in dist.values()):
                    raise ControllerError(f"{a.question_id}: non-finite probability")
                got[a.question_id] = ChoiceAnswer(a.choice.label, dist)
            else:
                raise ControllerError(f"request {r}: answer to {a.question_id!r} has no value")
        out.append(got)
    return out

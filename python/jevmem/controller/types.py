"""Typed, non-generative controller decisions (SPEC §4).

A controller J(S, Q) receives a structured state S and a batch of questions
Q. A :class:`Noul` is one binary proposition, answered by a value in [0, 1];
a :class:`Choice` picks one of several exclusive options and returns the
label with a distribution. Question ids are bookkeeping keys only; ``kind``
is a stable machine-readable name a local controller dispatches on, while a
model-backed controller reads ``instruction`` and the criteria.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from jevmem.errors import JevmemError

__all__ = [
    "Answer",
    "Choice",
    "ChoiceAnswer",
    "ControllerError",
    "DecisionRequest",
    "Noul",
    "NoulAnswer",
    "Question",
    "SystemOne",
    "validate_answers",
]


class ControllerError(JevmemError):
    """A controller returned answers of the wrong shape, range or type."""


@dataclass(frozen=True, slots=True)
class Noul:
    """A binary proposition: is it true of the state? Answer in [0, 1]."""

    id: str
    kind: str
    instruction: str
    true_if: str
    false_if: str


@dataclass(frozen=True, slots=True)
class Choice:
    """Mutually exclusive options; the answer is one label and a distribution."""

    id: str
    kind: str
    instruction: str
    options: tuple[str, ...]
    option_meanings: tuple[str, ...]


Question = Noul | Choice


@dataclass(frozen=True, slots=True)
class NoulAnswer:
    value: float


@dataclass(frozen=True, slots=True)
class ChoiceAnswer:
    label: str
    distribution: Mapping[str, float]


Answer = NoulAnswer | ChoiceAnswer


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """One state and the questions asked about it.

    ``purpose`` names the decision family (typing, relations, consolidation,
    routing, scoring, assessment); ``state`` holds plain JSON-like data: the
    texts a model would read and the deterministic ``signals`` the memory
    plane computed (similarities, overlaps, time gaps) for fast controllers.
    """

    purpose: str
    state: Mapping[str, Any]
    questions: tuple[Question, ...] = field(default_factory=tuple)


@runtime_checkable
class SystemOne(Protocol):
    """Answers a batch of decision requests in one call.

    ``decide`` returns, per request and in order, a mapping from question id
    to answer. Questions are independent: no answer may depend on another's.
    """

    name: str

    def decide(self, requests: Sequence[DecisionRequest]) -> list[dict[str, Answer]]: ...


def validate_answers(
    requests: Sequence[DecisionRequest], answers: Sequence[Mapping[str, Answer]]
) -> None:
    """Reject anything but one finite, in-range answer per question.

    Controllers are not trusted: a wrong-shaped, NaN or out-of-range answer
    raises :class:`ControllerError` before any of it is used.
    """
    if len(answers) != len(requests):
        raise ControllerError(f"expected answers for {len(requests)} requests, got {len(answers)}")
    for r, (req, got) in enumerate(zip(requests, answers, strict=True)):
        ids = {q.id for q in req.questions}
        if set(got) != ids:
            missing, extra = sorted(ids - set(got)), sorted(set(got) - ids)
            raise ControllerError(
                f"request {r} ({req.purpose}): missing answers {missing[:5]}, unexpected {extra[:5]}"
            )
        for q in req.questions:
            a = got[q.id]
            if isinstance(q, Noul):
                if not isinstance(a, NoulAnswer):
                    raise ControllerError(
                        f"{q.id}: a Noul needs a NoulAnswer, got {type(a).__name__}"
                    )
                if not (math.isfinite(a.value) and 0.0 <= a.value <= 1.0):
                    raise ControllerError(f"{q.id}: value {a.value!r} is not in [0, 1]")
            else:
                if not isinstance(a, ChoiceAnswer):
                    raise ControllerError(
                        f"{q.id}: a Choice needs a ChoiceAnswer, got {type(a).__name__}"
                    )
                if a.label not in q.options:
                    raise ControllerError(f"{q.id}: label {a.label!r} is not one of {q.options}")
                if set(a.distribution) != set(q.options):
                    raise ControllerError(
                        f"{q.id}: the distribution must cover exactly {q.options}"
                    )
                probs = list(a.distribution.values())
                if not all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in probs):
                    raise ControllerError(f"{q.id}: probabilities must be in [0, 1]")
                if abs(sum(probs) - 1.0) > 1e-3:
                    raise ControllerError(f"{q.id}: probabilities sum to {sum(probs):.4f}, not 1")

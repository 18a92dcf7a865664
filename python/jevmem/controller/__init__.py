"""The System-One control plane: typed questions, the protocol, the local controller."""

from __future__ import annotations

from jevmem.controller import catalogue
from jevmem.controller.learned import LearnedController, SystemOneModel
from jevmem.controller.local import LocalController
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
    PairAnswers,
    PairQuestions,
    PairTable,
    Question,
    SystemOne,
    validate_answers,
)

__all__ = [
    "Answer",
    "CandidateAnswers",
    "CandidateQuestions",
    "CandidateTable",
    "Choice",
    "ChoiceAnswer",
    "ControllerError",
    "DecisionRequest",
    "LearnedController",
    "LocalController",
    "Noul",
    "NoulAnswer",
    "PairAnswers",
    "PairQuestions",
    "PairTable",
    "Question",
    "SystemOne",
    "SystemOneModel",
    "catalogue",
    "default_controller",
    "validate_answers",
]


def default_controller() -> SystemOne:
    """The controller a `Memory` gets when it is given none: the learned one
    when the shipped model has heads (a head ships only where it beat the
    hand rules on held-out conversations of every development set), else the
    hand-written `LocalController`."""
    model = SystemOneModel.shipped()
    return LearnedController(model) if model.heads else LocalController()

"""The System-One control plane: typed questions, the protocol, the local controller."""

from __future__ import annotations

from jevmem.controller import catalogue
from jevmem.controller.local import LocalController
from jevmem.controller.types import (
    Answer,
    Choice,
    ChoiceAnswer,
    ControllerError,
    DecisionRequest,
    Noul,
    NoulAnswer,
    Question,
    SystemOne,
    validate_answers,
)

__all__ = [
    "Answer",
    "Choice",
    "ChoiceAnswer",
    "ControllerError",
    "DecisionRequest",
    "LocalController",
    "Noul",
    "NoulAnswer",
    "Question",
    "SystemOne",
    "catalogue",
    "validate_answers",
]

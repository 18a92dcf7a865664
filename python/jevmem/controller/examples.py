"""A controller to start from: ``jevmem serve-controller --controller
jevmem.controller.examples:CountingController`` hosts it.

`CountingController` answers like the controller it wraps (the default one
unless given another) and counts the questions it is asked, by kind. That is
the shape of putting your own model behind the interface: answer the kinds
your model knows (``score.relevance``, ``assess.sufficiency``...; the list is
in `jevmem.controller.catalogue`) and pass the rest on. Answers are checked
by the memory (or the server) before use, whoever gives them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence

from jevmem.controller import default_controller
from jevmem.controller.types import Answer, DecisionRequest, SystemOne

__all__ = ["CountingController"]


class CountingController:
    """The wrapped controller's answers, with a count of the questions by kind."""

    def __init__(self, inner: SystemOne | None = None) -> None:
        self.inner = inner if inner is not None else default_controller()
        self.name = f"counting({self.inner.name})"
        #: questions asked so far, by kind ("score.relevance": 1234, ...)
        self.asked: Counter[str] = Counter()
        self._lock = threading.Lock()  # a server calls decide from several threads

    def decide(self, requests: Sequence[DecisionRequest]) -> Sequence[Mapping[str, Answer]]:
        kinds = Counter(q.kind for r in requests for q in r.questions)
        with self._lock:
            self.asked.update(kinds)
        return self.inner.decide(requests)

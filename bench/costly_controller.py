"""A stand-in for a model-backed System-One backend, for ``bench_grpc_backend_cost.py``.

The local controller's answers, after waiting a fixed time per ``decide``
call (``JEVMEM_BENCH_CALL_COST_MS``): what a GPU classifier behind the
controller interface pays per batch it runs (kernel launches, transfers, a
forward pass) whatever the batch size, within reason. The wait sleeps, so it
costs time, not CPU, as waiting on an accelerator does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence

from jevmem.controller.local import LocalController
from jevmem.controller.types import Answer, DecisionRequest


class CostlyController:
    name = "local+cost"

    def __init__(self) -> None:
        self.inner = LocalController()
        self.cost_s = float(os.environ.get("JEVMEM_BENCH_CALL_COST_MS", "0")) / 1e3

    def decide(self, requests: Sequence[DecisionRequest]) -> Sequence[Mapping[str, Answer]]:
        time.sleep(self.cost_s)
        return self.inner.decide(requests)

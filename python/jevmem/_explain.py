"""Words for a search result's sufficiency, as the CLI and the demo print it.

``sufficiency`` is the controller's estimate, in [0, 1], that the evidence
answers the query; ``sufficient`` is the traversal's early-stop rule, which
also asks that nothing be missing and nothing contradict (``SearchResult.sufficient``).
A high sufficiency with a stop rule that did not hold is common and not a
failure: the traversal then ran on to its frontier or its limits.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jevmem.memory import SearchResult

__all__ = ["STOP_RULE_NOTE", "sufficiency_line"]

#: Printed once under the demo's queries and in ``jevmem search --help``.
STOP_RULE_NOTE = (
    "sufficiency: the controller's estimate that the evidence answers the query (a score; "
    "rank and abstain by it). 'sufficient' is the traversal's early-stop rule: sufficiency "
    ">= 0.95 and missing < 0.15 and contradiction < 0.15; when it does not hold the traversal "
    "simply runs on to its frontier or limits."
)


# Scores are float32 (about 7 significant digits) and v * scale is inexact:
# 0.29 * 100 is 28.999999999999996 and float32 0.2 * 100 is 20.0000003. Rounding
# the scaled value to 4 places first drops that noise, so floor and ceil move
# only a value that really lies between two printed ones.
_NOISE_PLACES = 4


def _floor(v: float, digits: int) -> str:
    # never print a value below a threshold as the threshold itself (0.949 as "0.95")
    scale = 10**digits
    return f"{math.floor(round(v * scale, _NOISE_PLACES)) / scale:.{digits}f}"


def _ceil(v: float, digits: int) -> str:
    scale = 10**digits
    return f"{math.ceil(round(v * scale, _NOISE_PLACES)) / scale:.{digits}f}"


def sufficiency_line(r: SearchResult) -> str:
    """``sufficiency 0.99; stop rule not met: missing 0.22 (needs < 0.15)`` and the like."""
    if r.sufficiency is None:
        return "sufficiency n/a (no assessment ran)"
    unmet_parts = r.unmet_stop_rule()
    shown = _floor(r.sufficiency, 2)
    for name, _, th in unmet_parts:
        if name == "sufficiency" and float(shown) >= float(f"{th:.2f}"):
            # below the threshold by less than the noise rounded away: shown
            # one step under it, never as the threshold it did not reach
            shown = f"{float(f'{th:.2f}') - 0.01:.2f}"
    head = f"sufficiency {shown}"
    # the parts the core's (float32) stop decision found unmet
    unmet = [
        f"sufficiency below {th:.2f}"
        if name == "sufficiency"
        else f"{name} {_ceil(value, 2)} (needs < {th:.2f})"
        for name, value, th in unmet_parts
    ]
    if not unmet:
        return f"{head}; sufficient (early-stop rule met)"
    return f"{head}; early-stop rule not met: {', '.join(unmet)}"

"""The sufficiency line the CLI and the demo print (jevmem/_explain.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from jevmem import HashEmbedder, LocalController, Memory
from jevmem._explain import sufficiency_line
from jevmem.controller.types import NoulAnswer
from jevmem.memory import SearchResult


def f32(v: float) -> float:
    """``v`` as the core hands it over: a float32 widened to a Python float."""
    return float(np.float32(v))


THRESHOLDS = {"theta_suff": f32(0.95), "theta_missing": f32(0.15), "theta_contradiction": f32(0.15)}


def line(sufficiency: float, missing: float = 0.0, contradiction: float = 0.0) -> str:
    r = SearchResult("q", [], {"thresholds": THRESHOLDS}, sufficiency, 0.5, missing, contradiction)
    return sufficiency_line(r)


@pytest.mark.parametrize("cents", range(101))
def test_a_score_on_a_printed_value_prints_as_itself(cents: int) -> None:
    # 0.29 * 100 is 28.999999999999996 and float32 0.2 * 100 is 20.0000003:
    # neither may move the printed digit
    for v in (cents / 100, f32(cents / 100)):
        assert line(v).startswith(f"sufficiency {cents / 100:.2f};")
        if v >= THRESHOLDS["theta_missing"]:  # (f64 0.15 is below float32 0.15)
            assert f"missing {cents / 100:.2f} (needs < 0.15)" in line(0.5, missing=v)
            assert f"contradiction {cents / 100:.2f} (needs" in line(0.5, contradiction=v)


def test_a_score_between_printed_values_is_floored_or_ceiled() -> None:
    # below a threshold never prints as the threshold itself, and the reverse
    assert line(0.949).startswith("sufficiency 0.94; early-stop rule not met: sufficiency below")
    assert line(f32(0.95)) == "sufficiency 0.95; sufficient (early-stop rule met)"
    assert "missing 0.16 (needs < 0.15)" in line(0.5, missing=0.1501)
    assert "sufficiency n/a" in line(None)  # type: ignore[arg-type]


class _FixedAssessment:
    """The local controller, with every assessment fixed."""

    name = "fixed-assessment"

    def __init__(self, sufficiency: float, missing: float) -> None:
        self.inner, self.values = LocalController(), (sufficiency, missing)

    def decide(self, requests: Any) -> Any:
        out = list(self.inner.decide(requests))
        for i, r in enumerate(requests):
            if r.purpose == "assessment":
                out[i] = {
                    "sufficiency": NoulAnswer(self.values[0]),
                    "usefulness": NoulAnswer(1.0),
                    "missing": NoulAnswer(self.values[1]),
                    "contradiction": NoulAnswer(0.0),
                }
        return out


@pytest.mark.parametrize(
    ("sufficiency", "missing"),
    # between two float32 neighbours of a threshold: 1 - 0.85 is what the
    # local controller's own arithmetic gives for a missing of 0.15
    [(1.0, 1 - 0.85), (0.94999998, 0.0), (0.9499999, 0.0), (1.0, 0.1499999)],
)
def test_sufficient_and_its_line_agree_with_the_stop_the_core_made(
    sufficiency: float, missing: float
) -> None:
    m = Memory(HashEmbedder(64), _FixedAssessment(sufficiency, missing))
    m.add_batch([f"Maya talked about cello and Ines, note {i}" for i in range(40)])
    r = m.search("who teaches Maya cello", k=5)
    stopped = r.trace["stop_reason"] == "sufficient"
    assert r.sufficient == stopped
    assert ("sufficient (early-stop rule met)" in sufficiency_line(r)) == stopped


def test_a_sufficiency_just_below_its_threshold_never_prints_as_it() -> None:
    # float32 0.95 less one step: rounding away float noise lifts it to 0.95
    below = float(np.nextafter(np.float32(0.95), np.float32(0)))
    got = line(below)
    assert got == "sufficiency 0.94; early-stop rule not met: sufficiency below 0.95", got
    assert line(f32(0.95)).endswith("sufficient (early-stop rule met)")

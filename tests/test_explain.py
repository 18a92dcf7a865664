"""The sufficiency line the CLI and the demo print (jevmem/_explain.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jevmem._explain import sufficiency_line
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

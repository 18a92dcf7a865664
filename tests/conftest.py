from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Property tests are the backbone; keep them deterministic in CI and thorough locally.
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=150, deadline=None)
# a long hunt: HYPOTHESIS_PROFILE=deep pytest tests
settings.register_profile(
    "deep",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)

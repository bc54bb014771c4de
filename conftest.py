"""Settings for every test in the repository: hypothesis profiles, ``ci`` (sized for 2 cores,
the same examples every run, so a red run is the code's doing) by default, ``dev`` and
``thorough`` (``HYPOTHESIS_PROFILE=thorough``, 1,000 random examples: run it to search)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

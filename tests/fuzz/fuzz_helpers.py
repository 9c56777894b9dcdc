"""Settings shared by the fuzz tests: a fixed, derandomized budget; ``SPARSEDP_FUZZ=slow`` runs 10x more."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

SCALE = 10 if os.environ.get("SPARSEDP_FUZZ") == "slow" else 1


def fuzz_settings(n: int):
    """Hypothesis settings for ``n`` cases (times SCALE), reproducible in CI."""
    return settings(max_examples=n * SCALE, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate, Phase.shrink],
                    suppress_health_check=list(HealthCheck))

"""Mechanisms: each takes a SparseHistogram and a calibration and returns a Release."""

from .histogram import Release, SparseHistogram

__all__ = ["Release", "SparseHistogram"]

from .kernel import draw_shared_noise, noise_and_filter  # noqa: E402
from .release import release_histogram  # noqa: E402

__all__ += ["release_histogram", "noise_and_filter", "draw_shared_noise"]

from .elliptical import gaussian_sum, laplace_sum  # noqa: E402
from .mean import plan_mean  # noqa: E402

__all__ += ["gaussian_sum", "laplace_sum", "plan_mean"]

from . import pure  # noqa: E402
from .pure import pure_histogram  # noqa: E402

__all__ += ["pure", "pure_histogram"]

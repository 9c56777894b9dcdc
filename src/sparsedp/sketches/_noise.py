"""The two noise draws the sketches need, taken from :mod:`sparsedp.noise` (never sampled here)."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError
from ..noise import sample_discrete_laplace, sample_laplace


def discrete_laplace(scale, size: int, rng) -> np.ndarray:
    """Exact discrete Laplace, P[X = x] ∝ exp(−|x|/scale), ``scale`` an exact rational (int64 array)."""
    return np.asarray(sample_discrete_laplace(scale, int(size), rng=rng), dtype=np.int64)


def laplace(scale: float, size: int, rng, insecure_float: bool) -> np.ndarray:
    """Continuous Laplace noise: only with ``insecure_float=True`` (floating-point Laplace is attackable)."""
    if not insecure_float:
        raise InvalidParameterError("real-valued data need continuous Laplace noise, which is only available "
                                    "with insecure_float=True; or pass integer counts (exact discrete noise)")
    return np.asarray(sample_laplace(scale, int(size), rng=rng, insecure_float=True), dtype=np.float64)

"""Conversions of a privacy profile δ(ε): the smallest ε at a δ, and the f-DP trade-off curve it implies.

* :func:`epsilon_from_delta` — the smallest ε >= 0 with δ(ε) <= δ for a non-increasing profile, by bisection to
  1e-9 relative, rounded up (so the ε returned is always a valid guarantee at δ).
* :func:`tradeoff_from_profile` — ``f(α) = sup_ε max(0, 1 − δ(ε) − e^ε α, e^{−ε}(1 − δ(ε) − α))``: every
  (ε, δ(ε)) guarantee gives this trade-off lower bound, and so does their pointwise maximum (Dong, Roth & Su,
  "Gaussian Differential Privacy", 2022, arXiv:1905.02383, Prop. 2.12); the supremum is taken over a finite ε
  grid, which keeps it a valid lower bound of the true curve.

Used by the profiles (:mod:`.profiles`), the composable pairs (:mod:`.composition`) and the events
(:mod:`.events`), which all sit above this module.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import numpy.typing as npt

from ..errors import InvalidParameterError
from ._types import FloatArray

__all__ = ["epsilon_from_delta", "tradeoff_from_profile"]

_EPS_GRID = np.concatenate([[0.0], np.geomspace(1e-4, 30.0, 400)])


def tradeoff_from_profile(delta_fn: Callable[[FloatArray], npt.ArrayLike], alpha: npt.ArrayLike,
                          eps_grid: npt.ArrayLike = _EPS_GRID) -> FloatArray:
    """f(α) = max over the ε grid of max(0, 1 − δ(ε) − e^ε α, e^{−ε}(1 − δ(ε) − α)) (Dong–Roth–Su Prop. 2.12).

    Every (ε, δ(ε)) guarantee gives the trade-off lower bound f_{ε,δ}; their pointwise maximum is one too.
    """
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if np.any((a < 0) | (a > 1)):
        raise InvalidParameterError("alpha must lie in [0, 1]")
    eps = np.asarray(eps_grid, dtype=float)
    d = np.atleast_1d(np.asarray(delta_fn(eps), dtype=float))
    out = np.zeros_like(a)
    for e, de in zip(eps, d):
        f1 = 1.0 - de - math.exp(e) * a
        f2 = math.exp(-e) * (1.0 - de - a)
        out = np.maximum(out, np.maximum(f1, f2))
    curve: FloatArray = np.clip(out, 0.0, 1.0 - a)
    return curve


def epsilon_from_delta(delta_of: Callable[[float], float], delta: float, *, hi: float = 200.0) -> float:
    """Smallest ε >= 0 (bisection to 1e-9 relative, rounded up) with ``delta_of(ε) <= delta`` for a
    non-increasing profile ``delta_of``; inf if none below ``hi``."""
    dlt = float(delta)
    if delta_of(0.0) <= dlt:
        return 0.0
    if delta_of(hi) > dlt:
        return math.inf
    lo, up = 0.0, hi
    while up - lo > 1e-9 * max(up, 1e-6):
        mid = 0.5 * (lo + up)
        if delta_of(mid) <= dlt:
            up = mid
        else:
            lo = mid
    return up

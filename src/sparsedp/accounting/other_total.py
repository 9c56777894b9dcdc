"""Calibration of the "other" row (``release(..., other=True)``): the total of the bounded contributions of every
key not released, with discrete Laplace noise.

Contribution model: the release's own bounded histogram of the full keys (each unit at most 1 per key and at most
``l0 = max_groups_per_unit`` keys, uniform keyed choice with its own secret). For every fixed set R of released
keys, ``C_R = Σ_{k ∉ R} h_k`` changes by at most ``l0`` when one unit is added or removed, so ``C_R + Z`` with Z the
discrete Laplace of scale ``t >= l0/ε_o`` is ε_o-DP (pure; Ghosh, Roughgarden & Sundararajan 2009, "Universally
utility-maximizing privacy mechanisms", arXiv:0811.2841, the two-sided geometric law). R is the release's output,
so the pair is (ε + ε_o, δ)-DP by adaptive composition (``docs/proofs/other-row.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .. import _validate as v
from .discrete import dlaplace_variance
from .public_keys import discrete_laplace_scale

__all__ = ["OtherTotalCalibration", "calibrate_other_total"]


@dataclass(frozen=True)
class OtherTotalCalibration:
    """The other row's noise: discrete Laplace of rational ``scale`` t (P[Z = z] ∝ exp(−|z|/t)) at ``epsilon``
    (pure) for the sensitivity ``l0``; ``noise_std`` = √(2α/(1 − α)²), α = exp(−1/t)."""

    epsilon: float
    l0: int
    scale: Fraction
    noise_std: float


def calibrate_other_total(epsilon: float, l0: int) -> OtherTotalCalibration:
    """The discrete Laplace scale ``t >= l0/ε`` with the exact check ``l0/t <= ε``
    (:func:`~.public_keys.discrete_laplace_scale`)."""
    eps = v.epsilon(epsilon)
    k = v.integer("max_groups_per_unit", l0, lo=1)
    t = discrete_laplace_scale(k, eps)
    return OtherTotalCalibration(epsilon=eps, l0=k, scale=t, noise_std=math.sqrt(dlaplace_variance(t)))

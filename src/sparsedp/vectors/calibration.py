"""The noise of a vector sum, fixed before any data is read: sensitivities, the noise scales, the public integer
grid, the expected errors, the public description and the ledger charge.

Source: Lebeda (2023) PhD thesis, Ch. 4 — the elliptical Gaussian (Algorithm 15, per-coordinate scales
b_i ∝ Δ_i^{p/(p+2)}, Lemma 4.8), the isotropic Gaussian of the ℓ2 ball (Algorithm 14) and the parallelotope
Laplace (Algorithm 16) (:mod:`sparsedp.mechanisms.elliptical`); exact noise on a public grid
(:mod:`sparsedp.mechanisms.vector_grid`, ``docs/proofs/vector-sums.md``).

Sensitivities: replace-one Δ_i = upper_i − lower_i (2C for the ℓ2 ball of radius C), add/remove
Δ_i = max(|lower_i|, |upper_i|) (C).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _validate as v
from ..accounting.calibration import Neighbours
from ..errors import InvalidParameterError
from ..accounting.charge import Charge
from ..mechanisms import elliptical as ell
from ..mechanisms.vector_grid import box_grid, l2_grid
from .arguments import Privacy, box
from .results import VectorGuarantee

__all__ = ["SumPlan", "plan_sum", "grid_expected_error", "BOX_CONTRIBUTION"]

BOX_CONTRIBUTION = "each unit's vector (the per-coordinate sum of its rows) clipped to [lower_i, upper_i] per coordinate"


@dataclass(frozen=True, eq=False)
class SumPlan:
    """What a vector sum fixes before reading any data: the relation, the guarantee, the box (``lo``/``hi``) or
    the ℓ2 ball (``max_norm``) and its sensitivities, the noise scales and grid (``None``: float noise), the
    expected errors, the public description and the ledger charge."""

    rel: Neighbours
    pure: bool
    privacy: Privacy
    p: float
    lo: Any
    hi: Any
    max_norm: float | None
    sens: np.ndarray
    scales: np.ndarray
    expected: float
    spherical: float
    grid: Any
    noise_name: str
    guarantee: VectorGuarantee
    charge: Charge


def plan_sum(coords: tuple[str, ...], lower: Any, upper: Any, max_norm: Any, privacy: Privacy, rel: Neighbours,
             pure: bool, p: float, shape: str, insecure_float: bool) -> SumPlan:
    """The data-independent part of a vector sum: the box (or ball) calibrated and priced."""
    d = len(coords)
    if max_norm is not None:
        sens, scales, expected, spherical, contribution, mech_name = _ball(max_norm, lower, upper, pure, d, rel,
                                                                           privacy.sigma_opt, p)
        c, lo, hi = v.positive("max_norm", max_norm), None, None
    else:
        c = None
        lo, hi = box(lower, upper, coords)
        sens, scales, expected, spherical, contribution, mech_name = _box_calibration(lo, hi, rel, pure, privacy, p,
                                                                                      shape, insecure_float)
    grid = None
    if not insecure_float:
        if c is not None:
            grid = l2_grid(c, d, privacy.rho, rel)
        else:
            grid = box_grid(lo, hi, scales, rel, rho=None if pure else privacy.rho,
                            epsilon=privacy.epsilon if pure else None)
        scales = np.array(grid.noise_std) / (math.sqrt(2.0) if pure else 1.0)
    noise_name = ("float " + ("Laplace" if pure else "Gaussian") + " (INSECURE)") if insecure_float else \
        ("discrete Laplace" if pure else "discrete Gaussian") + " per coordinate"
    guarantee = VectorGuarantee(epsilon=privacy.epsilon, delta=privacy.delta,
                                rho=None if (pure or insecure_float) else privacy.rho, neighbours=rel,
                                mechanism=mech_name, noise=noise_name, contribution=contribution)
    charge = Charge(epsilon=privacy.epsilon, delta=privacy.delta, neighbours=rel, mechanism=mech_name.split(" ")[0],
                    rho=guarantee.rho)
    return SumPlan(rel=rel, pure=pure, privacy=privacy, p=p, lo=lo, hi=hi, max_norm=c, sens=sens, scales=scales,
                   expected=expected, spherical=spherical, grid=grid, noise_name=noise_name, guarantee=guarantee,
                   charge=charge)


def grid_expected_error(grid: Any, pure: bool, p: float) -> float:
    """E‖η‖_p^p of the noise actually added on the grid (per-coordinate scale γ_i·s or γ_i·t): thesis Lemma
    4.3/4.7 (Gaussian, m_p Σ σ_i^p) or 4.10 (Laplace, Γ(p+1) Σ s_i^p)."""
    per = np.asarray(grid.noise_std, dtype=float) / (math.sqrt(2.0) if pure else 1.0)
    mom = ell.laplace_moment(p) if pure else ell.gaussian_moment(p)
    return mom * float(np.sum(per[per > 0] ** p))


def _ball(max_norm: Any, lower: Any, upper: Any, pure: bool, d: int, rel: Neighbours, s_opt: float,
          p: float) -> tuple:
    """The ℓ2-ball sum: sensitivities 2C (replace-one) or C, isotropic σ, its expected errors and description."""
    if lower is not None or upper is not None:
        raise InvalidParameterError("give either lower=/upper= (box) or max_norm= (l2 ball), not both")
    if pure:
        raise InvalidParameterError("max_norm (l2 ball) goes with the Gaussian mechanism; the Laplace mechanism "
                                    "needs a box (lower=, upper=)")
    c = v.positive("max_norm", max_norm)
    sens = np.full(d, (2.0 if rel is Neighbours.REPLACE_ONE else 1.0) * c)
    sigma = s_opt * (2.0 if rel is Neighbours.REPLACE_ONE else 1.0) * c
    expected = ell.gaussian_moment(p) * d * sigma ** p
    contribution = f"each unit's vector (the per-coordinate sum of its rows) scaled into the l2 ball of radius {c:g}"
    return sens, np.full(d, sigma), expected, expected, contribution, "spherical-gaussian"


def _box_calibration(lo: np.ndarray, hi: np.ndarray, rel: Neighbours, pure: bool, privacy: Privacy, p: float,
                     shape: str, insecure_float: bool) -> tuple:
    """The box sum: per-coordinate sensitivities, the calibrated scales (Laplace, zCDP Gaussian or float
    Gaussian), their expected errors and description."""
    sens = (hi - lo) if rel is Neighbours.REPLACE_ONE else np.maximum(np.abs(lo), np.abs(hi))
    if not np.any(sens > 0):
        raise InvalidParameterError("every coordinate has sensitivity 0 (lower == upper"
                                    + ("" if rel is Neighbours.REPLACE_ONE else " == 0") + "): nothing to release")
    if pure:
        cal = ell.calibrate_laplace(sens, epsilon=privacy.epsilon, p=p, shape=shape)
    elif privacy.rho is not None and not insecure_float:
        cal = ell.calibrate_gaussian(sens, rho=privacy.rho, p=p, shape=shape)
    else:
        cal = ell.calibrate_gaussian(sens, epsilon=privacy.epsilon, delta=privacy.delta, p=p, shape=shape,
                                     insecure_float=True)
    mech_name = "parallelotope-laplace" if pure else ("spherical-gaussian" if shape == "spherical"
                                                      else f"elliptical-gaussian ({shape} shape, p={p:g})")
    return sens, np.array(cal.scales), cal.expected_error, cal.spherical_error, BOX_CONTRIBUTION, mech_name

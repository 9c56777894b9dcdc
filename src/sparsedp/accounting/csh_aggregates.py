"""Top-k CSH with aggregate columns (Lebeda & Retschmeier (2024) §6, L336–348; After Lebeda & Retschmeier (2024) §3.5).

The paper gives no formula for aggregator columns under CSH ("the same technique could be applied", L344);
this module is the natural extension, written out in ``docs/proofs/aggregates.md`` §5. Columns get independent
exact discrete noise ``N_Z(0, s_k)`` on their grid sums (:mod:`sparsedp.aggregates`), only for released keys;
the count noise is CSH's (rounded continuous, the secure default, or Algorithm 4's discrete noise). Between
add/remove neighbours the columns of at most ``k`` releasable keys move (Lemma 4.1: nested truncated supports
of size <= k), each by at most ``D_k`` grid units; the release event depends on the count noise only, so
δ_inf (Lemma 3.2 / 7.6) is unchanged. Only the add-the-deltas form (Theorem 3.3 / 7.7) is extended.

* Rounded / continuous count noise (Thm 3.3, spec §4.4)::

      δ_gauss <= R · e^κ · f(√(μ_cnt² + m_c + e_c), ε − κ),   κ = e_c/2,
      μ_cnt² = (k + √k)/(4σ²)  [(k + 5√k)/(4σ²) de-biased],  m_c = k Σ D_k²/s_k,  e_c = c·k Σ D_k²/s_k²,
      R = Π_k (1 + ω(s_k c/(s_k + c)))^k      (smoothing Lemma 1 of the proof doc; min over c)

  and δ = δ_gauss + δ_inf with δ_inf = 1 − Φ(τ/(σ(1 + k^{-1/4})))^{k+1}, τ = margin − ½ for rounded CSH.
* Discrete CSH (Algorithm 4, Thm 7.7): the columns add ``ρ_col = k Σ D_k²/(2 s_k)`` (Rényi divergence of
  an integer-shifted discrete Gaussian, proof doc §5) to Lemma 7.5's ρ; δ_gauss is the zCDP conversion.

Sum re-centring (L346–348): subtract the centre per unit, add ``centre × (count estimate)`` after release; for
top-k the count estimate must be the de-biased one (``debias=True``): the truncated count is biased by −t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from .. import _validate as v
from ..errors import InfeasibleError, InvalidTypeError
from ._invert import smallest_ok
from ._types import Scale
from .aggregates import _SMOOTHING, _columns, _weights
from .discrete_histograms import _omega, rational_up
from .gaussian import _delta_core
from .csh import csh_discrete_delta_parts, csh_discrete_scales, csh_rounded_margin
from .zcdp import zcdp_to_dp_delta

__all__ = ["CshJointParts", "CshJointCalibration", "csh_joint_delta_parts", "csh_discrete_joint_delta_parts",
           "csh_column_scales", "calibrate_csh_joint_rounded"]


@dataclass(frozen=True)
class CshJointParts:
    """δ of CSH with aggregate columns: ``gaussian`` (count + columns), ``threshold`` (δ_inf), ``total``."""

    gaussian: float
    threshold: float
    total: float


@dataclass(frozen=True)
class CshJointCalibration:
    """Rounded top-k CSH with columns: count σ (continuous, rounded outputs), integer margin, column scales."""

    epsilon: float
    delta: float
    k: int
    sigma: float
    margin: int
    debias: bool
    column_sigma2s: tuple[Fraction, ...]
    column_sensitivities: tuple[int, ...]
    parts: CshJointParts


def _gauss_with_columns(eps: float, mu_cnt2: float, k: int, ss: list[float], ds: list[int]) -> float:
    cols = [(s, d) for s, d in zip(ss, ds) if d > 0]
    if not cols:
        return float(_delta_core(np.array([math.sqrt(mu_cnt2)]), np.array([eps]))[0])
    m_c = k * sum(d * d / s for s, d in cols)
    best = math.inf
    for c in _SMOOTHING:
        w = [_omega(s * c / (s + c)) for s, _ in cols]
        if max(w) >= 0.5:
            continue
        e_c = c * k * sum(d * d / (s * s) for s, d in cols)
        log_r = k * sum(math.log1p(x) for x in w) + 1e-12
        kappa = 0.5 * e_c
        f = float(_delta_core(np.array([math.sqrt(mu_cnt2 + m_c + e_c)]), np.array([eps - kappa]))[0])
        # R e^κ f, capped at 1 without overflow (e^κ alone can overflow for tiny σ while the product is >= 1)
        big = f > 0 and log_r + kappa + math.log(f) >= 0
        best = min(best, 1.0 if big else math.exp(log_r + kappa) * f)
    if best == math.inf:
        raise InfeasibleError("column noise scales too small for the joint bound; use scales >= 1")
    return min(1.0, best)


def csh_joint_delta_parts(epsilon: float, sigma: float, tau: float, k: int, column_sigma2s: Sequence[Scale],
                          column_sensitivities: Sequence[int], *, debias: bool = False) -> CshJointParts:
    """δ of CSH / top-k CSH (continuous count noise, or rounded at ``tau = margin − ½``) with discrete
    aggregate columns: Theorem 3.3 (Lebeda & Retschmeier (2024), spec §4.4) extended as in the module docstring."""
    eps = v.nonnegative("epsilon", epsilon)
    sig = v.positive("sigma", sigma)
    t = v.positive("tau", tau)
    kk = v.integer("k", k, lo=1)
    ss, ds = _columns(column_sigma2s, column_sensitivities)
    if not isinstance(debias, bool):
        raise InvalidTypeError(f"debias must be a bool, got {debias!r}")
    rk = math.sqrt(kk)
    mu_cnt2 = (kk + (5.0 if debias else 1.0) * rk) / (4.0 * sig * sig)
    gauss = _gauss_with_columns(eps, mu_cnt2, kk, ss, ds)
    from scipy import special

    x = t / (sig * (1.0 + kk ** -0.25))
    thr = float(-math.expm1((kk + 1) * float(special.log_ndtr(x))))
    return CshJointParts(gaussian=gauss, threshold=thr, total=min(1.0, gauss + thr))


def csh_discrete_joint_delta_parts(epsilon: float, sigma: float, tau: float, k: int, column_sigma2s: Sequence[Scale],
                                   column_sensitivities: Sequence[int], conversion: str = "cks", *,
                                   debias: bool = False) -> CshJointParts:
    """Discrete CSH (Lebeda & Retschmeier (2024) Alg. 4 / Thm 7.7) with discrete aggregate columns: ρ = Lemma 7.5's ρ at the
    sampled scales + ``k Σ D_k²/(2 s_k)``; δ_inf of Lemma 7.6 unchanged (:func:`.csh.csh_discrete_delta_parts`).
    ``debias=True``: the released t̃ adds ``4/(2 s_corr)`` more (``docs/proofs/discrete-histograms.md`` §8)."""
    eps = v.nonnegative("epsilon", epsilon)
    kk = v.integer("k", k, lo=1)
    ss, ds = _columns(column_sigma2s, column_sensitivities)
    s_ind, s_corr = (float(x) for x in csh_discrete_scales(sigma, kk))
    rho = 0.5 * (kk / s_ind + (5.0 if debias else 1.0) / s_corr) + kk * sum(d * d / (2.0 * s) for s, d in zip(ss, ds))
    gauss = float(zcdp_to_dp_delta(rho, eps, conversion=conversion))
    thr = csh_discrete_delta_parts(eps, sigma, tau, kk, conversion=conversion)["threshold"]
    return CshJointParts(gaussian=gauss, threshold=thr, total=min(1.0, gauss + thr))


def csh_column_scales(sigma: float, k: int, column_sensitivities: Sequence[int], weights: Sequence[float] | None = None,
                      *, debias: bool = False) -> tuple[Fraction, ...]:
    """Default allocation: column j's μ² over its k rows equals w_j times the count's μ_cnt²:
    ``k D_j²/s_j = w_j μ_cnt²`` (rounded up to a multiple of 2^-20)."""
    sig = v.positive("sigma", sigma)
    kk = v.integer("k", k, lo=1)
    ds = [v.integer(f"column_sensitivities[{i}]", d, lo=1) for i, d in enumerate(column_sensitivities)]
    w = _weights(weights, len(ds))
    mu_cnt2 = (kk + (5.0 if debias else 1.0) * math.sqrt(kk)) / (4.0 * sig * sig)
    return tuple(rational_up(kk * d * d / (wj * mu_cnt2)) for d, wj in zip(ds, w))


def calibrate_csh_joint_rounded(epsilon: float, delta: float, k: int, column_sensitivities: Sequence[int],
                                weights: Sequence[float] | None = None, *,
                                debias: bool = False) -> CshJointCalibration:
    """Rounded top-k CSH with aggregate columns at (ε, δ): σ (on a grid above the smallest σ whose Gaussian
    part fits) and the smallest integer margin m with δ(τ = m − ½) <= δ; the σ giving the smallest m is kept."""
    from scipy import special

    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    kk = v.integer("k", k, lo=1)
    ds = [v.integer(f"column_sensitivities[{i}]", d, lo=1) for i, d in enumerate(column_sensitivities)]
    w = _weights(weights, len(ds))

    def gauss(s: float) -> float:
        try:
            return csh_joint_delta_parts(eps, s, 1.0, kk, csh_column_scales(s, kk, ds, w, debias=debias), ds,
                                         debias=debias).gaussian
        except InfeasibleError:  # column scales below the smoothing bound's range: treat as infeasible
            return 1.0

    s_star = smallest_ok(lambda s: gauss(s) < dlt, 1e-3, 1.0, rel_tol=1e-9, what="sigma")

    def margin_at(s: float) -> int:
        g = gauss(s)
        if g >= dlt:
            return 1 << 62
        budget = dlt - g
        x = float(-special.ndtri(-math.expm1(math.log1p(-budget) / (kk + 1))))
        m = csh_rounded_margin(max(x * s * (1.0 + kk ** -0.25), 1e-9))
        sks = csh_column_scales(s, kk, ds, w, debias=debias)
        while csh_joint_delta_parts(eps, s, m - 0.5, kk, sks, ds, debias=debias).total > dlt:
            m += 1
        return m

    grid = s_star * (1.0 + np.geomspace(1e-4, 1.0, 40))
    ms = [margin_at(float(s)) for s in grid]
    i = int(np.argmin(ms))
    sigma = float(grid[i])
    sks = csh_column_scales(sigma, kk, ds, w, debias=debias)
    parts = csh_joint_delta_parts(eps, sigma, ms[i] - 0.5, kk, sks, ds, debias=debias)
    return CshJointCalibration(epsilon=eps, delta=dlt, k=kk, sigma=sigma, margin=int(ms[i]), debias=debias,
                               column_sigma2s=sks, column_sensitivities=tuple(ds), parts=parts)

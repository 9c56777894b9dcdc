"""The Gaussian mechanism's exact privacy profile and its inverse.

Balle & Wang (2018), Theorem 8 (restated as Lemma 2.5 in ``shared/specs/seed-000-csh.md`` §2.1 and
Lemma 2.4 of seed 001): a mechanism adding N(0, σ²) to a query of ℓ2 sensitivity Δ satisfies (ε, δ)-DP
for every real ε with

    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ),      μ = Δ/σ,

and this δ is tight. Evaluated in log space (``log_ndtr`` and ``expm1``) so tiny δ keep full relative
precision; the μ → 0 limit is max(0, 1 − e^ε).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from .. import _validate as v
from ..errors import InfeasibleError


def _log_gaussian_delta(mu: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """log δ(ε) for μ > 0 (arrays broadcast); −inf where δ underflows to 0."""
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    la = special.log_ndtr(a)
    lb = special.log_ndtr(b)
    d = eps + lb - la  # < 0 always (b < a), so -expm1(d) in (0, 1]
    with np.errstate(divide="ignore"):
        return la + np.log(-np.expm1(d))


def gaussian_delta(mu, epsilon):
    """Tight δ(ε) of the Gaussian mechanism with μ = sensitivity/σ (Balle–Wang 2018, Thm 8).

    Vectorised over ``mu`` and ``epsilon`` (numpy broadcasting); any real ε is allowed. ``mu`` must be
    >= 0; μ = 0 gives the limit max(0, 1 − e^ε). Returns a float for scalar inputs.
    """
    mu_a = np.asarray(mu, dtype=float)
    eps_a = np.asarray(epsilon, dtype=float)
    if not np.all(np.isfinite(mu_a)) or np.any(mu_a < 0):
        raise v.InvalidParameterError(f"mu must be finite and >= 0, got {mu!r}")
    if not np.all(np.isfinite(eps_a)):
        raise v.InvalidParameterError(f"epsilon must be finite, got {epsilon!r}")
    mu_b, eps_b = np.broadcast_arrays(mu_a, eps_a)
    out = np.empty(mu_b.shape, dtype=float)
    zero = mu_b == 0
    out[zero] = np.maximum(0.0, -np.expm1(eps_b[zero]))
    pos = ~zero
    out[pos] = np.exp(_log_gaussian_delta(mu_b[pos], eps_b[pos]))
    return float(out) if out.ndim == 0 else out


def gaussian_sigma(epsilon, delta, sensitivity: float = 1.0) -> float:
    """Smallest σ such that the Gaussian mechanism with ℓ2 sensitivity ``sensitivity`` is (ε, δ)-DP.

    Inverts :func:`gaussian_delta` (strictly decreasing in σ) by root finding on log σ; the result is
    nudged upward so that ``gaussian_delta(sensitivity/σ, ε) <= δ`` holds in floating point
    (conservative rounding).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    sens = v.positive("sensitivity", sensitivity)
    log_target = math.log(dlt)

    def g(log_mu: float) -> float:  # increasing in mu
        return float(_log_gaussian_delta(np.float64(math.exp(log_mu)), np.float64(eps))) - log_target

    lo, hi = -60.0, 1.0
    while g(hi) < 0:
        hi += 1.0
        if hi > 10:  # mu > e^10 would be needed: delta essentially 1
            raise InfeasibleError(f"no sigma reaches delta={dlt} at epsilon={eps}")
    log_mu = optimize.brentq(g, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    mu = math.exp(log_mu)
    while gaussian_delta(mu, eps) > dlt:
        mu = math.nextafter(mu, 0.0)
    return sens / mu

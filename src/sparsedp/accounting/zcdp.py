"""Zero-concentrated DP (ρ-zCDP) and its conversion to (ε, δ)-DP.

Two conversions are offered (``conversion=``):

* ``"bs"`` — Bun & Steinke (TCC 2016), Proposition 1.3; Lebeda & Retschmeier (2024) Lemma 7.3: ρ-zCDP implies
  (ρ + 2√(ρ log(1/δ)), δ)-DP. Inverted: δ = exp(−(ε − ρ)²/(4ρ)) for ε > ρ, and 1 otherwise.
* ``"cks"`` (default, tighter) — Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
  Privacy" (NeurIPS 2020, arXiv 2004.00010), Corollary 13 (from their Proposition 12); Lebeda & Retschmeier (2024) §3.6:

      δ = inf_{α>1}  exp((α−1)(αρ − ε)) / (α−1) · (1 − 1/α)^α.

  The log of the objective, L(α) = (α−1)(αρ−ε) + α·log1p(−1/α) − log(α−1), is strictly convex with
  L'(α) = (2α−1)ρ − ε + log(1 − 1/α), which is strictly increasing from −∞ (α→1⁺) to +∞, so the
  minimiser is the unique root of L'. Every α gives a valid δ, so an inexact root is still safe.
  Inverting for ε needs no root finding at all: for each α the bound reads
  ε(α) = αρ + (log(1/δ) + (α−1)·log1p(−1/α) − log α)/(α−1), valid for every α > 1.

A Gaussian mechanism with ℓ2 sensitivity Δ and noise σ is Δ²/(2σ²)-zCDP (Bun–Steinke 2016, Prop. 1.6);
for that mechanism alone :func:`sparsedp.accounting.gaussian_delta` is exact and tighter than either
conversion. The conversions are for zCDP guarantees of other origin (discrete Gaussian, composition).
"""

from __future__ import annotations

import math


from .. import _validate as v
from ._brentq import brentq

_CONVERSIONS = ("cks", "bs")


def gaussian_rho(sigma: float, sensitivity: float = 1.0) -> float:
    """ρ = Δ²/(2σ²) of the Gaussian mechanism (Bun & Steinke 2016, Proposition 1.6).

    Also the ρ of the discrete Gaussian N_ℤ(0, σ²) with integer sensitivity Δ (Canonne–Kamath–Steinke
    2020, Theorem 4).
    """
    s = v.positive("sigma", sigma)
    d = v.positive("sensitivity", sensitivity)
    return (d / s) ** 2 / 2.0


def _cks_log_objective(t: float, rho: float, eps: float) -> float:
    """L(α) at α = 1 + e^t (t = log(α − 1) keeps α − 1 exact when α is close to 1)."""
    am1 = math.exp(t)
    return am1 * ((1.0 + am1) * rho - eps) + (1.0 + am1) * (t - math.log1p(am1)) - t


def _cks_t(rho: float, eps: float) -> float:
    """t = log(α − 1) at the minimiser of the CKS objective: root of (2α−1)ρ − ε + log(1 − 1/α)."""

    def g(t: float) -> float:
        am1 = math.exp(t)  # α − 1
        # log(1 − 1/α) = log((α−1)/α) = t − log1p(α − 1)
        return (2.0 * am1 + 1.0) * rho - eps + t - math.log1p(am1)

    lo, hi = -5.0, 1.0
    while g(lo) > 0:
        lo -= 10.0
        if lo < -700:  # ρ is astronomically larger than ε: δ is 1 for practical purposes
            return lo + 10.0
    while g(hi) < 0:
        lo = hi
        hi += 2.0
    return brentq(g, lo, hi, xtol=1e-14, rtol=8 * 2.2e-16, maxiter=300)


def zcdp_to_dp_delta(rho: float, epsilon: float, conversion: str = "cks") -> float:
    """δ such that ρ-zCDP implies (ε, δ)-DP.

    ``conversion="cks"``: Canonne–Kamath–Steinke 2020, Corollary 13 (optimal over α, see module doc).
    ``conversion="bs"``: Bun–Steinke 2016, Proposition 1.3 inverted (Lebeda & Retschmeier (2024) Lemma 7.3).
    ``epsilon`` >= 0; ``rho`` >= 0 (ρ = 0 gives δ = 0). Result clipped to [0, 1].
    """
    r = v.nonnegative("rho", rho)
    eps = v.nonnegative("epsilon", epsilon)
    conv = v.choice("conversion", conversion, _CONVERSIONS)
    if r == 0.0:
        return 0.0
    if conv == "bs":
        if eps <= r:
            return 1.0
        return math.exp(-((eps - r) ** 2) / (4.0 * r))
    log_d = _cks_log_objective(_cks_t(r, eps), r, eps)
    return min(1.0, math.exp(log_d))


def zcdp_to_dp_epsilon(rho: float, delta: float, conversion: str = "cks") -> float:
    """Smallest ε (>= 0) such that ρ-zCDP implies (ε, δ)-DP under the chosen conversion.

    ``conversion="bs"``: ε = ρ + 2√(ρ log(1/δ)) (Bun–Steinke 2016, Proposition 1.3; Lebeda & Retschmeier (2024) Lemma 7.3).
    ``conversion="cks"``: the root of δ_cks(ε) = δ (Canonne–Kamath–Steinke 2020, Corollary 13),
    equivalently inf_{α>1} αρ + (log(1/δ) + (α−1) log(1−1/α) − log α)/(α−1); the result is checked
    against :func:`zcdp_to_dp_delta` and nudged up if rounding requires.
    """
    r = v.nonnegative("rho", rho)
    dlt = v.delta(delta)
    conv = v.choice("conversion", conversion, _CONVERSIONS)
    if r == 0.0:
        return 0.0
    lid = -math.log(dlt)
    if conv == "bs":
        return r + 2.0 * math.sqrt(r * lid)
    if zcdp_to_dp_delta(r, 0.0, "cks") <= dlt:
        return 0.0
    # log δ_cks(ε) is continuous and strictly decreasing in ε, and δ_cks <= δ_bs, so the root lies in
    # [0, ε_bs]; solve on the log scale, then nudge up so the check below holds in floating point.
    log_target = math.log(dlt)

    def h(e: float) -> float:
        return _cks_log_objective(_cks_t(r, e), r, e) - log_target

    hi = r + 2.0 * math.sqrt(r * lid)
    while h(hi) > 0:
        hi *= 2.0
    eps = brentq(h, 0.0, hi, xtol=1e-15, rtol=8 * 2.2e-16, maxiter=300)
    while zcdp_to_dp_delta(r, eps, "cks") > dlt:
        eps = math.nextafter(eps, math.inf) if eps > 0 else 5e-324
        eps *= 1.0 + 1e-15
    return eps

"""Privacy accounting of the Gaussian Sparse Histogram Mechanism (GSHM) and its calibrations.

The GSHM (Karrer et al. (2022) Algorithm 1; Lebeda & Retschmeier (2024) Algorithm 1) adds N(0, σ²) to each non-empty group's count
(and N(0, Σ) to optional aggregate columns) and releases the groups whose count is at least the
pre-threshold and whose noisy count reaches pre-threshold + τ. Every analysis depends on the margin
τ = τ* − τ_pre only (Karrer et al. (2022) §1, P5). Neighbours: add/remove one unit; each unit touches at most
``l0`` groups (Karrer's C_u, Lebeda & Retschmeier (2024)'s k), each by at most 1.

Notation (Karrer et al. (2022) §0): x = τ/σ, log Φ(x) = ``log_ndtr(x)``, μ(k) = √(k/σ² + k·μ_o²) (Eq. 5.6), where
``mu_o2`` is the per-group Mahalanobis sensitivity μ_o² of the aggregate columns (Eq. 5.1; 0 for counts
only), and f(μ, ε) is the Gaussian profile of :mod:`.gaussian`.

Three analyses (``analysis=``):

* ``"add"`` — add the deltas: δ = f(μ(l0), ε) + 1 − Φ(x)^{l0} (Karrer et al. (2022) Thm 4.1 and Cor. 5.4.1
  Eq. 5.9; Lebeda & Retschmeier (2024) Lemma 2.6). Clipped to 1.
* ``"exact"`` — Karrer, Kifer, Wilkins & Zhang, Theorem 5.4 / Eq. 5.8 (Karrer et al. (2022) §4.6; Lebeda & Retschmeier (2024)
  Lemma 2.7): with a = number of at-threshold rows, β = Φ(x)^a,

      δ = max[ 1 − Φ(x)^{l0},
               max_{a=0..l0−1} 1 − β + β·f(μ(l0−a), ε − a·log Φ(x)),
               max_{a=0..l0−1} f(μ(l0−a), ε + a·log Φ(x)) ].

  The maximum is evaluated in full over all a (O(l0), vectorised, in chunks for large l0); the
  lower bound max(δ_inf, δ_G) of Cor. 5.4.1 is never assumed to be attained.
* ``"fdp"`` — the f-DP bound of Theorem 7.1 / Eq. 7.1 (Karrer et al. (2022) §7.2):
  δ = max_{a=0..l0} 1 − Φ(x)^a + Φ(x)^a·f(μ(l0−a), ε), with f(0, ε) = 0 for ε >= 0.

Ordering (Karrer et al. (2022) P1–P3): max(δ_inf, δ_G) <= δ_exact <= δ_fdp <= δ_add.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from ._special import special

from .. import _validate as v
from ..errors import InfeasibleError
from ._invert import smallest_ok
from .gaussian import _delta_core, _gaussian_mu

ANALYSES = ("exact", "add", "fdp")

#: number of at-threshold counts a processed per vectorised block (bounds memory for huge l0)
CHUNK = 1 << 18


# ---------------------------------------------------------------------------------------------------
# forward evaluation (no validation; arguments already checked)

def _mu_scale(sigma: float, mu_o2: float) -> float:
    """μ(k)² / k = 1/σ² + μ_o²."""
    return 1.0 / (sigma * sigma) + mu_o2


def _gauss_part(eps: float, sigma: float, l0: int, mu_o2: float) -> float:
    """δ_G = f(μ(l0), ε) (Eq. 4.1 / 5.9)."""
    mu = math.sqrt(l0 * _mu_scale(sigma, mu_o2))
    return float(_delta_core(np.array([mu]), np.array([eps]))[0])


def _inf_part(sigma: float, tau: float, l0: int) -> float:
    """δ_inf = 1 − Φ(τ/σ)^{l0} = −expm1(l0·log Φ(τ/σ)) (Eq. 5.9), accurate when Φ ≈ 1."""
    return float(-math.expm1(l0 * special.log_ndtr(tau / sigma)))


def _profile(eps: float, sigma: float, tau: float, l0: int, mu_o2: float, analysis: str) -> tuple[float, int]:
    """(δ, worst a) for analysis "exact" (Eq. 5.8) or "fdp" (Eq. 7.1); a = l0 is the δ_inf term."""
    lphi = float(special.log_ndtr(tau / sigma))
    best = float(-math.expm1(l0 * lphi))  # T1 = δ_inf, the a = l0 (a_+ = 0) configuration
    best_a = l0
    scale = _mu_scale(sigma, mu_o2)
    for start in range(0, l0, CHUNK):
        a = np.arange(start, min(l0, start + CHUNK), dtype=float)
        mu = np.sqrt((l0 - a) * scale)
        lbeta = a * lphi  # log β <= 0
        if analysis == "exact":
            inv_mu = 1.0 / mu
            t2 = _delta_core(mu, eps - lbeta, inv_mu)
            t2 *= np.exp(lbeta)
            t2 -= np.expm1(lbeta)
            t3 = _delta_core(mu, eps + lbeta, inv_mu)
            i2, i3 = int(np.argmax(t2)), int(np.argmax(t3))
            cand: tuple[tuple[float, int], ...] = ((float(t2[i2]), i2), (float(t3[i3]), i3))
        else:
            tf = -np.expm1(lbeta) + np.exp(lbeta) * _delta_core(mu, np.full_like(mu, eps))
            i = int(np.argmax(tf))
            cand = ((float(tf[i]), i),)
        for val, i in cand:
            if val > best:
                best, best_a = val, start + i
    return min(best, 1.0), best_a


def _delta(eps: float, sigma: float, tau: float, l0: int, mu_o2: float, analysis: str) -> float:
    if analysis == "add":
        return min(1.0, _gauss_part(eps, sigma, l0, mu_o2) + _inf_part(sigma, tau, l0))
    return _profile(eps, sigma, tau, l0, mu_o2, analysis)[0]


def _check(epsilon: float, sigma: float, tau: float, l0: int, analysis: str, mu_o2: float) -> tuple[float, float,
           float, int, str, float]:
    return (v.nonnegative("epsilon", epsilon), v.positive("sigma", sigma), v.nonnegative("tau", tau),
            v.integer("l0", l0, lo=1), v.choice("analysis", analysis, ANALYSES),
            v.nonnegative("mu_o2", mu_o2))


def gshm_delta(epsilon: float, sigma: float, tau: float, l0: int, analysis: str = "exact", mu_o2: float = 0.0) -> float:
    """δ(ε) of the GSHM with noise σ, margin τ and at most ``l0`` groups per unit.

    ``analysis="exact"``: Karrer et al., Theorem 5.4 / Eq. 5.8 (Karrer et al. (2022) §4.6; Lebeda & Retschmeier (2024) Lemma 2.7),
    the tight profile, full O(l0) maximum. ``"add"``: add-the-deltas, Karrer et al. (2022) Thm 4.1 / Cor. 5.4.1
    Eq. 5.9 (Lebeda & Retschmeier (2024) Lemma 2.6), clipped to 1. ``"fdp"``: Karrer et al. (2022) Theorem 7.1 / Eq. 7.1.
    ``mu_o2`` is the aggregate columns' Mahalanobis sensitivity μ_o² (Eq. 5.1). ε >= 0, τ >= 0.
    """
    eps, s, t, k, an, mo = _check(epsilon, sigma, tau, l0, analysis, mu_o2)
    return _delta(eps, s, t, k, mo, an)


def gshm_delta_parts(epsilon: float, sigma: float, tau: float, l0: int, analysis: str = "exact",
                     mu_o2: float = 0.0) -> dict[str, float]:
    """δ and its named parts, for ``Calibration.delta_parts``.

    Keys: ``"gaussian"`` = δ_G = f(μ(l0), ε) (rows above the threshold, Eq. 5.9), ``"threshold"`` =
    δ_inf = 1 − Φ(τ/σ)^{l0} (a unit's rows at the threshold get released, Eq. 5.9), ``"total"`` = the
    analysis' δ (as :func:`gshm_delta`). For "add", total = min(1, gaussian + threshold). For "exact"
    and "fdp", max(gaussian, threshold) <= total < gaussian + threshold (Cor. 5.4.1) and the extra key
    ``"worst_at_threshold_rows"`` is the maximising a = a_= (l0 means the δ_inf term).
    """
    eps, s, t, k, an, mo = _check(epsilon, sigma, tau, l0, analysis, mu_o2)
    parts = {"gaussian": _gauss_part(eps, s, k, mo), "threshold": _inf_part(s, t, k)}
    if an == "add":
        parts["total"] = min(1.0, parts["gaussian"] + parts["threshold"])
    else:
        total, a = _profile(eps, s, t, k, mo, an)
        parts["total"] = total
        parts["worst_at_threshold_rows"] = float(a)
    return parts


# ---------------------------------------------------------------------------------------------------
# inversions

def _per_row_budget(d: float, l0: int) -> float:
    """q(d) = 1 − (1 − d)^{1/l0}: the per-row leak that makes 1 − Φ(x)^{l0} equal d (Karrer et al. (2022) §3.3)."""
    return float(-math.expm1(math.log1p(-d) / l0))


def _x_for_inf(d: float, l0: int) -> float:
    """Smallest x >= 0 with 1 − Φ(x)^{l0} <= d (up to rounding): Q^{-1}(q(d)), tail form ``-ndtri``."""
    if d >= 1.0:
        return 0.0
    return max(0.0, float(-special.ndtri(_per_row_budget(d, l0))))


def _nudge_up(ok: Callable[[float], bool], x: float, what: str) -> float:
    """Smallest representable step up from x (geometric, a few ulps at first) until ``ok`` holds."""
    step = 4.0 * 2.220446049250313e-16
    x = float(x)
    for _ in range(200):
        if ok(x):
            return x
        x = x * (1.0 + step) if x > 0 else step
        step *= 2.0
    raise InfeasibleError(f"could not verify the {what} found (numerical trouble); please report")


def _sigma_g(eps: float, dlt: float, l0: int, mu_o2: float) -> float:
    """Smallest σ with f(μ(l0), ε) <= δ (analytic Gaussian calibration, Karrer et al. (2022) §5.3 item 2)."""
    mu_star = _gaussian_mu(eps, dlt)
    room = mu_star * mu_star / l0 - mu_o2
    if room <= 0:
        raise InfeasibleError(
            f"the aggregate columns alone exceed the budget: with l0={l0} and mu_o2={mu_o2:g} the Gaussian "
            f"part f(sqrt(l0*mu_o2), epsilon={eps:g}) = {_gauss_part(eps, math.inf, l0, mu_o2):.6g} is above "
            f"delta={dlt:g} for every sigma; add more noise to the aggregates (smaller mu_o2), or raise "
            "epsilon or delta")
    sigma = 1.0 / math.sqrt(room)
    while _gauss_part(eps, sigma, l0, mu_o2) > dlt:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def _tau_fdp(eps: float, dlt: float, sigma: float, l0: int, mu_o2: float) -> float:
    """Closed-form smallest τ for Eq. 7.1 (given f(μ(l0), ε) <= δ).

    For a >= 1 the term 1 − Φ(x)^a (1 − f_a) <= δ iff a·log Φ(x) >= log1p(−δ) − log1p(−f_a), with
    f_a = f(μ(l0−a), ε) independent of x; so log Φ(x) must be at least the largest right side / a.
    """
    need = math.log1p(-dlt) / l0  # the a = l0 term, f(0, ε) = 0
    scale = _mu_scale(sigma, mu_o2)
    for start in range(1, l0, CHUNK):  # a = 1 .. l0−1
        aa = np.arange(start, min(l0, start + CHUNK), dtype=float)
        fa = _delta_core(np.sqrt((l0 - aa) * scale), np.full_like(aa, eps))
        need = max(need, float(np.max((math.log1p(-dlt) - np.log1p(-fa)) / aa)))
    if need >= 0.0:  # cannot happen when f(μ(l0), ε) <= δ; kept as a guard
        return math.inf
    return max(0.0, float(-special.ndtri(-math.expm1(need))) * sigma)


def _smallest_tau(eps: float, dlt: float, sigma: float, l0: int, mu_o2: float, analysis: str) -> float:
    """Smallest margin τ with δ(τ) <= δ at this σ (validated inputs); raises InfeasibleError."""
    dg = _gauss_part(eps, sigma, l0, mu_o2)
    if dg > dlt or (analysis == "add" and dg >= dlt):
        raise InfeasibleError(
            f"delta={dlt:g} is {'not above' if dg <= dlt else 'below'} the Gaussian part alone "
            f"({dg:.6g} at sigma={sigma:.10g}, epsilon={eps:g}, l0={l0}); no threshold can fix that: "
            "raise sigma or delta")

    def ok(t: float) -> bool:
        return _delta(eps, sigma, t, l0, mu_o2, analysis) <= dlt

    if analysis == "add":
        cand = sigma * _x_for_inf(dlt - dg, l0)
        return _nudge_up(ok, cand, "threshold margin")
    if analysis == "fdp":
        cand = _tau_fdp(eps, dlt, sigma, l0, mu_o2)
        return _nudge_up(ok, cand, "threshold margin")
    # exact: the δ_inf constraint gives a lower end that is attained in every case seen (Karrer et al. (2022) §5.3)
    lo = sigma * _x_for_inf(dlt, l0)
    for step in (0.0, 1e-15, 1e-14, 1e-13, 1e-12):
        cand = lo * (1.0 + step)
        if ok(cand):
            return cand
    hi = sigma * _x_for_inf(dlt - dg, l0) if dg < dlt else 2.0 * max(lo, sigma)
    hi = max(hi, lo * (1.0 + 1e-9), sigma * 1e-9)
    return smallest_ok(ok, max(lo, sigma * 1e-12), hi, rel_tol=1e-12, what="threshold margin")


def gshm_tau(epsilon: float, delta: float, sigma: float, l0: int, analysis: str = "exact", mu_o2: float = 0.0) -> float:
    """Smallest margin τ (threshold − pre-threshold) making the GSHM (ε, δ)-DP at noise σ.

    Inverts :func:`gshm_delta` in τ, in which it is non-increasing (Karrer et al. (2022) §5.2, §5.3 item 1):
    "add" in closed form σ·Q^{-1}(q(δ − δ_G)) (§3.3), "fdp" in closed form from Eq. 7.1, "exact" from
    the lower end σ·Q^{-1}(q(δ)) of Cor. 5.4.1, verified against the full Eq. 5.8 and bisected upward
    if it does not hold. The returned τ always satisfies ``gshm_delta(...) <= delta`` in floating
    point. Raises :class:`InfeasibleError` if the Gaussian part alone exceeds δ (raise σ).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    s = v.positive("sigma", sigma)
    k = v.integer("l0", l0, lo=1)
    an = v.choice("analysis", analysis, ANALYSES)
    mo = v.nonnegative("mu_o2", mu_o2)
    return float(_smallest_tau(eps, dlt, s, k, mo, an))


def gshm_sigma(epsilon: float, delta: float, tau: float, l0: int, analysis: str = "exact", mu_o2: float = 0.0, *,
               grid: int = 48) -> float:
    """Smallest σ making the GSHM with margin τ (ε, δ)-DP (Karrer et al. (2022) §5.3 item 3).

    δ is not monotone in σ at fixed τ (the Gaussian part falls, δ_inf rises), so: the feasible σ lie
    in [σ_G, τ/Q^{-1}(q(δ))] (σ_G from the Gaussian part, the right end from δ_inf); return σ_G if it
    works, else scan ``grid`` geometric points of that interval for the first feasible one and bisect
    down to the boundary before it. The result satisfies ``gshm_delta(...) <= delta``.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    t = v.nonnegative("tau", tau)
    k = v.integer("l0", l0, lo=1)
    an = v.choice("analysis", analysis, ANALYSES)
    mo = v.nonnegative("mu_o2", mu_o2)
    grid = v.integer("grid", grid, lo=2)
    sg = _sigma_g(eps, dlt, k, mo)

    def ok(s: float) -> bool:
        return _delta(eps, s, t, k, mo, an) <= dlt

    if an != "add" and ok(sg):
        return float(sg)
    x_d = _x_for_inf(dlt, k)
    s_hi = t / x_d if x_d > 0 else 1e6 * sg
    if s_hi <= sg:
        raise InfeasibleError(
            f"margin tau={t:g} is too small: at the smallest sigma the Gaussian part allows ({sg:.10g}), "
            f"the threshold part 1 - Phi(tau/sigma)^l0 = {_inf_part(sg, t, k):.10g} already exceeds "
            f"delta={dlt:g}; raise tau or delta")
    pts = sg * np.exp(np.linspace(0.0, math.log(s_hi / sg), grid + 1)[1:])
    prev = sg
    for s in pts:
        if ok(float(s)):
            return float(_bisect_sigma(ok, prev, float(s)))
        prev = float(s)
    # the feasible set, if any, is narrower than the grid: look for the least-δ σ before giving up
    from scipy import optimize  # imported on use: scipy.optimize costs 0.3–1 s of start-up
    res = optimize.minimize_scalar(lambda u: _delta(eps, math.exp(u), t, k, mo, an),
                                   bounds=(math.log(sg), math.log(s_hi)), method="bounded",
                                   options={"xatol": 1e-10})
    s_best = math.exp(float(res.x))
    if ok(s_best):
        return float(_bisect_sigma(ok, sg, s_best))
    raise InfeasibleError(
        f"no sigma makes margin tau={t:g} ({an}) reach delta={dlt:g} at epsilon={eps:g}, l0={k}: the "
        f"smallest delta found is {float(res.fun):.6g} at sigma={s_best:.6g}; raise tau or delta")


def _bisect_sigma(ok: Callable[[float], bool], bad: float, good: float) -> float:
    """Bisect between an infeasible and a feasible σ; returns a feasible σ within 1e-12 relative."""
    if ok(bad):
        return bad
    while good - bad > 1e-12 * good:
        mid = 0.5 * (bad + good)
        if mid <= bad or mid >= good:
            break
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good


def gshm_epsilon(sigma: float, tau: float, delta: float, l0: int, analysis: str = "exact", mu_o2: float = 0.0) -> float:
    """Smallest ε >= 0 such that the GSHM with noise σ and margin τ is (ε, δ)-DP (Karrer et al. (2022) §5.3 item 4).

    δ(ε) is non-increasing in ε and tends to δ_inf = 1 − Φ(τ/σ)^{l0} as ε → ∞ (P9), so δ must exceed
    δ_inf. Bisection to 1e-12 relative; the returned ε satisfies ``gshm_delta(...) <= delta``.
    """
    s = v.positive("sigma", sigma)
    t = v.nonnegative("tau", tau)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    an = v.choice("analysis", analysis, ANALYSES)
    mo = v.nonnegative("mu_o2", mu_o2)
    d_inf = _inf_part(s, t, k)
    if d_inf >= dlt:
        raise InfeasibleError(
            f"delta={dlt:g} is not above the threshold part 1 - Phi(tau/sigma)^l0 = {d_inf:.10g} (sigma={s:g}, "
            f"tau={t:g}, l0={k}), which no epsilon removes; raise tau or delta")

    def ok(e: float) -> bool:
        return _delta(e, s, t, k, mo, an) <= dlt

    if ok(0.0):
        return 0.0
    return float(smallest_ok(ok, 1e-12, 1.0, rel_tol=1e-12, max_hi=1e6, what="epsilon"))


def _minimise_over_sigma(tau_at: Callable[[float], float], sg: float) -> tuple[float, float]:
    """Minimise τ(σ) over σ > σ_G (unimodal in every case seen, Lebeda & Retschmeier (2024) §4.9(b) item 3).

    σ = σ_G·(1 + e^u); coarse grid in u, then bounded Brent around the best grid point; the upper end
    doubles while the best point sits on it.
    """
    u_hi = 0.0
    while True:
        us = np.linspace(-20.0, u_hi, 41)
        taus = np.array([tau_at(sg * (1.0 + math.exp(u))) for u in us])
        i = int(np.argmin(taus))
        if i < len(us) - 1 or u_hi > 12:
            break
        u_hi += 3.0
    if not np.isfinite(taus[i]):
        raise InfeasibleError("no sigma gives a finite threshold")
    lo, hi = us[max(i - 1, 0)], us[min(i + 1, len(us) - 1)]
    from scipy import optimize  # imported on use: scipy.optimize costs 0.3–1 s of start-up
    res = optimize.minimize_scalar(lambda u: tau_at(sg * (1.0 + math.exp(u))), bounds=(lo, hi),
                                   method="bounded", options={"xatol": 1e-7})
    u_best = float(res.x) if res.fun <= taus[i] else float(us[i])
    return sg * (1.0 + math.exp(u_best)), min(float(res.fun), float(taus[i]))


def gshm_calibrate(epsilon: float, delta: float, l0: int, analysis: str = "exact", mu_o2: float = 0.0) -> tuple[float,
                   float]:
    """Joint calibration: the (σ, τ) with the smallest margin τ making the GSHM (ε, δ)-DP.

    Every analysis needs σ >= σ_G, the analytic-Gaussian σ for sensitivity μ(l0) (Karrer et al. (2022) §5.3
    item 2), and every τ satisfies τ >= σ·Q^{-1}(q(δ)) (the δ_inf part). "exact": at σ = σ_G that
    bound is attained in every case seen (Karrer et al. (2022) §6.1: "no trade-off"; Lebeda & Retschmeier (2024) §4.9(b) item 2), so
    it is the global minimum; this is verified with the full Eq. 5.8 and, should it ever fail, τ(σ) is
    minimised numerically instead. "add" and "fdp": τ(σ) is minimised numerically over σ > σ_G (seed
    000 §4.9(b) item 3). Returns (σ, τ); τ is the smallest margin at that σ (:func:`gshm_tau`).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    an = v.choice("analysis", analysis, ANALYSES)
    mo = v.nonnegative("mu_o2", mu_o2)
    sg = _sigma_g(eps, dlt, k, mo)
    x_d = _x_for_inf(dlt, k)
    if an != "add":
        tau = _smallest_tau(eps, dlt, sg, k, mo, an)
        if tau <= sg * x_d * (1.0 + 1e-9):  # the lower bound over all σ >= σ_G is attained
            return float(sg), float(tau)

    def tau_at(s: float) -> float:
        try:
            return _smallest_tau(eps, dlt, s, k, mo, an)
        except InfeasibleError:
            return math.inf

    s_best, _ = _minimise_over_sigma(tau_at, sg)
    return float(s_best), float(_smallest_tau(eps, dlt, s_best, k, mo, an))

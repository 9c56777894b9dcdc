"""Privacy accountants of the Correlated Stability Histogram (CSH) and their inversions.

Source: Lebeda & Retschmeier, "The Correlated Gaussian Sparse Histogram Mechanism" (arXiv 2412.10357),
specified in Lebeda & Retschmeier (2024) (cited below as "spec §x").

CSH (Algorithm 2) adds one shared ``Z_corr ~ N(0, σ²/√k)`` and an independent ``Z_i ~ N(0, σ²)`` to every
non-zero count of a **k-sparse monotonic histogram** (Def. 3.1: every dataset has at most ``k`` non-zero
counts, and between add/remove neighbours all counts move by +1 or all by −1, e.g. a merged Misra–Gries
sketch of size ``k`` or the output of the top-k truncation of Algorithm 3). It releases the noisy counts
``> 1 + τ`` (strict); ``tau`` here is that margin ``τ``.

With ``BW(Δ, σ, ε)`` the Balle–Wang δ of a Gaussian with ℓ2 sensitivity Δ (:func:`gaussian_delta` at μ = Δ/σ)
and ``x_C = τ / (σ (1 + k^{-1/4}))``:

* ``analysis="add"``, Theorem 3.3 (add the deltas, spec §4.4)::

      δ = BW(½·√(k + √k), σ, ε) + 1 − Φ(x_C)^{k+1}

* ``analysis="tight"``, Theorem 3.5 (spec §4.6), with ``γ(j) = min(√j, ½·√(j + √k))`` and
  ``ln ψ(m) = (m + 1)·ln Φ(x_C)``::

      δ = max( T1 = 1 − ψ(k),  T2 = BW(½·√(k+√k), σ, ε),
               T3 = max_{1≤j<k} 1 − ψ(k−j) + BW(γ(j), σ, ε),
               T4 = max_{1≤j<k} BW(γ(j), σ, ε + ln ψ(k−j)) )

  evaluated over all j (never assuming the maximiser is an endpoint), vectorised and chunked.

* Top-k de-biasing variant (spec §3.3, "De-biasing variant"): releasing also ``t̃ = H^{(k+1)} + N(0, σ²/√k)``
  replaces ``½·√(k+√k)`` by ``½·√(k+5√k)`` in the Gaussian part of Theorem 3.3 (``debias=True``; the
  paper gives no Theorem 3.5 analogue, so only ``analysis="add"`` is offered).

* Discrete CSH, Theorem 7.7 (spec §3.6): Algorithm 4 (``Z_i ~ N_Z(0, 4σ²)``, ``Z_corr ~ N_Z(0, 4σ²/√k)``,
  release ``H_i + (Z_i + Z_corr)/2`` if ``> 1 + τ``) is (ε, δ_gauss + δ_inf)-DP where δ_gauss is the
  (ε, δ) conversion of ρ-zCDP, ``ρ = Σ 1/(2 s_i)`` over the k + 1 embedded coordinates (= (k+√k)/(8σ²),
  Lemma 7.5), by Bun–Steinke (Lemma 7.3) or Canonne–Kamath–Steinke, and δ_inf is the exact
  discrete-Gaussian probability of Lemma 7.6.

* Rounded CSH (the secure default; ``docs/proofs/rounded-csh.md``): release ``round(y_i)`` for the keys with
  continuous output ``y_i = H_i + Z_i + Z_corr > pre + m − ½`` (integer margin ``m``). This is a
  post-processing of Algorithm 2/3 run with margin ``τ = m − ½``, so Theorems 3.3/3.5 (and the de-biasing
  variant) apply verbatim at that τ; with ``X_i = round(Z_i + Z_corr)`` the rule is ``H_i + X_i >= pre + m``,
  and the integers are sampled exactly (:mod:`sparsedp.noise.rounded`).

Lemma 3.4 of the paper prints ``Φ⁻¹((1 − δ − δ_gauss)^{1/(k+1)})`` for the add-the-deltas threshold: that
sign is wrong and anti-conservative (erratum E3, spec §4.5/§7). :func:`csh_tau` uses the corrected
``Φ⁻¹((1 − (δ − δ_gauss))^{1/(k+1)})`` and checks the result with the full accountant.

Numerics follow spec §4.10: ``1 − Φ(x)^m = −expm1(m·log_ndtr(x))``, inverse tails with ``ndtri`` of the
small tail, ``e^ε Φ(·)`` in log space. Every rounding errs toward more privacy.
"""

from __future__ import annotations

import functools
import math
from typing import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from ._special import special

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from ._invert import smallest_ok
from ._types import FloatArray
from .gaussian import _delta_core, gaussian_sigma
from .discrete import dgauss_logsf, dgauss_variance
from .zcdp import zcdp_to_dp_delta

__all__ = [
    "csh_delta", "csh_delta_parts", "csh_sigma_star", "csh_tau", "csh_sigma", "csh_epsilon",
    "csh_calibrate", "csh_noise_std",
    "csh_discrete_scales", "csh_discrete_delta", "csh_discrete_delta_parts", "csh_discrete_tau",
    "csh_discrete_calibrate", "csh_discrete_noise_std",
    "csh_rounded_margin", "csh_rounded_delta", "csh_rounded_delta_parts", "csh_rounded_calibrate",
    "csh_rounded_noise_std",
]

_ANALYSES = ("tight", "add")
_CONVERSIONS = ("cks", "bs")
#: j-values processed per vectorised block in the O(k) maxima (bounds memory for k >= 1e7).
_CHUNK = 1 << 19


# ------------------------------------------------------------------ helpers


def _bw(mu: npt.ArrayLike, eps: npt.ArrayLike) -> FloatArray:
    """BW as a function of μ = Δ/σ (> 0) and any real ε; arrays broadcast (Balle–Wang, :mod:`.gaussian`)."""
    mu_b, eps_b = np.broadcast_arrays(np.asarray(mu, dtype=float), np.asarray(eps, dtype=float))
    return _delta_core(np.atleast_1d(mu_b), np.atleast_1d(eps_b))


def _bw1(mu: float, eps: float) -> float:
    """Scalar BW(μ, ε)."""
    return float(_bw(mu, eps)[0])


def _gauss_sensitivity(k: int, debias: bool) -> float:
    """Effective ℓ2 sensitivity of the Gaussian part: ½√(k+√k) (Thm 3.3/3.5), ½√(k+5√k) (de-biased top-k)."""
    rk = math.sqrt(k)
    return 0.5 * math.sqrt(k + (5.0 if debias else 1.0) * rk)


def _one_minus_pow_phi(x: float, m: float) -> float:
    """1 − Φ(x)^m without cancellation."""
    return float(-math.expm1(m * float(special.log_ndtr(x))))


def _tail_quantile(budget: float, m: int) -> float:
    """x with 1 − Φ(x)^m = budget, i.e. Φ⁻¹((1 − budget)^{1/m}), by the small tail (spec §4.5)."""
    p_tail = -math.expm1(math.log1p(-budget) / m)
    return float(-special.ndtri(p_tail))


def _check_args(epsilon: float, sigma: float, tau: float, k: int) -> tuple[float, float, float, int]:
    return (v.nonnegative("epsilon", epsilon), v.positive("sigma", sigma), v.positive("tau", tau),
            v.integer("k", k, lo=1))


def _check_analysis(analysis: str, debias: bool) -> str:
    analysis = v.choice("analysis", analysis, _ANALYSES)
    if not isinstance(debias, bool):
        raise InvalidTypeError(f"debias must be a bool, got {type(debias).__name__} {debias!r}")
    if debias and analysis != "add":
        raise InvalidParameterError(
            "debias=True (top-k de-biasing variant) is only analysed with analysis='add' "
            "(Lebeda & Retschmeier (2024) §4: the paper states it for Theorem 3.3 only); got analysis='tight'")
    return analysis


def _tight_terms(eps: float, sigma: float, tau: float, k: int) -> tuple[float, float, float, float]:
    """(T1, T2, T3, T4) of Theorem 3.5; T3 = T4 = 0 when k = 1 (the index set [k−1] is empty)."""
    x = tau / (sigma * (1.0 + k ** -0.25))
    lp = float(special.log_ndtr(x))
    t1 = float(-math.expm1((k + 1) * lp))
    t2 = _bw1(_gauss_sensitivity(k, False) / sigma, eps)
    t3 = t4 = 0.0
    rk = math.sqrt(k)
    for start in range(1, k, _CHUNK):
        j = np.arange(start, min(k, start + _CHUNK), dtype=float)
        mu = np.minimum(np.sqrt(j), 0.5 * np.sqrt(j + rk)) / sigma  # γ(j)/σ
        lpsi = (k - j + 1.0) * lp  # ln ψ(k − j) <= 0
        t3 = max(t3, float(np.max(-np.expm1(lpsi) + _bw(mu, eps))))
        t4 = max(t4, float(np.max(_bw(mu, eps + lpsi))))
    return t1, t2, t3, t4


def _parts(eps: float, sigma: float, tau: float, k: int, analysis: str, debias: bool) -> dict[str, float]:
    if analysis == "add":
        x = tau / (sigma * (1.0 + k ** -0.25))
        return {"gaussian": _bw1(_gauss_sensitivity(k, debias) / sigma, eps),
                "threshold": _one_minus_pow_phi(x, k + 1)}
    t1, t2, t3, t4 = _tight_terms(eps, sigma, tau, k)
    return {"T1": t1, "T2": t2, "T3": t3, "T4": t4}


def _total(parts: dict[str, float], analysis: str) -> float:
    return min(1.0, sum(parts.values()) if analysis == "add" else max(parts.values()))


def _nudge_up(ok: Callable[[float], bool], x: float) -> float:
    """First of x, x(1+1e-15), x(1+2e-15), x(1+4e-15), … with ok(·) True (absorbs floating-point misses)."""
    step = 1e-15
    y = x
    for _ in range(64):
        if ok(y):
            return y
        y = x * (1.0 + step)
        step *= 2.0
    raise InfeasibleError("internal: could not satisfy the privacy constraint after rounding up")  # pragma: no cover


# ------------------------------------------------------------------ continuous CSH: δ


def csh_delta_parts(epsilon: float, sigma: float, tau: float, k: int, analysis: str = "tight", *,
                    debias: bool = False) -> dict[str, float]:
    """The named parts of CSH's δ (Lebeda & Retschmeier (2024) Thm 3.3 / Thm 3.5).

    ``analysis="add"`` → ``{"gaussian": BW(½√(k+√k), σ, ε), "threshold": 1 − Φ(x_C)^{k+1}}`` (Thm 3.3;
    with ``debias=True`` the Gaussian part uses ½√(k+5√k), top-k de-biasing variant of §4).
    ``analysis="tight"`` → ``{"T1", "T2", "T3", "T4"}`` of Thm 3.5 (δ is their maximum).
    """
    eps, sigma, tau, k = _check_args(epsilon, sigma, tau, k)
    analysis = _check_analysis(analysis, debias)
    return _parts(eps, sigma, tau, k, analysis, debias)


def csh_delta(epsilon: float, sigma: float, tau: float, k: int, analysis: str = "tight", *,
              debias: bool = False) -> float:
    """δ(ε) of CSH (Algorithm 2 of Lebeda & Retschmeier (2024)) with independent std ``sigma``, margin ``tau``, sparsity ``k``.

    ``analysis="tight"``: Theorem 3.5 (max of its four terms, O(k), chunked). ``analysis="add"``:
    Theorem 3.3 (δ_gauss + δ_inf, clipped to 1). ``debias=True`` (add only): the top-k de-biasing variant
    (Lebeda & Retschmeier (2024) §4, δ_gauss with ½√(k+5√k)). Valid only for k-sparse monotonic histograms (Def. 3.1),
    add/remove neighbours. See the module docstring for the formulas.
    """
    eps, sigma, tau, k = _check_args(epsilon, sigma, tau, k)
    analysis = _check_analysis(analysis, debias)
    return _total(_parts(eps, sigma, tau, k, analysis, debias), analysis)


def csh_noise_std(sigma: float, k: int) -> float:
    """Standard deviation of each released CSH count: σ·√(1 + 1/√k) (Lebeda & Retschmeier (2024) §3.2)."""
    sigma = v.positive("sigma", sigma)
    k = v.integer("k", k, lo=1)
    return sigma * math.sqrt(1.0 + 1.0 / math.sqrt(k))


# ------------------------------------------------------------------ continuous CSH: inversions


def csh_sigma_star(epsilon: float, delta: float, k: int, *, debias: bool = False) -> float:
    """σ*: the smallest σ whose Gaussian part alone meets δ, BW(Δ_eff, σ, ε) <= δ (Lebeda & Retschmeier (2024) §4.9(b)1).

    Δ_eff = ½√(k+√k) (½√(k+5√k) with ``debias``). Every CSH calibration needs σ >= σ* (tight) or σ > σ*
    (add). Identity: σ*_CSH / σ*_GSHM = ½√(1 + k^{-1/2}).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("k", k, lo=1)
    return gaussian_sigma(eps, dlt, _gauss_sensitivity(k, debias))


def _tau_min(eps: float, dlt: float, sigma: float, k: int, analysis: str, debias: bool) -> tuple[float, bool]:
    """(smallest margin τ with δ <= dlt at σ, whether the closed form from the threshold term was exact)."""
    g = _bw1(_gauss_sensitivity(k, debias) / sigma, eps)
    scale = sigma * (1.0 + k ** -0.25)
    if g > dlt or (analysis == "add" and g >= dlt):
        s_star = gaussian_sigma(eps, dlt, _gauss_sensitivity(k, debias))
        raise InfeasibleError(
            f"sigma={sigma:g} is too small for (epsilon={eps:g}, delta={dlt:g}) with k={k}: the Gaussian "
            f"part alone is {g:.4g} > delta at any threshold; use sigma {'>' if analysis == 'add' else '>='} "
            f"{s_star:.6g} (or raise epsilon/delta)")

    def ok(t: float) -> bool:
        return _total(_parts(eps, sigma, t, k, analysis, debias), analysis) <= dlt

    if analysis == "add":  # corrected Lemma 3.4 (erratum E3)
        # (margins are positive: a non-positive closed form, possible only for δ near 1, is raised to a tiny τ)
        return _nudge_up(ok, max(scale * _tail_quantile(dlt - g, k + 1), 1e-12 * sigma)), True
    t_lo = max(scale * _tail_quantile(dlt, k + 1), 1e-12 * sigma)  # T1 <= δ is necessary
    if ok(t_lo):
        return t_lo, True
    if ok(t_lo * (1.0 + 1e-12)):
        return _nudge_up(ok, t_lo), True
    hi = scale * _tail_quantile(dlt - g, k + 1) if g < dlt else 2.0 * t_lo  # tight <= add
    return smallest_ok(ok, t_lo, max(hi, 2.0 * t_lo), what="threshold margin tau"), False


def csh_tau(epsilon: float, delta: float, sigma: float, k: int, analysis: str = "tight", *,
            debias: bool = False) -> float:
    """Smallest margin τ such that CSH with std ``sigma`` is (ε, δ)-DP (Lebeda & Retschmeier (2024) §4.9(a)).

    ``add``: the corrected closed form of Lemma 3.4 (erratum E3),
    ``τ = σ(1+k^{-1/4})·Φ⁻¹((1 − (δ − δ_gauss))^{1/(k+1)})``. ``tight``: the T1 line
    ``σ(1+k^{-1/4})·Φ⁻¹((1−δ)^{1/(k+1)})`` when the full Theorem 3.5 accountant accepts it, else bisection.
    The result always satisfies ``csh_delta(...) <= delta`` in floating point.
    Raises :class:`InfeasibleError` if σ is below σ* (:func:`csh_sigma_star`).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    sigma = v.positive("sigma", sigma)
    k = v.integer("k", k, lo=1)
    analysis = _check_analysis(analysis, debias)
    return _tau_min(eps, dlt, sigma, k, analysis, debias)[0]


def _minimise_tau_over_sigma(tau_of_sigma: Callable[[float], float], s_lo: float, s_hi: float, n: int = 161) -> float:
    """argmin of a unimodal-looking τ_min(σ) on (s_lo, s_hi]: log grid, then bounded Brent around the best."""
    grid = np.geomspace(s_lo, s_hi, n)
    vals = np.array([tau_of_sigma(s) for s in grid])
    i = int(np.argmin(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    if b <= a:
        return float(grid[i])
    from scipy import optimize  # imported on use: scipy.optimize costs 0.3–1 s of start-up
    res = optimize.minimize_scalar(tau_of_sigma, bounds=(a, b), method="bounded",
                                   options={"xatol": 1e-10 * b})
    return float(res.x) if res.fun <= vals[i] else float(grid[i])


def csh_calibrate(epsilon: float, delta: float, k: int, analysis: str = "tight", *,
                  debias: bool = False) -> tuple[float, float]:
    """Joint calibration (σ, τ) minimising the margin τ at (ε, δ) (Lebeda & Retschmeier (2024) §4.9(b)).

    ``tight``: σ = σ*(1+1e-9); when the threshold term T1 is what binds there (always observed), this is
    provably optimal, since for σ > σ* the margin is at least the T1 line, which increases in σ. Otherwise a
    one-dimensional search as for ``add``. ``add``: τ_min(σ) (corrected Lemma 3.4) → ∞ as σ → σ*⁺; it is
    minimised over σ ∈ (σ*, 4σ*] by a log grid and bounded Brent. Returns ``(sigma, tau)``; τ is checked
    with the full accountant.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("k", k, lo=1)
    analysis = _check_analysis(analysis, debias)
    s_star = gaussian_sigma(eps, dlt, _gauss_sensitivity(k, debias))
    if analysis == "tight":
        sigma = s_star * (1.0 + 1e-9)
        tau, closed = _tau_min(eps, dlt, sigma, k, analysis, debias)
        if closed:
            return sigma, tau

    def tau_at(s: float) -> float:
        if analysis == "add":  # O(1) closed form for the search; verified below
            g = _bw1(_gauss_sensitivity(k, debias) / s, eps)
            if g >= dlt:
                return math.inf
            k_quarter: float = k ** -0.25  # a float (typeshed types a real power as Any: it may be complex)
            return s * (1.0 + k_quarter) * _tail_quantile(dlt - g, k + 1)
        try:
            return _tau_min(eps, dlt, s, k, analysis, debias)[0]
        except InfeasibleError:
            return math.inf

    sigma = _minimise_tau_over_sigma(tau_at, s_star * (1.0 + 1e-6), 4.0 * s_star)
    return sigma, _tau_min(eps, dlt, sigma, k, analysis, debias)[0]


def csh_sigma(epsilon: float, delta: float, tau: float, k: int, analysis: str = "tight", *,
              debias: bool = False) -> float:
    """Smallest σ such that CSH with margin ``tau`` is (ε, δ)-DP (Lebeda & Retschmeier (2024) §4.9; not in the paper).

    δ is not monotone in σ at fixed τ (the Gaussian part falls, the threshold part rises), so the search
    runs on [σ*, σ_opt], where σ_opt minimises the margin (:func:`csh_calibrate`) and τ_min(σ) decreases.
    Raises :class:`InfeasibleError` when ``tau`` is below the smallest margin reachable at any σ.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    tau = v.positive("tau", tau)
    k = v.integer("k", k, lo=1)
    analysis = _check_analysis(analysis, debias)
    s_opt, t_opt = csh_calibrate(eps, dlt, k, analysis, debias=debias)
    if tau < t_opt:
        raise InfeasibleError(
            f"tau={tau:g} is below the smallest margin {t_opt:.6g} that CSH ({analysis}) reaches at any sigma "
            f"for (epsilon={eps:g}, delta={dlt:g}, k={k}); raise tau, epsilon or delta")
    s_star = gaussian_sigma(eps, dlt, _gauss_sensitivity(k, debias))

    def ok(s: float) -> bool:
        parts = _parts(eps, s, tau, k, analysis, debias)
        return _total(parts, analysis) <= dlt

    if s_opt <= s_star:
        return s_opt
    return smallest_ok(ok, s_star, s_opt, what="sigma")


def csh_epsilon(sigma: float, tau: float, delta: float, k: int, analysis: str = "tight", *,
                debias: bool = False) -> float:
    """Smallest ε such that CSH with (σ, τ) is (ε, δ)-DP (Lebeda & Retschmeier (2024) Thm 3.3/3.5; δ is non-increasing in ε).

    The threshold term does not depend on ε, so it must fit on its own: 1 − Φ(x_C)^{k+1} < δ (add) or
    <= δ (tight); otherwise :class:`InfeasibleError`.
    """
    sigma = v.positive("sigma", sigma)
    tau = v.positive("tau", tau)
    dlt = v.delta(delta)
    k = v.integer("k", k, lo=1)
    analysis = _check_analysis(analysis, debias)
    t1 = _one_minus_pow_phi(tau / (sigma * (1.0 + k ** -0.25)), k + 1)
    if t1 > dlt or (analysis == "add" and t1 >= dlt):
        raise InfeasibleError(
            f"the threshold part 1 - Phi(x)^(k+1) = {t1:.4g} already exceeds delta={dlt:g} at sigma={sigma:g}, "
            f"tau={tau:g}, k={k}; no epsilon works: raise tau or lower sigma")

    def ok(e: float) -> bool:
        return _total(_parts(e, sigma, tau, k, analysis, debias), analysis) <= dlt

    return smallest_ok(ok, 1e-9, 1.0, rel_tol=1e-10, max_hi=1e6, what="epsilon")


# ------------------------------------------------------------------ discrete CSH (Theorem 7.7)


def csh_discrete_scales(sigma: float, k: int) -> tuple[Fraction, Fraction]:
    """The discrete-Gaussian scales (s_ind, s_corr) Algorithm 4 samples with: 4σ² and 4σ²/√k.

    Both are returned as the exact rationals of the double-precision values; the accountant
    (:func:`csh_discrete_delta`) evaluates δ at exactly these scales, so a mechanism that samples
    ``N_Z(0, s_ind)`` and ``N_Z(0, s_corr)`` gets the δ that is reported (spec §3.6 "[beyond] Sampling").
    """
    sigma = v.positive("sigma", sigma)
    k = v.integer("k", k, lo=1)
    s_ind = 4.0 * sigma * sigma
    return Fraction(s_ind), Fraction(s_ind / math.sqrt(k))


def _discrete_parts(eps: float, sigma: float, tau: float, k: int, conversion: str) -> dict[str, float]:
    s_ind, s_corr = (float(s) for s in csh_discrete_scales(sigma, k))
    rho = 0.5 * (k / s_ind + 1.0 / s_corr)  # Lemma 7.5: each of the k+1 embedded coordinates moves by 1
    gauss = float(zcdp_to_dp_delta(rho, eps, conversion=conversion))
    # Lemma 7.6 with the paper's split of 2τ, proportional to the standard deviations
    # (= 2τ k^{-1/4}/(k^{-1/4}+1) for Z_corr and 2τ/(k^{-1/4}+1) for each Z_i at the nominal scales).
    r = math.sqrt(s_corr / s_ind)
    a_corr = math.floor(2.0 * tau * r / (1.0 + r))
    a_ind = min(math.floor(2.0 * tau / (1.0 + r)), math.floor(2.0 * tau) - a_corr)  # guard: a_corr + a_ind <= 2τ
    log_p_corr = math.log1p(-math.exp(dgauss_logsf(a_corr + 1, s_corr)))  # log P[Z_corr <= a_corr]
    log_p_ind = math.log1p(-math.exp(dgauss_logsf(a_ind + 1, s_ind)))  # log P[Z_i <= a_ind]
    inf = float(-math.expm1(log_p_corr + k * log_p_ind))
    return {"gaussian": gauss, "threshold": inf}


def _check_conversion(conversion: str) -> str:
    return v.choice("conversion", conversion, _CONVERSIONS)


def csh_discrete_delta_parts(epsilon: float, sigma: float, tau: float, k: int, conversion: str = "cks") -> dict[str,
                             float]:
    """``{"gaussian": δ_gauss, "threshold": δ_inf}`` of discrete CSH (Lebeda & Retschmeier (2024) Thm 7.7, Lemmas 7.5/7.6).

    δ_gauss converts ρ = k/(2 s_ind) + 1/(2 s_corr) (= (k+√k)/(8σ²)) zCDP to (ε, δ) by ``conversion``
    ("cks": Canonne–Kamath–Steinke, tighter; "bs": Bun–Steinke, the paper's Lemma 7.3). δ_inf is
    ``1 − P[Z_corr <= ⌊2τ r/(1+r)⌋]·P[Z <= ⌊2τ/(1+r)⌋]^k`` with r = √(s_corr/s_ind) = k^{-1/4}, computed
    exactly from the discrete-Gaussian law (:mod:`sparsedp.accounting.discrete`). Release test: a count is
    kept iff ``H_i + (Z_i + Z_corr)/2 > 1 + τ`` (strict).
    """
    eps, sigma, tau, k = _check_args(epsilon, sigma, tau, k)
    conversion = _check_conversion(conversion)
    return _discrete_parts(eps, sigma, tau, k, conversion)


def csh_discrete_delta(epsilon: float, sigma: float, tau: float, k: int, conversion: str = "cks") -> float:
    """δ(ε) of discrete CSH (Lebeda & Retschmeier (2024) Thm 7.7): δ_gauss + δ_inf (clipped to 1); see
    :func:`csh_discrete_delta_parts`."""
    return min(1.0, sum(csh_discrete_delta_parts(epsilon, sigma, tau, k, conversion).values()))


def csh_discrete_noise_std(sigma: float, k: int) -> float:
    """Standard deviation of (Z_i + Z_corr)/2, the noise on each released count of discrete CSH (Lebeda & Retschmeier (2024)
    Algorithm 4), from the exact discrete-Gaussian variances (:func:`.discrete.dgauss_variance`)."""
    s_ind, s_corr = csh_discrete_scales(sigma, k)
    return 0.5 * math.sqrt(dgauss_variance(float(s_ind)) + dgauss_variance(float(s_corr)))


def _discrete_sigma_star(eps: float, dlt: float, k: int, conversion: str) -> float:
    def ok(s: float) -> bool:
        s_ind, s_corr = (float(x) for x in csh_discrete_scales(s, k))
        return float(zcdp_to_dp_delta(0.5 * (k / s_ind + 1.0 / s_corr), eps, conversion=conversion)) < dlt

    guess = gaussian_sigma(eps, dlt, _gauss_sensitivity(k, False))
    return smallest_ok(ok, guess * 0.5, guess, what="sigma")


def _discrete_tau_min(eps: float, dlt: float, sigma: float, k: int, conversion: str) -> float:
    gauss = _discrete_parts(eps, sigma, 1.0, k, conversion)["gaussian"]
    if gauss >= dlt:
        raise InfeasibleError(
            f"sigma={sigma:g} is too small for discrete CSH at (epsilon={eps:g}, delta={dlt:g}), k={k}: the "
            f"zCDP part alone gives delta {gauss:.4g}; raise sigma (or epsilon/delta)")

    def ok(t: float) -> bool:
        return sum(_discrete_parts(eps, sigma, t, k, conversion).values()) <= dlt

    # δ_inf is a step function of τ; bisection returns a point just after the step (spec §4.10 item 7).
    start = sigma * (1.0 + k ** -0.25) * _tail_quantile(dlt - gauss, k + 1)
    return smallest_ok(ok, max(start * 0.5, 1e-6), max(start, 1.0), rel_tol=1e-10, what="threshold margin tau")


def csh_discrete_tau(epsilon: float, delta: float, sigma: float, k: int, conversion: str = "cks") -> float:
    """Smallest margin τ making discrete CSH (Lebeda & Retschmeier (2024) Thm 7.7) (ε, δ)-DP at parameter σ."""
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    sigma = v.positive("sigma", sigma)
    k = v.integer("k", k, lo=1)
    conversion = _check_conversion(conversion)
    return _discrete_tau_min(eps, dlt, sigma, k, conversion)


def csh_discrete_calibrate(epsilon: float, delta: float, k: int, conversion: str = "cks") -> tuple[float, float]:
    """(σ, τ) minimising the margin of discrete CSH (Lebeda & Retschmeier (2024) Thm 7.7; spec §5.4 gives reference optima).

    Searches σ above the smallest σ whose zCDP part fits (log grid, then bounded Brent; τ_min(σ) is a
    step-like function, so the optimum is accurate to the grid's resolution, far below 0.1%).
    """
    return _csh_discrete_calibrate(v.epsilon(epsilon), v.delta(delta), v.integer("k", k, lo=1),
                                   _check_conversion(conversion))


@functools.lru_cache(maxsize=256)
def _csh_discrete_calibrate(eps: float, dlt: float, k: int, conversion: str) -> tuple[float, float]:
    """:func:`csh_discrete_calibrate` on validated arguments, cached (a pure function of them: repeated releases
    and plans at one (ε, δ, k) search once)."""
    s_lo = _discrete_sigma_star(eps, dlt, k, conversion)

    def tau_at(s: float) -> float:
        try:
            return _discrete_tau_min(eps, dlt, s, k, conversion)
        except InfeasibleError:
            return math.inf

    sigma = _minimise_tau_over_sigma(tau_at, s_lo * (1.0 + 1e-6), 3.0 * s_lo, n=41)
    return sigma, _discrete_tau_min(eps, dlt, sigma, k, conversion)


# ------------------------------------------------------------------ rounded CSH (post-processing of Alg. 2/3)


def csh_rounded_margin(tau: float) -> int:
    """The integer margin ``m`` of rounded CSH for a continuous margin τ: the smallest m with ``m − ½ >= τ``.

    The release rule ``H_i + round(Z_i + Z_corr) >= pre + m`` equals ``H_i + Z_i + Z_corr > pre + m − ½``
    (up to a null event), i.e. Algorithm 2 with margin ``m − ½ >= τ``; δ of Thms 3.3/3.5 is non-increasing
    in τ, so the guarantee at τ carries over (docs/proofs/rounded-csh.md).
    """
    tau = v.positive("tau", tau)
    m = math.ceil(tau + 0.5)
    while m - 0.5 < tau:  # float guard (τ + ½ may round down)
        m += 1
    return int(m)


def csh_rounded_delta_parts(epsilon: float, sigma: float, margin: int, k: int, analysis: str = "tight", *,
                            debias: bool = False) -> dict[str, float]:
    """δ parts of rounded CSH with integer ``margin``: :func:`csh_delta_parts` at τ = margin − ½
    (post-processing of Algorithm 2/3; docs/proofs/rounded-csh.md)."""
    m = v.integer("margin", margin, lo=1)
    return csh_delta_parts(epsilon, sigma, m - 0.5, k, analysis, debias=debias)


def csh_rounded_delta(epsilon: float, sigma: float, margin: int, k: int, analysis: str = "tight", *,
                      debias: bool = False) -> float:
    """δ(ε) of rounded CSH with integer ``margin``: :func:`csh_delta` (Thm 3.5 / 3.3, Lebeda & Retschmeier (2024)) at
    τ = margin − ½; the rounding of released values is post-processing (docs/proofs/rounded-csh.md)."""
    m = v.integer("margin", margin, lo=1)
    return csh_delta(epsilon, sigma, m - 0.5, k, analysis, debias=debias)


def csh_rounded_calibrate(epsilon: float, delta: float, k: int, analysis: str = "tight", *,
                          debias: bool = False) -> tuple[float, int]:
    """``(sigma, margin)`` of rounded CSH: the continuous calibration (:func:`csh_calibrate`), then the
    integer margin ``m = csh_rounded_margin(τ)``; δ at τ = m − ½ is re-checked with the full accountant."""
    sigma, tau = csh_calibrate(epsilon, delta, k, analysis, debias=debias)
    m = csh_rounded_margin(tau)
    if not csh_rounded_delta(epsilon, sigma, m, k, analysis, debias=debias) <= v.delta(delta):
        raise InfeasibleError("internal: rounded CSH margin failed its re-check")  # pragma: no cover
    return sigma, m


def csh_rounded_noise_std(sigma: float, k: int) -> float:
    """Standard deviation of ``round(Z_i + Z_corr)`` (the noise on a released rounded-CSH count).

    ``Var(round(Y)) = Var(Y) + 1/12`` up to ``O(e^{−2π² Var(Y)})`` for a Gaussian Y (Sheppard's correction;
    the rounding error is asymptotically uniform on (−½, ½] and uncorrelated with Y), ``Var(Y) =
    σ²(1 + 1/√k)``; the neglected term is below 1e-8 for ``Var(Y) >= 1``.
    """
    s = csh_noise_std(sigma, k)
    return math.sqrt(s * s + 1.0 / 12.0)
